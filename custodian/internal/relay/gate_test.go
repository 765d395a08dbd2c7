package relay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// streamConn is a net.Conn reading a fixed stream in the given read sizes
// (cycled), to put chunk borders anywhere.
type streamConn struct {
	net.Conn
	r     io.Reader
	sizes []int
	i     int
}

func (c *streamConn) Read(p []byte) (int, error) {
	if len(c.sizes) > 0 {
		n := c.sizes[c.i%len(c.sizes)]
		c.i++
		if n > 0 && n < len(p) {
			p = p[:n]
		}
	}
	return c.r.Read(p)
}
func (c *streamConn) Close() error                     { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }

var placeholder = regexp.MustCompile(`/\.jr2-unparsed/[0-9a-f]{24}/[0-9]+`)

// gateRead reads in through a gate in the given read sizes and returns
// what net/http would read, and the gate.
func gateRead(t testing.TB, in []byte, sizes []int) ([]byte, *GateConn) {
	g := Gate(&streamConn{r: bytes.NewReader(in), sizes: sizes}, 1<<10)
	out, err := io.ReadAll(g)
	if err != nil {
		t.Fatal(err)
	}
	return out, g
}

type seen struct {
	method, target string
	header         http.Header
	body           string
	trailer        http.Header
}

// serverRead reads requests from b as net/http's server does, until the
// first error; with g, targets are read back through Target.
func serverRead(b []byte, g *GateConn) ([]seen, error) {
	var reqs []seen
	br := bufio.NewReader(bytes.NewReader(b))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return reqs, err
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return reqs, err
		}
		target := req.RequestURI
		if g != nil {
			target = Target(req.WithContext(GateContext(req.Context(), g)))
		}
		reqs = append(reqs, seen{req.Method, target, req.Header, string(body), req.Trailer})
	}
}

func TestGateFraming(t *testing.T) {
	bad := "GET /v1/%u002e%u002e/admin HTTP/1.1\r\nHost: t\r\n\r\n"
	for _, c := range []struct {
		name    string
		stream  string
		targets []string // every target the handler sees, in order
		held    int      // how many were replaced
	}{
		{"a bad escape alone", bad, []string{"/v1/%u002e%u002e/admin"}, 1},
		{"a bad escape after a request with a body",
			"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello" + bad,
			[]string{"/a", "/v1/%u002e%u002e/admin"}, 1},
		{"a body that looks like a bad head is a body",
			"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 47\r\n\r\n" + bad[:47] + "GET /b HTTP/1.1\r\nHost: t\r\n\r\n",
			[]string{"/a", "/b"}, 0},
		{"chunked, with extensions and trailers",
			"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n3 \r\nGET\r\n0\r\nX-T: 1\r\n\r\n" + bad,
			[]string{"/a", "/v1/%u002e%u002e/admin"}, 1},
		{"a chunked body that looks like a bad head is a body",
			"POST /a HTTP/1.1\r\nHost: t\r\ntransfer-encoding: Chunked\r\n\r\n2f\r\n" + bad[:47] + "\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n",
			[]string{"/a", "/b"}, 0},
		{"bare LF heads", "GET /v1/%zz HTTP/1.1\nHost: t\n\nGET /c HTTP/1.1\nHost: t\n\n", []string{"/v1/%zz", "/c"}, 1},
		{"a bad escape in the query is net/http's to take", "GET /a?%zz HTTP/1.1\r\nHost: t\r\n\r\n", []string{"/a?%zz"}, 0},
		{"repeated equal Content-Length",
			"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi" + bad,
			[]string{"/a", "/v1/%u002e%u002e/admin"}, 1},
		{"HTTP/1.0 ignores Transfer-Encoding",
			"POST /a HTTP/1.0\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nhi" + bad,
			[]string{"/a", "/v1/%u002e%u002e/admin"}, 1},
	} {
		for _, sizes := range [][]int{nil, {1}, {3, 7}, {50}} {
			out, g := gateRead(t, []byte(c.stream), sizes)
			reqs, err := serverRead(out, g)
			if err != io.EOF {
				t.Errorf("%s %v: net/http stopped: %v", c.name, sizes, err)
			}
			var got []string
			for _, r := range reqs {
				got = append(got, r.target)
			}
			if strings.Join(got, " ") != strings.Join(c.targets, " ") {
				t.Errorf("%s %v: targets %q, want %q", c.name, sizes, got, c.targets)
			}
			if n := len(placeholder.FindAll(out, -1)); n != c.held {
				t.Errorf("%s %v: %d replaced, want %d", c.name, sizes, n, c.held)
			}
		}
	}
}

