package landlock

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrUnsupported is wrapped by every error on a system that is not Linux.
var ErrUnsupported = errors.New("landlock is Linux-only")

// Error is a failed Landlock step. It keeps the errno (errors.Is(err,
// syscall.ENOSYS) holds) and explains the opaque ones.
type Error struct {
	Op   string // "probe", "create ruleset", "open", "add rule", "no_new_privs", "restrict self"
	Path string // the rule's path, for "open" and "add rule"
	Err  error  // usually a syscall.Errno
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("landlock: %s %s: %s", e.Op, e.Path, Explain(e.Err))
	}
	return fmt.Sprintf("landlock: %s: %s", e.Op, Explain(e.Err))
}

func (e *Error) Unwrap() error { return e.Err }

// Explain renders err for a reader: an errno as its name and what it means
// for Landlock ("ENOSYS: not supported by kernel or not enabled at boot
// time"), anything else as its own text.
func Explain(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		if err == nil {
			return "no error"
		}
		return err.Error()
	}
	text, name := errno.Error(), errnoName(errno)
	switch errno {
	case syscall.ENOSYS:
		text = "not supported by kernel or not enabled at boot time"
	case syscall.EOPNOTSUPP:
		// Linux's ENOTSUP is the same number; Landlock's documentation
		// names it EOPNOTSUPP.
		text, name = "disabled at boot time", "EOPNOTSUPP"
	}
	if name != "" {
		return name + ": " + text
	}
	return text
}

// Unavailable is the fail-closed reason of a node whose Landlock probe
// failed: "landlock: unavailable on node NODE (ENOSYS: not supported by
// kernel or not enabled at boot time)". An empty node is rendered
// "unknown".
func Unavailable(node string, err error) string {
	if node == "" {
		node = "unknown"
	}
	return fmt.Sprintf("landlock: unavailable on node %s (%s)", node, Explain(err))
}
