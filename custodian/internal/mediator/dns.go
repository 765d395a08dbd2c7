package mediator

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"jr2.dev/boundary/custodian/internal/dnsmsg"
	"jr2.dev/boundary/internal/bundle"
)

// maxDNS bounds one DNS message read, UDP or TCP.
const maxDNS = 4096

// serveDNS answers the UDP questions on pc until it is closed.
func (m *Mediator) serveDNS(pc net.PacketConn) {
	buf := make([]byte, maxDNS)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if reply := m.answerDNS(buf[:n], "udp"); reply != nil {
			pc.WriteTo(reply, from)
		}
	}
}

// serveDNSConn answers DNS over TCP (RFC 7766: each message behind its
// two-byte length) until the client stops asking.
func (m *Mediator) serveDNSConn(c net.Conn) {
	defer m.conns.Forget(c)
	defer c.Close()
	var size [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(m.o.HandshakeTimeout))
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(size[:]))
		if n > maxDNS {
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		reply := m.answerDNS(msg, "tcp")
		if reply == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reply)), uint16(len(reply)))
		if _, err := c.Write(append(out, reply...)); err != nil {
			return
		}
	}
}

// answerDNS records one question and its answer, and returns the reply
// (nil: none). Every A question of class IN is answered with the
// mediator's address, whatever the name; the policy decides where the
// child then connects. A name that holds a form of a held value is
// recorded with the value's label in its place ("scrubbed") and refused.
// A question that cannot be recorded is not answered.
func (m *Mediator) answerDNS(msg []byte, transport string) []byte {
	q, perr := dnsmsg.Parse(msg)
	name, scrubbed := m.scrubName(q.Name)
	rec := dnsQuery{Name: name, Type: typeName(q.Type), Transport: transport, Scrubbed: scrubbed}
	var reply []byte
	dec := dnsDecision{Name: name, Type: rec.Type, Rcode: "NOERROR", Scrubbed: scrubbed}
	switch {
	case perr == nil && scrubbed:
		dec.Rcode, dec.Reason = rcodeName(dnsmsg.RcodeRefused), ruleValueInName
		reply = dnsmsg.ErrorReply(q, &dnsmsg.Error{Rcode: dnsmsg.RcodeRefused, Reason: ruleValueInName})
	case perr != nil:
		var de *dnsmsg.Error
		rec.Error, dec.Rcode = "malformed", "none"
		if errors.As(perr, &de) {
			rec.Error = de.Reason
			dec.Rcode = rcodeName(de.Rcode)
		}
		reply = dnsmsg.ErrorReply(q, perr)
	default:
		var err error
		if reply, err = dnsmsg.Answer(q, m.o.Addr); err != nil {
			return nil
		}
		if q.Type == dnsmsg.TypeA && q.Class == dnsmsg.ClassIN {
			dec.Answer = m.o.Addr.String()
		}
	}
	seq, err := m.record(bundle.KindDNSQuery, rec)
	if err != nil {
		return nil
	}
	dec.Query = seq
	if scrubbed {
		m.recordDenial(bundle.KindDNSDecision, dec)
		return reply // refused whether or not its record was written
	}
	if _, err := m.record(bundle.KindDNSDecision, dec); err != nil {
		return nil
	}
	return reply
}

func typeName(t uint16) string {
	switch t {
	case 0:
		return ""
	case dnsmsg.TypeA:
		return "A"
	case dnsmsg.TypeAAAA:
		return "AAAA"
	case 5:
		return "CNAME"
	case 12:
		return "PTR"
	case 15:
		return "MX"
	case 16:
		return "TXT"
	case 33:
		return "SRV"
	case 65:
		return "HTTPS"
	}
	return "TYPE" + strconv.Itoa(int(t))
}

func rcodeName(rc int) string {
	switch rc {
	case dnsmsg.RcodeFormErr:
		return "FORMERR"
	case dnsmsg.RcodeNotImp:
		return "NOTIMP"
	case dnsmsg.RcodeRefused:
		return "REFUSED"
	case dnsmsg.RcodeNoError:
		return "NOERROR"
	}
	return "none"
}