// After what net/http could read otherwise, or may not read as requests,
// the gate passes everything unchanged.
func TestGatePasses(t *testing.T) {
	bad := "GET /v1/%u0 HTTP/1.1\r\nHost: t\r\n\r\n"
	for _, c := range []struct{ name, stream string }{
		{"after a CONNECT", "CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\n\r\n" + bad},
		{"after an Upgrade", "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n\r\n" + bad},
		{"after differing Content-Length", "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nhi" + bad},
		{"after an unknown Transfer-Encoding", "POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n" + bad},
		{"after two Transfer-Encoding", "POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + bad},
		{"after an obs-fold", "GET /a HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n" + bad},
		{"after a chunk line with a bare LF", "POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\n\r\n" + bad},
		{"after a chunk without its CRLF", "POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy" + bad},
		{"after HTTP/2.0", "GET /a HTTP/2.0\r\nHost: t\r\n\r\n" + bad},
		{"a head past the limit", "GET /a HTTP/1.1\r\nX: " + strings.Repeat("a", 6000) + "\r\n\r\n" + bad},
		{"a target with a control byte", "GET /a\x01%zz HTTP/1.1\r\nHost: t\r\n\r\n"},
		{"an absolute-form target", "GET http://t/%u0 HTTP/1.1\r\nHost: t\r\n\r\n"},
	} {
		for _, sizes := range [][]int{nil, {1}, {5}} {
			out, _ := gateRead(t, []byte(c.stream), sizes)
			if string(out) != c.stream {
				t.Errorf("%s %v: the gate changed the stream:\n%q\nwant\n%q", c.name, sizes, out, c.stream)
			}
		}
	}
}

// FuzzGate: whatever the bytes and however they are split, the gate
// changes nothing but targets net/http refuses, each only where net/http
// begins a request, and hands each back as sent.
func FuzzGate(f *testing.F) {
	f.Add([]byte("GET /v1/%u002e HTTP/1.1\r\nHost: t\r\n\r\n"), uint8(0))
	f.Add([]byte("POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabcGET /%zz HTTP/1.1\r\nHost: t\r\n\r\n"), uint8(3))
	f.Add([]byte("POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\nGET /%zz HTTP/1.1\r\nHost: t\r\n\r\n"), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		var sizes []int
		if split > 0 {
			sizes = []int{int(split)}
		}
		out, g := gateRead(t, in, sizes)
		restored := placeholder.ReplaceAllFunc(out, func(ph []byte) []byte {
			orig, ok := g.take(string(ph))
			if !ok {
				t.Fatalf("placeholder %s not held", ph)
			}
			if !badEscapeOnly(orig) {
				t.Fatalf("replaced a target net/http takes, or refuses for more than an escape: %q", orig)
			}
			return []byte(orig)
		})
		if !bytes.Equal(restored, in) {
			t.Fatalf("the gate changed more than targets:\n%q\n%q", in, out)
		}
		reqs, _ := serverRead(out, nil)
		for _, r := range reqs {
			if placeholder.MatchString(r.body) || placeholder.MatchString(fmt.Sprint(r.trailer)) {
				t.Fatalf("a placeholder in a body: %q", r.body)
			}
			for _, vs := range r.header {
				for _, v := range vs {
					if placeholder.MatchString(v) {
						t.Fatalf("a placeholder in a header: %q", v)
					}
				}
			}
		}
	})
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// errOnce fails its first read in a head with a timeout, as net/http's
// ending of its background read does.
type errOnce struct {
	streamConn
	failed bool
}

func (c *errOnce) Read(p []byte) (int, error) {
	if !c.failed && c.i == 1 {
		c.failed = true
		return 0, timeoutErr{}
	}
	return c.streamConn.Read(p)
}

// A read error is the caller's for that read only: net/http sets a
// deadline in the past to end its background read, then reads on.
func TestGateReadErrorsAreNotKept(t *testing.T) {
	in := "GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /%zz HTTP/1.1\r\nHost: t\r\n\r\n"
	g := Gate(&errOnce{streamConn: streamConn{r: strings.NewReader(in), sizes: []int{10}}}, 1<<10)
	var out []byte
	errs := 0
	for {
		var b [64]byte
		n, err := g.Read(b[:])
		out = append(out, b[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs++
			if errs > 1 {
				t.Fatalf("the error came back: %v", err)
			}
		}
	}
	if errs != 1 || !strings.HasPrefix(string(out), "GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /.jr2-unparsed/") {
		t.Fatalf("%d errors, read %q", errs, out)
	}
}
