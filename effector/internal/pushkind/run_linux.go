package pushkind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/gitrun"
	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/wire"
)

// runner is one run of a prepared push.
type runner struct {
	k *Kind
	p *prepared
	// dir is the push's scratch; the others are in it. proof is an empty
	// repository of its own for the git that reads the worktree's own
	// objects: it holds no object, so nothing in the scratch can pass as
	// the worktree's.
	dir, home, tmp, repo, cred, gnupg, proof string
	keys                                     []string // Tracker keys not yet settled
	// cached: the clean repository's alternates name the push's cache, so
	// every git that reads it may read that cache (read only); haves are
	// the commits of the worktree's refs it holds, offered to the fetch.
	cached bool
	haves  []string
}

// run is Plan.Run: the class lock (GPG), the scratch, the fetch of the
// pinned commit into a clean repository, the signing, the push, the
// settle loop, the scratch removed, and the outcome.
func (k *Kind) run(ctx context.Context, p *prepared) wire.Outcome {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	r := &runner{k: k, p: p}
	release := func() {}
	if p.sign == config.SignGPG {
		rel, err := k.o.Lock.Acquire(ctx, classlock.GPG)
		if err != nil {
			return rejected(StageSign, fmt.Sprintf("the push did not start signing within its %d ms (waiting for credentialed commands to end); nothing was pushed", p.timeout.Milliseconds()))
		}
		release = rel
	}
	// Deferred calls run last first: the settle loop and the scratch's
	// removal come before the class is released.
	defer func() { release() }()
	defer r.finish()
	if err := r.makeScratch(); err != nil {
		return rejected(StageStart, err.Error())
	}
	if err := r.fetchPinned(ctx); err != nil {
		return r.fail(ctx, StageStart, "reading the pinned commit", err)
	}
	if err := r.writeCredentials(); err != nil {
		return rejected(StageStart, err.Error())
	}
	if r.cached {
		if out := r.checkSent(ctx); out != nil {
			return *out
		}
	}
	tip := p.pinned
	if p.sign != "" {
		var out *wire.Outcome
		tip, out = r.signed(ctx, release)
		if out != nil {
			return *out
		}
	}
	return r.push(ctx, tip)
}

// fail is the rejection of a step that failed: past the timeout, the
// timeout is the reason.
func (r *runner) fail(ctx context.Context, stage, doing string, err error) wire.Outcome {
	if ctx.Err() != nil {
		return rejected(stage, fmt.Sprintf("the push ran past its %d ms while %s; nothing was pushed", r.p.timeout.Milliseconds(), doing))
	}
	return rejected(stage, r.clean(err.Error()))
}

// clean writes the push's scratch as "<scratch>" in text quoted from git
// or ssh: the copied keys are there.
func (r *runner) clean(s string) string {
	if r.dir == "" {
		return s
	}
	return strings.ReplaceAll(s, r.dir, "<scratch>")
}

// makeScratch makes $JR2_EFFECTOR_SCRATCH/push-<id>-<random>/ with home/
// (git's HOME and global config), tmp/, repo.git (the clean repository),
// cred/ (the copied credentials, written after the worktree was read) and
// gnupg/ (a GPG push's GNUPGHOME).
func (r *runner) makeScratch() error {
	dir, err := os.MkdirTemp(r.k.o.Scratch, "push-"+r.p.id+"-")
	if err != nil {
		return fmt.Errorf("the push's scratch could not be made (%s)", oserr.Why(err))
	}
	r.dir = dir
	r.home, r.tmp, r.repo = filepath.Join(dir, "home"), filepath.Join(dir, "tmp"), filepath.Join(dir, "repo.git")
	r.cred, r.gnupg, r.proof = filepath.Join(dir, "cred"), filepath.Join(dir, "gnupg"), filepath.Join(dir, "proof.git")
	for _, d := range []string{r.home, r.tmp, r.repo, r.cred, r.gnupg, r.proof} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("the push's scratch could not be made (%s)", oserr.Why(err))
		}
	}
	work := r.k.o.Work
	if err := r.gitHome().WriteConfig(work, filepath.Join(work, ".git")); err != nil {
		return fmt.Errorf("the push's git config could not be written (%s)", oserr.Why(err))
	}
	return nil
}

