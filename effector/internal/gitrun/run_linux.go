package gitrun

import (
	"bytes"
	"context"
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
	p, err := t.StartChild(key, cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("%s could not start: %s", filepath.Base(cmd.Path), oserr.Why(err))
	}
	select {
	case <-p.Ended():
	case <-ctx.Done():
		p.Signal(unix.SIGKILL)
	}
	err = p.Wait()
	return out.B, errOut.B, err
}
