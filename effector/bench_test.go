package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/effector/internal/wire"
)

// benchRig is an Effector process in front of an upstream that answers
// size bytes of text.
type benchRig struct {
	r *rig
	p *proc
	c *client.Client
}

func newBenchRig(b *testing.B, size int) *benchRig {
	b.Helper()
	answer := strings.Repeat("a", size)
	r := newRig(b, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, answer)
	})
	// Outcomes are read at once; a short expiry keeps a long run's memory
	// flat.
	p := r.site.run(b, map[string]string{"JR2_EFFECTOR_TEST_EXPIRE_MS": "500"})
	c := &client.Client{Key: placementKey, Addresses: func(context.Context) ([]string, error) { return []string{p.addr}, nil },
		HTTP: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256}}}
	return &benchRig{r: r, p: p, c: c}
}

// effect runs one signed effect: start, then poll until settled. With
// bearer set it names the held SENTINEL as a bearer token.
func (br *benchRig) effect(b *testing.B, id string, size int, bearer bool) {
	start := &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 30000, HTTP: &wire.HTTP{Method: "GET",
		URL: wire.Value{wire.Text(br.r.url("/bench"))}, MaxResponseBytes: int64(size) + 1}}
	if bearer {
		start.HTTP.Auth = &wire.Auth{Type: wire.AuthBearer, Secret: "SENTINEL"}
	}
	a, err := br.c.Start(context.Background(), id, start)
	if err != nil || a.Status != 202 {
		b.Fatalf("start: %v %+v", err, a)
	}
	for {
		a, err = br.c.Poll(context.Background(), id, br.p.addr)
		if err != nil {
			b.Fatalf("poll: %v", err)
		}
		if a.State.State == wire.StateSettled {
			if o := a.State.Outcome; o.Kind != wire.OutcomeResponse || o.Size != int64(size) {
				b.Fatalf("outcome %+v", o.Kind)
			}
			return
		}
	}
}

// direct times n calls straight to the upstream; fresh opens a new
// connection for each, as the Effector does.
func direct(b *testing.B, br *benchRig, n int, fresh bool) float64 {
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: br.r.pki.Pool}, DisableKeepAlives: fresh}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	call := func() {
		resp, err := hc.Get(br.r.url("/bench"))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	call() // warm
	t0 := time.Now()
	for i := 0; i < n; i++ {
		call()
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

// BenchmarkEffect measures a signed http effect (start + poll + the
// upstream call, through the Effector process) and reports it beside a
// direct call to the same loopback upstream: x-direct against a client
// that keeps its connection, x-direct-fresh against one that opens a new
// TLS connection per call, as the Effector does (keep-alive off: no
// request is ever sent twice on a stale connection). p50-ms is the median
// effect, one at a time; the bearer row (an effect that names a held
// secret) carries its goal as goal-p50-ms.
func BenchmarkEffect(b *testing.B) {
	for _, row := range []struct {
		name   string
		n      int
		bearer bool
	}{{"answer=1KiB", 1 << 10, false}, {"answer=1KiB/secret=bearer", 1 << 10, true}, {"answer=1MiB", 1 << 20, false}} {
		b.Run(row.name, func(b *testing.B) {
			br := newBenchRig(b, row.n)
			reps := 50
			if row.n > 1<<10 {
				reps = 20
			}
			keep := direct(b, br, reps, false)
			fresh := direct(b, br, reps, true)
			br.effect(b, "warm", row.n, row.bearer)
			b.SetBytes(int64(row.n))
			b.ResetTimer()
			var each []time.Duration
			t0 := time.Now()
			for b.Loop() {
				t1 := time.Now()
				br.effect(b, "e"+strconv.Itoa(len(each)), row.n, row.bearer)
				each = append(each, time.Since(t1))
			}
			per := float64(time.Since(t0).Nanoseconds()) / float64(len(each))
			slices.Sort(each)
			b.ReportMetric(float64(each[len(each)/2].Nanoseconds())/1e6, "p50-ms")
			if row.bearer {
				b.ReportMetric(3, "goal-p50-ms")
			}
			b.ReportMetric(keep, "direct-ns/op")
			b.ReportMetric(fresh, "direct-fresh-ns/op")
			b.ReportMetric(per/keep, "x-direct")
			b.ReportMetric(per/fresh, "x-direct-fresh")
		})
	}
}

// directPerSecond is how many calls per second callers at once make
// straight to the upstream, each on a new connection that resumes the TLS
// session, as the Effector's are: the ceiling an effect's rate is held to.
func directPerSecond(b *testing.B, br *benchRig, callers, each int) float64 {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: br.r.pki.Pool, ClientSessionCache: tls.NewLRUClientSessionCache(8)}}
	hc := &http.Client{Transport: tr}
	call := func() {
		resp, err := hc.Get(br.r.url("/bench"))
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	call() // a session to resume
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				call()
			}
		}()
	}
	wg.Wait()
	return float64(callers*each) / time.Since(t0).Seconds()
}

// BenchmarkEffectsPerSecond runs signed 1 KiB effects that name a held
// secret as a bearer token from 32 callers at once and reports how many
// settle per second, beside its goal and beside direct-fresh/s, the
// rate of the same callers calling the upstream directly on a new
// connection each (x-direct-fresh: the ratio of the two).
func BenchmarkEffectsPerSecond(b *testing.B) {
	const callers = 32
	br := newBenchRig(b, 1<<10)
	br.effect(b, "warm", 1<<10, true)
	ceiling := directPerSecond(b, br, callers, 50)
	var next atomic.Int64
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	t0 := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br.effect(b, "p"+strconv.FormatInt(next.Add(1), 10), 1<<10, true)
		}
	})
	rate := float64(next.Load()) / time.Since(t0).Seconds()
	b.ReportMetric(rate, "effects/s")
	b.ReportMetric(1500, "goal-effects/s")
	b.ReportMetric(ceiling, "direct-fresh/s")
	b.ReportMetric(rate/ceiling, "x-direct-fresh")
}
