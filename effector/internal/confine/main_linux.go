//go:build linux

package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/inherit"
	"jr2.dev/boundary/internal/caps"
	"jr2.dev/boundary/internal/landlock"
)

// Main runs `effector confine` with args (the words after "confine"). On
// success it does not return: the process is the command. Otherwise it
// writes "effector confine: REASON" to stderr and returns 126.
func Main(args []string) int {
	if isHelp(args) {
		fmt.Println(usage)
		return 0
	}
	// The domain is the thread's: lock it from the probe to the execve,
	// and never unlock it.
	runtime.LockOSThread()
	err := confineAndExec(args)
	fmt.Fprintf(os.Stderr, "effector confine: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	return 126
}

// confineAndExec returns only with the reason nothing ran.
//
// argv[0] is looked up in the PATH of the confiner's environment before
// the ruleset is made (so "not found" is told apart from "denied"); the
// execve runs after the restriction and the capability drop, on the same
// locked thread, with the confiner's environment, in the same process (no
// extra exec). Every descriptor above 2 is made close-on-exec.
func confineAndExec(args []string) error {
	o, argv, err := parseArgs(args)
	if err != nil {
		return err
	}
	abi, err := landlock.Probe()
	if err != nil {
		// NODE_NAME read only here: the first Getenv copies the whole
		// environment into a map, a cost every confinement paid.
		node := o.Node
		if node == "" {
			node = os.Getenv("NODE_NAME")
		}
		return errors.New(landlock.Unavailable(node, err))
	}
	rules, err := Plan("/", o)
	if err != nil {
		return err
	}
	path, err := lookPath(argv[0])
	if err != nil {
		return err
	}
	rs, err := landlock.NewRuleset(abi, landlock.ScopeSignal|landlock.ScopeAbstractUnix)
	if err != nil {
		return err
	}
	defer rs.Close()
	if err := addRules(rs, rules); err != nil {
		return err
	}
	if err := closeOnExecAbove2(); err != nil {
		return err
	}
	if err := rs.RestrictSelf(); err != nil {
		return err
	}
	var keep []int
	if o.KeepDACReadSearch {
		keep = append(keep, unix.CAP_DAC_READ_SEARCH)
	}
	if err := caps.Drop(keep...); err != nil {
		return err
	}
	err = unix.Exec(path, argv, os.Environ())
	return fmt.Errorf("exec %s: %w", path, err)
}

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC (linux/close_range.h), which
// x/sys/unix does not name.
const closeRangeCloexec = 1 << 2

// closeOnExecAbove2 marks every descriptor above 2 close-on-exec: one
// close_range(2) where the kernel has CLOSE_RANGE_CLOEXEC (5.11), else the
// listing of /proc/self/fd (an open, a read, a fcntl per descriptor: a
// tenth of this process's start before).
func closeOnExecAbove2() error {
	err := unix.CloseRange(3, ^uint(0), closeRangeCloexec)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		return inherit.CloseOnExecAbove(2)
	}
	if err != nil {
		return fmt.Errorf("marking descriptors close-on-exec: %w", err)
	}
	return nil
}

// lookPath finds argv[0] in the PATH of the environment, before the
// restriction: a program that is not there is "not found", one that is
// there but denied fails at execve with EACCES.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return p, nil
}

// addRules adds each planned rule. A "system" rule names an entry the walk
// listed, not one the command asked for: if it is gone by now (another
// process removed it between the listing and the open), there is nothing
// to allow, and leaving it out denies it. Every other rule's path must
// still be there, or nothing runs.
func addRules(rs *landlock.Ruleset, rules []Rule) error {
	for _, r := range rules {
		if _, err := rs.AddPath(r.Path, r.Access); err != nil {
			if r.Why == "system" && errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
	}
	return nil
}
