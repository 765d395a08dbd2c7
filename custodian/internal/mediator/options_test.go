package mediator

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
)

// In the mediator, "OPTIONS *" is decided like every
// request (net/http would answer it 200 itself): on a bound host the
// engine's 400, on an allowed unbound one the mediator's own 400, and
// nothing goes upstream.
func TestOptionsStarIsDecided(t *testing.T) {
	f := newFixture(t, true)
	for _, host := range []string{"api.example.com", "open.example.com"} {
		c, err := net.Dial("tcp", f.tcp)
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: host})
		io.WriteString(tc, "OPTIONS * HTTP/1.1\r\nHost: "+host+"\r\nAuthorization: Bearer jr2-held-EXAMPLE_TOKEN\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(tc)
		c.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 400 ") || !strings.HasSuffix(string(b), "jr2 custodian: the request target must be a path that starts with /") {
			t.Errorf("%s: OPTIONS *: %q", host, b)
		}
	}
	if got := f.tlsUp.received(); len(got) != 0 {
		t.Fatalf("OPTIONS * reached the upstream: %q", got)
	}
}