// finish settles every phase still live and removes the scratch.
func (r *runner) finish() {
	for _, key := range r.keys {
		r.settle(key)
	}
	r.keys = nil
	if r.dir != "" {
		removeTree(r.dir)
	}
}

// settle runs the settle loop of one phase; a scan that fails (a process
// caught mid-exit) is run again for a while.
func (r *runner) settle(key string) {
	for i := 0; i < 50 && r.k.o.Tracker.Settle(key) != nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	for i, k := range r.keys {
		if k == key {
			r.keys = append(r.keys[:i], r.keys[i+1:]...)
			break
		}
	}
}

func (r *runner) phase(name string) string {
	key := r.k.key(r.p.id, name)
	r.keys = append(r.keys, key)
	return key
}

// removeTree removes the scratch: only the Effector's own programs wrote
// in it, and none makes a directory it cannot write.
func removeTree(dir string) { _ = os.RemoveAll(dir) }

// gitHome is git's home in the push's scratch; git looks for no
// repository above the scratch.
func (r *runner) gitHome() gitrun.Home {
	return gitrun.Home{Dir: r.home, Tmp: r.tmp, Ceiling: r.dir}
}

// env is every program's whole environment (gitrun's): nothing of the
// Effector's.
func (r *runner) env(extra ...string) []string { return r.gitHome().Env(extra...) }

// gitCall is one git of the push.
type gitCall struct {
	key   string
	args  []string
	stdin []byte
	// readWork: the fetch from the worktree (confine --read-tree it);
	// cred: the remote phases (the copied credentials are reachable);
	// ownObjects: read the worktree's own objects alone (its
	// .git/objects as GIT_OBJECT_DIRECTORY, no cache readable), in the
	// proof repository, with the clean repository unreachable;
	// ownOrCache: the same, with the push's cache readable too and its
	// objects as GIT_ALTERNATE_OBJECT_DIRECTORIES (the objects the rule
	// lets a push send); proof: a git of the proof repository (its init).
	readWork, cred, ownObjects, ownOrCache, proof bool
	env                                           []string
}

