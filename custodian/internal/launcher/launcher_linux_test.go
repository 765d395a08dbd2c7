//go:build linux

package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/internal/landlock"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// modeEnv makes the test binary play a part in a subprocess: "probe" (the
// contained command, reporting what it can do), or a runner that a test
// signals, kills or lets panic.
const modeEnv = "JR2_LAUNCHER_TEST_MODE"

func TestMain(m *testing.M) {
	MaybeChild()
	switch os.Getenv(modeEnv) {
	case "":
		os.Exit(m.Run())
	case "probe":
		os.Exit(probe())
	case "inject":
		os.Exit(inject())
	case "sweep":
		if _, err := Sweep(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	default:
		os.Exit(runner(os.Getenv(modeEnv)))
	}
}

// requireRoot skips loudly where namespaces cannot be made.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PROVEN: needs root to make network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("SKIPPED, NOT PROVEN: needs iproute2")
	}
	landlocktest.Require(t, MinLandlockABI)
}

// systemReads are the read paths a dynamically linked program needs.
func systemReads() []string {
	var out []string
	for _, p := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func newNetwork(t *testing.T) *Network {
	t.Helper()
	n, err := NewNetwork()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		assertGone(t, n.Name)
	})
	return n
}

// assertGone fails t if anything of the run named name is left.
func assertGone(t *testing.T, name string) {
	t.Helper()
	for _, p := range []string{
		filepath.Join(netnsDir, name), filepath.Join(netnsDir, name+mediatorNS), filepath.Join(etcNetns, name),
	} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left behind (%v)", p, err)
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if bytes.Contains(out, []byte(name)) {
		t.Errorf("ip netns list still shows %s:\n%s", name, out)
	}
}

// serve accepts on ln until it closes, handling each conn in its own
// goroutine and closing it afterwards.
func serve(ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// probeResult is what the contained probe reports: for each check, "ok",
// an errno name, or a value.
type probeResult map[string]string

// TestContained runs the probe contained and checks every wall.
func TestContained(t *testing.T) {
	requireRoot(t)
	n := newNetwork(t)
	ln, err := n.ListenTCP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serve(ln, func(c net.Conn) { io.WriteString(c, "mediator") })
	// A caught port: a dial to any address on it lands at the mediator,
	// which sees the address dialled.
	caught, err := n.CatchTCP(4433)
	if err != nil {
		t.Fatal(err)
	}
	defer caught.Close()
	serve(caught, func(c net.Conn) { io.WriteString(c, "caught "+c.LocalAddr().String()) })
	// A host service on every address, at the same port: the child must
	// not reach it through the mediator's address.
	hostLn, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()

	readDir, writeDir, outside, hiddenDir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(readDir, "r"), []byte("readable"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644)
	bundle := filepath.Join(hiddenDir, "run.jsonl")
	os.WriteFile(bundle, []byte("{}\n"), 0o600)
	self, _ := os.Executable()
	// A host daemon's Unix socket outside every path the child may reach
	// (a container engine's, an ssh-agent's): the child must not reach it.
	hostSock := filepath.Join(outside, "daemon.sock")
	unixLn, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	defer unixLn.Close()
	serve(unixLn, func(c net.Conn) { io.WriteString(c, "host daemon") })

	medPort := ln.Addr().(*net.TCPAddr).Port
	hostPort := hostLn.Addr().(*net.TCPAddr).Port
	env := []string{
		modeEnv + "=probe",
		"PROBE_READ=" + filepath.Join(readDir, "r"),
		"PROBE_READ_DIR=" + readDir,
		"PROBE_WRITE_DIR=" + writeDir,
		"PROBE_OUTSIDE=" + filepath.Join(outside, "secret"),
		"PROBE_OUTSIDE_DIR=" + outside,
		"PROBE_BUNDLE=" + bundle,
		"PROBE_MEDIATOR=" + net.JoinHostPort(n.Mediator.String(), strconv.Itoa(medPort)),
		"PROBE_HOST_SERVICE=" + net.JoinHostPort(n.Mediator.String(), strconv.Itoa(hostPort)),
		"PROBE_RUNNER_PID=" + strconv.Itoa(os.Getpid()),
		"PROBE_CAUGHT=192.0.2.7:4433",
		"PROBE_NOT_CAUGHT=192.0.2.7:4434",
		"PROBE_HOST_UNIX=" + hostSock,
	}
	var stdout, stderr bytes.Buffer
	code, err := n.Run(context.Background(), Spec{
		Argv:       []string{self, "-test.run=^$"},
		Env:        env,
		Dir:        writeDir,
		ReadPaths:  append(systemReads(), filepath.Dir(self), readDir, "/proc"),
		WritePaths: []string{writeDir},
		Hidden:     []string{bundle},
		Stdout:     &stdout,
		Stderr:     &stderr,
	})
	if err != nil || code != 0 {
		t.Fatalf("probe: exit %d, %v\nstderr: %s", code, err, stderr.String())
	}
	var got probeResult
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("probe output %q: %v", stdout.String(), err)
	}
	want := probeResult{
		"read-allowed":       "ok",
		"read-outside":       "EACCES",
		"list-outside":       "EACCES",
		"read-bundle":        "EACCES",
		"write-allowed":      "ok",
		"write-in-read-path": "EACCES",
		"write-outside":      "EACCES",
		"CapInh":             "0000000000000000",
		"CapPrm":             "0000000000000000",
		"CapEff":             "0000000000000000",
		"CapBnd":             "0000000000000000",
		"CapAmb":             "0000000000000000",
		"NoNewPrivs":         "1",
		"Seccomp":            "2",
		"unshare":            "EPERM",
		"clone-newuser":      "EPERM",
		"clone3":             "ENOSYS",
		"mount":              "EPERM",
		"ptrace":             "EPERM",
		"keyctl":             "EPERM",
		"getpid":             "ok",
		"fork":               "ok",
		"connect-internet":   "ENETUNREACH",
		"connect-mediator":   "mediator",
		"connect-caught":     "caught 192.0.2.7:4433",
		"connect-not-caught": "ENETUNREACH",
		"connect-host-port":  "ECONNREFUSED",
		"connect-ipv6":       "not ok",
		"connect-host-unix":  hostUnixWant(),
		"socket-vsock":       "EPERM",
		"socketpair-unix":    "ok",
		"routes":             n.Prefix.String(),
		"resolv.conf":        "nameserver " + n.Mediator.String(),
		"signal-runner":      "EPERM",
	}
	for k, w := range want {
		g := got[k]
		if w == "not ok" && g != "ok" && g != "" {
			continue
		}
		if g != w {
			t.Errorf("%s: %q, want %q", k, g, w)
		}
	}
	if t.Failed() {
		t.Logf("probe report: %v\nstderr: %s", got, stderr.String())
	}
}

