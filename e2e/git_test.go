//go:build linux

package e2e

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testGit pushes to and clones from the git upstream through the
// Custodian with stock git and harness.env as its whole environment, no
// flag: git asks without credentials, the Custodian answers rule 9's 401
// with its Basic challenge (nothing leaves the pod), git asks the
// credential helper harness.env configures (GIT_CONFIG_COUNT), which gives
// the stand-in as the Basic password, and the Custodian swaps it; the
// upstream accepts only the value.
func (w *world) testGit(t *testing.T) {
	g := w.git
	si := standIn(gitName)
	remote := "https://" + g.target + "/e2e.git"
	work := t.TempDir()
	// noHelper is the client environment without harness.env's git config.
	var noHelper []string
	for _, kv := range w.env {
		if !strings.HasPrefix(kv, "GIT_CONFIG_") || strings.HasPrefix(kv, "GIT_CONFIG_NOSYSTEM=") {
			noHelper = append(noHelper, kv)
		}
	}

	run(t, "push", func(t *testing.T) {
		src := filepath.Join(work, "src")
		w.gitRun(t, "", "init", "--initial-branch=main", src)
		mustWrite(t, filepath.Join(src, "README"), "pushed through the Custodian\n", 0o644)
		w.gitRun(t, src, "add", "README")
		w.gitRun(t, src, "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "commit", "-m", "first")
		before := g.hits.Load()
		w.gitRun(t, src, "push", remote, "main")
		if out := gitOut(t, g.repoDir, "log", "--format=%s", "main"); out != "first\n" {
			t.Fatalf("the upstream repository's log: %q", out)
		}
		if g.hits.Load() == before {
			t.Fatal("the push never reached the upstream")
		}
	})

	run(t, "clone and push again", func(t *testing.T) {
		dst := filepath.Join(work, "dst")
		w.gitRun(t, "", "clone", remote, dst)
		b, err := os.ReadFile(filepath.Join(dst, "README"))
		if err != nil || string(b) != "pushed through the Custodian\n" {
			t.Fatalf("the clone's README: %q %v", b, err)
		}
		mustWrite(t, filepath.Join(dst, "second"), "2\n", 0o644)
		w.gitRun(t, dst, "add", "second")
		w.gitRun(t, dst, "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "commit", "-m", "second")
		w.gitRun(t, dst, "push", "origin", "main")
		if out := gitOut(t, g.repoDir, "log", "--format=%s", "main"); out != "second\nfirst\n" {
			t.Fatalf("the upstream repository's log: %q", out)
		}
	})

	// Other ways git is given the stand-in work too: in the URL (git sends
	// it after the 401), and in http.extraHeader (sent at once, as CI
	// checkouts do).
	for _, c := range []struct {
		name string
		args []string
	}{
		{"the stand-in in the URL", []string{"clone", "https://" + gitUser + ":" + si + "@" + g.target + "/e2e.git"}},
		{"http.extraHeader", []string{"-c", "http.extraHeader=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(gitUser+":"+si)), "clone", remote}},
	} {
		run(t, c.name, func(t *testing.T) {
			cmd := w.gitCmd("", append(c.args, t.TempDir()+"/clone")...)
			cmd.Env = noHelper
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
		})
	}

	run(t, "every request carried the value as the Basic password", func(t *testing.T) {
		reqs := g.all()
		if len(reqs) == 0 {
			t.Fatal("the git upstream saw nothing")
		}
		if n := g.authFail.Load(); n != 0 {
			t.Errorf("%d requests reached the git upstream without the value", n)
		}
		for _, r := range reqs {
			if r.Header.Get("Accept-Encoding") != "identity" {
				t.Errorf("%s %s: accept-encoding %q", r.Method, r.URI, r.Header.Get("Accept-Encoding"))
			}
		}
	})

	// Without the helper git gets the 401 and, with no terminal, stops; a
	// guess in the header gets 403 and no challenge. Neither reaches the
	// upstream.
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"no helper: the 401 challenge, nothing sent", []string{"clone", remote},
			[]string{"could not read Username for 'https://" + g.target + "'"}},
		{"a guess in the header: 403, nothing sent", []string{"-c", "http.extraHeader=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(gitUser+":ghp_madeUpByTheAgent0123456789abcdef")), "clone", remote},
			[]string{"remote: jr2 custodian: needs the stand-in of " + gitName + " in authorization", "The requested URL returned error: 403"}},
	} {
		run(t, c.name, func(t *testing.T) {
			before := g.hits.Load()
			cmd := w.gitCmd("", append(c.args, t.TempDir()+"/clone")...)
			cmd.Env = noHelper
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the clone succeeded:\n%s", out)
			}
			for _, want := range c.want {
				if !strings.Contains(string(out), want) {
					t.Errorf("git did not say %q:\n%s", want, out)
				}
			}
			if n := g.hits.Load() - before; n != 0 {
				t.Errorf("%d requests reached the upstream", n)
			}
		})
	}

	refs := "/e2e.git/info/refs?service=git-upload-pack"
	run(t, "every client gets the challenge", func(t *testing.T) {
		w.testChallenge(t, g.target, refs, "jr2 custodian: needs the stand-in of "+gitName+" in authorization")
		if n := g.authFail.Load(); n != 0 {
			t.Errorf("%d requests reached the git upstream without the value", n)
		}
	})
	run(t, "trust", func(t *testing.T) {
		w.testTrust(t, httpsURL(g.target, refs), "Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte(gitUser+":"+si)), "service=git-upload-pack")
	})

	run(t, "log", func(t *testing.T) {
		lines := w.run.out.matching(func(s string) bool { return strings.Contains(s+" ", " target="+g.target+" ") })
		get := lineFor("action", "intercept", "target", g.target, "secret", gitName, "method", "GET", "status", "200")
		post := lineFor("action", "intercept", "target", g.target, "secret", gitName, "method", "POST", "status", "200")
		refuse := lineFor("action", "refuse", "target", g.target, "reason", "no-stand-in")
		seen := map[string]int{}
		for _, l := range lines {
			seen[l]++
			if l != get && l != post && l != refuse {
				t.Errorf("unexpected line %q", l)
			}
		}
		if seen[get] == 0 || seen[post] == 0 || seen[refuse] == 0 {
			t.Errorf("want GET and POST intercepts and the refusal, got:\n%s", strings.Join(lines, "\n"))
		}
	})
}

// gitCmd is git run in dir with the client environment.
func (w *world) gitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = w.env
	return cmd
}

func (w *world) gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := w.gitCmd(dir, args...).CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// gitOut runs git on the upstream's side (not through the Custodian).
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
