//go:build linux

package classlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/reap/reaptest"
)

// Each holder runs a real witness process for its class, seen alive in
// /proc while it holds, and releases only after its Effect settled (the
// witness killed and reaped). The span from before each witness started to
// after it settled is taken from one counter; no span of one class ever
// overlaps a span of the other, so no witness of one class was ever alive
// beside one of the other.
func TestWitnessProcessesNeverOverlap(t *testing.T) {
	var l classlock.Lock
	tr := reap.NewTracker()
	type span struct {
		class      classlock.Class
		start, end int64
	}
	var (
		seq   atomic.Int64
		mu    sync.Mutex
		spans []span
		wg    sync.WaitGroup
	)
	markers := map[classlock.Class]string{classlock.Command: reaptest.Marker(), classlock.GPG: reaptest.Marker()}
	for _, m := range markers {
		reaptest.Cleanup(t, m)
	}
	errs := make(chan error, 64)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				c := classlock.Command
				if rand.IntN(2) == 0 {
					c = classlock.GPG
				}
				release, err := l.Acquire(context.Background(), c)
				if err != nil {
					errs <- err
					return
				}
				id := fmt.Sprintf("w%d-%d", i, j)
				start := seq.Add(1)
				cmd := exec.Command("/bin/sleep", markers[c])
				if err := tr.Start(id, cmd); err != nil {
					errs <- err
					release()
					return
				}
				for deadline := time.Now().Add(10 * time.Second); len(reaptest.Marked(markers[c])) == 0; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("the %v witness never showed in /proc", c)
						break
					}
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				_ = cmd.Process.Kill()
				_ = tr.Wait(cmd)
				if err := tr.Settle(id); err != nil {
					errs <- err
				}
				end := seq.Add(1)
				release()
				mu.Lock()
				spans = append(spans, span{c, start, end})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	classes := map[classlock.Class]int{}
	for i, a := range spans {
		classes[a.class]++
		for _, b := range spans[i+1:] {
			if a.class != b.class && a.start < b.end && b.start < a.end {
				t.Errorf("a %v witness [%d,%d] overlapped a %v witness [%d,%d]", a.class, a.start, a.end, b.class, b.start, b.end)
			}
		}
	}
	if len(spans) != 30 || classes[classlock.Command] == 0 || classes[classlock.GPG] == 0 {
		t.Fatalf("%d spans, %v: the test did not run both classes", len(spans), classes)
	}
	for c, m := range markers {
		if pids := reaptest.Marked(m); len(pids) != 0 {
			t.Errorf("%v witnesses still alive: %v", c, pids)
		}
	}
}
