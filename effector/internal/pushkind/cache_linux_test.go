package pushkind

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/wire"
)

// The node's caches as a push's object source: worktrees that lack
// objects (their alternates name a cache under JR2_EFFECTOR_REPOS, or
// they are shallow) push as a complete one does, and a commit only a
// cache holds is never the worktree's.

// testGit runs the test's own git (never the Effector's) in dir.
func testGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return run(t, dir, []string{"GIT_AUTHOR_NAME=jr2 test", "GIT_AUTHOR_EMAIL=test@jr2.dev",
		"GIT_COMMITTER_NAME=jr2 test", "GIT_COMMITTER_EMAIL=test@jr2.dev"}, "/usr/bin/git", args...)
}

// cacheRig is a rig whose worktree was cloned from a cache under the
// fixture's JR2_EFFECTOR_REPOS: origin is the repository the cache and
// the remotes were made from (three commits on main), cache the cache (a
// bare repository), base origin's main.
type cacheRig struct {
	*rig
	origin, cache, base string
}

// newCacheRig moves the fixture's worktree to origin (two more commits),
// makes the cache of the remote url (CacheName) a bare clone of it under
// Repos, and clones the worktree again as form says — "shared" (git clone --shared from the cache),
// "reference" (--reference the cache, from origin), "shallow" (--depth 1
// from origin, no cache) — then commits the agent's own change in it.
func newCacheRig(t *testing.T, r *rig, form, url string) *cacheRig {
	t.Helper()
	name, err := CacheName(url)
	if err != nil {
		t.Fatalf("CacheName(%q): %v", url, err)
	}
	c := &cacheRig{rig: r, origin: filepath.Join(r.f.TopDir, "origin"), cache: filepath.Join(r.f.Repos, name)}
	r.f.Commit(t, map[string]string{"two.txt": "two\n"}, "two")
	r.f.Commit(t, map[string]string{"three.txt": "three\n"}, "three")
	if err := os.Rename(r.f.Work, c.origin); err != nil {
		t.Fatal(err)
	}
	c.base = strings.TrimSpace(testGit(t, c.origin, "rev-parse", "HEAD"))
	testGit(t, r.f.TopDir, "clone", "-q", "--bare", "--no-local", c.origin, c.cache)
	switch form {
	case "shared":
		testGit(t, r.f.TopDir, "clone", "-q", "--shared", c.cache, r.f.Work)
	case "reference":
		testGit(t, r.f.TopDir, "clone", "-q", "--no-local", "--reference", c.cache, c.origin, r.f.Work)
	case "shallow":
		testGit(t, r.f.TopDir, "clone", "-q", "--depth", "1", "file://"+c.origin, r.f.Work)
	default:
		t.Fatalf("form %q", form)
	}
	if form != "shallow" {
		// The clone holds none of the cache's objects: each is the cache's.
		if n := looseAndPacked(t, r.f.Work); n != 0 {
			t.Fatalf("the %s clone holds %d objects of its own before the agent's commit", form, n)
		}
	}
	r.f.Commit(t, map[string]string{"agent.txt": "the agent's change\n"}, "the agent's commit")
	return c
}

// looseAndPacked counts the objects of a worktree's own store.
func looseAndPacked(t testing.TB, work string) int {
	t.Helper()
	out := testGit(t, work, "count-objects", "-v")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		var v int
		if _, err := fmt.Sscanf(line, "count: %d", &v); err == nil {
			n += v
		}
		if _, err := fmt.Sscanf(line, "in-pack: %d", &v); err == nil {
			n += v
		}
	}
	return n
}

// seed gives a remote origin's main as its ref, as the remote the cache
// mirrors holds it (each test's origin has commits of its own).
func (c *cacheRig) seed(t testing.TB, remoteRepo, ref string) {
	t.Helper()
	testGit(t, c.origin, "push", "-q", remoteRepo, "HEAD:"+ref)
}

// inCache reports whether a process runs in the cache: a git given it as
// its repository, or a process whose working directory is in it.
func inCache(cache, pid string, cmdline []byte) bool {
	if bytes.Contains(cmdline, []byte("--git-dir="+cache)) {
		return true
	}
	cwd, err := os.Readlink(filepath.Join(pid, "cwd"))
	return err == nil && (cwd == cache || strings.HasPrefix(cwd, cache+"/"))
}

