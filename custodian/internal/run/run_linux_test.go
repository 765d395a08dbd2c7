//go:build linux

package run

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/custodian/internal/launcher"
	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/testkit/landlocktest"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// sentinel is the held value of the tests: the upstream must get it; the
// bundle, the child and the runner's output must never hold it.
const sentinel = "sk-sentinel-run-7e6d5c4b3a29"

// requireRun skips loudly where a contained run cannot be made.
func requireRun(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PROVEN: needs root to make network namespaces")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED, NOT PROVEN: needs %s", tool)
		}
	}
	landlocktest.Require(t, launcher.MinLandlockABI)
}

// systemReads are the read paths curl and sh need.
func systemReads() []string {
	var out []string
	for _, p := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/nsswitch.conf",
		"/etc/hosts", "/etc/host.conf", "/etc/gai.conf"} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func quoted(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// writePolicy writes a policy allowing hosts, reading the system paths and
// reads, writing writes, with secrets (TOML lines under [secrets]).
func writePolicy(t *testing.T, hosts, reads, writes []string, secrets string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.toml")
	text := fmt.Sprintf("allow_hosts = %s\nread_paths = %s\nwrite_paths = %s\n", quoted(hosts), quoted(append(systemReads(), reads...)), quoted(writes))
	if secrets != "" {
		text += "[secrets]\n" + secrets
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// upstream is an HTTPS server on the host's loopback, under a test CA,
// that echoes the Authorization it got (value included: the mediator must
// scrub it).
type upstream struct {
	addr  string
	roots *testpki.CA
	mu    sync.Mutex
	got   []string
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	ca := testpki.NewCA(t, "run test upstream CA")
	leaf := ca.Leaf(t, "api.example.com", "open.example.com")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: ln.Addr().String(), roots: ca}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.mu.Lock()
			u.got = append(u.got, r.URL.Path+" "+r.Header.Get("Authorization"))
			u.mu.Unlock()
			fmt.Fprintf(w, "auth=%s path=%s\n", r.Header.Get("Authorization"), r.URL.Path)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf.TLS}},
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *upstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

// result is one finished run.
type result struct {
	code           int
	err            error
	stdout, stderr string
	raw            []byte
	records        []runtest.Rec
	path           string // the bundle
}

// contained runs argv under pol with environ, its upstream resolved to u.
func contained(t *testing.T, pol string, u *upstream, environ []string, argv ...string) *result {
	t.Helper()
	if u == nil {
		return containedWith(t, pol, "", nil, environ, nil, argv...)
	}
	return containedWith(t, pol, u.addr, u.roots, environ, nil, argv...)
}

// containedWith is contained with api.example.com:443 resolved to addr
// (none when ""), trusting roots, and set applied to the options.
func containedWith(t *testing.T, pol, addr string, roots *testpki.CA, environ []string, set func(*Options), argv ...string) *result {
	t.Helper()
	bundlePath := filepath.Join(t.TempDir(), "run.jsonl")
	var stdout, stderr bytes.Buffer
	o := Options{Policy: pol, Bundle: bundlePath, Argv: argv, Environ: environ, Stdout: &stdout, Stderr: &stderr}
	if addr != "" {
		o.Resolve = func(host string, port uint16) (string, error) {
			if host == "api.example.com" && port == 443 {
				return addr, nil
			}
			return "", errors.New("no such test host")
		}
		o.UpstreamRoots = roots.Pool()
		o.LocalUpstreams = true
	}
	if set != nil {
		set(&o)
	}
	res := &result{path: bundlePath}
	res.code, res.err = Run(context.Background(), o)
	res.stdout, res.stderr = stdout.String(), stderr.String()
	res.raw, _ = os.ReadFile(bundlePath)
	res.records = runtest.Parse(res.raw)
	v, err := bundle.Verify(bundlePath)
	if err != nil || v.Status != bundle.Verified {
		t.Errorf("verify: %v %v; want VERIFIED", v, err)
	}
	return res
}

// denied asserts an egress-attempt matching attempt, and its denial.
func denied(t *testing.T, rs []runtest.Rec, attempt runtest.Rec) {
	t.Helper()
	for _, a := range runtest.Find(rs, "egress-attempt", attempt) {
		if len(runtest.Find(rs, "egress-decision", runtest.Rec{"attempt": a["seq"], "decision": "deny", "rule": "default-deny"})) == 1 {
			return
		}
	}
	t.Errorf("no egress-attempt %v denied by default-deny", attempt)
}

const curlFlags = "curl -sS --max-time 5"

// TestSecretNeverInBundle, written first: a contained curl sends its
// stand-in, cooperating (through the proxy) and not (proxy variables
// unset: DNS and SNI); the upstream receives the value both times; the
// bundle's bytes, the child's output and the runner's output hold no form
// of it.
func TestSecretNeverInBundle(t *testing.T) {
	requireRun(t, "curl", "sh")
	u := startUpstream(t)
	pol := writePolicy(t, []string{"api.example.com"}, nil, nil,
		`EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }`+"\n")
	res := contained(t, pol, u, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + sentinel},
		"sh", "-c", curlFlags+` -H "Authorization: Bearer $EXAMPLE_TOKEN" https://api.example.com/v1/proxied; `+
			`unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy; `+
			curlFlags+` -H "Authorization: Bearer $EXAMPLE_TOKEN" https://api.example.com/v1/direct; echo "held=$EXAMPLE_TOKEN"`)
	if res.code != 0 || res.err != nil {
		t.Fatalf("exit %d, %v\nstderr: %s", res.code, res.err, res.stderr)
	}
	want := "auth=Bearer [secret:EXAMPLE_TOKEN] path=/v1/proxied\nauth=Bearer [secret:EXAMPLE_TOKEN] path=/v1/direct\nheld=jr2-held-EXAMPLE_TOKEN\n"
	if res.stdout != want {
		t.Errorf("the child printed %q, want %q", res.stdout, want)
	}
	got := u.received()
	if len(got) != 2 || got[0] != "/v1/proxied Bearer "+sentinel || got[1] != "/v1/direct Bearer "+sentinel {
		t.Errorf("the upstream received %q; want the value twice", got)
	}
	runtest.AssertNoValue(t, "the bundle", res.raw, sentinel)
	runtest.AssertNoValue(t, "the child's and the runner's output", []byte(res.stdout+res.stderr), sentinel)
	for _, via := range []string{"proxy", "sni"} {
		if len(runtest.Find(res.records, "egress-attempt", runtest.Rec{"host": "api.example.com", "port": 443, "via": via})) != 1 {
			t.Errorf("no egress-attempt via %s", via)
		}
	}
	reqs := runtest.Find(res.records, "http-request", runtest.Rec{"method": "GET"})
	if len(reqs) != 2 || !strings.Contains(fmt.Sprint(reqs[0]["headers"]), "[Authorization Bearer jr2-held-EXAMPLE_TOKEN]") {
		t.Errorf("http-request records: %v", reqs)
	}
	if n := len(runtest.Find(res.records, "secret-injected", runtest.Rec{"name": "EXAMPLE_TOKEN", "host": "api.example.com:443"})); n != 2 {
		t.Errorf("%d secret-injected records, want 2", n)
	}
	if env := runtest.Find(res.records, "env", nil); len(env) != 1 || fmt.Sprint(env[0]["stand_ins"]) != "[EXAMPLE_TOKEN]" {
		t.Errorf("env record: %v", env)
	}
	if n := len(runtest.Find(res.records, "run-end", runtest.Rec{"exit": 0})); n != 1 {
		t.Errorf("run-end records: %d", n)
	}
}

