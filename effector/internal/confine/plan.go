package confine

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"jr2.dev/boundary/internal/landlock"
)

// Rule is one path the confined command may reach, and why.
type Rule struct {
	Path   string
	Access landlock.Access
	Why    string // "system", "device", "scratch", "secret", "tree"
}

// Plan lists the rules for o, walking root ("/" in production; a test
// gives a tree of its own). Every path in o is absolute and clean (as
// parseArgs makes them). Plan reads the filesystem and changes nothing.
//
// The ruleset handles every filesystem right of the kernel's ABI (up to the
// last one package landlock knows) and scopes signals and abstract Unix
// sockets to the domain where the kernel offers it (ABI 6). It allows:
//
//   - read and execute on every top-level entry of / that is not one of
//     [DeniedNames] nor a --deny path. A top-level entry that holds a
//     --deny path is allowed one level down at a time around it, so the
//     denied path stays denied. A symbolic link is followed only when what
//     it names is neither denied nor holds a denied path, and needs no rule
//     of its own when another rule of the walk already covers what it
//     names (a rule is on the inode the link names: the domain is the same).
//   - read and write on [Devices] that exist.
//   - every right but making a device node beneath each --scratch
//     directory; read on each --read file; read and execute beneath each
//     --read-tree directory. Fifos and Unix sockets may be made in the
//     scratch, and nowhere else: that is where programs meet their own
//     children (make's jobserver fifo, an agent's or a test suite's
//     socket in TMPDIR), only the Effect's own domain reaches its scratch,
//     and the Effector opens a scratch file only O_NONBLOCK, never
//     connecting to one.
func Plan(root string, o Options) ([]Rule, error) {
	root = filepath.Clean(root)
	denied := make([]string, 0, len(DeniedNames)+2*len(o.Deny))
	for _, n := range DeniedNames {
		denied = append(denied, filepath.Join(root, n))
	}
	for _, d := range o.Deny {
		denied = append(denied, d)
		// The same place by another name: a link to it, or a link on the way.
		if real, err := filepath.EvalSymlinks(d); err == nil && real != d {
			denied = append(denied, real)
		}
	}
	w := walker{denied: denied, links: map[string]string{}}
	var rules []Rule
	for _, s := range o.Scratch {
		real, err := w.own("--scratch", s, true)
		if err != nil {
			return nil, err
		}
		rules = append(rules, Rule{real, landlock.ReadWrite, "scratch"})
	}
	for _, r := range o.Read {
		real, err := w.own("--read", r, false)
		if err != nil {
			return nil, err
		}
		rules = append(rules, Rule{real, landlock.ReadFile, "secret"})
	}
	for _, tr := range o.Trees {
		real, err := w.own("--read-tree", tr, true)
		if err != nil {
			return nil, err
		}
		rules = append(rules, Rule{real, landlock.ReadExec, "tree"})
	}
	for _, d := range Devices {
		p := filepath.Join(root, d)
		if st, err := os.Stat(p); err == nil && st.Mode()&fs.ModeDevice != 0 {
			rules = append(rules, Rule{p, landlock.ReadWrite & landlock.FileRights, "device"})
		}
	}
	system, err := w.walk(root)
	if err != nil {
		return nil, err
	}
	return append(w.dropCovered(system), rules...), nil
}

type walker struct {
	denied []string // absolute, clean; a path beneath one is denied too
	// links maps each followed link's rule path to what it names.
	links map[string]string
}

// dropCovered leaves out a followed link's rule when what the link names
// lies beneath another system rule (not a link's) with at least its
// rights: Landlock's rule on a link is on the inode it names (the path is
// opened following it), which that rule already covers, so the domain is
// the same with one rule fewer to open and add (/bin, /lib, /lib64 and
// /sbin into /usr on a merged-usr image).
func (w walker) dropCovered(rules []Rule) []Rule {
	kept := rules[:0]
	for _, r := range rules {
		if target, isLink := w.links[r.Path]; !isLink || !w.covered(rules, target, r.Access) {
			kept = append(kept, r)
		}
	}
	return kept
}

func (w walker) covered(rules []Rule, target string, access landlock.Access) bool {
	for _, o := range rules {
		if _, isLink := w.links[o.Path]; !isLink && o.Access&access == access && within(target, o.Path) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or beneath it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// isDenied: p is a denied path or beneath one.
func (w walker) isDenied(p string) bool {
	for _, d := range w.denied {
		if within(p, d) {
			return true
		}
	}
	return false
}

// holdsDenied: a denied path lies strictly beneath p.
func (w walker) holdsDenied(p string) bool {
	for _, d := range w.denied {
		if d != p && within(d, p) {
			return true
		}
	}
	return false
}

// own checks one of the command's own paths: it exists, is a directory
// (dir) or a regular file, and no denied path is it or beneath it. It
// returns the path with links resolved, where the rule binds.
func (w walker) own(flag, p string, dir bool) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, p, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, p, err)
	}
	switch {
	case dir && !st.IsDir():
		return "", fmt.Errorf("%s %s: not a directory", flag, p)
	case !dir && !st.Mode().IsRegular():
		return "", fmt.Errorf("%s %s: not a regular file; name each secret file", flag, p)
	}
	for _, d := range w.denied {
		if within(d, real) || within(d, p) {
			return "", fmt.Errorf("%s %s: the denied path %s is in it; give a path that holds nothing denied", flag, p, d)
		}
	}
	return real, nil
}

// walk allows read+execute on each entry of dir that is not denied, and
// goes one level down into an entry that holds a denied path.
func (w walker) walk(dir string) ([]Rule, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var rules []Rule
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case w.isDenied(p):
			continue
		case e.Type()&fs.ModeSymlink != 0:
			if w.holdsDenied(p) {
				continue // a denied path is named through this link
			}
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue // dangling: nothing to allow
			}
			st, err := os.Stat(target)
			if err != nil || !(st.IsDir() || st.Mode().IsRegular()) {
				continue
			}
			if w.isDenied(target) || w.holdsDenied(target) {
				continue // followed only when what it names holds nothing denied
			}
			w.links[p] = target
			rules = append(rules, Rule{p, landlock.ReadExec, "system"})
		case e.IsDir() && w.holdsDenied(p):
			sub, err := w.walk(p)
			if err != nil {
				return nil, err
			}
			rules = append(rules, sub...)
		case e.IsDir() || e.Type().IsRegular():
			rules = append(rules, Rule{p, landlock.ReadExec, "system"})
		}
		// Sockets, devices and pipes outside /dev: nothing.
	}
	return rules, nil
}
