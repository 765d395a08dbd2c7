// Package benchstats lets `make bench` read a Go host's allocation counters
// from outside its process. It does nothing in a normal build: only a binary
// built with -tags jr2bench (the benchmark harness builds one for itself)
// answers SIGUSR1 by writing one line to stderr,
//
//	jr2-bench-stats total_alloc_bytes=N mallocs=N
//
// the runtime's cumulative counters, which the harness reads before and after
// a timed phase. Invariant: without the tag the package installs no signal
// handler and has no code at all, so no production binary changes.
package benchstats