// TestDenyAll: with nothing allowed, curl https://example.com fails and
// the attempt and its denial are recorded; no network is needed (the
// mediator decides before it would dial). The bundle verifies; one byte
// flipped makes it TAMPERED.
func TestDenyAll(t *testing.T) {
	requireRun(t, "curl")
	pol := writePolicy(t, []string{}, nil, nil, "")
	res := contained(t, pol, nil, []string{"PATH=/usr/bin:/bin"}, "curl", "-sS", "--max-time", "5", "https://example.com")
	if res.code == 0 || res.err != nil {
		t.Fatalf("curl https://example.com: exit %d, %v; want a failure", res.code, res.err)
	}
	denied(t, res.records, runtest.Rec{"host": "example.com", "port": 443, "via": "proxy"})
	if !strings.Contains(res.stderr, "jr2.custodian action=refuse target=example.com:443 reason=default-deny") {
		t.Errorf("stderr: %s", res.stderr)
	}
	if n := len(runtest.Find(res.records, "run-end", runtest.Rec{"exit": res.code})); n != 1 {
		t.Errorf("run-end with exit %d: %d records", res.code, n)
	}

	// verify through the CLI: VERIFIED, then TAMPERED after one flipped byte.
	file := filepath.Join(t.TempDir(), "b.jsonl")
	os.WriteFile(file, res.raw, 0o600)
	var out bytes.Buffer
	if code := bundle.VerifyMain([]string{file}, &out, &out); code != 0 || strings.TrimSpace(out.String()) != "VERIFIED" {
		t.Errorf("verify: exit %d, %q", code, out.String())
	}
	i := bytes.Index(res.raw, []byte("example.com"))
	flipped := bytes.Clone(res.raw)
	flipped[i] ^= 0x01
	os.WriteFile(file, flipped, 0o600)
	out.Reset()
	if code := bundle.VerifyMain([]string{file}, &out, &out); code != 4 || !strings.HasPrefix(out.String(), "TAMPERED (record ") {
		t.Errorf("verify after a flipped byte: exit %d, %q", code, out.String())
	}
}

