package kubetest

import "syscall"

// procAttr makes a server's process die with the test binary, whatever
// ends it (a test timeout's panic runs no cleanup).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
