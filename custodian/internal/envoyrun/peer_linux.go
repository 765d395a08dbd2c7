package envoyrun

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerPID is the process that listens on the unix socket c is connected
// to, as the kernel recorded it when that process called listen
// (SO_PEERCRED): a path names whichever socket was bound there last, and
// Envoy unlinks and binds over a socket another Envoy still serves.
func peerPID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return int(cred.Pid), nil
}