// TestPushFromCache: a worktree whose objects are the cache's (cloned
// --shared or --reference) and a shallow one push over ssh and https to a
// remote that holds the base: the remote's ref is the agent's commit and
// its objects are whole. While they run, no process runs in the cache and
// none holds a form of the token or the key in its argv or environment.
// With no JR2_EFFECTOR_REPOS, the cloned ones are rejected at start: their
// alternates name a cache this Effector does not hold.
func TestPushFromCache(t *testing.T) {
	token := "SENTINEL-cache-tok-" + fmt.Sprint(time.Now().UnixNano()) + "-w3Lr"
	https := newHTTPSRemote(t, token)
	ssh := newSSHRemote(t)
	keyLine := strings.Split(string(ssh.Identity), "\n")[2]
	var forms []string
	for _, v := range []string{token, keyLine} {
		for _, f := range efftest.Forms([]byte(v)) {
			if len(f.Core) >= 12 {
				forms = append(forms, f.Core)
			}
		}
	}
	for _, c := range []struct {
		form, transport string
		noRepos         bool
		want            string // a rejection's words, or "" for pushed
	}{
		{form: "shared", transport: "ssh"},
		{form: "shared", transport: "https"},
		{form: "reference", transport: "ssh"},
		{form: "reference", transport: "https"},
		{form: "shallow", transport: "ssh"},
		{form: "shallow", transport: "https"},
		{form: "shared", transport: "ssh", noRepos: true, want: "line 1 names an object directory, and this Effector holds no cache of the push's remote"},
		{form: "reference", transport: "https", noRepos: true, want: "line 1 names an object directory, and this Effector holds no cache of the push's remote"},
	} {
		name := c.form + "/" + c.transport
		if c.noRepos {
			name += "/no-repos"
		}
		t.Run(name, func(t *testing.T) {
			ref := "refs/heads/jr2/" + strings.ReplaceAll(name, "/", "-")
			r := newRig(t, https.CAFile, []config.Push{{Slot: "docs"}, {Slot: "app"}}, https.Entry("web"), ssh.Entry("deploy"))
			push, repo := slotPush("app", ssh.URL, "deploy", ref), ssh.Repo
			if c.transport == "https" {
				push, repo = slotPush("docs", https.URL, "web", ref), https.Repo
			}
			cr := newCacheRig(t, r, c.form, push.Slot.URL)
			if c.noRepos {
				o := r.k.o
				o.Repos = ""
				r.k = New(o)
			}
			cr.seed(t, repo, ref+"-base")
			head := strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD"))
			var mu sync.Mutex
			var seen []string
			stop := sampleProcs(func(pid string, cmdline, env []byte) {
				hit := inCache(cr.cache, pid, cmdline)
				for _, form := range forms {
					hit = hit || bytes.Contains(cmdline, []byte(form)) || bytes.Contains(env, []byte(form))
				}
				if hit {
					mu.Lock()
					seen = append(seen, string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
					mu.Unlock()
				}
			})
			pinned, out := r.push(t, "cache", push)
			samples := stop()
			if pinned != head {
				t.Fatalf("pinned %q, want %s", pinned, head)
			}
			if c.want != "" {
				if out.Kind != wire.OutcomeRejected || out.Stage != StageStart || !strings.Contains(out.Reason, c.want) {
					t.Fatalf("outcome %+v, want rejected at start saying %q", out, c.want)
				}
				return
			}
			if out.Kind != wire.OutcomePushed || out.Commit != head || out.Ref != ref {
				t.Fatalf("outcome %+v", out)
			}
			if got := remoteRef(t, repo, ref); got != head {
				t.Fatalf("the remote's ref is %q, want %s", got, head)
			}
			testGit(t, filepath.Dir(repo), "--git-dir="+repo, "fsck", "--strict", "--no-dangling", "--connectivity-only")
			if samples < 2 {
				t.Fatalf("only %d samples of /proc", samples)
			}
			if len(seen) > 0 {
				t.Errorf("%d processes ran in the cache or held a secret; the first: %s", len(seen), seen[0])
			}
			if left := r.f.Leftovers(); len(left) != 0 {
				t.Errorf("scratch left behind: %v", left)
			}
		})
	}
}

// cacheOnlyCommit makes a commit in the cache that the worktree has
// never held: on a branch of origin's pushed into the cache alone.
func (c *cacheRig) cacheOnlyCommit(t testing.TB, parent string) string {
	t.Helper()
	tree := strings.TrimSpace(testGit(t, c.origin, "rev-parse", parent+"^{tree}"))
	sha := strings.TrimSpace(testGit(t, c.origin, "commit-tree", "-p", parent, "-m", "only the cache holds this", tree))
	testGit(t, c.origin, "push", "-q", c.cache, sha+":refs/heads/cache-only")
	return sha
}

// fakeLoose writes a loose object file named sha into the worktree's own
// store whose bytes are another commit's: it claims the name only.
func fakeLoose(t testing.TB, work, sha string) {
	t.Helper()
	body := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nnot the commit its name says\n")
	var b bytes.Buffer
	z := zlib.NewWriter(&b)
	fmt.Fprintf(z, "commit %d\x00", len(body))
	z.Write(body)
	z.Close()
	dir := filepath.Join(work, ".git", "objects", sha[:2])
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, sha[2:]), b.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestCacheOnlyCommitsRejected: a pin only the cache holds — named by
// the start, named by the worktree's HEAD, or claimed by a loose object
// file of the worktree's whose bytes are not it — and an agent commit
// whose parent only the cache holds are each rejected at start, in words
// that say so, and the remote's ref is untouched.
func TestCacheOnlyCommitsRejected(t *testing.T) {
	ssh := newSSHRemote(t)
	for _, c := range []struct {
		name string
		// pin returns the start's pin ("" for the worktree's HEAD).
		pin  func(t *testing.T, c *cacheRig) string
		want string
	}{
		{"a pin only the cache holds", func(t *testing.T, c *cacheRig) string {
			return c.cacheOnlyCommit(t, c.base)
		}, "is not in the worktree's own objects"},
		{"a HEAD only the cache holds", func(t *testing.T, c *cacheRig) string {
			sha := c.cacheOnlyCommit(t, c.base)
			os.WriteFile(filepath.Join(c.f.Work, ".git", "HEAD"), []byte(sha+"\n"), 0o644)
			return ""
		}, "is not in the worktree's own objects"},
		{"a loose object that only claims the cache's commit", func(t *testing.T, c *cacheRig) string {
			sha := c.cacheOnlyCommit(t, c.base)
			fakeLoose(t, c.f.Work, sha)
			return sha
		}, "is not in the worktree's own objects"},
		{"a parent only the cache holds", func(t *testing.T, c *cacheRig) string {
			parent := c.cacheOnlyCommit(t, c.base)
			tree := strings.TrimSpace(c.f.RunGit(t, "rev-parse", "HEAD^{tree}"))
			sha := strings.TrimSpace(testGit(t, c.f.Work, "commit-tree", "-p", parent, "-m", "on the cache's commit", tree))
			return sha
		}, "commit " /* the parent's sha, below */},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, "", []config.Push{{Slot: "app"}}, ssh.Entry("deploy"))
			cr := newCacheRig(t, r, "shared", ssh.URL)
			ref := "refs/heads/jr2/" + strings.ReplaceAll(c.name, " ", "-")
			cr.seed(t, ssh.Repo, ref+"-base")
			pin := c.pin(t, cr)
			want := c.want
			if want == "commit " {
				// The rejection names the cache's commit, not the pin.
				parent := strings.TrimSpace(testGit(t, cr.cache, "rev-parse", "refs/heads/cache-only"))
				want = "commit " + parent + " is not in the worktree's own objects"
			}
			p := slotPush("app", ssh.URL, "deploy", ref)
			p.Pin = pin
			_, out := r.push(t, "only", p)
			if out.Kind != wire.OutcomeRejected || out.Stage != StageStart || !strings.Contains(out.Reason, want) {
				t.Fatalf("outcome %+v, want rejected at start saying %q", out, want)
			}
			if got := remoteRef(t, ssh.Repo, ref); got != "" {
				t.Errorf("the remote's %s is %s after the rejection", ref, got)
			}
			if left := r.f.Leftovers(); len(left) != 0 {
				t.Errorf("scratch left behind: %v", left)
			}
		})
	}
}

