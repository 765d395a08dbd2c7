package efftest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
)

// Upstream is a TLS server on 127.0.0.1 that counts the requests it got.
type Upstream struct {
	*httptest.Server
	Host string // 127.0.0.1
	Port int
	hits atomic.Int64
}

// Hits is how many requests reached a handler.
func (u *Upstream) Hits() int64 { return u.hits.Load() }

// StartTLS serves h over TLS with the PKI's leaf until the test ends.
func StartTLS(t testing.TB, pki *PKI, h http.Handler) *Upstream {
	u := &Upstream{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	srv.TLS = pki.Server.Clone()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u.Server = srv
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	u.Host = host
	u.Port, _ = strconv.Atoi(port)
	return u
}
