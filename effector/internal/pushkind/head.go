package pushkind

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"jr2.dev/boundary/effector/internal/wire"
)

// The pinned commit is read from the worktree's files by Go, before the
// start is answered: no git runs in the agent's repository, and Prepare
// starts nothing. Every file is opened through an os.Root of the worktree,
// so a link out of it is refused; .git must be a directory of its own
// (not a link, not a "gitdir:" file pointing elsewhere).

// Bounds of what is read of the agent's files.
const (
	maxHeadFile   = 4 << 10
	maxPackedRefs = 32 << 20
	maxSymrefHops = 5
)

// errNotRepo is a worktree whose .git cannot be read as a repository of
// its own; its text is a rejection's reason.
type errNotRepo struct{ why string }

func (e errNotRepo) Error() string {
	return "the worktree is not a repository the push reads: " + e.why
}

// resolveHead reads the commit the worktree's HEAD names.
func resolveHead(work string) (string, error) {
	root, err := os.OpenRoot(work)
	if err != nil {
		return "", errNotRepo{"it cannot be opened"}
	}
	defer root.Close()
	st, err := root.Lstat(".git")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errNotRepo{"it has no .git"}
	case err != nil:
		return "", errNotRepo{".git cannot be read"}
	case st.Mode()&fs.ModeSymlink != 0:
		return "", errNotRepo{"its .git is a link; the push reads only a .git directory of the worktree's own"}
	case !st.IsDir():
		return "", errNotRepo{"its .git is a file (a linked worktree or a gitdir pointer); the push reads only a .git directory of the worktree's own"}
	}
	read := func(name string, max int64) ([]byte, error) {
		f, err := root.Open(".git/" + name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return nil, errors.New("not a regular file")
		}
		b, err := io.ReadAll(io.LimitReader(f, max+1))
		if err == nil && int64(len(b)) > max {
			err = errors.New("too large")
		}
		return b, err
	}
	b, err := read("HEAD", maxHeadFile)
	if err != nil {
		return "", errNotRepo{"its HEAD cannot be read"}
	}
	sha, ref, err := parseHead(b)
	for hop := 0; err == nil && sha == ""; hop++ {
		if hop == maxSymrefHops {
			return "", errNotRepo{"its HEAD names refs that name refs past " + fmt.Sprint(maxSymrefHops) + " hops"}
		}
		var loose []byte
		if loose, err = read(ref, maxHeadFile); err == nil {
			sha, ref, err = parseHead(loose)
			continue
		}
		packed, perr := read("packed-refs", maxPackedRefs)
		if perr != nil {
			return "", errNotRepo{fmt.Sprintf("its HEAD names %s, which holds no commit (no file, no packed-refs)", ref)}
		}
		if sha, err = lookupPacked(packed, ref); err != nil {
			return "", errNotRepo{err.Error()}
		}
	}
	if err != nil {
		return "", errNotRepo{err.Error()}
	}
	return sha, nil
}

// parseHead reads a HEAD or loose ref file: a sha, or "ref: refs/…".
func parseHead(b []byte) (sha, ref string, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	s := strings.TrimSuffix(string(line), "\r")
	if r, ok := strings.CutPrefix(s, "ref: "); ok {
		r = strings.TrimSpace(r)
		if wire.CheckRef(r) != nil {
			return "", "", fmt.Errorf("its HEAD names %q, which is not a ref", r)
		}
		return "", r, nil
	}
	if wire.ValidSHA(s) {
		return s, "", nil
	}
	return "", "", errors.New("its HEAD names no commit (an unborn branch, or a file git did not write)")
}

// lookupPacked finds ref in a packed-refs file.
func lookupPacked(b []byte, ref string) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		sha, name, ok := strings.Cut(line, " ")
		if ok && name == ref && wire.ValidSHA(sha) {
			return sha, nil
		}
	}
	return "", fmt.Errorf("its HEAD names %s, which holds no commit", ref)
}

// Bounds of what a push reads of the worktree's refs.
const maxRefTips = 1024

// worktreeTips lists the commits the worktree's refs name (loose refs
// under .git/refs and packed-refs; a symbolic ref is left out), at most
// maxRefTips. They are what the worktree claims of a cache's history:
// the push offers those a cache holds as what it has, so the worktree
// sends only what the cache lacks. They choose nothing else.
func worktreeTips(work string) []string {
	root, err := os.OpenRoot(work)
	if err != nil {
		return nil
	}
	defer root.Close()
	seen := map[string]bool{}
	var out []string
	add := func(sha string) {
		if wire.ValidSHA(sha) && !seen[sha] && len(out) < maxRefTips {
			seen[sha] = true
			out = append(out, sha)
		}
	}
	_ = fs.WalkDir(root.FS(), ".git/refs", func(p string, d fs.DirEntry, err error) error {
		switch {
		case len(out) >= maxRefTips:
			return fs.SkipAll
		case err != nil && d != nil && d.IsDir():
			return fs.SkipDir
		case err != nil:
			return nil
		case !d.Type().IsRegular():
			return nil
		}
		b, err := fs.ReadFile(root.FS(), p)
		if err != nil || len(b) > maxHeadFile {
			return nil
		}
		if sha, _, err := parseHead(b); err == nil {
			add(sha)
		}
		return nil
	})
	if f, err := root.Open(".git/packed-refs"); err == nil {
		b, _ := io.ReadAll(io.LimitReader(f, maxPackedRefs))
		f.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if sha, _, ok := strings.Cut(line, " "); ok && line[0] != '#' && line[0] != '^' {
				add(sha)
			}
		}
	}
	return out
}
