package pushkind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/gitrun"
	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
)

// fetchPinned makes the clean repository and fetches the pinned commit
// into it from the worktree, over git's transport: upload-pack is the one
// git that reads the agent's repository, confined.
func (r *runner) fetchPinned(ctx context.Context) error {
	key := r.phase("fetch")
	defer r.settle(key)
	if _, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"init", "--quiet", "--bare", "--template="}}); err != nil {
		return gitrun.Err("init", stderr, err)
	}
	if r.p.cache != "" {
		if err := r.useCache(ctx, key); err != nil {
			return err
		}
	}
	src := "file://" + filepath.Clean(r.k.o.Work)
	// --update-shallow: a shallow worktree's commits come with its
	// shallow roots, and the clean repository is shallow there too.
	_, stderr, err := r.git(ctx, gitCall{key: key, readWork: true, env: []string{gitrun.Allow("file")}, args: []string{
		"-c", "protocol.version=2", "-c", "transfer.fsckObjects=true",
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--update-shallow", "--", src, r.p.pinned}})
	if err != nil {
		if why := r.missingObject(ctx, key); why != "" {
			return errors.New(why)
		}
		return fmt.Errorf("commit %s is not in the worktree: %w", r.p.pinned, gitrun.Err("fetch", stderr, err))
	}
	out, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"cat-file", "-t", r.p.pinned}})
	if err != nil {
		return fmt.Errorf("commit %s is not in the worktree: %w", r.p.pinned, gitrun.Err("cat-file", stderr, err))
	}
	if t := strings.TrimSpace(string(out)); t != "commit" {
		return fmt.Errorf("%s is not a commit (a %s)", r.p.pinned, t)
	}
	if r.cached {
		// The fetch may have taken the pinned commit from a cache (the
		// worktree's alternates reach it, or the clean repository's own
		// do): it must be the worktree's own.
		return r.fromWorktree(ctx, key, []string{r.p.pinned})
	}
	return nil
}

// useCache makes the push's cache (the one the worktree's alternates may
// name) the clean repository's own alternates — data only: git reads its
// objects, never its config, hooks or refs — and offers as what it has
// the commits of the worktree's refs the cache holds, so the fetch takes
// from the worktree only what the cache lacks.
func (r *runner) useCache(ctx context.Context, key string) error {
	alt := r.p.cache + "\n"
	if err := os.WriteFile(filepath.Join(r.repo, "objects", "info", "alternates"), []byte(alt), 0o600); err != nil {
		return fmt.Errorf("the clean repository's alternates could not be written (%s)", oserr.Why(err))
	}
	r.cached = true
	if _, stderr, err := r.git(ctx, gitCall{key: key, proof: true, args: []string{"init", "--quiet", "--bare", "--template="}}); err != nil {
		return gitrun.Err("init", stderr, err)
	}
	if len(r.p.tips) == 0 {
		return nil
	}
	held, err := r.heldCommits(ctx, key, r.p.tips)
	if err != nil {
		return err
	}
	r.haves = held
	var q bytes.Buffer
	for i, sha := range held {
		fmt.Fprintf(&q, "create refs/jr2/have/%d %s\n", i, sha)
	}
	if q.Len() == 0 {
		return nil
	}
	if _, stderr, err := r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"update-ref", "--stdin"}}); err != nil {
		return gitrun.Err("update-ref", stderr, err)
	}
	return nil
}

// heldCommits is those of shas the clean repository (with its caches)
// holds as commits.
func (r *runner) heldCommits(ctx context.Context, key string, shas []string) ([]string, error) {
	var q bytes.Buffer
	for _, s := range shas {
		q.WriteString(s + "\n")
	}
	out, stderr, err := r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"}})
	if err != nil {
		return nil, gitrun.Err("cat-file", stderr, err)
	}
	var held []string
	for _, line := range strings.Split(string(out), "\n") {
		if sha, typ, _ := strings.Cut(line, " "); typ == "commit" && wire.ValidSHA(sha) {
			held = append(held, sha)
		}
	}
	return held, nil
}

// maxSent bounds the commits a push with a cache checks it sends.
const maxSent = 20000

