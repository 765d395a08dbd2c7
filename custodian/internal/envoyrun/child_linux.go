package envoyrun

import "syscall"

// childAttr ends Envoy with this process: a killed wrapper leaves no Envoy
// behind holding the listeners.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
