// Package caps takes every privilege a thread's credentials can carry
// across execve away from it, before it executes a program it does not
// trust: the confined command of the Effector (`effector confine`) and the
// contained run's child (`custodian run`'s launcher) both call [Drop], one
// implementation.
//
// Invariant: when [Drop] returns nil, the calling thread has NO_NEW_PRIVS
// set and empty effective, permitted, inheritable and ambient capability
// sets, but for what the caller names in keep and the thread held (the
// Effector names CAP_DAC_READ_SEARCH for its own git alone, never for an
// Effect's command); its bounding set is empty too whenever the thread
// could empty it (CAP_SETPCAP, which root always has). So neither a
// setuid-root binary nor one with file capabilities gives any back, and a
// root caller's child is no more than a non-root one's, with uid 0 only as
// the owner of its files.
//
// Warnings: what is NOT covered.
//   - The thread, not the process: the caller locks its goroutine to the
//     OS thread and execs on it (as package landlock requires too).
//   - A thread without CAP_SETPCAP keeps its bounding set; it is inert, as
//     NO_NEW_PRIVS and an empty permitted set let execve grant nothing.
//   - uid 0 stays uid 0: root's files stay the child's as their owner, and
//     a signal to a process of the same uid is no capability (package
//     landlock's signal scope confines that). Other operating systems:
//     Drop returns an error and drops nothing.
package caps
