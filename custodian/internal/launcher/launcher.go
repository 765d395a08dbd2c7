// Package launcher contains the child of `custodian run`: a network
// namespace whose only peer is the mediator, a filesystem cut down by
// Landlock to the policy's paths, a seccomp filter, no capabilities and
// NO_NEW_PRIVS, then execve of the command.
//
// Invariant: the command never runs uncontained. Every step happens in a
// re-executed copy of this binary, on one locked OS thread, before execve;
// if any step fails, that copy writes the step and the reason to the parent
// and exits with the step's code (Steps) instead of executing anything.
//
// # Network: two namespaces, nothing forwarded
//
// NewNetwork makes two named network namespaces joined by a veth pair on a
// /30 from 10.231.0.0/16: the child's (".2") and the mediator's (".1").
// The mediator's namespace holds nothing but the sockets the mediator opens
// there through Network.ListenTCP, ListenUDP and CatchTCP, so "only the
// mediator is reachable" holds by construction: no host service listening
// on a wildcard address is in that namespace, and no firewall rule is
// needed or left behind. The child's main routing table is the /30 link
// route and nothing else: a dial to any other address fails at once with
// ENETUNREACH, whatever the child's proxy variables say — except on a port
// the mediator catches (CatchTCP): TCP to that port, at any address, is
// routed to the mediator, which takes it in as its own, so a literal-IP
// dial reaches the mediator's record instead of dying in the child's
// kernel. (hark's W2 used a default route and FORWARD DROP rules on the
// host; here nothing leaves the mediator's namespace but what the mediator
// itself dials from the runner's, and no rule outlives the namespaces.)
// IPv6 is disabled in both namespaces (a link-local peer address would be
// a second way out), and forwarding is written off in both, whatever the
// host's defaults.
//
// The namespaces are configured with iproute2 (`ip netns`, `ip link`, `ip
// addr`): it is installed wherever this runs (CI installs it), it makes
// named namespaces the way `ip netns exec` users expect, and each command is
// one of hark's verified mechanics. Sysctls are written from a thread that
// has entered the namespace.
//
// /etc/netns/<ns>/resolv.conf names the mediator. The child does what `ip
// netns exec` does: it enters a private mount namespace (slave to the
// host's) and bind-mounts that file over /etc/resolv.conf, which the
// launcher also adds to the Landlock rules (read only).
//
// # The child, in order, on one locked thread
//
//  1. setns into the child's network namespace;
//  2. unshare a mount namespace, bind the resolv.conf;
//  3. chdir;
//  4. Landlock: refuse below ABI 2; read_paths read+execute, write_paths
//     read+write, /etc/resolv.conf read, nothing else; signals and abstract
//     Unix sockets scoped to the domain where the kernel offers it (ABI 6).
//     Before the capabilities go, because opening a rule's path may need
//     CAP_DAC_READ_SEARCH;
//  5. capabilities: ambient cleared, bounding set dropped one by one, then
//     permitted/effective/inheritable set to zero. Dropping the bounding set
//     needs CAP_SETPCAP, so it must come before the permitted set empties;
//  6. NO_NEW_PRIVS (already set by Landlock; checked);
//  7. seccomp: the filter of seccomp_linux.go, last, so the steps above may
//     use what it denies; it also holds socket(2) to the families the
//     namespace fences (Families): no pathname Unix socket of a host daemon,
//     no vsock, unless Landlock checks Unix connects (ABI 9);
//  8. execve.
//
// The child runs in a session of its own: a terminal it is given (the
// runner's stdin) is not its controlling terminal, so it cannot push input
// into it (TIOCSTI) for the runner's shell to run after the run.
//
// Run forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the child and returns
// when it has exited, so the caller's deferred Network.Close runs on a
// signal as on a normal exit and a panic in the caller's goroutine. Before
// it returns, every process the command left (a background job, a setsid
// daemon) is killed: all of them are in the child's network namespace,
// which the filter does not let them leave (KillLeft). A runner killed
// outright (SIGKILL, a panic in another goroutine) leaves its namespaces
// behind: Sweep, called at start, kills what runs in those whose runner is
// gone and removes them. The child is started with a parent-death signal
// (SIGKILL).
//
// # NOT covered
//
//   - No PID namespace: the child sees every process. Landlock's signal
//     scope (ABI 6) stops it signalling outside its domain; below ABI 6 a
//     root child without capabilities can still signal processes of uid 0.
//   - The child keeps the runner's uid and gid (root without capabilities);
//     files owned by root and readable by their owner are readable wherever
//     Landlock allows.
//   - Landlock binds rules to inodes: a bind mount of a hidden path under an
//     allowed one is reachable. Hidden paths are compared as written and
//     with symbolic links resolved, not through mounts.
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
