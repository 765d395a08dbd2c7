package mediator

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/broker"
	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/testkit/benchfloor"
	"jr2.dev/boundary/internal/testkit/benchgoal"
	"jr2.dev/boundary/internal/testkit/testpki"
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
	run := func(name, host, proxy, caFile string, header http.Header) {
		b.Run(name, func(b *testing.B) {
			st := runLoad(b, loadArgs{URL: "https://" + host + ":" + up.port + "/bench", Proxy: proxy, CAFile: caFile, Header: header, N: b.N})
			results[name] = st
			b.ReportMetric(st.rate(), "req/s")
			b.ReportMetric(float64(st.pct(0.50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(st.pct(0.99).Microseconds()), "p99-µs")
		})
	}
	run("direct", "localhost", "", up.caFile, nil)
	floor, _ := startRole(b, "floor", up.dir)
	run("floor", "localhost", floor, up.caFile, nil)

	medProxy, medCA := benchMediator(b, up)
	// The engine refuses to bind a value to a loopback name, so the
	// mediator's target is a name it resolves to the same upstream.
	run("mediator", "bench.example", medProxy, medCA, http.Header{"Authorization": {"Bearer jr2-held-BENCH_TOKEN"}})

	mitm, mitmCA, err := startMitmdump(b, up)
	if err != nil {
		fmt.Printf("\n!!! BENCH: mitmdump is not available (%v): install Debian's mitmproxy (apt-get install -y mitmproxy); the table has no mitmdump column !!!\n\n", err)
	} else {
		run("mitmdump", "localhost", mitm, mitmCA, nil)
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
	for _, name := range []string{"direct", "floor", "mediator", "mitmdump"} {
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
	ratio := func(a, b string) float64 {
		sa, oka := r[a]
		sb, okb := r[b]
		if !oka || !okb || sb.rate() == 0 {
			return -1
		}
		return sa.rate() / sb.rate()
	}
	floor := ratio("floor", "direct")
	benchgoal.Print(w, []benchgoal.Row{
		{Figure: "contained run's mediator ÷ mitmdump, 8 clients, 1 KiB", Value: ratio("mediator", "mitmdump"), OK: func(v float64) bool { return v >= 20 }, Want: "≥ 20×", Format: "%.1f×",
			Limit: "mitmdump's own rate sets this ratio; the mediator's is bounded as the row below"},
		{Figure: "contained run's mediator ÷ direct, 8 clients, 1 KiB", Value: ratio("mediator", "direct"), OK: func(v float64) bool { return v >= 0.5 }, Want: "≥ 0.5×", Format: "%.2f×",
			Limit: fmt.Sprintf("the floor (a TLS byte relay, nothing recorded) is at %.2f× here; above it the mediator writes each request, answer head, chunk and end to the bundle with a write of its own as it happens, so a kill -9 loses no record (TestKilledRunLeavesPrefix): about a quarter of its CPU in perf record -g of the mediator process; then net/http's server", floor)},
		{Figure: "the floor ÷ direct, 8 clients, 1 KiB", Value: floor, Want: "(measured)", Format: "%.2f×"},
	})
}

// The benchmark's processes: the upstream, the load and the mediator each
// run in a process of their own (this test binary, re-executed with
// benchRoleEnv), so direct measures a client and an upstream that share
// no scheduler or heap, as the mediator's and mitmdump's do (a direct
// client sharing the upstream's process measured direct too fast).
const benchRoleEnv = "JR2_MEDIATOR_BENCH_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(benchRoleEnv) {
	case "":
		os.Exit(m.Run())
	case "upstream":
		os.Exit(upstreamRole())
	case "mediator":
		os.Exit(mediatorRole())
	case "load":
		os.Exit(loadRole())
	case "floor":
		os.Exit(floorRole())
	default:
		fmt.Fprintln(os.Stderr, "unknown", benchRoleEnv)
		os.Exit(2)
	}
}

// startRole starts this test binary as role with args, and returns the
// first line it printed; the role runs until the benchmark's cleanup
// closes its stdin.
func startRole(b *testing.B, role string, args ...string) (string, *bufio.Reader) {
	b.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), benchRoleEnv+"="+role)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil {
		b.Fatalf("bench %s: %q %v", role, line, err)
	}
	return strings.TrimSpace(line), out
}

// untilStdinCloses is how a role waits for the benchmark's end.
func untilStdinCloses() { io.Copy(io.Discard, os.Stdin) }

func fail(role string, err error) int {
	fmt.Fprintf(os.Stderr, "bench %s: %v\n", role, err)
	return 2
}

// loadArgs is what one load process does: N requests from benchClients
// keep-alive clients, after a warm-up of benchClients requests.
type loadArgs struct {
	URL, Proxy, CAFile string
	Header             http.Header
	N                  int
}

