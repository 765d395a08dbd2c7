package serve

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSteadyLoadOpensNoUpstreamConnection: once a load has warmed the
// pool (64 requests held at the upstream at once, so 64 upstream
// connections exist), the same 64 clients sending request after request
// reuse them: the upstream accepts no new TLS connection. With the pool
// keeping 16 idle connections, 48 were closed after the warm-up and the
// steady phase handshook again (a fifth of the requests at 32 concurrent
// clients opened a new upstream TLS connection).
func TestSteadyLoadOpensNoUpstreamConnection(t *testing.T) {
	const clients, rounds = 64, 20
	f := newFixture(t, nil)
	pu, _ := url.Parse("http://" + f.egress)
	tr := &http.Transport{
		Proxy:               http.ProxyURL(pu),
		TLSClientConfig:     &tls.Config{RootCAs: f.jca.Pool()},
		DisableCompression:  true,
		MaxIdleConnsPerHost: clients,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	get := func(path string) error {
		req, _ := http.NewRequest("GET", "https://"+f.up.target+path, nil)
		req.Header.Set("x-api-key", keySI)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	run := func(path string, n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					if err := get(path); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}

	// Warm-up: every client's request held at the upstream until all 64
	// are there, so the pool holds 64 connections.
	done := make(chan struct{})
	go func() {
		defer close(done)
		run("/v1/barrier", 1)
	}()
	for i := range clients {
		select {
		case <-f.up.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d warm-up requests reached the upstream", i, clients)
		}
	}
	close(f.up.release)
	<-done
	warm := f.up.conns.Load()
	if warm != clients {
		t.Fatalf("the warm-up opened %d upstream connections, want %d", warm, clients)
	}

	run("/v1/echo", rounds)
	if got := f.up.conns.Load(); got != warm {
		t.Fatalf("%d requests from %d clients after the warm-up opened %d new upstream connections, want 0", clients*rounds, clients, got-warm)
	}
}

// TestStopWritesEveryLine: the log is buffered (a line waits up to the
// interval to be written with others), and a graceful stop writes what
// waits before Serve returns: the last request's line is there the moment
// Serve has returned, however long the interval.
func TestStopWritesEveryLine(t *testing.T) {
	f := newFixtureWith(t, nil, func(o *Options) { o.logEvery = time.Hour })
	for range 3 {
		if resp, body := f.do("GET", f.up.target, "/v1/echo", "x-api-key", keySI); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	line := "jr2.custodian action=intercept target=" + f.up.target + " secret=KEY method=GET status=200\n"
	if n := strings.Count(f.log.String(), line); n != 0 {
		t.Fatalf("%d lines written within an interval of an hour: the log is not buffered", n)
	}
	f.cancel()
	if err := <-f.done; err != nil {
		t.Fatal(err)
	}
	f.done <- nil // for the fixture's cleanup
	if n := strings.Count(f.log.String(), line); n != 3 {
		t.Fatalf("after the stop the log holds %d of the 3 lines:\n%s", n, f.log.String())
	}
}
