package serve

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// refusedBodies are the bodies a refused request carries: framed by
// length, chunked, and one past what a server drains to keep a connection
// (256 KiB).
var refusedBodies = []struct {
	name string
	body func() io.Reader
	keep bool // the same connection must serve the next request
}{
	{"short", func() io.Reader { return strings.NewReader("0123456789") }, true},
	{"chunked", func() io.Reader { return io.MultiReader(strings.NewReader("chunked body")) }, true},
	{"large", func() io.Reader { return strings.NewReader(strings.Repeat("x", 1<<20)) }, false},
}

type plainReq struct {
	method, url, host string
	hdr               []string
}

// send sends r with body on c and reports the status, the answer and
// whether the connection was one used before.
func send(t *testing.T, c *http.Client, r plainReq, body io.Reader) (int, string, bool) {
	t.Helper()
	req, err := http.NewRequest(r.method, r.url, body)
	must(t, err)
	if r.host != "" {
		req.Host = r.host
	}
	for i := 0; i+1 < len(r.hdr); i += 2 {
		req.Header.Set(r.hdr[i], r.hdr[i+1])
	}
	var reused bool
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.url, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: the answer was cut: %v", r.method, r.url, err)
	}
	return resp.StatusCode, string(b), reused
}

// A refusal of a request that carries a body must leave
// the connection usable. The Go host used to log "http: panic serving …:
// invalid concurrent Body.Read call" (a net/http fault of full duplex
// with an unread body) and drop the connection. Each refusal, with each body,
// is followed on the same keep-alive connection by a request that is
// answered; a body too large to drain may close the connection, after a
// whole answer, as Go's own server does.
func TestRefusalWithABodyKeepsTheConnection(t *testing.T) {
	f := newFixture(t, nil)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the orchestrator's record of what it got is not read here
		for {
			select {
			case <-f.orchSeen:
			case <-stop:
				return
			}
		}
	}()
	tok := "Bearer " + contract.StandIn(contract.TokenName)
	up := "https://" + f.up.target
	ctl := "http://" + f.control
	good := plainReq{"GET", up + "/v1/ok", "", []string{"x-api-key", keySI}}
	goodControl := plainReq{"GET", ctl + "/agents/a/surface", "", []string{"Authorization", tok}}
	intercept := func() *http.Client { return f.client() }
	control := func() *http.Client { return &http.Client{Transport: &http.Transport{}} }
	cases := []struct {
		name    string
		client  func() *http.Client
		refused plainReq
		status  int
		next    plainReq
	}{
		{"intercept 405", intercept, plainReq{"PATCHX", up + "/v1/x", "", []string{"x-api-key", keySI}}, 405, good},
		{"intercept 400 underscore", intercept, plainReq{"POST", up + "/v1/x", "", []string{"x-api-key", keySI, "x_y", "1"}}, 400, good},
		{"intercept 400 encoded", intercept, plainReq{"POST", up + "/v1/a%2Fb", "", []string{"x-api-key", keySI}}, 400, good},
		{"intercept 421", intercept, plainReq{"POST", up + "/v1/x", "evil.example", []string{"x-api-key", keySI}}, 421, good},
		{"intercept 403 path", intercept, plainReq{"POST", up + "/admin", "", []string{"x-api-key", keySI}}, 403, good},
		{"intercept 403 no stand-in", intercept, plainReq{"POST", up + "/v1/x", "", []string{"x-api-key", "made-up"}}, 403, good},
		{"intercept 403 stand-in elsewhere", intercept, plainReq{"POST", up + "/v1/x?k=" + keySI, "", []string{"x-api-key", keySI}}, 403, good},
		{"intercept 502 unreachable", intercept, plainReq{"POST", "https://" + f.dead + "/v1/x", "", []string{"x-api-key", keySI}}, 502,
			plainReq{"GET", "https://" + f.dead + "/v1/x", "", []string{"x-api-key", keySI}}},
		// Not a refusal: an upstream that answers without reading the body.
		{"intercept early answer", intercept, plainReq{"POST", up + "/v1/early", "", []string{"x-api-key", keySI}}, 200, good},
		{"control 404", control, plainReq{"POST", ctl + "/admin", "", []string{"Authorization", tok}}, 404, goodControl},
		{"control 404 fetch", control, plainReq{"PUT", ctl + "/fetch", "", []string{"Authorization", tok}}, 404, goodControl},
		{"control 403", control, plainReq{"POST", ctl + "/agents/a/events", "", []string{"Authorization", "Bearer made-up"}}, 403, goodControl},
		{"control 403 stand-in elsewhere", control, plainReq{"POST", ctl + "/agents/a/events?" + keySI, "", []string{"Authorization", tok}}, 403, goodControl},
		{"egress 405", control, plainReq{"POST", "http://" + f.egress + "/", "", nil}, 405, plainReq{"GET", "http://" + f.egress + "/", "", nil}},
	}
	for _, c := range cases {
		for _, b := range refusedBodies {
			cl := c.client()
			// A first request opens the connection the refusal then uses.
			send(t, cl, c.next, nil)
			st, body, reused := send(t, cl, c.refused, b.body())
			if st != c.status || !strings.HasPrefix(body, "jr2 custodian: ") && body != "early" || !reused {
				t.Errorf("%s, %s body: %d %q (on the open connection: %v), want %d", c.name, b.name, st, body, reused, c.status)
				continue
			}
			// The next request is answered (send fails the test if not),
			// on the same connection unless the body was too large to drain.
			if _, _, reused = send(t, cl, c.next, nil); b.keep && !reused {
				t.Errorf("%s, %s body: the next request needed a new connection", c.name, b.name)
			}
			cl.CloseIdleConnections()
		}
	}
	if l := f.log.String(); strings.Contains(l, "panic") {
		t.Fatalf("a refusal panicked the handler:\n%s", l)
	}
}
