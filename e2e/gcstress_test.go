package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestGCStress: each host with its Go runtime collecting all the time
// (GOGC=1 in its environment; in Envoy that is the dynamic module's
// runtime, living beside Envoy's C++ and handed Envoy's memory on every
// hook) carries 600 swapped and scrubbed requests on four keep-alive
// connections at once: every answer is exact, and the host then stops
// cleanly (no crash, no fatal error from the runtime or from cgo's pointer
// checks). Every other answer is gzip (its reader allocates in every host):
// the module passes a plain answer without allocating, so plain answers
// alone would never make its runtime collect.
func TestGCStress(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) {
			t.Setenv("GOGC", "1")
			t.Setenv("GODEBUG", "gctrace=1") // the runtime writes a line per collection
			p := newHopPod(t, host)
			run(t, "600 requests at GOGC=1", func(t *testing.T) { p.testGCStress(t) })
		})
	}
}

func (p *hopPod) testGCStress(t *testing.T) {
	const workers, each = 4, 150
	answers := []struct{ path, want string }{
		{"/v1/big", bigText + "[secret:" + hopName + "]"},
		{"/v1/members", "first member, second member: you sent [secret:" + hopName + "]"},
	}
	before := collections(p.run.out.Lines())
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := p.client()
			for j := range each {
				a := answers[j%len(answers)]
				req, _ := http.NewRequest("GET", "https://"+p.target+a.path, nil)
				req.Header.Set("x-api-key", standIn(hopName))
				resp, err := c.Do(req)
				if err != nil {
					errs <- fmt.Errorf("request %d: %v", j, err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(b) != a.want {
					errs <- fmt.Errorf("request %d (%s): %d, %d bytes, %v; want 200 and the answer scrubbed", j, a.path, resp.StatusCode, len(b), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := p.run.Stop(); err != nil {
		t.Errorf("the host did not stop cleanly after the stress: %v\n%s", err, p.run.out.String())
	}
	// The stress is real only if the host's runtime collected while it
	// carried the requests (its gctrace lines; interleaved writes on the
	// shared stderr can split a few, so the floor is low).
	n := collections(p.run.out.Lines()) - before
	if n < 5 {
		t.Errorf("the host's Go runtime collected %d times during %d requests; GOGC=1 did not reach it", n, workers*each)
	}
}

// collections counts the runtime's gctrace lines (gc N @…: …).
func collections(lines []string) int {
	n := 0
	for _, l := range lines {
		if l = strings.TrimPrefix(l, "stderr: "); strings.HasPrefix(l, "gc ") && strings.Contains(l, "%: ") {
			n++
		}
	}
	return n
}
