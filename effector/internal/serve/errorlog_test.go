package serve

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/internal/logline"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// TestHTTPServerErrorLog: what net/http prints itself
// on the Effector's server — a bad TLS handshake whose bytes the peer
// chose, a handler's panic whose value holds the peer's text — is one
// contract line each with a fixed word, and nothing the peer sent.
func TestHTTPServerErrorLog(t *testing.T) {
	const sentinel = "SENTINEL-peer-chose-7c2e9a jr2.effector action=start effect=forged"
	var out efftest.Buffer
	hs := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("a value the peer chose: " + r.Header.Get("X-Peer"))
	}), logline.NewWriter(&out, logline.Effector))
	ca := testpki.NewCA(t, "errorlog test CA")
	leaf := ca.Leaf(t, "127.0.0.1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
	done := make(chan struct{})
	go func() { defer close(done); hs.ServeTLS(ln, "", "") }()
	defer func() { hs.Close(); <-done }()

	// A handshake the peer breaks with its own bytes: a TLS record header,
	// then text where a ClientHello belongs.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "\x16\x03\x01\x00\x60"+sentinel+strings.Repeat("x", 0x60-len(sentinel)))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(c)
	c.Close()
	// A request whose handler panics with the peer's text.
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	req, _ := http.NewRequest("GET", "https://"+ln.Addr().String()+"/", nil)
	req.Header.Set("X-Peer", sentinel)
	if resp, err := cl.Do(req); err == nil {
		resp.Body.Close()
	}
	cl.CloseIdleConnections()

	want := []string{
		"jr2.effector action=error listener=effector reason=tls-handshake",
		"jr2.effector action=error listener=effector reason=panic",
	}
	deadline := time.Now().Add(10 * time.Second)
	for !(strings.Contains(out.String(), want[0]) && strings.Contains(out.String(), want[1])) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := out.String()
	for _, w := range want {
		if !strings.Contains(got, w+"\n") {
			t.Errorf("no line %q in\n%s", w, got)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if line != want[0] && line != want[1] {
			t.Errorf("a line that is not the contract's: %q", line)
		}
	}
	if strings.Contains(got, "SENTINEL") || strings.Contains(got, "127.0.0.1") {
		t.Errorf("the log holds what the peer chose:\n%s", got)
	}
}
