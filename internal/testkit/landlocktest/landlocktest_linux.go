//go:build linux

package landlocktest

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DenyLandlock installs a seccomp filter on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC) that makes the three Landlock syscalls fail
// with errno, the way a kernel without Landlock (ENOSYS) or with it
// disabled at boot (EOPNOTSUPP) answers. Every other syscall is allowed.
// It sets PR_SET_NO_NEW_PRIVS first, as seccomp requires.
func DenyLandlock(errno syscall.Errno) error {
	arch, ok := map[string]uint32{
		"amd64": unix.AUDIT_ARCH_X86_64,
		"arm64": unix.AUDIT_ARCH_AARCH64,
	}[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("landlocktest: no seccomp arch for %s", runtime.GOARCH)
	}
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		// offsets in struct seccomp_data
		offNr   = 0
		offArch = 4
	)
	prog := []unix.SockFilter{
		{Code: ldAbs, K: offArch},
		{Code: jeq, Jt: 0, Jf: 4, K: arch}, // another arch: allow
		{Code: ldAbs, K: offNr},
		{Code: jge, Jt: 0, Jf: 2, K: unix.SYS_LANDLOCK_CREATE_RULESET},    // below 444: allow
		{Code: jge, Jt: 1, Jf: 0, K: unix.SYS_LANDLOCK_RESTRICT_SELF + 1}, // 444..446: errno
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | (uint32(errno) & unix.SECCOMP_RET_DATA)},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("landlocktest: no_new_privs: %w", err)
	}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("landlocktest: seccomp: %w", e)
	}
	return nil
}
