package pushkind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
)

// The rule: a push sends only objects that are the
// worktree's own or that the cache of the push's own remote holds. On a
// node whose caches serve several tenants, another repository's cache
// holds objects the agent may know the names of; a commit it writes over
// one of them must not carry it to the agent's remote.

// foreign is a second repository's cache under the fixture's
// JR2_EFFECTOR_REPOS, the cache of another remote (otherURL), holding a
// private blob, a tree that holds it, a commit and an annotated tag that
// no object of the app's repository reaches.
type foreign struct {
	cache, objects                 string
	blob, tree, commit, tag, value string
}

const otherURL = "ssh://git@tenant-b.example/org/private.git"

func newForeign(t testing.TB, r *rig) *foreign {
	t.Helper()
	name, err := CacheName(otherURL)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(r.f.TopDir, "tenant-b")
	fo := &foreign{cache: filepath.Join(r.f.Repos, name), value: "SENTINEL-tenant-b-private-" + fmt.Sprint(time.Now().UnixNano())}
	fo.objects = filepath.Join(fo.cache, "objects")
	testGit(t, r.f.TopDir, "init", "-q", "-b", "main", src)
	os.MkdirAll(filepath.Join(src, "private"), 0o755)
	os.WriteFile(filepath.Join(src, "private", "key.txt"), []byte(fo.value+"\n"), 0o644)
	testGit(t, src, "add", "-A")
	testGit(t, src, "commit", "-q", "-m", "tenant b's private commit")
	testGit(t, src, "tag", "-a", "-m", "tenant b's private tag", "v1")
	testGit(t, r.f.TopDir, "clone", "-q", "--bare", "--no-local", src, fo.cache)
	rev := func(s string) string { return strings.TrimSpace(testGit(t, src, "rev-parse", s)) }
	fo.blob, fo.tree, fo.commit, fo.tag = rev("HEAD:private/key.txt"), rev("HEAD:private"), rev("HEAD"), rev("v1")
	os.RemoveAll(src)
	return fo
}

// of is the foreign object of a kind.
func (fo *foreign) of(kind string) string {
	return map[string]string{"blob": fo.blob, "tree": fo.tree, "commit": fo.commit, "tag": fo.tag}[kind]
}

// agentCommit writes, in the worktree with the agent's own git, a commit
// on HEAD that names the foreign object of kind by its name alone (git
// mktree --missing; a commit as a parent): a blob or a tag as a file of
// its tree (a tag in a blob's entry is how one would ride a push), a tree
// as a directory. It returns the commit.
func agentCommit(t testing.TB, work, kind, sha string) string {
	t.Helper()
	head := strings.TrimSpace(testGit(t, work, "rev-parse", "HEAD"))
	tree := strings.TrimSpace(testGit(t, work, "rev-parse", "HEAD^{tree}"))
	entries := testGit(t, work, "ls-tree", tree)
	parents := "parent " + head + "\n"
	switch kind {
	case "blob", "tag":
		entries += "100644 blob " + sha + "\tstolen.txt\n"
	case "tree":
		entries += "040000 tree " + sha + "\tstolen\n"
	case "commit":
		parents += "parent " + sha + "\n"
	}
	cmd := exec.Command("/usr/bin/git", "mktree", "--missing")
	cmd.Dir, cmd.Stdin = work, strings.NewReader(entries)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mktree: %v", err)
	}
	body := "tree " + strings.TrimSpace(string(out)) + "\n" + parents +
		"author agent <a@jr2.dev> 1700000000 +0000\ncommitter agent <a@jr2.dev> 1700000000 +0000\n\nover another repository's " + kind + "\n"
	cmd = exec.Command("/usr/bin/git", "hash-object", "-t", "commit", "-w", "--stdin")
	cmd.Dir, cmd.Stdin = work, strings.NewReader(body)
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("hash-object: %v", err)
	}
	sha = strings.TrimSpace(string(out))
	testGit(t, work, "update-ref", "HEAD", sha)
	return sha
}

// appendAlternate adds a line to the worktree's alternates file.
func appendAlternate(t testing.TB, work, line string) {
	t.Helper()
	appendFile(t, filepath.Join(work, ".git", "objects", "info", "alternates"), line+"\n")
}

// remoteHas reports whether a bare repository holds an object.
func remoteHas(repo, sha string) bool {
	cmd := exec.Command("/usr/bin/git", "--git-dir="+repo, "cat-file", "-e", sha)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
	return cmd.Run() == nil
}

