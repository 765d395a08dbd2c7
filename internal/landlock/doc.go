// Package landlock confines the calling thread, and every program it then
// executes, to an allow-list of filesystem paths with the Linux Landlock LSM.
//
// Invariant: a Ruleset handles every filesystem right the running kernel
// knows (up to the last ABI in [ABIs]); a right that is handled and not
// granted by a rule is denied, to the thread that calls
// [Ruleset.RestrictSelf] and to every descendant, for good. No rule grants
// [MakeDevice] (making a character or block device node), whatever the
// caller asks: a confined program never makes a device node, with or
// without CAP_MKNOD. [Ruleset.RestrictSelf] shows the use.
//
// Warnings: what is NOT covered.
//   - The process: only the calling OS thread is restricted; the caller locks
//     it before Probe and execs on it (RestrictSelf).
//   - Network (TCP bind/connect of ABI 4 and UDP are not handled); connect(2)
//     to a pathname Unix socket before ABI 9; netlink sock_diag; abstract
//     sockets and signals to processes of the same uid unless the caller asks
//     for [ScopeAbstractUnix] or [ScopeSignal] (ABI 6).
//   - Path lookup: the access is checked at the end of a path, so a denied
//     path's existence shows (ENOENT versus EACCES) and stat(2) on it works.
//   - Descriptors opened before RestrictSelf keep their access (and cross
//     execve unless close-on-exec); a rule binds to an inode, so a bind mount
//     of a denied directory under an allowed one is readable through it.
//   - ptrace: the kernel's own rule (no ptrace out of a domain, so no
//     /proc/PID/mem of others); nothing is added. Other operating systems:
//     every call returns an error wrapping [ErrUnsupported].
package landlock
