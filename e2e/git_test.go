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
// Custodian: git holds only the stand-in and sends it as Basic
// base64(user:stand-in) on every request; the upstream accepts only the
// value.
//
// git sends it with http.extraHeader, as CI checkouts do. A stand-in in the
// remote URL alone is not enough: git (libcurl's CURLAUTH_ANY) first asks
// without credentials, expecting a 401 that names a scheme, and the
// Custodian answers that request 403 (rule 9), which git does not retry —
// the last subtest pins that.
func (w *world) testGit(t *testing.T) {
	g := w.git
	si := standIn(gitName)
	remote := "https://" + g.target + "/e2e.git"
	auth := "http.extraHeader=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(gitUser+":"+si))
	work := t.TempDir()

	t.Run("push", func(t *testing.T) {
		src := filepath.Join(work, "src")
		w.gitRun(t, "", "init", "--initial-branch=main", src)
		mustWrite(t, filepath.Join(src, "README"), "pushed through the Custodian\n", 0o644)
		w.gitRun(t, src, "add", "README")
		w.gitRun(t, src, "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "commit", "-m", "first")
		w.gitRun(t, src, "-c", auth, "push", remote, "main")
		if out := gitOut(t, g.repoDir, "log", "--format=%s", "main"); out != "first\n" {
			t.Fatalf("the upstream repository's log: %q", out)
		}
	})

	t.Run("clone and push again", func(t *testing.T) {
		dst := filepath.Join(work, "dst")
		w.gitRun(t, "", "-c", auth, "clone", remote, dst)
		b, err := os.ReadFile(filepath.Join(dst, "README"))
		if err != nil || string(b) != "pushed through the Custodian\n" {
			t.Fatalf("the clone's README: %q %v", b, err)
		}
		mustWrite(t, filepath.Join(dst, "second"), "2\n", 0o644)
		w.gitRun(t, dst, "add", "second")
		w.gitRun(t, dst, "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "commit", "-m", "second")
		w.gitRun(t, dst, "-c", auth, "push", "origin", "main")
		if out := gitOut(t, g.repoDir, "log", "--format=%s", "main"); out != "second\nfirst\n" {
			t.Fatalf("the upstream repository's log: %q", out)
		}
	})

	t.Run("every request carried the value as the Basic password", func(t *testing.T) {
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

	for _, c := range []struct{ name, url string }{
		{"403 without the stand-in, nothing sent", remote},
		{"the stand-in in the URL alone: git asks without it first and gets 403", "https://" + gitUser + ":" + si + "@" + g.target + "/e2e.git"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := g.hits.Load()
			out, err := w.gitCmd("", "clone", c.url, t.TempDir()+"/clone").CombinedOutput()
			if err == nil {
				t.Fatalf("the clone succeeded:\n%s", out)
			}
			if !strings.Contains(string(out), "remote: jr2 custodian: needs the stand-in of "+gitName+" in authorization") ||
				!strings.Contains(string(out), "The requested URL returned error: 403") {
				t.Errorf("git did not report the Custodian's 403:\n%s", out)
			}
			if n := g.hits.Load() - before; n != 0 {
				t.Errorf("%d requests reached the upstream", n)
			}
		})
	}

	t.Run("log", func(t *testing.T) {
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
