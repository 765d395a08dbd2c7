package mediator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/broker"
	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/testpki"
)

// benchClients is how many clients send at once in BenchmarkHTTPS.
const benchClients = 8

// benchBody is the upstream's answer: a small JSON-sized body.
var benchBody = []byte(strings.Repeat("x", 1024))

// stats are the measurements of one setup's last run.
type stats struct {
	reqs    int
	elapsed time.Duration
	lat     []time.Duration
}

func (s stats) rate() float64 { return float64(s.reqs) / s.elapsed.Seconds() }

func (s stats) pct(p float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), s.lat...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[int(p*float64(len(l)-1))]
}

// BenchmarkHTTPS measures HTTPS requests to one local upstream (a
// keep-alive HTTP/1.1 server under a test CA, 1 KiB answers), sent by 8
// clients at once: directly, through the mediator's explicit proxy (TLS
// ended with the run CA, the stand-in swapped by the engine, the answer
// scrubbed, every record written to a bundle file), and through mitmdump
// (Debian's mitmproxy) as an explicit proxy on the same machine. It
// reports req/s and p50/p99 latency for each, then prints the ratios. The
// mediator runs on loopback without the namespaces: the veth hop of a
// contained run is not in these numbers.
//
//	go test -run='^$' -bench=BenchmarkHTTPS ./custodian/internal/mediator/
func BenchmarkHTTPS(b *testing.B) {
	up := benchUpstream(b)
	results := map[string]stats{}
	run := func(name, host string, client *http.Client, header http.Header) {
		b.Run(name, func(b *testing.B) {
			st := load(b, client, "https://"+host+":"+up.port+"/bench", header)
			results[name] = st
			b.ReportMetric(st.rate(), "req/s")
			b.ReportMetric(float64(st.pct(0.50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(st.pct(0.99).Microseconds()), "p99-µs")
		})
	}
	direct := newClient(up.roots, nil)
	run("direct", "localhost", direct, nil)

	medProxy, medRoots := benchMediator(b, up)
	// The engine refuses to bind a value to a loopback name, so the
	// mediator's target is a name it resolves to the same upstream.
	run("mediator", "bench.example", newClient(medRoots, medProxy), http.Header{"Authorization": {"Bearer jr2-held-BENCH_TOKEN"}})

	mitm, mitmRoots, err := startMitmdump(b, up)
	if err != nil {
		fmt.Printf("\n!!! BENCH: mitmdump is not available (%v): install Debian's mitmproxy (apt-get install -y mitmproxy); the table has no mitmdump column !!!\n\n", err)
	} else {
		run("mitmdump", "localhost", newClient(mitmRoots, mitm), nil)
	}
	printTable(os.Stdout, results)
}

func printTable(w io.Writer, r map[string]stats) {
	d, ok := r["direct"]
	if !ok {
		return
	}
	fmt.Fprintf(w, "\nHTTPS to one local upstream, %d clients, keep-alive, 1 KiB answers\n", benchClients)
	fmt.Fprintf(w, "%-10s %10s %10s %10s %12s %14s %14s\n", "setup", "req/s", "p50", "p99", "req/s ratio", "p50 added", "p99 added")
	for _, name := range []string{"direct", "mediator", "mitmdump"} {
		s, ok := r[name]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "%-10s %10.0f %10s %10s %11.2fx %14s %14s\n", name, s.rate(), s.pct(0.5).Round(time.Microsecond), s.pct(0.99).Round(time.Microsecond),
			s.rate()/d.rate(), (s.pct(0.5) - d.pct(0.5)).Round(time.Microsecond), (s.pct(0.99) - d.pct(0.99)).Round(time.Microsecond))
	}
	m, okm := r["mediator"]
	x, okx := r["mitmdump"]
	if okm && okx {
		fmt.Fprintf(w, "mediator / mitmdump: req/s %.2fx, p50 %.2fx, p99 %.2fx\n", m.rate()/x.rate(),
			float64(m.pct(0.5))/float64(x.pct(0.5)), float64(m.pct(0.99))/float64(x.pct(0.99)))
	}
	fmt.Fprintln(w)
}

// load sends b.N requests from benchClients goroutines and times each.
func load(b *testing.B, c *http.Client, u string, header http.Header) stats {
	b.Helper()
	var mu sync.Mutex
	var lat []time.Duration
	var failed error
	next := make(chan struct{}, b.N)
	for range b.N {
		next <- struct{}{}
	}
	close(next)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for range next {
				t0 := time.Now()
				req, _ := http.NewRequest("GET", u, nil)
				for k, v := range header {
					req.Header[k] = v
				}
				resp, err := c.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	return stats{reqs: len(lat), elapsed: elapsed, lat: lat}
}

func newClient(roots *x509.CertPool, proxy *url.URL) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		MaxIdleConnsPerHost: benchClients,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	if proxy != nil {
		tr.Proxy = http.ProxyURL(proxy)
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type benchUp struct {
	addr, port string
	roots      *x509.CertPool
	caFile     string
}

func benchUpstream(b *testing.B) *benchUp {
	ca := testpki.NewCA(b, "bench upstream CA")
	leaf := ca.Leaf(b, "localhost", "bench.example")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(benchBody)
		}),
		TLSConfig:    &tls.Config{Certificates: []tls.Certificate{leaf.TLS}},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1, as the proxies speak upstream
	}
	go srv.ServeTLS(ln, "", "")
	b.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return &benchUp{addr: ln.Addr().String(), port: port, roots: ca.Pool(), caFile: ca.WriteFile(b, b.TempDir(), "ca.pem")}
}

