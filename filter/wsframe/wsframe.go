// Package wsframe reads the WebSocket frames (RFC 6455) an upstream sends
// on a connection the Custodian upgraded, and writes them on toward the
// agent with every held value scrubbed from their payloads. It knows no
// host: custodian serve's relay and the Envoy stream machine feed it the
// upstream's bytes in whatever chunks they arrive.
//
// # Invariant
//
// In any chunking of any input, the output is well-formed frames (FIN,
// opcode, the shortest length form, unmasked) carrying the upstream's
// messages in order, each text or binary message scrubbed as one stream
// across its frames and chunks (the scrubber holds back the tail that
// could begin a value, as a response body's does), every control frame's
// payload scrubbed (a close frame's reason, a ping's or pong's payload).
// A label that changes a length re-frames the payload; fragmentation may
// change (an intermediary may refragment, RFC 6455 section 5.4, and no
// extension was negotiated), the messages may not. Framing that does not
// read — a masked frame, a reserved bit or opcode, a fragmented or long
// control frame, a length not in its shortest form or with its top bit
// set, a continuation with no message or a message inside a message —
// ends the stream: nothing of the upstream's passes after it, only the
// Custodian's own close frame (CloseMalformed).
//
// Not covered: frames the agent sends are not read here; they pass
// unchanged (a stand-in in a frame is not swapped; values ride headers
// only).
package wsframe

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"

	"jr2.dev/boundary/filter/scrub"
)

// Opcodes (RFC 6455 section 5.2).
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// DefaultMax is the message size held whole when the config names none.
const DefaultMax = 1 << 20

// maxControl is the longest control payload (RFC 6455 section 5.5).
const maxControl = 125

// ErrMalformed reports upstream framing that does not read. The words are
// fixed: nothing of the frames is in them.
var ErrMalformed = errors.New("the upstream's WebSocket frames could not be read")

// CloseReason is the reason of the Custodian's own close frame after
// malformed framing; its code is 1002 (protocol error).
const CloseReason = "jr2 custodian: the upstream's WebSocket frames could not be read"

// Scrubber scrubs one upstream-to-agent WebSocket byte stream. Not safe
// for concurrent use; one per connection.
type Scrubber struct {
	sc  *scrub.Scrubber
	max int
	err error

	hdr  [10]byte // the frame header read so far
	hn   int      // bytes of hdr read
	in   bool     // a frame's payload is being read
	op   byte     // the frame's opcode
	fin  bool     // the frame's FIN
	left uint64   // payload bytes of the frame still to read
	ctrl []byte   // a control frame's payload so far

	msgOp   byte          // the message in progress: OpText or OpBinary, 0 when none
	started bool          // a fragment of the message went out already
	held    int           // bytes of the message read while it is held whole
	st      *scrub.Stream // the message's scrubber
	pending []byte        // scrubbed bytes of the message not yet framed
	closed  bool          // a close frame went out: nothing more does
}

// New returns a Scrubber that replaces every value sc holds, holding
// messages of up to max bytes whole (max <= 0: DefaultMax). A message of
// up to max bytes (as the upstream sent it) goes as one frame of its
// scrubbed length; beyond that the message goes on in fragments as it
// arrives, scrubbed in a sliding window as a body is.
func New(sc *scrub.Scrubber, max int) *Scrubber {
	if max <= 0 {
		max = DefaultMax
	}
	return &Scrubber{sc: sc, max: max}
}

// Write appends to dst the frames that can go to the agent now of the
// upstream's chunk p. On malformed framing it appends the Custodian's
// close frame (1002, CloseReason) and returns ErrMalformed; every later
// Write returns ErrMalformed and appends nothing. After a close frame went
// out, the upstream's further bytes are dropped.
func (s *Scrubber) Write(dst, p []byte) ([]byte, error) {
	if s.err != nil {
		return dst, s.err
	}
	for len(p) > 0 && !s.closed {
		if !s.in {
			var err error
			p, err = s.header(p)
			if err != nil {
				return s.fail(dst)
			}
			if !s.in {
				continue // the header is not whole yet (p is empty)
			}
			if s.left == 0 {
				if dst = s.endFrame(dst); s.err != nil {
					return dst, s.err
				}
				continue
			}
		}
		n := len(p)
		if uint64(n) > s.left {
			n = int(s.left)
		}
		chunk := p[:n]
		p = p[n:]
		s.left -= uint64(n)
		if s.op >= OpClose {
			s.ctrl = append(s.ctrl, chunk...)
		} else {
			s.pending = s.st.Write(s.pending, chunk)
			s.held += n
			if s.held > s.max || len(s.pending) > s.max {
				// Beyond the hold: what is scrubbed goes on now, as a
				// fragment; the scrubber keeps only its tail.
				dst = s.fragment(dst, false)
			}
		}
		if s.left == 0 {
			if dst = s.endFrame(dst); s.err != nil {
				return dst, s.err
			}
		}
	}
	return dst, nil
}

