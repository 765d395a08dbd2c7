package gitrun

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/reap"
)

// rig is a repository whose config and hooks name a witness program in
// every place a git of the Effector must not run one, and a Home beside
// it.
type rig struct {
	t      *testing.T
	git    string
	home   Home
	repo   string
	bin    string // the witnesses
	marker string // each witness appends its name here
	tr     *reap.Tracker
	index  time.Time // when the setup last wrote the index
}

func newRig(t *testing.T) *rig {
	t.Helper()
	git, err := LookFixed("git")
	if err != nil {
		t.Skipf("no git here: %v", err)
	}
	dir := t.TempDir()
	r := &rig{t: t, git: git, repo: filepath.Join(dir, "repo"), bin: filepath.Join(dir, "bin"),
		marker: filepath.Join(dir, "marker"), tr: reap.NewTracker(),
		home: Home{Dir: filepath.Join(dir, "home"), Tmp: filepath.Join(dir, "tmp"), Ceiling: dir}}
	for _, d := range []string{r.home.Dir, r.home.Tmp, r.bin} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.home.WriteConfig(r.repo); err != nil {
		t.Fatal(err)
	}
	r.plain("init", "-q", r.repo)
	if err := os.WriteFile(filepath.Join(r.repo, "a"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.plain("-C", r.repo, "add", "a")
	r.plain("-C", r.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
	st, err := os.Stat(filepath.Join(r.repo, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	r.index = st.ModTime()
	return r
}

// plain is git with no hardening and no config: the test's own setup.
func (r *rig) plain(args ...string) string {
	r.t.Helper()
	cmd := exec.Command(r.git, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + r.home.Dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// witness writes a program named name that appends its name to the
// marker, prints out and exits 0, and returns its path.
func (r *rig) witness(name, out string) string {
	r.t.Helper()
	p := filepath.Join(r.bin, name)
	script := fmt.Sprintf("#!/bin/sh\necho %s >>%s\nprintf '%%s' '%s'\n", name, r.marker, out)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// config appends to the repository's own config: the scope an agent
// writes.
func (r *rig) config(text string) {
	r.t.Helper()
	f, err := os.OpenFile(filepath.Join(r.repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		r.t.Fatal(err)
	}
}

// hits is what witnesses ran, and empties the marker.
func (r *rig) hits() []string {
	b, _ := os.ReadFile(r.marker)
	os.Remove(r.marker)
	return strings.Fields(string(b))
}

// call is one git in the repository.
type call struct {
	args     []string
	stdin    []byte
	env      []string // extra, as a caller passes to Env
	drop     string   // an entry of Env's to leave out (a control)
	unharden bool     // git without the hardening (a control)
}

func (r *rig) run(c call) (string, string, error) {
	r.t.Helper()
	argv := Argv(nil, r.git, c.args...)
	if c.unharden {
		argv = append([]string{r.git}, c.args...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = r.repo
	for _, kv := range r.home.Env(c.env...) {
		if n, _, _ := strings.Cut(kv, "="); n != c.drop {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errOut, err := Run(ctx, r.tr, "test", cmd, c.stdin)
	return string(out), string(errOut), err
}

// want is the hardening, written out apart from the code: a key taken
// out of the hardening, or one added to it without a case here, fails.
var want = map[string]string{
	"core.hooksPath":            "/dev/null",
	"core.fsmonitor":            "false",
	"protocol.allow":            "never",
	"credential.helper":         "",
	"core.askPass":              "",
	"http.followRedirects":      "false",
	"core.alternateRefsCommand": "true",
	"gc.auto":                   "0",
	"maintenance.auto":          "false",
	"push.gpgSign":              "false",
	"advice.detachedHead":       "false",
}

// TestHardeningWinsOverTheRepository: the repository's config sets every
// key of the hardening otherwise, and the value git uses is the
// hardening's.
func TestHardeningWinsOverTheRepository(t *testing.T) {
	var keys []string
	for i := 0; i+1 < len(hardening); i += 2 {
		k, _, _ := strings.Cut(hardening[i+1], "=")
		if hardening[i] != "-c" {
			t.Fatalf("hardening[%d] = %q, want -c", i, hardening[i])
		}
		keys = append(keys, k)
	}
	if len(keys) != len(want) {
		t.Errorf("hardening sets %v; the test knows %d keys", keys, len(want))
	}
	r := newRig(t)
	var hostile strings.Builder
	for k := range want {
		sec, name, _ := strings.Cut(k, ".")
		fmt.Fprintf(&hostile, "[%s]\n\t%s = %s\n", sec, name, r.witness("w", ""))
	}
	r.config(hostile.String())
	for k, v := range want {
		out, _, err := r.run(call{args: []string{"config", "--get", k}})
		if got := strings.TrimSuffix(out, "\n"); err != nil || got != v {
			t.Errorf("git config --get %s = %q, %v; want %q", k, got, err, v)
		}
		if !slices.Contains(keys, k) {
			t.Errorf("the hardening does not set %s", k)
		}
	}
}

// TestNoProgramOfTheRepositoryRuns: a program the repository's config
// names for a hook, a file-system monitor, a credential helper, an
// askpass or an alternate's refs does not run under the hardening; the
// same git without it runs each (so the case can fail).
func TestNoProgramOfTheRepositoryRuns(t *testing.T) {
	fill := []byte("protocol=https\nhost=example.com\n\n")
	for _, c := range []struct {
		name  string
		setup func(r *rig) call
		ran   []string // what the unhardened control runs
		err   string   // in the hardened git's stderr, if it fails
	}{
		{"hooks", func(r *rig) call {
			hooks := filepath.Join(r.repo, ".git", "hooks")
			os.MkdirAll(hooks, 0o755)
			os.Rename(r.witness("pre-commit", ""), filepath.Join(hooks, "pre-commit"))
			other := filepath.Join(r.bin, "hooks")
			os.Mkdir(other, 0o755)
			os.Rename(r.witness("post-commit", ""), filepath.Join(other, "post-commit"))
			r.config("[core]\n\thooksPath = " + other + "\n")
			return call{args: []string{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "two"}}
		}, []string{"post-commit"}, ""},
		{"fsmonitor", func(r *rig) call {
			r.config("[core]\n\tfsmonitor = " + r.witness("fsmonitor", "") + "\n")
			return call{args: []string{"status", "--porcelain"}}
		}, []string{"fsmonitor"}, ""},
		{"credential helper and askpass", func(r *rig) call {
			r.config("[credential]\n\thelper = !" + r.witness("helper", "") + "\n[core]\n\taskPass = " + r.witness("askpass", "x") + "\n")
			return call{args: []string{"credential", "fill"}, stdin: fill}
		}, []string{"helper", "askpass", "askpass"}, "terminal prompts disabled"},
		{"alternate refs", func(r *rig) call {
			alt := filepath.Join(r.bin, "alt.git")
			r.plain("clone", "-q", "--bare", r.repo, alt)
			os.WriteFile(filepath.Join(r.repo, ".git", "objects", "info", "alternates"), []byte(filepath.Join(alt, "objects")+"\n"), 0o644)
			r.config("[core]\n\talternateRefsCommand = " + r.witness("altrefs", "") + "\n")
			src := filepath.Join(r.bin, "src")
			r.plain("clone", "-q", r.repo, src)
			r.plain("-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "new")
			return call{args: []string{"fetch", "-q", src, "HEAD"}, env: []string{Allow("file")}}
		}, []string{"altrefs"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			cl := c.setup(r)
			_, stderr, err := r.run(cl)
			if hits := r.hits(); len(hits) != 0 {
				t.Errorf("under the hardening, %v ran", hits)
			}
			if c.err == "" && err != nil {
				t.Errorf("git %v: %v (%s)", cl.args, err, stderr)
			}
			if c.err != "" && !strings.Contains(stderr, c.err) {
				t.Errorf("git %v: %v, stderr %q; want %q", cl.args, err, stderr, c.err)
			}
			cl.unharden = true
			_, stderr, err = r.run(cl)
			if hits := r.hits(); !slices.Equal(hits, c.ran) {
				t.Errorf("without the hardening, %v ran (%v, %s); want %v: the case proves nothing", hits, err, stderr, c.ran)
			}
		})
	}
}

// TestNoRedirectFollowed: a smart-http remote that redirects its first
// request: the hardened git asks nothing of where it points (git's
// default, "initial", follows it).
func TestNoRedirectFollowed(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		mu.Lock()
		paths = append(paths, q.URL.Path)
		mu.Unlock()
		if strings.HasPrefix(q.URL.Path, "/repo.git/") {
			http.Redirect(w, q, "/elsewhere.git/"+strings.TrimPrefix(q.URL.Path, "/repo.git/")+"?"+q.URL.RawQuery, http.StatusFound)
			return
		}
		http.NotFound(w, q)
	}))
	defer srv.Close()
	r.config("[http]\n\tfollowRedirects = true\n")
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		s := strings.Join(paths, " ")
		paths = nil
		return s
	}
	cl := call{args: []string{"ls-remote", srv.URL + "/repo.git"}, env: []string{Allow("http")}}
	if _, stderr, err := r.run(cl); err == nil || strings.Contains(seen(), "elsewhere") {
		t.Errorf("the hardened git followed the redirect (%v, %s)", err, stderr)
	}
	cl.unharden = true
	if _, stderr, _ := r.run(cl); !strings.Contains(seen(), "/elsewhere.git/") {
		t.Errorf("without the hardening git did not follow the redirect (%s): the case proves nothing", stderr)
	}
}

// TestEnv: each part of the environment in force against a real git,
// and the same git without that part as the control.
func TestEnv(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  func(r *rig) call
		check  func(r *rig, stdout, stderr string, err error) string // "" when held
		drop   string                                                // the control leaves it out
		extra  string                                                // or sets it so
		differ bool                                                  // the control must fail check
	}{
		{"no transport unless allowed, whatever the repository's config says", func(r *rig) call {
			r.config("[protocol]\n\tallow = always\n[protocol \"ext\"]\n\tallow = always\n[protocol \"file\"]\n\tallow = always\n")
			return call{args: []string{"ls-remote", "ext::" + r.witness("ext", "")}}
		}, func(r *rig, _, stderr string, err error) string {
			if hits := r.hits(); len(hits) != 0 || err == nil {
				return fmt.Sprintf("ext ran: %v (%v, %s)", hits, err, stderr)
			}
			return ""
		}, "", Allow("ext"), true},
		{"the file transport when allowed", func(r *rig) call {
			return call{args: []string{"ls-remote", r.repo, "HEAD"}, env: []string{Allow("file")}}
		}, func(r *rig, stdout, stderr string, err error) string {
			if err != nil || !strings.HasSuffix(stdout, "\tHEAD\n") {
				return fmt.Sprintf("ls-remote: %v, %q (%s)", err, stdout, stderr)
			}
			return ""
		}, "", Allow(), true},
		{"no optional lock: status refreshes no index", func(r *rig) call {
			future := time.Now().Add(time.Hour)
			os.Chtimes(filepath.Join(r.repo, "a"), future, future)
			return call{args: []string{"status", "--porcelain"}}
		}, func(r *rig, _, stderr string, err error) string {
			st, serr := os.Stat(filepath.Join(r.repo, ".git", "index"))
			if err != nil || serr != nil || !st.ModTime().Equal(r.index) {
				return fmt.Sprintf("the index was written (%v, %s)", err, stderr)
			}
			return ""
		}, "GIT_OPTIONAL_LOCKS", "", true},
		{"no replace refs", func(r *rig) call {
			r.plain("-C", r.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "swapped")
			swapped := strings.TrimSpace(r.plain("-C", r.repo, "rev-parse", "HEAD"))
			r.plain("-C", r.repo, "reset", "-q", "--hard", "HEAD~1")
			head := strings.TrimSpace(r.plain("-C", r.repo, "rev-parse", "HEAD"))
			r.plain("-C", r.repo, "update-ref", "refs/replace/"+head, swapped)
			return call{args: []string{"log", "-1", "--format=%s", "HEAD"}}
		}, func(r *rig, stdout, stderr string, err error) string {
			if err != nil || stdout != "one\n" {
				return fmt.Sprintf("HEAD reads as %q (%v, %s)", stdout, err, stderr)
			}
			return ""
		}, "GIT_NO_REPLACE_OBJECTS", "", true},
		{"no system config", func(r *rig) call {
			sys := filepath.Join(r.bin, "system")
			os.WriteFile(sys, []byte("[user]\n\tname = system\n"), 0o644)
			return call{args: []string{"config", "--get", "user.name"}, env: []string{"GIT_CONFIG_SYSTEM=" + sys}}
		}, func(r *rig, stdout, _ string, _ error) string {
			if stdout != "" {
				return fmt.Sprintf("the system config was read: %q", stdout)
			}
			return ""
		}, "GIT_CONFIG_NOSYSTEM", "", true},
		{"nothing of the Effector's environment", func(r *rig) call {
			r.t.Setenv("GIT_CONFIG_PARAMETERS", "'user.name'='inherited'")
			return call{args: []string{"config", "--get", "user.name"}}
		}, func(r *rig, stdout, _ string, _ error) string {
			if stdout != "" {
				return fmt.Sprintf("the Effector's environment reached git: %q", stdout)
			}
			return ""
		}, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			cl := c.setup(r)
			out, stderr, err := r.run(cl)
			if why := c.check(r, out, stderr, err); why != "" {
				t.Error(why)
			}
			if !c.differ {
				return
			}
			cl.drop = c.drop
			if c.extra != "" {
				cl.env = append(cl.env, c.extra)
			}
			out, stderr, err = r.run(cl)
			if c.check(r, out, stderr, err) == "" {
				t.Errorf("the control (%s%s) passed the check too: the case proves nothing", c.drop, c.extra)
			}
		})
	}
}

// TestEnvReplaces: an entry of extra replaces Env's own of that name, and
// the others are appended; no name is there twice.
func TestEnvReplaces(t *testing.T) {
	env := Home{Dir: "/h", Tmp: "/t", Ceiling: "/c"}.Env(Allow("file", "ssh"), "GIT_SSH_VARIANT=ssh", "TMPDIR=/x")
	seen := map[string]string{}
	for _, kv := range env {
		n, v, _ := strings.Cut(kv, "=")
		if _, dup := seen[n]; dup {
			t.Errorf("%s twice in %v", n, env)
		}
		seen[n] = v
	}
	for n, v := range map[string]string{"GIT_ALLOW_PROTOCOL": "file:ssh", "GIT_SSH_VARIANT": "ssh", "TMPDIR": "/x",
		"GIT_CONFIG_GLOBAL": "/h/gitconfig", "GIT_OPTIONAL_LOCKS": "0", "PATH": FixedPath} {
		if seen[n] != v {
			t.Errorf("%s=%q, want %q", n, seen[n], v)
		}
	}
	if def := (Home{}).Env(); !slices.Contains(def, "GIT_ALLOW_PROTOCOL=") {
		t.Errorf("Env allows a transport by default: %v", def)
	}
}

// TestRunEndsWithContext: the context's end kills the program's group.
func TestRunEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := Run(ctx, reap.NewTracker(), "test", exec.Command("/bin/sh", "-c", "sleep 30 & sleep 30"), nil)
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("Run = %v after %v", err, time.Since(start))
	}
}

func TestCappedAndReasons(t *testing.T) {
	c := Capped{Limit: 4}
	for _, p := range []string{"ab", "cdef", "g"} {
		if n, err := c.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if string(c.B) != "abcd" {
		t.Errorf("Capped kept %q", c.B)
	}
	for in, want := range map[string]string{"": "no message", " \n\n": "no message", "a\nb\n \n": "b", "a\r\n  b  \r\n": "b"} {
		if got := LastLine([]byte(in)); got != want {
			t.Errorf("LastLine(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"hint: x\nfatal: no repo\nhint: y\n":     "fatal: no repo",
		"warning: w\nerror: bad\nfatal: worse\n": "error: bad",
		"remote: a\nremote: b\n":                 "remote: b",
	} {
		if got := Reason([]byte(in)); got != want {
			t.Errorf("Reason(%q) = %q, want %q", in, got, want)
		}
	}
}