// TestNonCooperating: a client that ignores proxies, and one with every
// proxy variable unset, still reach only the mediator: the allowed host
// through DNS and SNI, a disallowed one recorded by name (dns-query,
// egress-attempt) and denied, a literal IP recorded with an empty host
// and denied, plain HTTP by its Host.
func TestNonCooperating(t *testing.T) {
	requireRun(t, "curl", "sh")
	u := startUpstream(t)
	pol := writePolicy(t, []string{"api.example.com"}, nil, nil, "")
	res := contained(t, pol, u, []string{"PATH=/usr/bin:/bin"}, "sh", "-c",
		curlFlags+` --noproxy '*' https://evil.example/a; echo "evil=$?"; `+
			`unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy; `+
			curlFlags+` https://api.example.com/ok; `+
			curlFlags+` https://192.0.2.10/b; echo "ip=$?"; `+
			curlFlags+` http://evil.example/c; echo; `+
			curlFlags+` https://evil.example:4443/d; echo "port=$?"`)
	if res.err != nil {
		t.Fatalf("%v\nstderr: %s", res.err, res.stderr)
	}
	for _, want := range []string{"evil=35\n", "auth= path=/ok\n", "ip=35\n", "jr2 custodian: evil.example:80 is not allowed", "port=7\n"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, res.stdout, res.stderr)
		}
	}
	if got := u.received(); len(got) != 1 || got[0] != "/ok " {
		t.Errorf("the upstream received %q", got)
	}
	if len(runtest.Find(res.records, "dns-query", runtest.Rec{"name": "evil.example", "type": "A"})) == 0 {
		t.Error("no dns-query naming evil.example")
	}
	denied(t, res.records, runtest.Rec{"host": "evil.example", "port": 443, "via": "sni"})
	denied(t, res.records, runtest.Rec{"host": "", "port": 443, "via": "ip", "addr": "192.0.2.10"})
	denied(t, res.records, runtest.Rec{"host": "evil.example", "port": 80, "via": "host"})
	if len(runtest.Find(res.records, "egress-attempt", runtest.Rec{"host": "api.example.com", "via": "sni"})) != 1 {
		t.Error("no egress-attempt via sni for the allowed host")
	}
}

