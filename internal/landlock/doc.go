// Package landlock confines the calling thread, and every program it then
// executes, to an allow-list of filesystem paths with the Linux Landlock LSM.
//
// Invariant: a Ruleset handles every filesystem right the running kernel
// knows (up to the last ABI in [ABIs]); a right that is handled and not
// granted by a rule is denied, to the thread that calls
// [Ruleset.RestrictSelf] and to every descendant, for good. No rule grants
// [MakeDevice] (making a character or block device node), whatever the
// caller asks: a confined program never makes a device node, with or
// without CAP_MKNOD.
//
// # Use
//
//	runtime.LockOSThread() // never unlocked: the domain is the thread's
//	abi, err := landlock.Probe()
//	if err != nil { return landlock.Unavailable(node, err) }
//	rs, err := landlock.NewRuleset(abi)
//	if err != nil { … }
//	defer rs.Close()
//	err = rs.AddPath("/usr", landlock.ReadExec)
//	err = rs.AddPath(scratch, landlock.ReadWrite)
//	err = rs.RestrictSelf()          // NO_NEW_PRIVS, then restrict this thread
//	err = unix.Exec(path, argv, env) // on the same thread
//
// # Rights are data
//
// [ABIs] lists, per ABI version, the filesystem rights and scopes that
// version added. [FS] and [Scopes] fold the table up to a version; the named
// access sets ([ReadExec], [ReadFile], [ReadWrite]) are masked to the
// ruleset's handled rights when a rule is added, and rights that apply only
// to directories are dropped from a rule on a file.
//
// # Warnings: what is NOT covered
//
//   - The thread, not the process: RestrictSelf restricts only the calling
//     OS thread. The caller must have called runtime.LockOSThread before
//     Probe and must execve on that same thread; other goroutines' threads
//     stay unconfined until execve ends them.
//   - Network: TCP bind/connect (ABI 4) and UDP are not handled. A confined
//     program can open any socket the network namespace allows.
//   - Unix sockets: before ABI 9, connect(2) to a pathname socket is not a
//     filesystem access Landlock checks, and listing sockets over netlink
//     sock_diag is never checked. Abstract sockets are scoped only when the
//     caller asks for [ScopeAbstractUnix] (ABI 6).
//   - Signals: a confined program may signal any process of its uid unless
//     the caller asks for [ScopeSignal] (ABI 6).
//   - Path traversal: Landlock checks the access at the end of a path, not
//     the lookup through it: a confined program learns whether a denied path
//     exists (ENOENT versus EACCES), and stat(2) on it succeeds.
//   - Files already open: a descriptor opened before RestrictSelf keeps the
//     access it was opened with and is inherited across execve unless it is
//     close-on-exec.
//   - Same inode, other path: rules bind to the inode named when the rule
//     is added; a bind mount of a denied directory under an allowed one is
//     readable through the allowed path.
//   - ptrace: the kernel already forbids a domain to ptrace a process
//     outside it, which closes /proc/PID/mem of others; this package adds
//     nothing to that.
//   - Other operating systems: every call returns an error wrapping
//     [ErrUnsupported].
package landlock
