//go:build !linux

package inherit

import "errors"

// CloseOnExecAbove fails outside Linux.
func CloseOnExecAbove(n int) error {
	return errors.New("inherit: Linux-only (it lists /proc/self/fd)")
}
