//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"jr2.dev/boundary/internal/testkit/benchenvoy"
)

// Envoy without the module, Envoy with it on two workers, and on one
// worker with GOMAXPROCS at the machine's CPUs (the Go runtime's default
// the module once overrode), for
// BenchmarkServe. Both are the module render's envoy.json
// transformed here, in the bench, not a render option: the render's
// default output stays the one thing the e2e suite and the red team
// test, and what is left out is stated in one place (internal/testkit/benchenvoy) that
// fails loudly when the render's shape changes under it.

// benchEnvoyVariant is one transformed copy of the module render's
// envoy.json: its own listener ports and admin socket, so it runs beside
// the module host.
type benchEnvoyVariant struct {
	noModule    bool     // benchenvoy.WithoutModule applied
	noMark      bool     // benchenvoy.WithoutMark
	noLogs      bool     // benchenvoy.WithoutInterceptLogs
	noStats     bool     // benchenvoy.WithoutStats
	direct      string   // benchenvoy.DirectIntercept for this target
	stderrLog   bool     // Envoy's log on stderr (the e2e suite's), not through --log-path as the pod has it
	moduleFile  string   // benchenvoy.WithModuleFile: another module (internal/testkit/benchnoop, its C twin)
	concurrency string   // Envoy's --concurrency
	env         []string // set for Envoy (through env(1), so the pid is Envoy's)
}

// namedVariant is a variant and its host name in the bench.
type namedVariant struct {
	name string
	benchEnvoyVariant
}

// envoyVariants are the copies of the module's envoy.json the bench runs
// beside Envoy + module; target is the bench's bound target, noop the Go
// module that does nothing (internal/testkit/benchnoop), cnoop the C one
// (internal/testkit/benchnoop/c).
func envoyVariants(target, noop, cnoop string) []namedVariant {
	return []namedVariant{
		{"envoy-alone", benchEnvoyVariant{noModule: true, concurrency: "1"}},
		{"envoy-2w", benchEnvoyVariant{concurrency: "2"}},
		// The pair differs only in GOMAXPROCS, both started the same way.
		{"envoy-gmp", benchEnvoyVariant{concurrency: "1", env: []string{fmt.Sprintf("GOMAXPROCS=%d", runtime.NumCPU())}}},
		{"envoy-gmp1", benchEnvoyVariant{concurrency: "1", env: []string{"GOMAXPROCS=1"}}},
		// The render's parts, one left out each (envoyParts).
		{"alone-nolog", benchEnvoyVariant{noModule: true, noLogs: true, concurrency: "1"}},
		{"alone-nostats", benchEnvoyVariant{noModule: true, noStats: true, concurrency: "1"}},
		{"alone-nohop", benchEnvoyVariant{noModule: true, direct: target, concurrency: "1"}},
		{"envoy-nomark", benchEnvoyVariant{noMark: true, concurrency: "1"}},
		// A Go module that does nothing in its hooks, in the module's
		// place (without the mark, which it never sets).
		{"envoy-noop", benchEnvoyVariant{noMark: true, moduleFile: noop, concurrency: "1"}},
		// The same in C: the hooks' crossings without a runtime.
		{"envoy-cnoop", benchEnvoyVariant{noMark: true, moduleFile: cnoop, concurrency: "1"}},
		// Envoy + module with its log on stderr, as the e2e suite runs it:
		// each of the module's lines a write of its own, where the pod's
		// command (every other Envoy here) has Envoy buffer its log
		// through --log-path and flush it every --file-flush-interval-msec.
		{"envoy-stderr", benchEnvoyVariant{concurrency: "1", stderrLog: true}},
	}
}

// envoyPart is one part of the render, what it buys, and the pair of
// hosts whose difference is its cost: base has it, host does not.
type envoyPart struct {
	part, buys string
	base, host string
}

// envoyParts are the parts measured per request, so that each costly one
// is kept only for what it buys. The
// egress listener's filters (the dynamic forward proxy and its DNS cache,
// jr2.rbac.guard, set_filter_state) and its access logs run once per
// CONNECT, not per request, so with keep-alive they are inside the
// internal hop's row.
var envoyParts = []envoyPart{
	{"the internal hop: CONNECT on the egress listener, its connection manager, the internal listener",
		"TLS ended with the target's own leaf, and the target bound from the CONNECT to the one cluster that may carry its values",
		"envoy-alone", "alone-nohop"},
	{"the intercept listener's access logs (4 CEL-filtered, at every request's end)",
		"the jr2.custodian lines of what Envoy's codec refuses itself (bad paths, invalid URLs, upgrades)",
		"envoy-alone", "alone-nolog"},
	{"stats (every counter and histogram Envoy keeps)",
		"nothing the Custodian reads; operators' /stats on the admin socket",
		"envoy-alone", "alone-nostats"},
	{"the module's lines written one by one to stderr (the e2e suite's), against the pod's buffered --log-path",
		"each jr2.custodian line out of the process at once (a line per intercepted request)",
		"envoy-stderr", "envoy"},
	{"a C dynamic module that does nothing: the hooks' crossings alone (internal/testkit/benchnoop/c)",
		"nothing itself: the floor under any dynamic module",
		"envoy-cnoop", "envoy-alone"},
	{"the Go runtime in Envoy: a Go module that does nothing (internal/testkit/benchnoop), beyond the C one",
		"nothing itself: the floor under any Go module; only a module without a runtime would save it",
		"envoy-noop", "envoy-cnoop"},
	{"the module's work beyond that: its ABI calls, the engine, its line (no mark in either)",
		"every decision and scrub of docs/custodian.md",
		"envoy-nomark", "envoy-noop"},
	{"jr2.rbac.mark (the RBAC after the module)",
		"fail closed: a stream the module did not mark decided goes nowhere",
		"envoy", "envoy-nomark"},
}

