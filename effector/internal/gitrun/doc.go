// Package gitrun runs the Effector's git: the one argv, environment and
// output handling every git of an effect gets, the command kind's
// checkout and the push kind's alike.
//
// Invariant: a git the Effector runs takes no program, no credential and
// no transport from a repository it reads or a config it did not write.
//
//   - Its command-line config ([Argv]), the scope that wins over the
//     system, global and repository ones: no hook, no fsmonitor, no
//     credential helper and no askpass but one the caller names after
//     it, no redirect followed, no `git for-each-ref` run in an
//     alternate, no gc or maintenance.
//   - Its environment ([Home.Env]), written whole: no system config, a
//     global config of the Effector's own, GIT_ALLOW_PROTOCOL naming the
//     one transport a call may use ([Allow]; none by default), which no
//     config can widen (a repository's protocol.<name>.allow beats
//     command-line protocol.allow, but not this), no terminal prompt, no
//     replace refs, no optional lock taken in a repository it only
//     reads, and nothing of the Effector's own environment.
//
// What it keeps of a program's output is bounded ([Capped]); a failure's
// reason is git's own line ([Reason]). [Run] starts git, or a program
// beside it, through the effect's reap.Tracker.
//
// Not covered: which paths git may open (the caller confines it, with
// `effector confine` as the prefix of [Argv]); the config and files the
// caller itself writes; a bug in git's own parsing of a hostile
// repository.
package gitrun
