//go:build linux

package reap

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// SetChildSubreaper makes this process the subreaper of its descendants
// (PR_SET_CHILD_SUBREAPER): an orphan among them is reparented here.
func SetChildSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("reap: PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return nil
}

// Children lists the processes whose parent is parent, from /proc. A
// process that ends during the scan is left out.
func Children(parent int) ([]Proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("reap: reading /proc: %w", err)
	}
	var out []Proc
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if _, err := strconv.Atoi(name); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // ended since the listing
		}
		p, err := ParseStat(b)
		if err != nil {
			return nil, fmt.Errorf("reap: /proc/%s/stat: %w", name, err)
		}
		if p.PPID == parent {
			out = append(out, p)
		}
	}
	return out, nil
}

// KillAndReapAll kills (SIGKILL) and reaps every child of this process,
// and every orphan reparented to it meanwhile, until it has no child left.
// It also reaps with wait4(-1): only a process that waits on no child any
// other way may call it (the keeper).
func KillAndReapAll() error {
	self := os.Getpid()
	for {
		procs, err := Children(self)
		if err != nil {
			return err
		}
		for _, p := range procs {
			_ = unix.Kill(p.PID, unix.SIGKILL)
		}
		// A killed child's own children are reparented here before its end
		// can be waited, so the next scan sees them.
		for _, p := range procs {
			if err := waitPid(p.PID); err != nil {
				return err
			}
		}
		// Whatever ended on its own, and whether any child is left.
		for {
			pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.ECHILD):
				return nil
			case err != nil:
				return fmt.Errorf("reap: wait4: %w", err)
			}
			if pid == 0 {
				break // a child is alive: scan again
			}
		}
	}
}

// Settle kills each of groups (SIGKILL to the group), then kills and reaps
// every child of this process whose group is not one live reports true
// for, scanning /proc again until none is found. It reaps by pid only what
// it found and killed.
//
// live is called for each child found; it must report true for the group
// of every child started by any code that waits on it (os/exec), or Settle
// reaps that child and its waiter gets ECHILD. A child in this process's
// own group is never touched. Settle must not run while another
// goroutine starts a child whose group live does not yet know, nor beside
// another Settle: [Tracker] orders both.
func Settle(groups []int, live func(pgid int) bool) error {
	return settle(groups, live, nopLocker{})
}

type nopLocker struct{}

func (nopLocker) Lock()   {}
func (nopLocker) Unlock() {}

type locker interface {
	Lock()
	Unlock()
}

func settle(groups []int, live func(pgid int) bool, mu locker) error {
	self, own := os.Getpid(), unix.Getpgrp()
	mu.Lock()
	killGroups(groups, live)
	mu.Unlock()
	for {
		mu.Lock()
		procs, err := Children(self)
		if err != nil {
			mu.Unlock()
			return err
		}
		var killed []int
		for _, p := range procs {
			if p.PID <= 1 || p.PGID == own || live(p.PGID) {
				continue
			}
			_ = unix.Kill(p.PID, unix.SIGKILL)
			killed = append(killed, p.PID)
		}
		mu.Unlock()
		if len(killed) == 0 {
			return nil
		}
		for _, pid := range killed {
			if err := waitPid(pid); err != nil {
				return err
			}
		}
	}
}

// killGroups sends SIGKILL to each group that is not live; never to
// group 0 or 1 (kill(0) and kill(-1) mean other things) nor to our own.
func killGroups(groups []int, live func(pgid int) bool) {
	own := unix.Getpgrp()
	for _, g := range groups {
		if g > 1 && g != own && !live(g) {
			_ = unix.Kill(-g, unix.SIGKILL)
		}
	}
}

// waitPid reaps pid; a pid that is no longer our child (reaped already)
// is not an error.
func waitPid(pid int) error {
	for {
		_, err := unix.Wait4(pid, nil, 0, nil)
		switch {
		case err == nil, errors.Is(err, unix.ECHILD):
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return fmt.Errorf("reap: wait4 %d: %w", pid, err)
		}
	}
}

// newSession is the SysProcAttr part of Tracker.Start: a new session, so a
// new process group whose id is the child's pid.
func newSession(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setsid = true
	attr.Setpgid = false
	attr.Pgid = 0
	return attr
}
