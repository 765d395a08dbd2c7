//go:build linux

package reap

import (
	"errors"
	"os/exec"

	"golang.org/x/sys/unix"
)

// Child is one process an Effect started through a Tracker, in a session
// and group of its own whose id is its pid.
//
// Its group may be signalled until it is reaped, and only Wait reaps it:
// until then the pid, and so the group's id, cannot be taken by another
// process, so a signal never reaches a stranger. Signal and Wait must be
// called from one goroutine.
type Child struct {
	t      *Tracker
	cmd    *exec.Cmd
	ended  chan struct{}
	reaped bool
}

// StartChild starts cmd for effect as Start does, and returns it as a Child.
// Every StartChild must be followed by the Child's Wait.
func (t *Tracker) StartChild(effect string, cmd *exec.Cmd) (*Child, error) {
	if err := t.Start(effect, cmd); err != nil {
		return nil, err
	}
	p := &Child{t: t, cmd: cmd, ended: make(chan struct{})}
	pid := cmd.Process.Pid
	go func() {
		defer close(p.ended)
		var info unix.Siginfo
		for {
			// WNOWAIT: learn of the end without reaping.
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	return p, nil
}

// Ended is closed when the process ended, before it is reaped.
func (p *Child) Ended() <-chan struct{} { return p.ended }

// Signal sends sig to the process's group, unless it was reaped.
func (p *Child) Signal(sig unix.Signal) {
	if !p.reaped {
		_ = unix.Kill(-p.cmd.Process.Pid, sig)
	}
}

// Wait waits for the end, reaps through the Tracker, and returns what
// cmd.Wait returned.
func (p *Child) Wait() error {
	<-p.ended
	p.reaped = true
	return p.t.Wait(p.cmd)
}
