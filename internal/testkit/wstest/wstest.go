// Package wstest is a WebSocket upstream and client for tests (RFC 6455,
// written here: the module has no WebSocket dependency). The upstream
// echoes the value it got in a header inside every kind of frame, so a
// test through the Custodian can check that the agent reads the label each
// time while the upstream got the value, and records the agent's frames
// byte for byte.
//
// Invariant: test code only; nothing outside _test.go files and test
// helpers imports it.
package wstest

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Opcodes.
const (
	OpCont   = 0x0
	OpText   = 0x1
	OpBinary = 0x2
	OpClose  = 0x8
	OpPing   = 0x9
	OpPong   = 0xA
)

// Seen is what the upstream received.
type Seen struct {
	mu         sync.Mutex
	value      string // the header's value on the last upgrade
	extensions bool   // the last upgrade offered an extension
	raw        []byte // the agent's frames, as they arrived
	upgrades   int
}

// Value, Extensions, Raw and Upgrades read Seen.
func (s *Seen) Value() string    { s.mu.Lock(); defer s.mu.Unlock(); return s.value }
func (s *Seen) Extensions() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.extensions }
func (s *Seen) Raw() []byte      { s.mu.Lock(); defer s.mu.Unlock(); return append([]byte(nil), s.raw...) }
func (s *Seen) Upgrades() int    { s.mu.Lock(); defer s.mu.Unlock(); return s.upgrades }