// checkSent is the rule of a push that reads a cache: every commit it
// sends — the pinned commit's history that no ref of the remote holds —
// is the worktree's own. It lists the remote's refs, and reads each such
// commit from the worktree's own objects.
func (r *runner) checkSent(ctx context.Context) *wire.Outcome {
	key := r.phase("check")
	defer r.settle(key)
	args, env := r.remote()
	out, stderr, err := r.git(ctx, gitCall{key: key, cred: true, env: env, args: append(args, "ls-remote", "--", r.p.push.Slot.URL)})
	if err != nil {
		o := r.fail(ctx, StagePush, "listing the remote's refs", errors.New(r.unreachable(stderr)))
		return &o
	}
	var advertised []string
	for _, line := range strings.Split(string(out), "\n") {
		if sha, _, ok := strings.Cut(line, "\t"); ok && wire.ValidSHA(sha) {
			advertised = append(advertised, sha)
		}
	}
	held, err := r.heldCommits(ctx, key, advertised)
	if err != nil {
		o := r.fail(ctx, StageStart, "listing the commits the push sends", err)
		return &o
	}
	var q bytes.Buffer
	q.WriteString(r.p.pinned + "\n")
	for _, s := range held {
		q.WriteString("^" + s + "\n")
	}
	out, stderr, err = r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"rev-list", "--stdin"}})
	if err != nil {
		o := r.fail(ctx, StageStart, "listing the commits the push sends", gitrun.Err("rev-list", stderr, err))
		return &o
	}
	sent := strings.Fields(string(out))
	if len(sent) > maxSent {
		o := rejected(StageStart, fmt.Sprintf("the push would send %d commits the remote does not hold, past the %d it checks come from the worktree; push a branch whose history the remote mostly holds", len(sent), maxSent))
		return &o
	}
	if err := r.fromWorktree(ctx, key, sent); err != nil {
		o := r.fail(ctx, StageStart, "reading the commits the push sends from the worktree", err)
		return &o
	}
	if err := r.ownOrCached(ctx, key, held); err != nil {
		o := r.fail(ctx, StageStart, "checking the objects the push sends", err)
		return &o
	}
	return nil
}

// maxSentObjects bounds the objects a push with a cache checks it sends.
const maxSentObjects = 1 << 20

// theRule is the rule of what a push sends, as a reason states it.
const theRule = "a push sends only objects that are the worktree's own or that the cache of its remote holds; nothing was sent"

