package pushkind

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/commandkind/commandtest"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/landlock/landlocktest"
)

// TestMain makes the test binary the Effector's own binary: `confine` and
// `credential` as its first word run those sub-commands, as `effector`
// does; otherwise it is the Effector, the subreaper of its descendants.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "confine":
			os.Exit(confine.Main(os.Args[2:]))
		case "credential":
			os.Exit(CredentialMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	if err := reap.SetChildSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := copySelf()
	if err != nil {
		fmt.Fprintln(os.Stderr, "SKIPPED, NOT PROVEN: the test binary could not be copied where a confined git may run it:", err)
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// self is the test binary's copy that the push runs as `effector`: the
// confined git runs `credential` from it, and the build's own directory
// (under /tmp) is denied to it. A top-level directory of its own is a
// system path to the confiner.
var self string

func copySelf() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("/", "jr2-pushkind-bin-")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(exe)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "effector"), b, 0o755)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	self = filepath.Join(dir, "effector")
	return dir, nil
}

// tracker is every test's one Tracker, as the Effector has one: a remote's
// server runs as an effect of its own in it, so a push's settle loop (which
// ends every child of this process in no live effect's group) spares it.
var tracker = reap.NewTracker()

// serve starts a remote's server in the tracker until the test ends.
func serve(t testing.TB, name string, cmd *exec.Cmd) {
	t.Helper()
	key := "remote/" + name + "/" + commandtest.Random()
	if err := tracker.Start(key, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = tracker.Wait(cmd)
		_ = tracker.Settle(key)
	})
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// run runs prog as the test (never as the Effector) and fails on error.
func run(t testing.TB, dir string, env []string, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sshKey makes an ed25519 key in dir/name and returns its private and
// public halves.
func sshKey(t testing.TB, dir, name string) (priv, pub []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	run(t, dir, nil, "/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p)
	priv, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	pub, err = os.ReadFile(p + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// bareRepo makes an empty bare repository dir/name.
func bareRepo(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	run(t, dir, nil, "/usr/bin/git", "init", "-q", "--bare", p)
	return p
}

// remoteRef reads ref of a bare repository ("" when it has none).
func remoteRef(t testing.TB, repo, ref string) string {
	t.Helper()
	cmd := exec.Command("/usr/bin/git", "--git-dir="+repo, "rev-parse", "--verify", "-q", ref)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// sshRemote is a bare repository served by Debian's sshd on a loopback
// port, with a host key of its own and git-shell as the forced command of
// the one key it lets in.
type sshRemote struct {
	Repo, URL  string
	Identity   []byte
	KnownHosts []byte
	HostPub    []byte
}

func newSSHRemote(t testing.TB) *sshRemote {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("SKIPPED, NOT PROVEN: no /usr/sbin/sshd (apt-get install openssh-server)")
	}
	dir := t.TempDir()
	hostPriv, hostPub := sshKey(t, dir, "host")
	_ = hostPriv
	userPriv, userPub := sshKey(t, dir, "user")
	auth := `command="/usr/bin/git-shell -c \"$SSH_ORIGINAL_COMMAND\"",no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty ` + string(userPub)
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cfg := fmt.Sprintf("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nPidFile none\nAuthorizedKeysFile %s\nStrictModes no\nUsePAM no\n"+
		"PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nAllowTcpForwarding no\n"+
		"X11Forwarding no\nPrintMotd no\nLogLevel ERROR\n", port, filepath.Join(dir, "host"), filepath.Join(dir, "authorized_keys"))
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// sshd's privilege separation directory; made if missing, and left
	// only when it was there before.
	if _, err := os.Stat("/run/sshd"); err != nil {
		if err := os.Mkdir("/run/sshd", 0o755); err != nil {
			t.Skipf("SKIPPED, NOT PROVEN: sshd needs /run/sshd: %v", err)
		}
		t.Cleanup(func() { os.Remove("/run/sshd") })
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var log strings.Builder
	cmd.Stderr = &log
	serve(t, "sshd", cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sshd: %s", log.String())
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen: %s", log.String())
		}
	}
	repo := bareRepo(t, dir, "remote.git")
	return &sshRemote{
		Repo: repo, URL: fmt.Sprintf("ssh://root@127.0.0.1:%d%s", port, repo),
		Identity: userPriv, HostPub: hostPub,
		KnownHosts: []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, hostPub)),
	}
}

// Entry is a git.credentials entry for the remote.
func (s *sshRemote) Entry(name string) config.GitEntry {
	return config.GitEntry{Name: name, URL: strings.TrimSuffix(s.URL, "remote.git"),
		Files: map[string][]byte{config.GitIdentity: s.Identity, config.GitKnownHosts: s.KnownHosts}}
}

// httpsRemote is a bare repository served by git http-backend behind a Go
// TLS server that lets in one Basic user and token.
type httpsRemote struct {
	Repo, URL, CAFile string
	User, Token       string
	Refused           func() int64
}

func newHTTPSRemote(t testing.TB, token string) *httpsRemote {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: no %s", backend)
	}
	dir := t.TempDir()
	repo := bareRepo(t, dir, "remote.git")
	run(t, dir, nil, "/usr/bin/git", "--git-dir="+repo, "config", "http.receivepack", "true")
	pki := efftest.NewPKI(t, "127.0.0.1")
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pki.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	h := &cgi.Handler{Path: backend, Root: "/", Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + dir}}
	up := efftest.StartTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != "jr2-push" || p != token {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="jr2 test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	return &httpsRemote{Repo: repo, URL: fmt.Sprintf("https://127.0.0.1:%d/remote.git", up.Port), CAFile: ca,
		User: "jr2-push", Token: token, Refused: refused.Load}
}

