//go:build linux

package e2e

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
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// The benchmark's other processes. The upstream, the load and the host
// under test each run in a process of their own, so a direct run measures
// the upstream as the Custodian reaches it, not a client sharing its
// scheduler and heap with the server (which inflated direct).
func init() {
	roles["benchupstream"] = benchUpstreamMain
	roles["benchload"] = benchLoadMain
}

// benchDirEnv names the directory holding the upstream's leaf.pem and
// leaf.key.
const benchDirEnv = "JR2_BENCH_DIR"

// benchUpstreamMain is the benchupstream role: benchUpstream over TLS on a
// loopback port, and on a second, plain one the count of TLS connections it
// has accepted (GET / answers the number). It prints
//
//	listening ADDR stats ADDR
//
// and serves until its stdin closes.
func benchUpstreamMain() int {
	dir := os.Getenv(benchDirEnv)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "leaf.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench upstream:", err)
		return 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench upstream:", err)
		return 2
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench upstream:", err)
		return 2
	}
	var conns atomic.Int64
	srv := &http.Server{
		Handler:   http.HandlerFunc(benchUpstream),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          quietLog(),
	}
	go srv.ServeTLS(l, "", "")
	stats := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, conns.Load())
	}), ReadHeaderTimeout: 10 * time.Second}
	go stats.Serve(sl)
	fmt.Printf("listening %s stats %s\n", l.Addr(), sl.Addr())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// loadSpec is what one benchload process does.
type loadSpec struct {
	Mode    string  // "post" (an echoed body of Size bytes) or "sse" (time the first event)
	URL     string  // https://target/path
	Proxy   string  // http://egress, or "" to go direct
	Addr    string  // when set, every connection dials this address (the URL's host still names the TLS server)
	CAFile  string  // the roots the client trusts
	Key     string  // the x-api-key the client sends (the value direct, the stand-in through a host)
	Size    int     // the POST body's length
	Conc    int     // workers, each sequential on its own keep-alive connection
	Warmup  int     // requests per worker before the timed phase
	Seconds float64 // the timed phase's length, unless Count is set
	Count   int     // the timed phase's total requests
}

// loadResult is what it measured in its timed phase.
type loadResult struct {
	N        int
	Seconds  float64
	P50, P99 float64 // µs
	Dials    int     // new client connections during the timed phase
	Err      string  `json:",omitempty"`
}

// benchLoadMain is the benchload role. Its argument is a loadSpec as JSON.
// It warms up, prints "warm", waits for a line on stdin, runs the timed
// phase and prints "done " and a loadResult as JSON.
func benchLoadMain() int {
	var s loadSpec
	if err := json.Unmarshal([]byte(os.Args[len(os.Args)-1]), &s); err != nil {
		fmt.Fprintln(os.Stderr, "bench load:", err)
		return 2
	}
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench load:", err)
		return 2
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	var dials atomic.Int64
	d := &net.Dialer{}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		DisableCompression:  true,
		MaxIdleConnsPerHost: s.Conc,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			if s.Addr != "" {
				addr = s.Addr
			}
			return d.DialContext(ctx, network, addr)
		},
	}
	if s.Proxy != "" {
		u, err := url.Parse(s.Proxy)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench load:", err)
			return 2
		}
		tr.Proxy = http.ProxyURL(u)
	}
	c := &http.Client{Transport: tr}
	body := printable(s.Size)
	op := func() (time.Duration, error) { return benchPost(c, s.URL, s.Key, body) }
	if s.Mode == "sse" {
		op = func() (time.Duration, error) { return benchFirstEvent(c, s.URL, s.Key) }
	}
	fail := func(err error) int {
		out, _ := json.Marshal(loadResult{Err: err.Error()})
		fmt.Printf("done %s\n", out)
		return 1
	}

	var wg sync.WaitGroup
	errs := make(chan error, s.Conc)
	for w := 0; w < s.Conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < s.Warmup; i++ {
				if _, err := op(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return fail(fmt.Errorf("warm-up: %v", err))
	default:
	}
	fmt.Println("warm")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 2
	}

	dials.Store(0)
	var left atomic.Int64
	left.Store(int64(s.Count))
	deadline := time.Now().Add(time.Duration(s.Seconds * float64(time.Second)))
	lats := make([][]time.Duration, s.Conc)
	start := time.Now()
	for w := 0; w < s.Conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				if s.Count > 0 {
					if left.Add(-1) < 0 {
						return
					}
				} else if time.Now().After(deadline) {
					return
				}
				lat, err := op()
				if err != nil {
					errs <- err
					return
				}
				lats[w] = append(lats[w], lat)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return fail(err)
	default:
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	out, _ := json.Marshal(loadResult{
		N: len(all), Seconds: elapsed.Seconds(),
		P50: percentile(all, 50), P99: percentile(all, 99),
		Dials: int(dials.Load()),
	})
	fmt.Printf("done %s\n", out)
	return 0
}