// TestCacheCannotSteer: the cache's config names a program in every place
// git would run one — hooks (its hooks/ and core.hooksPath),
// core.fsmonitor, core.alternateRefsCommand, uploadpack.packObjectsHook,
// core.sshCommand through an include — and none runs: the push succeeds
// and no program the cache named connects or writes its witness.
func TestCacheCannotSteer(t *testing.T) {
	ssh := newSSHRemote(t)
	r := newRig(t, "", []config.Push{{Slot: "app"}}, ssh.Entry("deploy"))
	cr := newCacheRig(t, r, "shared", ssh.URL)
	cr.seed(t, ssh.Repo, "refs/heads/base")
	port, hits := hitListener(t)
	marker := filepath.Join(t.TempDir(), "witness")
	hit := filepath.Join(r.f.TopDir, "hit.sh")
	os.WriteFile(hit, []byte(fmt.Sprintf("#!/bin/bash\necho \"$0 $*\" >>%s\nexec 3<>/dev/tcp/127.0.0.1/%d\n", marker, port)), 0o755)
	hooks := filepath.Join(cr.cache, "hooks")
	os.MkdirAll(hooks, 0o755)
	for _, h := range []string{"pre-push", "post-checkout", "reference-transaction", "pre-receive", "post-update", "fsmonitor-watchman", "pre-upload-pack"} {
		os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\nexec "+hit+" hook\n"), 0o755)
	}
	extra := filepath.Join(cr.cache, "extra.config")
	os.WriteFile(extra, []byte("[core]\n\tsshCommand = "+hit+" included\n"), 0o644)
	cfg := fmt.Sprintf("[core]\n\tfsmonitor = %[1]s\n\thooksPath = %[2]s\n\talternateRefsCommand = %[1]s\n\tsshCommand = %[1]s ssh\n"+
		"[uploadpack]\n\tpackObjectsHook = %[1]s\n[include]\n\tpath = %[3]s\n[credential]\n\thelper = !%[1]s\n", hit, hooks, extra)
	appendFile(t, filepath.Join(cr.cache, "config"), cfg)
	r.pushUnsteered(t, "steer-cache", slotPush("app", ssh.URL, "deploy", "refs/heads/main"), hits, marker, "the cache")
}

