//go:build linux

package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/internal/caps"
	"jr2.dev/boundary/internal/landlock"
)

// The descriptors a child is started with, past stdio.
const (
	fdConfig = 3 // read: the childConfig, JSON, then EOF
	fdStatus = 4 // write, close-on-exec: a failure report; EOF alone means execve succeeded
	fdNetns  = 5 // the child's network namespace
)

// resolvTarget is where the run's resolv.conf is bound in the child.
const resolvTarget = "/etc/resolv.conf"

// childConfig is what the parent tells the child.
type childConfig struct {
	Argv       []string
	Env        []string
	Dir        string
	ReadPaths  []string
	WritePaths []string
	ResolvConf string
}

// MaybeChild makes this process the contained child when it was started
// with ChildArg, and then never returns: it executes the command or exits
// with the failed step's code. Otherwise it returns at once. Call it first
// in main, and in TestMain of tests that start children.
func MaybeChild() {
	if len(os.Args) < 2 || os.Args[1] != ChildArg {
		return
	}
	runtime.LockOSThread() // never unlocked: every step below is this thread's
	step, err := contain()
	report(step, err)
}

// report writes the failed step to the parent and exits with its code.
func report(step string, err error) {
	code := stepCode(step)
	if step == "exec" && errors.Is(err, unix.ENOENT) {
		step, code = "exec-not-found", stepCode("exec-not-found")
	}
	msg := step + "\x00" + err.Error()
	status := os.NewFile(fdStatus, "status")
	if _, werr := io.WriteString(status, msg); werr != nil {
		fmt.Fprintf(os.Stderr, "jr2 launcher: %s: %v\n", step, err)
	}
	os.Exit(code)
}

// contain runs the steps in order and executes the command; it returns only
// on failure, naming the step.
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
func contain() (string, error) {
	unix.CloseOnExec(fdStatus)
	var cfg childConfig
	f := os.NewFile(fdConfig, "config")
	err := json.NewDecoder(f).Decode(&cfg)
	f.Close()
	if err != nil {
		return "config", fmt.Errorf("read the configuration: %w", err)
	}
	if len(cfg.Argv) == 0 {
		return "config", errors.New("no command")
	}

	err = unix.Setns(fdNetns, unix.CLONE_NEWNET)
	unix.Close(fdNetns)
	if err != nil {
		return "netns", fmt.Errorf("setns: %w", err)
	}

	if err := bindResolvConf(cfg.ResolvConf); err != nil {
		return "mount", err
	}

	dir := cfg.Dir
	if dir == "" {
		dir = "/"
	}
	if err := unix.Chdir(dir); err != nil {
		return "chdir", fmt.Errorf("chdir: %w", err)
	}
	prog, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		return "exec", err
	}

	abi, err := restrictFS(cfg)
	if err != nil {
		return "landlock", err
	}
	if err := caps.Drop(); err != nil {
		return "capabilities", err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs", err
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		return "no_new_privs", fmt.Errorf("not set (%d, %v)", v, err)
	}
	if err := installSeccomp(UnixSockets(abi)); err != nil {
		return "seccomp", err
	}
	err = unix.Exec(prog, cfg.Argv, cfg.Env)
	return "exec", fmt.Errorf("execve: %w", err)
}

// bindResolvConf enters a private mount namespace, a slave of the host's so
// that the bind below never propagates back, and binds the run's
// resolv.conf over /etc/resolv.conf, as `ip netns exec` does.
func bindResolvConf(src string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave mount: %w", err)
	}
	if err := unix.Mount(src, resolvTarget, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind resolv.conf: %w", err)
	}
	return nil
}

// UnixSockets reports whether the child may create AF_UNIX sockets under
// Landlock ABI abi: only when Landlock checks a connect to a pathname
// socket (landlock.ResolveUnix), so that none outside a write path is
// reachable (see Families).
func UnixSockets(abi int) bool { return landlock.FS(abi)&landlock.ResolveUnix != 0 }

// restrictFS applies Landlock: read paths read+execute, write paths
// read+write, the resolv.conf read, nothing else. It returns the ABI.
func restrictFS(cfg childConfig) (int, error) {
	abi, err := landlock.Probe()
	if err != nil {
		node, _ := os.Hostname()
		return 0, errors.New(landlock.Unavailable(node, err) + "; the run refuses to start uncontained")
	}
	if abi < MinLandlockABI {
		return 0, fmt.Errorf("landlock ABI %d; the run needs ABI %d or later (Linux 5.19) and refuses to start uncontained", abi, MinLandlockABI)
	}
	rs, err := landlock.NewRuleset(abi, landlock.ScopeSignal|landlock.ScopeAbstractUnix)
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	rules := []struct {
		paths  []string
		access landlock.Access
	}{
		{cfg.ReadPaths, landlock.ReadExec},
		{cfg.WritePaths, landlock.ReadWrite},
		{[]string{resolvTarget}, landlock.ReadFile},
	}
	for _, r := range rules {
		for _, p := range r.paths {
			if _, err := rs.AddPath(p, r.access); err != nil {
				return 0, err
			}
		}
	}
	return abi, rs.RestrictSelf()
}

// lookPath finds file as execve would be asked to run it: a name with a
// slash as is, another in the child's PATH (not the runner's).
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the child's PATH: %w", file, unix.ENOENT)
}
