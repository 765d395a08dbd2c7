package serve

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/hostlimits"
)

func (s *Server) newEgress() *http.Server {
	return s.newServer("egress", http.HandlerFunc(s.handleConnect))
}

// handleConnect is the egress listener: CONNECT only; the target decides.
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	d := s.eng.Latest().DecideConnect(r.Method, r.Host)
	if d.Reply != nil {
		s.log.Log(d.LogFields()...)
		relay.WriteReply(w, d.Reply)
		return
	}
	if d.Intercept {
		s.intercept(w, d.Target)
		return
	}
	s.tunnel(w, r.Context(), d)
}

// intercept answers the CONNECT, ends TLS with the target's leaf and hands
// the connection to the target's HTTP server, where every request is
// decided by the engine.
func (s *Server) intercept(w http.ResponseWriter, target string) {
	ic := s.intercepts[target]
	conn, brw, ok := hijack(w)
	if !ok {
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	tc := tls.Server(withBuffered(conn, brw.Reader), &tls.Config{
		Certificates: []tls.Certificate{*s.leaves[target]},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	// The handshake is this host's, not net/http's, so the target's
	// server reads the connection through relay.Gate; it logs and answers
	// a failed one as net/http would (logline's tls-handshake).
	tc.SetDeadline(time.Now().Add(hostlimits.HeaderTimeout))
	if err := tc.Handshake(); err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		s.log.Log("action", "error", "listener", "intercept", "reason", "tls-handshake")
		tc.Close()
		return
	}
	tc.SetDeadline(time.Time{})
	ic.l.Push(relay.Gate(tc, hostlimits.MaxHeaderBytes))
}

// looksLikeHTTP is net/http's test of a first record that is plain HTTP.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

var errGuard = errors.New("dial guard")

// tunnel dials the target with the resolved half of the dial guard in
// net.Dialer.Control — the address checked is the address dialled — and
// then copies bytes both ways. No byte of the client's goes before the 200,
// and the 200 goes only once the connection is up, so a 502 here always
// means nothing reached the target.
func (s *Server) tunnel(w http.ResponseWriter, ctx context.Context, d filter.ConnectDecision) {
	var mu sync.Mutex
	var refused *filter.Reply
	dialer := *s.dialer
	dialer.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if rep := s.eng.AllowDial(d.Target, ap.Addr()); rep != nil {
			mu.Lock()
			refused = rep
			mu.Unlock()
			return errGuard
		}
		return nil
	}
	up, err := dialer.DialContext(ctx, "tcp", d.Target)
	if err != nil {
		mu.Lock()
		rep := refused
		mu.Unlock()
		if rep == nil {
			rep = s.eng.Latest().Unreachable(d.Target, relay.DialReason(err))
		}
		s.log.Log("action", "refuse", "target", d.LogTarget(), "reason", rep.Reason)
		relay.WriteReply(w, rep)
		return
	}
	conn, brw, ok := hijack(w)
	if !ok {
		up.Close()
		return
	}
	if !s.conns.Begin(conn) {
		conn.Close()
		up.Close()
		return
	}
	defer s.conns.Untrack(conn)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	s.log.Log(d.LogFields()...)
	pipe(withBuffered(conn, brw.Reader), up)
}

// pipe copies both ways until both directions ended, passing on each
// half-close.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "jr2 custodian: cannot take over the connection", http.StatusInternalServerError)
		return nil, nil, false
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, false
	}
	return conn, brw, true
}

// withBuffered returns c reading first what the HTTP server had already
// buffered from it.
func withBuffered(c net.Conn, br *bufio.Reader) net.Conn {
	if br == nil || br.Buffered() == 0 {
		return c
	}
	buf, _ := br.Peek(br.Buffered())
	return &prefixConn{Conn: c, prefix: append([]byte(nil), buf...)}
}

type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
