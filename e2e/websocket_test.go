//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
	"jr2.dev/boundary/internal/testkit/wstest"
)

const wsName = "WS_KEY"

// TestWebSocket runs against each host: a WebSocket client holding
// only the stand-in talks to a real WebSocket upstream on loopback through
// the Custodian. The upstream gets the value; the agent reads the label in
// a text frame, a binary frame, three fragments around a ping, a frame cut
// into one-byte TLS records, and the close reason; the agent's frames
// reach the upstream byte for byte. Then the refusals: an h2c upgrade, an
// upgrade on the control listener, a 101 selecting permessage-deflate, a
// masked upstream frame, a 64-bit length with its top bit set. No log
// line holds a value.
func TestWebSocket(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) { testWebSocket(t, host) })
	}
}

type wsPod struct {
	run    *Running
	target string
	conf   *tls.Config
	seen   *wstest.Seen
	value  string
	env    []string // the Harness's environment (harness.env), toward this run
}

func newWSPod(t *testing.T, host Host) *wsPod {
	tmp := t.TempDir()
	p := &wsPod{seen: &wstest.Seen{}, value: sentinel(t, wsName)}
	upCA := testpki.NewCA(t, "e2e websocket upstream CA")
	p.target = serveTLS(t, upCA, "127.0.0.1", wstest.Handler("X-Api-Key", p.seen))
	orch := serveLoopback(t, http.NotFoundHandler())
	m := manifest{Pod: podName, Orchestrator: orch, Sandbox: podName,
		Secrets: []manifestSecret{{Name: wsName, Hosts: []string{p.target}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}}}}
	dir, roots := renderLocalPod(t, tmp, host, m, upCA, map[string]string{wsName: p.value, contract.TokenName: sentinel(t, contract.TokenName)})
	p.conf = &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}}
	p.run = host.Start(t, dir, "")
	// The Harness's environment, as render wrote it, the proxy being the
	// running egress listener. NO_PROXY is left out: the bound target is
	// on loopback here, which it names.
	hb, err := os.ReadFile(filepath.Join(dir, "harness.env"))
	if err != nil {
		t.Fatal(err)
	}
	p.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "LANG=C.UTF-8"}
	for _, kv := range strings.Split(strings.TrimSuffix(string(hb), "\n"), "\n") {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "NO_PROXY":
			continue
		case "HTTPS_PROXY":
			kv = k + "=http://" + p.run.Egress
		}
		p.env = append(p.env, kv)
	}
	return p
}

// dial opens an intercepted TLS connection and sends a WebSocket upgrade
// for path with the stand-in.
func (p *wsPod) dial(t *testing.T, path string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", p.run.Egress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", p.target, p.target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(&readerConn{Conn: c, r: br}, p.conf)
	if err := wstest.Upgrade(tc, p.target, path, "X-Api-Key: "+standIn(wsName)); err != nil {
		t.Fatal(err)
	}
	tbr := bufio.NewReader(tc)
	resp, err = wstest.ReadSwitch(tbr)
	if err != nil {
		t.Fatalf("the upgrade's answer: %v", err)
	}
	return tc, tbr, resp
}

