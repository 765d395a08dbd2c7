//go:build linux

package launcher

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Denied is the seccomp deny list: each syscall fails with EPERM (never a
// kill, so a denial is a debuggable error). Most already need a capability
// the child no longer has; the filter is the second wall, against kernel
// bugs in those paths, and the only one for userfaultfd, io_uring, keyctl
// and perf_event_open, which an unprivileged process may use.
var Denied = []struct {
	Nr  uintptr
	Why string
}{
	{unix.SYS_PTRACE, "inspect or steer another process"},
	{unix.SYS_PROCESS_VM_READV, "read another process's memory"},
	{unix.SYS_PROCESS_VM_WRITEV, "write another process's memory"},
	{unix.SYS_MOUNT, "change the filesystem view"},
	{unix.SYS_UMOUNT2, "change the filesystem view"},
	{unix.SYS_PIVOT_ROOT, "change the filesystem view"},
	{unix.SYS_OPEN_TREE, "new mount API"},
	{unix.SYS_MOVE_MOUNT, "new mount API"},
	{unix.SYS_FSOPEN, "new mount API"},
	{unix.SYS_FSCONFIG, "new mount API"},
	{unix.SYS_FSMOUNT, "new mount API"},
	{unix.SYS_FSPICK, "new mount API"},
	{unix.SYS_MOUNT_SETATTR, "new mount API"},
	{unix.SYS_UNSHARE, "leave the run's namespaces"},
	{unix.SYS_SETNS, "enter another namespace"},
	{unix.SYS_BPF, "load kernel programs"},
	{unix.SYS_PERF_EVENT_OPEN, "kernel attack surface, side channels"},
	{unix.SYS_USERFAULTFD, "kernel exploit primitive"},
	{unix.SYS_IO_URING_SETUP, "syscalls that bypass this filter"},
	{unix.SYS_IO_URING_ENTER, "syscalls that bypass this filter"},
	{unix.SYS_IO_URING_REGISTER, "syscalls that bypass this filter"},
	{unix.SYS_KEXEC_LOAD, "replace the kernel"},
	{unix.SYS_KEXEC_FILE_LOAD, "replace the kernel"},
	{unix.SYS_INIT_MODULE, "load kernel code"},
	{unix.SYS_FINIT_MODULE, "load kernel code"},
	{unix.SYS_DELETE_MODULE, "unload kernel code"},
	{unix.SYS_KEYCTL, "kernel keyrings"},
	{unix.SYS_ADD_KEY, "kernel keyrings"},
	{unix.SYS_REQUEST_KEY, "kernel keyrings"},
	{unix.SYS_SWAPON, "host administration"},
	{unix.SYS_SWAPOFF, "host administration"},
	{unix.SYS_REBOOT, "host administration"},
	{unix.SYS_OPEN_BY_HANDLE_AT, "open a file by handle, around path checks"},
	{unix.SYS_NAME_TO_HANDLE_AT, "open a file by handle, around path checks"},
}

// Families are the socket families the child may create (socket(2)'s
// first argument, checked by the filter): IPv4 and IPv6, which the
// network namespace routes to the mediator alone, and netlink, which reads
// and changes the namespace itself. Every other family fails with EPERM:
// the namespace is the control, and these reach past it — a pathname Unix
// socket reaches any host daemon whose socket file the child can name (a
// container engine's, an ssh-agent's), whatever Landlock allows to be read,
// and vsock reaches the hypervisor's host. AF_UNIX is allowed only where
// Landlock checks a connect to a pathname socket (landlock.ResolveUnix,
// ABI 9): then a socket in a write path is reachable and no other.
// socketpair(2) is not checked: its two ends reach nothing else.
var Families = []struct {
	Family uint32
	Why    string
}{
	{unix.AF_INET, "routed to the mediator alone"},
	{unix.AF_INET6, "disabled in the namespace; a probe for it fails as on a host without IPv6"},
	{unix.AF_NETLINK, "the namespace's own routes and addresses (getaddrinfo asks)"},
}

// nsFlags are the clone flags that make a namespace: clone with any of them
// fails with EPERM, as unshare does. clone3 passes its flags in memory the
// filter cannot read, so it fails with ENOSYS, and libc falls back to clone.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// Offsets in struct seccomp_data.
const (
	offNr    = 0
	offArch  = 4
	offArg0  = 16 // low 32 bits of args[0] on a little-endian machine
	x32Bit   = 0x40000000
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// insn is one BPF instruction whose jump targets are labels, resolved by
// assemble.
type insn struct {
	code   uint16
	k      uint32
	jt, jf string // labels; "" is the next instruction
	label  string // this instruction's label
}

func ld(off uint32) insn { return insn{code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: off} }
func ret(v uint32) insn  { return insn{code: unix.BPF_RET | unix.BPF_K, k: v} }
func jeq(k uint32, jt, jf string) insn {
	return insn{code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, k: k, jt: jt, jf: jf}
}
func jge(k uint32, jt, jf string) insn {
	return insn{code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, k: k, jt: jt, jf: jf}
}
func jset(k uint32, jt, jf string) insn {
	return insn{code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, k: k, jt: jt, jf: jf}
}
func at(label string, i insn) insn { i.label = label; return i }

// filter is the program: the architecture pinned (another one, such as
// 32-bit x86 entered from a 64-bit process, is killed: its syscall numbers
// mean other calls), x32 syscalls denied, then the deny list, then
// socket(2) held to Families (and AF_UNIX when unixSockets).
func filter(unixSockets bool) []insn {
	p := []insn{
		ld(offArch),
		jeq(auditArch, "", "kill"),
		ld(offNr),
	}
	if checkX32 {
		p = append(p, jge(x32Bit, "eperm", ""))
	}
	for _, d := range Denied {
		p = append(p, jeq(uint32(d.Nr), "eperm", ""))
	}
	p = append(p,
		jeq(unix.SYS_CLONE3, "enosys", ""),
		jeq(unix.SYS_CLONE, "clone", ""),
		jeq(unix.SYS_SOCKET, "socket", ""),
		ret(retAllow),
		at("clone", ld(offArg0)),
		jset(nsFlags, "eperm", ""),
		ret(retAllow),
		at("socket", ld(offArg0)),
	)
	for _, f := range Families {
		p = append(p, jeq(f.Family, "allow", ""))
	}
	if unixSockets {
		p = append(p, jeq(unix.AF_UNIX, "allow", ""))
	}
	return append(p,
		at("eperm", ret(retEPERM)),
		at("allow", ret(retAllow)),
		at("enosys", ret(retNOSYS)),
		at("kill", ret(retKill)),
	)
}

// assemble resolves labels into the kernel's relative jumps.
func assemble(p []insn) ([]unix.SockFilter, error) {
	where := map[string]int{}
	for i, in := range p {
		if in.label != "" {
			where[in.label] = i
		}
	}
	jump := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := where[label]
		if !ok || to <= from || to-from-1 > 255 {
			return 0, fmt.Errorf("launcher: bug: seccomp jump to %q from %d", label, from)
		}
		return uint8(to - from - 1), nil
	}
	out := make([]unix.SockFilter, len(p))
	for i, in := range p {
		jt, err := jump(i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := jump(i, in.jf)
		if err != nil {
			return nil, err
		}
		out[i] = unix.SockFilter{Code: in.code, Jt: jt, Jf: jf, K: in.k}
	}
	return out, nil
}

// installSeccomp loads the filter on the calling thread. NO_NEW_PRIVS must
// be set (the capabilities are gone by now). unixSockets allows AF_UNIX:
// only where Landlock checks a connect to a pathname socket.
func installSeccomp(unixSockets bool) error {
	if !pinned {
		return errors.New("seccomp: no architecture is pinned for this build; add one beside seccomp_amd64.go")
	}
	prog, err := assemble(filter(unixSockets))
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
