// Package reap ends what an Effect left running: the subreaper, children
// started in sessions of their own and registered with their Effect, and
// the settle loop that kills every process the Effector adopted that
// belongs to no live Effect.
//
// Invariant: when Settle returns, no process whose parent is this process
// is in a group that belongs to no live Effect; and it reaps by pid only the
// processes it killed, never wait4(-1), so it does not steal the exit status
// of a child another goroutine waits on through os/exec.
//
// # Mechanism
//
// The Effector sets PR_SET_CHILD_SUBREAPER ([SetChildSubreaper]), so a
// process whose parent ends is reparented to it, not to the container's
// init. Each child an Effect starts ([Tracker.Start]) runs in a new session
// whose group is registered with that Effect; a descendant can leave that
// group only for a group of its own (setsid, setpgid), never into the
// Effector's. [Tracker.Settle] kills the Effect's groups, then scans /proc
// for processes whose parent is the Effector and whose group is no live
// Effect's, kills and reaps them by pid, and repeats until none remain — a
// descendant that called setsid or double-forked is dead when it returns.
// A process in the Effector's own group was started by the Effector's code
// without a session of its own, not left by an Effect, and is never touched.
//
// An owner that signals its child's group until it waits on it starts it
// with [Tracker.StartChild]: the end is learnt without reaping (waitid
// with WNOWAIT), so the group's id is still the child's whenever it is
// signalled.
//
// A descendant that still has a living parent other than the Effector (a
// daemon under its command's keeper, see package keep) is not the
// Effector's child and so is not seen; its keeper ends it.
package reap
