//go:build linux

package reap

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
)

// Tracker registers the process groups of live Effects and settles an
// Effect. The Effector sets PR_SET_CHILD_SUBREAPER (SetChildSubreaper), so
// a process whose parent ends is reparented to it, not to the container's
// init. Each child an Effect starts (Start) runs in a new session whose
// group is registered with that Effect; a descendant can leave that group
// only for a group of its own (setsid, setpgid), never into the
// Effector's. Settle kills the Effect's groups, then scans /proc for
// processes whose parent is the Effector and whose group is no live
// Effect's, kills and reaps them by pid, and repeats until none remain — a
// descendant that called setsid or double-forked is dead when it returns.
// An owner that signals its child's group until it waits on it starts it
// with StartChild: the end is learnt without reaping (waitid with
// WNOWAIT), so the group's id is still the child's whenever it is
// signalled.
//
// Its methods are safe for concurrent use: a Start never
// interleaves with a Settle's scan, so a child being started is registered
// before a scan can see it, and Settles run one at a time.
type Tracker struct {
	mu       sync.Mutex // held by Start across fork and exec, and by a settle round's scan and kill
	settling sync.Mutex // one Settle at a time: a pid one reaps cannot be another's victim
	groups   map[int]string
	started  map[int]*started
}

type started struct {
	effect string
	done   chan struct{}
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{groups: map[int]string{}, started: map[int]*started{}}
}

// Start starts cmd in a new session (its own process group, whose id is its
// pid) and registers that group with effect, which is live from then until
// Settle(effect). Every Start must be followed by Wait of the same cmd.
func (t *Tracker) Start(effect string, cmd *exec.Cmd) error {
	if effect == "" {
		return errors.New("reap: Start needs an effect id")
	}
	cmd.SysProcAttr = newSession(cmd.SysProcAttr)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	t.groups[pid] = effect
	t.started[pid] = &started{effect: effect, done: make(chan struct{})}
	return nil
}

// Wait waits for a cmd that Start started, as cmd.Wait does.
func (t *Tracker) Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	t.mu.Lock()
	if s := t.started[cmd.Process.Pid]; s != nil {
		delete(t.started, cmd.Process.Pid)
		close(s.done)
	}
	t.mu.Unlock()
	return err
}

// Groups lists the groups registered with effect.
func (t *Tracker) Groups(effect string) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gs []int
	for g, e := range t.groups {
		if e == effect {
			gs = append(gs, g)
		}
	}
	return gs
}

// Live reports whether pgid belongs to a live Effect.
func (t *Tracker) Live(pgid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.groups[pgid]
	return ok
}

// Settle ends effect: it is no longer live; its groups are killed
// (SIGKILL); Settle waits until every process Start started for it has been
// waited by its Wait (its owner's goroutine must call Wait, before or
// during Settle); then it kills and reaps every child of this process in no
// live Effect's group, until none remain. The Effect is settled when
// Settle returns.
func (t *Tracker) Settle(effect string) error {
	t.settling.Lock()
	defer t.settling.Unlock()
	live := func(pgid int) bool { _, ok := t.groups[pgid]; return ok } // called with t.mu held
	t.mu.Lock()
	var groups []int
	for g, e := range t.groups {
		if e == effect {
			groups = append(groups, g)
			delete(t.groups, g)
		}
	}
	// Under t.mu: no Start can take a freed pgid for another Effect
	// between the lookup and the kill.
	killGroups(groups, live)
	var waits []chan struct{}
	for _, s := range t.started {
		if s.effect == effect {
			waits = append(waits, s.done)
		}
	}
	t.mu.Unlock()
	// The processes Start started are their owners' to reap: a scan now
	// would see them and steal their status. Killed, they end soon.
	for _, w := range waits {
		<-w
	}
	if err := settle(nil, live, &t.mu); err != nil {
		return fmt.Errorf("reap: settle %s: %w", effect, err)
	}
	return nil
}
