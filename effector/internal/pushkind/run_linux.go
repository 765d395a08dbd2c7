package pushkind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/gitrun"
	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
)

// runner is one run of a prepared push. This file is its lifecycle (the
// scratch, the phases and their settle loop, how a git runs); the object
// rule is objects_linux.go, the remote and its credentials
// remote_linux.go, the signing sign_linux.go.
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