// git runs one git confined and returns its stdout and stderr.
func (r *runner) git(ctx context.Context, c gitCall) ([]byte, []byte, error) {
	work := filepath.Clean(r.k.o.Work)
	argv := confine.Argv(r.k.o.Self)
	readWork := c.readWork || c.ownObjects || c.ownOrCache
	if readWork {
		// The worktree is the agent's uid's, its files maybe 0600: the
		// fetch keeps the one capability that reads them.
		argv = append(argv, "--keep-dac-read-search", "--read-tree", work)
	}
	if r.p.cache != "" && (r.cached || c.ownOrCache) && !c.ownObjects {
		// The push's one cache is read only, beneath a denied
		// JR2_EFFECTOR_REPOS: every other cache stays denied, whatever
		// an alternates file (the worktree's, or a cache's own) names.
		argv = append(argv, "--read-tree", r.p.cache)
	}
	gitDir := r.repo
	if c.ownObjects || c.ownOrCache || c.proof {
		gitDir = r.proof
	}
	for _, d := range []string{r.home, r.tmp, gitDir} {
		argv = append(argv, "--scratch", d)
	}
	if c.cred {
		argv = append(argv, "--scratch", r.cred)
	}
	for _, d := range r.k.o.Deny {
		if !readWork || filepath.Clean(d) != work {
			argv = append(argv, "--deny", d)
		}
	}
	argv = append(argv, "--node", r.k.o.Node, "--")
	argv = gitrun.Argv(argv, r.k.progs["git"], append([]string{"--git-dir=" + gitDir}, c.args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = gitDir
	cmd.Env = r.env(c.env...)
	if c.ownObjects || c.ownOrCache {
		cmd.Env = append(cmd.Env, "GIT_OBJECT_DIRECTORY="+filepath.Join(work, ".git", "objects"))
	}
	if c.ownOrCache && r.p.cache != "" {
		cmd.Env = append(cmd.Env, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+quoteAlternate(r.p.cache))
	}
	return r.exec(ctx, c.key, cmd, c.stdin)
}

// exec runs cmd through the Tracker under key (gitrun.Run) and returns
// its stdout and stderr, each bounded.
func (r *runner) exec(ctx context.Context, key string, cmd *exec.Cmd, stdin []byte) ([]byte, []byte, error) {
	return gitrun.Run(ctx, r.k.o.Tracker, key, cmd, stdin)
}

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

// writeCredentials copies what the remote phases read into cred/, mode
// 0600: the entry's ssh key and known_hosts, its token, its signing key,
// and the trust bundle. Only the bytes config read at start are written.
func (r *runner) writeCredentials() error {
	files := map[string][]byte{}
	for _, f := range []string{config.GitIdentity, config.GitKnownHosts, config.GitPassword} {
		if b, ok := r.p.entry.Files[f]; ok {
			files[f] = b
		}
	}
	switch r.p.sign {
	case config.SignSSH:
		if b, ok := r.p.entry.Files[config.GitSignIdentity]; ok {
			files[config.GitSignIdentity] = b
		}
	case config.SignGPG:
		if b, ok := r.p.entry.Files[config.GitSignGPG]; ok {
			files[config.GitSignGPG] = b
		}
	}
	if r.k.o.CAFile != "" && r.p.remote.Transport == wire.TransportHTTPS {
		bundle, err := trustBundle(r.k.o.CAFile)
		if err != nil {
			return err
		}
		files["ca.pem"] = bundle
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(r.cred, name), b, 0o600); err != nil {
			return fmt.Errorf("the push's credentials could not be copied into its scratch (%s)", oserr.Why(err))
		}
	}
	return nil
}

// systemBundles are where a distribution keeps its roots, as Go looks.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem",
}

// trustBundle is the system's roots and JR2_CA_FILE's, one PEM file: git's
// http.sslCAInfo replaces the system's bundle, so both go in it.
func trustBundle(caFile string) ([]byte, error) {
	extra, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s could not be read (%s)", config.EnvCAFile, oserr.Why(err))
	}
	var b []byte
	for _, p := range systemBundles {
		if sys, err := os.ReadFile(p); err == nil {
			b = append(append(b, sys...), '\n')
			break
		}
	}
	return append(b, extra...), nil
}

// remote is the config and env of the phases that reach the remote: the
// one transport the slot's url names, and its credentials.
func (r *runner) remote() (args, env []string) {
	switch r.p.remote.Transport {
	case wire.TransportSSH:
		ssh := []string{r.k.progs["ssh"], "-F", "/dev/null", "-E", filepath.Join(r.tmp, "ssh.log"),
			"-o", "IdentitiesOnly=yes", "-o", "IdentityFile=" + filepath.Join(r.cred, config.GitIdentity),
			"-o", "IdentityAgent=none", "-o", "StrictHostKeyChecking=yes",
			"-o", "UserKnownHostsFile=" + filepath.Join(r.cred, config.GitKnownHosts), "-o", "GlobalKnownHostsFile=/dev/null",
			"-o", "UpdateHostKeys=no", "-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none",
			"-o", "ProxyCommand=none", "-o", "ProxyJump=none", "-o", "PermitLocalCommand=no", "-o", "ForwardAgent=no",
			"-o", "ClearAllForwardings=yes", "-o", "PKCS11Provider=none", "-o", "SecurityKeyProvider=internal"}
		env = []string{gitrun.Allow("ssh"), "GIT_SSH_COMMAND=" + shellJoin(ssh), "GIT_SSH_VARIANT=ssh"}
	case wire.TransportHTTPS:
		host := r.p.remote.Host
		if r.p.remote.Port != 0 {
			host = fmt.Sprintf("%s:%d", host, r.p.remote.Port)
		}
		helper := shellJoin([]string{r.k.o.Self, "credential", "--password-file", filepath.Join(r.cred, config.GitPassword),
			"--username", r.p.entry.Username, "--host", host})
		// "!…": a shell snippet git appends the action to.
		env = []string{gitrun.Allow("https")}
		args = []string{"-c", "credential.helper=!" + helper, "-c", "credential.useHttpPath=false"}
		if r.k.o.CAFile != "" {
			args = append(args, "-c", "http.sslCAInfo="+filepath.Join(r.cred, "ca.pem"))
		}
	}
	return args, env
}

