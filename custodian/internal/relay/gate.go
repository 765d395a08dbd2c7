package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Gate wraps a connection an http.Server reads requests from, so that a
// request net/http would refuse before any handler runs — a request target
// url.ParseRequestURI cannot parse because a '%' in its path begins no
// %XX escape (IIS's %u002e), which net/http answers with its own "400 Bad
// Request" and no log line — reaches the handler, and the engine answers
// it (rule 4) with its own text and line, as Envoy with the module does.
//
// The gate reads each request head before net/http does and replaces such
// a target with a placeholder net/http parses, keeping the target as sent
// for the handler (Target, and so RequestOf). It changes nothing else: no
// other byte, and no other target (one holding a control byte, say, stays
// net/http's to refuse).
//
// To know where each head begins it frames requests as net/http does: a
// head ends at its first empty line; a body is Content-Length bytes, or
// chunked on HTTP/1.1 (chunk lines ending in CRLF, then trailers up to an
// empty line). Where the two could read the bytes differently — a head or
// framing header net/http refuses, an obs-fold line, a chunk line it
// refuses, a head past net/http's size limit — and after a CONNECT or an
// Upgrade (the connection may then carry other bytes than requests), the
// gate passes every further byte unchanged, and net/http decides as it
// would without it. A mistake in framing can therefore only leave a target
// to net/http's refusal, never let one through.
func Gate(c net.Conn, maxHeaderBytes int) *GateConn {
	return &GateConn{Conn: c, maxHead: maxHeaderBytes + 4096} // net/http's own slack
}

// GateConn is a connection read through Gate.
type GateConn struct {
	net.Conn
	maxHead int

	in  []byte // read, not yet framed
	out []byte // framed, not yet returned

	inBuf, outBuf []byte // in's and out's storage, used again once each is empty
	st            gateState
	n             uint64 // body or chunk bytes left to pass
	eof           bool   // the connection ended; returned once in and out are empty

	mu    sync.Mutex
	held  map[string]string // placeholder -> the target as sent
	token string
	seq   int
}

type gateState uint8

const (
	gateHead gateState = iota
	gateBody
	gateChunkLine
	gateChunkData
	gateChunkEnd
	gateTrailer
	gatePass // everything from here on passes unchanged
)

// maxChunkLine is net/http's limit on a chunk-size line (internal/chunked).
const maxChunkLine = 4096

func (g *GateConn) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if len(g.in) == 0 {
			if g.eof {
				return 0, io.EOF
			}
			// The long runs — a body, a chunk's data, a passed
			// connection — are read straight into p.
			if g.st == gatePass || (g.st == gateBody || g.st == gateChunkData) && g.n > 0 {
				q := p
				if g.st != gatePass && uint64(len(q)) > g.n {
					q = q[:g.n]
				}
				n, err := g.Conn.Read(q)
				if g.st != gatePass {
					g.advance(uint64(n))
				}
				return n, err
			}
		}
		if g.frame() {
			continue
		}
		if g.eof {
			if len(g.in) == 0 {
				return 0, io.EOF
			}
			// The connection ended inside a head or a chunk line: what
			// was read goes on as it is, for net/http to refuse.
			g.out, g.in = g.in, nil
			continue
		}
		// Read into in's own spare room: one buffer per connection, not
		// one per read.
		if len(g.in) == 0 {
			g.in = g.inBuf[:0]
		}
		if cap(g.in)-len(g.in) < 4096 {
			g.in = slices.Grow(g.in, 4096)
			if len(g.in) == 0 {
				g.inBuf = g.in
			}
		}
		n, err := g.Conn.Read(g.in[len(g.in):cap(g.in)])
		g.in = g.in[:len(g.in)+n]
		switch {
		case err == io.EOF:
			g.eof = true
		case err != nil && n == 0:
			// Not kept: net/http ends its background read with a
			// deadline in the past, then reads on.
			return 0, err
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	if len(g.out) == 0 {
		g.out = g.outBuf[:0]
	}
	return n, nil
}

// advance counts n body or chunk-data bytes passed.
func (g *GateConn) advance(n uint64) {
	g.n -= n
	if g.n == 0 {
		if g.st == gateBody {
			g.st = gateHead
		} else {
			g.st = gateChunkEnd
		}
	}
}