// pushBetween is rig.push with between run after the start was answered
// and before the push runs: what the agent may change meanwhile.
func (r *rig) pushBetween(t testing.TB, id string, timeoutMs int64, p *wire.Push, between func()) wire.Outcome {
	t.Helper()
	plan, err := r.k.Prepare(id, &wire.Start{Kind: wire.KindPush, TimeoutMs: timeoutMs, Push: p})
	if err != nil {
		t.Fatalf("prepare %s: %v", id, err)
	}
	between()
	sc, err := scrub.New(r.held)
	if err != nil {
		t.Fatal(err)
	}
	out := plan.Run(context.Background(), effect.Held(sc))
	out.MapStrings(sc.String)
	return out
}

// TestForeignObjectsRefused: a worktree cloned --shared from the app's
// cache writes a commit over an object (blob, tree, commit, tag) only
// another repository's cache holds, and tries every way to let the push
// read that cache: its alternates name it (absolute, relative, through an
// alternate of its own, added after the start was answered), its pack
// directory links to the other cache's pack, the Effector's environment
// names it, the app's cache's own alternates chain to it, an
// http-alternates file. Each push is refused in words that say why, and
// the remote — a real sshd's repository — holds neither the object nor
// the ref afterwards. Before the rule, the first case settled pushed and
// the remote held the blob.
func TestForeignObjectsRefused(t *testing.T) {
	ssh := newSSHRemote(t)
	const atStart = "names an object directory other than the cache of the push's remote"
	const named = "which is in neither the worktree's own objects nor the cache of the push's remote"
	type setup struct {
		r  *rig
		cr *cacheRig
		fo *foreign
	}
	// attack prepares the worktree (or the node) before the start;
	// between runs after the start's answer.
	type tcase struct {
		name, kind      string
		attack, between func(t *testing.T, s setup)
		stage, want     string
	}
	var cases []tcase
	for _, kind := range []string{"blob", "tree", "commit", "tag"} {
		cases = append(cases,
			// The trial that found the hole: the other cache appended to
			// the worktree's alternates.
			tcase{name: "alternates names the other cache/" + kind, kind: kind, attack: func(t *testing.T, s setup) {
				appendAlternate(t, s.r.f.Work, s.fo.objects)
			}, stage: StageStart, want: "line 2 " + atStart},
			// The agent knows the name and nothing else.
			tcase{name: "the name alone/" + kind, kind: kind, stage: StageStart, want: named},
		)
	}
	cases = append(cases,
		tcase{name: "a relative alternates entry", kind: "blob", attack: func(t *testing.T, s setup) {
			rel, _ := filepath.Rel(filepath.Join(s.r.f.Work, ".git", "objects"), s.fo.objects)
			appendAlternate(t, s.r.f.Work, rel)
		}, stage: StageStart, want: "line 2 " + atStart},
		tcase{name: "an alternate of the worktree's own that chains to it", kind: "blob", attack: func(t *testing.T, s setup) {
			mid := filepath.Join(s.r.f.Work, ".git", "mid", "objects")
			os.MkdirAll(filepath.Join(mid, "info"), 0o755)
			os.WriteFile(filepath.Join(mid, "info", "alternates"), []byte(s.fo.objects+"\n"), 0o644)
			appendAlternate(t, s.r.f.Work, mid)
		}, stage: StageStart, want: "line 2 " + atStart},
		tcase{name: "an http-alternates file", kind: "blob", attack: func(t *testing.T, s setup) {
			os.WriteFile(filepath.Join(s.r.f.Work, ".git", "objects", "info", "http-alternates"), []byte(s.fo.objects+"\n"), 0o644)
		}, stage: StageStart, want: "http-alternates"},
		tcase{name: "alternates rewritten after the start", kind: "blob", between: func(t *testing.T, s setup) {
			appendAlternate(t, s.r.f.Work, s.fo.objects)
		}, stage: StageStart, want: named},
		tcase{name: "alternates replaced by a link after the start", kind: "tree", between: func(t *testing.T, s setup) {
			alt := filepath.Join(s.r.f.Work, ".git", "objects", "info", "alternates")
			other := filepath.Join(s.r.f.TopDir, "alternates")
			os.WriteFile(other, []byte(s.cr.cache+"/objects\n"+s.fo.objects+"\n"), 0o644)
			os.Remove(alt)
			os.Symlink(other, alt)
		}, stage: StageStart, want: named},
		tcase{name: "pack files linked from the other cache", kind: "blob", attack: func(t *testing.T, s setup) {
			packs, _ := filepath.Glob(filepath.Join(s.fo.objects, "pack", "pack-*"))
			if len(packs) == 0 {
				t.Fatal("the other cache holds no pack")
			}
			dir := filepath.Join(s.r.f.Work, ".git", "objects", "pack")
			os.MkdirAll(dir, 0o755)
			for _, p := range packs {
				os.Symlink(p, filepath.Join(dir, filepath.Base(p)))
			}
		}, stage: StageStart, want: named},
		tcase{name: "the pack directory a link to the other cache's", kind: "blob", attack: func(t *testing.T, s setup) {
			dir := filepath.Join(s.r.f.Work, ".git", "objects", "pack")
			os.RemoveAll(dir)
			os.Symlink(filepath.Join(s.fo.objects, "pack"), dir)
		}, stage: StageStart, want: named},
		tcase{name: "GIT_ALTERNATE_OBJECT_DIRECTORIES in the Effector's environment", kind: "blob", attack: func(t *testing.T, s setup) {
			t.Setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", s.fo.objects)
			t.Setenv("GIT_OBJECT_DIRECTORY", s.fo.objects)
		}, stage: StageStart, want: named},
		tcase{name: "the app's cache's own alternates chain to it", kind: "blob", attack: func(t *testing.T, s setup) {
			os.MkdirAll(filepath.Join(s.cr.cache, "objects", "info"), 0o755)
			if err := os.WriteFile(filepath.Join(s.cr.cache, "objects", "info", "alternates"), []byte(s.fo.objects+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, stage: StageStart, want: named},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, "", []config.Push{{Slot: "app"}}, ssh.Entry("deploy"))
			fo := newForeign(t, r)
			cr := newCacheRig(t, r, "shared", ssh.URL)
			ref := "refs/heads/jr2/" + strings.NewReplacer(" ", "-", "/", "-", "'", "").Replace(c.name)
			cr.seed(t, ssh.Repo, ref+"-base")
			s := setup{r: r, cr: cr, fo: fo}
			want := fo.of(c.kind)
			agentCommit(t, r.f.Work, c.kind, want)
			if c.attack != nil {
				c.attack(t, s)
			}
			between := func() {}
			if c.between != nil {
				between = func() { c.between(t, s) }
			}
			out := r.pushBetween(t, "foreign", 60000, slotPush("app", ssh.URL, "deploy", ref), between)
			if out.Kind != wire.OutcomeRejected || out.Stage != c.stage || !strings.Contains(out.Reason, c.want) {
				t.Fatalf("outcome %+v, want rejected at %s saying %q", out, c.stage, c.want)
			}
			if strings.Contains(c.want, "neither") && !strings.Contains(out.Reason, "object "+want) && !strings.Contains(out.Reason, "object "+fo.blob) {
				t.Errorf("the reason names no foreign object (%s): %q", want, out.Reason)
			}
			if strings.Contains(out.Reason, fo.value) || strings.Contains(out.Reason, fo.cache) {
				t.Errorf("the reason quotes the other cache: %q", out.Reason)
			}
			if got := remoteRef(t, ssh.Repo, ref); got != "" {
				t.Errorf("the remote's %s is %s after the refusal", ref, got)
			}
			for _, o := range []string{fo.blob, fo.tree, fo.commit, fo.tag} {
				if remoteHas(ssh.Repo, o) {
					t.Errorf("the remote holds the other repository's object %s", o)
				}
			}
			if left := r.f.Leftovers(); len(left) != 0 {
				t.Errorf("scratch left behind: %v", left)
			}
		})
	}
}