// hostUnixWant is what a connect to a host daemon's Unix socket outside
// every allowed path gives: the filter's EPERM where Landlock cannot check
// it, Landlock's EACCES where it can (ABI 9).
func hostUnixWant() string {
	if abi, err := landlock.Probe(); err == nil && UnixSockets(abi) {
		return "EACCES"
	}
	return "EPERM"
}

// probe runs inside the contained child and reports on stdout.
func probe() int {
	r := probeResult{}
	try := func(name string, err error) {
		if err == nil {
			r[name] = "ok"
			return
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r[name] = unix.ErrnoName(errno)
		} else {
			r[name] = err.Error()
		}
	}
	readFile := func(p string) error { _, err := os.ReadFile(p); return err }
	writeFile := func(dir string) error { return os.WriteFile(filepath.Join(dir, "w"), []byte("x"), 0o644) }
	try("read-allowed", readFile(os.Getenv("PROBE_READ")))
	try("read-outside", readFile(os.Getenv("PROBE_OUTSIDE")))
	_, err := os.ReadDir(os.Getenv("PROBE_OUTSIDE_DIR"))
	try("list-outside", err)
	try("read-bundle", readFile(os.Getenv("PROBE_BUNDLE")))
	try("write-allowed", writeFile(os.Getenv("PROBE_WRITE_DIR")))
	try("write-in-read-path", writeFile(os.Getenv("PROBE_READ_DIR")))
	try("write-outside", writeFile(os.Getenv("PROBE_OUTSIDE_DIR")))

	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if strings.HasPrefix(k, "Cap") || k == "NoNewPrivs" || k == "Seccomp" {
				r[k] = strings.TrimSpace(v)
			}
		}
	}
	try("unshare", unix.Unshare(unix.CLONE_NEWUSER))
	try("clone-newuser", rawClone(unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD)))
	try("fork", rawClone(uintptr(unix.SIGCHLD)))
	_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
	try("clone3", errnoOrNil(e))
	try("mount", unix.Mount("none", "/tmp", "tmpfs", 0, ""))
	_, _, e = unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	try("ptrace", errnoOrNil(e))
	_, _, e = unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, 0, 0)
	try("keyctl", errnoOrNil(e))
	_, _, e = unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
	try("getpid", errnoOrNil(e))

	_, err = net.DialTimeout("tcp4", "1.1.1.1:80", 3*time.Second)
	try("connect-internet", err)
	for _, d := range [][2]string{{"connect-mediator", "PROBE_MEDIATOR"}, {"connect-caught", "PROBE_CAUGHT"}} {
		if c, err := net.DialTimeout("tcp4", os.Getenv(d[1]), 3*time.Second); err != nil {
			try(d[0], err)
		} else {
			b, _ := io.ReadAll(c)
			r[d[0]] = string(b)
			c.Close()
		}
	}
	_, err = net.DialTimeout("tcp4", os.Getenv("PROBE_NOT_CAUGHT"), 3*time.Second)
	try("connect-not-caught", err)
	_, err = net.DialTimeout("tcp4", os.Getenv("PROBE_HOST_SERVICE"), 3*time.Second)
	try("connect-host-port", err)
	_, err = net.DialTimeout("tcp6", "[::1]:80", 3*time.Second)
	try("connect-ipv6", err)
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	try("socket-vsock", err)
	if err == nil {
		unix.Close(fd)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	try("socketpair-unix", err)
	if err == nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
	}
	if c, err := net.DialTimeout("unix", os.Getenv("PROBE_HOST_UNIX"), 3*time.Second); err != nil {
		try("connect-host-unix", err)
	} else {
		b, _ := io.ReadAll(c)
		r["connect-host-unix"] = string(b)
		c.Close()
	}
	r["routes"] = routes()
	resolv, err := os.ReadFile("/etc/resolv.conf")
	r["resolv.conf"] = strings.TrimSpace(string(resolv))
	if err != nil {
		try("resolv.conf", err)
	}
	pid, _ := strconv.Atoi(os.Getenv("PROBE_RUNNER_PID"))
	try("signal-runner", unix.Kill(pid, 0))
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

