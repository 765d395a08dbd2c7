// Package rotation keeps the Effector's held secrets in step with
// JR2_EFFECTOR_SECRETS: a rotation of the directory (the kubelet's new
// timestamped directory and ..data swap, or a file renamed over another)
// is read whole, held to the rules of the start, and swapped in, with no
// restart. The directory is followed by the engine's watcher
// (valuedir.WatchDir), the one every host of the kit shares.
//
// Invariants:
//   - A reload reads every secret the Effector started with, and only
//     those (a name added later needs a restart), as the directory was at
//     one moment; a set that breaks a rule of the start (a file missing,
//     empty, shorter than 8 bytes, below the guess floor) changes nothing
//     and logs one `jr2.effector action=reload result=refused secret=NAME
//     reason=<word>` line, never the value, its length or a path. A good
//     set logs `action=reload result=ok secrets=N`.
//   - The scrubber over every held value is swapped first (SetHeld), the
//     values second: a value that can be read is always one every answer
//     is scrubbed for. A value a rotation replaced is still scrubbed, under
//     its name, for Grace, and never read again.
//   - An effect reads the values it names when it starts (Value) and keeps
//     them, and its scrubber, to its end.
package rotation

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/valuedir"
)

// DefaultGrace is how long a replaced value stays scrubbed.
const DefaultGrace = valuedir.DefaultGrace

// Options configure Secrets.
type Options struct {
	// Dir is JR2_EFFECTOR_SECRETS.
	Dir string
	// Values are the secrets the Effector started with, by name.
	Values map[string][]byte
	// Fixed are held values that do not rotate here (the push
	// credentials, the placement key's forms): every scrubber holds them.
	Fixed []scrub.Secret
	// Grace is how long a replaced value stays scrubbed; 0 is DefaultGrace.
	Grace time.Duration
	// Log receives the reload pairs.
	Log func(kv ...string)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Secrets is the Effector's held secrets as they rotate. Value is safe for
// concurrent use; the rest is the watcher's.
type Secrets struct {
	o       Options
	names   []string
	cur     atomic.Pointer[map[string][]byte]
	sc      atomic.Pointer[scrub.Scrubber] // over Held, swapped with it
	setHeld func(*scrub.Scrubber)

	mu      sync.Mutex
	retired valuedir.Retired
	refused bool
	last    [32]byte
}

// New holds o.Values. It fails only when they cannot make a scrubber.
func New(o Options) (*Secrets, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = func(...string) {}
	}
	s := &Secrets{o: o, names: slices.Sorted(maps.Keys(o.Values))}
	s.retired.Grace = o.Grace
	if s.retired.Grace == 0 {
		s.retired.Grace = DefaultGrace
	}
	vals := maps.Clone(o.Values)
	s.cur.Store(&vals)
	sc, err := scrub.New(s.Held())
	if err != nil {
		return nil, err
	}
	s.sc.Store(sc)
	return s, nil
}

// Scrubber is the scrubber over Held now.
func (s *Secrets) Scrubber() *scrub.Scrubber { return s.sc.Load() }

// Value is the value of name now: what an effect that starts now sends.
func (s *Secrets) Value(name string) ([]byte, bool) {
	v, ok := (*s.cur.Load())[name]
	return v, ok
}

// Held is every value the scrubber holds now: each secret's value, with the
// values rotations replaced within Grace as forms of the same name, and
// the fixed ones.
func (s *Secrets) Held() []scrub.Secret {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldLocked(*s.cur.Load(), s.retired.Map())
}

func (s *Secrets) heldLocked(vals map[string][]byte, retired map[string][][]byte) []scrub.Secret {
	held := make([]scrub.Secret, 0, len(s.names)+len(s.o.Fixed))
	for _, n := range s.names {
		held = append(held, scrub.Secret{Name: n, Value: vals[n], Built: retired[n]})
	}
	return append(held, s.o.Fixed...)
}

// Watch follows the directory until stop is called. setHeld receives each
// new scrubber before the values it covers can be read
// (server.Server.SetHeld).
func (s *Secrets) Watch(setHeld func(*scrub.Scrubber), o valuedir.WatchOptions) (stop func()) {
	s.mu.Lock()
	s.setHeld = setHeld
	s.mu.Unlock()
	return valuedir.WatchDir(s.o.Dir, s, o)
}

// Read reads the held names again (valuedir.Follower).
func (s *Secrets) Read() (any, [32]byte, error) {
	vals, err := config.ReadSecrets(s.o.Dir, s.names)
	h := sha256.New()
	for _, n := range s.names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(vals[n]))
		h.Write(vals[n])
	}
	var ve *valuedir.ValueError
	if errors.As(err, &ve) {
		fmt.Fprintf(h, "\x00%s\x00%s", ve.Secret, ve.Word)
	}
	var d [32]byte
	h.Sum(d[:0])
	return vals, d, err
}

// Discard clears a set that was not taken (valuedir.Follower).
func (s *Secrets) Discard(set any) {
	vals, _ := set.(map[string][]byte)
	for _, v := range vals {
		clear(v)
	}
}

// Take swaps a good set in, or logs its refusal once (valuedir.Follower).
func (s *Secrets) Take(set any, digest [32]byte, err error) {
	vals, _ := set.(map[string][]byte)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = s.swapLocked(vals)
	}
	if err != nil {
		s.Discard(set)
		if s.refused && digest == s.last {
			return
		}
		s.refused, s.last = true, digest
		secret, word := "-", "scrubber"
		var ve *valuedir.ValueError
		if errors.As(err, &ve) {
			secret, word = ve.Secret, ve.Word
		}
		s.o.Log("action", "reload", "result", "refused", "secret", secret, "reason", word)
	}
}

func (s *Secrets) swapLocked(vals map[string][]byte) error {
	cur := *s.cur.Load()
	next, changed := s.retired.Next(s.o.Now(), cur, vals)
	if !changed && !s.refused {
		s.Discard(vals)
		return nil
	}
	sc, err := scrub.New(s.heldLocked(vals, next.Map()))
	if err != nil {
		next.Abandon(&s.retired)
		return err
	}
	s.retired.Replace(next)
	s.swapScrubber(sc)
	s.cur.Store(&vals)
	s.refused = false
	s.o.Log("action", "reload", "result", "ok", "secrets", fmt.Sprint(len(s.names)))
	return nil
}

// swapScrubber hands sc to the server, then keeps it.
func (s *Secrets) swapScrubber(sc *scrub.Scrubber) {
	if s.setHeld != nil {
		s.setHeld(sc)
	}
	s.sc.Store(sc)
}

// Expire drops the replaced values whose window ended (valuedir.Follower).
func (s *Secrets) Expire() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := *s.cur.Load()
	if next, dropped := s.retired.Expired(s.o.Now(), cur); dropped {
		if sc, err := scrub.New(s.heldLocked(cur, next.Map())); err == nil {
			s.swapScrubber(sc)
			s.retired.Replace(next)
		}
	}
	return s.retired.Ends()
}