// shellJoin quotes each word for sh: git runs GIT_SSH_COMMAND and a
// credential helper through the shell.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// sshLine is ssh's last line of its own log, or "".
func (r *runner) sshLine() string {
	b, err := os.ReadFile(filepath.Join(r.tmp, "ssh.log"))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return gitrun.LastLine(b)
}

// unreachable is the reason of a remote phase that failed before git
// could speak with the remote.
func (r *runner) unreachable(stderr []byte) string {
	if l := r.sshLine(); l != "" {
		return r.clean("the remote could not be reached: ssh: " + strings.TrimPrefix(l, "ssh: ") + " (git: " + gitrun.Reason(stderr) + ")")
	}
	line := gitrun.Reason(stderr)
	if strings.Contains(line, "Authentication failed") || strings.Contains(line, "could not read Username") || strings.Contains(line, "403") {
		return r.clean("the remote refused the credential: " + line)
	}
	return r.clean("the remote could not be reached: " + line)
}

// push sends tip to the slot's ref and reads git's porcelain answer.
func (r *runner) push(ctx context.Context, tip string) wire.Outcome {
	key := r.phase("push")
	defer r.settle(key)
	args, env := r.remote()
	args = append(args, "push", "--porcelain", "--no-verify", "--", r.p.push.Slot.URL, tip+":"+r.p.push.Ref)
	out, stderr, err := r.git(ctx, gitCall{key: key, cred: true, args: args, env: env})
	if ctx.Err() != nil {
		return rejected(StagePush, fmt.Sprintf("the push ran past its %d ms while sending; the remote may hold the update", r.p.timeout.Milliseconds()))
	}
	flag, summary, found := porcelain(out, r.p.push.Ref)
	switch {
	case found && flag == '!' && (strings.Contains(summary, "non-fast-forward") || strings.Contains(summary, "fetch first")):
		return rejected(StagePush, fmt.Sprintf("the remote refused a non-fast-forward update of %s; the pinned commit does not hold the remote's tip", r.p.push.Ref))
	case found && flag == '!':
		return rejected(StagePush, r.clean(fmt.Sprintf("the remote refused the update of %s: %s", r.p.push.Ref, summary)))
	case found && err == nil:
		return wire.Outcome{Kind: wire.OutcomePushed, Commit: tip, Ref: r.p.push.Ref}
	case err == nil:
		return rejected(StagePush, "git push gave no status for the ref; the remote may hold the update")
	}
	return rejected(StagePush, r.unreachable(stderr))
}

// porcelain finds the status line of ref in `git push --porcelain`:
// "<flag>\t<from>:<to>\t<summary>".
func porcelain(out []byte, ref string) (flag byte, summary string, found bool) {
	for _, line := range strings.Split(string(out), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) == 3 && len(parts[0]) == 1 && strings.HasSuffix(parts[1], ":"+ref) {
			return parts[0][0], parts[2], true
		}
	}
	return 0, "", false
}

