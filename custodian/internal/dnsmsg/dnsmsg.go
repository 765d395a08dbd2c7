// Package dnsmsg reads the DNS queries a contained child sends to the
// mediator and writes the mediator's answers: every A question is answered
// with the mediator's own address, every other question with NOERROR and no
// answer, so a client falls back to A and then names its destination again,
// in the TLS ClientHello or the Host header, where the mediator decides.
//
// Invariant: a Query returned without error has a Name that passed
// contract.CheckName (lowercase, LDH plus '_'), so no byte the child chose
// reaches policy, a log line or a record unless it is a valid host name. The
// parser reads only the header and the one question, bounds every read by
// the message, follows compression pointers only backwards and at most
// MaxPointers times, and refuses a name longer than 255 bytes on the wire.
//
// ErrorReply says what a message that cannot be answered gets.
package dnsmsg

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"jr2.dev/boundary/internal/contract"
)

// Limits of the parser.
const (
	HeaderLen   = 12
	MaxWireName = 255 // RFC 1035 §3.1, length bytes and the root included
	MaxPointers = 16  // compression pointers followed in one name
)

// Types, classes and response codes used here.
const (
	TypeA    uint16 = 1
	TypeAAAA uint16 = 28
	ClassIN  uint16 = 1

	RcodeNoError  = 0
	RcodeFormErr  = 1
	RcodeNotImp   = 4
	RcodeRefused  = 5
	rcodeDrop     = -1
	flagQR        = 1 << 15
	flagAA        = 1 << 10
	flagRD        = 1 << 8
	flagRA        = 1 << 7
	opcodeShift   = 11
	opcodeMask    = 0xF
	answerTTL     = 60
	pointerPrefix = 0xC0
)

// Query is a parsed question.
type Query struct {
	ID    uint16
	RD    bool   // recursion desired, echoed
	Name  string // lowercase, checked; "" when the parse failed before or at it
	Type  uint16
	Class uint16
	// question is the question as it came (name uncompressed, case kept,
	// type and class), echoed in replies; nil when it could not be read.
	question []byte
	opcode   uint16 // echoed in a NOTIMP reply
}

// Error is why a message gets no answer of its own. Reason is one word,
// safe for a log line and a record.
type Error struct {
	Rcode  int // RcodeFormErr, RcodeNotImp, RcodeRefused, or -1: no reply
	Reason string
}

func (e *Error) Error() string { return "dns: " + e.Reason }

func fail(rcode int, reason string) *Error { return &Error{Rcode: rcode, Reason: reason} }

// Parse reads a query. On error the Query holds what was read before the
// fault (ID, RD, and the question when only the name was refused) so that
// ErrorReply can answer it.
func Parse(msg []byte) (Query, error) {
	var q Query
	if len(msg) < HeaderLen {
		return q, fail(rcodeDrop, "short")
	}
	q.ID = binary.BigEndian.Uint16(msg[0:])
	flags := binary.BigEndian.Uint16(msg[2:])
	q.RD = flags&flagRD != 0
	q.opcode = (flags >> opcodeShift) & opcodeMask
	switch {
	case flags&flagQR != 0:
		return q, fail(rcodeDrop, "response")
	case q.opcode != 0:
		return q, fail(RcodeNotImp, "opcode")
	case binary.BigEndian.Uint16(msg[4:]) != 1:
		return q, fail(RcodeFormErr, "qdcount")
	}
	labels, wire, end, perr := readName(msg, HeaderLen)
	if perr != nil {
		return q, perr
	}
	if end+4 > len(msg) {
		return q, fail(RcodeFormErr, "truncated")
	}
	q.Type = binary.BigEndian.Uint16(msg[end:])
	q.Class = binary.BigEndian.Uint16(msg[end+2:])
	q.question = append(wire, msg[end:end+4]...)
	name, ok := hostName(labels)
	if !ok {
		return q, fail(RcodeRefused, "invalid-name")
	}
	q.Name = name
	return q, nil
}

