package run

import (
	"os"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/internal/caps"
)

const (
	capSysAdmin = unix.CAP_SYS_ADMIN
	capNetAdmin = unix.CAP_NET_ADMIN
)

// privileged is privilegeError of this process.
func privileged() error { return privilegeError(os.Geteuid(), caps.Effective) }
