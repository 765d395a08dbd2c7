package relay

import (
	"net"
	"sync"
	"time"
)

// Tracker is what a host's graceful stop needs beside http.Server's own:
// the connections no http.Server tracks (a hijacked tunnel, a WebSocket
// taken over, a raw connection a host reads itself), and the work in
// flight on them. The stop refuses new work, waits for the work in flight
// until its grace ends, then closes every connection left and waits for the
// work to end. It is safe for concurrent use; the zero value is ready.
type Tracker struct {
	mu       sync.Mutex
	stopping bool
	conns    map[net.Conn]struct{}
	work     sync.WaitGroup
}

// Begin registers one unit of work in flight and, when c is not nil, c as
// a connection the stop closes. It reports false once Stop began (nothing
// is registered; the caller closes c). Each true is ended by one End.
func (t *Tracker) Begin(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopping {
		return false
	}
	if c != nil {
		if t.conns == nil {
			t.conns = map[net.Conn]struct{}{}
		}
		t.conns[c] = struct{}{}
	}
	t.work.Add(1)
	return true
}

// Swap puts c in old's place among the connections the stop closes (the
// host wrapped old after Begin); when old is not there, nothing changes.
func (t *Tracker) Swap(old, c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.conns[old]; ok {
		delete(t.conns, old)
		t.conns[c] = struct{}{}
	}
}

// Forget takes c off the connections the stop closes (it is closed, or
// another closes it).
func (t *Tracker) Forget(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// End ends one unit of work Begin registered.
func (t *Tracker) End() { t.work.Done() }

// Untrack is Forget(c) and End: the end of a connection whose work ends
// with it (the shape relay.WebSocket's untrack takes).
func (t *Tracker) Untrack(c net.Conn) {
	t.Forget(c)
	t.End()
}

// Stopping refuses new work from now on: every Begin reports false.
func (t *Tracker) Stopping() {
	t.mu.Lock()
	t.stopping = true
	t.mu.Unlock()
}

// Wait waits for the work in flight to end, or for grace to be closed
// first (nil: no end but the work's); it reports whether the work ended.
func (t *Tracker) Wait(grace <-chan struct{}) bool {
	done := make(chan struct{})
	go func() { t.work.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-grace:
		return false
	}
}

// CloseAll closes every connection registered (each leaves as its owner
// sees it close).
func (t *Tracker) CloseAll() {
	t.mu.Lock()
	open := make([]net.Conn, 0, len(t.conns))
	for c := range t.conns {
		open = append(open, c)
	}
	t.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// Stop is the stop of a host with nothing to do between: Stopping, the
// work waited for until grace, then every connection left closed and the
// work waited for again.
func (t *Tracker) Stop(grace <-chan struct{}) {
	t.Stopping()
	if !t.Wait(grace) {
		t.CloseAll()
		t.Wait(nil)
	}
}

// After is a grace of d, for Wait and Stop.
func After(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}
