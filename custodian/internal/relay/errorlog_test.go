package relay

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"jr2.dev/boundary/internal/logline"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// The capture itself is logline's (ErrorLog, CaptureStdLog); this is what
// it is for here: the upstream Transport this package makes.

// lines receives each line written, one Write each.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// net/http's Transport writes to the standard logger, quoting what the
// upstream sent: an answer on an idle connection ("Unsolicited response
// received on idle HTTP channel starting with …") could carry an echoed
// value to stderr. CaptureStdLog makes it the contract's line.
func TestCaptureStdLogHidesAnUnsolicitedAnswer(t *testing.T) {
	const value = "sk-SENTINEL-unsolicited-0123456789"
	ca := testpki.NewCA(t, "upstream test CA")
	leaf := ca.Leaf(t, "127.0.0.1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		c.Read(buf)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		time.Sleep(100 * time.Millisecond) // the connection is idle now
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Echo: "+value+"\r\n\r\n")
		c.Read(buf)
	}()
	out := make(lines, 8)
	CaptureStdLog(logline.NewWriter(out, logline.Custodian))
	defer func() {
		log.SetOutput(os.Stderr)
		log.SetFlags(log.LstdFlags)
	}()
	var d net.Dialer
	tr := UpstreamTransport(d.DialContext, ca.Pool(), "127.0.0.1")
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://"+ln.Addr().String()+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	select {
	case got := <-out:
		if want := "jr2.custodian action=error listener=upstream reason=unsolicited-response\n"; got != want {
			t.Fatalf("the standard logger wrote %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Transport logged nothing of the unsolicited answer")
	}
}