// signed rewrites the commits between the remote's ref and the pinned
// commit as signed commits and returns the signed tip; or the rejection.
// release ends a GPG push's class once its agent is gone.
func (r *runner) signed(ctx context.Context, release func()) (string, *wire.Outcome) {
	reject := func(stage, reason string) (string, *wire.Outcome) {
		o := rejected(stage, reason)
		return "", &o
	}
	keyFile := config.GitSignIdentity
	if r.p.sign == config.SignGPG {
		keyFile = config.GitSignGPG
	}
	if _, ok := r.p.entry.Files[keyFile]; !ok {
		return reject(StageSign, fmt.Sprintf("git.credentials entry %q holds no signing key (%s); the slot signs with %s", r.p.entry.Name, keyFile, r.p.sign))
	}
	key := r.phase("list")
	todo, signedBefore, out := r.toSign(ctx, key)
	r.settle(key)
	if out != nil {
		return "", out
	}
	sign := r.phase("sign")
	var signer func([]byte) ([]byte, error)
	stop := func() {}
	switch r.p.sign {
	case config.SignSSH:
		signer = func(payload []byte) ([]byte, error) { return r.sshSign(ctx, sign, payload) }
	case config.SignGPG:
		var err error
		if stop, err = r.startAgent(ctx, sign); err != nil {
			r.settle(sign)
			if ctx.Err() != nil {
				return reject(StageSign, fmt.Sprintf("the push ran past its %d ms while signing; nothing was pushed", r.p.timeout.Milliseconds()))
			}
			return reject(StageSign, r.clean("the signing key could not be loaded: "+err.Error()))
		}
		signer = func(payload []byte) ([]byte, error) { return r.gpgSign(ctx, sign, payload) }
	}
	tip, err := r.rewrite(ctx, sign, todo, signedBefore, signer)
	stop()
	r.settle(sign)
	if r.p.sign == config.SignGPG {
		// The agent is gone and its group settled: the class may go
		// before the push reaches the network.
		release()
	}
	if err != nil {
		if ctx.Err() != nil {
			return reject(StageSign, fmt.Sprintf("the push ran past its %d ms while signing; nothing was pushed", r.p.timeout.Milliseconds()))
		}
		return reject(StageSign, r.clean(err.Error()))
	}
	return tip, nil
}

// toSign lists the commits to sign, parents first: those of the pinned
// commit the remote does not hold. With the ref on the remote, its tip
// must be an ancestor of the pinned commit (else the push is a
// non-fast-forward and nothing is signed); without, every commit the
// remote advertises and the repository holds is left out.
func (r *runner) toSign(ctx context.Context, key string) ([]string, map[string]string, *wire.Outcome) {
	args, env := r.remote()
	out, stderr, err := r.git(ctx, gitCall{key: key, cred: true, env: env, args: append(args, "ls-remote", "--", r.p.push.Slot.URL)})
	if err != nil {
		o := r.fail(ctx, StagePush, "listing the remote's refs", errors.New(r.unreachable(stderr)))
		return nil, nil, &o
	}
	tip, advertised := "", []string{}
	for _, line := range strings.Split(string(out), "\n") {
		sha, ref, ok := strings.Cut(line, "\t")
		if !ok || !wire.ValidSHA(sha) {
			continue
		}
		if ref == r.p.push.Ref {
			tip = sha
		}
		advertised = append(advertised, sha)
	}
	exclude := advertised
	if tip != "" {
		exclude = []string{tip}
	}
	// Which of them this repository holds (the others are not ancestors).
	var q bytes.Buffer
	for _, s := range exclude {
		q.WriteString(s + "\n")
	}
	out, stderr, err = r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"}})
	if err != nil {
		o := r.fail(ctx, StageSign, "listing the commits to sign", gitrun.Err("cat-file", stderr, err))
		return nil, nil, &o
	}
	held := []string{}
	for _, line := range strings.Split(string(out), "\n") {
		if sha, typ, _ := strings.Cut(line, " "); typ == "commit" {
			held = append(held, sha)
		}
	}
	var before map[string]string
	if tip != "" {
		_, _, err := r.git(ctx, gitCall{key: key, args: []string{"merge-base", "--is-ancestor", tip, r.p.pinned}})
		if len(held) == 0 || err != nil {
			// The remote's tip may be an earlier push's signed rewrite of
			// an ancestor of the pinned commit: then only what follows
			// that ancestor is signed, on top of the tip.
			a, ferr := r.rewriteOf(ctx, key, tip)
			if ferr != nil || a == "" {
				o := rejected(StagePush, fmt.Sprintf("the remote refused a non-fast-forward update of %s; the pinned commit does not hold the remote's tip", r.p.push.Ref))
				if ctx.Err() != nil {
					o = r.fail(ctx, StageSign, "listing the commits to sign", ctx.Err())
				}
				return nil, nil, &o
			}
			held, before = []string{a}, map[string]string{a: tip}
		}
	}
	q.Reset()
	q.WriteString(r.p.pinned + "\n")
	for _, s := range held {
		q.WriteString("^" + s + "\n")
	}
	out, stderr, err = r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"rev-list", "--topo-order", "--reverse", "--stdin"}})
	if err != nil {
		o := r.fail(ctx, StageSign, "listing the commits to sign", gitrun.Err("rev-list", stderr, err))
		return nil, nil, &o
	}
	return strings.Fields(string(out)), before, nil
}