// TestContainment: the child reads only read_paths, writes only
// write_paths, cannot read the bundle or the runner's environment, has no
// capabilities, and a syscall the filter forbids returns EPERM.
func TestContainment(t *testing.T) {
	requireRun(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	readDir, writeDir, outside := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(readDir, "r"), []byte("readable"), 0o644)
	os.WriteFile(filepath.Join(outside, "o"), []byte("outside"), 0o644)
	pol := writePolicy(t, []string{"api.example.com"}, []string{filepath.Dir(self), readDir, "/proc"}, []string{writeDir},
		`EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }`+"\n")
	bundlePath := filepath.Join(t.TempDir(), "run.jsonl")
	var stdout, stderr bytes.Buffer
	// The value sits in the runner's own environment, as on the command
	// line: /proc/<runner>/environ must stay out of the child's reach.
	t.Setenv("EXAMPLE_TOKEN", sentinel)
	environ := append(os.Environ(), modeEnv+"=probe",
		"PROBE_READ="+filepath.Join(readDir, "r"), "PROBE_WRITE_DIR="+writeDir, "PROBE_READ_DIR="+readDir,
		"PROBE_OUTSIDE="+filepath.Join(outside, "o"), "PROBE_OUTSIDE_DIR="+outside,
		"PROBE_BUNDLE="+bundlePath, "PROBE_RUNNER="+strconv.Itoa(os.Getpid()))
	code, err := Run(context.Background(), Options{Policy: pol, Bundle: bundlePath, Argv: []string{self, "-test.run=^$"},
		Environ: environ, Stdout: &stdout, Stderr: &stderr})
	if err != nil || code != 0 {
		t.Fatalf("probe: exit %d, %v\nstderr: %s", code, err, stderr.String())
	}
	var got map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("probe output %q: %v", stdout.String(), err)
	}
	want := map[string]string{
		"read-allowed": "ok", "read-outside": "EACCES", "list-outside": "EACCES", "read-bundle": "EACCES",
		"write-allowed": "ok", "write-in-read-path": "EACCES", "write-outside": "EACCES",
		"runner-environ": "EACCES",
		"CapInh":         "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
		"keyctl": "EPERM", "ptrace": "EPERM", "unshare-net": "EPERM",
		"EXAMPLE_TOKEN": "jr2-held-EXAMPLE_TOKEN",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	raw, _ := os.ReadFile(bundlePath)
	runtest.AssertNoValue(t, "the bundle", raw, sentinel)
	runtest.AssertNoValue(t, "the probe's report", stdout.Bytes(), sentinel)
}

// probe runs inside the contained child and reports on stdout.
func probe() int {
	r := map[string]string{}
	try := func(name string, err error) {
		var errno syscall.Errno
		switch {
		case err == nil:
			r[name] = "ok"
		case errors.As(err, &errno):
			r[name] = unix.ErrnoName(errno)
		default:
			r[name] = err.Error()
		}
	}
	read := func(p string) error { _, err := os.ReadFile(p); return err }
	write := func(dir string) error { return os.WriteFile(filepath.Join(dir, "w"), []byte("x"), 0o644) }
	try("read-allowed", read(os.Getenv("PROBE_READ")))
	try("read-outside", read(os.Getenv("PROBE_OUTSIDE")))
	_, err := os.ReadDir(os.Getenv("PROBE_OUTSIDE_DIR"))
	try("list-outside", err)
	try("read-bundle", read(os.Getenv("PROBE_BUNDLE")))
	try("runner-environ", read("/proc/"+os.Getenv("PROBE_RUNNER")+"/environ"))
	try("write-allowed", write(os.Getenv("PROBE_WRITE_DIR")))
	try("write-in-read-path", write(os.Getenv("PROBE_READ_DIR")))
	try("write-outside", write(os.Getenv("PROBE_OUTSIDE_DIR")))
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if strings.HasPrefix(k, "Cap") || k == "NoNewPrivs" || k == "Seccomp" {
				r[k] = strings.TrimSpace(v)
			}
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, 0, 0)
	try("keyctl", errnoOrNil(e))
	_, _, e = unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	try("ptrace", errnoOrNil(e))
	try("unshare-net", unix.Unshare(unix.CLONE_NEWNET))
	r["EXAMPLE_TOKEN"] = os.Getenv("EXAMPLE_TOKEN")
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

