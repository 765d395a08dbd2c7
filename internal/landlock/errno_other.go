//go:build !unix

package landlock

import "syscall"

func errnoName(syscall.Errno) string { return "" }