// frame moves what it can of in to out; it reports whether it made
// progress (false: it needs more bytes).
func (g *GateConn) frame() bool {
	switch g.st {
	case gatePass:
		g.pass(len(g.in))
		return len(g.out) > 0
	case gateBody, gateChunkData:
		if len(g.in) == 0 {
			return false
		}
		k := min(uint64(len(g.in)), g.n)
		g.pass(int(k))
		g.advance(k)
		return true
	case gateHead:
		end := headEnd(g.in)
		if end > g.maxHead || end < 0 && len(g.in) > g.maxHead {
			g.st = gatePass
			return true
		}
		if end < 0 {
			return false
		}
		head := g.in[:end]
		g.in = g.in[end:]
		g.emit(g.judge(head))
		return true
	case gateChunkLine:
		i := bytes.IndexByte(g.in, '\n')
		if i < 0 {
			if len(g.in) > maxChunkLine+2 {
				g.st = gatePass
				return true
			}
			return false
		}
		size, ok := chunkSize(g.in[:i+1])
		g.pass(i + 1)
		switch {
		case !ok:
			g.st = gatePass
		case size == 0:
			g.st = gateTrailer
		default:
			g.st, g.n = gateChunkData, size
		}
		return true
	case gateChunkEnd:
		if len(g.in) < 2 {
			return false
		}
		if g.in[0] != '\r' || g.in[1] != '\n' {
			g.st = gatePass
			return true
		}
		g.pass(2)
		g.st = gateChunkLine
		return true
	case gateTrailer:
		if len(g.in) < 2 {
			return false
		}
		if g.in[0] == '\r' && g.in[1] == '\n' {
			g.pass(2)
			g.st = gateHead
			return true
		}
		i := bytes.Index(g.in, []byte("\r\n\r\n"))
		if i < 0 {
			if len(g.in) > maxChunkLine {
				g.st = gatePass
				return true
			}
			return false
		}
		// Trailer lines in CRLF only; a bare LF could end net/http's
		// trailer elsewhere.
		if bytes.Count(g.in[:i+4], []byte("\n")) != bytes.Count(g.in[:i+4], []byte("\r\n")) {
			g.st = gatePass
			return true
		}
		g.pass(i + 4)
		g.st = gateHead
		return true
	}
	return false
}

func (g *GateConn) pass(n int) {
	g.emit(g.in[:n])
	g.in = g.in[n:]
}

// emit appends b to out, keeping out's storage for the next time.
func (g *GateConn) emit(b []byte) {
	g.out = append(g.out, b...)
	if cap(g.out) > cap(g.outBuf) {
		g.outBuf = g.out[:0:cap(g.out)]
	}
}

// headEnd is the length of the head at the start of b, through its first
// empty line ("\n" or "\r\n", as textproto reads lines), or -1.
func headEnd(b []byte) int {
	start := 0
	for {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1
		}
		line := b[start : start+i]
		if start > 0 && (len(line) == 0 || len(line) == 1 && line[0] == '\r') {
			return start + i + 1
		}
		start += i + 1
	}
}

// chunkSize reads a chunk-size line as net/http does: CRLF-ended with no
// other CR, extensions after ';' ignored, at most 16 hex digits.
func chunkSize(line []byte) (uint64, bool) {
	if len(line) < 2 || bytes.IndexByte(line, '\r') != len(line)-2 || len(line)-2 >= maxChunkLine {
		return 0, false
	}
	s := strings.TrimRight(string(line[:len(line)-2]), " \t")
	s, _, _ = strings.Cut(s, ";")
	s = strings.TrimRight(s, " \t")
	if s == "" || len(s) > 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 16, 64)
	return n, err == nil
}

