package streamtest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/standintest"
	"jr2.dev/boundary/filter/stream"
	"jr2.dev/boundary/internal/contract"
)

// decodeCase is one request: either a refusal (status, body, reason) or a
// forward (the exact request upstream), and the exact log lines either
// way.
type decodeCase struct {
	name string
	req  []filter.Header

	status int    // refused: the local reply's status
	body   string // refused: its body
	reason string // refused: the reason word (details and log)

	challenge  bool     // refused: the reply carries rule 9's WWW-Authenticate
	upstream   []string // forwarded: the upstream request, "name: value" lines
	routeClear bool     // forwarded: the route cache was cleared

	logs []string // nil for a refusal: its one refuse line
}

func bearer(standIn string) string { return "Bearer " + standIn }

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func interceptLine(target, secret, method string, status int) string {
	return "jr2.custodian action=intercept target=" + target + " secret=" + secret + " method=" + method + " status=" + strconv.Itoa(status)
}

func refuseLine(target, reason string) string {
	return "jr2.custodian action=refuse target=" + target + " reason=" + reason
}

func anthropicLine(method string, status int) string {
	return interceptLine(Anthropic, "ANTHROPIC_API_KEY", method, status)
}

func anthropicReq(method, path string, extra ...string) []filter.Header {
	return H(append([]string{":method", method, ":authority", "api.anthropic.com", ":path", path}, extra...)...)
}

// headersOnly200 is the answer of every forwarded decode case.
var headersOnly200 = &Answer{Status: "200"}

// decode runs cases on streams of role (toward target) of pod; logTarget
// is a refusal's default log target.
func decode(t *testing.T, pod Pod, role pluginconf.Role, target, logTarget string, cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := exchange(t, pod.Stream(t, role, target), tc.req, headersOnly200)
			if tc.status != 0 {
				refused(t, e, tc, logTarget)
				return
			}
			if e.Local != nil || e.Forwarded == nil {
				t.Fatalf("refused (%d %q), want forwarded", e.Status, e.Body())
			}
			if !e.Marked {
				t.Error("forwarded without the mark")
			}
			if got, want := Lines(e.Forwarded), strings.Join(tc.upstream, "\n"); got != want {
				t.Errorf("upstream request\n got:\n%s\nwant:\n%s", got, want)
			}
			if e.RouteCleared != tc.routeClear {
				t.Errorf("route cache cleared: %v, want %v", e.RouteCleared, tc.routeClear)
			}
			if !slices.Equal(e.Logs, tc.logs) {
				t.Errorf("logs\n got %q\nwant %q", e.Logs, tc.logs)
			}
			if e.Status != 200 {
				t.Errorf("the agent got %d, want the upstream's 200", e.Status)
			}
		})
	}
}

// refused asserts a local reply: exact status and body, text/plain and no
// other header, details that name the reason, no mark, nothing upstream,
// the reply passed through the response hooks unchanged, and the refuse
// line.
func refused(t *testing.T, e Exchange, tc decodeCase, logTarget string) {
	t.Helper()
	if e.Local == nil {
		t.Fatalf("forwarded, want %d", tc.status)
	}
	r := e.Local
	if r.Status != tc.status || r.Body != tc.body {
		t.Errorf("local reply\n got %d %q\nwant %d %q", r.Status, r.Body, tc.status, tc.body)
	}
	want := "content-type: text/plain; charset=utf-8"
	if tc.challenge {
		want += "\nwww-authenticate: " + filter.Challenge
	}
	if got := Lines(r.Headers); got != want {
		t.Errorf("local reply headers %q", got)
	}
	if r.Details != "jr2_custodian_"+tc.reason || strings.ContainsAny(r.Details, " \t") {
		t.Errorf("details %q, want jr2_custodian_%s", r.Details, tc.reason)
	}
	if e.MarkSet || e.Forwarded != nil {
		t.Errorf("a refused request was marked (%v) or went upstream (%v)", e.MarkSet, e.Forwarded != nil)
	}
	if e.Status != tc.status || e.Body() != tc.body || get(e.Headers, "content-length") != strconv.Itoa(len(tc.body)) {
		t.Errorf("the agent got %d %q (%s), want the reply unchanged", e.Status, e.Body(), Lines(e.Headers))
	}
	logs := tc.logs
	if logs == nil {
		logs = []string{refuseLine(logTarget, tc.reason)}
	}
	if !slices.Equal(e.Logs, logs) {
		t.Errorf("logs\n got %q\nwant %q", e.Logs, logs)
	}
}