// benchMediator runs a mediator on loopback, recording to a bundle file,
// allowing bench.example:<upstream port> with a secret bound to it.
func benchMediator(b *testing.B, up *benchUp) (*url.URL, *x509.CertPool) {
	pol, err := policy.Parse([]byte(fmt.Sprintf("allow_hosts = [\"bench.example:%s\"]\n[secrets]\nBENCH_TOKEN = { env = \"BENCH_TOKEN\", hosts = [\"bench.example:%s\"] }\n", up.port, up.port)))
	if err != nil {
		b.Fatal(err)
	}
	br, err := broker.New(pol, []string{"BENCH_TOKEN=sk-bench-value-0123456789"})
	if err != nil {
		b.Fatal(err)
	}
	w, err := bundle.Create(filepath.Join(b.TempDir(), "bench.jsonl"), bundle.Options{ContainsSecret: br.Contains})
	if err != nil {
		b.Fatal(err)
	}
	ca, err := runca.New("jr2 run bench")
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(Options{Policy: pol, Broker: br, Record: w, CA: ca, Addr: netip.MustParseAddr("127.0.0.1"),
		Resolve: func(string, uint16) (string, error) { return up.addr, nil }, Roots: up.roots, LocalUpstreams: true})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	m.Serve(Listeners{TCP: []Caught{{ln, 8080}}})
	b.Cleanup(func() { m.Close(); w.Close() })
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}, ca.Pool()
}

// startMitmdump starts mitmdump as an explicit proxy trusting the
// upstream's CA, and returns its URL and its CA.
func startMitmdump(b *testing.B, up *benchUp) (*url.URL, *x509.CertPool, error) {
	bin, err := exec.LookPath("mitmdump")
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	conf := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-q", "--listen-host", "127.0.0.1", "--listen-port", port,
		"--set", "confdir="+conf, "--set", "ssl_verify_upstream_trusted_ca="+up.caFile)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, nil, err
	}
	b.Cleanup(func() { cancel(); cmd.Wait() })
	caFile := filepath.Join(conf, "mitmproxy-ca-cert.pem")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		pem, err := os.ReadFile(caFile)
		c, derr := net.DialTimeout("tcp4", "127.0.0.1:"+port, time.Second)
		if derr == nil {
			c.Close()
		}
		if err == nil && derr == nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, nil, fmt.Errorf("%s holds no certificate", caFile)
			}
			return &url.URL{Scheme: "http", Host: "127.0.0.1:" + port}, pool, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, nil, fmt.Errorf("mitmdump did not listen on %s within 30 s", strconv.Quote(port))
}
