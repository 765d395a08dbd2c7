//go:build !linux

package landlocktest

import (
	"errors"
	"syscall"
)

// DenyLandlock fails: seccomp and Landlock are Linux-only.
func DenyLandlock(errno syscall.Errno) error {
	return errors.New("landlocktest: Linux-only")
}
