// Package effect is the seam between the Effector's server and its kinds
// (http, command and push). The server owns the state machine —
// running and settled, attach, kept stops, outcome expiry, read-tracking for
// the drain — once, for every kind; a kind only checks a start and runs it.
//
// Invariant: a kind's Prepare starts nothing and sends nothing. Everything
// that acts happens in Plan.Run, which the server calls at most once per
// effect id, and whose outcome the server settles exactly once.
package effect

import (
	"context"

	"jr2.dev/boundary/effector/internal/wire"
)

// Kind is one kind of effect. Its methods are called from many goroutines
// at once.
type Kind interface {
	// Prepare checks a decoded start whose Kind is this kind's and returns
	// the plan to run it. An error is a malformed start: its text is the
	// 400 reason, and nothing was started. Prepare must not block on the
	// network or on another effect.
	Prepare(id string, start *wire.Start) (*Plan, error)
}

// KeptStop says what a stop the replica kept for an id it did not hold
// (a DELETE that arrived before the start) does to a start of that id.
type KeptStop uint8

const (
	// DropStop: the stop route is not this kind's; the kept stop is
	// dropped and the effect runs (http, push).
	DropStop KeptStop = iota
	// DidNotRun: the effect attaches to the kept stop and settles unknown,
	// "did not run", without Run being called (command).
	DidNotRun
)

// Plan is one prepared effect. The server reads its fields once, after
// Prepare returns, and never changes them.
type Plan struct {
	// Method and Host are the start line's method= and host= ("-" where
	// the kind has none). Never a path, a query or a value.
	Method, Host string

	// Built maps a held secret's name to the strings this effect built
	// from its value (the Authorization value, a Basic pair, a filled
	// header, the url and its path and query as the server sees them).
	// The server scrubs every form of each, beside every held secret.
	Built map[string][][]byte

	// Run performs the effect and returns how it settled. It is called at
	// most once, in its own goroutine. ctx ends only when the process is
	// going away; the kind applies the start's own timeout. sc scrubs with
	// every held secret and this plan's Built strings (see Scrubber): a
	// kind that bounds output scrubs it with sc before it cuts. The server
	// scrubs every string of the outcome again before it is stored.
	Run func(ctx context.Context, sc *Scrubber) wire.Outcome

	// Stop, when not nil, is the DELETE hook: it asks the running effect
	// to stop and returns at once; Run still returns the outcome. nil means
	// DELETE answers 405 for this effect.
	Stop func()

	// KeptStop is what a kept stop for this id does to this start.
	KeptStop KeptStop

	// Pinned, when set, is the commit the effect runs against, named in
	// every state answer.
	Pinned string
}
