package gitrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/reap"
)

// Run starts cmd through t under the effect key t settles, in a session
// of its own, and waits for its end; ctx's end kills its group
// (SIGKILL). stdin, when not nil, is its stdin. A stdout or stderr cmd
// leaves nil is kept up to MaxStdout or MaxStderr and returned. It is for
// git and the programs beside it (ssh-keygen, gpg).
func Run(ctx context.Context, t *reap.Tracker, key string, cmd *exec.Cmd, stdin []byte) (stdout, stderr []byte, err error) {
	out, errOut := Capped{Limit: MaxStdout}, Capped{Limit: MaxStderr}
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &errOut
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = time.Second
	if err := t.Start(key, cmd); err != nil {
		return nil, nil, fmt.Errorf("%s could not start: %s", filepath.Base(cmd.Path), oserr.Why(err))
	}
	pid := cmd.Process.Pid
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var info unix.Siginfo
		// WNOWAIT: learn of the end without reaping, so the group's id is
		// still this process's when it is killed.
		for errors.Is(unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil), unix.EINTR) {
		}
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		_ = unix.Kill(-pid, unix.SIGKILL)
		<-ended
	}
	err = t.Wait(cmd)
	return out.B, errOut.B, err
}
