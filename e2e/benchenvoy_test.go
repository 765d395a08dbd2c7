//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/internal/benchenvoy"
)

// Envoy without the module, Envoy with it on two workers, and on one
// worker with GOMAXPROCS at the machine's CPUs (the Go runtime's default
// the module overrode before issue 25), for
// BenchmarkServe (issue 25). Both are the module render's envoy.json
// transformed here, in the bench, not a render option: the render's
// default output stays the one thing the e2e suite and the red team
// test, and what is left out is stated in one place (internal/benchenvoy) that
// fails loudly when the render's shape changes under it.

// benchEnvoyVariant is one transformed copy of the module render's
// envoy.json: its own listener ports and admin socket, so it runs beside
// the module host.
type benchEnvoyVariant struct {
	noModule    bool     // benchenvoy.WithoutModule applied
	concurrency string   // Envoy's --concurrency
	env         []string // set for Envoy (through env(1), so the pid is Envoy's)
}

// freeLoopbackPort is a port nothing listens on now.
func freeLoopbackPort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEnvoyVariant writes the variant of dir/envoy.json beside it as
// name.json and starts Envoy on it (without custodian envoy: the bench
// never stops it gracefully); it returns once the health listener answers.
func (p *benchPod) startEnvoyVariant(b *testing.B, bin, dir, name string, v benchEnvoyVariant) *Running {
	data, err := os.ReadFile(filepath.Join(dir, "envoy.json"))
	if err != nil {
		b.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		b.Fatal(err)
	}
	if v.noModule {
		if n := benchenvoy.WithoutModule(cfg); n == 0 {
			b.Fatalf("bench %s: envoy.json has no dynamic_modules filter to leave out: the render changed; update internal/benchenvoy", name)
		}
	}
	// Listener ports of its own; the admin socket in the bench's directory.
	addrs, err := benchenvoy.Relocate(cfg, filepath.Join(p.dir, name+"-admin.sock"), func() int { return freeLoopbackPort(b) })
	if err != nil {
		b.Fatalf("bench %s: %v", name, err)
	}
	r := &Running{Control: addrs["control"], Egress: addrs["egress"], Health: addrs["health"]}
	out, _ := json.MarshalIndent(cfg, "", " ")
	if v.noModule && strings.Contains(string(out), "dynamic_modules") {
		b.Fatalf("bench %s: envoy.json still names dynamic_modules after benchenvoy.WithoutModule", name)
	}
	path := filepath.Join(dir, name+".json")
	mustWrite(b, path, string(out), 0o644)
	if r.Egress == "" || r.Health == "" {
		b.Fatalf("bench %s: envoy.json has no egress or health listener", name)
	}
	run := startProcess(b, "", "", append(append([]string{"/usr/bin/env"}, v.env...), bin, "-c", path, "--log-format", "%v", "--file-flush-interval-msec", "500",
		"--concurrency", v.concurrency, "--disable-hot-restart")...)
	run.Control, run.Egress, run.Health = r.Control, r.Egress, r.Health
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + run.Health + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("bench %s: the health listener %s did not answer 200: %v\n%s", name, run.Health, err, run.out.String())
		}
	}
	return run
}

// treePids is pid and every process descended from it: Envoy under
// custodian envoy is the wrapper's child, and its CPU time and syscalls
// are Envoy's, not the wrapper's.
func treePids(pid int) []int {
	pids := []int{pid}
	for i := 0; i < len(pids); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pids[i]))
		for _, t := range tasks {
			data, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(data)) {
				if c, err := strconv.Atoi(f); err == nil {
					pids = append(pids, c)
				}
			}
		}
	}
	return pids
}
