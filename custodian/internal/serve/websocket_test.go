package serve

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/wstest"
)

type wsSeen = wstest.Seen

func serveWebSocket(w http.ResponseWriter, r *http.Request, seen *wsSeen) {
	wstest.Handler("X-Api-Key", seen)(w, r)
}

const keyLabel = "[secret:KEY]"

// wsDial opens a CONNECT to target through the egress listener, TLS with
// the target's leaf, and sends an upgrade for path with the header lines.
func (f *fixture) wsDial(t *testing.T, target, path string, lines ...string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", f.egress)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d", target, resp.StatusCode)
	}
	tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{RootCAs: f.jca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
	must(t, wstest.Upgrade(tc, target, path, lines...))
	tbr := bufio.NewReader(tc)
	resp, err = wstest.ReadSwitch(tbr)
	must(t, err)
	return tc, tbr, resp
}

// A WebSocket client holding the stand-in talks to a bound WebSocket
// upstream through custodian serve: the upstream gets the value (and no
// extension offer), the agent reads the label in a text frame, a binary
// frame, three fragments around a ping, a frame cut into one-byte TLS
// records, and the close reason; the agent's frames reach the upstream
// byte for byte (a stand-in in one is not swapped).
func TestWebSocketThroughServe(t *testing.T) {
	f := newFixture(t, nil)
	c, br, resp := f.wsDial(t, f.up.target, "/v1/ws", "X-Api-Key: "+keySI)
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != wstest.Accept("dGhlIHNhbXBsZSBub25jZQ==") ||
		resp.Header.Get("X-Echo") != keyLabel || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		t.Fatalf("the 101: %d %v", resp.StatusCode, resp.Header)
	}
	want := wstest.Script(keyLabel)
	var raw []byte
	for i, w := range want {
		m, err := wstest.ReadMsg(br, &raw)
		if err != nil || m != w {
			t.Fatalf("message %d: %q %v, want %q", i, m, err, w)
		}
	}
	mask := []byte{1, 2, 3, 4}
	sent := append(wstest.Frame(true, wstest.OpText, []byte("hello "+keySI), mask),
		wstest.Frame(true, wstest.OpClose, wstest.ClosePayload(1000, "done"), mask)...)
	_, err := c.Write(sent)
	must(t, err)
	for _, w := range []wstest.Msg{{Op: wstest.OpText, Payload: "echo:hello " + keySI}, {Op: wstest.OpClose, Payload: string(wstest.ClosePayload(1000, "bye "+keyLabel))}} {
		m, err := wstest.ReadMsg(br, &raw)
		if err != nil || m != w {
			t.Fatalf("got %q %v, want %q", m, err, w)
		}
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("after the close: %q", rest)
	}
	if bytes.Contains(raw, []byte(keyValue)) {
		t.Fatal("the value reached the agent")
	}
	if got := f.up.ws.Value(); got != keyValue {
		t.Fatalf("the upstream got %q, want the value", got)
	}
	if f.up.ws.Extensions() {
		t.Fatal("the upstream was offered an extension")
	}
	if got := f.up.ws.Raw(); !bytes.Equal(got, sent) {
		t.Fatalf("the upstream got the agent's frames as %q, want %q", got, sent)
	}
	waitLog(t, f.log, "jr2.custodian action=intercept target="+f.up.target+" secret=KEY method=GET status=101\n")
}

// Each refusal of an upgrade, and each upstream fault, as documented:
// what the agent reads, and the log line; no value anywhere (the fixture
// checks every log line).
func TestWebSocketRefusals(t *testing.T) {
	f := newFixture(t, nil)
	t.Run("h2c", func(t *testing.T) {
		got := f.rawTLS(t, f.up.target, "GET /v1/x HTTP/1.1\r\nHost: "+f.up.target+"\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nX-Api-Key: "+keySI+"\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.HasSuffix(got, "jr2 custodian: an upgrade here is a GET with \"Upgrade: websocket\" and no body; send any other request without Upgrade") {
			t.Fatalf("%q", got)
		}
		waitLog(t, f.log, "jr2.custodian action=refuse target="+f.up.target+" reason=upgrade\n")
	})
	t.Run("control listener", func(t *testing.T) {
		c, err := net.Dial("tcp", f.control)
		must(t, err)
		defer c.Close()
		must(t, wstest.Upgrade(c, f.control, "/agents/a/surface", "Authorization: Bearer "+contract.StandIn(contract.TokenName)))
		resp, err := wstest.ReadSwitch(bufio.NewReader(c))
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || string(b) != "jr2 custodian: the control listener does not upgrade a connection; send the request without Upgrade" {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
	})
	t.Run("Host of another host", func(t *testing.T) {
		// Rule 3, as for any request. (A CONNECT to an unbound target is a
		// tunnel the Custodian never reads: no value can ride it; the
		// engine's 421 for an unbound target is TestDecideUpgradeRefusals.)
		got := f.rawTLS(t, f.up.target, "GET /v1/ws HTTP/1.1\r\nHost: evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: x\r\nSec-WebSocket-Version: 13\r\nX-Api-Key: "+keySI+"\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 421 ") || !strings.HasSuffix(got, "jr2 custodian: the Host header must name "+f.up.target) {
			t.Fatalf("%q", got)
		}
	})
	for _, c := range []struct{ mode, want string }{
		{"deflate", "jr2 custodian: " + "%s answered the upgrade with a WebSocket extension, which the Custodian cannot read to scrub; the connection was closed"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			_, br, resp := f.wsDial(t, f.up.target, "/v1/ws?mode="+c.mode, "X-Api-Key: "+keySI)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 502 || string(b) != fmt.Sprintf(c.want, f.up.target) {
				t.Fatalf("%d %q", resp.StatusCode, b)
			}
			if rest, _ := io.ReadAll(br); bytes.Contains(rest, []byte("text:")) {
				t.Fatalf("frame data passed on: %q", rest)
			}
			waitLog(t, f.log, "jr2.custodian action=intercept target="+f.up.target+" secret=KEY method=GET status=502\n")
		})
	}
	for _, mode := range []string{"masked", "huge"} {
		t.Run(mode, func(t *testing.T) {
			_, br, resp := f.wsDial(t, f.up.target, "/v1/ws?mode="+mode, "X-Api-Key: "+keySI)
			if resp.StatusCode != 101 {
				t.Fatalf("%d", resp.StatusCode)
			}
			var raw []byte
			m, err := wstest.ReadMsg(br, &raw)
			if err != nil || m != (wstest.Msg{Op: wstest.OpClose, Payload: string(wstest.ClosePayload(1002, "jr2 custodian: the upstream's WebSocket frames could not be read"))}) {
				t.Fatalf("%q %v", m, err)
			}
			if rest, _ := io.ReadAll(br); len(rest) != 0 {
				t.Fatalf("after the close: %q", rest)
			}
		})
	}
}

// The graceful stop closes an upgraded connection still open when the
// grace is over, as it closes a tunnel (the fixture's grace is 1 s).
func TestWebSocketClosedAtTheStop(t *testing.T) {
	f := newFixture(t, nil)
	c, br, resp := f.wsDial(t, f.up.target, "/v1/ws", "X-Api-Key: "+keySI)
	if resp.StatusCode != 101 {
		t.Fatalf("%d", resp.StatusCode)
	}
	if m, err := wstest.ReadMsg(br, nil); err != nil || m.Payload != "text:"+keyLabel {
		t.Fatalf("%q %v", m, err)
	}
	f.cancel()
	err := <-f.done
	f.done <- err // the fixture's cleanup waits for it too
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the upgraded connection was not closed at the stop: %v", err)
	}
}