// Accept is the Sec-WebSocket-Accept of key.
func Accept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// Frame is one frame; mask (4 bytes) masks it, as a client must.
func Frame(fin bool, op byte, payload, mask []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var m byte
	if mask != nil {
		m = 0x80
	}
	var b []byte
	switch n := len(payload); {
	case n < 126:
		b = append(b, b0, m|byte(n))
	case n <= 0xffff:
		b = append(b, b0, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, b0, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if mask == nil {
		return append(b, payload...)
	}
	b = append(b, mask...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// ClosePayload is a close frame's payload.
func ClosePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

// Msg is one message (fragments joined) or control frame read.
type Msg struct {
	Op      byte
	Payload string
}

// ReadMsg reads the next message or control frame from r (unmasking a
// masked frame), and appends the raw bytes it read to *raw when raw is
// not nil.
func ReadMsg(r io.Reader, raw *[]byte) (Msg, error) {
	var m Msg
	started := false
	for {
		var h [2]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return m, err
		}
		rec := append([]byte(nil), h[:]...)
		fin, op, n := h[0]&0x80 != 0, h[0]&0x0f, uint64(h[1]&0x7f)
		switch n {
		case 126:
			var e [2]byte
			if _, err := io.ReadFull(r, e[:]); err != nil {
				return m, err
			}
			rec = append(rec, e[:]...)
			n = uint64(binary.BigEndian.Uint16(e[:]))
		case 127:
			var e [8]byte
			if _, err := io.ReadFull(r, e[:]); err != nil {
				return m, err
			}
			rec = append(rec, e[:]...)
			n = binary.BigEndian.Uint64(e[:])
		}
		if n > 64<<20 {
			return m, errors.New("wstest: a frame over 64 MiB")
		}
		var mask []byte
		if h[1]&0x80 != 0 {
			mask = make([]byte, 4)
			if _, err := io.ReadFull(r, mask); err != nil {
				return m, err
			}
			rec = append(rec, mask...)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return m, err
		}
		rec = append(rec, p...)
		if raw != nil {
			*raw = append(*raw, rec...)
		}
		for i := range p {
			if mask != nil {
				p[i] ^= mask[i%4]
			}
		}
		if op >= OpClose {
			return Msg{op, string(p)}, nil
		}
		if !started {
			m.Op, started = op, true
		}
		m.Payload += string(p)
		if fin {
			return m, nil
		}
	}
}

// Handler is the upstream: it answers a WebSocket upgrade with 101 (the
// accept of its key) and plays by the query's mode, echoing the value of
// header (canonical name) in each frame:
//
//   - "" (the script): a text frame "text:<v>"; a binary frame
//     "\x00bin:<v>"; "frag:<v>" in three fragments with a ping "ping:<v>"
//     between the first two; "chunks:<v>" written a byte at a time (each
//     its own TLS record); then each agent message echoed back as a text
//     "echo:<payload>" until the agent's close, answered with close 1000
//     "bye <v>".
//   - "deflate": the 101 selects permessage-deflate, then "text:<v>".
//   - "masked": a masked text frame "text:<v>".
//   - "huge": a binary frame whose 64-bit length has its top bit set.
func Handler(header string, seen *Seen) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(header)
		seen.mu.Lock()
		seen.value, seen.extensions = v, r.Header.Get("Sec-WebSocket-Extensions") != ""
		seen.upgrades++
		seen.mu.Unlock()
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "not a websocket upgrade", http.StatusBadRequest)
			return
		}
		mode := r.URL.Query().Get("mode")
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + Accept(r.Header.Get("Sec-WebSocket-Key")) + "\r\nX-Echo: " + v + "\r\n"
		if mode == "deflate" {
			head += "Sec-WebSocket-Extensions: permessage-deflate\r\n"
		}
		io.WriteString(c, head+"\r\n")
		switch mode {
		case "deflate":
			c.Write(Frame(true, OpText, []byte("text:"+v), nil))
			return
		case "masked":
			c.Write(Frame(true, OpText, []byte("text:"+v), []byte{9, 8, 7, 6}))
			io.Copy(io.Discard, brw)
			return
		case "huge":
			c.Write([]byte{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1})
			c.Write([]byte("bin:" + v))
			io.Copy(io.Discard, brw)
			return
		}
		c.Write(Frame(true, OpText, []byte("text:"+v), nil))
		c.Write(Frame(true, OpBinary, []byte("\x00bin:"+v), nil))
		frag := []byte("frag:" + v)
		a, b := len(frag)/3, 2*len(frag)/3
		c.Write(Frame(false, OpText, frag[:a], nil))
		c.Write(Frame(true, OpPing, []byte("ping:"+v), nil))
		c.Write(Frame(false, OpCont, frag[a:b], nil))
		c.Write(Frame(true, OpCont, frag[b:], nil))
		for _, by := range Frame(true, OpText, []byte("chunks:"+v), nil) {
			c.Write([]byte{by})
		}
		for {
			var raw []byte
			m, err := ReadMsg(brw, &raw)
			seen.mu.Lock()
			seen.raw = append(seen.raw, raw...)
			seen.mu.Unlock()
			if err != nil {
				return
			}
			switch m.Op {
			case OpClose:
				c.Write(Frame(true, OpClose, ClosePayload(1000, "bye "+v), nil))
				return
			case OpPing:
				c.Write(Frame(true, OpPong, []byte(m.Payload), nil))
			case OpText, OpBinary:
				c.Write(Frame(true, OpText, []byte("echo:"+m.Payload), nil))
			}
		}
	}
}

// Script is what Handler's script sends first, each as ReadMsg reads it,
// with v (the echoed header) as the agent must see it.
func Script(v string) []Msg {
	return []Msg{
		{Op: OpText, Payload: "text:" + v},
		{Op: OpBinary, Payload: "\x00bin:" + v},
		{Op: OpPing, Payload: "ping:" + v},
		{Op: OpText, Payload: "frag:" + v},
		{Op: OpText, Payload: "chunks:" + v},
	}
}

// Upgrade writes a WebSocket upgrade request for path on host to w, with
// the extra header lines given ("Name: value"), offering permessage-deflate
// (the Custodian must take it off).
func Upgrade(w io.Writer, host, path string, lines ...string) error {
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
	for _, l := range lines {
		req += l + "\r\n"
	}
	_, err := io.WriteString(w, req+"\r\n")
	return err
}

// ReadSwitch reads the answer to Upgrade.
func ReadSwitch(br *bufio.Reader) (*http.Response, error) {
	return http.ReadResponse(br, &http.Request{Method: "GET"})
}
