package filter

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"jr2.dev/boundary/internal/valuedir"
)

// Live is the engine of one custodian.json whose values follow their files:
// a rotation of the value directory (the kubelet's new timestamped
// directory and ..data swap, or a plain rename of one file) becomes a new
// engine, swapped in whole, with no restart.
//
// Invariants:
//   - A reload reads the whole set of values, as it was on disk at one
//     moment (see Watch), and holds every value to LoadValues' rules. A set
//     that breaks one changes nothing: the engine that served goes on
//     serving, one line names the secret and the rule's word, and the next
//     change is read again.
//   - The swap is one atomic pointer store. A request (and its response)
//     is decided wholly with the engine Engine or Engine.Latest returned
//     when it began: never with a mix of two sets.
//   - A value a rotation replaced is never sent again, and is still
//     scrubbed, under its secret's label, for the grace window
//     (Config.ValueGrace) after it was replaced; then it is dropped. An
//     access token the minter replaced (oauth.go) is scrubbed for the
//     grace window or until its own life ends, whichever is sooner, and
//     of each secret's only the newest maxRetiredTokens.
//   - Log lines carry secret names, counts and rule words: never a value,
//     its length, or a path.
type Live struct {
	cfg *Config
	log func(kv ...string)
	now func() time.Time
	// after is the minter's timer (time.After; a test's records each wait).
	after func(time.Duration) <-chan time.Time
	cur   atomic.Pointer[Engine]

	mu          sync.Mutex
	retired     valuedir.Retired
	spent       []spentValue         // the access tokens the minter replaced, still scrubbed (oauth.go)
	tokens      map[string][]byte    // the values the minter got: by OAuth secret, its current access token; by rotatedNames, the refresh tokens its endpoint rotated to
	expiry      map[string]time.Time // OAuth secret -> when its current access token ends (zero: not said)
	refusals    map[string]string    // OAuth secret -> its last refusal's word
	partsGen    chan struct{}        // closed when a reload changed an OAuth secret's parts
	refused     bool                 // the last reload was refused
	lastRefusal [32]byte             // digest of what the last refused reload read, so one bad set logs once
}

