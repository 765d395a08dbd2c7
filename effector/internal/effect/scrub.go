package effect

import (
	"bytes"
	"slices"
	"sync"
	"unicode/utf8"

	"jr2.dev/boundary/filter/scrub"
)

// Scrubber is what an effect's output is scrubbed with: every held secret
// and the placement key (one automaton, built once when the Effector
// starts, shared by every effect) and the strings this effect built from a
// secret that the held automaton does not already cover (a small automaton
// of the effect's own, or none). It is read-only and safe for concurrent
// use; each Stream is not.
//
// Invariant: no form of a held value, and no form of a string the effect
// built, comes out whole (the guarantee of one scrub.Scrubber over them
// all). A built string B is left out of the effect's automaton only when
// every form of B (scrub.Forms) holds a form of a held value or of a built
// string kept before it: a scan replaces a byte inside each such form, so
// no form of B survives. Kept strings are scanned first, then the held
// ones; where the two overlap in the input, the built one's label wins.
// What the union would have replaced as one label may come out as the
// text around a held value's label ("Bearer [secret:NAME]").
type Scrubber struct {
	held  *scrub.Scrubber
	built *scrub.Scrubber // nil: nothing the effect built needs its own scan
}

// Held is a Scrubber of the held secrets alone: an effect that built
// nothing from a secret.
func Held(held *scrub.Scrubber) *Scrubber { return &Scrubber{held: held} }

// Scrubbers makes the Scrubbers of effects over one set of held secrets.
// It remembers, for the last strings effects built (a bearer value is the
// same each time), whether the held forms cover each, so a repeated one
// costs a map lookup rather than its forms. Safe for concurrent use.
type Scrubbers struct {
	held   *scrub.Scrubber
	mu     sync.Mutex
	byHeld map[string]bool // built string → every form holds a held form
}

// rememberCover is how many built strings Scrubbers remembers; when full
// it forgets them all (a bound, not a policy).
const rememberCover = 1024

// NewScrubbers returns the Scrubbers over held.
func NewScrubbers(held *scrub.Scrubber) *Scrubbers {
	return &Scrubbers{held: held, byHeld: map[string]bool{}}
}

// ForEffect is NewScrubbers(held).For(built).
func ForEffect(held *scrub.Scrubber, built map[string][][]byte) (*Scrubber, error) {
	return NewScrubbers(held).For(built)
}

// heldCovers reports whether every form of b holds a form of a held value.
// forms are b's forms when they had to be made, else nil.
func (ss *Scrubbers) heldCovers(b []byte) (bool, [][]byte) {
	ss.mu.Lock()
	known, ok := ss.byHeld[string(b)]
	ss.mu.Unlock()
	if ok && known {
		return true, nil
	}
	forms := scrub.Forms(b)
	if ok {
		return false, forms
	}
	known = covered(ss.held, forms, nil)
	ss.mu.Lock()
	if len(ss.byHeld) >= rememberCover {
		clear(ss.byHeld)
	}
	ss.byHeld[string(b)] = known
	ss.mu.Unlock()
	return known, forms
}

// For is the Scrubber of an effect that built, from each named held
// secret, the strings in built. The held scrubber must hold every name in
// built. It fails, as scrub.New would over the union, when a label of a
// held secret holds a form of a kept built string (in any letter case);
// the error names no value.
func (ss *Scrubbers) For(built map[string][][]byte) (*Scrubber, error) {
	held := ss.held
	if len(built) == 0 {
		return Held(held), nil
	}
	var secrets []scrub.Secret
	var kept [][][]byte // the forms of each string kept so far
	seen := map[string]bool{}
	for _, name := range held.Names() {
		if seen[name] || len(built[name]) == 0 {
			continue
		}
		seen[name] = true
		var own [][]byte
		for _, b := range shortestFirst(built[name]) {
			if len(b) < scrub.MinLen {
				continue // scrub.New ignores it too
			}
			byHeld, forms := ss.heldCovers(b)
			if byHeld || covered(held, forms, kept) {
				continue
			}
			kept = append(kept, forms)
			own = append(own, b)
		}
		if len(own) > 0 {
			secrets = append(secrets, scrub.Secret{Name: name, Value: own[0], Built: own[1:]})
		}
	}
	if len(secrets) == 0 {
		return Held(held), nil
	}
	b, err := scrub.New(secrets)
	if err != nil {
		return nil, err
	}
	folded := b.Folded()
	for _, name := range held.Names() {
		if l := "[secret:" + name + "]"; folded.String(l) != l {
			return nil, errLabel
		}
	}
	return &Scrubber{held: held, built: b}, nil
}

type labelError struct{}

func (labelError) Error() string {
	return "a held secret's label would hold a form of what the effect built; give the secret another name"
}

var errLabel error = labelError{}

