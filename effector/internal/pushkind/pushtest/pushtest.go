//go:build linux

// Package pushtest makes the real remotes and keys the push kind's tests
// push to and sign with — Debian's sshd on a loopback port with git-shell
// as the forced command, git http-backend behind a TLS server that checks
// a token, ssh and GPG keys — for the tests of package pushkind and of the
// effector binary. It is imported by tests only.
//
// Invariant: everything it makes lives in the test's own temporary
// directories and every server it starts is ended when the test ends; a
// gpg-agent its gpg started is stopped before the test's directories go.
package pushtest

import (
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

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/efftest"
)

// Starter starts a remote's server process and ends it when the test
// ends. The push kind's tests start it in their one reap.Tracker (the
// test process is the Effector there); a test of the binary starts it as
// a plain child.
type Starter func(t testing.TB, name string, cmd *exec.Cmd)

// Plain is a Starter for a test whose Effector is another process.
func Plain(t testing.TB, name string, cmd *exec.Cmd) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

// Run runs prog as the test (never as the Effector) and fails on error.
func Run(t testing.TB, dir string, env []string, prog string, args ...string) string {
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

// SSHKey makes an ed25519 key in dir/name and returns its private and
// public halves.
func SSHKey(t testing.TB, dir, name string) (priv, pub []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	Run(t, dir, nil, "/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p)
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

// BareRepo makes an empty bare repository dir/name.
func BareRepo(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	Run(t, dir, nil, "/usr/bin/git", "init", "-q", "--bare", p)
	return p
}

// RemoteRef reads ref of a bare repository ("" when it has none).
func RemoteRef(t testing.TB, repo, ref string) string {
	t.Helper()
	cmd := exec.Command("/usr/bin/git", "--git-dir="+repo, "rev-parse", "--verify", "-q", ref)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

// FreePort is a loopback port nothing listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// SSHRemote is a bare repository served by Debian's sshd on a loopback
// port, with a host key of its own and git-shell as the forced command of
// the one key it lets in.
type SSHRemote struct {
	Repo, URL  string
	Identity   []byte
	KnownHosts []byte
	HostPub    []byte
	Port       int
}

// NewSSHRemote starts the remote's sshd with start; it skips, loudly,
// without openssh-server.
func NewSSHRemote(t testing.TB, start Starter) *SSHRemote {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("SKIPPED, NOT PROVEN: no /usr/sbin/sshd (apt-get install openssh-server)")
	}
	dir := t.TempDir()
	_, hostPub := SSHKey(t, dir, "host")
	userPriv, userPub := SSHKey(t, dir, "user")
	auth := `command="/usr/bin/git-shell -c \"$SSH_ORIGINAL_COMMAND\"",no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty ` + string(userPub)
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
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
	log := &efftest.Buffer{}
	cmd.Stderr = log
	start(t, "sshd", cmd)
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
	repo := BareRepo(t, dir, "remote.git")
	return &SSHRemote{
		Repo: repo, URL: fmt.Sprintf("ssh://root@127.0.0.1:%d%s", port, repo),
		Identity: userPriv, HostPub: hostPub, Port: port,
		KnownHosts: []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, hostPub)),
	}
}

// Entry is a git.credentials entry for the remote.
func (s *SSHRemote) Entry(name string) config.GitEntry {
	return config.GitEntry{Name: name, URL: strings.TrimSuffix(s.URL, "remote.git"),
		Files: map[string][]byte{config.GitIdentity: s.Identity, config.GitKnownHosts: s.KnownHosts}}
}

// HTTPSRemote is a bare repository served by git http-backend behind a Go
// TLS server that lets in one Basic user and token.
type HTTPSRemote struct {
	Repo, URL, CAFile string
	User, Token       string
	Refused           func() int64
}

// NewHTTPSRemote starts the remote; gate, when not nil, runs before each
// request the token lets in (a test holds the push there). It skips,
// loudly, without git http-backend.
func NewHTTPSRemote(t testing.TB, token string, gate func()) *HTTPSRemote {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: no %s", backend)
	}
	dir := t.TempDir()
	repo := BareRepo(t, dir, "remote.git")
	Run(t, dir, nil, "/usr/bin/git", "--git-dir="+repo, "config", "http.receivepack", "true")
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
		if gate != nil {
			gate()
		}
		h.ServeHTTP(w, r)
	}))
	return &HTTPSRemote{Repo: repo, URL: fmt.Sprintf("https://127.0.0.1:%d/remote.git", up.Port), CAFile: ca,
		User: "jr2-push", Token: token, Refused: refused.Load}
}

