package relay

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// flushCounter is a ResponseWriter that counts its flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
	// writesAtFlush are how many body bytes had been written at each flush.
	writesAtFlush []int
}

func (f *flushCounter) Flush() {
	f.flushes++
	f.writesAtFlush = append(f.writesAtFlush, f.Body.Len())
	f.ResponseRecorder.Flush()
}

// chunks is a body read as Go's transport hands it over: one chunk per
// Read, the last one with io.EOF (as a body of known length, or chunked
// with its end already buffered, does).
type chunks struct{ parts []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts = c.parts[1:]
	if len(c.parts) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func (c *chunks) Close() error { return nil }

func answer(parts ...string) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}},
		ContentLength: -1, Body: &chunks{parts: parts}}
}

// TestResponseFlushes: every chunk but the last is flushed as it comes (an
// event stream keeps its timing); the last is not, so it leaves with the
// end of the answer in one write (the last chunk and the chunk terminator
// were once two TLS records, two syscalls), and the scrubber's tail
// joins it: one chunk, one record of the mediator's, for an answer read
// in one.
func TestResponseFlushes(t *testing.T) {
	eng := fuzzEngine(t)
	for _, c := range []struct {
		name    string
		parts   []string
		flushes int
		chunks  int // hooks.Chunk calls; 0: not checked
	}{
		{"one chunk", []string{strings.Repeat("x", 1024)}, 0, 1},
		{"three events", []string{"data: 1\n\n", "data: 2\n\n", "data: 3\n\n"}, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			var st int
			var chunks []string
			hooks := &Hooks{Chunk: func(p []byte) { chunks = append(chunks, string(p)) }}
			Response(eng, rec, fuzzTarget, "GET", answer(c.parts...), &st, hooks)
			if c.chunks != 0 && len(chunks) != c.chunks {
				t.Fatalf("%d chunks passed on (%q), want %d", len(chunks), chunks, c.chunks)
			}
			if got, want := rec.Body.String(), strings.Join(c.parts, ""); got != want {
				t.Fatalf("body %q, want %q", got, want)
			}
			if rec.flushes != c.flushes {
				t.Fatalf("%d flushes, want %d", rec.flushes, c.flushes)
			}
			if te := rec.Header().Get("Transfer-Encoding"); te != "chunked" {
				t.Fatalf("Transfer-Encoding %q: a short answer must stay chunked (Go would frame it with a Content-Length of its own)", te)
			}
		})
	}
}

// TestResponseAllocatesNoBuffer: relaying an answer allocates neither its
// read buffer nor the scrubber's output (a 32 KiB buffer per response was
// once three quarters of the bytes serve allocated).
func TestResponseAllocatesNoBuffer(t *testing.T) {
	eng := fuzzEngine(t)
	body := strings.Repeat("x", 1024)
	rec := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	relay := func() {
		rec.Body.Reset()
		var st int
		Response(eng, rec, fuzzTarget, "GET", answer(body, body), &st, nil)
	}
	relay()
	const n = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		relay()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 8<<10 {
		t.Fatalf("%d bytes allocated per relayed answer of 2 KiB, want at most 8 KiB (no 32 KiB buffer each)", per)
	}
}

// opaqueBody is a request body Go's client cannot see the end of (as the
// server's body of a request being relayed).
type opaqueBody struct{ io.Reader }

func (opaqueBody) Close() error { return nil }

// TestSmallBodyLeavesWithItsHeaders: a request body of a declared length up
// to 16 KiB goes upstream in the write (one TLS record) that carries the
// headers; Go's client would write it after them, in a record and a
// syscall of its own.
func TestSmallBodyLeavesWithItsHeaders(t *testing.T) {
	ca := testpki.NewCA(t, "relay test CA")
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "got "+string(b))
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "127.0.0.1").TLS}}
	up.StartTLS()
	defer up.Close()

	var mu sync.Mutex
	var writes []int
	var counting atomic.Bool
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &writeCounter{Conn: c, note: func(n int) {
			if counting.Load() {
				mu.Lock()
				writes = append(writes, n)
				mu.Unlock()
			}
		}}, nil
	}
	tr := UpstreamTransport(dial, ca.Pool(), "127.0.0.1")
	defer tr.CloseIdleConnections()
	target := up.Listener.Addr().String()
	send := func(body string) string {
		t.Helper()
		in := httptest.NewRequest("POST", "/v1/echo", nil)
		in.Body, in.ContentLength = opaqueBody{strings.NewReader(body)}, int64(len(body))
		out, err := Outbound(in, "https", target, target, &filter.Decision{Path: "/v1/echo"})
		if err != nil {
			t.Fatal(err)
		}
		resp, _, err := RoundTrip(tr, out)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	send("warm") // the handshake's writes are not counted
	counting.Store(true)
	body := strings.Repeat("b", 1024)
	if got := send(body); got != "got "+body {
		t.Fatalf("the upstream answered %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) != 1 {
		t.Fatalf("the request went upstream in %d writes %v, want 1 (headers and body together)", len(writes), writes)
	}
}

type writeCounter struct {
	net.Conn
	note func(int)
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.note(len(p))
	return c.Conn.Write(p)
}