// TestCacheName: the cache a remote url binds a push to; the transport
// and the ssh user are not part of it, a port written is.
func TestCacheName(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"ssh://git@git.example.com/org/app.git", "git.example.com/org/app.git"},
		{"git@git.example.com:org/app", "git.example.com/org/app.git"},
		{"https://git.example.com/org/app", "git.example.com/org/app.git"},
		{"https://Git.Example.COM/org/app.git/", "git.example.com/org/app.git"},
		{"git@git.example.com:/org/app.git", "git.example.com/org/app.git"},
		{"ssh://git@git.example.com:2222/org/app.git", "git.example.com:2222/org/app.git"},
		{"https://127.0.0.1:8443/remote.git", "127.0.0.1:8443/remote.git"},
		{"ssh://root@[::1]:22/srv/a.b_c-d.git", "[::1]:22/srv/a.b_c-d.git"},
		{"ssh://git@h/org/../app.git", ""},
		{"ssh://git@h/org/./app.git", ""},
		{"ssh://git@h//app.git", ""},
		{"ssh://git@h/~alice/app.git", ""},
		{"https://h/org/a%2Fb.git", ""},
		{"https://h/org/.hidden", ""},
		{"https://h/org/-opt", ""},
		{"https://h/.git", ""},
		{"file:///srv/app.git", ""},
	} {
		t.Run(c.url, func(t *testing.T) {
			got, err := CacheName(c.url)
			if got != c.want || (err == nil) != (c.want != "") {
				t.Fatalf("CacheName(%q) = %q, %v; want %q", c.url, got, err, c.want)
			}
		})
	}
}

