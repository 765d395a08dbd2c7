//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/testpki"
)

// BenchmarkServe measures `custodian serve` against the same upstream
// reached directly, in one run, and prints the ratios:
//
//   - requests/s with keep-alive (one client, one connection, sequential)
//     for a POST of 1 KiB and of 1 MiB answered with the same bytes — the
//     answer streamed through the scrubber;
//   - the latency of those requests, p50 and p99, and what serve adds;
//   - the first SSE event's delay: from sending the request to reading the
//     first event of a stream whose second event follows 1 ms later.
//
// Both paths are Go clients in this process; the Custodian is the built
// binary as a process, rendered by controlplane with the upstream on
// 127.0.0.1 (--allow-local-targets: a measurement on one machine). Run it
// with make bench-serve.
func BenchmarkServe(b *testing.B) {
	p := newBenchPod(b)
	type result struct{ rps, p50, p99 float64 } // p50, p99 in µs
	results := map[string]result{}
	failed := map[string]bool{}
	measure := func(name string, c *http.Client, op func(*http.Client) (time.Duration, error)) {
		failed[name] = !b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, err := op(c)
				if err != nil {
					b.Fatalf("%v\nthe Custodian printed:\n%s", err, p.run.out.String())
				}
				lat = append(lat, d)
			}
			b.StopTimer()
			r := result{rps: float64(b.N) / b.Elapsed().Seconds(), p50: percentile(lat, 50), p99: percentile(lat, 99)}
			b.ReportMetric(r.rps, "req/s")
			b.ReportMetric(r.p50, "p50-µs")
			b.ReportMetric(r.p99, "p99-µs")
			results[name] = r
		})
	}
	sizes := []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}}
	paths := []struct {
		name   string
		client *http.Client
		key    string
	}{{"direct", p.direct, p.value}, {"serve", p.through, standIn(benchKey)}}
	for _, s := range sizes {
		body := printable(s.n)
		for _, path := range paths {
			measure(s.name+"/"+path.name, path.client, func(c *http.Client) (time.Duration, error) {
				return p.post(c, path.key, body)
			})
		}
	}
	for _, path := range paths {
		measure("sse-first-event/"+path.name, path.client, func(c *http.Client) (time.Duration, error) {
			return p.firstEvent(c, path.key)
		})
	}

	// The table: every row compares serve to direct from this one run.
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "custodian serve vs direct\tdirect\tserve\tserve/direct\tadded\t")
	// A cell of a run that failed reads "failed" (its error is above).
	cell := func(v float64, unit string) string {
		if v == 0 {
			return "failed"
		}
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	row := func(label string, d, s float64, unit string, added bool) {
		ratio, a := "-", ""
		if d != 0 && s != 0 {
			ratio = fmt.Sprintf("%.2f", s/d)
			if added {
				a = fmt.Sprintf("%+.0f %s", s-d, unit)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", label, cell(d, unit), cell(s, unit), ratio, a)
	}
	for name := range failed {
		if failed[name] {
			results[name] = result{} // a failed run measured nothing
		}
	}
	for _, s := range sizes {
		d, sv := results[s.name+"/direct"], results[s.name+"/serve"]
		row("requests/s, keep-alive, "+s.name, d.rps, sv.rps, "req/s", false)
		row("latency p50, "+s.name, d.p50, sv.p50, "µs", true)
		row("latency p99, "+s.name, d.p99, sv.p99, "µs", true)
	}
	d, sv := results["sse-first-event/direct"], results["sse-first-event/serve"]
	row("first SSE event p50", d.p50, sv.p50, "µs", true)
	row("first SSE event p99", d.p99, sv.p99, "µs", true)
	fmt.Println()
	tw.Flush()
	fmt.Println()
}

const benchKey = "BENCH_KEY"

// benchPod is a rendered pod with one bound upstream and custodian serve
// running on it, and a client for each path.
type benchPod struct {
	target          string
	value           string
	direct, through *http.Client
	run             *Running
}

func newBenchPod(b *testing.B) *benchPod {
	tmp := b.TempDir()
	ca := testpki.NewCA(b, "bench upstream CA")
	p := &benchPod{value: sentinel(b, benchKey)}
	p.target = serveTLS(b, ca, "127.0.0.1", http.HandlerFunc(benchUpstream))

	values := filepath.Join(tmp, "values")
	mustMkdir(b, values)
	mustWrite(b, filepath.Join(values, benchKey), p.value+"\n", 0o600)
	mustWrite(b, filepath.Join(values, filter.TokenName), sentinel(b, filter.TokenName)+"\n", 0o600)
	m, _ := json.Marshal(manifest{Pod: "bench", Orchestrator: "127.0.0.1:9", Secrets: []manifestSecret{
		{Name: benchKey, Hosts: []string{p.target}, Headers: []string{"x-api-key"}},
	}})
	mustWrite(b, filepath.Join(tmp, "held.json"), string(m), 0o644)
	ca.WriteFile(b, tmp, "upstream-ca.pem")
	runTool(b, bins.controlplane, "ca", "init", "--dir", filepath.Join(tmp, "ca"))
	dir := filepath.Join(tmp, "pod")
	runTool(b, bins.controlplane, "render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", filepath.Join(tmp, "ca"),
		"--out", dir, "--ca-bundle", filepath.Join(tmp, "upstream-ca.pem"), "--values-dir", values, "--allow-local-targets")
	run := serveHost{}.Start(b, dir, "")
	p.run = run

	extra, err := os.ReadFile(filepath.Join(dir, "ca", "extra.crt"))
	if err != nil {
		b.Fatal(err)
	}
	jr2 := x509.NewCertPool()
	jr2.AppendCertsFromPEM(extra)
	proxy, _ := url.Parse("http://" + run.Egress)
	p.direct = benchClient(nil, ca.Pool())
	p.through = benchClient(http.ProxyURL(proxy), jr2)
	return p
}

func benchClient(proxy func(*http.Request) (*url.URL, error), roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               proxy,
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}}
}

