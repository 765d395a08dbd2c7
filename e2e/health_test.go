//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// testHealthLimits: the health listener against each host — at most 16
// connections (a 17th is closed at once, unanswered) and a connection idle
// 5 s is closed (docs/custodian.md's listener table).
func (w *world) testHealthLimits(t *testing.T) {
	// Whatever the harness's own readiness probe left open is idle: gone
	// after the idle limit.
	time.Sleep(5500 * time.Millisecond)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 16 {
		c, err := net.DialTimeout("tcp", w.run.Health, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		conns = append(conns, c)
		// Each of the 16 is served: a keep-alive probe answers 200.
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: health\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d of 16: %v %v; want 200", i+1, resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	extra, err := net.DialTimeout("tcp", w.run.Health, 5*time.Second)
	if err == nil {
		defer extra.Close()
		fmt.Fprintf(extra, "GET /healthz HTTP/1.1\r\nHost: health\r\n\r\n")
		extra.SetReadDeadline(time.Now().Add(3 * time.Second))
		if n, err := extra.Read(make([]byte, 64)); n > 0 || err == nil || isTimeout(err) {
			t.Fatalf("a 17th connection: read %d bytes, %v; want it closed unanswered", n, err)
		}
	}
	// The first of the 16, idle since its answer, is closed after 5 s.
	start := time.Now()
	// Envoy's idle timer fires a second late at most (6 s seen); 9 s is
	// the bound, well under the ~11 s its default drain made it.
	conns[0].SetReadDeadline(time.Now().Add(9 * time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("an idle health connection after %v: %v; want it closed", time.Since(start), err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