func errnoOrNil(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// rawClone forks with flags; the copy exits at once. It reports the
// parent's result.
func rawClone(flags uintptr) error {
	pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	if pid == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws unix.WaitStatus
	unix.Wait4(int(pid), &ws, 0, nil)
	return nil
}

// routes lists the IPv4 routes of the namespace as prefixes.
func routes() string {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, _ := strconv.ParseUint(f[1], 16, 32)
		mask, _ := strconv.ParseUint(f[7], 16, 32)
		ones := bitsSet(uint32(mask))
		out = append(out, fmt.Sprintf("%d.%d.%d.%d/%d", dst&0xff, dst>>8&0xff, dst>>16&0xff, dst>>24, ones))
	}
	return strings.Join(out, ",")
}

func bitsSet(v uint32) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}

func TestExitCodeAndShell(t *testing.T) {
	requireRoot(t)
	n := newNetwork(t)
	var stdout bytes.Buffer
	code, err := n.Run(context.Background(), Spec{
		Argv:      []string{"sh", "-c", "cat /etc/resolv.conf; exit 7"},
		Env:       []string{"PATH=/usr/bin:/bin"},
		ReadPaths: systemReads(),
		Stdout:    &stdout,
	})
	if err != nil || code != 7 {
		t.Fatalf("exit %d, %v; want 7", code, err)
	}
	if got := stdout.String(); got != "nameserver "+n.Mediator.String()+"\n" {
		t.Errorf("resolv.conf in the child: %q", got)
	}
}

