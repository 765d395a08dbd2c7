//go:build !linux

package kubetest

import "syscall"

// procAttr: outside Linux there is no Pdeathsig; Stop alone ends the
// processes.
func procAttr() *syscall.SysProcAttr { return nil }