// readName reads the name at off. It returns the labels, the name in
// uncompressed wire form, and the offset just past the name where it
// started (past its first pointer, if any).
func readName(msg []byte, off int) (labels [][]byte, wire []byte, end int, err *Error) {
	end = -1
	limit := off // a pointer must point before the name part it continues
	pointers := 0
	wire = make([]byte, 0, 64)
	for {
		if off >= len(msg) {
			return nil, nil, 0, fail(RcodeFormErr, "truncated")
		}
		c := int(msg[off])
		switch c & pointerPrefix {
		case 0:
		case pointerPrefix:
			if off+1 >= len(msg) {
				return nil, nil, 0, fail(RcodeFormErr, "truncated")
			}
			target := int(binary.BigEndian.Uint16(msg[off:]) & 0x3FFF)
			if end < 0 {
				end = off + 2
			}
			pointers++
			switch {
			case pointers > MaxPointers:
				return nil, nil, 0, fail(RcodeFormErr, "pointer-limit")
			case target < HeaderLen || target >= limit:
				return nil, nil, 0, fail(RcodeFormErr, "pointer-loop")
			}
			off, limit = target, target
			continue
		default:
			return nil, nil, 0, fail(RcodeFormErr, "label-type")
		}
		if len(wire)+1+c > MaxWireName {
			return nil, nil, 0, fail(RcodeFormErr, "name-too-long")
		}
		if c == 0 {
			wire = append(wire, 0)
			if end < 0 {
				end = off + 1
			}
			return labels, wire, end, nil
		}
		if off+1+c > len(msg) {
			return nil, nil, 0, fail(RcodeFormErr, "truncated")
		}
		label := msg[off+1 : off+1+c]
		wire = append(wire, msg[off:off+1+c]...)
		labels = append(labels, label)
		off += 1 + c
	}
}

// hostName joins the labels into a lowercase name and checks it. A label
// holding a '.' is refused before joining, where it would pass as two.
func hostName(labels [][]byte) (string, bool) {
	n := 0
	for _, l := range labels {
		for _, c := range l {
			if c == '.' {
				return "", false
			}
		}
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	for i, l := range labels {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, l...)
	}
	name := contract.Lower(string(b))
	if contract.CheckName(name) != nil {
		return "", false
	}
	return name, true
}

// Answer builds the reply to q: for an A question of class IN, one A record
// holding addr; for any other, NOERROR with no answer. addr must be IPv4.
// Sections after the question (an EDNS OPT record, for one) are ignored;
// the answers carry no OPT, which EDNS clients accept (RFC 6891 §7).
func Answer(q Query, addr netip.Addr) ([]byte, error) {
	if !addr.Is4() {
		return nil, fmt.Errorf("dns: the mediator's address %s is not IPv4", addr)
	}
	if q.question == nil {
		return nil, fmt.Errorf("dns: no question to answer")
	}
	answers := 0
	if q.Type == TypeA && q.Class == ClassIN {
		answers = 1
	}
	msg := header(q, RcodeNoError, answers, 16+len(q.question))
	if answers == 1 {
		a := addr.As4()
		msg = binary.BigEndian.AppendUint16(msg, pointerPrefix<<8|HeaderLen) // the question's name
		msg = binary.BigEndian.AppendUint16(msg, TypeA)
		msg = binary.BigEndian.AppendUint16(msg, ClassIN)
		msg = binary.BigEndian.AppendUint32(msg, answerTTL)
		msg = binary.BigEndian.AppendUint16(msg, 4)
		msg = append(msg, a[:]...)
	}
	return msg, nil
}

// ErrorReply builds the reply to a message Parse refused with err, or nil
// when the message gets none.
//
//   - Shorter than a header, or a response (QR set): no reply. Answering a
//     response could make two resolvers answer each other forever.
//   - An opcode other than QUERY: NOTIMP.
//   - Not exactly one question, a question cut short, a bad label type, a
//     pointer loop or a name too long: FORMERR, without a question.
//   - A well-formed name that is not a host name (a byte outside LDH and
//     '_', an all-digit last label, the root): REFUSED, echoing the
//     question, which stub resolvers need to match the reply to the query.
func ErrorReply(q Query, err error) []byte {
	e, ok := err.(*Error)
	if !ok || e.Rcode == rcodeDrop {
		return nil
	}
	if e.Rcode != RcodeRefused {
		q.question = nil
	}
	return header(q, e.Rcode, 0, 0)
}

// header starts a reply to q with the question echoed (when q has one).
func header(q Query, rcode, answers, extra int) []byte {
	msg := make([]byte, HeaderLen, HeaderLen+len(q.question)+extra)
	binary.BigEndian.PutUint16(msg[0:], q.ID)
	flags := uint16(flagQR|flagAA|flagRA|rcode) | q.opcode<<opcodeShift
	if q.RD {
		flags |= flagRD
	}
	binary.BigEndian.PutUint16(msg[2:], flags)
	if q.question != nil {
		binary.BigEndian.PutUint16(msg[4:], 1)
		msg = append(msg, q.question...)
	}
	binary.BigEndian.PutUint16(msg[6:], uint16(answers))
	return msg
}
