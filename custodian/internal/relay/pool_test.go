package relay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/internal/testkit/testpki"
)

// scripted is a TLS upstream that answers each connection's requests as
// its script says: the script gets the connection's index and each
// request in turn, and writes the answer itself (or nothing, and returns
// false to close the connection).
type scripted struct {
	l    net.Listener
	ca   *testpki.CA
	mu   sync.Mutex
	seen []string // "conn N: METHOD PATH body=..." for each request read
	done chan int // a connection's index once the upstream closed it
}

func newScripted(t *testing.T, script func(conn int, req *http.Request, body string, w *bufio.Writer) bool) *scripted {
	t.Helper()
	ca := testpki.NewCA(t, "pool test CA")
	leaf := ca.Leaf(t, "127.0.0.1")
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{l: l, ca: ca, done: make(chan int, 16)}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { c.Close(); s.done <- n }()
				br, bw := bufio.NewReader(c), bufio.NewWriter(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					s.mu.Lock()
					s.seen = append(s.seen, fmt.Sprintf("conn %d: %s %s body=%s", n, req.Method, req.URL.Path, b))
					s.mu.Unlock()
					if !script(n, req, string(b), bw) {
						return
					}
					bw.Flush()
				}
			}()
		}
	}()
	return s
}

func (s *scripted) pool() *Pool {
	return NewPool((&net.Dialer{}).DialContext, s.ca.Pool(), "127.0.0.1", s.l.Addr().String())
}

func (s *scripted) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func (s *scripted) waitClosed(t *testing.T, conn int) {
	t.Helper()
	select {
	case n := <-s.done:
		if n != conn {
			t.Fatalf("connection %d closed, want %d", n, conn)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("connection %d never closed", conn)
	}
}

func newOut(t *testing.T, s *scripted, method, path, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, "https://"+s.l.Addr().String()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		r.Body, r.GetBody, r.ContentLength = nil, nil, 0
	}
	return r
}

