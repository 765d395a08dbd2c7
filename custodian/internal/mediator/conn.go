package mediator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/custodian/internal/sni"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/contract"
)

// recordTLS is the first byte of a TLS record carrying a handshake.
const recordTLS = 0x16

// alertAccessDenied is a TLS fatal alert, access_denied (RFC 8446 §6),
// in a record a TLS 1.2 or 1.3 client reads before any ServerHello.
var alertAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31}

// literalReply answers an HTTP request made to an IP address.
const literalReply = "jr2 custodian: a connection to an IP address is denied; name the host, and list it in the policy's allow_hosts\n"

// connInfo is what the mediator knows of a connection it hands to its HTTP
// server: where it was dialled, and, once decided, the target every
// request on it goes to.
type connInfo struct {
	port    uint16 // the port dialled
	scheme  string // "https" once TLS ended here, else "http"
	host    string // the allowed target's host; "" on a plain connection
	attempt uint64 // the egress-attempt that allowed host
}

// target is the canonical host:port of an allowed connection.
func (ci *connInfo) target() string { return contract.JoinTarget(ci.host, int(ci.port)) }

// hostHeader is the Host the upstream gets: the host, with the port when
// it is not the scheme's default.
func (ci *connInfo) hostHeader() string {
	if ci.port == defaultPort(ci.scheme) {
		return ci.host
	}
	return ci.target()
}

func defaultPort(scheme string) uint16 {
	if scheme == "https" {
		return 443
	}
	return 80
}

type ctxKey struct{}

// infoConn carries its connInfo to the HTTP server's handlers.
type infoConn struct {
	net.Conn
	info *connInfo
}

func connContext(ctx context.Context, c net.Conn) context.Context {
	if ic, ok := c.(*infoConn); ok {
		return context.WithValue(ctx, ctxKey{}, ic.info)
	}
	return ctx
}

// bufConn reads through r first: the bytes peeked or buffered before.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// trackedConn leaves the mediator's set of open connections when closed.
type trackedConn struct {
	net.Conn
	m *Mediator
}

func (c *trackedConn) Close() error {
	c.m.conns.Forget(c)
	return c.Conn.Close()
}

// serveConn reads the first byte of a connection on a caught port and
// sends it down the TLS or the HTTP path. port, when not 0, is the port
// the connection stands for. Every caught port is served alike:
//
//   - 0x16 (a TLS handshake): the SNI names the host, the dialled port is
//     the port. Denied: a fatal access_denied alert, nothing else. Allowed:
//     TLS ends with the run CA's leaf for the host, and each request on it
//     goes upstream over TLS.
//   - anything else is HTTP/1.1: a CONNECT host:port (the explicit proxy,
//     "via proxy") is decided, answered 200 and then read again like a new
//     connection to that target; an absolute URL (proxy) or an origin-form
//     request (its Host, "via host") is decided per request and goes
//     upstream in the scheme it came in. Denied: 403, a jr2 custodian body.
//   - a connection to any address but the mediator's own is a literal-IP
//     dial (the child's DNS only ever answers the mediator's address): it
//     is recorded with an empty host and the address dialled, and denied.
//     So is a ClientHello without SNI, and a Host or CONNECT naming an IP.
//
// Every request the HTTP server reads is decided by the policy (which
// host) and then by the engine (the request): net/http answers nothing
// itself ("OPTIONS *" is a 400, not its 200).
func (m *Mediator) serveConn(raw net.Conn, port uint16) {
	c := &trackedConn{Conn: raw, m: m}
	m.conns.Swap(raw, c)
	dst, _ := netip.ParseAddrPort(c.LocalAddr().String())
	if port == 0 {
		port = dst.Port()
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), port)
	c.SetReadDeadline(time.Now().Add(m.o.HandshakeTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	bc := &bufConn{Conn: c, r: br}
	if dst.Addr() != m.o.Addr {
		m.admit("", dst.Port(), viaIP, dst.Addr().String(), "")
		if first[0] == recordTLS {
			c.Write(alertAccessDenied)
		} else {
			io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: "+
				strconv.Itoa(len(literalReply))+"\r\n\r\n"+literalReply)
		}
		c.Close()
		return
	}
	if first[0] == recordTLS {
		m.serveTLS(bc, dst.Port(), nil)
		return
	}
	c.SetReadDeadline(time.Time{})
	m.feed.Push(&infoConn{Conn: bc, info: &connInfo{port: dst.Port(), scheme: "http"}})
}

