//go:build !linux

package caps

import "errors"

// Drop fails outside Linux: capabilities and NO_NEW_PRIVS are Linux's.
func Drop(keep ...int) error {
	return errors.New("capabilities: Linux-only; nothing was dropped")
}