// rewriteOf finds the ancestor of the pinned commit that the remote's tip
// is a signed rewrite of: the same tree, headers and message, its
// parents and signature aside. It fetches the tip to read it.
func (r *runner) rewriteOf(ctx context.Context, key, tip string) (string, error) {
	args, env := r.remote()
	if _, stderr, err := r.git(ctx, gitCall{key: key, cred: true, env: env, args: append(args,
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", r.p.push.Slot.URL, r.p.push.Ref)}); err != nil {
		return "", gitrun.Err("fetch", stderr, err)
	}
	body := func(sha string) ([]byte, error) {
		raw, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"cat-file", "commit", sha}})
		if err != nil {
			return nil, gitrun.Err("cat-file", stderr, err)
		}
		c, err := parseCommit(raw)
		if err != nil {
			return nil, err
		}
		return c.payload(nil), nil
	}
	want, err := body(tip)
	if err != nil {
		return "", err
	}
	tree, _ := parseCommit(append([]byte(nil), want...))
	out, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"log", "--format=%H %T", r.p.pinned}})
	if err != nil {
		return "", gitrun.Err("log", stderr, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		sha, t, ok := strings.Cut(line, " ")
		if !ok || tree == nil || t != tree.tree {
			continue
		}
		if b, err := body(sha); err == nil && bytes.Equal(b, want) {
			return sha, nil
		}
	}
	return "", nil
}

// rewrite signs each commit, parents first, with its parents replaced by
// their signed rewrites; it returns the pinned commit's rewrite (the
// pinned commit itself when there is nothing to sign).
func (r *runner) rewrite(ctx context.Context, key string, todo []string, before map[string]string, sign func([]byte) ([]byte, error)) (string, error) {
	done := map[string]string{}
	for k, v := range before {
		done[k] = v
	}
	for _, sha := range todo {
		raw, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"cat-file", "commit", sha}})
		if err != nil {
			return "", gitrun.Err("cat-file", stderr, err)
		}
		c, err := parseCommit(raw)
		if err != nil {
			return "", fmt.Errorf("commit %s cannot be signed: %v", sha, err)
		}
		parents := make([]string, len(c.parents))
		for i, p := range c.parents {
			parents[i] = p
			if n, ok := done[p]; ok {
				parents[i] = n
			}
		}
		payload := c.payload(parents)
		sig, err := sign(payload)
		if err != nil {
			return "", err
		}
		out, stderr, err := r.git(ctx, gitCall{key: key, stdin: withSignature(payload, sig), args: []string{"hash-object", "-t", "commit", "-w", "--stdin"}})
		if err != nil {
			return "", gitrun.Err("hash-object", stderr, err)
		}
		done[sha] = strings.TrimSpace(string(out))
	}
	if n, ok := done[r.p.pinned]; ok {
		return n, nil
	}
	return r.p.pinned, nil
}