// Entry is a git.credentials entry for the remote.
func (h *HTTPSRemote) Entry(name string) config.GitEntry {
	return config.GitEntry{Name: name, URL: strings.TrimSuffix(h.URL, "remote.git"), Username: h.User,
		Files: map[string][]byte{config.GitPassword: []byte(h.Token + "\n")}}
}

// WriteEntry writes e as the operator projects it: JR2_EFFECTOR_GIT/<name>/
// with entry.json and the entry's files.
func WriteEntry(t testing.TB, gitDir string, e config.GitEntry) {
	t.Helper()
	dir := filepath.Join(gitDir, e.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf(`{"url":%q}`, e.URL)
	if e.Username != "" {
		entry = fmt.Sprintf(`{"url":%q,"username":%q}`, e.URL, e.Username)
	}
	files := map[string][]byte{config.GitEntryFile: []byte(entry)}
	for n, b := range e.Files {
		files[n] = b
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// GPGKey makes a GPG key in a home of its own and returns its secret key
// (armored) and a home holding only its public half, for verification.
// Every gpg-agent either home started is stopped when the test ends.
func GPGKey(t testing.TB) (secret []byte, verifyHome string) {
	t.Helper()
	home, verify := t.TempDir(), t.TempDir()
	for _, h := range []string{home, verify} {
		os.Chmod(h, 0o700)
	}
	gpg := func(h string, stdin []byte, args ...string) []byte {
		cmd := exec.Command("/usr/bin/gpg", append([]string{"--homedir", h, "--batch", "--no-tty"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "GNUPGHOME=" + h}
		if stdin != nil {
			cmd.Stdin = strings.NewReader(string(stdin))
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %v: %v", args, err)
		}
		return out
	}
	t.Cleanup(func() {
		for _, h := range []string{home, verify} {
			c := exec.Command("/usr/bin/gpgconf", "--homedir", h, "--kill", "all")
			c.Env = []string{"PATH=/usr/bin:/bin", "GNUPGHOME=" + h}
			_ = c.Run()
		}
	})
	gpg(home, nil, "--passphrase", "", "--quick-gen-key", "jr2 push test <push@jr2.dev>", "ed25519", "sign", "never")
	secret = gpg(home, nil, "--armor", "--export-secret-keys")
	public := gpg(home, nil, "--armor", "--export")
	gpg(verify, public, "--import")
	return secret, verify
}

// VerifyCommit runs git verify-commit in the remote with the signer's
// public key (a GNUPGHOME in env, or ssh's allowedSignersFile in cfg).
func VerifyCommit(t testing.TB, repo, sha string, env []string, cfg ...string) error {
	args := append(cfg, "--git-dir="+repo, "verify-commit", sha)
	cmd := exec.Command("/usr/bin/git", args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + filepath.Dir(repo)}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("verify-commit: %s", out)
	}
	return err
}

// AgentsUnder lists the live (not zombie) gpg-agents whose command line
// names dir: a push's agent names its GNUPGHOME in its scratch.
func AgentsUnder(dir string) []string {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err == nil && strings.Contains(string(b), "gpg-agent") && strings.Contains(string(b), dir) {
			stat, _ := os.ReadFile(filepath.Join(filepath.Dir(n), "stat"))
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
			out = append(out, filepath.Base(filepath.Dir(n)))
		}
	}
	return out
}
