package relay

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"jr2.dev/boundary/internal/tchar"
)

// Pool carries requests to one upstream over HTTP/1.1 and TLS, on the
// caller's goroutine. net/http's Transport hands each request to a writer
// goroutine and each answer back from a reader goroutine: two wake-ups of
// another thread per request, which on a small machine cost the Custodian
// more CPU than the TLS of both its hops (measured in CPU profiles). A Pool
// writes the request, reads the answer and streams its body on the
// goroutine that asked, and keeps the connection for the next request
// once the body was read to its end.
//
// It carries what it can carry whole: a request with no body, or with
// one Outbound read whole (a declared length up to 16 KiB, no
// 100-continue asked). Any other request — a streamed or unknown-length
// body, whose upstream may answer while it is still being sent — goes
// through the Transport it holds, which writes and reads at once. The two
// write the same bytes: both use net/http's own request writer and
// response reader, and the Transport is configured exactly as before
// (UpstreamTransport).
//
// Invariants: a connection is reused only after its answer was read to its
// end with neither side asking to close, and only if, when taken from the
// pool, the peer has neither closed it nor sent anything unasked (alive);
// a request is sent again on a fresh connection only when it is
// idempotent (GET, HEAD, OPTIONS, TRACE), went out on a reused
// connection and not one byte of an answer came (the upstream had closed
// the idle connection as it was taken); the caller's context ending ends
// the exchange (the connection's deadline is set in the past), and such a
// connection is never reused.
type Pool struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConf *tls.Config
	addr    string
	slow    *http.Transport
	keepFor time.Duration // IdleTimeout; shorter in tests

	mu     sync.Mutex
	idle   []*pconn // the most recently used last
	reaper *time.Timer
	closed bool
}

// IdleTimeout is how long an idle upstream connection is kept.
const IdleTimeout = 90 * time.Second

// handshakeTimeout bounds a new connection's TLS handshake.
const handshakeTimeout = 10 * time.Second

// NewPool is the pool toward addr (host:port), dialled with dial and
// verified against roots and serverName, as UpstreamTransport is.
func NewPool(dial func(ctx context.Context, network, addr string) (net.Conn, error), roots *x509.CertPool, serverName, addr string) *Pool {
	slow := UpstreamTransport(dial, roots, serverName)
	return &Pool{dial: dial, tlsConf: slow.TLSClientConfig.Clone(), addr: addr, slow: slow, keepFor: IdleTimeout}
}

// NewPlainPool is the pool toward an http (not https) upstream at addr:
// the contained run's mediator carries a child's plain requests too.
func NewPlainPool(dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) *Pool {
	return &Pool{dial: dial, addr: addr, slow: UpstreamTransport(dial, nil, ""), keepFor: IdleTimeout}
}

// pconn is one upstream connection and its buffers.
type pconn struct {
	tc     net.Conn // the TLS connection, or the plain one toward an http upstream
	raw    net.Conn // the TCP connection under it
	br     *bufio.Reader
	bw     *bufio.Writer
	cw     countWriter
	idleAt time.Time
}

// countWriter counts what reached the connection.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// direct reports whether the Pool carries out itself.
func direct(out *http.Request) bool {
	if len(out.Header["Expect"]) > 0 {
		return false
	}
	return out.Body == nil || out.Body == http.NoBody || (out.GetBody != nil && out.ContentLength >= 0 && out.ContentLength <= smallBody)
}

// idempotent are the methods a request may be sent again with.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// checkFields refuses what net/http's Transport refuses before it writes
// a byte and its request writer does not: a method that is not a token, a
// header name that is not a token, a value holding a control byte (CR or
// LF would end the header early). The words name no field: a name is
// the agent's and could be anything.
func checkFields(out *http.Request) error {
	if !tchar.Token(out.Method) {
		return errors.New("the method is not a token")
	}
	for k, vs := range out.Header {
		if !tchar.Token(k) {
			return errors.New("a header name is not a token")
		}
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
					return errors.New("a header value holds a control byte")
				}
			}
		}
	}
	return nil
}

// errUnasked is an answer the Pool never asked for.
var errUnasked = errors.New("the upstream switched protocols unasked")

// RoundTrip sends out and returns the answer, whose body the caller reads
// and closes. Once any of the request was written it says so through the
// request's httptrace.ClientTrace (WroteHeaderField), as net/http's
// Transport does, so relay.RoundTrip reports it for either.
func (p *Pool) RoundTrip(out *http.Request) (*http.Response, error) {
	if !direct(out) {
		return p.slow.RoundTrip(out)
	}
	resp, sent, err := p.roundTrip(out)
	if sent {
		if tr := httptrace.ContextClientTrace(out.Context()); tr != nil && tr.WroteHeaderField != nil {
			tr.WroteHeaderField("", nil)
		}
	}
	return resp, err
}

