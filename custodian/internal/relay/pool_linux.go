package relay

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// alive reports whether an idle connection can carry a request: the peer
// has not closed it and has sent nothing unasked (an idle upstream that
// closes sends its close_notify and FIN; either shows as a byte or an end
// to a peek that does not wait). One recvfrom, no read of the stream.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	cerr := rc.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		ok = err == unix.EAGAIN // nothing waiting; a byte or an end (n >= 0, no error) is not alive
		return true
	})
	return cerr == nil && ok
}

// isReset reports whether err is the peer resetting the connection.
func isReset(err error) bool {
	return errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE)
}
