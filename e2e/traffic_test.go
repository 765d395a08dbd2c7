//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
)

// refusal is one request the Custodian answers itself.
type refusal struct {
	name    string
	method  string
	path    string
	headers [][2]string
	status  int
	body    string // without the "jr2 custodian: " prefix
	reason  string
}

// testClient runs client c through its own bound target: the swap, the
// scrubbed echo, every refusal with its exact body and log line (and none
// reaching the upstream), and an SSE stream event by event.
func (w *world) testClient(t *testing.T, c client) {
	u := w.echo[c.name]
	name := keyName(c.name)
	si := standIn(name)
	value := w.values[name]
	log := w.logOf(u.target)
	intercept := func(method string) string {
		return lineFor("action", "intercept", "target", u.target, "secret", name, "method", method, "status", "200")
	}

	run(t, "swap and scrub", func(t *testing.T) {
		resp := c.do(t, w.env, request{Method: "GET", URL: httpsURL(u.target, "/v1/echo?q=1"), Headers: [][2]string{{"x-api-key", si}}})
		got, _ := u.last()
		if got.Header.Get("X-Api-Key") != value {
			t.Fatalf("the upstream got x-api-key %q, want the value", redact(got.Header.Get("X-Api-Key"), value))
		}
		if got.URI != "/v1/echo?q=1" || got.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("the upstream got %s with accept-encoding %q", got.URI, got.Header.Get("Accept-Encoding"))
		}
		w.assertScrubbedEcho(t, resp, name)
		log.expect(t, intercept("GET"))
	})

	run(t, "bearer and body", func(t *testing.T) {
		resp := c.do(t, w.env, request{Method: "POST", URL: httpsURL(u.target, "/v1/echo"), Body: "hello from " + c.name,
			Headers: [][2]string{{"authorization", "Bearer " + si}, {"content-type", "text/plain"}}})
		got, _ := u.last()
		if got.Header.Get("Authorization") != "Bearer "+value || got.Body != "hello from "+c.name {
			t.Fatalf("the upstream got authorization %q and body %q", redact(got.Header.Get("Authorization"), value), got.Body)
		}
		w.assertScrubbedEcho(t, resp, name)
		log.expect(t, intercept("POST"))
	})

	refusals := []refusal{
		{"405 method", "TRACE", "/v1/echo", [][2]string{{"x-api-key", si}}, 405,
			"method TRACE is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", "method"},
		{"400 underscore header", "GET", "/v1/echo", [][2]string{{"x-api-key", si}, {"x_trace_id", "1"}}, 400,
			"header " + w.host.HeaderName("x_trace_id") + ` has "_" in its name; header names here use "-"`, "header-name"},
		{"400 encoded path", "GET", "/v1/a%2Fb", [][2]string{{"x-api-key", si}}, 400,
			`the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`, "encoded-path"},
		{"421 host", "GET", "/v1/echo", [][2]string{{"x-api-key", si}, {"Host", "other.example"}}, 421,
			"the Host header must name " + u.target, "host"},
		{"403 path outside", "GET", "/admin", [][2]string{{"x-api-key", si}}, 403,
			name + " may not be sent to this path; its paths are " + keyPaths, "path"},
		{"403 dot segments out", "GET", "/v1/../admin", [][2]string{{"x-api-key", si}}, 403,
			name + " may not be sent to this path; its paths are " + keyPaths, "path"},
		{"403 no stand-in", "GET", "/v1/echo", [][2]string{{"authorization", "Bearer sk-made-up-by-the-agent"}}, 403,
			"needs the stand-in of " + name + " in x-api-key or authorization", "no-stand-in"},
		{"403 stand-in in the query", "GET", "/v1/echo?token=" + si, [][2]string{{"x-api-key", si}}, 403,
			"the stand-in of " + name + " is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream", "stand-in"},
	}
	for _, r := range refusals {
		run(t, r.name, func(t *testing.T) {
			before := u.hits.Load()
			resp := c.do(t, w.env, request{Method: r.method, URL: httpsURL(u.target, r.path), Headers: r.headers})
			if want := "jr2 custodian: " + r.body; resp.Status != r.status || resp.Body != want {
				t.Errorf("%d %q, want %d %q", resp.Status, resp.Body, r.status, want)
			}
			if n := u.hits.Load() - before; n != 0 {
				t.Errorf("a refused request reached the upstream (%d)", n)
			}
			log.expect(t, lineFor("action", "refuse", "target", u.target, "reason", r.reason))
		})
	}

	run(t, "SSE event by event", func(t *testing.T) {
		p := c.stream(t, w.env, request{Method: "GET", URL: httpsURL(u.target, "/v1/sse"), Headers: [][2]string{{"x-api-key", si}}})
		for i, ev := range sseEvents {
			line := p.next(t, 10*time.Second)
			if strings.HasPrefix(line, "status ") {
				if line != "status 200\n" {
					t.Fatalf("stream: %q", line)
				}
				line = p.next(t, 10*time.Second)
			}
			// The upstream sends event i+1 only after this client printed
			// event i: an event held on the way would stall here.
			want := strings.TrimSuffix(ev, "\n")
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, "[secret:"+name+"]")
			}
			if line != want {
				t.Fatalf("event %d: %q, want %q", i, line, want)
			}
			if i+1 < len(sseEvents) {
				select {
				case u.step <- struct{}{}:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream did not wait for the next step")
				}
			}
		}
		p.wait(t)
		log.expect(t, intercept("GET"))
	})
}

// assertScrubbedEcho checks an echo the upstream made of the value it got:
// 200, and every form of the value — in the body, and the value and its
// base64 in headers — replaced by [secret:name], and no value of any
// secret anywhere in what the client saw.
func (w *world) assertScrubbedEcho(t *testing.T, resp response, name string) {
	t.Helper()
	label := "[secret:" + name + "]"
	if resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	if resp.get("X-Echo") != label || resp.get("X-Echo-Base64") != label {
		t.Errorf("echo headers %q and %q, want %s", resp.get("X-Echo"), resp.get("X-Echo-Base64"), label)
	}
	forms := scrub.Forms([]byte(w.values[name]))
	var n int
	for _, line := range strings.Split(resp.Body, "\n") {
		if f, ok := strings.CutPrefix(line, "form "); ok {
			n++
			if f != label {
				t.Errorf("a form came back as %q, want %s", f, label)
			}
		}
	}
	if n != len(forms) {
		t.Errorf("%d forms echoed, want %d", n, len(forms))
	}
	var all bytes.Buffer
	all.WriteString(resp.Body)
	for _, h := range resp.Header {
		all.WriteString(h[0] + ": " + h[1] + "\n")
	}
	if what := w.leak(all.Bytes()); what != "" {
		t.Errorf("the client saw %s", what)
	}
}

// redact shows whether s is the value without printing the value.
func redact(s, value string) string {
	if s == value {
		return "(the value)"
	}
	return strings.ReplaceAll(s, value, "(the value)")
}
