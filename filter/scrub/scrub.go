// Package scrub replaces every form of every held secret with
// "[secret:<name>]", in whole strings and in streams cut at any byte.
//
// Invariant: in any chunking of the input, the output holds no form of a
// held value (see Forms, and docs/scrub.md) whole — a value holding a
// bracket excepted, see New — no byte of a form that is replaced is
// emitted, and text that holds no form comes out byte-identical. Nothing
// here logs, and no error holds a byte of a value.
//
// Each part is documented where it is built: the forms (Forms), the
// leftmost-longest match over one automaton (scan), the hold of a stream
// and its oracle (Stream, NewUniformStream), scrub-then-cut (Bound), labels
// (New), any letter case (Folded) and the cost (automaton). docs/scrub.md
// is the reference, and a test keeps its form table equal to the code.
//
// Not covered: a hash, a truncation or a partial echo of a value; one
// percent string mixing upper- and lower-case hex, or mixing spellings;
// base64 with line breaks (MIME); any encoding, or nesting of encodings,
// not listed in Forms; and a Built string shorter than MinLen.
package scrub

import (
	"bytes"
	"fmt"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// MinLen is the shortest value a Scrubber accepts: a shorter one would
// match ordinary text.
const MinLen = 8

// Secret is one held value, the label it is replaced with, and what a
// component built from it for one use (the Effector: the Authorization value
// it sent, a Basic pair, a filled header, a url). Every form of Value and of
// each Built string is replaced by "[secret:" + Name + "]".
type Secret struct {
	Name  string
	Value []byte
	Built [][]byte
}

// Scrubber holds the forms of a set of secrets. It is read-only once built
// and safe for concurrent use; each Stream is not.
type Scrubber struct {
	names   []string
	labels  [][]byte
	pats    []pattern
	a       *automaton
	forms   int // distinct patterns
	longest int // longest pattern
	fold    *folded
}

// folded is the case-folded twin of a Scrubber, built on first use.
type folded struct {
	once sync.Once
	s    *Scrubber
}

// New builds a Scrubber over every form of every secret. A Value shorter
// than MinLen is refused, naming the secret; a Built string shorter than
// MinLen is ignored (it cannot be matched safely). A name must be 1 or more
// bytes of printable ASCII without "[", "]" or a space, and its label must
// hold no form of any value. Errors name the secret, never a value byte.
// New(nil) is a Scrubber that replaces nothing.
//
// A label is "[secret:" + name + "]". New refuses a name whose label holds
// a form of a held value (in any letter case), since each replacement
// would write it again. A form that overlaps a label in the output must
// hold the label's "[" or "]", so when no form holds a bracket (no value
// holds one: only V itself and its JSON spellings keep brackets) the
// output holds no form at all and Bytes(Bytes(x)) == Bytes(x). A value
// that holds a bracket can be completed by a label beside a partial echo
// of it: "pass[" next to another secret's replaced form gives "pass" +
// "[secret:…]". That output holds the form, assembled; not claimed.
func New(secrets []Secret) (*Scrubber, error) {
	s := &Scrubber{}
	var pats []pattern
	for i, sec := range secrets {
		if err := checkName(sec.Name); err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		if len(sec.Value) < MinLen {
			return nil, fmt.Errorf("secret %s: the value is shorter than %d bytes; a value that short would match ordinary text", sec.Name, MinLen)
		}
		for _, f := range secretForms(sec) {
			pats = append(pats, pattern{b: f, owner: int32(i)})
			s.longest = max(s.longest, len(f))
		}
		s.names = append(s.names, sec.Name)
		s.labels = append(s.labels, []byte("[secret:"+sec.Name+"]"))
	}
	short := shortForms(pats, s.labels)
	for i, l := range s.labels {
		if labelHoldsForm(l, short) {
			// The label is the name, and the name may be the value: name
			// the secret by its place only.
			return nil, fmt.Errorf("secrets[%d]: its label would hold a form of a held value; give the secret another name", i)
		}
	}
	s.pats = pats
	s.a = build(pats, false)
	s.forms = s.a.patterns
	s.fold = &folded{}
	return s, nil
}

// shortForms are the patterns no longer than the longest label, in lower
// case: the only ones a label could hold.
func shortForms(pats []pattern, labels [][]byte) [][]byte {
	longest := 0
	for _, l := range labels {
		longest = max(longest, len(l))
	}
	var out [][]byte
	for _, p := range pats {
		if len(p.b) <= longest {
			out = append(out, lowerASCII(p.b))
		}
	}
	return out
}

// labelHoldsForm reports whether label holds one of the lower-cased forms,
// with ASCII case folded (so that it holds for Folded too). A replacement
// must never write what it replaces.
func labelHoldsForm(label []byte, lowered [][]byte) bool {
	l := lowerASCII(label)
	for _, f := range lowered {
		if bytes.Contains(l, f) {
			return true
		}
	}
	return false
}

// lowerASCII is b with ASCII letters in lower case, in a new slice: the
// folding Folded matches with (bytes.ToLower also folds non-ASCII and
// rewrites invalid UTF-8).
func lowerASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// Folded returns a Scrubber with the same forms and labels that matches
// ASCII letters without regard to case, for text that was case-folded on
// its way (an HTTP header name: Go and HTTP/2 rewrite its case, so an echoed
// value in a name would escape an exact match). It matches more than the
// forms (any casing of each), which is its purpose. Built on first use, then
// shared; safe for concurrent use. Folded of a nil Scrubber is nil.
func (s *Scrubber) Folded() *Scrubber {
	if s == nil {
		return nil
	}
	if s.fold == nil { // already the folded one
		return s
	}
	s.fold.once.Do(func() {
		a := build(s.pats, true)
		s.fold.s = &Scrubber{names: s.names, labels: s.labels, pats: s.pats, a: a, forms: a.patterns, longest: s.longest}
	})
	return s.fold.s
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("the name is empty; name each secret")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == '[' || c == ']' {
			return fmt.Errorf("name %q: byte %d is not printable ASCII or is a bracket; a name is replaced into text as [secret:<name>]", name, i)
		}
	}
	return nil
}

