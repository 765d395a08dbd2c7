package relay

import (
	"net"
	"testing"
	"time"
)

// TestTrackerStop: the stop refuses new work, waits for the work in flight
// while the grace lasts, and then closes the connections left (a swapped
// one in its wrapper's place) and waits for their work to end.
func TestTrackerStop(t *testing.T) {
	var tr Tracker
	a, b := net.Pipe()
	defer b.Close()
	wrapped := &closeSeen{Conn: a, closed: make(chan struct{})}
	if !tr.Begin(a) {
		t.Fatal("Begin refused before the stop")
	}
	tr.Swap(a, wrapped)
	ended := make(chan struct{})
	go func() {
		<-wrapped.closed // the work ends when its connection is closed
		tr.Forget(wrapped)
		tr.End()
		close(ended)
	}()
	grace := make(chan struct{})
	stopped := make(chan struct{})
	go func() { tr.Stop(grace); close(stopped) }()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-stopped:
		t.Fatal("Stop returned while work was in flight and the grace lasted")
	case <-wrapped.closed:
		t.Fatal("a connection was closed before the grace ended")
	default:
	}
	if tr.Begin(nil) {
		t.Fatal("Begin took new work after the stop began")
	}
	close(grace)
	<-stopped
	<-ended
}

// TestTrackerWaitEnds: work that ends within the grace is waited for, and
// nothing is closed.
func TestTrackerWaitEnds(t *testing.T) {
	var tr Tracker
	a, b := net.Pipe()
	defer b.Close()
	c := &closeSeen{Conn: a, closed: make(chan struct{})}
	tr.Begin(c)
	go tr.Untrack(c)
	tr.Stop(nil)
	select {
	case <-c.closed:
		t.Fatal("the stop closed a connection whose work had ended")
	default:
	}
}

type closeSeen struct {
	net.Conn
	closed chan struct{}
}

func (c *closeSeen) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return c.Conn.Close()
}