// Close releases the message scrubber when the connection ends early.
func (s *Scrubber) Close() {
	if s.st != nil {
		s.st.Discard()
		s.st = nil
	}
	clear(s.pending)
	s.pending = nil
}

func (s *Scrubber) fail(dst []byte) ([]byte, error) {
	s.err = ErrMalformed
	s.Close()
	return CloseFrame(dst, 1002, CloseReason), s.err
}

// header reads frame header bytes from p; once it is whole it is checked
// and s.in set. It returns what follows the header in p.
func (s *Scrubber) header(p []byte) ([]byte, error) {
	need := 2
	for {
		if s.hn >= 2 {
			if s.hdr[1]&0x80 != 0 {
				return nil, ErrMalformed // a server never masks (RFC 6455 section 5.1)
			}
			switch s.hdr[1] & 0x7f {
			case 126:
				need = 4
			case 127:
				need = 10
			default:
				need = 2
			}
		}
		if s.hn >= need {
			break
		}
		if len(p) == 0 {
			return p, nil
		}
		k := min(need-s.hn, len(p))
		copy(s.hdr[s.hn:], p[:k])
		s.hn += k
		p = p[k:]
	}
	b0, b1 := s.hdr[0], s.hdr[1]
	s.hn = 0
	fin, op := b0&0x80 != 0, b0&0x0f
	if b0&0x70 != 0 {
		return nil, ErrMalformed // a reserved bit: no extension was negotiated
	}
	var n uint64
	switch l := b1 & 0x7f; l {
	case 126:
		n = uint64(binary.BigEndian.Uint16(s.hdr[2:4]))
		if n < 126 {
			return nil, ErrMalformed
		}
	case 127:
		n = binary.BigEndian.Uint64(s.hdr[2:10])
		if n>>63 != 0 || n <= 0xffff {
			return nil, ErrMalformed
		}
	default:
		n = uint64(l)
	}
	switch op {
	case OpClose, OpPing, OpPong:
		if !fin || n > maxControl {
			return nil, ErrMalformed
		}
		s.ctrl = s.ctrl[:0]
	case OpText, OpBinary:
		if s.msgOp != 0 {
			return nil, ErrMalformed // a message inside a message
		}
		s.msgOp, s.started, s.held = op, false, 0
		s.st = s.sc.NewUniformStream()
	case OpContinuation:
		if s.msgOp == 0 {
			return nil, ErrMalformed
		}
	default:
		return nil, ErrMalformed // a reserved opcode
	}
	s.op, s.fin, s.left, s.in = op, fin, n, true
	return p, nil
}

// endFrame finishes the frame whose payload was read whole.
func (s *Scrubber) endFrame(dst []byte) []byte {
	s.in = false
	switch s.op {
	case OpClose:
		payload := s.ctrl
		if len(payload) >= 2 {
			reason, _ := s.sc.Bound(payload[2:], maxControl-2)
			payload = append(append(make([]byte, 0, 2+len(reason)), payload[:2]...), validUTF8Prefix(reason)...)
		} else if len(payload) == 1 {
			s.err = ErrMalformed
			s.Close()
			return CloseFrame(dst, 1002, CloseReason)
		}
		dst = appendFrame(dst, true, OpClose, payload)
		s.closed = true
		s.Close()
	case OpPing, OpPong:
		payload, _ := s.sc.Bound(s.ctrl, maxControl)
		dst = appendFrame(dst, true, s.op, payload)
	default:
		if s.fin {
			s.pending = s.st.Flush(s.pending)
			dst = s.fragment(dst, true)
			s.msgOp, s.st = 0, nil
		}
	}
	return dst
}

// fragment frames what is pending of the message: the whole message when
// fin and nothing went before, else a fragment of it.
func (s *Scrubber) fragment(dst []byte, fin bool) []byte {
	op := byte(OpContinuation)
	if !s.started {
		op = s.msgOp
	}
	dst = appendFrame(dst, fin, op, s.pending)
	s.started = true
	clear(s.pending)
	s.pending = s.pending[:0]
	return dst
}

// validUTF8Prefix cuts an incomplete UTF-8 sequence off the end of b.
func validUTF8Prefix(b []byte) []byte {
	for k := len(b); k > 0 && k > len(b)-utf8.UTFMax; k-- {
		if utf8.RuneStart(b[k-1]) {
			if !utf8.FullRune(b[k-1:]) {
				return b[:k-1]
			}
			break
		}
	}
	return b
}

// appendFrame appends one unmasked frame, its length in the shortest form.
func appendFrame(dst []byte, fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	switch n := len(payload); {
	case n < 126:
		dst = append(dst, b0, byte(n))
	case n <= 0xffff:
		dst = append(dst, b0, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, b0, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, payload...)
}

// CloseFrame appends a close frame of code and reason (at most 123 bytes,
// fixed text) to dst: the Custodian's own, sent when it ends a connection.
func CloseFrame(dst []byte, code uint16, reason string) []byte {
	p := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reason)), code)
	return appendFrame(dst, true, OpClose, append(p, reason...))
}