func TestRefusals(t *testing.T) {
	requireRoot(t)
	n := newNetwork(t)
	hidden := filepath.Join(t.TempDir(), "run.jsonl")
	os.WriteFile(hidden, nil, 0o600)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(filepath.Dir(hidden), link)
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"bundle under a read path", Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{filepath.Dir(hidden)}, Hidden: []string{hidden}},
			"would let the child reach"},
		{"bundle under a symlinked write path", Spec{Argv: []string{"/bin/true"}, WritePaths: []string{link}, Hidden: []string{hidden}},
			"would let the child reach"},
		{"root read path", Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{"/"}, Hidden: []string{hidden}},
			"would let the child reach"},
		{"relative path", Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{"usr"}}, "is not absolute"},
		{"missing path", Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{"/nonexistent/jr2"}}, "no such file"},
		{"no command", Spec{}, "no command"},
	} {
		_, err := n.Start(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	_, err := n.Start(Spec{Argv: []string{"no-such-command"}, Env: []string{"PATH=/usr/bin:/bin"}, ReadPaths: systemReads()})
	var ce *ChildError
	if !errors.As(err, &ce) || ce.Step != "exec-not-found" || ce.Code != 127 {
		t.Errorf("missing command: %v", err)
	}
	// A program outside the read paths is refused by Landlock at execve.
	_, err = n.Start(Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{"/etc/ld.so.cache"}})
	if !errors.As(err, &ce) || ce.Step != "exec" || ce.Code != 126 || !strings.Contains(ce.Reason, "permission denied") {
		t.Errorf("program outside the read paths: %v", err)
	}
}

// TestNoLandlockNoRun: where Landlock is missing, the child refuses at the
// landlock step and the command never runs.
func TestNoLandlockNoRun(t *testing.T) {
	requireRoot(t)
	marker := filepath.Join(t.TempDir(), "ran")
	out, code := subprocess(t, "nolandlock", marker)
	if code != 0 || !strings.Contains(out, "step=landlock code=114") || !strings.Contains(out, "ENOSYS") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran without Landlock")
	}
}

// TestCleanupOnSignal: SIGTERM to the runner reaches the child, and the
// runner removes its namespaces and resolv.conf before it exits.
func TestCleanupOnSignal(t *testing.T) {
	requireRoot(t)
	cmd, lines := startRunner(t, "signal", "")
	name := <-lines
	if ready := <-lines; ready != "ready" {
		t.Fatalf("runner said %q", ready)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	err := cmd.Wait()
	if err != nil || len(rest) != 1 || rest[0] != "exit 143" {
		t.Fatalf("runner: %v, said %q; want exit 143 (the child's SIGTERM)", err, rest)
	}
	assertGone(t, name)
}

// TestCleanupOnPanic: a panic in the runner's goroutine runs its deferred
// Close.
func TestCleanupOnPanic(t *testing.T) {
	requireRoot(t)
	out, code := subprocess(t, "panic", "")
	name, _, _ := strings.Cut(out, "\n")
	if code != 2 || !strings.Contains(out, "panic: boom") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	assertGone(t, name)
}

// TestSweep: a runner killed outright leaves its namespaces; Sweep removes
// them, and leaves a live runner's alone.
func TestSweep(t *testing.T) {
	requireRoot(t)
	live := newNetwork(t)
	cmd, lines := startRunner(t, "hold", "")
	name := <-lines
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(netnsDir, name)); err != nil {
		t.Fatalf("the killed runner's namespace is already gone: %v", err)
	}
	removed, err := Sweep()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range removed {
		found = found || r == name
		if r == live.Name {
			t.Errorf("Sweep removed a live run's namespace %s", r)
		}
	}
	if !found {
		// Another test binary's run may have swept it first (custodian
		// run sweeps at start, and go test runs packages in parallel);
		// assertGone still fails if nobody did.
		t.Logf("Sweep removed %v, not %s", removed, name)
	}
	assertGone(t, name)
	if _, err := os.Stat(filepath.Join(netnsDir, live.Name)); err != nil {
		t.Errorf("the live run's namespace: %v", err)
	}
}

