package run

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/internal/gitcred"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// TestGitCloneOverHTTPS: stock git in a contained run
// clones over https through the mediator with no flag: the mediator
// answers git's first request 401 with its challenge, git's credential
// helper — the one harness.env sets (gitcred) — answers it with the
// stand-in as the Basic password, and the mediator swaps the value in. The
// upstream is git http-backend behind TLS, which serves the repository
// only to the value; the child never holds it.
func TestGitCloneOverHTTPS(t *testing.T) {
	requireRun(t, "git", "sh")
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: no %s (git's http-backend)", backend)
	}
	// The repository upstream: one commit.
	root := t.TempDir()
	src := filepath.Join(root, "src")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", src},
		{"-C", src, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "cloned through the mediator"},
		{"clone", "-q", "--bare", src, filepath.Join(root, "repo.git")},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	ca := testpki.NewCA(t, "run git upstream CA")
	leaf := ca.Leaf(t, "api.example.com")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var users []string
	git := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, pass, ok := r.BasicAuth()
			mu.Lock()
			users = append(users, user)
			mu.Unlock()
			if !ok || pass != sentinel {
				w.Header().Set("WWW-Authenticate", `Basic realm="upstream"`)
				http.Error(w, "the upstream wants the value", http.StatusUnauthorized)
				return
			}
			git.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf.TLS}},
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })

	work := t.TempDir()
	pol := writePolicy(t, []string{"api.example.com"}, []string{"/dev/urandom"}, []string{work, "/dev/null"},
		`EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"], headers = ["authorization"] }`+"\n")
	// The policy reads neither /etc/gitconfig nor a home: git is told so,
	// as a user would; nothing of the credential is given on the line.
	res := containedWith(t, pol, ln.Addr().String(), ca, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + sentinel}, nil,
		"sh", "-c", `export HOME=`+work+` GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
git clone -q https://api.example.com/repo.git `+work+`/app && git -C `+work+`/app log --format=%s
echo "held=$EXAMPLE_TOKEN"`)
	if res.code != 0 || res.err != nil {
		t.Fatalf("exit %d, %v\nstdout: %s\nstderr: %s", res.code, res.err, res.stdout, res.stderr)
	}
	if want := "cloned through the mediator\nheld=jr2-held-EXAMPLE_TOKEN\n"; res.stdout != want {
		t.Errorf("the child printed %q, want %q\nstderr: %s", res.stdout, want, res.stderr)
	}
	mu.Lock()
	for _, u := range users {
		if u != gitcred.User {
			t.Errorf("the upstream saw the Basic user %q, want %q", u, gitcred.User)
		}
	}
	mu.Unlock()
	if n := len(runtest.Find(res.records, "egress-decision", runtest.Rec{"status": 401, "reason": "no-stand-in"})); n < 1 {
		t.Errorf("no 401 challenge recorded before the helper answered")
	}
	if n := len(runtest.Find(res.records, "secret-injected", runtest.Rec{"name": "EXAMPLE_TOKEN", "host": "api.example.com:443"})); n < 2 {
		t.Errorf("%d secret-injected records; want git's info/refs and upload-pack", n)
	}
	runtest.AssertNoValue(t, "the bundle", res.raw, sentinel)
	runtest.AssertNoValue(t, "the child's and the runner's output", []byte(res.stdout+res.stderr), sentinel)
	if strings.Contains(res.stderr, "could not read Username") {
		t.Errorf("git had no credential helper:\n%s", res.stderr)
	}
}