// serveTLS reads the ClientHello of c, dialled on port, and, when allowed
// (or already allowed by a CONNECT: info), ends TLS with the run CA's leaf
// for the host and hands the connection to the HTTP server.
func (m *Mediator) serveTLS(c net.Conn, port uint16, info *connInfo) {
	c.SetReadDeadline(time.Now().Add(m.o.HandshakeTimeout))
	name, rc, err := sni.Peek(c)
	if info == nil {
		var reason string
		if err != nil {
			reason = "malformed"
			var se *sni.Error
			if errors.As(err, &se) {
				reason = se.Reason
			}
			name = ""
		}
		via := viaSNI
		if name == "" && err == nil {
			via = viaIP // no server_name: the client dialled an address
		}
		ci, _ := m.admit(name, port, via, "", reason)
		if ci == nil {
			c.Write(alertAccessDenied)
			c.Close()
			return
		}
		info = ci
	} else if err != nil {
		c.Close()
		return
	}
	leaf, err := m.o.CA.Leaf(info.host)
	if err != nil {
		c.Close()
		return
	}
	tc := tls.Server(rc, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(context.Background(), m.o.HandshakeTimeout)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	info.scheme = "https"
	m.feed.Push(&infoConn{Conn: tc, info: info})
}

// admit records an attempt to reach host:port, decides it by the policy
// and records the decision; it returns the allowed connection's info.
// host is "" when none could be read (addr, or reason, says why): denied.
// A host that holds a form of a held value is recorded with the value's
// label in its place, "scrubbed", and denied by ruleValueInName, whatever
// the policy says. An attempt that cannot be recorded is denied. The
// denied reply is for the host as recorded.
func (m *Mediator) admit(host string, port uint16, via, addr, reason string) (*connInfo, *filter.Reply) {
	shown, scrubbed := m.scrubName(host)
	seq, err := m.record(bundle.KindEgressAttempt, egressAttempt{Host: shown, Port: port, Via: via, Addr: addr, Error: reason, Scrubbed: scrubbed})
	rule, ok := policy.DenyRule, false
	switch {
	case scrubbed:
		rule = ruleValueInName
	case host != "":
		rule, ok = m.o.Policy.Allows(host, port)
	}
	if err != nil {
		ok = false
	}
	dec := egressDecision{Attempt: seq, Decision: "allow", Host: shown, Port: port, Rule: rule, Scrubbed: scrubbed}
	if !ok {
		dec.Decision = "deny"
		m.recordDenial(bundle.KindEgressDecision, dec)
		target := addr
		if host != "" {
			target = shown
		}
		m.refuseLog(target+":"+strconv.Itoa(int(port)), rule)
		return nil, deniedReply(shown, port, rule)
	}
	if _, err := m.record(bundle.KindEgressDecision, dec); err != nil {
		return nil, deniedReply(shown, port, rule)
	}
	return &connInfo{port: port, host: host, attempt: seq}, nil
}

// admitOrRefuse admits an attempt an HTTP request made: to name:port when
// named (Authority accepted authority), else to no host. A denied attempt
// is answered 403 on w and gives nil.
func (m *Mediator) admitOrRefuse(w http.ResponseWriter, authority, name string, port uint16, named bool, via string) *connInfo {
	if !named {
		m.admitUnnamed(authority, port, via)
		relay.WriteReply(w, deniedReply("", port, policy.DenyRule))
		return nil
	}
	ci, rep := m.admit(name, port, via, "", "")
	if ci == nil {
		relay.WriteReply(w, rep)
		return nil
	}
	return ci
}

// admitUnnamed records and denies an attempt whose authority s names no
// host: an IP literal (a literal-IP dial, via ip, its address recorded),
// or something else ("not-a-host").
func (m *Mediator) admitUnnamed(s string, port uint16, via string) {
	h := s
	if hh, _, err := net.SplitHostPort(s); err == nil {
		h = hh
	}
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && a.Zone() == "" {
		m.admit("", port, viaIP, a.String(), "")
		return
	}
	m.admit("", port, via, "", "not-a-host")
}

// deniedReply is the 403 for a host the policy does not allow, or (rule
// ruleValueInName) whose name held a form of a held value; host is as
// recorded, the value's label in place of its form.
func deniedReply(host string, port uint16, rule string) *filter.Reply {
	what := "a destination without a host name (an IP address, or none)"
	if host != "" {
		what = contract.JoinTarget(host, int(port))
	}
	if rule == ruleValueInName {
		return &filter.Reply{Status: http.StatusForbidden, Reason: rule,
			Body: "jr2 custodian: " + what + " is denied: its name holds a form of a held value (shown by its label); a value is never sent in a name\n"}
	}
	return &filter.Reply{Status: http.StatusForbidden, Reason: policy.DenyRule,
		Body: "jr2 custodian: " + what + " is not allowed by the run's policy; list the host in allow_hosts to allow it\n"}
}

// serveHTTP is every request the HTTP server reads.
func (m *Mediator) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.conns.Begin(nil) {
		relay.WriteReply(w, &filter.Reply{Status: http.StatusServiceUnavailable, Body: "jr2 custodian: the run is ending\n"})
		return
	}
	defer m.conns.End()
	info, _ := r.Context().Value(ctxKey{}).(*connInfo)
	if info == nil {
		return
	}
	if info.host != "" {
		m.forward(w, r, info)
		return
	}
	var via string
	var name string
	var port uint16
	var ok bool
	scheme := "http"
	switch {
	case r.Method == http.MethodConnect:
		m.connect(w, r, info)
		return
	case r.URL.IsAbs():
		via = viaProxy
		scheme = strings.ToLower(r.URL.Scheme)
		if scheme != "http" && scheme != "https" {
			relay.WriteReply(w, &filter.Reply{Status: http.StatusBadRequest, Body: "jr2 custodian: the proxy carries http and https URLs only\n"})
			return
		}
		name, port, ok = Authority(r.URL.Host, defaultPort(scheme))
	default:
		// The port dialled is the target's; forward checks that the
		// Host names it.
		via = viaHost
		name, _, ok = Authority(r.Host, info.port)
		port = info.port
	}
	ci := m.admitOrRefuse(w, r.Host, name, port, ok, via)
	if ci == nil {
		return
	}
	ci.scheme = scheme
	m.forward(w, r, ci)
}