// partReps is how many times each part and its base are measured, in
// turn: this machine's load comes and goes within seconds.
const partReps = 3

// partCost is a part's cost in one cell: the median over partReps of the
// base's requests/s over the part-less host's, and of the host CPU per
// request the part takes; ok is false when no pair of runs succeeded.
func partCost(res map[string]benchResult, base, host, cell string) (ratio, cpu float64, ok bool) {
	var ratios, cpus []float64
	for rep := range partReps {
		b, h := res[fmt.Sprintf("part%d %s/%s", rep, base, cell)], res[fmt.Sprintf("part%d %s/%s", rep, host, cell)]
		if b.N == 0 || h.N == 0 || b.failWhy != "" || h.failWhy != "" {
			continue
		}
		ratios = append(ratios, (float64(b.N)/b.Seconds)/(float64(h.N)/h.Seconds))
		cpus = append(cpus, 1e6*(b.HostCPU/float64(b.N)-h.HostCPU/float64(h.N)))
	}
	if len(ratios) == 0 {
		return 0, 0, false
	}
	median := func(xs []float64) float64 {
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	return median(ratios), median(cpus), true
}

// partsTable prints each part's cost per 1 KiB request (partCost).
func partsTable(w io.Writer, res map[string]benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nthe render's parts, per 1 KiB request (each left out of its base; medians of %d alternating runs)\tc=1: req/s with ÷ without\tCPU µs it takes\tc=32: req/s with ÷ without\tCPU µs it takes\twhat it buys\n", partReps)
	for _, pt := range envoyParts {
		line := pt.part + "\t"
		for _, c := range []string{"1KiB c=1", "1KiB c=32"} {
			ratio, cpu, ok := partCost(res, pt.base, pt.host, c)
			if !ok {
				line += "failed\t-\t"
				continue
			}
			line += fmt.Sprintf("%.2f×\t%+.0f\t", ratio, cpu)
		}
		fmt.Fprintln(tw, line+pt.buys+"\t")
	}
	tw.Flush()
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
			b.Fatalf("bench %s: envoy.json has no dynamic_modules filter to leave out: the render changed; update internal/testkit/benchenvoy", name)
		}
	}
	if v.noMark && benchenvoy.WithoutMark(cfg) == 0 {
		b.Fatalf("bench %s: envoy.json has no jr2.rbac.mark: the render changed; update internal/testkit/benchenvoy", name)
	}
	if v.noLogs && benchenvoy.WithoutInterceptLogs(cfg) == 0 {
		b.Fatalf("bench %s: the intercept listener has no access log: the render changed; update internal/testkit/benchenvoy", name)
	}
	if v.noStats {
		benchenvoy.WithoutStats(cfg)
	}
	if v.moduleFile != "" && benchenvoy.WithModuleFile(cfg, v.moduleFile) == 0 {
		b.Fatalf("bench %s: envoy.json names no dynamic module: the render changed; update internal/testkit/benchenvoy", name)
	}
	direct := ""
	if v.direct != "" {
		if direct, err = benchenvoy.DirectIntercept(cfg, v.direct); err != nil {
			b.Fatalf("bench %s: %v", name, err)
		}
	}
	// Listener ports of its own; the admin socket in the bench's directory.
	addrs, err := benchenvoy.Relocate(cfg, filepath.Join(p.dir, name+"-admin.sock"), func() int { return freeLoopbackPort(b) })
	if err != nil {
		b.Fatalf("bench %s: %v", name, err)
	}
	r := &Running{Control: addrs["control"], Egress: addrs["egress"], Health: addrs["health"]}
	if direct != "" {
		r.Intercept = addrs[direct]
	}
	out, _ := json.MarshalIndent(cfg, "", " ")
	if v.noModule && strings.Contains(string(out), "dynamic_modules") {
		b.Fatalf("bench %s: envoy.json still names dynamic_modules after benchenvoy.WithoutModule", name)
	}
	path := filepath.Join(dir, name+".json")
	mustWrite(b, path, string(out), 0o644)
	if r.Egress == "" || r.Health == "" {
		b.Fatalf("bench %s: envoy.json has no egress or health listener", name)
	}
	args := []string{bin, "-c", path, "--log-format", "%v", "--file-flush-interval-msec", "500", "--concurrency", v.concurrency, "--disable-hot-restart"}
	if !v.stderrLog {
		args = append(args, podLogArgs...)
	}
	run := startProcess(b, "", "", append(append([]string{"/usr/bin/env"}, v.env...), args...)...)
	run.Control, run.Egress, run.Health, run.Intercept = r.Control, r.Egress, r.Health, r.Intercept
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
