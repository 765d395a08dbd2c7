// Package sni recovers the host a TLS client means to reach from its
// ClientHello, before any TLS is spoken back, so the mediator can decide and
// record the attempt and then hand the same bytes to its own TLS server.
//
// Invariant: a name returned without error passed contract.CheckName (lowercase,
// LDH plus '_', not an IP spelling); every length read from the wire is
// checked against the bytes actually held before it is used; at most
// MaxHello bytes are read from a connection, and never a byte past the
// ClientHello's last record, so nothing the client sends after it is
// consumed.
//
// A ClientHello without a server_name extension (a client dialling an IP
// literal sends none) yields the empty name and no error: the caller records
// an attempt with an empty host and denies it.
package sni

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"

	"jr2.dev/boundary/internal/contract"
)

// Limits.
const (
	recordHeaderLen = 5
	maxRecord       = 1 << 14 // RFC 8446 §5.1: a plaintext fragment
	// MaxHello bounds the bytes read for one ClientHello, record headers
	// included. Real ones are under 2 KiB (a post-quantum key share
	// included); the bound leaves room for padding and many extensions.
	MaxHello = 32 << 10

	typeHandshake   = 22
	typeClientHello = 1
	extServerName   = 0
	nameTypeHost    = 0
)

// Error is why no name could be read. Reason is one word, safe for a log
// line and a record.
type Error struct{ Reason string }

func (e *Error) Error() string { return "sni: " + e.Reason }

func fail(reason string) *Error { return &Error{reason} }

// ReadClientHello reads TLS records from r until it holds the whole
// ClientHello and returns every byte it read, for replay, and the server
// name. The handshake message may span several records and every record may
// arrive in pieces; r is read with io.ReadFull, never past the last record.
func ReadClientHello(r io.Reader) (raw []byte, name string, err error) {
	var hs []byte
	hdr := make([]byte, recordHeaderLen)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return raw, "", err
		}
		raw = append(raw, hdr...)
		switch {
		case hdr[0] != typeHandshake:
			return raw, "", fail("not-handshake")
		case hdr[1] != 3:
			return raw, "", fail("record-version")
		}
		n := int(binary.BigEndian.Uint16(hdr[3:]))
		if n == 0 || n > maxRecord {
			return raw, "", fail("record-length")
		}
		if len(raw)+n > MaxHello {
			return raw, "", fail("too-large")
		}
		start := len(raw)
		raw = append(raw, make([]byte, n)...)
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start], "", err
		}
		hs = append(hs, raw[start:]...)
		if len(hs) < 4 {
			continue
		}
		if hs[0] != typeClientHello {
			return raw, "", fail("not-client-hello")
		}
		need := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
		if need > MaxHello {
			return raw, "", fail("too-large")
		}
		if len(hs) >= need {
			name, err := ParseHello(hs[:need])
			return raw, name, err
		}
	}
}

// ParseHello reads the server name from one ClientHello handshake message
// (type, 24-bit length, body). The empty name with a nil error means the
// client sent no server_name.
func ParseHello(msg []byte) (string, error) {
	r := reader(msg)
	t, ok1 := r.u8()
	n, ok2 := r.u24()
	if !ok1 || !ok2 || t != typeClientHello || n != len(r) {
		return "", fail("not-client-hello")
	}
	_, ok1 = r.skip(2 + 32) // legacy_version, random
	_, ok2 = r.vec8(0, 32)  // legacy_session_id
	_, ok3 := r.vec16(2, 1<<16-2)
	_, ok4 := r.vec8(1, 255) // legacy_compression_methods
	if !(ok1 && ok2 && ok3 && ok4) {
		return "", fail("malformed")
	}
	if len(r) == 0 {
		return "", nil // no extensions: no server_name
	}
	exts, ok := r.vec16(0, 1<<16-1)
	if !ok || len(r) != 0 {
		return "", fail("malformed")
	}
	seen := map[uint16]bool{}
	name := ""
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec16(0, 1<<16-1)
		switch {
		case !ok1 || !ok2:
			return "", fail("malformed")
		case seen[typ]:
			return "", fail("duplicate-extension") // RFC 8446 §4.2
		}
		seen[typ] = true
		if typ == extServerName {
			var err error
			if name, err = serverName(data); err != nil {
				return "", err
			}
		}
	}
	return name, nil
}

// serverName reads the extension_data of server_name (RFC 6066 §3).
func serverName(data reader) (string, error) {
	list, ok := data.vec16(1, 1<<16-1)
	if !ok || len(data) != 0 {
		return "", fail("malformed")
	}
	var host []byte
	for len(list) > 0 {
		typ, ok1 := list.u8()
		v, ok2 := list.vec16(1, 1<<16-1)
		switch {
		case !ok1 || !ok2:
			return "", fail("malformed")
		case typ != nameTypeHost:
			continue
		case host != nil:
			return "", fail("duplicate-name")
		}
		host = v
	}
	if host == nil {
		return "", nil
	}
	name := contract.Lower(string(host))
	if _, err := netip.ParseAddr(name); err == nil {
		return "", fail("ip-literal")
	}
	if contract.CheckName(name) != nil {
		return "", fail("invalid-name")
	}
	return name, nil
}

// Peek reads the ClientHello from c and returns the server name and a
// connection that replays what was read before reading c again, for a TLS
// server to handshake over. The caller sets a read deadline on c first; on
// error the returned conn still replays what was read.
func Peek(c net.Conn) (name string, conn net.Conn, err error) {
	raw, name, err := ReadClientHello(c)
	return name, &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(raw), c)}, err
}

// replayConn is a net.Conn whose reads return prefix bytes first. It is not
// safe for concurrent reads, as a TLS server does not need it to be.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// reader reads big-endian fields from a byte slice; every method checks the
// length it needs and reports false, consuming nothing, when it is not there.
type reader []byte

func (r *reader) skip(n int) (reader, bool) {
	if n < 0 || len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) u8() (uint8, bool) {
	v, ok := r.skip(1)
	if !ok {
		return 0, false
	}
	return v[0], true
}

func (r *reader) u16() (uint16, bool) {
	v, ok := r.skip(2)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint16(v), true
}

func (r *reader) u24() (int, bool) {
	v, ok := r.skip(3)
	if !ok {
		return 0, false
	}
	return int(v[0])<<16 | int(v[1])<<8 | int(v[2]), true
}

// vec8 and vec16 read a vector with a 1- or 2-byte length in [min, max].
func (r *reader) vec8(min, max int) (reader, bool)  { return r.vec(1, min, max) }
func (r *reader) vec16(min, max int) (reader, bool) { return r.vec(2, min, max) }

func (r *reader) vec(width, min, max int) (reader, bool) {
	save := *r
	var n int
	if width == 1 {
		v, ok := r.u8()
		n = int(v)
		if !ok {
			return nil, false
		}
	} else {
		v, ok := r.u16()
		n = int(v)
		if !ok {
			return nil, false
		}
	}
	if n < min || n > max {
		*r = save
		return nil, false
	}
	v, ok := r.skip(n)
	if !ok {
		*r = save
	}
	return v, ok
}