// ownOrCached is the rule over every object the push sends, whatever its
// kind (commit, tree, blob, tag): each object the pinned commit reaches
// that no commit of the remote's refs (held) reaches is read, by name,
// from the worktree's own objects or the push's cache alone — a confined
// git that can open nothing else, so no alternates entry, the worktree's
// or a cache's, a link or a pack file that names another cache reaches
// one. The clean repository got its objects through an upload-pack
// confined the same way, so this holds already; the check says so for
// each object, and names the first that breaks it.
func (r *runner) ownOrCached(ctx context.Context, key string, held []string) error {
	var q bytes.Buffer
	q.WriteString(r.p.pinned + "\n")
	for _, s := range held {
		q.WriteString("^" + s + "\n")
	}
	out, stderr, err := r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"rev-list", "--objects", "--no-object-names", "--stdin"}})
	if err != nil {
		return gitrun.Err("rev-list", stderr, err)
	}
	objects := strings.Fields(string(out))
	if len(objects) > maxSentObjects {
		return fmt.Errorf("the push would send over %d objects the remote does not hold, past what it checks come from the worktree or its cache; push a branch whose history the remote mostly holds", maxSentObjects)
	}
	q.Reset()
	for _, o := range objects {
		if !wire.ValidSHA(o) {
			return fmt.Errorf("git rev-list listed %q, which is not an object name", o)
		}
		q.WriteString(o + "\n")
	}
	out, stderr, err = r.git(ctx, gitCall{key: key, ownOrCache: true, stdin: q.Bytes(), args: []string{"cat-file", "--buffer", "--batch-check=%(objectname) %(objecttype)"}})
	if err != nil {
		if o := unreadObject(stderr, ""); o != "" {
			return fmt.Errorf("the push would send object %s, which is in neither the worktree's own objects nor %s; %s", o, r.cacheWords(), theRule)
		}
		return gitrun.Err("cat-file", stderr, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	for i, o := range objects {
		if i < len(lines) {
			if name, typ, _ := strings.Cut(lines[i], " "); name == o && typ != "missing" {
				continue
			}
		}
		kind := "object"
		if t, _, err := r.git(ctx, gitCall{key: key, args: []string{"cat-file", "-t", o}}); err == nil {
			kind = "a " + strings.TrimSpace(string(t))
		}
		return fmt.Errorf("the push would send %s %s, which is in neither the worktree's own objects nor %s; %s", kind, o, r.cacheWords(), theRule)
	}
	return nil
}

// cacheWords names the push's cache in a reason.
func (r *runner) cacheWords() string {
	if r.p.cacheName == "" {
		return "a cache of the push's remote (its url names none)"
	}
	return fmt.Sprintf("the cache of the push's remote ($%s/%s)", config.EnvRepos, r.p.cacheName)
}

// missingObject explains a fetch of the pinned commit that failed: the
// first object its history reaches past the commits the cache offered
// that is in neither the worktree's own objects nor the push's cache (a
// confined git that can open nothing else), or "". It is how a commit
// the agent wrote over another repository's object is refused.
func (r *runner) missingObject(ctx context.Context, key string) string {
	var q bytes.Buffer
	q.WriteString(r.p.pinned + "\n")
	for _, s := range r.haves {
		q.WriteString("^" + s + "\n")
	}
	out, stderr, _ := r.git(ctx, gitCall{key: key, ownOrCache: true, stdin: q.Bytes(),
		args: []string{"rev-list", "--objects", "--missing=print", "--no-object-names", "--stdin"}})
	missing := ""
	for _, line := range strings.Split(string(out), "\n") {
		if sha, ok := strings.CutPrefix(line, "?"); ok && wire.ValidSHA(sha) {
			missing = sha
			break
		}
	}
	if missing == "" {
		missing = unreadObject(stderr, r.p.pinned)
	}
	if missing == "" {
		return ""
	}
	return fmt.Sprintf("the pinned commit's history names object %s, which is in neither the worktree's own objects nor %s; %s", missing, r.cacheWords(), theRule)
}

// unreadObject is the first object git said it could not read, other than
// not: a missing commit ends rev-list ("error: Could not read <sha>"), and
// an object directory an alternates entry names that the confined git may
// not open ends it too ("fatal: failed to read object <sha>: Permission
// denied").
func unreadObject(stderr []byte, not string) string {
	for _, line := range strings.Split(string(stderr), "\n") {
		if !strings.HasPrefix(line, "error: ") && !strings.HasPrefix(line, "fatal: ") {
			continue
		}
		for _, w := range strings.FieldsFunc(line, func(c rune) bool { return c == ' ' || c == ':' }) {
			if wire.ValidSHA(w) && w != not {
				return w
			}
		}
	}
	return ""
}

// quoteAlternate is an object directory as one entry of
// GIT_ALTERNATE_OBJECT_DIRECTORIES, whose entries ':' separates: quoted as
// git unquotes it (C style), so a ':' in it (a cache name's port) is its
// own.
func quoteAlternate(dir string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(dir) + `"`
}

// fromWorktree reads each commit from the worktree's own objects — its
// .git/objects as git's object directory, no cache readable, so neither
// its alternates nor the clean repository's reach one — and checks that
// its bytes hash to its name: a commit only a cache holds, or a file that
// only claims its name, is no commit of the worktree's.
func (r *runner) fromWorktree(ctx context.Context, key string, shas []string) error {
	if len(shas) == 0 {
		return nil
	}
	var q bytes.Buffer
	for _, s := range shas {
		q.WriteString(s + "\n")
	}
	out, _, err := r.git(ctx, gitCall{key: key, ownObjects: true, stdin: q.Bytes(), args: []string{"cat-file", "--batch"}})
	if err != nil && len(out) == 0 {
		return fmt.Errorf("the worktree's own objects could not be read (%v)", err)
	}
	for _, want := range shas {
		var name string
		var ok bool
		if name, out, ok = nextWorktreeCommit(out); !ok || name != want {
			return fmt.Errorf("commit %s is not in the worktree's own objects (a node cache may hold it, but a push sends only commits the worktree holds itself)", want)
		}
	}
	return nil
}
