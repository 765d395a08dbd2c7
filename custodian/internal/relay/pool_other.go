//go:build !linux

package relay

import "net"

// alive cannot peek without waiting off Linux: every idle connection is
// taken as alive, and a request on one the upstream had closed fails as
// the Transport's would, sent again only when idempotent.
func alive(net.Conn) bool { return true }

func isReset(error) bool { return false }