func testWebSocket(t *testing.T, host Host) {
	p := newWSPod(t, host)
	label := "[secret:" + wsName + "]"
	si := standIn(wsName)
	run(t, "a WebSocket client through the Custodian", func(t *testing.T) {
		c, br, resp := p.dial(t, "/v1/ws")
		if resp.StatusCode != 101 || resp.Header.Get("X-Echo") != label || resp.Header.Get("Sec-WebSocket-Accept") != wstest.Accept("dGhlIHNhbXBsZSBub25jZQ==") {
			t.Fatalf("the 101: %d %v", resp.StatusCode, resp.Header)
		}
		var raw []byte
		for i, w := range wstest.Script(label) {
			if m, err := wstest.ReadMsg(br, &raw); err != nil || m != w {
				t.Fatalf("message %d: %q %v, want %q", i, m, err, w)
			}
		}
		mask := []byte{7, 1, 9, 3}
		sent := append(wstest.Frame(true, wstest.OpText, []byte("hello "+si), mask),
			wstest.Frame(true, wstest.OpClose, wstest.ClosePayload(1000, "done"), mask)...)
		if _, err := c.Write(sent); err != nil {
			t.Fatal(err)
		}
		for _, w := range []wstest.Msg{{Op: wstest.OpText, Payload: "echo:hello " + si}, {Op: wstest.OpClose, Payload: string(wstest.ClosePayload(1000, "bye "+label))}} {
			if m, err := wstest.ReadMsg(br, &raw); err != nil || m != w {
				t.Fatalf("got %q %v, want %q", m, err, w)
			}
		}
		if bytes.Contains(raw, []byte(p.value)) {
			t.Fatal("the value reached the agent")
		}
		if got := p.seen.Value(); got != p.value {
			t.Fatalf("the upstream got %q, want the value", got)
		}
		if p.seen.Extensions() {
			t.Fatal("the upstream was offered an extension")
		}
		// The upstream closes after its close frame; what it read of the
		// agent is final once the agent's side is done.
		c.Close()
		deadline := time.Now().Add(10 * time.Second)
		for !bytes.Equal(p.seen.Raw(), sent) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := p.seen.Raw(); !bytes.Equal(got, sent) {
			t.Fatalf("the upstream got the agent's frames as %q, want %q", got, sent)
		}
		waitLines(t, p.run, regexp.QuoteMeta("jr2.custodian action=intercept target="+p.target+" secret="+wsName+" method=GET status=101"), 1)
	})
	for _, c := range wsClients() {
		run(t, c.name, func(t *testing.T) { p.realClient(t, c.name, c.script, c.bin, c.env, label, si) })
	}
	// rawIntercept sends one request inside the intercepted TLS to the
	// bound target and reads its answer.
	rawIntercept := func(t *testing.T, req string) (*http.Response, string) {
		c, err := net.Dial("tcp", p.run.Egress)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", p.target, p.target)
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		tc := tls.Client(&readerConn{Conn: c, r: br}, p.conf)
		io.WriteString(tc, req)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp, string(b)
	}
	run(t, "an h2c upgrade", func(t *testing.T) {
		// Envoy's HTTP/1 codec drops an h2c upgrade's headers before any
		// filter: the request goes on as a plain GET (no value can ride
		// it: the upgrade is refused, not carried). custodian serve
		// answers the engine's 400.
		line := regexp.QuoteMeta("jr2.custodian action=refuse target=" + p.target + " reason=upgrade")
		before := countLines(p.run, line)
		resp, b := rawIntercept(t, fmt.Sprintf("GET /v1/x HTTP/1.1\r\nHost: %s\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nX-Api-Key: %s\r\n\r\n", p.target, si))
		if _, envoy := host.(envoyHost); envoy {
			if resp.StatusCode == 101 {
				t.Fatalf("Envoy carried an h2c upgrade")
			}
			return
		}
		if resp.StatusCode != 400 || b != "jr2 custodian: "+filter.UpgradeText {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
		waitLines(t, p.run, line, before+1)
	})
	// Any other protocol: the engine's 400 and line in both hosts (in
	// Envoy, its connection manager refuses a token it has no upgrade
	// config for, and the render maps that onto the engine's answer).
	run(t, "an upgrade to another protocol", func(t *testing.T) {
		line := regexp.QuoteMeta("jr2.custodian action=refuse target=" + p.target + " reason=upgrade")
		before := countLines(p.run, line)
		resp, b := rawIntercept(t, fmt.Sprintf("GET /v1/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: TLS/1.0\r\nConnection: Upgrade\r\nX-Api-Key: %s\r\n\r\n", p.target, si))
		if resp.StatusCode != 400 || b != "jr2 custodian: "+filter.UpgradeText {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
		waitLines(t, p.run, line, before+1)
	})
	run(t, "an upgrade to another protocol on the control listener", func(t *testing.T) {
		c, err := net.Dial("tcp", p.run.Control)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET /agents/a1/surface HTTP/1.1\r\nHost: %s\r\nUpgrade: TLS/1.0\r\nConnection: Upgrade\r\nAuthorization: Bearer %s\r\n\r\n", p.run.Control, standIn(contract.TokenName))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != 400 || string(b) != "jr2 custodian: "+filter.ControlUpgradeText {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
	})
	run(t, "an upgrade on the control listener", func(t *testing.T) {
		c, err := net.Dial("tcp", p.run.Control)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		wstest.Upgrade(c, p.run.Control, "/agents/a1/surface", "Authorization: Bearer "+standIn(contract.TokenName))
		resp, err := wstest.ReadSwitch(bufio.NewReader(c))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != 400 || string(b) != "jr2 custodian: "+filter.ControlUpgradeText {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
	})
	run(t, "a 101 selecting permessage-deflate", func(t *testing.T) {
		_, br, resp := p.dial(t, "/v1/ws?mode=deflate")
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		want := "jr2 custodian: " + p.target + " answered the upgrade with a WebSocket extension, which the Custodian cannot read to scrub; the connection was closed"
		if resp.StatusCode != 502 || string(b) != want {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
		if rest, _ := io.ReadAll(br); bytes.Contains(rest, []byte("text:")) {
			t.Fatalf("frame data passed on: %q", rest)
		}
	})
	for _, mode := range []string{"masked", "huge"} {
		run(t, "an upstream frame that does not read: "+mode, func(t *testing.T) {
			_, br, resp := p.dial(t, "/v1/ws?mode="+mode)
			if resp.StatusCode != 101 {
				t.Fatalf("%d", resp.StatusCode)
			}
			m, err := wstest.ReadMsg(br, nil)
			if err != nil || m != (wstest.Msg{Op: wstest.OpClose, Payload: string(wstest.ClosePayload(1002, filter.ClosedText))}) {
				t.Fatalf("%q %v", m, err)
			}
		})
	}
	run(t, "no line holds a value or a stand-in", func(t *testing.T) {
		for _, l := range p.run.out.Lines() {
			if strings.Contains(l, p.value) || strings.Contains(l, "jr2-held-") {
				t.Errorf("%q", l)
			}
		}
	})
}

// wsClients are the real WebSocket clients the suite runs: Node's ws
// package on Node 24 (e2e/node/ws.js, npm ci in e2e/node) and Python's
// websockets 15 (e2e/python/ws.py, Debian's python3 in a venv in
// .cache/python-ws); make test installs both.
func wsClients() []struct{ name, script, bin, env string } {
	return []struct{ name, script, bin, env string }{
		{"node ws", filepath.Join(suiteDir(), "node", "ws.js"), node24Bin(), ""},
		{"python websockets", filepath.Join(suiteDir(), "python", "ws.py"), filepath.Join(suiteDir(), "..", ".cache", "python-ws", "venv", "bin", "python"), ""},
	}
}

// realClient runs one of wsClients through the Custodian with the
// Harness's environment: every message reads the label, the agent's
// message reaches the upstream with its stand-in unswapped, and the close
// reason is scrubbed.
func (p *wsPod) realClient(t *testing.T, name, script, bin, extraEnv, label, si string) {
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("JR2_REQUIRE_ALL") == "1" {
			t.Fatalf("%s: no %s (make test installs it): %v", name, bin, err)
		}
		t.Skipf("SKIP: no %s (make test installs it); %s is not exercised", bin, name)
	}
	spec := fmt.Sprintf(`{"url":"wss://%s/v1/ws","headers":[["x-api-key",%q]],"send":["hello from %s %s"]}`, p.target, si, name, si)
	cmd := exec.Command(bin, script, spec)
	cmd.Env = p.env
	if extraEnv != "" {
		cmd.Env = append(append([]string(nil), p.env...), extraEnv)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	want := strings.Join([]string{
		`{"type":"text","data":"text:` + label + `"}`,
		`{"type":"binary","data":"` + base64.StdEncoding.EncodeToString([]byte("\x00bin:"+label)) + `"}`,
		`{"type":"text","data":"frag:` + label + `"}`,
		`{"type":"text","data":"chunks:` + label + `"}`,
		`{"type":"text","data":"echo:hello from ` + name + ` ` + si + `"}`,
		`{"type":"close","code":1000,"reason":"bye ` + label + `"}`,
	}, "\n") + "\n"
	if err != nil || string(out) != want {
		t.Fatalf("%s: %v, printed\n%s\nwant\n%s\n%s\nthe host's lines:\n%s", name, err, out, want, stderr.String(),
			strings.Join(p.run.out.matching(func(l string) bool { return strings.Contains(l, "jr2.custodian") }), "\n"))
	}
	if got := p.seen.Value(); got != p.value {
		t.Fatalf("the upstream got %q, want the value", got)
	}
	if p.seen.Extensions() {
		t.Fatal("the upstream was offered an extension")
	}
}
