package serve

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// net/http refuses a request line whose target holds a
// '%' that begins no escape (IIS's %u002e) with its own 400 and no line;
// every listener reads its connections through relay.Gate, so the engine
// answers it, as in Envoy with the module: rule 4 on an intercepted
// connection (after rules 1-3: the engine's order), the control and
// egress listeners' own answers, each with its jr2.custodian line — on the
// same connection as the requests before it, whatever their bodies held.
func TestUnparsableTargetsReachTheEngine(t *testing.T) {
	f := newFixture(t, nil)
	line := "jr2.custodian action=refuse target=" + f.up.target + " reason=encoded-path\n"

	// Pipelined on one intercepted connection: a body that looks like the
	// bad request is a body, then the bad request, then rule 1 before rule 4.
	fake := "GET /v1/%u002e HTTP/1.1\r\n"
	stream := fmt.Sprintf("POST /v1/echo HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nContent-Length: %d\r\n\r\n%s", f.up.target, keySI, len(fake), fake) +
		fmt.Sprintf("POST /v1/echo HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", f.up.target, keySI, len(fake), fake) +
		fmt.Sprintf("GET /v1/%%u002e%%u002e/admin HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n\r\n", f.up.target, keySI) +
		fmt.Sprintf("TRACE /v1/%%zz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", f.up.target)
	br := bufio.NewReader(strings.NewReader(f.rawTLS(t, f.up.target, stream)))
	want := []struct {
		status int
		body   string
	}{
		{200, ""}, {200, ""},
		{400, "jr2 custodian: " + filter.BadEscapeText},
		{405, ""},
	}
	for i, w := range want {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != w.status || w.body != "" && string(b) != w.body {
			t.Errorf("answer %d: %d %q, want %d %q", i, resp.StatusCode, b, w.status, w.body)
		}
		if w.status == 405 && !strings.HasPrefix(string(b), "jr2 custodian: ") {
			t.Errorf("answer %d is not the engine's: %q", i, b)
		}
	}
	waitLog(t, f.log, line)

	// The control and egress listeners: the engine's answer for each.
	tok := "Bearer " + contract.StandIn(contract.TokenName)
	path := "/agents/a1/%u002e%u002e/surface"
	d := f.srv.eng.DecideControl(&filter.Request{Method: "GET", Authority: "x", Path: path, Headers: []filter.Header{{Name: "Authorization", Value: tok}}})
	if d.Reply == nil {
		t.Fatal("the engine forwards a control request with a bad escape")
	}
	st, body := rawPlain(t, f.control, "GET "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: "+tok+"\r\nConnection: close\r\n\r\n")
	if st != d.Reply.Status || body != d.Reply.Body {
		t.Errorf("control: %d %q, want the engine's %d %q", st, body, d.Reply.Status, d.Reply.Body)
	}
	st, body = rawPlain(t, f.egress, "GET /%u002e HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if st != 405 || body != "jr2 custodian: this listener takes CONNECT only; use it as HTTPS_PROXY" {
		t.Errorf("egress: %d %q", st, body)
	}
	if strings.Contains(f.log.String(), "u002e") || strings.Contains(f.log.String(), "jr2-unparsed") {
		t.Errorf("the log holds the target or the placeholder:\n%s", f.log.String())
	}
}