// call is one round trip with its body read whole.
func call(p *Pool, out *http.Request) (string, bool, error) {
	resp, sent, err := RoundTrip(p, out)
	if err != nil {
		return "", sent, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("%d %s", resp.StatusCode, b), sent, err
}

func answerOK(w *bufio.Writer, body string) {
	fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// One connection carries request after request, each answer read to its end.
func TestPoolReusesAConnection(t *testing.T) {
	s := newScripted(t, func(_ int, _ *http.Request, body string, w *bufio.Writer) bool {
		answerOK(w, "echo:"+body)
		return true
	})
	p := s.pool()
	defer p.Close()
	for i := range 3 {
		got, sent, err := call(p, newOut(t, s, "POST", "/p", fmt.Sprint("b", i)))
		if err != nil || !sent || got != fmt.Sprintf("200 echo:b%d", i) {
			t.Fatalf("request %d: %q sent=%v %v", i, got, sent, err)
		}
		if p.Idle() != 1 {
			t.Fatalf("after request %d the pool keeps %d connections, want 1", i, p.Idle())
		}
	}
	want := []string{"conn 0: POST /p body=b0", "conn 0: POST /p body=b1", "conn 0: POST /p body=b2"}
	if got := s.requests(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %q, want %q", got, want)
	}
}

// An idle connection the upstream closed is not taken: the next request,
// even a POST, goes once, on a new connection.
func TestPoolSkipsAClosedIdleConnection(t *testing.T) {
	s := newScripted(t, func(conn int, _ *http.Request, body string, w *bufio.Writer) bool {
		answerOK(w, "ok")
		w.Flush()
		return conn != 0 // the first connection closes once it answered
	})
	p := s.pool()
	defer p.Close()
	if got, _, err := call(p, newOut(t, s, "POST", "/a", "x")); err != nil || got != "200 ok" {
		t.Fatalf("first: %q %v", got, err)
	}
	s.waitClosed(t, 0)
	time.Sleep(20 * time.Millisecond) // the close_notify and FIN cross the loopback
	if got, _, err := call(p, newOut(t, s, "POST", "/b", "y")); err != nil || got != "200 ok" {
		t.Fatalf("second: %q %v", got, err)
	}
	want := []string{"conn 0: POST /a body=x", "conn 1: POST /b body=y"}
	if got := s.requests(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %q, want %q", got, want)
	}
}

// A reused connection that closes on a request without a byte of answer:
// an idempotent request is sent again on a new connection, a POST is not.
func TestPoolRetriesOnlyIdempotent(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   []string
		ok     bool
	}{
		{"GET", []string{"conn 0: GET /1 body=", "conn 0: GET /2 body=", "conn 1: GET /2 body="}, true},
		{"POST", []string{"conn 0: POST /1 body=x", "conn 0: POST /2 body=x"}, false},
	} {
		t.Run(tc.method, func(t *testing.T) {
			s := newScripted(t, func(conn int, req *http.Request, _ string, w *bufio.Writer) bool {
				if conn == 0 && req.URL.Path == "/2" {
					return false // read it, answer nothing, close
				}
				answerOK(w, "ok")
				return true
			})
			p := s.pool()
			defer p.Close()
			body := ""
			if tc.method == "POST" {
				body = "x"
			}
			if _, _, err := call(p, newOut(t, s, tc.method, "/1", body)); err != nil {
				t.Fatal(err)
			}
			got, sent, err := call(p, newOut(t, s, tc.method, "/2", body))
			if tc.ok && (err != nil || got != "200 ok") {
				t.Fatalf("%s sent again: %q %v", tc.method, got, err)
			}
			if !tc.ok && (err == nil || !sent) {
				t.Fatalf("%s: %q sent=%v err=%v, want an error after sending", tc.method, got, sent, err)
			}
			if got := s.requests(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("upstream saw %q, want %q", got, tc.want)
			}
		})
	}
}

// A chunked answer with trailers is read whole, trailers included, and
// its connection kept; interim 1xx answers are skipped.
func TestPoolChunkedTrailersAndInterim(t *testing.T) {
	s := newScripted(t, func(_ int, _ *http.Request, _ string, w *bufio.Writer) bool {
		io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
		io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: done\r\n\r\n")
		return true
	})
	p := s.pool()
	defer p.Close()
	resp, _, err := RoundTrip(p, newOut(t, s, "GET", "/", ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "abcde" || resp.StatusCode != 200 || resp.Trailer.Get("X-T") != "done" {
		t.Fatalf("got %d %q trailer %q %v", resp.StatusCode, b, resp.Trailer.Get("X-T"), err)
	}
	if p.Idle() != 1 {
		t.Fatalf("pool keeps %d, want 1", p.Idle())
	}
}

// An answer that does not end, closed by the caller, closes its
// connection at once (never drained) and is not kept; nor is one whose
// upstream asked to close, nor an unasked 101.
func TestPoolDoesNotKeep(t *testing.T) {
	t.Run("closed-early", func(t *testing.T) {
		hold := make(chan struct{})
		s := newScripted(t, func(_ int, _ *http.Request, _ string, w *bufio.Writer) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\nabc")
			w.Flush()
			<-hold // never ends while the test runs; the close must not wait for it
			return false
		})
		t.Cleanup(func() { close(hold) }) // before the upstream's own cleanup waits
		p := s.pool()
		defer p.Close()
		resp, _, err := RoundTrip(p, newOut(t, s, "GET", "/", ""))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		io.ReadFull(resp.Body, buf)
		done := make(chan struct{})
		go func() { resp.Body.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close waited for the body to end")
		}
		if p.Idle() != 0 {
			t.Fatalf("pool keeps %d, want 0", p.Idle())
		}
	})
	t.Run("connection-close", func(t *testing.T) {
		s := newScripted(t, func(_ int, _ *http.Request, _ string, w *bufio.Writer) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
			return true
		})
		p := s.pool()
		defer p.Close()
		if got, _, err := call(p, newOut(t, s, "GET", "/", "")); err != nil || got != "200 ok" {
			t.Fatalf("%q %v", got, err)
		}
		if p.Idle() != 0 {
			t.Fatalf("pool keeps %d, want 0", p.Idle())
		}
	})
	t.Run("unasked-101", func(t *testing.T) {
		s := newScripted(t, func(_ int, _ *http.Request, _ string, w *bufio.Writer) bool {
			io.WriteString(w, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n")
			return true
		})
		p := s.pool()
		defer p.Close()
		if _, sent, err := call(p, newOut(t, s, "GET", "/", "")); !errors.Is(err, errUnasked) || !sent {
			t.Fatalf("sent=%v err=%v, want errUnasked", sent, err)
		}
		if p.Idle() != 0 {
			t.Fatalf("pool keeps %d, want 0", p.Idle())
		}
	})
}

// The caller's context ending ends a wait for the answer, and that
// connection is not kept.
func TestPoolContextEndsTheWait(t *testing.T) {
	release := make(chan struct{})
	s := newScripted(t, func(_ int, _ *http.Request, _ string, w *bufio.Writer) bool {
		<-release
		return false
	})
	defer close(release)
	p := s.pool()
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, sent, err := RoundTrip(p, newOut(t, s, "GET", "/", "").WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) || !sent {
		t.Fatalf("sent=%v err=%v, want the context's end after sending", sent, err)
	}
	if p.Idle() != 0 {
		t.Fatalf("pool keeps %d, want 0", p.Idle())
	}
}

// An idle connection is closed after the pool's keep time.
func TestPoolReapsIdle(t *testing.T) {
	s := newScripted(t, func(_ int, _ *http.Request, _ string, w *bufio.Writer) bool {
		answerOK(w, "ok")
		return true
	})
	p := s.pool()
	defer p.Close()
	p.keepFor = 50 * time.Millisecond
	if _, _, err := call(p, newOut(t, s, "GET", "/", "")); err != nil {
		t.Fatal(err)
	}
	s.waitClosed(t, 0) // the upstream sees the pool close it
	if p.Idle() != 0 {
		t.Fatalf("pool keeps %d after its keep time, want 0", p.Idle())
	}
}

// Which requests the pool carries on the caller's goroutine, and which
// go through the Transport (streamed or unknown-length bodies, 100-continue).
func TestPoolDirect(t *testing.T) {
	small, _ := http.NewRequest("POST", "https://h/", bytes.NewReader(make([]byte, smallBody)))
	big, _ := http.NewRequest("POST", "https://h/", bytes.NewReader(make([]byte, smallBody+1)))
	stream, _ := http.NewRequest("POST", "https://h/", io.NopCloser(strings.NewReader("x")))
	stream.ContentLength = -1
	cont, _ := http.NewRequest("POST", "https://h/", strings.NewReader("x"))
	cont.Header.Set("Expect", "100-continue")
	get, _ := http.NewRequest("GET", "https://h/", nil)
	for _, tc := range []struct {
		name string
		r    *http.Request
		want bool
	}{{"no body", get, true}, {"16 KiB whole", small, true}, {"over 16 KiB", big, false}, {"streamed", stream, false}, {"100-continue", cont, false}} {
		if got := direct(tc.r); got != tc.want {
			t.Errorf("%s: direct = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A request net/http's Transport would refuse before writing is refused
// here too, with nothing sent and no field named in the words.
func TestPoolRefusesBadFields(t *testing.T) {
	s := newScripted(t, func(_ int, _ *http.Request, _ string, w *bufio.Writer) bool {
		answerOK(w, "ok")
		return true
	})
	p := s.pool()
	defer p.Close()
	for _, tc := range []struct {
		name string
		edit func(r *http.Request)
	}{
		{"method", func(r *http.Request) { r.Method = "GE T" }},
		{"name", func(r *http.Request) { r.Header["X-Bad Name"] = []string{"v"} }},
		{"value-lf", func(r *http.Request) { r.Header["X-Split"] = []string{"a\r\nX-Injected: 1"} }},
		{"value-nul", func(r *http.Request) { r.Header["X-Nul"] = []string{"a\x00b"} }},
	} {
		r := newOut(t, s, "GET", "/", "")
		tc.edit(r)
		_, sent, err := RoundTrip(p, r)
		if err == nil || sent || strings.Contains(err.Error(), "Injected") || strings.Contains(err.Error(), "Bad Name") {
			t.Errorf("%s: sent=%v err=%v; want a refusal before sending that names no field", tc.name, sent, err)
		}
	}
	if got := s.requests(); len(got) != 0 {
		t.Fatalf("the upstream saw %q", got)
	}
	if got, _, err := call(p, newOut(t, s, "GET", "/ok", "")); err != nil || got != "200 ok" {
		t.Fatalf("a good request after: %q %v", got, err)
	}
}

// FuzzPoolAnswer: whatever bytes an upstream answers with, a round trip
// through the Pool ends (an answer whose body reads to an end or an
// error, within the deadline), and a connection whose answer left bytes
// behind it is not used again: the next request goes on a new connection.
func FuzzPoolAnswer(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforged",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"garbage\r\n\r\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var answer []byte
	conns := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			a := answer
			mu.Unlock()
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					c.Write(a)
					if n == 0 {
						// The end, a moment after the bytes: an answer cut
						// short fails at once rather than at the deadline,
						// and a second request in that moment reuses the
						// connection if the Pool kept it.
						time.AfterFunc(20*time.Millisecond, func() { c.(*net.TCPConn).CloseWrite() })
					}
				}
			}()
		}
	}()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		mu.Lock()
		answer, conns = data, 0
		mu.Unlock()
		p := NewPlainPool((&net.Dialer{}).DialContext, l.Addr().String())
		defer p.Close()
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+l.Addr().String()+"/", nil)
			resp, _, err := RoundTrip(p, req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			cancel()
		}
		mu.Lock()
		n := conns
		mu.Unlock()
		// Two requests: one connection only when the first answer was
		// whole and nothing followed it.
		if n == 1 && !exactlyOneAnswer(data) {
			t.Fatalf("a connection whose answer was not exactly one whole answer was used again (%q)", data)
		}
	})
}

// exactlyOneAnswer reports whether data is one whole HTTP/1.1 answer to a
// GET (1xx interim answers before it), kept alive, and nothing after it.
func exactlyOneAnswer(data []byte) bool {
	br := bufio.NewReader(bytes.NewReader(data))
	req, _ := http.NewRequest("GET", "http://x/", nil)
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != 101 {
			continue
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.Close {
			return false
		}
		_, err = br.Peek(1)
		return err == io.EOF
	}
}
