// Package gitrun runs the Effector's git: the one argv, environment and
// output handling every git of an effect gets, the command kind's
// checkout and the push kind's alike.
//
// Invariant: a git the Effector runs takes no program, no credential and
// no transport from a repository it reads or a config it did not write:
// its command-line config (Argv) wins over the system, global and
// repository ones, and its environment (Home.Env) is written whole, with
// the one transport a call may use (Allow). What it keeps of a program's
// output is bounded (Capped); a failure's reason is git's own line
// (Reason). Run starts git, or a program beside it, through the effect's
// reap.Tracker.
//
// Not covered: which paths git may open (the caller confines it, with
// `effector confine` as the prefix of Argv); the config and files the
// caller itself writes; a bug in git's own parsing of a hostile
// repository.
package gitrun
