// Package caps takes every privilege a thread's credentials can carry
// across execve away from it, before it executes a program it does not
// trust: the confined command of the Effector (`effector confine`) and the
// contained run's child (`custodian run`'s launcher) both call [Drop], one
// implementation.
//
// Invariant: when [Drop] returns nil, the calling thread has NO_NEW_PRIVS
// set and empty effective, permitted, inheritable and ambient capability
// sets; its bounding set is empty too whenever the thread could empty it
// (CAP_SETPCAP in its permitted set, which root always has). So a program
// it then executes runs with no capability, and neither a setuid-root
// binary nor one with file capabilities gives any back: NO_NEW_PRIVS keeps
// execve from raising the euid or the permitted set past the (empty) one
// the thread had, and the empty bounding set would cap them even without
// it. A root caller's child is no more than a non-root one's, with uid 0
// only as the owner of its files (DAC checks as owner, never overridden).
//
// The one exception is what the caller names in keep, and only what the
// thread held: that stays in every set (so it survives execve, as root and
// as another uid through the ambient set) and nothing else does. The
// Effector names CAP_DAC_READ_SEARCH for its own git alone, never for an
// Effect's command.
//
// # Order
//
// NO_NEW_PRIVS first (it cannot be undone and needs nothing); then the
// ambient set; then CAP_SETPCAP is raised into the effective set when it
// is only permitted, and the bounding set is emptied one capability at a
// time, which needs it; then permitted, effective and inheritable at once.
// The other way round, an empty permitted set would strand the bounding
// set full. Last, the sets are read back: Drop fails unless they are
// empty and NO_NEW_PRIVS is set.
//
// # Warnings: what is NOT covered
//
//   - The thread, not the process: capabilities are per thread. The caller
//     must have locked its goroutine to the OS thread and must execve on
//     that same thread (as package landlock requires too).
//   - A thread without CAP_SETPCAP (a non-root caller with no capability)
//     keeps its bounding set: only CAP_SETPCAP may shrink it. It is inert:
//     with NO_NEW_PRIVS set and the permitted set empty, execve grants
//     nothing the bounding set holds.
//   - uid 0 stays uid 0: files owned by root stay the child's as their
//     owner, and a signal to a process of the same uid is not a capability
//     (package landlock's signal scope is what confines that).
//   - Other operating systems: Drop returns an error and drops nothing.
package caps
