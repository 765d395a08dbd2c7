package commandkind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/gitrun"
)

// The clean checkout (ADR-0068: git never takes config or hooks from the
// agent's repository).
//
// The worktree is the agent's: its .git/config can name programs
// (core.fsmonitor, core.sshCommand, filter.<driver>.clean and .smudge,
// core.hooksPath, a promisor remote's transport, include.path …) and its
// .gitattributes can name a filter driver. So the Effector's git never
// works in it as in a repository of its own:
//
//   - HEAD is read with `git ls-remote` and the commits with
//     `git clone --no-local`, over git's transport: the agent's repository
//     is read only by upload-pack, which git runs in untrusted
//     repositories by design (no hook; its one program setting,
//     uploadpack.packObjectsHook, is read only from protected config,
//     never from the repository's).
//   - The checkout is a new repository, made with no template (no hook),
//     whose config the clone writes. A .gitattributes of the tree can name
//     a filter driver, but only a config defines one and no config the
//     Effector's git reads defines any: no smudge runs.
//   - dirty is `git status` of the worktree through a git dir of the
//     Effector's own: its objects are the worktree's (an alternate), its
//     index the worktree's (GIT_INDEX_FILE, read only with
//     GIT_OPTIONAL_LOCKS=0), its HEAD the sha ls-remote read, its config
//     the Effector's. The worktree's config, hooks and attributes file are
//     never read; .git/info/exclude is copied, so an excluded file does not
//     read as untracked. Submodules are not looked into.
//   - Every git gets gitrun's environment, written whole, and its
//     command-line config, which wins over every other scope.
//   - Every git runs confined (gitArgv: `effector confine`, as the child
//     does): it reads the worktree and the image, writes the effect's
//     scratch, and every other path of the Effector's is denied. The agent
//     owns the worktree's .git and can name another object store there (an
//     alternates entry, its objects directory a link) with its branch on a
//     commit of it, or link a ref file to any file: unconfined, the
//     Effector's git would check out a repo cache the child may not read,
//     or quote a file of the Effector's in its error.
//   - The global config names the worktree as a safe.directory: git 2.39
//     honours it there only, and the worktree is the agent's uid's.
//
// Not covered: a bug in git's own parsing of a hostile repository; a pin
// may name any commit in the worktree's object store, its alternates
// included (protocol v2 serves a want by sha); a worktree whose .git is a
// file (a linked worktree) reads as dirty.

// gitArgv is the argv for one git of the checkout, program first:
// confinement (confine.Argv) reading the worktree (--read-tree) and
// writing the effect's scratch (--scratch), the Effector's other paths
// denied, then git with gitrun's hardening and args.
func (r *runner) gitArgv(args []string) []string {
	work := filepath.Clean(r.k.o.Work)
	// The worktree is another uid's, its files maybe 0600: the Effector's
	// git keeps the one capability that reads them (never the command).
	argv := append(confine.Argv(r.k.o.Self), "--keep-dac-read-search", "--scratch", r.dir, "--read-tree", work)
	for _, d := range r.k.o.Deny {
		if filepath.Clean(d) != work {
			argv = append(argv, "--deny", d)
		}
	}
	argv = append(argv, "--node", r.k.o.Node, "--")
	return gitrun.Argv(argv, r.k.git, args...)
}

// checkout is what the checkout made.
type checkout struct {
	sha   string // the commit checked out
	dirty bool
}

// gitDir is where the Effector's own git files for one effect are: git's
// HOME and global config, and the status git dir. The child's scratch does
// not hold it.
func (r *runner) gitDir() string { return filepath.Join(r.dir, "git") }

// gitHome is git's home in gitDir; it looks for no repository above the
// effect's scratch.
func (r *runner) gitHome() gitrun.Home {
	return gitrun.Home{Dir: r.gitDir(), Tmp: r.gitDir(), Ceiling: r.dir}
}

