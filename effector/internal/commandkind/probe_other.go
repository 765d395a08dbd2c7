//go:build !linux

package commandkind

import "errors"

// Probe fails: Landlock is Linux's.
func Probe() (int, error) { return 0, errors.New("Landlock is Linux-only") }