func errnoOrNil(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// startRunner starts `custodian run args…` as a subprocess (the test
// binary in runner mode) and returns once the contained command printed
// "ready".
func startRunner(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	js, _ := json.Marshal(args)
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	// The runner's own temporary files (its CA directory) go under a
	// directory this test removes, so a runner killed with -9 leaves
	// nothing in /tmp. The contained command reads the CA there: 0755.
	tmp, err := os.MkdirTemp("", "jr2-run-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), modeEnv+"=runner", argsEnv+"="+string(js), "PATH=/usr/bin:/bin", "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the contained command never said ready")
	}
	return cmd
}

// TestSignalReachesChild: SIGTERM to the runner goes to the command; when
// it has ended, run-end (its exit code) and the seal close the bundle, and
// the namespaces are gone.
func TestSignalReachesChild(t *testing.T) {
	requireRun(t, "sh", "sleep")
	pol := writePolicy(t, []string{}, nil, nil, "")
	bundlePath := filepath.Join(t.TempDir(), "run.jsonl")
	cmd := startRunner(t, "--policy", pol, "--bundle", bundlePath, "--", "sh", "-c", "echo ready; exec sleep 60")
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("runner exit %d, want %d (the command's SIGTERM)", code, 128+int(syscall.SIGTERM))
	}
	v, err := bundle.Verify(bundlePath)
	if err != nil || v.Status != bundle.Verified {
		t.Fatalf("verify: %v %v; want VERIFIED", v, err)
	}
	raw, _ := os.ReadFile(bundlePath)
	if n := len(runtest.Find(runtest.Parse(raw), "run-end", runtest.Rec{"exit": 143})); n != 1 {
		t.Errorf("run-end with exit 143: %d records", n)
	}
	left, _ := filepath.Glob("/run/netns/jr2-" + strconv.Itoa(cmd.Process.Pid) + "-*")
	if len(left) != 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
}

// TestKilledRunLeavesPrefix: kill -9 of the runner mid-run leaves a bundle
// that verifies as TRUNCATED with the records written so far, the denial
// among them; the next run's sweep removes the namespaces it left.
func TestKilledRunLeavesPrefix(t *testing.T) {
	requireRun(t, "curl", "sh", "sleep")
	pol := writePolicy(t, []string{}, nil, nil, "")
	bundlePath := filepath.Join(t.TempDir(), "run.jsonl")
	cmd := startRunner(t, "--policy", pol, "--bundle", bundlePath, "--", "sh", "-c",
		curlFlags+" https://evil.example/; echo ready; exec sleep 60")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	v, err := bundle.Verify(bundlePath)
	if err != nil || v.Status != bundle.Truncated || v.Records < 5 {
		t.Fatalf("verify: %v %v; want TRUNCATED with a prefix of at least 5 records", v, err)
	}
	raw, _ := os.ReadFile(bundlePath)
	rs := runtest.Parse(raw)
	denied(t, rs, runtest.Rec{"host": "evil.example", "port": 443, "via": "proxy"})
	if len(runtest.Find(rs, "run-end", nil))+len(runtest.Find(rs, "seal", nil)) != 0 {
		t.Error("a killed run wrote run-end or seal")
	}
	// The killed runner left its namespaces and its CA directory (named
	// after its pid, under its TMPDIR); a sweep (this one, or one another
	// run started at the same time) removes them.
	var tmp string
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			tmp = v
		}
	}
	caDirs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "jr2-run-ca-"+strconv.Itoa(cmd.Process.Pid)+"-*"))
		return m
	}
	if len(caDirs()) != 1 {
		t.Fatalf("the killed runner left %v in its TMPDIR; want its one CA directory", caDirs())
	}
	t.Setenv("TMPDIR", tmp)
	if _, err := launcher.Sweep(); err != nil {
		t.Fatal(err)
	}
	if left := caDirs(); len(left) != 0 {
		t.Errorf("after Sweep, the killed run's CA directory is left: %v", left)
	}
	left, _ := filepath.Glob("/run/netns/jr2-" + strconv.Itoa(cmd.Process.Pid) + "-*")
	if len(left) != 0 {
		t.Errorf("after Sweep, the killed run's namespaces are left: %v", left)
	}
}
