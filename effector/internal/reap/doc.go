// Package reap ends what an Effect left running: the subreaper, children
// started in sessions of their own and registered with their Effect, and
// the settle loop that kills every process the Effector adopted that
// belongs to no live Effect.
//
// Invariant: when Settle returns, no process whose parent is this process
// is in a group that belongs to no live Effect; and it reaps by pid only the
// processes it killed, never wait4(-1), so it does not steal the exit status
// of a child another goroutine waits on through os/exec (KillAndReapAll,
// which does, is the keeper's alone). A process in the Effector's own
// group was started by the Effector's code without a session of its own,
// not left by an Effect, and is never touched.
//
// Not covered: a descendant that still has a living parent other than the
// Effector (a daemon under its command's keeper, see package keep) is not
// the Effector's child and so is not seen; its keeper ends it.
package reap