// Names are the secrets' names in New's order.
func (s *Scrubber) Names() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.names...)
}

// Len is the number of distinct forms the Scrubber matches.
func (s *Scrubber) Len() int {
	if s == nil {
		return 0
	}
	return s.forms
}

// Longest is the length of the longest form; a Stream never holds more than
// Longest()-1 bytes.
func (s *Scrubber) Longest() int {
	if s == nil {
		return 0
	}
	return s.longest
}

// Bytes returns p with every form replaced, in a new slice. p is not
// modified. A nil Scrubber replaces nothing.
func (s *Scrubber) Bytes(p []byte) []byte {
	if s == nil || len(s.labels) == 0 {
		return append([]byte{}, p...)
	}
	c := newCursor()
	out, _ := s.a.scan(make([]byte, 0, len(p)), nil, p, &c, true, s.labels, nil)
	return out
}

// String is Bytes for a string. A string that holds no form is returned
// as it is, with no copy: most header values hold none.
func (s *Scrubber) String(v string) string {
	if s == nil || len(s.labels) == 0 || s.a.clean(unsafe.Slice(unsafe.StringData(v), len(v))) {
		return v
	}
	return string(s.Bytes([]byte(v)))
}

// Bound returns p scrubbed and then cut to at most n bytes, and whether
// anything was cut. Scrubbing comes first, so a form that straddles the cut
// is replaced whole before it. The cut never splits a label (it goes before
// one that would not fit) or a UTF-8 sequence. n < 0 counts as 0.
//
// Scrub first, then cut. Bound scrubs a whole buffer, then cuts the result
// (never inside a label or a UTF-8 sequence), so a form that straddles the
// cut was replaced whole before it. A body whose producer was stopped early
// (a read limit) ends with Stream.Discard rather than Flush: the held tail
// may be the first bytes of a form the stop split, and is dropped. What a
// cut cannot make whole is a form that was already partial in the input:
// that is a partial echo, not covered.
func (s *Scrubber) Bound(p []byte, n int) ([]byte, bool) {
	var out []byte
	var spans []int
	if s == nil || len(s.labels) == 0 {
		out = append([]byte{}, p...)
	} else {
		c := newCursor()
		out, _ = s.a.scan(make([]byte, 0, len(p)), nil, p, &c, true, s.labels, &spans)
	}
	n = max(n, 0)
	if len(out) <= n {
		return out, false
	}
	cut := n
	for _, at := range spans {
		if at >= cut {
			break
		}
		// The label that starts at at ends where "]" closes it.
		end := at + labelLen(out[at:])
		if end > cut {
			cut = at
			break
		}
	}
	// Back off to the start of a UTF-8 sequence the cut would split.
	for k := cut; k > 0 && k > cut-utf8.UTFMax; k-- {
		if utf8.RuneStart(out[k-1]) {
			if r, size := utf8.DecodeRune(out[k-1:]); r != utf8.RuneError || size > 1 {
				if k-1+size > cut {
					cut = k - 1
				}
			}
			break
		}
	}
	return out[:cut:cut], true
}

