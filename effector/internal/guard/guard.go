// Package guard decides whether a request to the Effector is signed by the
// placement's key, for this replica, now, and once — before any route is
// read.
//
// Invariant: a request that Check does not pass gets 401, an empty body and
// no signature, and nothing about it is remembered or acted on. A nonce is
// remembered only once its request verified, and until its time has left
// the window by one more window (NonceKept): the time alone refuses a
// replay after that, even on a wall clock that stepped back less than a
// window since. So the memory holds at most what the key holder sent in the
// last fifteen minutes, and is capped besides.
package guard

import (
	"crypto/sha256"
	"io"
	"net/http"
	"sync"
	"time"

	"jr2.dev/boundary/effector/internal/wire"
)

// Verified is a request that passed: its body (read whole, at most
// wire.MaxBody) and what its answer's signature must cover.
type Verified struct {
	Method string
	Target string
	Nonce  string
	Body   []byte
}

// Guard checks requests. It is safe for concurrent use.
type Guard struct {
	key     []byte
	address string
	started int64 // wall clock, Unix nanoseconds
	now     func() time.Time
	nonces  *Nonces
}

// New returns a Guard for a replica that verifies with key, signs for
// address (POD_IP:port) and started at started. now is the clock (nil:
// time.Now).
func New(key []byte, address string, started time.Time, now func() time.Time) *Guard {
	if now == nil {
		now = time.Now
	}
	return &Guard{key: key, address: address, started: started.UnixNano(), now: now, nonces: NewNonces(DefaultNonceCap)}
}

// Check reads r's body and verifies r. ok is false for every refusal; the
// caller answers 401 and reads nothing else of r.
func (g *Guard) Check(r *http.Request) (v *Verified, ok bool) {
	timeHdr, ok1 := single(r.Header, wire.HeaderTime)
	nonce, ok2 := single(r.Header, wire.HeaderNonce)
	sig, ok3 := single(r.Header, wire.HeaderSignature)
	if !ok1 || !ok2 || !ok3 || !wire.ValidNonce(nonce) {
		return nil, false
	}
	t, okT := wire.ParseTime(timeHdr)
	if !okT {
		return nil, false
	}
	if r.ContentLength > wire.MaxBody {
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxBody+1))
	if err != nil || len(body) > wire.MaxBody {
		return nil, false
	}
	target := r.RequestURI
	if !wire.Verify(g.key, wire.RequestLines(r.Method, g.address, target, timeHdr, nonce, body), sig) {
		return nil, false
	}
	now := g.now().UnixMilli()
	// Before the process started: t is whole milliseconds, so a request
	// signed in the millisecond the process started reads as before it.
	if t*int64(time.Millisecond) < g.started {
		return nil, false
	}
	window := wire.Window.Milliseconds()
	if t < now-window || t > now+window {
		return nil, false
	}
	if !g.nonces.Add(nonce, t+NonceKept.Milliseconds(), now) {
		return nil, false
	}
	return &Verified{Method: r.Method, Target: target, Nonce: nonce, Body: body}, true
}

// single returns the one value of header name; two or more are refused.
func single(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	if len(vs) != 1 {
		return "", false
	}
	return vs[0], true
}

// NonceKept is how long after its own time a nonce is remembered: its
// window, and one more, so a replay is refused by the nonce until the time
// refuses it on any clock that stepped back less than a window meanwhile
// (the memory is swept on the wall clock the window is read on).
const NonceKept = 2 * wire.Window

// DefaultNonceCap bounds the nonces remembered at once: past it, a new
// request is refused until old nonces are forgotten. At ~40 bytes each it
// is about 40 MiB, and a rate of 1,700 requests a second sustained for the
// whole of NonceKept.
const DefaultNonceCap = 1 << 20

// Nonces remembers the nonces of verified requests until each one's
// expiry. It is safe for concurrent use.
type Nonces struct {
	mu        sync.Mutex
	seen      map[[16]byte]int64 // digest of the nonce → expiry, Unix ms
	cap       int
	nextSweep int64
}

// NewNonces returns an empty memory that holds at most limit nonces.
func NewNonces(limit int) *Nonces {
	return &Nonces{seen: map[[16]byte]int64{}, cap: limit}
}

// Add remembers nonce until expiry (Unix ms) and reports whether it was
// new. now is the clock in Unix ms. A full memory refuses.
func (n *Nonces) Add(nonce string, expiry, now int64) bool {
	sum := sha256.Sum256([]byte(nonce))
	var k [16]byte
	copy(k[:], sum[:16])
	n.mu.Lock()
	defer n.mu.Unlock()
	if now >= n.nextSweep {
		n.sweep(now)
	}
	if exp, ok := n.seen[k]; ok && exp >= now {
		return false
	}
	if len(n.seen) >= n.cap {
		return false
	}
	n.seen[k] = expiry
	return true
}

// sweep forgets every expired nonce; it runs at most once a second of the
// request clock, full or not, so a full memory costs no more than an empty
// one.
func (n *Nonces) sweep(now int64) {
	for k, exp := range n.seen {
		if exp < now {
			delete(n.seen, k)
		}
	}
	n.nextSweep = now + 1000
}

// Len is how many nonces are remembered now.
func (n *Nonces) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.seen)
}
