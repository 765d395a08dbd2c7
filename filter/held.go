package filter

import (
	"strconv"
	"sync/atomic"
)

// MaxHeldBodies bounds the request body bytes the hosts of one process
// hold at once to hash them for a SigV4 signature (Decision.NeedBody):
// 128 MiB, eight bodies of MaxSignedBody. A host asks for the body before
// any check of the signature can run (its hash is part of it), so without
// a bound across streams an agent that opens many requests could make the
// process hold MaxSignedBody for each; past it a request is answered 503
// (HeldBudgetSpent) and the agent retries.
const MaxHeldBodies = 128 << 20

// heldBytes is what every Hold of the process has taken.
var heldBytes atomic.Int64

// Hold is one request's share of MaxHeldBodies, taken as its body grows
// and given back once the body went on or the request ended. The zero
// Hold holds nothing. One goroutine takes; Release may come from another
// (a transport closing the body it sends).
type Hold struct{ n atomic.Int64 }

// Take asks for n more bytes. It reports false, taking nothing, when the
// process would hold more than MaxHeldBodies: the host then releases the
// hold and answers HeldBudgetSpent.
func (h *Hold) Take(n int) bool {
	if heldBytes.Add(int64(n)) > MaxHeldBodies {
		heldBytes.Add(-int64(n))
		return false
	}
	h.n.Add(int64(n))
	return true
}

// Release gives back every byte h took; calling it again does nothing.
func (h *Hold) Release() { heldBytes.Add(-h.n.Swap(0)) }

// HeldBytes is what the process holds now (for a test, and a host's
// metrics).
func HeldBytes() int64 { return heldBytes.Load() }

// RetryAfter is the Retry-After of HeldBudgetSpent, in seconds: long
// enough for the bodies held now to go on.
const RetryAfter = 1

// ReasonHeldBudget is the refusal of a request whose body would take the
// process past MaxHeldBodies.
const ReasonHeldBudget = "held-budget"

// HeldBudgetSpent is a host's answer to a request whose body it could not
// hold (Hold.Take reported false): 503, with Retry-After.
func (e *Engine) HeldBudgetSpent(target string) Decision {
	r := reply(503, ReasonHeldBudget, "the Custodian holds "+strconv.Itoa(MaxHeldBodies)+" bytes of request bodies to hash for SigV4 signatures already; retry shortly, or send x-amz-content-sha256 so that the body is not held")
	r.Headers = []Header{{Name: "retry-after", Value: strconv.Itoa(RetryAfter)}}
	return Decision{Target: target, Reply: r}
}