// labelLen is the length of the label at the start of p.
func labelLen(p []byte) int {
	for i, c := range p {
		if c == ']' {
			return i + 1
		}
	}
	return len(p)
}

// Stream scrubs one body that arrives in chunks. It is not safe for
// concurrent use.
//
// A Stream keeps the automaton state and the candidate between writes.
// After each Write it has emitted every byte that no continuation of the
// input can make part of a match, and holds exactly the rest: the longest
// tail, after the last replacement, that is a proper prefix of some form.
// A complete match inside that tail is held as well, while a longer form
// at the same start, or one starting earlier, could still complete. The
// held tail is never longer than Longest()-1 bytes and is never a fixed
// window: a server-sent event whose tail cannot begin a form comes out of
// the Write that brought it. Concatenated, the output of any chunking
// equals Bytes of the whole input.
//
// The minimal hold is an oracle: how much a Write emits tells whether the
// tail of the input begins a form, so a client that can make a streaming
// upstream echo bytes of its choosing, and watch where the answer pauses,
// could learn a value a byte at a time. A Stream from NewUniformStream
// closes that: besides what it must hold, it delays already-scrubbed output
// so that what it holds in all is the input's trailing run of printable
// bytes (0x20–0x7E), capped at Longest()-1 — a length that depends on the
// input's bytes only, never on the values. A newline, or any other byte
// outside that range, releases everything before it, so a server-sent event
// still leaves in the Write that brought it. The claim covers values whose
// forms are all printable (every Custodian value is); a form holding a
// control byte (an Effector secret file with a newline) can still be
// probed this way, and the Effector never streams an answer.
type Stream struct {
	s       *Scrubber
	held    []byte // input not yet decided
	c       cursor
	uniform bool   // see NewUniformStream
	pend    []byte // scrubbed output delayed for a uniform hold
}

// NewStream starts a stream that holds back exactly what it must (the
// minimal hold; see Stream).
func (s *Scrubber) NewStream() *Stream { return &Stream{s: s, c: newCursor()} }

// NewUniformStream starts a stream whose hold depends only on the input's
// bytes: for a stream an untrusted party watches chunk by chunk (the
// Custodian's responses). See Stream.
func (s *Scrubber) NewUniformStream() *Stream {
	st := &Stream{}
	s.ResetUniformStream(st)
	return st
}