func (p *Pool) roundTrip(out *http.Request) (resp *http.Response, sent bool, err error) {
	if err := checkFields(out); err != nil {
		return nil, false, err
	}
	ctx := out.Context()
	for attempt := 0; ; attempt++ {
		pc, reused, err := p.get(ctx)
		if err != nil {
			return nil, false, err
		}
		stop := context.AfterFunc(ctx, func() { pc.tc.SetDeadline(time.Unix(1, 0)) })
		resp, err := pc.exchange(out)
		if err == nil {
			if resp.Body == http.NoBody {
				p.release(pc, stop, !resp.Close && !out.Close)
			} else {
				resp.Body = &pooledBody{rc: resp.Body, p: p, pc: pc, stop: stop, keep: !resp.Close && !out.Close}
			}
			return resp, true, nil
		}
		stop()
		pc.tc.Close()
		if ctx.Err() != nil {
			return nil, pc.cw.n > 0, ctx.Err()
		}
		if reused && attempt == 0 && pc.br.Buffered() == 0 && idempotent(out.Method) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err)) {
			if out.GetBody != nil {
				b, gerr := out.GetBody()
				if gerr != nil {
					return nil, true, err
				}
				out.Body = b
			}
			continue
		}
		return nil, pc.cw.n > 0, err
	}
}

// exchange writes out and reads the answer's head (1xx interim answers
// skipped).
func (pc *pconn) exchange(out *http.Request) (*http.Response, error) {
	if err := out.Write(pc.bw); err != nil {
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, err
	}
	for interim := 0; ; interim++ {
		resp, err := http.ReadResponse(pc.br, out)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errUnasked
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			if interim == 5 {
				return nil, errors.New("too many interim answers")
			}
			continue
		}
		return resp, nil
	}
}

// get is an idle connection that is still alive, or a new one.
func (p *Pool) get(ctx context.Context) (*pconn, bool, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		pc := p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		if pc.br.Buffered() == 0 && alive(pc.raw) {
			p.mu.Unlock()
			return pc, true, nil
		}
		pc.tc.Close()
	}
	p.mu.Unlock()
	pc, err := p.connect(ctx)
	return pc, false, err
}

// connect dials and handshakes a new connection.
func (p *Pool) connect(ctx context.Context) (*pconn, error) {
	conn, err := p.dial(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if p.tlsConf == nil {
		return newPconn(conn, conn), nil
	}
	tc := tls.Client(conn, p.tlsConf)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if np := tc.ConnectionState().NegotiatedProtocol; np != "" && np != "http/1.1" {
		tc.Close()
		return nil, fmt.Errorf("the upstream chose protocol %q", np)
	}
	return newPconn(tc, conn), nil
}

func newPconn(c, raw net.Conn) *pconn {
	pc := &pconn{tc: c, raw: raw, br: bufio.NewReaderSize(c, 4<<10)}
	pc.cw.w = c
	pc.bw = bufio.NewWriterSize(&pc.cw, smallBody+4<<10)
	return pc
}

// release ends an exchange: the connection goes back to the pool when keep
// holds and the context never touched it, else it is closed.
func (p *Pool) release(pc *pconn, stop func() bool, keep bool) {
	if !stop() || !keep {
		pc.tc.Close()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= MaxIdlePerTarget {
		pc.tc.Close()
		return
	}
	pc.idleAt = time.Now()
	pc.cw.n = 0
	p.idle = append(p.idle, pc)
	if p.reaper == nil {
		p.reaper = time.AfterFunc(p.keepFor, p.reap)
	}
}

// reap closes the connections idle for IdleTimeout, and comes back when
// the oldest left is due.
func (p *Pool) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now, n := time.Now(), 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleAt) >= p.keepFor {
		p.idle[n].tc.Close()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	clear(p.idle[len(p.idle):cap(p.idle)])
	if len(p.idle) == 0 || p.closed {
		p.reaper = nil
		return
	}
	p.reaper.Reset(p.keepFor - now.Sub(p.idle[0].idleAt))
}

// Idle is how many connections the pool keeps now.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Close closes every idle connection and keeps none from now on.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	for _, pc := range p.idle {
		pc.tc.Close()
	}
	p.idle = nil
	if p.reaper != nil {
		p.reaper.Stop()
	}
	p.mu.Unlock()
	p.slow.CloseIdleConnections()
}

// pooledBody is an answer's body on a pooled connection: read to its end
// it gives the connection back; closed before, it closes the connection
// (never drains it: a stream that does not end would hold the caller).
type pooledBody struct {
	rc   io.ReadCloser
	p    *Pool
	pc   *pconn
	stop func() bool
	keep bool
	done bool
}

func (b *pooledBody) Read(q []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(q)
	if err == io.EOF {
		b.done = true
		b.p.release(b.pc, b.stop, b.keep)
	} else if err != nil {
		b.done = true
		b.stop()
		b.pc.tc.Close()
	}
	return n, err
}

func (b *pooledBody) Close() error {
	if !b.done {
		b.done = true
		b.stop()
		b.pc.tc.Close()
	}
	return nil
}