// sshSign is `ssh-keygen -Y sign -n git` over the payload.
func (r *runner) sshSign(ctx context.Context, key string, payload []byte) ([]byte, error) {
	cmd := exec.Command(r.k.progs["ssh-keygen"], "-Y", "sign", "-n", "git", "-f", filepath.Join(r.cred, config.GitSignIdentity))
	cmd.Env = r.env()
	cmd.Dir = r.tmp
	out, stderr, err := r.exec(ctx, key, cmd, payload)
	if err != nil || !bytes.Contains(out, []byte("-----BEGIN SSH SIGNATURE-----")) {
		return nil, fmt.Errorf("ssh-keygen could not sign: %v (%s)", err, gitrun.LastLine(stderr))
	}
	return out, nil
}

func (r *runner) gpg(args ...string) *exec.Cmd {
	cmd := exec.Command(r.k.progs["gpg"], append([]string{"--homedir", r.gnupg, "--batch", "--no-tty", "--no-autostart",
		"--no-options", "--no-permission-warning"}, args...)...)
	cmd.Env = r.env("GNUPGHOME=" + r.gnupg)
	cmd.Dir = r.tmp
	return cmd
}

// gpgSign is `gpg --detach-sign --armor` over the payload, through the
// push's own agent.
func (r *runner) gpgSign(ctx context.Context, key string, payload []byte) ([]byte, error) {
	out, stderr, err := r.exec(ctx, key, r.gpg("--armor", "--detach-sign"), payload)
	if err != nil || !bytes.Contains(out, []byte("-----BEGIN PGP SIGNATURE-----")) {
		return nil, fmt.Errorf("gpg could not sign: %v (%s)", err, gitrun.LastLine(stderr))
	}
	return out, nil
}

// startAgent starts the push's gpg-agent in its GNUPGHOME — `--daemon
// --no-detach`: it forks once and keeps the launcher's process group, and
// is ready when the launcher exits 0 — and imports the signing key. The
// stop it returns sends SIGTERM to the agent's group, waits, and leaves
// the rest to the settle loop (SIGKILL).
func (r *runner) startAgent(ctx context.Context, key string) (stop func(), err error) {
	cmd := exec.Command(r.k.progs["gpg-agent"], "--homedir", r.gnupg, "--daemon", "--no-detach", "--batch", "--no-grab",
		"--disable-scdaemon", "--options", "/dev/null")
	cmd.Env = r.env("GNUPGHOME=" + r.gnupg)
	cmd.Dir = r.tmp
	// The agent keeps the launcher's output open: a file, not a pipe, so
	// the launcher's end is not waited past.
	logFile, ferr := os.OpenFile(filepath.Join(r.tmp, "gpg-agent.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if ferr != nil {
		return func() {}, fmt.Errorf("its log could not be made (%s)", oserr.Why(ferr))
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	_, _, err = r.exec(ctx, key, cmd, nil)
	pgid := 0
	if cmd.Process != nil {
		pgid = cmd.Process.Pid
	}
	stop = func() { r.stopAgent(pgid) }
	if err != nil {
		b, _ := os.ReadFile(logFile.Name())
		stop()
		return func() {}, fmt.Errorf("gpg-agent did not start: %v (%s)", err, gitrun.LastLine(b))
	}
	if _, stderr, err := r.exec(ctx, key, r.gpg("--import", filepath.Join(r.cred, config.GitSignGPG)), nil); err != nil {
		stop()
		return func() {}, fmt.Errorf("gpg --import: %v (%s)", err, gitrun.LastLine(stderr))
	}
	return stop, nil
}

// stopAgent sends SIGTERM to the agent's group and waits, up to the grace,
// until no member of it is alive. A member is this process's child (the
// subreaper's) and stays unreaped until the settle loop, so the group's
// id is not another's while it is signalled.
func (r *runner) stopAgent(pgid int) {
	if pgid <= 0 {
		return
	}
	members := func() int {
		kids, _ := reap.Children(os.Getpid())
		n := 0
		for _, p := range kids {
			if p.PGID == pgid && p.State != 'Z' && p.State != 'X' {
				n++
			}
		}
		return n
	}
	if members() == 0 {
		return
	}
	_ = unix.Kill(-pgid, unix.SIGTERM)
	for deadline := time.Now().Add(r.k.o.AgentGrace); members() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// What is left is killed (SIGKILL) and reaped by the phase's settle.
}
