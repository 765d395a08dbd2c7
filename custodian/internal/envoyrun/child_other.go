//go:build !linux

package envoyrun

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
