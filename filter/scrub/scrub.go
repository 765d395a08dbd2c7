// Package scrub replaces every form of every held secret with
// "[secret:<name>]", in whole strings and in streams cut at any byte.
//
// Invariant: no form of a held value (see Forms and
// ../../../shared/spec/scrub.md) that is whole in the input leaves a
// Scrubber or a Stream, in any chunking of the input, whole or in part; text
// that holds no form comes out byte-identical. Nothing here logs, and no
// error holds a value byte.
//
// # Forms
//
// A Secret's Value and each of its Built strings are expanded by Forms into
// patterns. For a string V, read as its bytes and, when V is not valid
// UTF-8, also as the text a decoder makes of it (U+FFFD per invalid byte, as
// Go does, and per maximal invalid subpart, as WHATWG and Python do), the
// forms are:
//
//   - V itself;
//   - base64 in the standard and URL alphabets, padded and not, of V alone,
//     and the three shifted forms in each alphabet: the characters that carry
//     only V's bits when a server encodes a longer string with V at byte
//     offset 0, 1 or 2 of a 3-byte group (see base64Forms for the
//     arithmetic);
//   - percent-encoding in each spelling of percentSpellings (RFC 3986
//     unreserved only, Python quote, encodeURIComponent, encodeURI, a path
//     segment's characters, Go's PathEscape, EscapedPath and QueryEscape, the
//     WHATWG/Java form encoding, PHP urlencode, .NET UrlEncode), each in
//     upper- and lower-case hex, and the same spellings of each base64 form
//     (a base64 token in a url);
//   - hex, lower and upper case;
//   - the JSON string spellings of each of the above: "/" as "\/" or not,
//     "<>&" as "\u003c"… or not, non-ASCII as "\uXXXX" (UTF-16 pairs) or raw,
//     DEL as "\u007f" or raw, "\b" "\f" or "\u0008" "\u000c", "\n" "\r" "\t"
//     or "\u000a"…, U+2028/U+2029 escaped or raw, "\u" hex in either case; a
//     byte that is not UTF-8 as "\ufffd" (Go).
//
// Not covered (the claim is about these forms only): a hash, a truncation or
// a partial echo of a value, mixed-case hex in one percent string, base64
// with line breaks, encodings not listed, nested encodings beyond the two
// above, and a Built string shorter than MinLen (ignored).
//
// # Matching
//
// All patterns of all secrets are compiled into one Aho–Corasick automaton
// (see automaton). A scan replaces, left to right and without overlap, the
// longest match at the leftmost position; each match becomes the label of
// the secret whose form it is (the first secret in New's order when two
// share a form). There is no cap on the number of matches.
//
// When two forms overlap in the input, the one at the leftmost start (the
// longest there) is replaced and scanning resumes after it: what is left of
// the other is no longer whole. In real bodies forms of distinct values do
// not overlap; the residual is stated, not hidden.
//
// # Streaming
//
// A Stream keeps the scan's state between writes. After each Write it has
// emitted every byte that no continuation of the input can make part of a
// match, and holds back exactly the tail that is still a proper prefix of
// some form (starting where the earliest match that could still complete
// would start). A complete match found there is held too while a longer
// form at the same start, or an earlier-starting one, could still complete.
// The held tail is never longer than the longest form less one byte. The
// output of any chunking, concatenated, equals Bytes of the whole input, so
// no output ever holds part of a form that is later replaced.
//
// # Bounds
//
// Scrub first, then cut: Bound scrubs a whole buffer and cuts the result,
// so a form that straddles the cut was replaced before it. A body whose
// producer stopped early (a read limit reached) ends with Stream.Discard,
// which drops the held tail: the stop may have split a form there. What a
// cut cannot undo is a partial form that was already partial in the input.
//
// # Labels
//
// A label is "[secret:" + name + "]". New refuses a name whose label holds
// a form of any held value. Forms that hold "[" or "]" (V itself and its
// JSON spellings, when V holds a bracket) could be completed by a label
// next to them; for values without brackets the output holds no form at
// all, so scrubbing is idempotent.
package scrub

import (
	"fmt"
	"unicode/utf8"
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
	a       *automaton
	forms   int // distinct patterns
	longest int // longest pattern
}

// New builds a Scrubber over every form of every secret. A Value shorter
// than MinLen is refused, naming the secret; a Built string shorter than
// MinLen is ignored (it cannot be matched safely). A name must be 1 or more
// bytes of printable ASCII without "[", "]" or a space, and its label must
// hold no form of any value. Errors name the secret, never a value byte.
// New(nil) is a Scrubber that replaces nothing.
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
	s.a = build(pats)
	s.forms = s.a.patterns
	for i, l := range s.labels {
		var spans []int
		c := newCursor()
		s.a.scan(nil, nil, l, &c, true, s.labels, &spans)
		if len(spans) > 0 {
			// The label is the name, and the name may be the value: name
			// the secret by its place only.
			return nil, fmt.Errorf("secrets[%d]: its label would hold a form of a held value; give the secret another name", i)
		}
	}
	return s, nil
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

// String is Bytes for a string.
func (s *Scrubber) String(v string) string {
	if s == nil || len(s.labels) == 0 {
		return v
	}
	return string(s.Bytes([]byte(v)))
}

// Bound returns p scrubbed and then cut to at most n bytes, and whether
// anything was cut. Scrubbing comes first, so a form that straddles the cut
// is replaced whole before it. The cut never splits a label (it goes before
// one that would not fit) or a UTF-8 sequence. n < 0 counts as 0.
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
type Stream struct {
	s    *Scrubber
	held []byte
	c    cursor
}

// NewStream starts a stream.
func (s *Scrubber) NewStream() *Stream { return &Stream{s: s, c: newCursor()} }

// Write appends to dst the scrubbed bytes of p that can be passed on now and
// returns the extended slice. It holds back only a tail that is a proper
// prefix of some form. p is not retained.
func (st *Stream) Write(dst, p []byte) []byte {
	if st.s == nil || len(st.s.labels) == 0 {
		return append(dst, p...)
	}
	dst, keep := st.s.a.scan(dst, st.held, p, &st.c, false, st.s.labels, nil)
	st.keep(p, keep)
	return dst
}

// keep makes (held+p)[keep:] the held tail.
func (st *Stream) keep(p []byte, keep int) {
	h := len(st.held)
	switch {
	case keep >= h:
		st.held = append(st.held[:0], p[keep-h:]...)
	default:
		st.held = append(st.held[:copy(st.held, st.held[keep:])], p...)
	}
	// A large chunk leaves a large buffer behind; the tail is small.
	if cap(st.held) > 4096 && len(st.held) <= 1024 {
		st.held = append([]byte(nil), st.held...)
	}
}

// Flush appends the held tail, scrubbed, to dst at the end of the stream.
// The Stream is then empty and may carry another body.
func (st *Stream) Flush(dst []byte) []byte {
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
	n := len(st.held)
	st.held = st.held[:0]
	st.c = newCursor()
	return n
}

// Held is how many bytes the stream holds back now.
func (st *Stream) Held() int { return len(st.held) }