func (h *httpsRemote) Entry(name string) config.GitEntry {
	return config.GitEntry{Name: name, URL: strings.TrimSuffix(h.URL, "remote.git"), Username: h.User,
		Files: map[string][]byte{config.GitPassword: []byte(h.Token + "\n")}}
}

// rig is a push kind over a commandtest fixture, as the Effector wires it.
type rig struct {
	f    *commandtest.Fixture
	k    *Kind
	tr   *reap.Tracker
	lock *classlock.Lock
	held []scrub.Secret
}

func newRig(t testing.TB, caFile string, pushes []config.Push, entries ...config.GitEntry) *rig {
	t.Helper()
	landlocktest.Require(t, 1)
	f := commandtest.New(t, testKey, `{"placement":"sandbox-1"}`)
	if self == "" {
		t.Skip("SKIPPED, NOT PROVEN: no copy of the test binary a confined git may run")
	}
	r := &rig{f: f, tr: tracker, lock: &classlock.Lock{}}
	r.k = New(Options{Pushes: pushes, Entries: entries, Work: f.Work, Scratch: f.Scratch, CAFile: caFile,
		Deny: f.OwnPaths(), Node: "node-a", Self: self, Tracker: r.tr, Lock: r.lock, AgentGrace: time.Second})
	r.held = []scrub.Secret{{Name: "effector-key", Value: testKey}}
	for _, e := range entries {
		for _, s := range e.Held() {
			r.held = append(r.held, scrub.Secret{Name: s.Name, Value: s.Value})
		}
	}
	return r
}

// push prepares and runs a push, as the server does: the outcome is
// scrubbed for every held value.
func (r *rig) push(t testing.TB, id string, p *wire.Push) (pinned string, out wire.Outcome) {
	t.Helper()
	plan, err := r.k.Prepare(id, &wire.Start{Kind: wire.KindPush, TimeoutMs: 60000, Push: p})
	if err != nil {
		t.Fatalf("prepare %s: %v", id, err)
	}
	if plan.Stop != nil || plan.Method != "-" || plan.Host != "-" || plan.KeptStop != effect.DropStop {
		t.Fatalf("plan %+v: a push cannot be stopped, logs method=- host=-, and drops a kept stop", plan)
	}
	sc, err := scrub.New(r.held)
	if err != nil {
		t.Fatal(err)
	}
	out = plan.Run(context.Background(), effect.Held(sc))
	out.MapStrings(sc.String)
	return plan.Pinned, out
}