// TestAlternatesIn: which alternates files a push from a worktree
// accepts: none, or entries that each name the push's own cache; any
// other entry is refused, by its line, with the fix.
func TestAlternatesIn(t *testing.T) {
	repos := t.TempDir()
	own := filepath.Join(t.TempDir(), "work", ".git", "objects")
	bound := filepath.Join(repos, "h", "org", "app.git", "objects")
	other := filepath.Join(repos, "h", "org", "other.git", "objects")
	rel, _ := filepath.Rel(own, bound)
	for _, c := range []struct {
		name, file, objects string
		want, refused       string
	}{
		{"none", "", bound, "", ""},
		{"comments and empty lines", "# x\n\n", bound, "", ""},
		{"the push's cache", bound + "\n", bound, bound, ""},
		{"the push's cache, relative", rel + "\n", bound, bound, ""},
		{"the push's cache, unclean", repos + "/h/org/x/../app.git/objects/\n", bound, bound, ""},
		{"the push's cache twice", bound + "\n" + bound + "\n", bound, bound, ""},
		{"another cache", bound + "\n" + other + "\n", bound, "", "line 2 names an object directory other than the cache of the push's remote ($JR2_EFFECTOR_REPOS/h/org/app.git/objects)"},
		{"another cache, relative", "../../../../" + other + "\n", bound, "", "line 1 names an object directory other than"},
		{"the caches' root", repos + "\n", bound, "", "line 1 names"},
		{"outside the caches", "/etc\n", bound, "", "line 1 names"},
		{"quoted", "\"" + bound + "\"\n", bound, "", "line 1 names"},
		{"crlf", bound + "\r\n", bound, "", "line 1 names"},
		{"a cache this Effector lacks", bound + "\n", "", "", "line 1 names an object directory, and this Effector holds no cache of the push's remote ($JR2_EFFECTOR_REPOS/h/org/app.git)"},
		{"a url that names no cache", bound + "\n", "", "", "the push's url names no node cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "h/org/app.git"
			if strings.Contains(c.name, "names no cache") {
				name = ""
			}
			got, why := alternatesIn([]byte(c.file), own, name, c.objects)
			if got != c.want || !strings.Contains(why, c.refused) || (why == "") != (c.refused == "") {
				t.Fatalf("got %q, %q; want %q, %q", got, why, c.want, c.refused)
			}
			if why != "" && (strings.Contains(why, other) || strings.Contains(why, "/etc")) {
				t.Fatalf("the reason quotes the entry: %q", why)
			}
		})
	}
}

// TestAlternatesRule: the worktree's own files around its alternates: a
// link where git reads objects, an http-alternates file, an alternates
// file that is a link, each refused at start.
func TestAlternatesRule(t *testing.T) {
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, git string)
		refused string
	}{
		{"no info directory", func(t *testing.T, git string) { os.RemoveAll(filepath.Join(git, "objects", "info")) }, ""},
		{"objects is a link", func(t *testing.T, git string) {
			os.Rename(filepath.Join(git, "objects"), filepath.Join(git, "elsewhere"))
			os.Symlink("elsewhere", filepath.Join(git, "objects"))
		}, "its .git/objects is a link or a file"},
		{"info is a link", func(t *testing.T, git string) {
			os.RemoveAll(filepath.Join(git, "objects", "info"))
			os.Symlink(t.TempDir(), filepath.Join(git, "objects", "info"))
		}, "its .git/objects/info is a link or a file"},
		{"http-alternates", func(t *testing.T, git string) {
			os.WriteFile(filepath.Join(git, "objects", "info", "http-alternates"), []byte("https://x/objects\n"), 0o644)
		}, "http-alternates names object sources a push never reads"},
		{"alternates is a link", func(t *testing.T, git string) {
			f := filepath.Join(t.TempDir(), "alt")
			os.WriteFile(f, nil, 0o644)
			os.Symlink(f, filepath.Join(git, "objects", "info", "alternates"))
		}, "alternates is not a file of its own"},
		{"alternates too large", func(t *testing.T, git string) {
			os.WriteFile(filepath.Join(git, "objects", "info", "alternates"), bytes.Repeat([]byte("#\n"), maxAlternates), 0o644)
		}, "is over 64 KiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			work := t.TempDir()
			testGit(t, work, "init", "-q")
			c.prepare(t, filepath.Join(work, ".git"))
			got, why := alternatesRule(work, "h/app.git", "")
			if got != "" || !strings.Contains(why, c.refused) || (why == "") != (c.refused == "") {
				t.Fatalf("got %q, %q; want refused %q", got, why, c.refused)
			}
		})
	}
}

