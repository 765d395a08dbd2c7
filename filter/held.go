package filter

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// MaxHeldBodies bounds the request body bytes the hosts of one process
// hold at once to check a SigV4 signature: a body held whole to hash it
// (Decision.NeedBody), and a signed aws-chunked upload's chunk held whole
// until its signature verified (Decision.Chunks, up to MaxSignedBody
// each): 128 MiB, eight of MaxSignedBody. Either is held before its
// signature can be checked, so without a bound across streams an agent
// that opens many requests could make the process hold MaxSignedBody for
// each; past it a request is answered 503 (HeldBudgetSpent) and the agent
// retries.
const MaxHeldBodies = 128 << 20

// maxHeldBodiesText is MaxHeldBodies in the answers' words; a test holds
// the two equal, so that the texts can be constants.
const maxHeldBodiesText = "134217728"

// heldBytes is what every Hold of the process has taken.
var heldBytes atomic.Int64

// Hold is one request's share of MaxHeldBodies, taken as its body grows
// and given back once the body went on or the request ended. The zero
// Hold holds nothing. One goroutine takes; Give, Release and Close may
// come from another (a transport closing the body it sends, a request's
// end).
type Hold struct {
	mu     sync.Mutex
	n      int64
	closed bool // Close was called: nothing more is taken
}

// Take asks for n more bytes. It reports false, taking nothing, when the
// process would hold more than MaxHeldBodies, or h was closed: the host
// then releases the hold and answers HeldBudgetSpent.
func (h *Hold) Take(n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if heldBytes.Add(int64(n)) > MaxHeldBodies {
		heldBytes.Add(-int64(n))
		return false
	}
	h.n += int64(n)
	return true
}

// Give gives back n of the bytes h took (at most all of them).
func (h *Hold) Give(n int) {
	h.mu.Lock()
	g := min(int64(n), h.n)
	if g > 0 {
		h.n -= g
		heldBytes.Add(-g)
	}
	h.mu.Unlock()
}

// Release gives back every byte h took; calling it again does nothing.
func (h *Hold) Release() {
	h.mu.Lock()
	heldBytes.Add(-h.n)
	h.n = 0
	h.mu.Unlock()
}

// Close releases h for good: a Take after it takes nothing, so a reader
// that goes on after its request ended holds nothing past the end.
func (h *Hold) Close() {
	h.mu.Lock()
	heldBytes.Add(-h.n)
	h.n, h.closed = 0, true
	h.mu.Unlock()
}

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
	return Decision{Target: target, Reply: heldBudgetReply(HeldBodyText)}
}

// HeldBodyText is HeldBudgetSpent's text for a body held whole to hash:
// a body whose hash the client sends is never held.
const HeldBodyText = "the Custodian holds " + maxHeldBodiesText + " bytes of request bodies to hash for SigV4 signatures already; retry shortly, or send x-amz-content-sha256 so that the body is not held"

// HeldChunkText is the same answer for a signed aws-chunked upload, cut
// at the chunk that did not fit: a chunk is held until its signature
// verifies, so smaller chunks hold less.
const HeldChunkText = "the Custodian holds " + maxHeldBodiesText + " bytes of request bodies for SigV4 signatures already, and a signed aws-chunked chunk is held until its signature verifies; the upload was cut there: retry it shortly, or with smaller chunks"

func heldBudgetReply(text string) *Reply {
	r := reply(503, ReasonHeldBudget, text)
	r.Headers = []Header{{Name: "retry-after", Value: strconv.Itoa(RetryAfter)}}
	return r
}
