//go:build linux

package launcher

import "golang.org/x/sys/unix"

// The architecture the filter pins, and whether it must refuse x32
// syscalls (same AUDIT_ARCH, numbers with bit 30 set).
const (
	auditArch = unix.AUDIT_ARCH_X86_64
	checkX32  = true
	pinned    = true
)
