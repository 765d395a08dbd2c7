package commandkind

import (
	"errors"
	"os/exec"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/reap"
)

// proc is one process an effect started through the Tracker, in a session
// and group of its own whose id is its pid.
//
// Its group may be signalled until it is reaped, and only wait reaps it:
// until then the pid, and so the group's id, cannot be taken by another
// process, so a signal never reaches a stranger. signal and wait must be
// called from one goroutine.
type proc struct {
	t      *reap.Tracker
	cmd    *exec.Cmd
	ended  chan struct{} // closed when the process ended, before it is reaped
	reaped bool
}

// startProc starts cmd through t for the effect key.
func startProc(t *reap.Tracker, key string, cmd *exec.Cmd) (*proc, error) {
	if err := t.Start(key, cmd); err != nil {
		return nil, err
	}
	p := &proc{t: t, cmd: cmd, ended: make(chan struct{})}
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

// signal sends sig to the process's group, unless it was reaped.
func (p *proc) signal(sig unix.Signal) {
	if !p.reaped {
		_ = unix.Kill(-p.cmd.Process.Pid, sig)
	}
}

// wait waits for the end, reaps through the Tracker, and returns what
// cmd.Wait returned.
func (p *proc) wait() error {
	<-p.ended
	p.reaped = true
	return p.t.Wait(p.cmd)
}
