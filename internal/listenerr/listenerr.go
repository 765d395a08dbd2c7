// Package listenerr turns a failed listen into an error that names the
// fix: which listener, which flag or variable moves it, and, when the
// address is in use, what may already be holding it.
//
// # Invariant
//
// Wrap keeps the listen error (errors.Is still finds syscall.EADDRINUSE)
// and adds only the caller's fixed words and the address the caller chose
// to listen on: never anything a peer sent.
package listenerr

import (
	"errors"
	"fmt"
	"syscall"
)

// Wrap returns err, the failure to listen as listener (such as "control
// listener"), with the fix added: move names the flag or variable that
// moves it (such as "--control ADDR"), holder what else may be listening
// there (such as "another custodian serve"). Nil stays nil.
func Wrap(err error, listener, move, holder string) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%s: %w; something else listens there (%s may be running): stop it, or move this listener with %s", listener, err, holder, move)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("%s: %w; the address is not one of this machine's: move this listener with %s", listener, err, move)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s: %w; a port below 1024 needs root or CAP_NET_BIND_SERVICE: move this listener with %s", listener, err, move)
	}
	return fmt.Errorf("%s: %w; move this listener with %s", listener, err, move)
}
