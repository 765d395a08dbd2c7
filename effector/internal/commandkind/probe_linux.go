package commandkind

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Probe asks the kernel for its Landlock ABI version
// (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION). It
// returns the version, or an error that reads as the errno's name: ENOSYS
// when the kernel lacks Landlock, EOPNOTSUPP when it is built in but not
// enabled at boot.
func Probe() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errnoName{errno}
	}
	if int(v) < 1 {
		return 0, errors.New("no ABI version")
	}
	return int(v), nil
}

// errnoName reads as the errno's name (ENOSYS) and unwraps to it.
type errnoName struct{ errno unix.Errno }

func (e errnoName) Error() string {
	if n := unix.ErrnoName(e.errno); n != "" {
		return n
	}
	return e.errno.Error()
}

func (e errnoName) Unwrap() error { return e.errno }
