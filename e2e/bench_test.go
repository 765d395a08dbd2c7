//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/benchgoal"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// BenchmarkServe measures the Custodian's hosts — `custodian serve` and
// core Envoy with the dynamic module — against the same upstream reached
// directly, and prints one table of ratios beside their goals:
//
//   - requests/s with keep-alive for a POST of 1 KiB and of 1 MiB answered
//     with the same bytes (the answer streamed through the scrubber), with 1
//     and 32 concurrent clients, each on its own connection;
//   - the latency of those requests, p50 and p99, and what each host adds;
//   - the first SSE event's delay (the second event follows 1 ms later);
//   - per request: new upstream connections once warm (the upstream counts
//     the TLS connections it accepts), the host's CPU time, its syscalls
//     and the upstream's (under strace, in a run of their own, untimed), and
//     for custodian serve the bytes and objects it allocated (a -tags
//     jr2bench build answers SIGUSR1 with its runtime counters).
//
// Beside Envoy + module run Envoy alone (the same envoy.json without the
// module, internal/testkit/benchenvoy), so the module's share of Envoy's
// cost is a ratio of one run, and Envoy + module on two workers
// (--concurrency 2) at c=32 only. A host's CPU time, syscalls and profile
// include its descendants (Envoy under custodian envoy).
//
// The upstream, the load and the host are separate processes (roles of
// this test binary, the built custodian, Envoy). The floor beside them is
// the least any TLS-intercepting proxy costs here (benchfloor_test.go):
// the ceiling of a host's ratio. JR2_BENCH_PERF_DIR keeps a perf profile
// and an strace table of each host's timed phase; JR2_BENCH_CELL="1KiB c=1"
// runs that one cell alone. The benchmark runs once
// whatever b.N is: `make bench-serve` passes -benchtime 1x. Envoy is left
// out, loudly, when no binary is found. With JR2_BENCH_GOALS set, each goal
// row is appended to that file as figure, measured, goal, mark (tab
// separated) for make bench's summary.
func BenchmarkServe(b *testing.B) {
	p := newBenchPod(b)
	hosts := []string{"direct", "floor", "serve"}
	if os.Getenv("JR2_BENCH_HOSTS") == "direct,envoy" {
		hosts = []string{"direct"}
	}
	if p.envoy != nil {
		hosts = append(hosts, "envoy-alone", "envoy", "envoy-2w", "envoy-gmp", "envoy-gmp1", "envoy-cnoop", "envoy-noop")
	} else {
		fmt.Println("bench: ENVOY LEFT OUT: " + p.envoyWhy)
	}
	type cell struct{ size, conc int }
	cells := []cell{{1 << 10, 1}, {1 << 10, 32}, {1 << 20, 1}, {1 << 20, 32}}
	res := map[string]benchResult{} // by host + "/" + cell name
	// JR2_BENCH_CELL="1KiB c=1" measures that one cell and nothing else:
	// for a profile (JR2_BENCH_PERF_DIR), not for a table to quote.
	if only := os.Getenv("JR2_BENCH_CELL"); only != "" {
		for _, c := range cells {
			if cellName(c.size, c.conc) == only {
				if p.envoy != nil {
					for _, pt := range envoyParts {
						for _, h := range []string{pt.base, pt.host} {
							if !slices.Contains(hosts, h) {
								hosts = append(hosts, h)
							}
						}
					}
				}
				for _, h := range hosts {
					res[h+"/"+only] = p.measure(b, h, loadSpec{Mode: "post", Size: c.size, Conc: c.conc, Warmup: 20, Seconds: 2})
					res[h+"/strace"] = p.syscalls(b, h, loadSpec{Mode: "post", Size: c.size, Conc: c.conc, Warmup: 20, Count: 1000})
					fmt.Printf("bench: %s %s: syscalls per request: host %.1f, upstream %.1f\n", h, only,
						float64(res[h+"/strace"].HostCalls)/1000, float64(res[h+"/strace"].UpCalls)/1000)
					r := res[h+"/"+only]
					fmt.Printf("bench: %s %s: %.0f req/s, p50 %.0f µs, host CPU %.0f µs per request\n", h, only, float64(r.N)/r.Seconds, r.P50, 1e6*r.HostCPU/float64(max(r.N, 1)))
				}
				return
			}
		}
		b.Fatalf("JR2_BENCH_CELL=%q: no such cell", only)
	}
	for _, c := range cells {
		for _, h := range hosts {
			if h == "envoy-2w" && c.conc == 1 || strings.HasPrefix(h, "envoy-gmp") && c.size > 1<<10 || noopHost(h) && c.size <= 1<<10 {
				continue // the worker count matters with many clients only; GOMAXPROCS is a per-request cost; the parts table has the modules doing nothing at 1 KiB
			}
			res[h+"/"+cellName(c.size, c.conc)] = p.measure(b, h, loadSpec{Mode: "post", Size: c.size, Conc: c.conc, Warmup: 20, Seconds: 2})
		}
	}
	for _, h := range hosts {
		if h == "envoy-2w" || strings.HasPrefix(h, "envoy-gmp") || noopHost(h) {
			continue
		}
		res[h+"/sse"] = p.measure(b, h, loadSpec{Mode: "sse", Conc: 1, Warmup: 20, Count: 300})
	}
	for _, h := range hosts {
		if h == "envoy-2w" || noopHost(h) {
			continue
		}
		for _, size := range []int{1 << 10, 1 << 20} {
			if strings.HasPrefix(h, "envoy-gmp") && size > 1<<10 {
				continue
			}
			n := 1000
			if size > 1<<10 {
				n = 100
			}
			res[h+"/strace/"+cellName(size, 1)] = p.syscalls(b, h, loadSpec{Mode: "post", Size: size, Conc: 1, Warmup: 20, Count: n})
		}
	}
	// The render's parts, so that each costly one is kept only for what it
	// buys: each left out of Envoy alone
	// (the mark, the log path: of Envoy + module), measured beside its
	// base, the two alternating partReps times, cell by cell, so a part's
	// cost is the median of differences taken moments apart.
	if p.envoy != nil {
		for _, c := range cells[:2] {
			for rep := range partReps {
				for _, pt := range envoyParts {
					for _, h := range []string{pt.base, pt.host} {
						res[fmt.Sprintf("part%d %s/%s", rep, h, cellName(c.size, c.conc))] = p.measure(b, h, loadSpec{Mode: "post", Size: c.size, Conc: c.conc, Warmup: 20, Seconds: 1})
					}
				}
			}
		}
	}
	p.table(os.Stdout, hosts, res)
	if p.envoy != nil {
		partsTable(os.Stdout, res)
	}
}

