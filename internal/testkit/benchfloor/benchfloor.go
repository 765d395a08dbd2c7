// Package benchfloor is the floor `make bench` measures the Custodian's
// hosts against: the least a TLS-intercepting proxy can do. It answers
// CONNECT, ends the client's TLS with a given leaf, opens one verified TLS
// connection to the CONNECT target and copies bytes both ways — no HTTP
// parsed, no header judged, no body scrubbed, nothing recorded. Any host
// that does the Custodian's work (custodian serve, Envoy with the module,
// the contained run's mediator) costs at least this much on the same
// machine and load, so the floor's ratio to direct is the ceiling of
// theirs: the limit a proxy's goal row states when it falls short.
//
// It is a benchmark's instrument, never part of a product path: it
// trusts whatever CONNECT names. Invariant: it carries each byte as it
// came, in both directions, and closes both sides when either ends.
package benchfloor

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"sync"
)

// Serve relays every connection l accepts until l is closed: each ends
// its client's TLS with leaf and dials its CONNECT target verified against
// roots.
func Serve(l net.Listener, leaf tls.Certificate, roots *x509.CertPool) {
	conf := &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"http/1.1"}}
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go relay(c, conf, roots)
	}
}

// relay is one client connection: CONNECT, TLS, then bytes.
func relay(c net.Conn, conf *tls.Config, roots *x509.CertPool) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect || br.Buffered() > 0 {
		return
	}
	host, _, err := net.SplitHostPort(req.Host)
	if err != nil {
		return
	}
	up, err := tls.Dial("tcp", req.Host, &tls.Config{RootCAs: roots, ServerName: host, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n"); err != nil {
		return
	}
	tc := tls.Server(c, conf)
	if err := tc.Handshake(); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); io.Copy(up, tc); up.CloseWrite() }()
	io.Copy(tc, up)
	tc.CloseWrite()
	wg.Wait()
}
