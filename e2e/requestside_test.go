//go:build linux

package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// TestRequestSide runs the request rows Envoy's codec could change
// against each host, on a hop pod of its own: what Envoy's HTTP/1 codec or connection manager changed
// or refused before the module saw it, now the engine's answer and line in
// both hosts — a method that is the stand-in (row 1), a repeated
// authorization (rows 2, 3), CONNECT inside the intercepted TLS (row 4),
// an absolute-form target with userinfo (row 5), a fragment (row 6), IIS's
// %u escape (row 7), and the lines of tunnels that fail (row 10). Each
// case asserts the status, the exact body, that nothing reached the
// upstream, and the jr2.custodian line, which never carries the name the
// agent chose.
func TestRequestSide(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) { testRequestSide(t, host) })
	}
}

// sideCase is one request on an intercepted connection (or, with control,
// on the control listener) and what both hosts answer.
type sideCase struct {
	name    string
	raw     string // the request; %[1]s is the target, %[2]s HOP_KEY's stand-in, %[3]s the token's
	control bool
	status  int
	body    string // after "jr2 custodian: "
	line    string // the refusal line, after "jr2.custodian "; %[1]s is the target or the Orchestrator
}

func testRequestSide(t *testing.T, host Host) {
	p := newHopPod(t, host)
	si, tok := standIn(hopName), standIn(contract.TokenName)
	const connectText = "method CONNECT is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"
	cases := []sideCase{
		{name: "row 1 the stand-in as the method", raw: si + " /v1/x HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\nConnection: close\r\n\r\n",
			status: 405, body: "method " + si + " is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", line: "action=refuse target=%[1]s reason=method"},
		{name: "row 1 a method neither host knows", raw: "BREW /v1/x HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\nConnection: close\r\n\r\n",
			status: 405, body: "method BREW is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", line: "action=refuse target=%[1]s reason=method"},
		{name: "row 2 authorization twice beside a swapped key", raw: "GET /v1/x HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\nauthorization: a\r\nauthorization: b\r\nConnection: close\r\n\r\n",
			status: 400, body: "header authorization was sent more than once; send it once", line: "action=refuse target=%[1]s reason=duplicate-header"},
		{name: "row 2 authorization holding a list", raw: "GET /v1/x HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\nauthorization: a,b\r\nConnection: close\r\n\r\n",
			status: 400, body: "header authorization was sent more than once; send it once", line: "action=refuse target=%[1]s reason=duplicate-header"},
		{name: "row 3 the token's bearer twice on the control listener", control: true,
			raw:    "GET /agents/a1/surface HTTP/1.1\r\nHost: %[1]s\r\nauthorization: Bearer %[3]s\r\nauthorization: Bearer %[3]s\r\nConnection: close\r\n\r\n",
			status: 400, body: "header authorization was sent more than once; send it once", line: "action=refuse target=%[1]s reason=duplicate-header"},
		{name: "row 4 CONNECT inside the intercepted TLS", raw: "CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\n\r\n",
			status: 405, body: connectText, line: "action=refuse target=%[1]s reason=method"},
		{name: "row 4 CONNECT to a target without a port inside the TLS", raw: "CONNECT elsewhere.example HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\n\r\n",
			status: 405, body: connectText, line: "action=refuse target=%[1]s reason=method"},
		{name: "row 5 absolute form with the stand-in as userinfo", raw: "GET https://user:%[2]s@%[1]s/v1/x HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\nConnection: close\r\n\r\n",
			status: 400, body: filter.NotAPathText, line: "action=refuse target=%[1]s reason=path"},
		{name: "row 5 absolute form on the control listener", control: true,
			raw:    "GET http://%[1]s/agents/a1/surface HTTP/1.1\r\nHost: %[1]s\r\nauthorization: Bearer %[3]s\r\nConnection: close\r\n\r\n",
			status: 404, body: "not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch", line: "action=refuse target=%[1]s reason=route"},
		{name: "row 6 a fragment hiding dot segments", raw: "GET /v1/x#/../../admin HTTP/1.1\r\nHost: %[1]s\r\nx-api-key: %[2]s\r\nConnection: close\r\n\r\n",
			status: 400, body: filter.FragmentText, line: "action=refuse target=%[1]s reason=path"},
		{name: "row 6 a fragment on the control listener", control: true,
			raw:    "GET /agents/a1/surface#x HTTP/1.1\r\nHost: %[1]s\r\nauthorization: Bearer %[3]s\r\nConnection: close\r\n\r\n",
			status: 404, body: "not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch", line: "action=refuse target=%[1]s reason=route"},
	}
	for _, c := range cases {
		run(t, c.name, func(t *testing.T) {
			// The control listener's lines name the Orchestrator, a
			// loopback address of the suite's.
			line := regexp.QuoteMeta("jr2.custodian " + fmt.Sprintf(c.line, p.target))
			if c.control {
				line = strings.Replace(regexp.QuoteMeta("jr2.custodian "+c.line), "%\\[1\\]s", `127\.0\.0\.1:\d+`, 1)
			}
			before := countLines(p.run, line)
			drain(p.hits)
			raw := fmt.Sprintf(c.raw, p.target, si, tok)
			var resp *http.Response
			var body string
			if c.control {
				resp, body = p.plainAnswer(t, p.run.Control, fmt.Sprintf(c.raw, p.run.Control, si, tok))
			} else {
				resp, body = p.interceptAnswer(t, raw)
			}
			if want := "jr2 custodian: " + c.body; resp.StatusCode != c.status || body != want {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body, c.status, want)
			}
			// The engine's answer is text/plain in UTF-8 in every host,
			// whichever of Envoy's own refusals stands in for it.
			if got, want := resp.Header.Get("content-type"), "text/plain; charset=utf-8"; got != want {
				t.Errorf("content-type %q, want %q", got, want)

			}
			if got := drain(p.hits); len(got) != 0 {
				t.Errorf("a refused request reached the upstream: %q", got)
			}
			waitLines(t, p.run, line, before+1)
		})
	}

	// Row 7: IIS reads %u002e as '.'; the engine refuses every '%' that
	// begins no %XX escape. The module sees the path as sent; custodian
	// serve reads each request head before net/http, which would refuse
	// the request line itself (relay.Gate): both answer the engine's 400
	// and write its line.
	run(t, "row 7 an IIS %u escape", func(t *testing.T) {
		drain(p.hits)
		line := regexp.QuoteMeta("jr2.custodian action=refuse target=" + p.target + " reason=encoded-path")
		before := countLines(p.run, line)
		status, body := p.interceptRoundTrip(t, fmt.Sprintf("GET /v1/%%u002e%%u002e/admin HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.target, si))
		if want := "jr2 custodian: " + filter.BadEscapeText; status != 400 || body != want {
			t.Errorf("%d %q, want 400 %q", status, body, want)
		}
		if got := drain(p.hits); len(got) != 0 {
			t.Errorf("a refused request reached the upstream: %q", got)
		}
		waitLines(t, p.run, line, before+1)
	})

	// Row 10: a tunnel whose far end cannot be reached is logged
	// reason=unreachable in both hosts, a name holding a stand-in as
	// [stand-in]; a name with '_' (which Envoy's codec cannot parse) is
	// the target refusal, its line target=-.
	for _, c := range []struct {
		name, target, line string
	}{
		{"row 10 a tunnel to a name that does not resolve", "nowhere.invalid:443", "action=refuse target=nowhere.invalid:443 reason=unreachable"},
		{"row 10 a tunnel to a name holding a stand-in that does not resolve", "jr2-held-x.nowhere.invalid:443", "action=refuse target=[stand-in] reason=unreachable"},
		{"row 10 a tunnel to a name holding a shaped stand-in's mark that does not resolve", "akiajr2held0x.nowhere.invalid:443", "action=refuse target=[stand-in] reason=unreachable"},
	} {
		run(t, c.name, func(t *testing.T) {
			line := regexp.QuoteMeta("jr2.custodian " + c.line)
			before := countLines(p.run, line)
			status, body := p.plainRoundTrip(t, p.run.Egress, "CONNECT "+c.target+" HTTP/1.1\r\nHost: "+c.target+"\r\n\r\n")
			if want := "jr2 custodian: " + c.target + " could not be reached: "; status != 502 || !strings.HasPrefix(body, want) {
				t.Errorf("%d %q, want 502 %q…", status, body, want)
			}
			waitLines(t, p.run, line, before+1)
		})
	}
	run(t, "row 10 a tunnel to a name with an underscore holding a stand-in", func(t *testing.T) {
		// Envoy's codec refuses '_' in a CONNECT target before any filter,
		// and the engine refuses it as a target that is not host:port; the
		// answer's text is each host's (envoy/README.md), the line one.
		target := "jr2-held-hop_key_a.nowhere.invalid:443"
		line := regexp.QuoteMeta("jr2.custodian action=refuse target=- reason=target")
		want := "jr2 custodian: a CONNECT target is host:port: not a host name or an IP address"
		if _, envoy := host.(envoyHost); envoy {
			want = "Bad Request"
		}
		before := countLines(p.run, line)
		status, body := p.plainRoundTrip(t, p.run.Egress, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		if status != 400 || body != want {
			t.Errorf("%d %q, want 400 %q", status, body, want)
		}
		waitLines(t, p.run, line, before+1)
	})
	run(t, "no line carries a name the agent chose", func(t *testing.T) {
		for _, l := range p.run.out.Lines() {
			if !strings.HasPrefix(l, "jr2.custodian") {
				continue
			}
			if !logLine.MatchString(l) {
				t.Errorf("not a line of the log contract: %q", l)
			}
			if strings.Contains(strings.ToLower(l), "jr2-held") || strings.Contains(l, "elsewhere.example") || strings.Contains(l, "nowhere.invalid:443 reason=target") {
				t.Errorf("%q", l)
			}
		}
	})
}

// interceptRoundTrip sends raw on a fresh intercepted connection to the
// pod's bound target and returns the answer's status and body.
func (p *hopPod) interceptRoundTrip(t *testing.T, raw string) (int, string) {
	t.Helper()
	resp, body := p.interceptAnswer(t, raw)
	return resp.StatusCode, body
}

// interceptAnswer is interceptRoundTrip's answer whole: its head, and its
// body read.
func (p *hopPod) interceptAnswer(t *testing.T, raw string) (*http.Response, string) {
	t.Helper()
	tc := tls.Client(p.tlsThrough(t, p.target), &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1"})
	defer tc.Close()
	return sendRaw(t, tc, raw)
}

// plainRoundTrip sends raw on a fresh plain connection to addr.
func (p *hopPod) plainRoundTrip(t *testing.T, addr, raw string) (int, string) {
	t.Helper()
	resp, body := p.plainAnswer(t, addr, raw)
	return resp.StatusCode, body
}

// plainAnswer is plainRoundTrip's answer whole.
func (p *hopPod) plainAnswer(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return sendRaw(t, c, raw)
}

func sendRaw(t *testing.T, c net.Conn, raw string) (*http.Response, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// countLines counts the host's output lines that are line (a regular
// expression, matched whole).
func countLines(r *Running, line string) int {
	re := regexp.MustCompile("^" + line + "$")
	return len(r.out.matching(re.MatchString))
}

// waitLines waits (up to 5 s: Envoy flushes its access log every 500 ms)
// until the host printed line (a regular expression) n times, and fails if it printed it any
// other number of times.
func waitLines(t *testing.T, r *Running, line string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for countLines(r, line) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n == countLines(r, line) {
		// a line written twice comes within the flush interval
		time.Sleep(600 * time.Millisecond)
	}
	if got := countLines(r, line); got != n {
		t.Errorf("the host printed %q %d times, want %d", line, got, n)
	}
}