// noopHost reports whether h runs a module that does nothing (C or Go).
func noopHost(h string) bool { return h == "envoy-cnoop" || h == "envoy-noop" }

func cellName(size, conc int) string {
	s := "1KiB"
	if size >= 1<<20 {
		s = "1MiB"
	}
	return fmt.Sprintf("%s c=%d", s, conc)
}

// benchResult is one load run's figures and the counters around its timed
// phase.
type benchResult struct {
	loadResult
	UpConns            int            // TLS connections the upstream accepted in the timed phase
	HostCPU            float64        // the host's CPU seconds in the timed phase
	Alloc, Mallocs     float64        // serve's runtime counters in the timed phase (-1: not read)
	HostCalls, UpCalls int            // syscalls under strace (syscall runs only)
	HostByName         map[string]int // the host's syscalls by name (syscall runs only)
	failWhy            string
}

const benchKey = "BENCH_KEY"

// benchPod is one upstream process, a pod rendered for it twice (for
// custodian serve and for Envoy with the module) and both hosts running.
type benchPod struct {
	dir, target, value string
	upPid              int
	statsAddr          string
	upCA, podCA        string
	serve, envoy       *Running
	// The transformed copies of the module's envoy.json, by host name
	// (envoyVariants, benchenvoy_test.go).
	variants map[string]*Running
	floor    string    // the floor's egress (benchfloor_test.go)
	floorCmd *exec.Cmd // its process, for its CPU time
	envoyWhy string
}

func newBenchPod(b *testing.B) *benchPod {
	tmp := b.TempDir()
	ca := testpki.NewCA(b, "bench upstream CA")
	leaf := ca.Leaf(b, "127.0.0.1")
	mustWrite(b, filepath.Join(tmp, "leaf.pem"), string(leaf.CertPEM), 0o600)
	mustWrite(b, filepath.Join(tmp, "leaf.key"), string(leaf.KeyPEM), 0o600)
	p := &benchPod{dir: tmp, value: sentinel(b, benchKey), upCA: ca.WriteFile(b, tmp, "upstream-ca.pem")}

	up, line := startBenchRole(b, "benchupstream", tmp)
	if _, err := fmt.Sscanf(line, "listening %s stats %s", &p.target, &p.statsAddr); err != nil {
		b.Fatalf("bench upstream: %q %v", line, err)
	}
	p.upPid = up.Process.Pid

	// The floor (benchfloor_test.go), with a leaf of the upstream's CA.
	fl := ca.Leaf(b, "127.0.0.1")
	mustWrite(b, filepath.Join(tmp, "floor.pem"), string(fl.CertPEM), 0o600)
	mustWrite(b, filepath.Join(tmp, "floor.key"), string(fl.KeyPEM), 0o600)
	fc, line := startBenchRole(b, "benchfloor", tmp)
	if _, err := fmt.Sscanf(line, "listening %s", &p.floor); err != nil {
		b.Fatalf("bench floor: %q %v", line, err)
	}
	p.floorCmd = fc

	values := filepath.Join(tmp, "values")
	mustMkdir(b, values)
	mustWrite(b, filepath.Join(values, benchKey), p.value+"\n", 0o600)
	mustWrite(b, filepath.Join(values, contract.TokenName), sentinel(b, contract.TokenName)+"\n", 0o600)
	m, _ := json.Marshal(manifest{Pod: "bench", Orchestrator: "127.0.0.1:9", Secrets: []manifestSecret{
		{Name: benchKey, Hosts: []string{p.target}, Headers: []string{"x-api-key"}},
	}})
	mustWrite(b, filepath.Join(tmp, "held.json"), string(m), 0o644)
	runTool(b, bins.controlplane, "ca", "init", "--dir", filepath.Join(tmp, "ca"))
	render := func(dir string, extra ...string) {
		runTool(b, bins.controlplane, append([]string{"render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", filepath.Join(tmp, "ca"),
			"--out", dir, "--ca-bundle", p.upCA, "--values-dir", values, "--allow-local-targets"}, extra...)...)
	}

	// custodian serve, built with its allocation counters (benchstats).
	tagged := filepath.Join(bins.dir, "custodian-bench")
	if err := goBuildArgs(tagged, "./custodian", "-tags", "jr2bench"); err != nil {
		b.Fatal(err)
	}
	render(filepath.Join(tmp, "pod-serve"))
	p.serve = serveHost{bin: tagged}.Start(b, filepath.Join(tmp, "pod-serve"), "")
	p.podCA = filepath.Join(tmp, "pod-serve", "ca", "extra.crt")

	switch bin, err := envoyBinary(); {
	case err != nil:
		p.envoyWhy = err.Error()
	case bins.module == "":
		p.envoyWhy = fmt.Sprintf("the dynamic module did not build: %v", bins.moduleErr)
	default:
		h := envoyHost{bin: bin, module: bins.module, podLog: true} // as the pod runs it
		render(filepath.Join(tmp, "pod-envoy"), h.RenderArgs()...)
		p.envoy = h.Start(b, filepath.Join(tmp, "pod-envoy"), "")
		noop := filepath.Join(tmp, "benchnoop.so")
		if err := goBuildShared(noop, "./internal/testkit/benchnoop"); err != nil {
			b.Fatal(err)
		}
		cnoop := filepath.Join(tmp, "benchnoop-c.so")
		if err := ccBuildShared(cnoop, "internal/testkit/benchnoop/c/noop.c"); err != nil {
			b.Fatal(err)
		}
		p.variants = map[string]*Running{}
		for _, v := range envoyVariants(p.target, noop, cnoop) {
			p.variants[v.name] = p.startEnvoyVariant(b, bin, filepath.Join(tmp, "pod-envoy"), v.name, v.benchEnvoyVariant)
		}
	}
	return p
}

