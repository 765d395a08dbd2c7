// Package streamtest is the conformance suite both Envoy adapters of the
// stream machine run over their own fake of Envoy — the golang filter's
// (filter/envoyfilter, over fakes of its SDK) and the dynamic module's
// (filter/module, over a fake of its C ABI): the same requests and
// answers, the same expected bytes. A rule or a translation that differs
// between the two adapters fails one of them here.
//
// It holds data and a runner only; each adapter's test supplies a Driver
// that turns a case into calls on its fake.
package streamtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
)

const (
	// Target is the one bound target of Config.
	Target = "api.anthropic.com:443"
	// Secret is held for Target in x-api-key, on /v1/ paths.
	Secret = "ANTHROPIC_API_KEY"
	// Value is Secret's value: a sentinel no answer may carry.
	Value = "sk-ant-STREAMTEST-c4Vn8Qz2Lm6Xr1Tb"
	// token is the Sandbox token's value.
	token = "tok-STREAMTEST-k9Pw3Hs7Jd2Fq5Zn"
)

// StandIn is Secret's stand-in.
var StandIn = filter.StandIn(Secret)

// Config is the engine config every adapter loads, its value files
// written into dir.
func Config(t testing.TB, dir string) filter.Config {
	t.Helper()
	for name, v := range map[string]string{Secret: Value, filter.TokenName: token} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filter.Config{
		Pod: "ws-streamtest", Sandbox: "ws-streamtest", Orchestrator: "jr2-orchestrator.jr2.svc:4000", ValuesDir: dir,
		Listeners: filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
		Secrets: []filter.SecretConfig{
			{Name: Secret, StandIn: StandIn, Targets: []string{Target}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: filter.TokenName, StandIn: filter.StandIn(filter.TokenName), Headers: []string{"authorization"}},
		},
	}
}

// Answer is what the upstream answers a forwarded request with.
type Answer struct {
	Status  string
	Headers []filter.Header
	Chunks  []string
}

// Exchange is what one request and, when it went upstream, its answer
// came to.
type Exchange struct {
	Status    int             // what the agent got
	Headers   []filter.Header // the answer's headers as the agent got them
	Body      string          // the body the agent read, every piece in order
	Forwarded []filter.Header // the request as it went upstream; nil when refused
	Marked    bool            // the request carried the mark the RBAC filter needs
}

// Driver runs one case on an adapter: req on a new intercept stream
// toward Target and, when it is forwarded, a answering it.
type Driver interface {
	Run(t *testing.T, req []filter.Header, a Answer) Exchange
}

// H builds headers from name, value pairs.
func H(kv ...string) []filter.Header {
	var hs []filter.Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, filter.Header{Name: kv[i], Value: kv[i+1]})
	}
	return hs
}

func get(hs []filter.Header, name string) (string, bool) {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

var ok = Answer{Status: "200", Headers: H("content-type", "text/plain"), Chunks: []string{"ok"}}

// Run runs every case on d.
func Run(t *testing.T, d Driver) {
	req := func(method, path string, extra ...string) []filter.Header {
		return H(append([]string{":method", method, ":authority", "api.anthropic.com", ":path", path, ":scheme", "https"}, extra...)...)
	}
	t.Run("swap", func(t *testing.T) {
		e := d.Run(t, req("POST", "/v1/messages", "x-api-key", StandIn), ok)
		if v, _ := get(e.Forwarded, "x-api-key"); v != Value || !e.Marked || e.Status != 200 || e.Body != "ok" {
			t.Errorf("forwarded x-api-key is the value: %v, marked %v, the agent got %d %q", v == Value, e.Marked, e.Status, e.Body)
		}
	})
	t.Run("strip", func(t *testing.T) {
		e := d.Run(t, req("GET", "/v1/models", "x-api-key", StandIn, "authorization", "Bearer agent-own", "proxy-authorization", "Basic eA=="), ok)
		for _, n := range []string{"authorization", "proxy-authorization"} {
			if _, there := get(e.Forwarded, n); there || e.Forwarded == nil {
				t.Errorf("%s went upstream (forwarded: %v)", n, e.Forwarded != nil)
			}
		}
	})
	for _, r := range []struct {
		name   string
		req    []filter.Header
		status int
		body   string
	}{
		{"method", req("TRACE", "/v1/x", "x-api-key", StandIn), 405, "jr2 custodian: method TRACE is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"},
		{"underscore", req("GET", "/v1/x", "x-api-key", StandIn, "x_trace", "1"), 400, `jr2 custodian: header x_trace has "_" in its name; header names here use "-"`},
		{"host", H(":method", "GET", ":authority", "evil.example", ":path", "/v1/x", "x-api-key", StandIn), 421, "jr2 custodian: the Host header must name " + Target},
		{"encoded path", req("GET", "/v1/%2e%2e/admin", "x-api-key", StandIn), 400, `jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`},
		{"path", req("GET", "/admin", "x-api-key", StandIn), 403, "jr2 custodian: " + Secret + " may not be sent to this path; its paths are /v1/"},
		{"twice", req("GET", "/v1/x", "x-api-key", StandIn, "x-api-key", StandIn), 400, "jr2 custodian: header x-api-key was sent more than once; send it once"},
		{"stand-in in the query", req("GET", "/v1/x?k="+StandIn, "x-api-key", StandIn), 403, "jr2 custodian: the stand-in of " + Secret + " is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream"},
	} {
		t.Run("refuse "+r.name, func(t *testing.T) {
			e := d.Run(t, r.req, ok)
			if e.Status != r.status || e.Body != r.body || e.Forwarded != nil || e.Marked {
				t.Errorf("%d %q (forwarded %v, marked %v), want %d %q, nothing forwarded", e.Status, e.Body, e.Forwarded != nil, e.Marked, r.status, r.body)
			}
		})
	}
	for _, split := range []int{1, 7, len(Value) - 1} {
		t.Run("scrub across chunks", func(t *testing.T) {
			echo := "echo: " + Value + " end"
			cut := len("echo: ") + split
			e := d.Run(t, req("POST", "/v1/messages", "x-api-key", StandIn), Answer{Status: "200", Headers: H("content-type", "text/plain"), Chunks: []string{echo[:cut], echo[cut:]}})
			if want := "echo: [secret:" + Secret + "] end"; e.Status != 200 || e.Body != want {
				t.Errorf("split at %d: the agent got %d %q, want %q", split, e.Status, e.Body, want)
			}
		})
	}
	t.Run("an encoding it cannot read", func(t *testing.T) {
		e := d.Run(t, req("GET", "/v1/x", "x-api-key", StandIn), Answer{Status: "200", Headers: H("content-encoding", "br"), Chunks: []string{"\x1b\x03"}})
		if want := "jr2 custodian: " + Target + " answered with content-encoding br, which the Custodian cannot read to scrub; the answer was not passed on"; e.Status != 502 || e.Body != want {
			t.Errorf("the agent got %d %q, want 502 %q", e.Status, e.Body, want)
		}
	})
	t.Run("scrub a header", func(t *testing.T) {
		e := d.Run(t, req("GET", "/v1/x", "x-api-key", StandIn), Answer{Status: "200", Headers: H("x-echo", "key "+Value), Chunks: []string{"ok"}})
		if v, _ := get(e.Headers, "x-echo"); v != "key [secret:"+Secret+"]" || e.Status != 200 || e.Body != "ok" {
			t.Errorf("the agent got %d, x-echo %q, %q", e.Status, strings.ReplaceAll(v, Value, "<the value>"), e.Body)
		}
	})
}
