//go:build !linux

package envoyrun

import (
	"errors"
	"net"
)

// peerPID cannot tell here which process serves a unix socket, so no drain
// is ever sent: it could reach another Envoy.
func peerPID(net.Conn) (int, error) {
	return 0, errors.New("this system cannot name the process behind a unix socket (SO_PEERCRED is Linux's)")
}