// benchUpstream answers POST with the body it got, and GET /v1/sse with two
// events 1 ms apart.
func benchUpstream(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/sse" {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(time.Millisecond)
		io.WriteString(w, "data: last\n\n")
		return
	}
	// HTTP/1 in Go is not full duplex: read the whole body, then answer.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(body)
}

// post sends body and reads the whole answer, which must be body.
func (p *benchPod) post(c *http.Client, key string, body []byte) (time.Duration, error) {
	req, _ := http.NewRequest("POST", "https://"+p.target+"/v1/echo", bytes.NewReader(body))
	req.Header.Set("x-api-key", key)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
		return 0, fmt.Errorf("POST %d bytes: %d, %d bytes back, %v", len(body), resp.StatusCode, len(got), err)
	}
	return d, nil
}

// firstEvent times a stream's first event, then drains the stream so the
// connection is kept.
func (p *benchPod) firstEvent(c *http.Client, key string) (time.Duration, error) {
	req, _ := http.NewRequest("GET", "https://"+p.target+"/v1/sse", nil)
	req.Header.Set("x-api-key", key)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	d := time.Since(start)
	if err != nil || line != "data: first\n" {
		return 0, fmt.Errorf("first event %q: %v", line, err)
	}
	io.Copy(io.Discard, resp.Body)
	return d, nil
}

// percentile is the q-th percentile of ds in µs.
func percentile(ds []time.Duration, q int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*q + 99) / 100
	if i > 0 {
		i--
	}
	return float64(s[i]) / float64(time.Microsecond)
}

// printable is n random printable bytes, lines of 64: text the scrubber
// reads as it would a model's answer.
func printable(n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;-_/+="
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i%65 == 64 {
			b.WriteByte('\n')
			continue
		}
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return []byte(b.String())
}