// shortestFirst orders a secret's built strings by length, so that a
// longer string holding a shorter one (a url holding its path) is found
// covered by it.
func shortestFirst(bs [][]byte) [][]byte {
	out := slices.Clone(bs)
	slices.SortStableFunc(out, func(a, b []byte) int { return len(a) - len(b) })
	return out
}

// covered reports whether every form holds a form of a held value (the
// held scan changes it) or a form of a string already kept.
func covered(held *scrub.Scrubber, forms [][]byte, kept [][][]byte) bool {
	for _, f := range forms {
		if !bytes.Equal(held.Bytes(f), f) || holdsAny(f, kept) {
			continue
		}
		return false
	}
	return true
}

func holdsAny(f []byte, kept [][][]byte) bool {
	for _, forms := range kept {
		for _, k := range forms {
			if bytes.Contains(f, k) {
				return true
			}
		}
	}
	return false
}

// Own reports whether the effect has an automaton of its own (a built
// string the held secrets do not cover).
func (s *Scrubber) Own() bool { return s.built != nil }

// Bytes returns p scrubbed, in a new slice.
func (s *Scrubber) Bytes(p []byte) []byte {
	if s.built != nil {
		p = s.built.Bytes(p)
	}
	return s.held.Bytes(p)
}

// String is Bytes for a string.
func (s *Scrubber) String(v string) string {
	if s.built != nil {
		v = s.built.String(v)
	}
	return s.held.String(v)
}

// Folded is the twin that matches ASCII letters in any case (see
// scrub.Scrubber.Folded), for text whose case was rewritten on its way.
func (s *Scrubber) Folded() *Scrubber {
	f := &Scrubber{held: s.held.Folded()}
	if s.built != nil {
		f.built = s.built.Folded()
	}
	return f
}

// Bound returns p scrubbed and then cut to at most n bytes, and whether
// anything was cut: scrubbing comes first, so a form that straddles the
// cut is replaced whole before it. The cut never splits a label or a UTF-8
// sequence (see Cut).
func (s *Scrubber) Bound(p []byte, n int) ([]byte, bool) {
	if s.built == nil {
		return s.held.Bound(p, n)
	}
	out := s.Bytes(p)
	n = max(n, 0)
	if len(out) <= n {
		return out, false
	}
	out = Cut(out, n)
	return out[:len(out):len(out)], true
}

// Cut cuts scrubbed text b to at most max bytes: before a label the cut
// would split (any "[secret:" whose "]" falls past the cut), and back to
// the start of a rune the cut would split, so the text stays valid UTF-8
// where it was.
func Cut(b []byte, max int) []byte {
	cut := min(max, len(b))
	label := []byte("[secret:")
	for i := 0; ; {
		j := bytes.Index(b[i:], label)
		if j < 0 || i+j >= cut {
			break
		}
		start := i + j
		end := bytes.IndexByte(b[start:], ']')
		if end < 0 || start+end >= cut {
			cut = start
			break
		}
		i = start + end + 1
	}
	b = b[:cut]
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		j := len(b) - 1 - i
		if utf8.RuneStart(b[j]) {
			if !utf8.FullRune(b[j:]) {
				b = b[:j]
			}
			break
		}
	}
	return b
}

// Stream scrubs one body that arrives in chunks: the effect's own scan,
// then the held one. It is not safe for concurrent use.
type Stream struct {
	held, built *scrub.Stream
	tmp         []byte
}

// NewStream starts a stream that holds back exactly what it must.
func (s *Scrubber) NewStream() *Stream {
	st := &Stream{held: s.held.NewStream()}
	if s.built != nil {
		st.built = s.built.NewStream()
	}
	return st
}

// Write appends to dst the scrubbed bytes of p that can be passed on now
// and returns the extended slice; p is not retained and must not overlap
// dst.
func (st *Stream) Write(dst, p []byte) []byte {
	if st.built == nil {
		return st.held.Write(dst, p)
	}
	st.tmp = st.built.Write(st.tmp[:0], p)
	return st.held.Write(dst, st.tmp)
}

// Flush appends the held tail, scrubbed, at the end of the stream.
func (st *Stream) Flush(dst []byte) []byte {
	if st.built != nil {
		st.tmp = st.built.Flush(st.tmp[:0])
		dst = st.held.Write(dst, st.tmp)
	}
	return st.held.Flush(dst)
}

// Discard ends a body that was cut short: what is held back is dropped
// rather than flushed. It returns how many bytes were held.
func (st *Stream) Discard() int {
	n := st.held.Discard()
	if st.built != nil {
		n += st.built.Discard()
	}
	return n
}

// Held is how many bytes the stream holds back now.
func (st *Stream) Held() int {
	n := st.held.Held()
	if st.built != nil {
		n += st.built.Held()
	}
	return n
}