// checkout makes r.dir/checkout a clean checkout of the pin (default: the
// worktree's HEAD) and reads whether the worktree is dirty. An error is
// the reason the command did not run.
func (r *runner) checkout(ctx context.Context) (checkout, error) {
	var c checkout
	work := r.k.o.Work
	if err := r.gitHome().WriteConfig(work, filepath.Join(work, ".git")); err != nil {
		return c, fmt.Errorf("the effect's git config could not be written: %w", err)
	}
	out, err := r.git(ctx, "", "ls-remote", "--", work, "HEAD")
	if err != nil {
		return c, fmt.Errorf("the worktree's HEAD could not be read: %w", err)
	}
	head, err := parseHead(out)
	if err != nil {
		return c, err
	}
	c.sha = r.p.pin
	if c.sha == "" {
		c.sha = head
	}
	c.dirty = r.dirty(ctx, head)
	dst := filepath.Join(r.dir, "checkout")
	if _, err := r.git(ctx, "", "clone", "--quiet", "--no-local", "--no-checkout", "--template=", "--", work, dst); err != nil {
		return c, fmt.Errorf("the worktree could not be cloned: %w", err)
	}
	if _, err := r.git(ctx, dst, "checkout", "--quiet", "--detach", c.sha, "--"); err != nil {
		// Not on a branch or tag the clone took: ask for it by sha.
		if _, ferr := r.git(ctx, dst, "fetch", "--quiet", "origin", c.sha); ferr != nil {
			return c, fmt.Errorf("commit %s is not in the worktree: %w", c.sha, ferr)
		}
		if _, err := r.git(ctx, dst, "checkout", "--quiet", "--detach", c.sha, "--"); err != nil {
			return c, fmt.Errorf("commit %s could not be checked out: %w", c.sha, err)
		}
	}
	return c, nil
}

// dirty reports whether the worktree has changes its HEAD does not hold:
// `git status --porcelain` through a git dir of the Effector's own. When
// that cannot be told it says dirty: the flag promises a clean tree only
// when one was seen.
func (r *runner) dirty(ctx context.Context, head string) bool {
	dotgit := filepath.Join(r.k.o.Work, ".git")
	if st, err := os.Lstat(dotgit); err != nil || !st.IsDir() {
		return true
	}
	probe := filepath.Join(r.gitDir(), "status.git")
	for _, d := range []string{"objects/info", "refs", "info"} {
		if err := os.MkdirAll(filepath.Join(probe, d), 0o700); err != nil {
			return true
		}
	}
	files := map[string]string{
		"HEAD":                    head + "\n",
		"config":                  "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
		"objects/info/alternates": filepath.Join(dotgit, "objects") + "\n",
	}
	if b, err := readSmall(filepath.Join(dotgit, "info", "exclude"), 1<<20); err == nil {
		files["info/exclude"] = string(b)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(probe, name), []byte(content), 0o600); err != nil {
			return true
		}
	}
	out, err := r.gitWith(ctx, "", []string{"GIT_INDEX_FILE=" + filepath.Join(dotgit, "index")},
		"--git-dir="+probe, "--work-tree="+r.k.o.Work,
		"status", "--porcelain", "--ignore-submodules=all", "--untracked-files=normal")
	return err != nil || len(bytes.TrimSpace(out)) > 0
}

// readSmall reads a regular file of at most max bytes, without following
// a link at its end.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > max {
		return nil, errors.New("not a small regular file")
	}
	return os.ReadFile(path)
}

// git runs git with the hardening in dir (the effect's git dir when ""),
// through the Tracker, and returns its stdout. It ends with ctx.
func (r *runner) git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return r.gitWith(ctx, dir, nil, args...)
}

func (r *runner) gitWith(ctx context.Context, dir string, extraEnv []string, args ...string) ([]byte, error) {
	argv := r.gitArgv(args)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = r.gitDir()
	}
	// The one transport the checkout speaks: file, to the worktree.
	cmd.Env = r.gitHome().Env(append([]string{gitrun.Allow("file")}, extraEnv...)...)
	stdout, stderr, err := gitrun.Run(ctx, r.k.o.Tracker, r.key, cmd, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, gitrun.Err(args[0], stderr, err)
	}
	return stdout, nil
}
