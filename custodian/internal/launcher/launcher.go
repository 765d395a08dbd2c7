// Package launcher contains the child of `custodian run`: a network
// namespace whose only peer is the mediator, a filesystem cut down by
// Landlock to the policy's paths, a seccomp filter, no capabilities and
// NO_NEW_PRIVS, then execve of the command.
//
// Invariants: the command never runs uncontained — every step happens in a
// re-executed copy of this binary, on one locked OS thread, before execve,
// and a copy whose step fails writes the step and the reason to the parent
// and exits with the step's code (Steps) instead of executing anything.
// Nothing of a run outlives it: Run kills what the command left in its
// namespace, and Sweep, at the next start, removes what a runner killed
// outright left behind. NewNetwork says how the namespaces are built and
// why nothing is forwarded; contain (child_linux.go) lists the child's
// steps in order; docs/run.md ("Containment, in order") is the reference.
//
// NOT covered:
//   - No PID namespace: the child sees every process. Landlock's signal
//     scope (ABI 6) stops it signalling outside its domain; below ABI 6 a
//     root child without capabilities can still signal processes of uid 0.
//   - The child keeps the runner's uid and gid (root without capabilities):
//     files owned by root and readable by their owner are readable wherever
//     Landlock allows, and a bind mount of a hidden path under an allowed
//     one is reachable (hidden paths are compared as written and with
//     symbolic links resolved, not through mounts).
package launcher

import (
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
)

// ChildArg is the sentinel argument of a re-executed child: a binary that
// calls MaybeChild first thing in main (and in TestMain) becomes the
// contained child when started as `BINARY ChildArg`.
const ChildArg = "__jr2-launcher-child__"

// Step is one stage of the child's setup, with the exit code the child
// uses when the stage fails.
type Step struct {
	Name string
	Code int
}

// Steps are the child's stages, in order. 126 and 127 keep the shell's
// meaning for a command that could not be executed or was not found.
var Steps = []Step{
	{"config", 110},
	{"netns", 111},
	{"mount", 112},
	{"chdir", 113},
	{"landlock", 114},
	{"capabilities", 115},
	{"no_new_privs", 116},
	{"seccomp", 117},
	{"exec", 126},
	{"exec-not-found", 127},
}

func stepCode(name string) int {
	for _, s := range Steps {
		if s.Name == name {
			return s.Code
		}
	}
	return Steps[0].Code
}

// MinLandlockABI is the oldest Landlock ABI the child accepts: ABI 1 cannot
// stop a rename or link out of an allowed tree (REFER came with ABI 2).
const MinLandlockABI = 2

// Spec is what to run and what it may touch.
type Spec struct {
	Argv       []string // Argv[0]: an absolute path, or a name looked up in Env's PATH
	Env        []string // the child's whole environment
	Dir        string   // working directory; "/" when empty
	ReadPaths  []string // absolute; read+execute
	WritePaths []string // absolute; read+write
	// Hidden are paths the child must not reach (the bundle, the CA's
	// files): Start refuses a Spec whose read or write paths contain one.
	Hidden []string
	// Stdin, Stdout and Stderr are the child's, as in os/exec; nil is
	// /dev/null.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// ChildError is a failed setup step of the child: nothing was executed.
type ChildError struct {
	Step   string
	Reason string
	Code   int // the child's exit code
}

func (e *ChildError) Error() string {
	return fmt.Sprintf("launcher: the child was not started: %s: %s", e.Step, e.Reason)
}

// check refuses a Spec that cannot be contained as asked.
func (s *Spec) check() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return fmt.Errorf("launcher: no command to run")
	}
	for _, l := range [][]string{s.ReadPaths, s.WritePaths, s.Hidden} {
		for _, p := range l {
			if !path.IsAbs(p) {
				return fmt.Errorf("launcher: path %q is not absolute", p)
			}
		}
	}
	if s.Dir != "" && !path.IsAbs(s.Dir) {
		return fmt.Errorf("launcher: working directory %q is not absolute", s.Dir)
	}
	for _, h := range s.Hidden {
		for _, l := range []struct {
			kind  string
			paths []string
		}{{"read", s.ReadPaths}, {"write", s.WritePaths}} {
			for _, p := range l.paths {
				if exposes(p, h) {
					return fmt.Errorf("launcher: %s path %q would let the child reach %q, which must stay hidden", l.kind, p, h)
				}
			}
		}
	}
	return nil
}

// exposes reports whether a rule on dir would reach target, comparing the
// paths as written and with symbolic links resolved.
func exposes(dir, target string) bool {
	for _, d := range []string{path.Clean(dir), realPath(dir)} {
		for _, t := range []string{path.Clean(target), realPath(target)} {
			if t == d || d == "/" || strings.HasPrefix(t, d+"/") {
				return true
			}
		}
	}
	return false
}

// realPath resolves symbolic links in p, or in its directory when p does
// not exist yet; p cleaned when neither resolves.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(r, filepath.Base(p))
	}
	return path.Clean(p)
}