// LiveOptions configure a Live.
type LiveOptions struct {
	// Log receives each reload's pairs (action=reload …). It may be called
	// from the watcher's goroutine: it must not call into a host that
	// allows calls only from its own threads (Envoy).
	Log func(kv ...string)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// NewLive builds the first engine from c and the values LoadValues read.
func NewLive(c *Config, values map[string][]byte, o LiveOptions) (*Live, error) {
	l := &Live{cfg: c, log: o.Log, now: o.Now, tokens: map[string][]byte{}, expiry: map[string]time.Time{}, refusals: map[string]string{}, partsGen: make(chan struct{})}
	l.retired.Grace = c.ValueGrace()
	if l.log == nil {
		l.log = func(...string) {}
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.after = time.After
	e, err := newEngine(c, values, nil)
	if err != nil {
		return nil, err
	}
	e.live = l
	l.cur.Store(e)
	return l, nil
}

// Engine is the engine a new request decides with.
func (l *Live) Engine() *Engine { return l.cur.Load() }

// Config is the config every engine of l shares.
func (l *Live) Config() *Config { return l.cfg }

// readSet reads the whole value set as LoadValues does, and a digest of
// every byte it read and of its refusal, which only tells one read from
// another and never leaves the process.
func (l *Live) readSet() (map[string][]byte, [32]byte, error) {
	h := sha256.New()
	vals, err := loadValues(l.cfg, h)
	var ve *valuedir.ValueError
	if errors.As(err, &ve) {
		fmt.Fprintf(h, "\x00%s\x00%s", ve.Secret, ve.Word)
	}
	var d [32]byte
	h.Sum(d[:0])
	return vals, d, err
}

// apply takes a set read at one moment: it is refused (logged once per
// distinct set) or swapped in, with the values it replaces retired.
func (l *Live) apply(vals map[string][]byte, digest [32]byte, err error) {
	defer func() {
		for _, v := range vals {
			clear(v)
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		err = l.swapLocked(vals)
	}
	if err != nil {
		if l.refused && digest == l.lastRefusal {
			return
		}
		l.refused, l.lastRefusal = true, digest
		secret, word := "-", "engine"
		var ve *valuedir.ValueError
		if errors.As(err, &ve) {
			secret, word = ve.Secret, ve.Word
		}
		l.log("action", "reload", "result", "refused", "secret", secret, "reason", word)
		return
	}
}

// swapLocked builds the engine of vals and swaps it in, when vals differ
// from the values serving (or the last reload was refused).
func (l *Live) swapLocked(vals map[string][]byte) error {
	old := l.cur.Load()
	cur := old.valueSet()
	for name, tok := range l.tokens {
		vals[name] = bytes.Clone(tok) // the minter's values are no file's: they stay
	}
	now := l.now()
	next, changed := l.retired.Next(now, cur, vals)
	if !changed && !l.refused {
		return nil
	}
	spent := l.liveSpent(now)
	e, err := newEngine(l.cfg, vals, retiredMap(next, spent))
	if err != nil {
		next.Abandon(&l.retired)
		return err
	}
	e.live = l
	l.stampLocked(e)
	if !sameParts(old.parts, e.parts) {
		close(l.partsGen) // each minter starts again with the new parts
		l.partsGen = make(chan struct{})
	}
	l.retired.Replace(next)
	dropSpent(l.spent, spent)
	l.spent = spent
	l.cur.Store(e)
	l.refused = false
	l.log("action", "reload", "result", "ok", "secrets", fmt.Sprint(len(old.secrets)))
	return nil
}

// Expire drops the retired values whose window ended (the value
// directory's and the minter's): the engine is rebuilt from the values
// serving and the retired values left. It reads no file and logs nothing.
// It returns when the next retired value ends (zero when none is left).
func (l *Live) Expire() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.cur.Load()
	vals := cur.valueSet()
	now := l.now()
	next, dropped := l.retired.Expired(now, vals)
	spent := l.liveSpent(now)
	if dropped || len(spent) != len(l.spent) {
		if e, err := newEngine(l.cfg, vals, retiredMap(next, spent)); err == nil {
			e.live = l
			l.stampLocked(e)
			l.retired.Replace(next)
			dropSpent(l.spent, spent)
			l.spent = spent
			l.cur.Store(e)
		}
	}
	ends := l.retired.Ends()
	for _, v := range l.spent {
		if ends.IsZero() || v.until.Before(ends) {
			ends = v.until
		}
	}
	return ends
}

// liveSpent is l.spent less the values whose window ended by now.
func (l *Live) liveSpent(now time.Time) []spentValue {
	var out []spentValue
	for _, v := range l.spent {
		if now.Before(v.until) {
			out = append(out, v)
		}
	}
	return out
}

// Watch follows l's value directory (valuedir.WatchDir) until stop is called.
func (l *Live) Watch(o valuedir.WatchOptions) (stop func()) {
	return valuedir.WatchDir(l.cfg.ValuesDir, liveFollower{l}, o)
}

// liveFollower is Live as a valuedir.Follower.
type liveFollower struct{ l *Live }

func (f liveFollower) Read() (any, [32]byte, error) {
	vals, d, err := f.l.readSet()
	return vals, d, err
}

func (f liveFollower) Discard(set any) {
	if vals, ok := set.(map[string][]byte); ok {
		for _, v := range vals {
			clear(v)
		}
	}
}

func (f liveFollower) Take(set any, d [32]byte, err error) {
	vals, _ := set.(map[string][]byte)
	f.l.apply(vals, d, err)
}

func (f liveFollower) Expire() time.Time { return f.l.Expire() }
