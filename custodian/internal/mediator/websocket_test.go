package mediator

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/mode"
	"jr2.dev/boundary/internal/testkit/wstest"
)

// The contained run carries a WebSocket to a bound target
// as the Custodian's hosts do — the stand-in swapped on the upgrade, every
// frame from the upstream scrubbed, the child's frames unchanged — and
// records it: the upgrade, the 101, each chunk of frames the child got,
// the child's own bytes as the request's body, and the end; no form of
// the value in any of it.
func TestWebSocket(t *testing.T) {
	f := newFixture(t, true)
	label := "Bearer [secret:EXAMPLE_TOKEN]"
	dial := func(t *testing.T, host string, lines ...string) (*tls.Conn, *bufio.Reader, int, string) {
		c, err := net.Dial("tcp", f.tcp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: host})
		if err := wstest.Upgrade(tc, host, "/ws", lines...); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(tc)
		resp, err := wstest.ReadSwitch(br)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == 101 && resp.Header.Get("X-Echo") != label {
			t.Errorf("the 101's echo: %q", resp.Header.Get("X-Echo"))
		}
		return tc, br, resp.StatusCode, string(b)
	}

	tc, br, st, _ := dial(t, "api.example.com", "Authorization: Bearer jr2-held-EXAMPLE_TOKEN")
	if st != 101 {
		t.Fatalf("the upgrade: %d", st)
	}
	var raw []byte
	for i, w := range wstest.Script(label) {
		if m, err := wstest.ReadMsg(br, &raw); err != nil || m != w {
			t.Fatalf("message %d: %q %v, want %q", i, m, err, w)
		}
	}
	mask := []byte{7, 1, 9, 3}
	sent := append(wstest.Frame(true, wstest.OpText, []byte("hello jr2-held-EXAMPLE_TOKEN"), mask),
		wstest.Frame(true, wstest.OpClose, wstest.ClosePayload(1000, "done"), mask)...)
	if _, err := tc.Write(sent); err != nil {
		t.Fatal(err)
	}
	for _, w := range []wstest.Msg{{Op: wstest.OpText, Payload: "echo:hello jr2-held-EXAMPLE_TOKEN"}, {Op: wstest.OpClose, Payload: string(wstest.ClosePayload(1000, "bye "+label))}} {
		if m, err := wstest.ReadMsg(br, &raw); err != nil || m != w {
			t.Fatalf("got %q %v, want %q", m, err, w)
		}
	}
	tc.Close()
	if bytes.Contains(raw, []byte(sentinel)) {
		t.Fatal("the value reached the child")
	}
	if got := f.tlsUp.ws.Value(); got != "Bearer "+sentinel {
		t.Fatalf("the upstream got %q", got)
	}
	if f.tlsUp.ws.Extensions() {
		t.Fatal("the upstream was offered an extension")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(f.tlsUp.ws.Raw(), sent) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.tlsUp.ws.Raw(); !bytes.Equal(got, sent) {
		t.Fatalf("the upstream got the child's frames as %q, want %q", got, sent)
	}

	// Refused: an upgrade toward an allowed host with no secret bound, and
	// an upgrade to another protocol toward the bound one.
	if _, _, st, body := dial(t, "open.example.com"); st != 400 || body != "jr2 custodian: no secret is bound to open.example.com:443; an upgrade (WebSocket) is carried only to a bound target" {
		t.Errorf("unbound: %d %q", st, body)
	}
	c, err := net.Dial("tcp", f.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	h2c := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "api.example.com"})
	io.WriteString(h2c, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nAuthorization: Bearer jr2-held-EXAMPLE_TOKEN\r\n\r\n")
	resp, err := wstest.ReadSwitch(bufio.NewReader(h2c))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)); resp.StatusCode != 400 || string(b) != "jr2 custodian: "+filter.UpgradeText {
		t.Errorf("h2c: %d %q", resp.StatusCode, b)
	}

	rs := f.records(t)
	runtest.AssertNoValue(t, "the bundle", f.bundle.Bytes(), sentinel)
	runtest.AssertNoValue(t, "the log", f.logged(), sentinel)
	if n := len(runtest.Find(rs, "http-response", runtest.Rec{"status": 101})); n != 1 {
		t.Errorf("%d 101 records, want 1", n)
	}
	ends := runtest.Find(rs, "http-response", runtest.Rec{"end": true})
	framed := false
	for _, e := range ends {
		if c, ok := e["chunks"].(float64); ok && c > 0 {
			framed = true
		}
	}
	if !framed {
		t.Errorf("no end record counts the frames' chunks: %v", ends)
	}
	if !bytes.Contains(f.bundle.Bytes(), []byte("[secret:EXAMPLE_TOKEN]")) {
		t.Error("the frames the child got are not in the bundle")
	}
	if !bytes.Contains(f.logged(), []byte("status=101")) {
		t.Errorf("no line for the WebSocket:\n%s", f.logged())
	}
}

// A mode other than live matches and replays requests whole: it refuses a
// WebSocket with a fixed text, and nothing reaches the upstream.
func TestWebSocketNeedsLive(t *testing.T) {
	f := newFixture(t, true)
	layer, err := mode.New(mode.Config{Mode: mode.ReadOnly}, mode.Names{}, f.m.o.Record)
	if err != nil {
		t.Fatal(err)
	}
	f.m.o.Mode = layer
	c, err := net.Dial("tcp", f.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "api.example.com"})
	wstest.Upgrade(tc, "api.example.com", "/ws", "Authorization: Bearer jr2-held-EXAMPLE_TOKEN")
	resp, err := wstest.ReadSwitch(bufio.NewReader(tc))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if want := "jr2 custodian: mode " + mode.ReadOnly + " matches and replays requests whole, and a WebSocket is not one; run it live"; resp.StatusCode != 403 || string(b) != want {
		t.Errorf("%d %q, want 403 %q", resp.StatusCode, b, want)
	}
	if n := f.tlsUp.ws.Upgrades(); n != 0 {
		t.Errorf("the upstream got %d upgrades", n)
	}
}
