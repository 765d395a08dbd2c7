package relay

import (
	"net"
	"sync"
)

// ChanListener is a net.Listener fed by Push rather than by a socket: the
// connections a host has already read into (an intercepted TLS connection
// ended with a target's leaf, a contained run's connection whose first
// bytes were read) handed to an http.Server that serves them. It is safe
// for concurrent use.
type ChanListener struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
}

// NewChanListener returns a listener whose Addr is addr (the address the
// connections arrived on).
func NewChanListener(addr net.Addr) *ChanListener {
	return &ChanListener{ch: make(chan net.Conn), closed: make(chan struct{}), addr: addr}
}

// Push hands c to the server's Accept, waiting until it is taken; once the
// listener is closed it closes c instead.
func (l *ChanListener) Push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.closed:
		c.Close()
	}
}

// Accept returns the next pushed connection, or net.ErrClosed once Close
// was called.
func (l *ChanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and every Push waiting; it is safe to call more than
// once.
func (l *ChanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is the address given to NewChanListener.
func (l *ChanListener) Addr() net.Addr { return l.addr }