// connect is the explicit proxy's CONNECT: decided like any attempt,
// answered 200, then read again as a new connection to the target.
func (m *Mediator) connect(w http.ResponseWriter, r *http.Request, info *connInfo) {
	name, port, ok := Authority(r.Host, 443)
	ci := m.admitOrRefuse(w, r.Host, name, port, ok, viaProxy)
	if ci == nil {
		return
	}
	hj, okh := w.(http.Hijacker)
	if !okh {
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	if ic, ok := conn.(*infoConn); ok {
		conn = ic.Conn // the connection under the plain one's info
	}
	// What the server had buffered past the CONNECT, then the connection:
	// the hijacked reader must not be read again.
	buffered, _ := brw.Reader.Peek(brw.Reader.Buffered())
	bc := &bufConn{Conn: conn, r: bufio.NewReader(io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), conn))}
	conn.SetReadDeadline(time.Now().Add(m.o.HandshakeTimeout))
	first, err := bc.r.Peek(1)
	if err != nil {
		conn.Close()
		return
	}
	if first[0] == recordTLS {
		m.serveTLS(bc, port, ci)
		return
	}
	conn.SetReadDeadline(time.Time{})
	ci.scheme = "http"
	m.feed.Push(&infoConn{Conn: bc, info: ci})
}

// Authority reads a host[:port] the child sent (a Host header, a CONNECT
// target, a URL's host): the host lowercased, without a trailing dot, and
// the port (def when none is written). ok is false for anything that is
// not a host name by the one grammar (package contract; an IP literal is
// refused, since a contained run never dials one), and for a
// bad port; the port is then still def or the one written.
func Authority(s string, def uint16) (host string, port uint16, ok bool) {
	port = def
	h := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.Contains(s[i:], "]") {
		h = s[:i]
		p := s[i+1:]
		n, ok := contract.PortNumber(p)
		if !ok {
			return "", def, false
		}
		port = uint16(n)
	}
	h = strings.TrimSuffix(contract.Lower(h), ".")
	if contract.CheckName(h) != nil {
		return "", port, false
	}
	return h, port, true
}
