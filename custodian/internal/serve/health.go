package serve

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/internal/hostlimits"
)

// The health listener is the one a peer can reach (0.0.0.0:15021), so a
// peer's idle connections must not be able to stop it: it holds at most
// healthMaxConns connections, refuses (closes) the ones beyond, and closes
// one idle for healthIdle.
const (
	healthMaxConns = hostlimits.HealthConnections
	healthIdle     = 5 * time.Second
)

func (s *Server) newHealthServer() *http.Server {
	srv := s.newServer("health", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.Method != http.MethodGet || r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "not found")
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.ReadHeaderTimeout = healthIdle
	srv.ReadTimeout = healthIdle
	srv.WriteTimeout = healthIdle
	srv.IdleTimeout = healthIdle
	srv.MaxHeaderBytes = 8 << 10
	return srv
}

// limitListener accepts at most max connections at a time; a connection
// beyond it is closed at once rather than queued, so the limit cannot be
// turned into a wait.
func limitListener(l net.Listener, max int) net.Listener {
	return &limited{Listener: l, sem: make(chan struct{}, max)}
}

type limited struct {
	net.Listener
	sem chan struct{}
}

func (l *limited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &releaseConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			c.Close()
		}
	}
}

type releaseConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *releaseConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the TCP connection: net/http does so before it
// closes one with an unread body, so the client reads the answer rather
// than a reset.
func (c *releaseConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// gated reads every accepted connection through relay.Gate, so a request
// target net/http would refuse itself reaches the engine (relay.Gate).
func gated(l net.Listener) net.Listener { return gatedListener{l} }

type gatedListener struct{ net.Listener }

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return relay.Gate(c, hostlimits.MaxHeaderBytes), nil
}
