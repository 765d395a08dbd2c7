package httpkind

import (
	"os"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/oserr"
)

// openWorkFile opens name under the worktree root for a request body. The
// open goes through os.Root, so no "..", absolute path or symlink leads out
// of the worktree, and with O_NONBLOCK, so a FIFO the agent put there
// cannot hold the effect; anything but a regular file is refused. A refusal
// returns its reason, which names no path.
func openWorkFile(root, name string) (*os.File, int64, string) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, 0, "body.file: the worktree cannot be opened: " + oserr.Why(err)
	}
	defer r.Close()
	f, err := r.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, 0, "body.file: " + oserr.Why(err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, "body.file: not a regular file"
	}
	return f, st.Size(), ""
}
