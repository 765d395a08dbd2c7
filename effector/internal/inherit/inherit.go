// Package inherit decides which descriptors a program this process
// executes inherits.
//
// Invariant: after CloseOnExecAbove(n) returns nil, an execve from this
// process passes on no descriptor above n: an open file is a way around
// every path rule, so a confined program starts with its standard streams
// and nothing else.
package inherit
