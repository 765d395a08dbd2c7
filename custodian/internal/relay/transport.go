package relay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"jr2.dev/boundary/filter"
)

// ErrGuarded is a dial the guard refused: the address a name resolved to is
// in the dial guard's ranges.
var ErrGuarded = errors.New("the address it resolved to is guarded")

// GuardedDialer is base with the dial guard in Control: check runs on the
// address actually dialled, after resolution (so a rebinding cannot pass),
// and a non-nil reply refuses the dial with ErrGuarded. A nil check guards
// nothing.
func GuardedDialer(base *net.Dialer, check func(netip.Addr) *filter.Reply) *net.Dialer {
	d := *base
	if check == nil {
		return &d
	}
	d.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if check(ap.Addr()) != nil {
			return ErrGuarded
		}
		return nil
	}
	return &d
}

// MaxIdlePerTarget is how many idle connections the pool toward one
// upstream keeps. Each request in flight holds one upstream connection
// (HTTP/1.1), so a pool that keeps fewer idle connections than the
// requests a steady load has in flight closes the surplus after each burst
// and opens (handshakes) new ones for the next: at 32 concurrent clients
// and 16 kept, a fifth of the requests paid a TLS handshake. The pool is
// unbounded in use and keeps up to this many idle, each closed after
// IdleConnTimeout unused: a steady load below the cap opens no upstream
// connection once warm (TestSteadyLoadOpensNoUpstreamConnection).
const MaxIdlePerTarget = 1024

// UpstreamTransport is the pool toward one upstream: HTTP/1.1 only, TLS
// verified against roots and serverName (an IP literal is checked against
// the IP SAN), no proxy from the environment, no compression asked for, no
// header of Go's own, and idle connections kept up to MaxIdlePerTarget.
func UpstreamTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error), roots *x509.CertPool, serverName string) *http.Transport {
	return &http.Transport{
		Proxy:       nil,
		DialContext: dial,
		TLSClientConfig: &tls.Config{
			RootCAs:    roots,
			ServerName: serverName,
			NextProtos: []string{"http/1.1"},
			MinVersion: tls.VersionTLS12,
		},
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression:    true,
		MaxIdleConns:          0, // no limit across hosts: one Transport serves one target
		MaxIdleConnsPerHost:   MaxIdlePerTarget,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