// judge frames one head: it sets the state for what follows it and
// returns the head to pass, its target replaced if net/http cannot parse
// it only for a '%' that begins no escape.
func (g *GateConn) judge(head []byte) []byte {
	g.st = gatePass
	line, rest := nextLine(head)
	method, after, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(after, []byte(" "))
	minor, okProto := http1Minor(proto)
	if !ok1 || !ok2 || !okProto {
		return head
	}
	var cl, te []byte // the first of each
	cls, tes := 0, 0
	upgrade := false
	for len(rest) > 0 {
		line, rest = nextLine(rest)
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return head // obs-fold
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return head
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if cls > 0 && !bytes.Equal(value, cl) {
				return head
			}
			cl, cls = value, cls+1
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			te, tes = value, tes+1
		case bytes.EqualFold(name, []byte("Upgrade")):
			upgrade = true
		}
	}
	var length uint64
	if cls > 0 {
		n, err := strconv.ParseUint(string(cl), 10, 63)
		if err != nil {
			return head
		}
		length = n
	}
	chunked := false
	if tes > 0 && minor >= 1 {
		if tes != 1 || !bytes.EqualFold(te, []byte("chunked")) {
			return head
		}
		chunked = true
	}
	connect := string(method) == http.MethodConnect
	switch {
	case connect || upgrade:
		// After it the connection may carry other bytes than requests.
	case chunked:
		g.st = gateChunkLine
	case length > 0:
		g.st, g.n = gateBody, length
	default:
		g.st = gateHead
	}
	// Most targets hold no '%' that begins no escape: only those are
	// parsed again (badEscapeOnly).
	if connect || len(target) == 0 || target[0] != '/' || !hasBadEscape(target) || !badEscapeOnly(string(target)) {
		return head
	}
	ph := g.hold(string(target))
	at := len(method) + 1
	out := make([]byte, 0, len(head)-len(target)+len(ph))
	out = append(out, head[:at]...)
	out = append(out, ph...)
	return append(out, head[at+len(target):]...)
}

// nextLine cuts the first line off b, its "\n" and a "\r" before it
// dropped, as textproto reads lines.
func nextLine(b []byte) (line, rest []byte) {
	line, rest, _ = bytes.Cut(b, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), rest
}

// hasBadEscape reports a '%' in b that does not begin two hex digits.
func hasBadEscape(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && !(i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2])) {
			return true
		}
	}
	return false
}

// http1Minor reads "HTTP/1.d", the versions net/http serves as HTTP/1.
func http1Minor(proto []byte) (int, bool) {
	if len(proto) != len("HTTP/1.1") || !bytes.HasPrefix(proto, []byte("HTTP/1.")) || proto[7] < '0' || proto[7] > '9' {
		return 0, false
	}
	return int(proto[7] - '0'), true
}

// badEscapeOnly reports whether net/http refuses target only because a
// '%' in it begins no %XX escape: it refuses target, and takes it with
// each such '%' sent as %25.
func badEscapeOnly(target string) bool {
	if _, err := url.ParseRequestURI(target); err == nil {
		return false
	}
	var b strings.Builder
	for i := 0; i < len(target); i++ {
		if target[i] == '%' && !(i+2 < len(target) && isHex(target[i+1]) && isHex(target[i+2])) {
			b.WriteString("%25")
			continue
		}
		b.WriteByte(target[i])
	}
	_, err := url.ParseRequestURI(b.String())
	return err == nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// hold keeps target and returns the placeholder that stands for it: a
// path no one else can send, as it holds a random token of this
// connection.
func (g *GateConn) hold(target string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.token == "" {
		var b [12]byte
		rand.Read(b[:])
		g.token = hex.EncodeToString(b[:])
		g.held = map[string]string{}
	}
	g.seq++
	ph := "/.jr2-unparsed/" + g.token + "/" + strconv.Itoa(g.seq)
	g.held[ph] = target
	return ph
}

// take returns, once, the target a placeholder stands for.
func (g *GateConn) take(ph string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.held[ph]
	delete(g.held, ph)
	return t, ok
}

// CloseWrite half-closes the connection where it can, and closes it
// where it cannot.
func (g *GateConn) CloseWrite() error {
	if cw, ok := g.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return g.Conn.Close()
}

type gateKey struct{}

// GateContext is an http.Server's ConnContext for connections read
// through Gate: it lets Target find the target a placeholder stands for.
func GateContext(ctx context.Context, c net.Conn) context.Context {
	if g, ok := c.(*GateConn); ok {
		return context.WithValue(ctx, gateKey{}, g)
	}
	return ctx
}

// Target is r's request target as the client sent it: r.RequestURI, or
// the target a Gate replaced with it.
func Target(r *http.Request) string {
	if g, ok := r.Context().Value(gateKey{}).(*GateConn); ok && strings.HasPrefix(r.RequestURI, "/.jr2-unparsed/") {
		if t, ok := g.take(r.RequestURI); ok {
			return t
		}
	}
	return r.RequestURI
}
