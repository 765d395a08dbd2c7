//go:build linux

package launcher

import "golang.org/x/sys/unix"

// The architecture the filter pins; arm64 has no x32-like ABI.
const (
	auditArch = unix.AUDIT_ARCH_AARCH64
	checkX32  = false
	pinned    = true
)