// ResetUniformStream makes st a new uniform stream of s, as
// NewUniformStream returns, keeping the memory of its buffers (emptied):
// a host that carries many bodies one after another allocates none for
// the next. Nothing of st's last body is held or passed on.
func (s *Scrubber) ResetUniformStream(st *Stream) {
	st.Wipe()
	*st = Stream{s: s, c: newCursor(), uniform: true, held: st.held[:0], pend: st.pend[:0]}
}

// Wipe zeroes what st held and delayed and lets go of its scrubber: a
// stream kept idle for reuse holds no byte of its last body and keeps no
// value reachable. It then scrubs nothing until reset.
func (st *Stream) Wipe() {
	clear(st.held[:cap(st.held)])
	clear(st.pend[:cap(st.pend)])
	*st = Stream{c: newCursor(), held: st.held[:0], pend: st.pend[:0]}
}

// Write appends to dst the scrubbed bytes of p that can be passed on now and
// returns the extended slice. It holds back only a tail that is a proper
// prefix of some form. p is not retained; dst must not overlap p (a label
// can be longer than the form it replaces).
func (st *Stream) Write(dst, p []byte) []byte {
	if st.s == nil || len(st.s.labels) == 0 {
		return append(dst, p...)
	}
	start := len(dst)
	if st.uniform {
		dst = append(dst, st.pend...)
		st.pend = st.pend[:0]
	}
	dst, keep := st.s.a.scan(dst, st.held, p, &st.c, false, st.s.labels, nil)
	st.keep(p, keep)
	if st.uniform {
		dst = st.delay(dst, start)
	}
	return dst
}

// delay moves the end of dst[start:] into pend so that pend and held
// together are the input's trailing printable run, capped at Longest()-1.
func (st *Stream) delay(dst []byte, start int) []byte {
	h := len(st.held)
	out := dst[start:]
	run, i := 0, h-1
	for ; i >= 0 && printable(st.held[i]); i-- {
		run++
	}
	if i < 0 { // held is all printable: the run goes on into the output
		for j := len(out) - 1; j >= 0 && printable(out[j]); j-- {
			run++
		}
	}
	extra := min(run, st.s.longest-1) - h
	if extra <= 0 {
		return dst
	}
	st.pend = append(st.pend, out[len(out)-extra:]...)
	return dst[:len(dst)-extra]
}

func printable(c byte) bool { return c >= 0x20 && c <= 0x7e }

// keep makes (held+p)[keep:] the held tail. It is a proper prefix of a
// form, so the buffer stays below Longest() bytes whatever the chunk size.
func (st *Stream) keep(p []byte, keep int) {
	h := len(st.held)
	switch {
	case keep >= h:
		st.held = append(st.held[:0], p[keep-h:]...)
	default:
		st.held = append(st.held[:copy(st.held, st.held[keep:])], p...)
	}
}

// Flush appends the held tail, scrubbed, to dst at the end of the stream.
// The Stream is then empty and may carry another body.
func (st *Stream) Flush(dst []byte) []byte {
	dst = append(dst, st.pend...)
	st.pend = st.pend[:0]
	if st.s == nil || len(st.s.labels) == 0 {
		dst = append(dst, st.held...)
	} else {
		dst, _ = st.s.a.scan(dst, st.held, nil, &st.c, true, st.s.labels, nil)
	}
	st.held = st.held[:0]
	return dst
}

// Discard ends a body that was cut short (a read limit reached before its
// end): the held tail, which may be the first bytes of a form the cut split,
// is dropped rather than flushed. It returns how many bytes were dropped.
// The Stream is then empty and may carry another body.
func (st *Stream) Discard() int {
	n := len(st.held) + len(st.pend)
	st.held = st.held[:0]
	st.pend = st.pend[:0]
	st.c = newCursor()
	return n
}

// Held is how many bytes the stream holds back now: input not yet decided,
// and (a uniform stream) scrubbed output it delays.
func (st *Stream) Held() int { return len(st.held) + len(st.pend) }