// startBenchRole starts this test binary as role, with dir as its
// benchDirEnv, and returns it and the first line it printed; it runs until
// the benchmark's cleanup closes its stdin.
func startBenchRole(b *testing.B, role, dir string) (*exec.Cmd, string) {
	cmd := exec.Command(bins.self)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, benchDirEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("bench %s: %q %v", role, line, err)
	}
	return cmd, line
}

// goBuildArgs builds pkg into out with extra go build flags.
func goBuildArgs(out, pkg string, flags ...string) error {
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), pkg)...)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// spec completes s for host h: the URL, the proxy, the roots, the key.
func (p *benchPod) spec(h string, s loadSpec) loadSpec {
	s.URL = "https://" + p.target + "/v1/echo"
	if s.Mode == "sse" {
		s.URL = "https://" + p.target + "/v1/sse"
	}
	switch h {
	case "direct":
		s.CAFile, s.Key = p.upCA, p.value
	case "floor":
		s.Proxy, s.CAFile, s.Key = "http://"+p.floor, p.upCA, p.value
	case "serve":
		s.Proxy, s.CAFile, s.Key = "http://"+p.serve.Egress, p.podCA, standIn(benchKey)
	case "envoy":
		s.Proxy, s.CAFile, s.Key = "http://"+p.envoy.Egress, p.podCA, standIn(benchKey)
	default: // a variant
		r := p.variants[h]
		s.Proxy, s.CAFile, s.Key = "http://"+r.Egress, p.podCA, standIn(benchKey)
		if r.Intercept != "" { // TLS to the intercept listener, no CONNECT
			s.Proxy, s.Addr = "", r.Intercept
		}
	}
	return s
}

// host is the running host h, or nil for direct.
func (p *benchPod) host(h string) *Running {
	switch h {
	case "serve":
		return p.serve
	case "envoy":
		return p.envoy
	case "floor":
		return &Running{cmd: p.floorCmd}
	}
	return p.variants[h]
}

// load is one benchload process between its warm-up and its timed phase.
type load struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func (p *benchPod) startLoad(b *testing.B, s loadSpec) (*load, error) {
	arg, _ := json.Marshal(s)
	cmd := exec.Command(bins.self, string(arg))
	cmd.Env = append(os.Environ(), roleEnv+"=benchload")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l := &load{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := l.out.ReadString('\n')
	if line != "warm\n" {
		l.stop()
		return nil, fmt.Errorf("warm-up: %s %v", strings.TrimPrefix(line, "done "), err)
	}
	return l, nil
}

// run starts the timed phase and returns its result.
func (l *load) run() (loadResult, error) {
	io.WriteString(l.stdin, "go\n")
	line, err := l.out.ReadString('\n')
	var r loadResult
	if !strings.HasPrefix(line, "done ") {
		return r, fmt.Errorf("no result: %q %v", line, err)
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "done ")), &r); err != nil {
		return r, err
	}
	if r.Err != "" {
		return r, fmt.Errorf("%s", r.Err)
	}
	return r, nil
}

func (l *load) stop() { l.stdin.Close(); l.cmd.Wait() }