// TestSweepKillsLeftovers: a runner killed outright leaves its command's
// daemon running in the run's namespace; the next Sweep kills it before it
// removes the namespace.
func TestSweepKillsLeftovers(t *testing.T) {
	requireRoot(t)
	marker := "300." + strconv.Itoa(os.Getpid()) + "3"
	t.Cleanup(func() {
		for _, pid := range withArg(marker) {
			unix.Kill(pid, unix.SIGKILL)
		}
	})
	cmd, lines := startRunner(t, "leave", marker)
	name := <-lines
	// The daemon itself, `sleep <marker>`: the shell that starts it holds
	// the marker in its argv too, and a runner killed while only the
	// shell ran would prove nothing (the shell dies with the runner).
	daemons := func() int {
		n := 0
		for _, pid := range withArg(marker) {
			if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); string(b) == "sleep\x00"+marker+"\x00" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for daemons() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if daemons() == 0 {
		t.Fatal("the daemon never started: the test proves nothing")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := Sweep(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, name)
	if pids := withArg(marker); len(pids) > 0 {
		t.Errorf("the killed run's daemon outlived the sweep: %v", pids)
	}
}

// TestConcurrentSweeps: sweeps in several processes at once (every
// custodian run sweeps at start, and go test runs packages in parallel)
// find the same killed runner's namespaces; none of them fails because
// another removed a namespace first. This race, not a runner that ended
// early, is what failed TestSweepKillsLeftovers now and then under
// a parallel make test ("ip netns delete …: No such file or directory").
func TestConcurrentSweeps(t *testing.T) {
	requireRoot(t)
	for round := range 5 {
		cmd, lines := startRunner(t, "hold", "")
		name := <-lines
		cmd.Process.Kill()
		cmd.Wait()
		self, _ := os.Executable()
		sweeps := make([]*exec.Cmd, 4)
		outs := make([]*bytes.Buffer, len(sweeps))
		for i := range sweeps {
			outs[i] = &bytes.Buffer{}
			sweeps[i] = exec.Command(self, "-test.run=^$")
			sweeps[i].Env = append(os.Environ(), modeEnv+"=sweep")
			sweeps[i].Stdout, sweeps[i].Stderr = outs[i], outs[i]
			if err := sweeps[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range sweeps {
			if err := c.Wait(); err != nil {
				t.Errorf("round %d: sweep %d: %v\n%s", round, i, err, outs[i])
			}
		}
		assertGone(t, name)
	}
}

// injected is what the contained command tries to type into the
// terminal it was given: a line its runner's shell would run, uncontained,
// once the run ended.
const injected = "echo INJECTED-BY-THE-CHILD\n"

// inject runs contained: it pushes injected into the input of the
// terminal on its stdin (TIOCSTI) and reports how that went.
func inject() int {
	res := "ok"
	for i := 0; i < len(injected); i++ {
		b := injected[i]
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); e != 0 {
			res = unix.ErrnoName(e)
			break
		}
	}
	fmt.Printf("tiocsti=%s\n", res)
	return 0
}

// TestNoTerminalInjection: a contained command whose stdin is the
// runner's controlling terminal cannot type into it (TIOCSTI), which
// would run a line in the runner's shell, uncontained, after the run.
func TestNoTerminalInjection(t *testing.T) {
	requireRoot(t)
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: no pseudo-terminal: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	go io.Copy(io.Discard, master) // the terminal's echo

	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"=tty")
	cmd.Stdin, cmd.Stderr = slave, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("runner: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "tiocsti=") {
		t.Fatalf("the contained command did not report:\n%s", out)
	}
	if strings.Contains(string(out), "tiocsti=ok") {
		t.Errorf("the contained command typed into its runner's terminal:\n%s", out)
	}
	// What a shell reading the terminal would get next (Fd makes the
	// descriptor blocking: take it once, then make it non-blocking).
	fd := int(slave.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	got, _ := unix.Read(fd, buf)
	if got > 0 && strings.Contains(string(buf[:got]), "INJECTED") {
		t.Errorf("the terminal's input holds %q", buf[:got])
	}
}

// withArg lists the pids of live processes whose command line holds arg.
func withArg(arg string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(arg)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(d, "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // a zombie has ended
			}
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, pid)
	}
	return pids
}

// TestNoSurvivors: what the command leaves running — a background job, a
// setsid daemon — is gone when Run returns: the run's record ends with the
// run, and nothing of it goes on writing its write paths.
func TestNoSurvivors(t *testing.T) {
	requireRoot(t)
	n := newNetwork(t)
	tag := strconv.Itoa(os.Getpid()) + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	bg, daemon := "300."+tag+"1", "300."+tag+"2"
	t.Cleanup(func() {
		for _, m := range []string{bg, daemon} {
			for _, pid := range withArg(m) {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	})
	// The leftovers hold the command's output open: Run must not wait for
	// them to close it.
	var out bytes.Buffer
	start := time.Now()
	code, err := n.Run(context.Background(), Spec{
		Argv:      []string{"/bin/sh", "-c", "sleep " + bg + " & setsid sleep " + daemon + " & echo started"},
		ReadPaths: append(systemReads(), "/dev/null"),
		Stdout:    &out,
	})
	if err != nil || code != 0 || out.String() != "started\n" {
		t.Fatalf("exit %d, %v, output %q", code, err, out.String())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run returned after %v: it waited for the leftovers", took)
	}
	for _, m := range []string{bg, daemon} {
		if pids := withArg(m); len(pids) > 0 {
			t.Errorf("sleep %s outlived the run: %v", m, pids)
		}
	}
}

// startRunner starts the test binary as a runner in mode and returns its
// stdout lines.
func startRunner(t *testing.T, mode, arg string) (*exec.Cmd, <-chan string) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"="+mode, "JR2_LAUNCHER_TEST_ARG="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// subprocess runs the test binary as a runner in mode to its end.
func subprocess(t *testing.T, mode, arg string) (string, int) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"="+mode, "JR2_LAUNCHER_TEST_ARG="+arg)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// runner plays the runner of a contained run in a subprocess.
func runner(mode string) int {
	if mode == "nolandlock" {
		if err := landlocktest.DenyLandlock(unix.ENOSYS); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	n, err := NewNetwork()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer n.Close()
	fmt.Println(n.Name)
	switch mode {
	case "panic":
		panic("boom")
	case "hold":
		time.Sleep(time.Minute)
	case "leave":
		// A command that leaves a daemon, in a runner the test kills.
		marker := os.Getenv("JR2_LAUNCHER_TEST_ARG")
		if _, err := n.Start(Spec{Argv: []string{"/bin/sh", "-c", "setsid sleep " + marker + " & exec sleep 60"},
			ReadPaths: append(systemReads(), "/dev/null")}); err != nil {
			fmt.Println(err)
			return 1
		}
		time.Sleep(time.Minute)
	case "nolandlock":
		marker := os.Getenv("JR2_LAUNCHER_TEST_ARG")
		_, err := n.Start(Spec{Argv: []string{"/bin/sh", "-c", "touch " + marker}, ReadPaths: systemReads(), WritePaths: []string{filepath.Dir(marker)}})
		var ce *ChildError
		if !errors.As(err, &ce) {
			fmt.Printf("started: %v\n", err)
			return 1
		}
		fmt.Printf("step=%s code=%d reason=%s\n", ce.Step, ce.Code, ce.Reason)
	case "tty":
		// The runner's stdin is a terminal it controls (the test made it
		// so); the contained command gets it, as custodian run passes
		// os.Stdin.
		self, _ := os.Executable()
		code, err := n.Run(context.Background(), Spec{
			Argv:      []string{self, "-test.run=^$"},
			Env:       []string{modeEnv + "=inject"},
			ReadPaths: append(systemReads(), filepath.Dir(self)),
			Stdin:     os.Stdin,
			Stdout:    os.Stdout,
		})
		fmt.Printf("exit %d %v\n", code, err)
	case "signal":
		code, err := n.Run(context.Background(), Spec{
			Argv:      []string{"/bin/sh", "-c", "echo ready; exec sleep 60"},
			ReadPaths: systemReads(),
			Stdout:    os.Stdout,
		})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("exit %d\n", code)
	}
	return 0
}

// TestSweepRemovesGoneRunnersTempDirs: the TempDir of a runner that is
// gone is removed; a live runner's, and anything not named as one, stay.
func TestSweepRemovesGoneRunnersTempDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	mine, err := TempDir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(mine), "jr2-run-ca-"+strconv.Itoa(os.Getpid())+"-") || filepath.Dir(mine) != tmp {
		t.Fatalf("TempDir made %s", mine)
	}
	dead := filepath.Join(tmp, "jr2-run-ca-"+strconv.Itoa(gone.Process.Pid)+"-123")
	other := filepath.Join(tmp, "jr2-run-ca-notapid")
	for _, d := range []string{dead, other} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweepTempDirs()
	for d, want := range map[string]bool{dead: false, mine: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: present %v, want %v", d, err == nil, want)
		}
	}
}