// runLoad runs one load process and returns its figures.
func runLoad(b *testing.B, a loadArgs) stats {
	b.Helper()
	arg, _ := json.Marshal(a)
	b.ResetTimer()
	line, _ := startRole(b, "load", string(arg))
	b.StopTimer()
	var r struct {
		Err       string
		ElapsedNS int64
		LatNS     []int64
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.Err != "" {
		b.Fatalf("bench load: %s %v", r.Err, err)
	}
	st := stats{reqs: len(r.LatNS), elapsed: time.Duration(r.ElapsedNS)}
	for _, l := range r.LatNS {
		st.lat = append(st.lat, time.Duration(l))
	}
	return st
}

// loadRole sends the requests and prints one JSON line: the timed phase's
// length and each request's latency.
func loadRole() int {
	var a loadArgs
	if err := json.Unmarshal([]byte(os.Args[1]), &a); err != nil {
		return fail("load", err)
	}
	pem, err := os.ReadFile(a.CAFile)
	if err != nil {
		return fail("load", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		MaxIdleConnsPerHost: benchClients,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	if a.Proxy != "" {
		u, err := url.Parse(a.Proxy)
		if err != nil {
			return fail("load", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() error {
		req, _ := http.NewRequest("GET", a.URL, nil)
		for k, v := range a.Header {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}
	type result struct {
		Err       string `json:",omitempty"`
		ElapsedNS int64
		LatNS     []int64
	}
	report := func(r result) int {
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
		return 0
	}
	// Warm-up: each client's connection made before the timed phase.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := get(); err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return report(result{Err: failed.Error()})
	}
	next := make(chan struct{}, a.N)
	for range a.N {
		next <- struct{}{}
	}
	close(next)
	var lat []int64
	start := time.Now()
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			for range next {
				t0 := time.Now()
				if err := get(); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				mine = append(mine, int64(time.Since(t0)))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed != nil {
		return report(result{Err: failed.Error()})
	}
	return report(result{ElapsedNS: int64(elapsed), LatNS: lat})
}

type benchUp struct {
	addr, port string
	caFile     string
	dir        string // leaf.pem, leaf.key
}

// benchUpstream starts the upstream process: a keep-alive HTTP/1.1 server
// under a test CA answering 1 KiB of JSON.
func benchUpstream(b *testing.B) *benchUp {
	dir := b.TempDir()
	ca := testpki.NewCA(b, "bench upstream CA")
	leaf := ca.Leaf(b, "localhost", "bench.example")
	for name, data := range map[string][]byte{"leaf.pem": leaf.CertPEM, "leaf.key": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	addr, _ := startRole(b, "upstream", dir)
	_, port, _ := net.SplitHostPort(addr)
	return &benchUp{addr: addr, port: port, caFile: ca.WriteFile(b, dir, "ca.pem"), dir: dir}
}

// floorRole is internal/testkit/benchfloor with the upstream's own leaf (the
// load trusts its CA): the least a TLS-intercepting proxy costs here.
func floorRole() int {
	dir := os.Args[1]
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "leaf.key"))
	if err != nil {
		return fail("floor", err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return fail("floor", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return fail("floor", err)
	}
	go benchfloor.Serve(ln, cert, roots)
	fmt.Println("http://" + ln.Addr().String())
	untilStdinCloses()
	return 0
}

func upstreamRole() int {
	dir := os.Args[1]
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "leaf.key"))
	if err != nil {
		return fail("upstream", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return fail("upstream", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(benchBody)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1, as the proxies speak upstream
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.ServeTLS(ln, "", "")
	fmt.Println(ln.Addr())
	untilStdinCloses()
	return 0
}

// benchMediator starts the mediator process, recording to a bundle file,
// allowing bench.example:<upstream port> with a secret bound to it, and
// returns its proxy URL and the file of its run CA.
func benchMediator(b *testing.B, up *benchUp) (string, string) {
	dir := b.TempDir()
	line, _ := startRole(b, "mediator", up.addr, up.caFile, dir)
	return line, filepath.Join(dir, "run-ca.pem")
}

func mediatorRole() int {
	upAddr, upCA, dir := os.Args[1], os.Args[2], os.Args[3]
	_, port, _ := net.SplitHostPort(upAddr)
	pem, err := os.ReadFile(upCA)
	if err != nil {
		return fail("mediator", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	pol, err := policy.Parse([]byte(fmt.Sprintf("allow_hosts = [\"bench.example:%s\"]\n[secrets]\nBENCH_TOKEN = { env = \"BENCH_TOKEN\", hosts = [\"bench.example:%s\"] }\n", port, port)))
	if err != nil {
		return fail("mediator", err)
	}
	br, err := broker.New(pol, []string{"BENCH_TOKEN=sk-bench-value-0123456789"})
	if err != nil {
		return fail("mediator", err)
	}
	w, err := bundle.Create(filepath.Join(dir, "bench.jsonl"), bundle.Options{ContainsSecret: br.Contains})
	if err != nil {
		return fail("mediator", err)
	}
	defer w.Close()
	ca, err := runca.New("jr2 run bench")
	if err != nil {
		return fail("mediator", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run-ca.pem"), ca.PEM(), 0o644); err != nil {
		return fail("mediator", err)
	}
	m, err := New(Options{Policy: pol, Broker: br, Record: w, CA: ca, Addr: netip.MustParseAddr("127.0.0.1"),
		Resolve: func(string, uint16) (string, error) { return upAddr, nil }, Roots: roots, LocalUpstreams: true})
	if err != nil {
		return fail("mediator", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return fail("mediator", err)
	}
	m.Serve(Listeners{TCP: []Caught{{ln, 8080}}})
	defer m.Close()
	fmt.Println("http://" + ln.Addr().String())
	untilStdinCloses()
	return 0
}

// startMitmdump starts mitmdump as an explicit proxy trusting the
// upstream's CA, and returns its URL and the file of its CA.
func startMitmdump(b *testing.B, up *benchUp) (string, string, error) {
	bin, err := exec.LookPath("mitmdump")
	if err != nil {
		return "", "", err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", "", err
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
		return "", "", err
	}
	b.Cleanup(func() { cancel(); cmd.Wait() })
	caFile := filepath.Join(conf, "mitmproxy-ca-cert.pem")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, err := os.Stat(caFile)
		c, derr := net.DialTimeout("tcp4", "127.0.0.1:"+port, time.Second)
		if derr == nil {
			c.Close()
		}
		if err == nil && derr == nil {
			return "http://127.0.0.1:" + port, caFile, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", "", fmt.Errorf("mitmdump did not listen on %s within 30 s", strconv.Quote(port))
}