// measure runs s against host h, with the upstream's connection count, the
// host's CPU time and serve's allocations read around the timed phase.
func (p *benchPod) measure(b *testing.B, h string, s loadSpec) benchResult {
	r := benchResult{Alloc: -1, Mallocs: -1}
	l, err := p.startLoad(b, p.spec(h, s))
	if err != nil {
		r.failWhy = err.Error()
		p.failed(h, s, err)
		return r
	}
	defer l.stop()
	host := p.host(h)
	conns0, cpu0 := p.upConns(b), cpuSeconds(host)
	alloc0, mallocs0, statsOK := p.allocStats(h)
	prof := startPerf(b, host, h, s)
	lr, err := l.run()
	prof.stop()
	if err != nil {
		r.failWhy = err.Error()
		p.failed(h, s, err)
		return r
	}
	r.loadResult = lr
	r.UpConns, r.HostCPU = p.upConns(b)-conns0, cpuSeconds(host)-cpu0
	if alloc1, mallocs1, ok := p.allocStats(h); ok && statsOK {
		r.Alloc, r.Mallocs = alloc1-alloc0, mallocs1-mallocs0
	}
	return r
}

// failed prints why a run failed and the host's last lines.
func (p *benchPod) failed(h string, s loadSpec, err error) {
	fmt.Printf("bench: %s %s %s: %v\n", h, s.Mode, cellName(s.Size, s.Conc), err)
	if host := p.host(h); host != nil {
		lines := host.out.Lines()
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Printf("bench: %s's last lines:\n  %s\n", h, strings.Join(lines, "\n  "))
	}
}

// syscalls runs s against host h with strace counting the host's and the
// upstream's syscalls in the timed phase.
func (p *benchPod) syscalls(b *testing.B, h string, s loadSpec) benchResult {
	r := benchResult{Alloc: -1, Mallocs: -1, HostCalls: -1, UpCalls: -1}
	if _, err := exec.LookPath("strace"); err != nil {
		fmt.Println("bench: strace not installed (apt-get install strace): the syscall rows are left out")
		return r
	}
	l, err := p.startLoad(b, p.spec(h, s))
	if err != nil {
		r.failWhy = err.Error()
		return r
	}
	defer l.stop()
	up := startStrace(b, p.upPid)
	var hs *strace
	if host := p.host(h); host != nil {
		hs = startStrace(b, treePids(host.cmd.Process.Pid)...)
	}
	lr, err := l.run()
	r.loadResult = lr
	r.UpCalls, _ = up.stop()
	if hs != nil {
		r.HostCalls, r.HostByName = hs.stop()
	}
	if err != nil {
		r.failWhy = err.Error()
	}
	return r
}

type strace struct {
	cmd *exec.Cmd
	out string
}

// startStrace attaches strace -c to every thread of pids.
func startStrace(b *testing.B, pids ...int) *strace {
	f := filepath.Join(b.TempDir(), "strace.txt")
	if dir := os.Getenv("JR2_BENCH_PERF_DIR"); dir != "" {
		f = filepath.Join(dir, fmt.Sprintf("strace-%d.txt", pids[0])) // the table by syscall, kept beside the profiles
	}
	args := []string{"-f", "-c", "-U", "calls,name", "-o", f}
	for _, pid := range pids {
		args = append(args, "-p", strconv.Itoa(pid))
	}
	cmd := exec.Command("strace", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// strace prints nothing when attached; give it the moment it takes to
	// attach to every thread.
	time.Sleep(300 * time.Millisecond)
	return &strace{cmd: cmd, out: f}
}

// stop detaches strace and returns the syscalls it counted, or -1, and
// the count of each by name.
func (s *strace) stop() (int, map[string]int) {
	s.cmd.Process.Signal(syscall.SIGINT)
	s.cmd.Wait()
	data, err := os.ReadFile(s.out)
	if err != nil {
		return -1, nil
	}
	total, byName := -1, map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		if f[1] == "total" {
			total = n
		} else {
			byName[f[1]] = n
		}
	}
	return total, byName
}

// perf is one `perf record` of a host's timed phase, or nil.
type perf struct{ cmd *exec.Cmd }