// TestNextWorktreeCommit: an answer of cat-file --batch is a commit of
// the worktree's only when its bytes hash to its name.
func TestNextWorktreeCommit(t *testing.T) {
	body := "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nm\n"
	h := sha1.Sum([]byte(fmt.Sprintf("commit %d\x00%s", len(body), body)))
	sha := hex.EncodeToString(h[:])
	other := strings.Repeat("1", 40)
	for _, c := range []struct {
		name, in, want string
		rest           string
	}{
		{"a commit", fmt.Sprintf("%s commit %d\n%s\nnext", sha, len(body), body), sha, "next"},
		{"a name its bytes do not hash to", fmt.Sprintf("%s commit %d\n%s\n", other, len(body), body), "", ""},
		{"missing", sha + " missing\n", "", ""},
		{"a tree", fmt.Sprintf("%s tree %d\n%s\n", sha, len(body), body), "", ""},
		{"short", fmt.Sprintf("%s commit %d\n%s", sha, len(body)+5, body), "", ""},
		{"no newline after the body", fmt.Sprintf("%s commit %d\n%sX", sha, len(body), body), "", ""},
		{"a negative size", sha + " commit -1\n\n", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			name, rest, ok := nextWorktreeCommit([]byte(c.in))
			if name != c.want || ok != (c.want != "") || (ok && string(rest) != c.rest) {
				t.Fatalf("got %q %v rest %q, want %q", name, ok, rest, c.want)
			}
		})
	}
}

// TestPushSignedFromCache: an ssh-signed push from a worktree cloned
// --shared from the cache and from a shallow one, to a ref the remote
// holds at the base: only the agent's commit is signed, on top of the
// base, with its tree; git verify-commit passes.
func TestPushSignedFromCache(t *testing.T) {
	ssh := newSSHRemote(t)
	entry := ssh.Entry("deploy")
	dir := t.TempDir()
	priv, pub := sshKey(t, dir, "signer")
	entry.Files[config.GitSignIdentity] = priv
	signers := filepath.Join(dir, "allowed")
	os.WriteFile(signers, []byte("push@jr2.dev "+string(pub)), 0o600)
	for _, form := range []string{"shared", "shallow"} {
		t.Run(form, func(t *testing.T) {
			r := newRig(t, "", []config.Push{{Slot: "app", Sign: config.SignSSH}}, entry)
			cr := newCacheRig(t, r, form, ssh.URL)
			ref := "refs/heads/jr2/signed-" + form
			cr.seed(t, ssh.Repo, ref)
			head := strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD"))
			_, out := r.push(t, "signed-cache", slotPush("app", ssh.URL, "deploy", ref))
			if out.Kind != wire.OutcomePushed || out.Commit == head || !wire.ValidSHA(out.Commit) {
				t.Fatalf("outcome %+v", out)
			}
			if got := remoteRef(t, ssh.Repo, ref); got != out.Commit {
				t.Fatalf("the remote's ref is %q, want %s", got, out.Commit)
			}
			parent := strings.TrimSpace(testGit(t, dir, "--git-dir="+ssh.Repo, "rev-parse", out.Commit+"^"))
			if parent != cr.base || treeOf(t, ssh.Repo, out.Commit) != strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD^{tree}")) {
				t.Fatalf("the signed tip's parent is %s (want the base %s), or its tree is not the agent's", parent, cr.base)
			}
			if err := verifyCommit(t, ssh.Repo, out.Commit, nil, "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+signers); err != nil {
				t.Errorf("the signed tip does not verify: %v", err)
			}
		})
	}
}

// TestWorktreeTips: the commits a worktree's loose and packed refs name,
// each once; a symbolic ref, a peeled line and a file that is no ref give
// none, and a link out of the worktree is not followed.
func TestWorktreeTips(t *testing.T) {
	work := t.TempDir()
	a, b, c := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x"), []byte(strings.Repeat("d", 40)+"\n"), 0o644)
	for p, s := range map[string]string{
		".git/refs/heads/main":          a + "\n",
		".git/refs/remotes/origin/HEAD": "ref: refs/remotes/origin/main\n",
		".git/refs/remotes/origin/main": b + "\n",
		".git/refs/tags/junk":           "not a ref\n",
		".git/packed-refs":              "# pack-refs with: peeled\n" + b + " refs/heads/b\n" + c + " refs/tags/v1\n^" + strings.Repeat("e", 40) + "\n",
	} {
		os.MkdirAll(filepath.Join(work, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(work, p), []byte(s), 0o644)
	}
	os.Symlink(outside, filepath.Join(work, ".git", "refs", "out"))
	got := worktreeTips(work)
	sort.Strings(got)
	if want := []string{a, b, c}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
