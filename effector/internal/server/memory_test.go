package server

import (
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/wire"
)

// liveEffectState counts the entries that still hold what only a running
// effect needs (its plan and its scrubber).
func (s *Server) liveEffectState() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.effects {
		if e.plan != nil || e.sc != nil {
			n++
		}
	}
	return n
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestThousandSecretEffectsKeepMemoryFlat: 1,000 effects that name the
// held secret (as a bearer token, and one in five as Basic auth or escaped
// into the url path, each echoed back by the upstream) settle, stay answerable, and
// leave the Go heap after GC within a fixed bound of where it started:
// no effect keeps its scrubber or its plan once it settled. Its outcome
// (a short scrubbed echo) and a few words are what stays until Expire.
func TestThousandSecretEffectsKeepMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED under -short: the memory test runs 1,000 effects")
	}
	const (
		n       = 1000
		workers = 4
		// Per effect a kept outcome is about a kilobyte; the bound is
		// 16 KiB per effect, far below one automaton of what it built.
		bound = n * 16 << 10
	)
	r := newRig(t, rigOptions{expire: time.Hour, upstream: func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, req.Header.Get("Authorization")+" "+req.URL.EscapedPath())
	}})
	shape := func(i int) *wire.HTTP {
		h := &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(r.url("/v1/" + strconv.Itoa(i)))}}
		switch i % 5 {
		case 0: // an automaton of its own: the Basic value
			h.Auth = &wire.Auth{Type: wire.AuthBasic, Secret: "SENTINEL", User: "u" + strconv.Itoa(i)}
		case 1: // an automaton of its own: the path with the value escaped
			h.URL = append(h.URL, wire.Text("/"), wire.Secret("SENTINEL"))
		default: // covered by the held value's forms
			h.Auth = &wire.Auth{Type: wire.AuthBearer, Secret: "SENTINEL"}
		}
		return h
	}
	one := func(i int) {
		id := "m" + strconv.Itoa(i)
		if a := r.start(t, id, shape(i)); a.Status != http.StatusAccepted {
			t.Errorf("%s: status %d", id, a.Status)
			return
		}
		if out := r.settled(t, id); out.Kind != wire.OutcomeResponse || out.Body == nil || !strings.Contains(*out.Body, "[secret:SENTINEL]") || strings.Contains(*out.Body, "S3nt") {
			t.Errorf("%s: outcome %+v", id, out)
		}
	}
	for i := 0; i < 30; i++ { // warm: connections, the client's pools
		one(n + i)
	}
	base := heapAfterGC()
	for done := 0; done < n; done += 100 {
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					one(i)
				}
			}()
		}
		for i := done; i < done+100; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// Checked as it goes, so code that keeps an automaton per effect
		// fails here early rather than running the machine out of memory.
		if grew := int64(heapAfterGC()) - int64(base); grew > bound {
			t.Fatalf("after %d effects the heap grew %d KiB; the bound for %d is %d KiB", done+100, grew>>10, n, bound>>10)
		}
	}
	if live := r.srv.liveEffectState(); live != 0 {
		t.Errorf("%d settled effects still hold their plan or scrubber", live)
	}
	// Every outcome stays answerable.
	for _, i := range []int{0, 1, 2, n - 1} {
		if out := r.settled(t, "m"+strconv.Itoa(i)); out.Body == nil || !strings.Contains(*out.Body, "[secret:SENTINEL]") {
			t.Errorf("m%d read again: %+v", i, out)
		}
	}
	grew := int64(heapAfterGC()) - int64(base)
	t.Logf("1,000 effects naming a secret: the heap grew %d KiB (bound %d KiB)", grew>>10, bound>>10)
}