// startPerf records a call-graph profile of host r through the timed phase
// of s when JR2_BENCH_PERF_DIR names a directory (the profiles a row's
// stated limit points at): one file per host and cell,
// DIR/<host>-<mode>-<cell>.perf.data, read with `perf report -i`. Without
// the variable, or without perf, it does nothing.
func startPerf(b *testing.B, r *Running, h string, s loadSpec) *perf {
	dir := os.Getenv("JR2_BENCH_PERF_DIR")
	if dir == "" || r == nil {
		return nil
	}
	if _, err := exec.LookPath("perf"); err != nil {
		fmt.Println("bench: JR2_BENCH_PERF_DIR is set but perf is not installed (apt-get install linux-perf): no profile")
		return nil
	}
	name := strings.NewReplacer(" ", "-", "=", "").Replace(fmt.Sprintf("%s-%s-%s", h, s.Mode, cellName(s.Size, s.Conc)))
	var pids []string
	for _, pid := range treePids(r.cmd.Process.Pid) {
		pids = append(pids, strconv.Itoa(pid))
	}
	cmd := exec.Command("perf", "record", "-q", "-g", "-F", "1999", "-p", strings.Join(pids, ","),
		"-o", filepath.Join(dir, name+".perf.data"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // perf attaches silently
	return &perf{cmd: cmd}
}

func (p *perf) stop() {
	if p != nil {
		p.cmd.Process.Signal(syscall.SIGINT)
		p.cmd.Wait()
	}
}

// upConns is how many TLS connections the upstream has accepted.
func (p *benchPod) upConns(b *testing.B) int {
	resp, err := http.Get("http://" + p.statsAddr + "/")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	n, _ := strconv.Atoi(string(data))
	return n
}

// cpuSeconds is the user and system time of r's process and its
// descendants (Envoy under custodian envoy), all threads, or 0 for none.
func cpuSeconds(r *Running) float64 {
	if r == nil {
		return 0
	}
	t := 0.0
	for _, pid := range treePids(r.cmd.Process.Pid) {
		t += pidCPUSeconds(pid)
	}
	return t
}

func pidCPUSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name's closing parenthesis; utime and
	// stime are the stat file's 14th and 15th, in clock ticks (100 Hz).
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// allocStats asks the jr2bench custodian for its runtime counters.
func (p *benchPod) allocStats(h string) (alloc, mallocs float64, ok bool) {
	if h != "serve" {
		return 0, 0, false
	}
	const prefix = "stderr: jr2-bench-stats "
	count := func() (int, string) {
		n, last := 0, ""
		for _, l := range p.serve.out.Lines() {
			if strings.HasPrefix(l, prefix) {
				n, last = n+1, l
			}
		}
		return n, last
	}
	before, _ := count()
	p.serve.cmd.Process.Signal(syscall.SIGUSR1)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if n, last := count(); n > before {
			var a, m float64
			if _, err := fmt.Sscanf(strings.TrimPrefix(last, prefix), "total_alloc_bytes=%g mallocs=%g", &a, &m); err != nil {
				return 0, 0, false
			}
			return a, m, true
		}
	}
	return 0, 0, false
}

// goal is one row of the table: a figure, its value, what it must be.
// table prints the figures as ratios beside their goals.
func (p *benchPod) table(w io.Writer, hosts []string, res map[string]benchResult) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "the Custodian's hosts vs direct (one run)\t"
	for _, h := range hosts {
		head += h + "\t"
	}
	for _, h := range hosts[1:] {
		head += h + "/direct\t"
	}
	fmt.Fprintln(tw, head)
	val := func(r benchResult, what string) float64 {
		if r.failWhy != "" || r.N == 0 {
			return 0
		}
		switch what {
		case "rps":
			return float64(r.N) / r.Seconds
		case "p50":
			return r.P50
		case "p99":
			return r.P99
		}
		return 0
	}
	row := func(label, key, what, unit string, added bool) {
		line := label + "\t"
		d := val(res["direct/"+key], what)
		for _, h := range hosts {
			r, ok := res[h+"/"+key]
			v := val(r, what)
			switch {
			case !ok:
				line += "-\t" // not measured for this host
				continue
			case v == 0:
				line += "failed\t"
				continue
			}
			line += fmt.Sprintf("%.0f %s\t", v, unit)
		}
		for _, h := range hosts[1:] {
			v := val(res[h+"/"+key], what)
			switch {
			case v == 0 || d == 0:
				line += "-\t"
			case added:
				line += fmt.Sprintf("%+.0f %s\t", v-d, unit)
			default:
				line += fmt.Sprintf("%.2f×\t", v/d)
			}
		}
		fmt.Fprintln(tw, line)
	}
	for _, c := range []string{"1KiB c=1", "1KiB c=32", "1MiB c=1", "1MiB c=32"} {
		row("requests/s, keep-alive, "+c, c, "rps", "req/s", false)
		row("latency p50 (added), "+c, c, "p50", "µs", true)
		row("latency p99 (added), "+c, c, "p99", "µs", true)
	}
	row("first SSE event p50 (added)", "sse", "p50", "µs", true)
	row("first SSE event p99 (added)", "sse", "p99", "µs", true)
	fmt.Fprintln(tw)

	// Per request, from the same runs (strace's from runs of their own).
	fmt.Fprintln(tw, "per request\t"+strings.Join(hosts, "\t")+"\t")
	per := func(label string, f func(r benchResult) string) {
		line := label + "\t"
		for _, h := range hosts {
			line += f(res[h+"/1KiB c=32"]) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	perKey := func(label, key string, f func(r benchResult) string) {
		line := label + "\t"
		for _, h := range hosts {
			line += f(res[h+"/"+key]) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	div := func(v float64, n int, format string) string {
		if n == 0 || v < 0 {
			return "-"
		}
		return fmt.Sprintf(format, v/float64(n))
	}
	per("new upstream connections, 1KiB c=32, warm", func(r benchResult) string { return div(float64(r.UpConns), r.N, "%.4f") })
	per("new client connections, 1KiB c=32, warm", func(r benchResult) string { return div(float64(r.Dials), r.N, "%.4f") })
	for _, c := range []string{"1KiB c=1", "1KiB c=32", "1MiB c=1"} {
		perKey("host CPU µs, "+c, c, func(r benchResult) string {
			if r.HostCPU == 0 {
				return "-"
			}
			return div(r.HostCPU*1e6, r.N, "%.0f")
		})
		perKey("host bytes allocated, "+c, c, func(r benchResult) string { return div(r.Alloc, r.N, "%.0f") })
		perKey("host allocations, "+c, c, func(r benchResult) string { return div(r.Mallocs, r.N, "%.1f") })
	}
	for _, c := range []string{"1KiB c=1", "1MiB c=1"} {
		perKey("host syscalls (strace), "+c, "strace/"+c, func(r benchResult) string {
			if r.HostCalls < 0 {
				return "-"
			}
			return div(float64(r.HostCalls), r.N, "%.1f")
		})
		perKey("upstream syscalls (strace), "+c, "strace/"+c, func(r benchResult) string {
			return div(float64(r.UpCalls), r.N, "%.1f")
		})
	}
	fmt.Fprintln(tw)
	tw.Flush()

	ratio := func(h, key string) float64 {
		d, v := val(res["direct/"+key], "rps"), val(res[h+"/"+key], "rps")
		if d == 0 {
			return 0
		}
		return v / d
	}
	s := res["serve/1KiB c=32"]
	conns := -1.0
	if s.N > 0 {
		conns = float64(s.UpConns)
	}
	floor1, floor32 := ratio("floor", "1KiB c=1"), ratio("floor", "1KiB c=32")
	serveLimit := func(floor float64) string {
		return fmt.Sprintf("the floor (a TLS byte relay doing none of the Custodian's work) is at %.2f× here; "+
			"what serve adds above it is net/http's server per request (its background read, deadline timers) and "+
			"goroutine wake-ups, not the engine (JR2_BENCH_PERF_DIR=DIR make bench-serve keeps the perf profiles)", floor)
	}
	bigLimit := func(floor float64) string {
		return fmt.Sprintf("the floor is at %.2f× here for 1 MiB; above it serve scrubs every byte of the answer as it streams (the scrubber's own rate is its row above) on the same two cores as the load and the upstream", floor)
	}
	goals := []benchgoal.Row{
		{Figure: "custodian serve ÷ direct, 1 KiB keep-alive, c=1", Value: ratio("serve", "1KiB c=1"), OK: func(v float64) bool { return v >= 0.6 }, Want: "≥ 0.6×", Format: "%.2f×", Limit: serveLimit(floor1)},
		{Figure: "custodian serve p50 added, 1 KiB, c=1", Value: val(res["serve/1KiB c=1"], "p50") - val(res["direct/1KiB c=1"], "p50"), OK: func(v float64) bool { return v <= 120 }, Want: "≤ +120 µs", Format: "%+.0f µs",
			Limit: fmt.Sprintf("the floor adds %+.0f µs; the rest as the row above", val(res["floor/1KiB c=1"], "p50")-val(res["direct/1KiB c=1"], "p50"))},
		{Figure: "custodian serve ÷ direct, 1 KiB keep-alive, c=32", Value: ratio("serve", "1KiB c=32"), OK: func(v float64) bool { return v >= 0.5 }, Want: "≥ 0.5×", Format: "%.2f×", Limit: serveLimit(floor32)},
		{Figure: "custodian serve ÷ direct, 1 MiB, c=1", Value: ratio("serve", "1MiB c=1"), OK: func(v float64) bool { return v >= 0.5 }, Want: "≥ 0.5×", Format: "%.2f×", Limit: bigLimit(ratio("floor", "1MiB c=1"))},
		{Figure: "custodian serve ÷ direct, 1 MiB, c=32", Value: ratio("serve", "1MiB c=32"), OK: func(v float64) bool { return v >= 0.5 }, Want: "≥ 0.5×", Format: "%.2f×", Limit: bigLimit(ratio("floor", "1MiB c=32"))},
		{Figure: "custodian serve new upstream connections once warm, 1 KiB c=32", Value: conns, OK: func(v float64) bool { return v == 0 }, Want: "0", Format: "%.0f"},
		{Figure: "the floor ÷ direct, 1 KiB c=1", Value: floor1, Want: "(measured)", Format: "%.2f×"},
		{Figure: "the floor ÷ direct, 1 KiB c=32", Value: floor32, Want: "(measured)", Format: "%.2f×"},
	}
	if p.envoy != nil {
		goals = append(goals, envoyGoals(res, val, ratio)...)
	}
	if err := benchgoal.Print(w, goals); err != nil {
		fmt.Fprintln(w, "bench:", err)
	}
}

// benchPost sends body and reads the whole answer, which must be body.
func benchPost(c *http.Client, u, key string, body []byte) (time.Duration, error) {
	req, _ := http.NewRequest("POST", u, bytes.NewReader(body))
	req.Header.Set("x-api-key", key)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
		if resp.StatusCode != 200 && len(got) < 512 {
			return 0, fmt.Errorf("POST %d bytes: %d %q, %v", len(body), resp.StatusCode, got, err)
		}
		return 0, fmt.Errorf("POST %d bytes: %d, %d bytes back, %v", len(body), resp.StatusCode, len(got), err)
	}
	return d, nil
}

// benchFirstEvent times a stream's first event, then drains the stream so
// the connection is kept.
func benchFirstEvent(c *http.Client, u, key string) (time.Duration, error) {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("x-api-key", key)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	d := time.Since(start)
	if err != nil || line != "data: first\n" {
		return 0, fmt.Errorf("first event %q: %v", line, err)
	}
	io.Copy(io.Discard, resp.Body)
	return d, nil
}

// benchUpstream answers POST with the body it got, and GET /v1/sse with two
// events 1 ms apart.
func benchUpstream(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/sse" {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(time.Millisecond)
		io.WriteString(w, "data: last\n\n")
		return
	}
	// HTTP/1 in Go is not full duplex: read the whole body, then answer.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(body)
}

// percentile is the q-th percentile of ds in µs.
func percentile(ds []time.Duration, q int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*q + 99) / 100
	if i > 0 {
		i--
	}
	return float64(s[i]) / float64(time.Microsecond)
}

// printable is n random printable bytes, lines of 64: text the scrubber
// reads as it would a model's answer.
func printable(n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;-_/+="
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i%65 == 64 {
			b.WriteByte('\n')
			continue
		}
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return []byte(b.String())
}

// partUS is partCost's CPU per request as text.
func partUS(res map[string]benchResult, base, host, cell string) string {
	if _, cpu, ok := partCost(res, base, host, cell); ok {
		return fmt.Sprintf("%+.0f µs", cpu)
	}
	return "not measured"
}

// extraCalls names the syscalls a makes per request beyond b, most first.
func extraCalls(a, b benchResult) string {
	if a.N == 0 || b.N == 0 || a.HostByName == nil || b.HostByName == nil {
		return "not counted"
	}
	type extra struct {
		name string
		per  float64
	}
	var xs []extra
	for n, c := range a.HostByName {
		if d := float64(c)/float64(a.N) - float64(b.HostByName[n])/float64(b.N); d >= 0.05 {
			xs = append(xs, extra{n, d})
		}
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].per > xs[j].per })
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%s +%.1f", x.name, x.per))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// envoyGoals are the data plane's rows: core Envoy with the module against
// direct, against Envoy alone (the same envoy.json without the module,
// benchenvoy_test.go) and on two workers; a short row names, from this
// run, what Envoy alone costs, which the module cannot remove.
func envoyGoals(res map[string]benchResult, val func(benchResult, string) float64, ratio func(h, key string) float64) []benchgoal.Row {
	nice := strings.NewReplacer("KiB", " KiB", "MiB", " MiB").Replace
	perReq := func(h, key string) float64 { // host CPU µs per request, or -1
		r := res[h+"/"+key]
		if r.N == 0 || r.HostCPU == 0 {
			return -1
		}
		return r.HostCPU * 1e6 / float64(r.N)
	}
	calls := func(h, key string) float64 {
		r := res[h+"/strace/"+key]
		if r.N == 0 || r.HostCalls < 0 {
			return -1
		}
		return float64(r.HostCalls) / float64(r.N)
	}
	shareOf := func(h, key string) float64 { // h ÷ Envoy alone, requests/s
		a, m := val(res["envoy-alone/"+key], "rps"), val(res[h+"/"+key], "rps")
		if a == 0 || m == 0 {
			return -1
		}
		return m / a
	}
	share := func(key string) float64 { return shareOf("envoy", key) }
	var rows []benchgoal.Row
	for _, g := range []struct {
		cell string
		min  float64
	}{{"1KiB c=1", 0.5}, {"1KiB c=32", 0.5}, {"1MiB c=1", 0.7}, {"1MiB c=32", 0.6}} {
		min := g.min
		limit := fmt.Sprintf("Envoy alone (this envoy.json without the module) is at %.2f× here and the module keeps %.2f of Envoy alone's rate; "+
			"host CPU per request %.0f µs with the module, %.0f µs without (JR2_BENCH_PERF_DIR=DIR keeps both profiles). ",
			ratio("envoy-alone", g.cell), share(g.cell), perReq("envoy", g.cell), perReq("envoy-alone", g.cell))
		if strings.HasPrefix(g.cell, "1KiB") {
			limit += "Envoy alone's part (TLS ended and begun again, two connection managers per request) only another data plane than Envoy would remove; the module's part is split in its CPU row below"
		} else {
			limit += fmt.Sprintf("Of Envoy alone's rate, a C module doing nothing keeps %.2f (the hooks, one per chunk of the answer), a Go one %.2f (the Go runtime woken at each chunk: "+
				"only a module without a runtime would remove that, the engine then written twice), the module %.2f (its scrub of every byte, at the engine's rate, the same as serve's: "+
				"removing it is passing bytes unread)", shareOf("envoy-cnoop", g.cell), shareOf("envoy-noop", g.cell), share(g.cell))
		}
		rows = append(rows, benchgoal.Row{
			Figure: "Envoy + module ÷ direct, " + nice(g.cell), Value: ratio("envoy", g.cell),
			OK: func(v float64) bool { return v >= min }, Want: fmt.Sprintf("≥ %.1f×", min), Format: "%.2f×",
			Limit: limit,
		})
	}
	for _, c := range []string{"1KiB c=1", "1KiB c=32"} {
		cpu := -1.0
		if m, a := perReq("envoy", c), perReq("envoy-alone", c); m > 0 && a > 0 {
			cpu = m / a
		}
		rows = append(rows, benchgoal.Row{
			Figure: "Envoy + module host CPU per request ÷ Envoy alone, " + nice(c), Value: cpu,
			OK: func(v float64) bool { return v <= 1.25 }, Want: "≤ 1.25×", Format: "%.2f×",
			Limit: fmt.Sprintf("%.0f µs with the module against %.0f µs without; syscalls per request at 1 KiB c=1 (strace) %.1f against %.1f, "+
				"the module's extra ones by name: %s (nanosleep: the Go runtime's sysmon polling while Envoy's worker holds a P between hooks; "+
				"futex: its wake-ups and the GC's; write: Envoy's buffered log, the module's lines in it, flushed); "+
				"of the CPU, by the parts table (medians): the hooks' crossings (a C module doing nothing) %s, the Go runtime in Envoy (a Go module doing nothing, beyond the C one; "+
				"only a module without a runtime, not written in Go, would save it, and the engine would then be written twice) %s, the module's work (its ABI calls, the engine, its line; "+
				"it allocates nothing, and its Go code is a few percent of Envoy's samples: the rest is Envoy's side of its calls, not split in this stripped binary) %s, "+
				"jr2.rbac.mark (removing it removes the fail-closed guard) %s "+
				"(JR2_BENCH_PERF_DIR=DIR keeps the profiles; envoy/README.md#speed)",
				perReq("envoy", c), perReq("envoy-alone", c), calls("envoy", "1KiB c=1"), calls("envoy-alone", "1KiB c=1"),
				extraCalls(res["envoy/strace/1KiB c=1"], res["envoy-alone/strace/1KiB c=1"]),
				partUS(res, "envoy-cnoop", "envoy-alone", c), partUS(res, "envoy-noop", "envoy-cnoop", c), partUS(res, "envoy-nomark", "envoy-noop", c), partUS(res, "envoy", "envoy-nomark", c)),
		})
	}
	sseAdded := func(h string) float64 {
		v, d := val(res[h+"/sse"], "p50"), val(res["direct/sse"], "p50")
		if v == 0 || d == 0 {
			return -1e9
		}
		return v - d
	}
	rows = append(rows, benchgoal.Row{
		Figure: "Envoy + module first SSE event added, p50", Value: sseAdded("envoy"),
		OK: func(v float64) bool { return v > -1e9 && v <= 500 }, Want: "≤ +500 µs", Format: "%+.0f µs",
		Limit: fmt.Sprintf("Envoy alone adds %+.0f µs (only another data plane removes that); the rest is the module's hooks on the event's way, "+
			"each chunk scrubbed and passed in the call that brought it", sseAdded("envoy-alone")),
	})
	for _, c := range []string{"1KiB c=1", "1KiB c=32", "1MiB c=1", "1MiB c=32"} {
		rows = append(rows, benchgoal.Row{Figure: "Envoy alone ÷ direct, " + nice(c), Value: ratio("envoy-alone", c), Want: "(measured)", Format: "%.2f×"})
		rows = append(rows, benchgoal.Row{Figure: "the module's share: Envoy + module ÷ Envoy alone, " + nice(c), Value: share(c), Want: "(measured)", Format: "%.2f×"})
	}
	for _, c := range []string{"1KiB c=32", "1MiB c=32"} {
		two := -1.0
		if a, b := val(res["envoy/"+c], "rps"), val(res["envoy-2w/"+c], "rps"); a > 0 && b > 0 {
			two = b / a
		}
		rows = append(rows, benchgoal.Row{Figure: "Envoy + module, two workers ÷ one, " + nice(c), Value: two, Want: "(measured)", Format: "%.2f×"})
		rows = append(rows, benchgoal.Row{Figure: "Envoy + module, two workers, host CPU µs per request, " + nice(c), Value: perReq("envoy-2w", c), Want: "(measured)", Format: "%.0f"})
	}
	for _, c := range []string{"1KiB c=1", "1KiB c=32"} {
		gain := -1.0
		if a, b := val(res["envoy-gmp/"+c], "rps"), val(res["envoy-gmp1/"+c], "rps"); a > 0 && b > 0 {
			gain = b / a
		}
		rows = append(rows, benchgoal.Row{Figure: "module GOMAXPROCS=1 ÷ GOMAXPROCS=CPUs, one worker, requests/s, " + nice(c), Value: gain, Want: "(measured)", Format: "%.2f×"})
		rows = append(rows, benchgoal.Row{Figure: "module GOMAXPROCS=1 / =CPUs, host CPU µs per request, " + nice(c), Value: perReq("envoy-gmp1", c), Want: fmt.Sprintf("(%.0f)", perReq("envoy-gmp", c)), Format: "%.0f"})
	}
	rows = append(rows, benchgoal.Row{Figure: "module GOMAXPROCS=1 / =CPUs, host syscalls per request, 1 KiB c=1", Value: calls("envoy-gmp1", "1KiB c=1"), Want: fmt.Sprintf("(%.1f)", calls("envoy-gmp", "1KiB c=1")), Format: "%.1f"})
	return rows
}