// intercept: the spec's rules for an intercepted request, one or more
// rows each, and rule 10's places (places).
func (s suite) intercept(t *testing.T) {
	decode(t, s.pod, pluginconf.RoleIntercept, Anthropic, Anthropic, []decodeCase{
		{
			name: "rule 7: the stand-in alone is swapped; rule 11: identity upstream",
			req: H(":method", "POST", ":authority", "api.anthropic.com", ":path", "/v1/messages", ":scheme", "https",
				"x-api-key", AnthropicStandIn, "content-type", "application/json", "accept-encoding", "gzip, br"),
			upstream: []string{":authority: api.anthropic.com", ":method: POST", ":path: /v1/messages", ":scheme: https",
				"accept-encoding: identity", "content-type: application/json", "x-api-key: " + AnthropicValue},
			logs: []string{anthropicLine("POST", 200)},
		},
		{
			name:     "rule 5: the normalised path goes upstream, the query unchanged",
			req:      H(":method", "GET", ":authority", "api.anthropic.com:443", ":path", `/v1/a/..\b/./c?q=%2e`, "x-api-key", AnthropicStandIn),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/b/c?q=%2e", "accept-encoding: identity", "x-api-key: " + AnthropicValue},
			logs:     []string{anthropicLine("GET", 200)},
		},
		{
			name: "rule 8: every other credential header is removed",
			req: anthropicReq("GET", "/v1/models", "x-api-key", AnthropicStandIn,
				"authorization", "Bearer agent-own", "api-key", "x", "proxy-authorization", "Basic eA==", "x-goog-api-key", "y"),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/models", "accept-encoding: identity", "x-api-key: " + AnthropicValue},
			logs:     []string{anthropicLine("GET", 200)},
		},
		{
			name:     "the upstream's Host is the target's, however the agent spelled it",
			req:      H(":method", "GET", ":authority", "API.Anthropic.COM.:443", ":path", "/v1/models", "x-api-key", AnthropicStandIn),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/models", "accept-encoding: identity", "x-api-key: " + AnthropicValue},
			logs:     []string{anthropicLine("GET", 200)},
		},
		{
			name:     "range and if-range never go upstream: an echo is never cut into pieces",
			req:      anthropicReq("GET", "/v1/models", "x-api-key", AnthropicStandIn, "range", "bytes=9-20", "if-range", `"e1"`),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/models", "accept-encoding: identity", "x-api-key: " + AnthropicValue},
			logs:     []string{anthropicLine("GET", 200)},
		},
		{
			name: "rule 1: a method outside the seven is 405", req: anthropicReq("TRACE", "/v1/x", "x-api-key", AnthropicStandIn),
			status: 405, reason: filter.ReasonMethod,
			body: "jr2 custodian: method TRACE is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS",
		},
		{
			name: "rule 2: a header name with _ is 400", req: anthropicReq("GET", "/v1/x", "x-api-key", AnthropicStandIn, "x_api_key", "z"),
			status: 400, reason: filter.ReasonUnderscore,
			body: `jr2 custodian: header x_api_key has "_" in its name; header names here use "-"`,
		},
		{
			name: "rule 3: a Host naming another host is 421", req: H(":method", "GET", ":authority", "evil.example", ":path", "/v1/x", "x-api-key", AnthropicStandIn),
			status: 421, reason: filter.ReasonHost,
			body: "jr2 custodian: the Host header must name api.anthropic.com:443",
		},
		{
			name: "rule 3: a Host naming another port is 421", req: H(":method", "GET", ":authority", "api.anthropic.com:8443", ":path", "/v1/x", "x-api-key", AnthropicStandIn),
			status: 421, reason: filter.ReasonHost,
			body: "jr2 custodian: the Host header must name api.anthropic.com:443",
		},
		{
			name: "rule 4: an encoded separator is 400", req: anthropicReq("GET", "/v1/%2E%2e/admin", "x-api-key", AnthropicStandIn),
			status: 400, reason: filter.ReasonEncoded,
			body: `jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`,
		},
		{
			name: "rule 5: a path outside the secret's paths is 403", req: anthropicReq("GET", "/v1/../admin", "x-api-key", AnthropicStandIn),
			status: 403, reason: filter.ReasonPath,
			body: "jr2 custodian: ANTHROPIC_API_KEY may not be sent to this path; its paths are /v1/",
		},
		{
			name: "rule 6: a credential header twice is 400", req: anthropicReq("GET", "/v1/x", "x-api-key", AnthropicStandIn, "x-api-key", AnthropicStandIn),
			status: 400, reason: filter.ReasonDuplicate,
			body: "jr2 custodian: header x-api-key was sent more than once; send it once",
		},
		{
			name: "rule 9: no stand-in is 403 naming the secret and header", req: anthropicReq("GET", "/v1/x", "x-api-key", "sk-ant-agent-guess"),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key",
		},
		{
			name: "rule 9: another secret's stand-in does not swap", req: anthropicReq("GET", "/v1/x", "x-api-key", GitHubStandIn),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key",
		},
		{
			name: "rule 10: a stand-in in the query is 403", req: anthropicReq("GET", "/v1/x?key="+AnthropicStandIn, "x-api-key", AnthropicStandIn),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
		{
			name: "rule 10: a stand-in in the path is 403", req: anthropicReq("GET", "/v1/"+GitHubStandIn, "x-api-key", AnthropicStandIn),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of GITHUB_TOKEN is in the path; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
		{
			name: "rule 10: a stand-in in another header is 403", req: anthropicReq("GET", "/v1/x", "x-api-key", AnthropicStandIn, "x-note", "copy of "+AnthropicStandIn),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in header x-note; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
	})

	github := func(method string) string { return interceptLine(GitHub, "GITHUB_TOKEN", method, 200) }
	decode(t, s.pod, pluginconf.RoleIntercept, GitHub, GitHub, []decodeCase{
		{
			name:     "rule 7: one auth scheme and the stand-in",
			req:      H(":method", "GET", ":authority", "github.com", ":path", "/repo.git/info/refs?service=git-upload-pack", "authorization", bearer(GitHubStandIn)),
			upstream: []string{":authority: github.com", ":method: GET", ":path: /repo.git/info/refs?service=git-upload-pack", "accept-encoding: identity", "authorization: Bearer " + GitHubValue},
			logs:     []string{github("GET")},
		},
		{
			name:     "rule 7: a Basic pair whose password is the stand-in, as git sends it",
			req:      H(":method", "POST", ":authority", "github.com", ":path", "/repo.git/git-upload-pack", "authorization", basic("x-access-token", GitHubStandIn)),
			upstream: []string{":authority: github.com", ":method: POST", ":path: /repo.git/git-upload-pack", "accept-encoding: identity", "authorization: " + basic("x-access-token", GitHubValue)},
			logs:     []string{github("POST")},
		},
		{
			name: "rule 9: no credential header at all is 401 with the challenge", req: H(":method", "GET", ":authority", "github.com", ":path", "/repo.git/info/refs"),
			status: 401, reason: filter.ReasonNoStandIn, challenge: true,
			body: "jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key",
		},
		{
			name: "rule 10: the stand-in as a Basic user is 403", req: H(":method", "GET", ":authority", "github.com", ":path", "/", "authorization", basic(GitHubStandIn, GitHubStandIn)),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of GITHUB_TOKEN is in the Basic user of header authorization; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
	})
	s.places(t)
}

// places: the shared table of rule 10's places (package standintest),
// toward the places pod's bound target, beside the swap: each the
// engine's 403 with the text every host answers, nothing upstream.
func (s suite) places(t *testing.T) {
	decode(t, s.placesPod, pluginconf.RoleIntercept, Places, Places, placeCases(nil, "the stand-in", "PLACES", PlacesStandIn, "places.example"))
	cases := []decodeCase{{
		name:     "a shaped stand-in swaps as a plain one",
		req:      H(":method", "GET", ":authority", "shaped.example", ":path", "/v1/x", "x-api-key", ShapedStandIn),
		upstream: []string{":authority: shaped.example", ":method: GET", ":path: /v1/x", "accept-encoding: identity", "x-api-key: " + ShapedValue},
		logs:     []string{interceptLine(Shaped, "SHAPED", "GET", 200)},
	}}
	decode(t, s.placesPod, pluginconf.RoleIntercept, Shaped, Shaped, placeCases(cases, "the shaped stand-in", "SHAPED", ShapedStandIn, "shaped.example"))
}

// placeCases appends to cases the shared table's places of secret's
// stand-in si toward authority, beside its swap in x-api-key.
func placeCases(cases []decodeCase, what, secret, si, authority string) []decodeCase {
	for _, c := range standintest.Cases(si, "/v1/") {
		req := H(":method", "GET", ":authority", authority, ":path", c.Path, "x-api-key", si)
		if c.Header.Name != "" {
			req = append(req, c.Header)
		}
		cases = append(cases, decodeCase{name: "rule 10: " + what + " " + c.Name, req: req,
			status: standintest.Status, reason: standintest.Reason, body: standintest.Body(secret, c.Place)})
	}
	return cases
}

// control: the control listener's four routes, and what it refuses.
func (s suite) control(t *testing.T) {
	line := func(method string) string {
		return interceptLine(Orchestrator, contract.TokenName, method, 200)
	}
	ctl := func(method, path string, extra ...string) []filter.Header {
		return H(append([]string{":method", method, ":authority", "127.0.0.1:8081", ":path", path}, extra...)...)
	}
	decode(t, s.pod, pluginconf.RoleControl, "", Orchestrator, []decodeCase{
		{
			name:     "GET surface: the bearer swapped, the Orchestrator named",
			req:      ctl("GET", "/agents/a1/surface", "authorization", bearer(TokenStandIn)),
			upstream: []string{":authority: " + Orchestrator, ":method: GET", ":path: /agents/a1/surface", "accept-encoding: identity", "authorization: Bearer " + TokenValue},
			logs:     []string{line("GET")},
		},
		{
			name:     "POST events: other credential headers removed",
			req:      ctl("POST", "/agents/a1/events", "authorization", bearer(TokenStandIn), "x-api-key", "k", "content-type", "application/json"),
			upstream: []string{":authority: " + Orchestrator, ":method: POST", ":path: /agents/a1/events", "accept-encoding: identity", "authorization: Bearer " + TokenValue, "content-type: application/json"},
			logs:     []string{line("POST")},
		},
		{
			name:     "GET a delivery",
			req:      ctl("GET", "/agents/a1/deliveries/d-9", "authorization", bearer(TokenStandIn)),
			upstream: []string{":authority: " + Orchestrator, ":method: GET", ":path: /agents/a1/deliveries/d-9", "accept-encoding: identity", "authorization: Bearer " + TokenValue},
			logs:     []string{line("GET")},
		},
		{
			name:     "POST /fetch goes to the Sandbox's fetch",
			req:      ctl("POST", "/fetch", "authorization", bearer(TokenStandIn)),
			upstream: []string{":authority: " + Orchestrator, ":method: POST", ":path: /sandboxes/" + Sandbox + "/fetch", "accept-encoding: identity", "authorization: Bearer " + TokenValue},
			logs:     []string{line("POST")},
		},
		{
			name: "anything else is 404", req: ctl("GET", "/admin", "authorization", bearer(TokenStandIn)),
			status: 404, reason: filter.ReasonRoute,
			body: "jr2 custodian: not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch",
		},
		{
			name: "no bearer is 403", req: ctl("GET", "/agents/a1/surface"),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of JR2_SANDBOX_TOKEN in authorization",
		},
		{
			name: "another stand-in as the bearer is 403", req: ctl("GET", "/agents/a1/surface", "authorization", bearer(GitHubStandIn)),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of JR2_SANDBOX_TOKEN in authorization",
		},
		{
			name: "a stand-in elsewhere is 403", req: ctl("GET", "/agents/a1/surface?t="+TokenStandIn, "authorization", bearer(TokenStandIn)),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of JR2_SANDBOX_TOKEN is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
	})
	decode(t, s.noSandbox, pluginconf.RoleControl, "", Orchestrator, []decodeCase{{
		name: "POST /fetch without a Sandbox is 404", req: ctl("POST", "/fetch", "authorization", bearer(TokenStandIn)),
		status: 404, reason: filter.ReasonRoute,
		body: "jr2 custodian: POST /fetch is not served here: this pod has no Sandbox",
	}})

	t.Run("the Orchestrator's answers are scrubbed too", func(t *testing.T) {
		e := exchange(t, s.pod.Stream(t, pluginconf.RoleControl, ""), ctl("GET", "/agents/a1/surface", "authorization", bearer(TokenStandIn)),
			&Answer{Status: "200", Headers: H("x-debug", TokenValue, "content-length", "40"), Chunks: []string{"echo " + TokenValue}})
		if e.Status != 200 || e.Body() != "echo [secret:JR2_SANDBOX_TOKEN]" || Lines(e.Headers) != ":status: 200\nx-debug: [secret:JR2_SANDBOX_TOKEN]" {
			t.Errorf("the agent got %d %q\n%s", e.Status, e.Body(), Lines(e.Headers))
		}
	})
}

// egress: CONNECT targets — intercepted, tunneled or refused.
func (s suite) egress(t *testing.T) {
	decode(t, s.pod, pluginconf.RoleEgress, "", "-", []decodeCase{
		{
			name:     "a bound target is marked and goes on to its intercept route",
			req:      H(":method", "CONNECT", ":authority", Anthropic),
			upstream: []string{":authority: " + Anthropic, ":method: CONNECT"},
		},
		{
			name:       "the canonical target decides, and the routes see it",
			req:        H(":method", "CONNECT", ":authority", "API.Anthropic.COM.:443"),
			upstream:   []string{":authority: " + Anthropic, ":method: CONNECT"},
			routeClear: true,
		},
		{
			// The tunnel's line is Envoy's access log's, once the tunnel is
			// up (controlplane's egressLogs): the filter writes none.
			name:     "another target is tunneled",
			req:      H(":method", "CONNECT", ":authority", "example.org:443"),
			upstream: []string{":authority: example.org:443", ":method: CONNECT"},
		},
		{
			// A stand-in holds '_', which Envoy's codec refuses in a CONNECT
			// target before any filter: the engine refuses it alike, and its
			// line names no part of the target.
			name:   "a tunnel's target holding a stand-in is 400, logged as target=-",
			req:    H(":method", "CONNECT", ":authority", GitHubStandIn+".evil.example:443"),
			status: 400, reason: filter.ReasonTarget,
			body: "jr2 custodian: a CONNECT target is host:port: not a host name or an IP address",
			logs: []string{refuseLine("-", filter.ReasonTarget)},
		},
		{
			name: "a spelled loopback is guarded", req: H(":method", "CONNECT", ":authority", "127.1:443"),
			status: 403, reason: filter.ReasonGuard,
			body: "jr2 custodian: 127.1:443 is guarded (loopback); a tunnel never reaches it",
			logs: []string{refuseLine("127.1:443", filter.ReasonGuard)},
		},
		{
			name: "localhost is guarded", req: H(":method", "CONNECT", ":authority", "LocalHost:22"),
			status: 403, reason: filter.ReasonGuard,
			body: "jr2 custodian: localhost:22 is guarded (a localhost name); a tunnel never reaches it",
			logs: []string{refuseLine("localhost:22", filter.ReasonGuard)},
		},
		{
			name: "a request other than CONNECT is 405", req: H(":method", "GET", ":authority", Anthropic, ":path", "/"),
			status: 405, reason: filter.ReasonNotConnect,
			body: "jr2 custodian: this listener takes CONNECT only; use it as HTTPS_PROXY",
		},
		{
			name: "a target that is not host:port is 400", req: H(":method", "CONNECT", ":authority", "api.anthropic.com"),
			status: 400, reason: filter.ReasonTarget,
			body: "jr2 custodian: a CONNECT target is host:port: want host:port",
		},
	})

	t.Run("a tunnel's bytes are not the filter's to read", func(t *testing.T) {
		raw := "\x16\x03\x01\x00\x2a tls bytes [secret:X] jr2-held- %2e"
		e := exchange(t, s.pod.Stream(t, pluginconf.RoleEgress, ""), H(":method", "CONNECT", ":authority", "example.org:443"),
			&Answer{Status: "200", Chunks: []string{raw}})
		// The tunnel line is Envoy's access log's; the bytes pass as
		// they came, unread.
		if e.Status != 200 || len(e.Writes) != 1 || e.Writes[0] != raw || len(e.Logs) != 0 {
			t.Errorf("the agent got %d, %d writes, logs %q", e.Status, len(e.Writes), e.Logs)
		}
	})
}

const scrubbed = "[secret:ANTHROPIC_API_KEY]"

// Gzipped is s gzip-compressed.
func Gzipped(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Split cuts s into n pieces of about equal length.
func Split(s string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, s[i*len(s)/n:(i+1)*len(s)/n])
	}
	return out
}

// answers: responses from a bound target, through an intercept route.
func (s suite) answers(t *testing.T) {
	gz := Gzipped(t, "answer: "+AnthropicValue+" and more text after it\n")
	encoding502 := func(enc string) string {
		return "jr2 custodian: api.anthropic.com:443 answered with content-encoding " + enc + ", which the Custodian cannot read to scrub; the answer was not passed on"
	}
	for _, tc := range []struct {
		name    string
		method  string
		a       Answer
		status  int
		headers string   // the headers the agent gets, Lines; @LEN@ is len(body)
		writes  []string // each piece of body, in order; nil: compare body only
		body    string
		tr      string // the trailers the agent gets, Lines
		reset   bool
		logs    []string
	}{
		{
			name:    "content-length is dropped when a body follows",
			a:       Answer{Status: "200", Headers: H("content-length", "11", "content-type", "text/plain"), Chunks: []string{"hello world"}},
			status:  200,
			headers: ":status: 200\ncontent-type: text/plain",
			body:    "hello world",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "an answer without a body keeps its headers",
			a:       Answer{Status: "204", Headers: H("x-request-id", "r1")},
			status:  204,
			headers: ":status: 204\nx-request-id: r1",
			logs:    []string{anthropicLine("POST", 204)},
		},
		{
			name:    "a HEAD answer keeps its content-length",
			method:  "HEAD",
			a:       Answer{Status: "200", Headers: H("content-length", "1234")},
			status:  200,
			headers: ":status: 200\ncontent-length: 1234",
			logs:    []string{anthropicLine("HEAD", 200)},
		},
		{
			name:    "header values are scrubbed, every value of a name",
			a:       Answer{Status: "401", Headers: H("x-echo", "key="+AnthropicValue, "set-cookie", "a="+AnthropicValue, "set-cookie", "b=2", "x-plain", "p")},
			status:  401,
			headers: ":status: 401\nset-cookie: a=" + scrubbed + "\nset-cookie: b=2\nx-echo: key=" + scrubbed + "\nx-plain: p",
			logs:    []string{anthropicLine("POST", 401)},
		},
		{
			name:    "a value cut across three chunk borders is scrubbed",
			a:       Answer{Status: "200", Chunks: append(append([]string{"before sk-ant-"}, Split(AnthropicValue[len("sk-ant-"):], 3)...), " after")},
			status:  200,
			headers: ":status: 200",
			body:    "before " + scrubbed + " after",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "a value split after its first byte is scrubbed",
			a:       Answer{Status: "200", Chunks: []string{"echo: " + AnthropicValue[:1], AnthropicValue[1:] + " end"}},
			status:  200,
			headers: ":status: 200",
			body:    "echo: " + scrubbed + " end",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "a value split before its last byte is scrubbed",
			a:       Answer{Status: "200", Chunks: []string{"echo: " + AnthropicValue[:len(AnthropicValue)-1], AnthropicValue[len(AnthropicValue)-1:] + " end"}},
			status:  200,
			headers: ":status: 200",
			body:    "echo: " + scrubbed + " end",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "server-sent events pass in the write that brought them",
			a:       Answer{Status: "200", Headers: H("content-type", "text/event-stream"), Chunks: []string{"event: ping\ndata: 1\n\n", "data: {\"n\":2}\n\n", ""}},
			status:  200,
			headers: ":status: 200\ncontent-type: text/event-stream",
			writes:  []string{"event: ping\ndata: 1\n\n", "data: {\"n\":2}\n\n", ""},
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "a gzip body is decoded and scrubbed",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip", "content-length", "99"), Chunks: Split(gz, 4)},
			status:  200,
			headers: ":status: 200",
			body:    "answer: " + scrubbed + " and more text after it\n",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			// A gzip body of two members (RFC 1952 §2.2, what
			// a server writes by gzipping each flush anew) is read to its end.
			name:    "a gzip body of two members is decoded whole and scrubbed",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip"), Chunks: Split(gz+Gzipped(t, "second: "+AnthropicValue+"\n"), 5)},
			status:  200,
			headers: ":status: 200",
			body:    "answer: " + scrubbed + " and more text after it\nsecond: " + scrubbed + "\n",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			// Gzip applied twice is an encoding the
			// Custodian does not read; decided on the headers, before any
			// byte goes out.
			name:    "gzip twice is refused 502 naming both, before any header went out",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip, gzip"), Chunks: []string{Gzipped(t, gz)}},
			status:  502,
			headers: ":status: 502\ncontent-length: @LEN@\ncontent-type: text/plain; charset=utf-8",
			body:    encoding502("gzip, gzip"),
			logs:    []string{anthropicLine("POST", 502), refuseLine(Anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "gzip named in two content-encoding headers is refused 502 naming both",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip", "content-encoding", "gzip"), Chunks: []string{Gzipped(t, gz)}},
			status:  502,
			headers: ":status: 502\ncontent-length: @LEN@\ncontent-type: text/plain; charset=utf-8",
			body:    encoding502("gzip, gzip"),
			logs:    []string{anthropicLine("POST", 502), refuseLine(Anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "a gzip member followed by bytes that are not gzip resets the stream",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip"), Chunks: []string{gz, "trailing garbage " + AnthropicValue}},
			status:  200,
			headers: ":status: 200",
			reset:   true,
			logs:    []string{anthropicLine("POST", 200), refuseLine(Anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "a br body is refused 502 naming br",
			a:       Answer{Status: "200", Headers: H("content-encoding", "br"), Chunks: []string{"\x1b\x00 brotli bytes " + AnthropicValue}},
			status:  502,
			headers: ":status: 502\ncontent-length: @LEN@\ncontent-type: text/plain; charset=utf-8",
			body:    encoding502("br"),
			logs:    []string{anthropicLine("POST", 502), refuseLine(Anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "two encodings are refused 502 naming both",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip, zstd"), Chunks: []string{"x"}},
			status:  502,
			headers: ":status: 502\ncontent-length: @LEN@\ncontent-type: text/plain; charset=utf-8",
			body:    encoding502("gzip, zstd"),
			logs:    []string{anthropicLine("POST", 502), refuseLine(Anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "a body that claims gzip and is not resets the stream",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip"), Chunks: []string{"plain " + AnthropicValue, "more"}},
			status:  200,
			headers: ":status: 200",
			reset:   true,
			logs:    []string{anthropicLine("POST", 200), refuseLine(Anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "a gzip body cut short resets the stream rather than end it",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip"), Chunks: []string{gz[:len(gz)/2], gz[len(gz)/2 : len(gz)-6]}},
			status:  200,
			headers: ":status: 200",
			reset:   true,
			logs:    []string{anthropicLine("POST", 200), refuseLine(Anthropic, filter.ReasonEncoding)},
		},
		{
			name: "trailers are scrubbed and the held tail comes before them",
			a: Answer{Status: "200", Chunks: []string{"text ending in " + AnthropicValue[:12]},
				Trailers: H("grpc-message", "bad key "+AnthropicValue, "grpc-status", "16")},
			status:  200,
			headers: ":status: 200",
			body:    "text ending in " + AnthropicValue[:12],
			tr:      "grpc-message: bad key " + scrubbed + "\ngrpc-status: 16",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "a trailer whose name holds a value is dropped, as a header would be",
			a:       Answer{Status: "200", Chunks: []string{"ok"}, Trailers: H(strings.ToLower(AnthropicValue), "1", "x-sum", AnthropicValue)},
			status:  200,
			headers: ":status: 200",
			body:    "ok",
			tr:      "x-sum: " + scrubbed,
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "a gzip body ending in trailers is flushed before them",
			a:       Answer{Status: "200", Headers: H("content-encoding", "gzip"), Chunks: Split(gz, 2), Trailers: H("x-t", "1")},
			status:  200,
			headers: ":status: 200",
			body:    "answer: " + scrubbed + " and more text after it\n",
			tr:      "x-t: 1",
			logs:    []string{anthropicLine("POST", 200)},
		},
		{
			name:    "the router's own answer to a forwarded request is logged with its status",
			a:       Answer{Status: "503", Headers: H("content-length", "19", "content-type", "text/plain"), Chunks: []string{"no healthy upstream"}},
			status:  503,
			headers: ":status: 503\ncontent-type: text/plain",
			body:    "no healthy upstream",
			logs:    []string{anthropicLine("POST", 503)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "POST"
			}
			e := exchange(t, s.pod.Stream(t, pluginconf.RoleIntercept, Anthropic), anthropicReq(method, "/v1/messages", "x-api-key", AnthropicStandIn), &tc.a)
			if e.Status != tc.status || e.Reset != tc.reset {
				t.Errorf("got status %d reset %v, want %d %v", e.Status, e.Reset, tc.status, tc.reset)
			}
			if want := strings.ReplaceAll(tc.headers, "@LEN@", strconv.Itoa(len(tc.body))); Lines(e.Headers) != want {
				t.Errorf("headers\n got:\n%s\nwant:\n%s", Lines(e.Headers), want)
			}
			switch {
			case tc.writes != nil:
				if !slices.Equal(e.Writes, tc.writes) {
					t.Errorf("writes\n got %q\nwant %q", e.Writes, tc.writes)
				}
			case tc.reset:
				if strings.Contains(e.Body(), "sk-ant-") {
					t.Errorf("a reset answer passed part of a value: %q", e.Body())
				}
			case e.Body() != tc.body:
				t.Errorf("body\n got %q\nwant %q", e.Body(), tc.body)
			}
			if tc.tr != "" && (e.Trailers == nil || Lines(e.Trailers) != tc.tr) {
				t.Errorf("trailers\n got %q\nwant %q", Lines(e.Trailers), tc.tr)
			}
			if e.Local != nil && !e.Dropped {
				t.Error("what followed the refused answer was not dropped")
			}
			if !slices.Equal(e.Logs, tc.logs) {
				t.Errorf("logs\n got %q\nwant %q", e.Logs, tc.logs)
			}
			if !e.Marked {
				t.Error("the mark is gone")
			}
		})
	}
}

// streamEnds: a forwarded request whose stream ends before any answer
// still gets its one action=intercept line, with status=0, and a body
// scrubber does not outlive its stream.
func (s suite) streamEnds(t *testing.T) {
	t.Run("before any answer", func(t *testing.T) {
		e := exchange(t, s.pod.Stream(t, pluginconf.RoleIntercept, Anthropic), anthropicReq("GET", "/v1/models", "x-api-key", AnthropicStandIn), nil)
		if want := []string{anthropicLine("GET", 0)}; e.Forwarded == nil || !slices.Equal(e.Logs, want) {
			t.Errorf("forwarded %v, logs %q, want %q", e.Forwarded != nil, e.Logs, want)
		}
	})
	t.Run("in the middle of a gzip body", func(t *testing.T) {
		st := s.pod.Stream(t, pluginconf.RoleIntercept, Anthropic)
		if _, stop := st.RequestHeaders(anthropicReq("GET", "/v1/models", "x-api-key", AnthropicStandIn)); stop {
			t.Fatal("refused")
		}
		if _, stop := st.ResponseHeaders(H(":status", "200", "content-encoding", "gzip"), false); stop {
			t.Fatal("the answer was refused")
		}
		if !st.Scrubbing() {
			t.Fatal("no body scrubber for an answer with a body")
		}
		st.Destroy()
		if st.Scrubbing() {
			t.Error("the body scrubber outlived the stream")
		}
		if want := []string{anthropicLine("GET", 200)}; !slices.Equal(st.Logs(), want) {
			t.Errorf("logs %q, want %q", st.Logs(), want)
		}
	})
}

// panics: a panic anywhere the adapter touches Envoy's side answers 500
// (a reset once headers went out) with the fixed text, leaves no mark (an
// existing one overwritten with false), drops what follows, and logs one
// reason=internal line; the request's intercept line is still written.
func (s suite) panics(t *testing.T) {
	internal := stream.InternalErrorBody
	for _, tc := range []struct {
		where  string
		a      Answer
		status int
		reset  bool
		logs   []string
	}{
		{"request headers", Answer{Status: "200"}, 500, false, []string{refuseLine("-", stream.ReasonInternal)}},
		{"mark", Answer{Status: "200"}, 500, false, []string{refuseLine(Anthropic, stream.ReasonInternal)}},
		{"response headers", Answer{Status: "200", Chunks: []string{"x"}}, 500, false,
			[]string{anthropicLine("GET", 500), refuseLine(Anthropic, stream.ReasonInternal)}},
		{"response body", Answer{Status: "200", Chunks: []string{"x", "y"}}, 200, true,
			[]string{anthropicLine("GET", 200), refuseLine(Anthropic, stream.ReasonInternal)}},
		{"response trailers", Answer{Status: "200", Chunks: []string{"x"}, Trailers: H("x-t", "1")}, 200, true,
			[]string{anthropicLine("GET", 200), refuseLine(Anthropic, stream.ReasonInternal)}},
	} {
		t.Run(tc.where, func(t *testing.T) {
			st := s.pod.Stream(t, pluginconf.RoleIntercept, Anthropic)
			st.PanicOn(tc.where)
			e := exchange(t, st, anthropicReq("GET", "/v1/models", "x-api-key", AnthropicStandIn), &tc.a)
			if e.Local == nil || e.Local.Status != 500 || e.Local.Body != internal || e.Local.Details != "jr2_custodian_"+stream.ReasonInternal {
				t.Fatalf("local reply %+v, want the 500 %q", e.Local, internal)
			}
			if e.Status != tc.status || e.Reset != tc.reset {
				t.Errorf("the agent got %d, reset %v; want %d, reset %v", e.Status, e.Reset, tc.status, tc.reset)
			}
			if e.Marked {
				t.Error("the mark stayed true")
			}
			if e.Status == 500 && e.Body() != internal {
				t.Errorf("the agent read %q", e.Body())
			}
			if (tc.where == "response headers" || tc.where == "response body") && !e.Dropped {
				t.Error("what followed the panic was not dropped")
			}
			if !slices.Equal(e.Logs, tc.logs) {
				t.Errorf("logs %q, want %q", e.Logs, tc.logs)
			}
		})
	}
}

// unrouted: a route without the per-route config is refused 500, never
// marked.
func (s suite) unrouted(t *testing.T) {
	e := exchange(t, s.pod.Unrouted(t), anthropicReq("GET", "/v1/models", "x-api-key", AnthropicStandIn), headersOnly200)
	refused(t, e, decodeCase{
		status: 500, reason: stream.ReasonMisconfigured,
		body: "jr2 custodian: misconfigured: the route carries no " + pluginconf.PluginName + " per-route config; the request was not passed on",
	}, "-")
}

// sentinels: with held values that upstreams echo everywhere and an agent
// that spells them wherever it can, no value reaches a log line, a local
// reply or what the agent receives, and no stand-in a log line or an
// upstream (exchange's noValue, asked of every case of the suite).
func (s suite) sentinels(t *testing.T) {
	echo := func(chunks ...string) *Answer {
		return &Answer{Status: "200", Headers: H("x-echo", AnthropicValue, "www-authenticate", "Bearer "+TokenValue, "x-hex", HexValue),
			Chunks: chunks, Trailers: H("x-trailer", GitHubValue+" "+HexValue)}
	}
	every := strings.Join(sentinels, " | ")
	ctl := func(extra ...string) []filter.Header {
		return H(append([]string{":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a/surface"}, extra...)...)
	}
	connect := func(authority string) []filter.Header { return H(":method", "CONNECT", ":authority", authority) }
	swap := anthropicReq("POST", "/v1/messages", "x-api-key", AnthropicStandIn)
	for _, tc := range []struct {
		name string
		role pluginconf.Role
		req  []filter.Header
		a    *Answer
	}{
		{"the agent sends a value instead of the stand-in", pluginconf.RoleIntercept, anthropicReq("GET", "/v1/x", "x-api-key", AnthropicValue), nil},
		{"the agent sends a value in another credential header", pluginconf.RoleIntercept, anthropicReq("GET", "/v1/x", "x-api-key", AnthropicStandIn, "authorization", "Bearer "+GitHubValue), echo(every)},
		{"a value in the query, echoed back", pluginconf.RoleIntercept, anthropicReq("GET", "/v1/x?k="+HexValue, "x-api-key", AnthropicStandIn), echo("you asked for k="+HexValue, " and "+every)},
		{"values cut across chunks", pluginconf.RoleIntercept, swap, echo(Split(every+every, 7)...)},
		{"values in a gzip body", pluginconf.RoleIntercept, swap, &Answer{Status: "200", Headers: H("content-encoding", "gzip"), Chunks: Split(Gzipped(t, every), 3)}},
		{"values in a br body", pluginconf.RoleIntercept, swap, &Answer{Status: "200", Headers: H("content-encoding", "br", "x-echo", AnthropicValue), Chunks: []string{every}}},
		{"values in a broken gzip body", pluginconf.RoleIntercept, swap, &Answer{Status: "200", Headers: H("content-encoding", "gzip"), Chunks: []string{every}}},
		{"a value in a refused path", pluginconf.RoleIntercept, anthropicReq("GET", "/v2/"+AnthropicValue, "x-api-key", AnthropicStandIn), nil},
		{"a value in a refused method", pluginconf.RoleIntercept, anthropicReq(strings.ToUpper(HexValue), "/v1/", "x-api-key", AnthropicStandIn), nil},
		{"a value in a header name", pluginconf.RoleIntercept, anthropicReq("GET", "/v1/", "x-api-key", AnthropicStandIn, HexValue+"_x", "1"), nil},
		{"a value as the control bearer", pluginconf.RoleControl, ctl("authorization", "Bearer "+TokenValue), nil},
		{"the Orchestrator echoes the token", pluginconf.RoleControl, ctl("authorization", bearer(TokenStandIn)), echo(every)},
		{"a value spelled as a tunnel's host", pluginconf.RoleEgress, connect(HexValue + ".evil.example:443"), nil},
		{"a value spelled as a guarded host", pluginconf.RoleEgress, connect(HexValue + ".localhost:443"), nil},
		{"a stand-in spelled as a guarded host", pluginconf.RoleEgress, connect(HexStandIn + ".localhost:443"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := ""
			if tc.role == pluginconf.RoleIntercept {
				target = Anthropic
			}
			a := tc.a
			if a == nil {
				a = headersOnly200
			}
			exchange(t, s.pod.Stream(t, tc.role, target), tc.req, a)
		})
	}
}

// Fuzz is the suite's fuzz target (each adapter's FuzzStream): any request
// on any route, answered with a value cut anywhere in it. The adapter never
// panics (no reason=internal), answers or forwards, marks exactly what it
// forwards, and no value or stand-in reaches what exchange's noValue
// guards.
func Fuzz(f *testing.F, d Driver) {
	f.Add(uint8(0), "GET", "api.anthropic.com", "/v1/x", "x-api-key", AnthropicStandIn, "body ", uint8(5))
	f.Add(uint8(0), "POST", "api.anthropic.com:443", "/v1/../v1/x?q="+GitHubStandIn, "authorization", "Bearer "+AnthropicStandIn, "", uint8(0))
	f.Add(uint8(1), "GET", "127.0.0.1:8081", "/agents/a/surface", "authorization", "Bearer "+TokenStandIn, "x", uint8(9))
	f.Add(uint8(1), "POST", "127.0.0.1:8081", "/fetch", "Authorization", "bearer "+TokenStandIn, "", uint8(1))
	f.Add(uint8(2), "CONNECT", "API.anthropic.com.:443", "", "x", "y", "", uint8(0))
	f.Add(uint8(2), "CONNECT", "0x7f.1:443", "", "", "", "", uint8(0))
	f.Add(uint8(3), "GET", "github.com", "/", "authorization", basic("u", GitHubStandIn), "", uint8(3))
	pod := d.Pod(f, Config(f, f.TempDir()))
	routes := []struct {
		role   pluginconf.Role
		target string
	}{{pluginconf.RoleIntercept, Anthropic}, {pluginconf.RoleControl, ""}, {pluginconf.RoleEgress, ""}, {pluginconf.RoleIntercept, GitHub}}
	f.Fuzz(func(t *testing.T, route uint8, method, authority, path, hname, hvalue, body string, cut uint8) {
		r := routes[int(route)%len(routes)]
		k := int(cut) % len(AnthropicValue)
		a := &Answer{Status: "200", Headers: H("x-echo", hvalue+TokenValue), Chunks: []string{body + AnthropicValue[:k], AnthropicValue[k:] + body}}
		if r.role == pluginconf.RoleEgress {
			// A tunnel's bytes are not the filter's to read.
			a = &Answer{Status: "200", Chunks: []string{body}}
			if containsAny(body, sentinels) {
				return
			}
		}
		e := exchange(t, pod.Stream(t, r.role, r.target), H(":method", method, ":authority", authority, ":path", path, hname, hvalue), a)
		for _, l := range e.Logs {
			if strings.Contains(l, "reason="+stream.ReasonInternal) {
				t.Fatalf("a hook panicked: %q", e.Logs)
			}
		}
		if forwarded := e.Forwarded != nil; e.Marked != forwarded {
			t.Fatalf("marked %v, forwarded %v", e.Marked, forwarded)
		}
	})
}

func containsAny(s string, vs []string) bool {
	for _, v := range vs {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}
