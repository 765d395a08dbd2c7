// Package scrub replaces every form of every held secret with
// "[secret:<name>]", in whole strings and in streams cut at any byte.
//
// Invariant: no form of a held value (see Forms and ../../../shared/spec/scrub.md)
// leaves a Scrubber or a Stream, whole or in part, in any chunking of the
// input; text that holds no form comes out byte-identical.
//
// PLACEHOLDER: this file fixes the API; the implementation is being
// written (forms, one automaton, streaming). Do not depend on anything but
// the exported names below.
package scrub

import (
	"bytes"
	"errors"
	"fmt"
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
	pats  [][]byte
	names []string
}

// New builds a Scrubber over every form of every secret. A Value shorter
// than MinLen is refused, naming the secret; a Built string shorter than
// MinLen is ignored (it cannot be matched safely).
func New(secrets []Secret) (*Scrubber, error) {
	s := &Scrubber{}
	for _, sec := range secrets {
		if len(sec.Value) < MinLen {
			return nil, fmt.Errorf("secret %s: the value is shorter than %d bytes; a value that short would match ordinary text", sec.Name, MinLen)
		}
		s.pats = append(s.pats, sec.Value)
		s.names = append(s.names, sec.Name)
	}
	if len(secrets) == 0 {
		return s, nil
	}
	return s, nil
}

// Bytes returns p with every form replaced. p is not modified.
func (s *Scrubber) Bytes(p []byte) []byte {
	out := append([]byte(nil), p...)
	for i, pat := range s.pats {
		out = bytes.ReplaceAll(out, pat, []byte("[secret:"+s.names[i]+"]"))
	}
	return out
}

// String is Bytes for a string.
func (s *Scrubber) String(v string) string { return string(s.Bytes([]byte(v))) }

// Stream scrubs one body that arrives in chunks.
type Stream struct {
	s    *Scrubber
	held []byte
}

// NewStream starts a stream.
func (s *Scrubber) NewStream() *Stream { return &Stream{s: s} }

// Write appends to dst the scrubbed bytes of p that can be passed on now and
// returns the extended slice. It holds back only a tail that is a proper
// prefix of some form. p is not retained.
func (st *Stream) Write(dst, p []byte) []byte {
	st.held = append(st.held, p...)
	return dst
}

// Flush appends the held tail, scrubbed, to dst at the end of the stream.
func (st *Stream) Flush(dst []byte) []byte {
	dst = append(dst, st.s.Bytes(st.held)...)
	st.held = nil
	return dst
}

// Held is how many bytes the stream holds back now.
func (st *Stream) Held() int { return len(st.held) }

var errUnused = errors.New("unused")