// TestCheckSentNamesAForeignObject: the check of every object a push
// sends stands on its own. A clean repository that held another
// repository's blob (its fetch is confined so that it cannot; here the
// blob is put there by hand) and a pinned commit that names it: the
// check refuses it, naming the blob, though every commit is the
// worktree's own. Without the blob named, the same check passes.
func TestCheckSentNamesAForeignObject(t *testing.T) {
	ssh := newSSHRemote(t)
	r := newRig(t, "", []config.Push{{Slot: "app"}}, ssh.Entry("deploy"))
	fo := newForeign(t, r)
	cr := newCacheRig(t, r, "shared", ssh.URL)
	cr.seed(t, ssh.Repo, "refs/heads/base")
	own := strings.TrimSpace(testGit(t, r.f.Work, "rev-parse", "HEAD"))
	bad := agentCommit(t, r.f.Work, "blob", fo.blob)
	p := r.k.prepare("check", &wire.Start{Kind: wire.KindPush, TimeoutMs: 60000,
		Push: &wire.Push{Slot: wire.Slot{Name: "app", URL: ssh.URL, Credentials: "deploy"}, Ref: "refs/heads/x", Pin: own}})
	if p.rejected != "" || p.cache == "" {
		t.Fatalf("prepared %+v", p)
	}
	ru := &runner{k: r.k, p: p}
	defer ru.finish()
	ctx := context.Background()
	if err := ru.makeScratch(); err != nil {
		t.Fatal(err)
	}
	if err := ru.fetchPinned(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ru.writeCredentials(); err != nil {
		t.Fatal(err)
	}
	if out := ru.checkSent(ctx); out != nil {
		t.Fatalf("the agent's own commit: %+v", out)
	}
	// Into the clean repository by hand: the foreign blob, then the
	// agent's tree and commit over it (the worktree's own).
	copyObject := func(from, typ, sha string) {
		body := testGit(t, r.f.TopDir, "--git-dir="+from, "cat-file", typ, sha)
		cmd := exec.Command("/usr/bin/git", "--git-dir="+ru.repo, "hash-object", "-t", typ, "-w", "--stdin", "--literally")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != sha {
			t.Fatalf("copy %s %s: %v %s", typ, sha, err, out)
		}
	}
	copyObject(fo.cache, "blob", fo.blob)
	copyObject(filepath.Join(r.f.Work, ".git"), "tree", strings.TrimSpace(testGit(t, r.f.Work, "rev-parse", bad+"^{tree}")))
	copyObject(filepath.Join(r.f.Work, ".git"), "commit", bad)
	ru.p.pinned = bad
	out := ru.checkSent(ctx)
	want := "the push would send a blob " + fo.blob + ", which is in neither the worktree's own objects nor the cache of the push's remote"
	if out == nil || out.Kind != wire.OutcomeRejected || out.Stage != StageStart || !strings.Contains(out.Reason, want) {
		t.Fatalf("outcome %+v, want rejected at start saying %q", out, want)
	}
}

// TestCacheOnlyObjectsPush: the rule's other side. A blob and a tree that
// only the push's own cache holds (not the worktree, not the remote),
// named by the agent's commit, are sent: the push settles pushed and the
// remote holds both.
func TestCacheOnlyObjectsPush(t *testing.T) {
	ssh := newSSHRemote(t)
	r := newRig(t, "", []config.Push{{Slot: "app"}}, ssh.Entry("deploy"))
	cr := newCacheRig(t, r, "shared", ssh.URL)
	cr.seed(t, ssh.Repo, "refs/heads/base")
	write := func(typ, body string) string {
		cmd := exec.Command("/usr/bin/git", "--git-dir="+cr.cache, "hash-object", "-t", typ, "-w", "--stdin")
		cmd.Stdin = strings.NewReader(body)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	blob := write("blob", "only the app's cache holds this\n")
	cmd := exec.Command("/usr/bin/git", "--git-dir="+cr.cache, "mktree")
	cmd.Stdin = strings.NewReader("100644 blob " + blob + "\tcached.txt\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	tree := strings.TrimSpace(string(out))
	head := agentCommit(t, r.f.Work, "tree", tree)
	if remoteHas(ssh.Repo, blob) || looseHas(r.f.Work, blob) {
		t.Fatal("the blob is not the cache's alone")
	}
	_, o := r.push(t, "cached", slotPush("app", ssh.URL, "deploy", "refs/heads/jr2/cached"))
	if o.Kind != wire.OutcomePushed || o.Commit != head {
		t.Fatalf("outcome %+v", o)
	}
	for _, sha := range []string{blob, tree, head} {
		if !remoteHas(ssh.Repo, sha) {
			t.Errorf("the remote lacks %s", sha)
		}
	}
}

// looseHas reports whether a worktree's own objects (alternates aside)
// hold sha.
func looseHas(work, sha string) bool {
	cmd := exec.Command("/usr/bin/git", "cat-file", "-e", sha)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_DIR=" + filepath.Join(work, ".git"),
		"GIT_OBJECT_DIRECTORY=" + filepath.Join(work, ".git", "objects"), "GIT_ALTERNATE_OBJECT_DIRECTORIES="}
	os.Rename(filepath.Join(work, ".git", "objects", "info", "alternates"), filepath.Join(work, ".git", "alternates.off"))
	defer os.Rename(filepath.Join(work, ".git", "alternates.off"), filepath.Join(work, ".git", "objects", "info", "alternates"))
	return cmd.Run() == nil
}
