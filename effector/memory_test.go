package main

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/effector/internal/wire"
)

// rss is a process's resident memory now (VmRSS) in KiB.
func rss(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestSecretEffectsRSSFlat: an Effector process runs 1,000 effects that
// name the held secret (bearer; one in five Basic or escaped into the url
// path, which build an automaton of their own), outcomes kept for the
// default 10 minutes, and its resident memory stays under 100 MiB and
// within 32 MiB of where it was after the first 100 (it once grew 7.4 MB
// per effect, each effect's scrubber kept ten minutes).
func TestSecretEffectsRSSFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED under -short: the memory test runs 1,000 effects")
	}
	first, last := secretEffectsRSS(t)
	t.Logf("effector RSS after 100 effects naming a secret: %d KiB; after 1,000: %d KiB", first, last)
	if last > 100<<10 || last-first > 32<<10 {
		t.Errorf("RSS %d KiB after 1,000 (%d KiB after 100): want under 100 MiB and within 32 MiB", last, first)
	}
}

// BenchmarkSecretEffectsRSS reports the same run's resident memory for
// make bench's goal row (rss-MiB after 1,000, growth-MiB from 100 to
// 1,000). It runs once whatever b.N is.
func BenchmarkSecretEffectsRSS(b *testing.B) {
	first, last := secretEffectsRSS(b)
	for b.Loop() {
	}
	b.ReportMetric(float64(last)/1024, "rss-MiB")
	b.ReportMetric(float64(last-first)/1024, "growth-MiB")
}

// secretEffectsRSS runs the 1,000 effects and returns the Effector's RSS
// in KiB after the first 100 and after all.
func secretEffectsRSS(t testing.TB) (first, last int) {
	r := newRig(t, nil)
	p := r.site.run(t, nil)
	c := &client.Client{Key: placementKey, Addresses: func(context.Context) ([]string, error) { return []string{p.addr}, nil },
		HTTP: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}}
	start := func(i int) *wire.Start {
		h := &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(r.url("/m/" + strconv.Itoa(i)))}}
		switch i % 5 {
		case 0:
			h.Auth = &wire.Auth{Type: wire.AuthBasic, Secret: "SENTINEL", User: "u" + strconv.Itoa(i)}
		case 1:
			h.URL = append(h.URL, wire.Text("/"), wire.Secret("SENTINEL"))
		default:
			h.Auth = &wire.Auth{Type: wire.AuthBearer, Secret: "SENTINEL"}
		}
		return &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 30000, HTTP: h}
	}
	run := func(from, to int) {
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					id := "rss-" + strconv.Itoa(i)
					if a, err := c.Start(context.Background(), id, start(i)); err != nil || a.Status != 202 {
						t.Errorf("start %s: %v %+v", id, err, a)
						continue
					}
					if o := settle(t, c, id, p.addr); o.Kind != wire.OutcomeResponse {
						t.Errorf("%s: %+v", id, o)
					}
				}
			}()
		}
		for i := from; i < to; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	run(0, 100)
	first = rss(t, p.cmd.Process.Pid)
	run(100, 1000)
	return first, rss(t, p.cmd.Process.Pid)
}
