package envoyfilter

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// decodeCase is one request through the adapter: either a refusal (status,
// body) or a forward (the exact request the upstream gets), and the exact
// log lines either way.
type decodeCase struct {
	name   string
	role   pluginconf.Role
	target string // intercept routes
	req    *fakeHeaders

	status int    // refused: the local reply's status
	body   string // refused: its body
	reason string // refused: the reason word (details and log)

	upstream   []string // forwarded: the upstream request, as "name: value" lines
	routeClear bool     // forwarded: the route cache was cleared (egress, canonical target)

	logs []string
}

func bearer(standIn string) string { return "Bearer " + standIn }

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

const (
	anthropicStandIn = "jr2-held-ANTHROPIC_API_KEY"
	githubStandIn    = "jr2-held-GITHUB_TOKEN"
	tokenStandIn     = "jr2-held-JR2_SANDBOX_TOKEN"
)

func interceptLine(target, secret, method string) string {
	return "jr2.custodian action=intercept target=" + target + " secret=" + secret + " method=" + method + " status=200"
}

func refuseLine(target, reason string) string {
	return "jr2.custodian action=refuse target=" + target + " reason=" + reason
}

// TestDecodeIntercept: the spec's rules for an intercepted request, one or
// more rows each, through the adapter.
func TestDecodeIntercept(t *testing.T) {
	runDecode(t, newPod(t, testConfig()), []decodeCase{
		{
			name: "rule 7: the stand-in alone is swapped; rule 11: identity upstream",
			req: headers(":method", "POST", ":authority", "api.anthropic.com", ":path", "/v1/messages", ":scheme", "https",
				"x-api-key", anthropicStandIn, "content-type", "application/json", "accept-encoding", "gzip, br"),
			upstream: []string{":authority: api.anthropic.com", ":method: POST", ":path: /v1/messages", ":scheme: https",
				"accept-encoding: identity", "content-type: application/json", "x-api-key: " + anthropicValue},
			logs: []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "POST")},
		},
		{
			name:     "rule 5: the normalised path goes upstream, the query unchanged",
			req:      headers(":method", "GET", ":authority", "api.anthropic.com:443", ":path", `/v1/a/..\b/./c?q=%2e`, "x-api-key", anthropicStandIn),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/b/c?q=%2e", "accept-encoding: identity", "x-api-key: " + anthropicValue},
			logs:     []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET")},
		},
		{
			name: "rule 8: every other credential header is removed",
			req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/models", "x-api-key", anthropicStandIn,
				"authorization", "Bearer agent-own", "api-key", "x", "proxy-authorization", "Basic eA==", "x-goog-api-key", "y"),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/models", "accept-encoding: identity", "x-api-key: " + anthropicValue},
			logs:     []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET")},
		},
		{
			name:     "the upstream's Host is the target's, however the agent spelled it (as the Go host sends it)",
			req:      headers(":method", "GET", ":authority", "API.Anthropic.COM.:443", ":path", "/v1/models", "x-api-key", anthropicStandIn),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/models", "accept-encoding: identity", "x-api-key: " + anthropicValue},
			logs:     []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET")},
		},
		{
			name: "range and if-range never go upstream: an echo is never cut into pieces",
			req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/models", "x-api-key", anthropicStandIn,
				"range", "bytes=9-20", "if-range", `"e1"`),
			upstream: []string{":authority: api.anthropic.com", ":method: GET", ":path: /v1/models", "accept-encoding: identity", "x-api-key: " + anthropicValue},
			logs:     []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET")},
		},
		{
			name: "rule 1: a method outside the seven is 405", req: headers(":method", "TRACE", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", anthropicStandIn),
			status: 405, reason: filter.ReasonMethod,
			body: "jr2 custodian: method TRACE is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS",
		},
		{
			name: "rule 2: a header name with _ is 400", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", anthropicStandIn, "x_api_key", "z"),
			status: 400, reason: filter.ReasonUnderscore,
			body: `jr2 custodian: header x_api_key has "_" in its name; header names here use "-"`,
		},
		{
			name: "rule 3: a Host naming another host is 421", req: headers(":method", "GET", ":authority", "evil.example", ":path", "/v1/x", "x-api-key", anthropicStandIn),
			status: 421, reason: filter.ReasonHost,
			body: "jr2 custodian: the Host header must name api.anthropic.com:443",
		},
		{
			name: "rule 3: a Host naming another port is 421", req: headers(":method", "GET", ":authority", "api.anthropic.com:8443", ":path", "/v1/x", "x-api-key", anthropicStandIn),
			status: 421, reason: filter.ReasonHost,
			body: "jr2 custodian: the Host header must name api.anthropic.com:443",
		},
		{
			name: "rule 4: an encoded separator is 400", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/%2E%2e/admin", "x-api-key", anthropicStandIn),
			status: 400, reason: filter.ReasonEncoded,
			body: `jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`,
		},
		{
			name: "rule 5: a path outside the secret's paths is 403", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/../admin", "x-api-key", anthropicStandIn),
			status: 403, reason: filter.ReasonPath,
			body: "jr2 custodian: ANTHROPIC_API_KEY may not be sent to this path; its paths are /v1/",
		},
		{
			name: "rule 6: a credential header twice is 400", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", anthropicStandIn, "x-api-key", anthropicStandIn),
			status: 400, reason: filter.ReasonDuplicate,
			body: "jr2 custodian: header x-api-key was sent more than once; send it once",
		},
		{
			name: "rule 9: no stand-in is 403 naming the secret and header", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", "sk-ant-agent-guess"),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key",
		},
		{
			name: "rule 9: another secret's stand-in does not swap", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", githubStandIn),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key",
		},
		{
			name: "rule 10: a stand-in in the query is 403", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x?key=jr2-held-ANTHROPIC_API_KEY", "x-api-key", anthropicStandIn),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
		{
			name: "rule 10: a stand-in in the path is 403", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/jr2-held-GITHUB_TOKEN", "x-api-key", anthropicStandIn),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of GITHUB_TOKEN is in the path; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
		{
			name: "rule 10: a stand-in in another header is 403", req: headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", anthropicStandIn, "x-note", "copy of jr2-held-ANTHROPIC_API_KEY"),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in header x-note; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
	}, anthropic)

	runDecode(t, newPod(t, testConfig()), []decodeCase{
		{
			name:     "rule 7: one auth scheme and the stand-in",
			req:      headers(":method", "GET", ":authority", "github.com", ":path", "/repo.git/info/refs?service=git-upload-pack", "authorization", bearer(githubStandIn)),
			upstream: []string{":authority: github.com", ":method: GET", ":path: /repo.git/info/refs?service=git-upload-pack", "accept-encoding: identity", "authorization: Bearer " + githubValue},
			logs:     []string{interceptLine(github, "GITHUB_TOKEN", "GET")},
		},
		{
			name:     "rule 7: a Basic pair whose password is the stand-in, as git sends it",
			req:      headers(":method", "POST", ":authority", "github.com", ":path", "/repo.git/git-upload-pack", "authorization", basic("x-access-token", githubStandIn)),
			upstream: []string{":authority: github.com", ":method: POST", ":path: /repo.git/git-upload-pack", "accept-encoding: identity", "authorization: " + basic("x-access-token", githubValue)},
			logs:     []string{interceptLine(github, "GITHUB_TOKEN", "POST")},
		},
		{
			name: "rule 10: the stand-in as a Basic user is 403", req: headers(":method", "GET", ":authority", "github.com", ":path", "/", "authorization", basic(githubStandIn, githubStandIn)),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of GITHUB_TOKEN is in the Basic user of header authorization; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
	}, github)
}

// TestDecodeControl: the control listener's four routes, and what it
// refuses.
func TestDecodeControl(t *testing.T) {
	pd := newPod(t, testConfig())
	control := "jr2.custodian action=intercept target=" + orchestrator + " secret=JR2_SANDBOX_TOKEN method="
	runDecode(t, pd, []decodeCase{
		{
			name:     "GET surface: the bearer swapped, the Orchestrator named",
			req:      headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/surface", "authorization", bearer(tokenStandIn)),
			upstream: []string{":authority: " + orchestrator, ":method: GET", ":path: /agents/a1/surface", "accept-encoding: identity", "authorization: Bearer " + tokenValue},
			logs:     []string{control + "GET status=200"},
		},
		{
			name:     "POST events: other credential headers removed",
			req:      headers(":method", "POST", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/events", "authorization", bearer(tokenStandIn), "x-api-key", "k", "content-type", "application/json"),
			upstream: []string{":authority: " + orchestrator, ":method: POST", ":path: /agents/a1/events", "accept-encoding: identity", "authorization: Bearer " + tokenValue, "content-type: application/json"},
			logs:     []string{control + "POST status=200"},
		},
		{
			name:     "GET a delivery",
			req:      headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/deliveries/d-9", "authorization", bearer(tokenStandIn)),
			upstream: []string{":authority: " + orchestrator, ":method: GET", ":path: /agents/a1/deliveries/d-9", "accept-encoding: identity", "authorization: Bearer " + tokenValue},
			logs:     []string{control + "GET status=200"},
		},
		{
			name:     "POST /fetch goes to the Sandbox's fetch",
			req:      headers(":method", "POST", ":authority", "127.0.0.1:8081", ":path", "/fetch", "authorization", bearer(tokenStandIn)),
			upstream: []string{":authority: " + orchestrator, ":method: POST", ":path: /sandboxes/ws-7f3a/fetch", "accept-encoding: identity", "authorization: Bearer " + tokenValue},
			logs:     []string{control + "POST status=200"},
		},
		{
			name: "anything else is 404", req: headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/admin", "authorization", bearer(tokenStandIn)),
			status: 404, reason: filter.ReasonRoute,
			body: "jr2 custodian: not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch",
		},
		{
			name: "no bearer is 403", req: headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/surface"),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of JR2_SANDBOX_TOKEN in authorization",
		},
		{
			name: "another stand-in as the bearer is 403", req: headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/surface", "authorization", bearer(githubStandIn)),
			status: 403, reason: filter.ReasonNoStandIn,
			body: "jr2 custodian: needs the stand-in of JR2_SANDBOX_TOKEN in authorization",
		},
		{
			name: "a stand-in elsewhere is 403", req: headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/surface?t=jr2-held-JR2_SANDBOX_TOKEN", "authorization", bearer(tokenStandIn)),
			status: 403, reason: filter.ReasonStandIn,
			body: "jr2 custodian: the stand-in of JR2_SANDBOX_TOKEN is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream",
		},
	}, "")

	noSandbox := testConfig()
	noSandbox.Sandbox = ""
	runDecode(t, newPod(t, noSandbox), []decodeCase{{
		name: "POST /fetch without a Sandbox is 404", req: headers(":method", "POST", ":authority", "127.0.0.1:8081", ":path", "/fetch", "authorization", bearer(tokenStandIn)),
		status: 404, reason: filter.ReasonRoute,
		body: "jr2 custodian: POST /fetch is not served here: this pod has no Sandbox",
	}}, "")
}

// TestDecodeEgress: CONNECT targets — intercepted, tunneled or refused.
func TestDecodeEgress(t *testing.T) {
	runDecode(t, newPod(t, testConfig()), []decodeCase{
		{
			name:     "a bound target is marked and goes on to its intercept route",
			req:      headers(":method", "CONNECT", ":authority", anthropic),
			upstream: []string{":authority: " + anthropic, ":method: CONNECT"},
		},
		{
			name:       "the canonical target decides, and the routes see it",
			req:        headers(":method", "CONNECT", ":authority", "API.Anthropic.COM.:443"),
			upstream:   []string{":authority: " + anthropic, ":method: CONNECT"},
			routeClear: true,
		},
		{
			// The tunnel's line is Envoy's access log's, once the tunnel is
			// up (controlplane's egressLogs): the filter writes none.
			name:     "another target is tunneled",
			req:      headers(":method", "CONNECT", ":authority", "example.org:443"),
			upstream: []string{":authority: example.org:443", ":method: CONNECT"},
		},
		{
			name:       "a tunnel's target holding a stand-in goes on lowercased, unlogged",
			req:        headers(":method", "CONNECT", ":authority", githubStandIn+".evil.example:443"),
			upstream:   []string{":authority: " + strings.ToLower(githubStandIn) + ".evil.example:443", ":method: CONNECT"},
			routeClear: true,
		},
		{
			name: "a spelled loopback is guarded", req: headers(":method", "CONNECT", ":authority", "127.1:443"),
			status: 403, reason: filter.ReasonGuard,
			body: "jr2 custodian: 127.1:443 is guarded (loopback); a tunnel never reaches it",
			logs: []string{refuseLine("127.1:443", filter.ReasonGuard)},
		},
		{
			name: "localhost is guarded", req: headers(":method", "CONNECT", ":authority", "LocalHost:22"),
			status: 403, reason: filter.ReasonGuard,
			body: "jr2 custodian: localhost:22 is guarded (a localhost name); a tunnel never reaches it",
			logs: []string{refuseLine("localhost:22", filter.ReasonGuard)},
		},
		{
			name: "a request other than CONNECT is 405", req: headers(":method", "GET", ":authority", anthropic, ":path", "/"),
			status: 405, reason: filter.ReasonNotConnect,
			body: "jr2 custodian: this listener takes CONNECT only; use it as HTTPS_PROXY",
			logs: []string{refuseLine("-", filter.ReasonNotConnect)},
		},
		{
			name: "a target that is not host:port is 400", req: headers(":method", "CONNECT", ":authority", "api.anthropic.com"),
			status: 400, reason: filter.ReasonTarget,
			body: "jr2 custodian: a CONNECT target is host:port: want host:port",
			logs: []string{refuseLine("-", filter.ReasonTarget)},
		},
	}, "")
}

// runDecode runs each case through a stream of role (intercept toward
// target when target is set, control or egress by the test's name).
func runDecode(t *testing.T, pd *pod, cases []decodeCase, target string) {
	t.Helper()
	role := pluginconf.RoleIntercept
	switch {
	case target != "":
	case strings.HasPrefix(t.Name(), "TestDecodeControl"):
		role = pluginconf.RoleControl
	case strings.HasPrefix(t.Name(), "TestDecodeEgress"):
		role = pluginconf.RoleEgress
	}
	cfg := pd.route(t, role, target)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := exchange(t, cfg, tc.req.clone(), nil)
			if tc.status != 0 {
				checkRefused(t, o, tc, target)
				return
			}
			if o.local != nil || o.upstreamReq == nil {
				t.Fatalf("refused, want forwarded:\n%s", o.describe())
			}
			if !o.cb.meta.marked() {
				t.Error("forwarded without the mark")
			}
			if got, want := o.upstreamReq.String(), strings.Join(tc.upstream, "\n"); got != want {
				t.Errorf("upstream request\n got:\n%s\nwant:\n%s", got, want)
			}
			if got := o.cb.routeClears > 0; got != tc.routeClear {
				t.Errorf("route cache cleared: %v, want %v", got, tc.routeClear)
			}
			if !equal(o.logs, tc.logs) {
				t.Errorf("logs\n got %q\nwant %q", o.logs, tc.logs)
			}
			if o.status != 200 {
				t.Errorf("the agent got %d, want the upstream's 200", o.status)
			}
		})
	}
}

// checkRefused asserts a local reply: exact status and body, text/plain,
// no gRPC status, details that name the reason, no mark, nothing upstream,
// the reply passed through the filter's encoder side unchanged, and the
// refuse line.
func checkRefused(t *testing.T, o *outcome, tc decodeCase, target string) {
	t.Helper()
	if o.local == nil {
		t.Fatalf("forwarded, want %d:\n%s", tc.status, o.describe())
	}
	r := o.local
	if r.status != tc.status || r.body != tc.body {
		t.Errorf("local reply\n got %d %q\nwant %d %q", r.status, r.body, tc.status, tc.body)
	}
	if ct := r.headers["content-type"]; len(ct) != 1 || ct[0] != "text/plain; charset=utf-8" || len(r.headers) != 1 {
		t.Errorf("local reply headers %v", r.headers)
	}
	if r.grpc != -1 || r.details != "jr2_custodian_"+tc.reason || strings.ContainsAny(r.details, " \t") {
		t.Errorf("grpc status %d, details %q", r.grpc, r.details)
	}
	if o.cb.meta.marked() || o.upstreamReq != nil {
		t.Error("a refused request was marked or went upstream")
	}
	if len(o.cb.dec.replies) != 1 || len(o.cb.enc.replies) != 0 {
		t.Errorf("%d decoder and %d encoder replies, want one decoder reply", len(o.cb.dec.replies), len(o.cb.enc.replies))
	}
	if o.status != tc.status || o.body() != tc.body || o.headers.GetRaw("content-length") != strconv.Itoa(len(tc.body)) {
		t.Errorf("the agent got\n%s\nwant the reply unchanged", o.describe())
	}
	want := tc.logs
	if want == nil {
		logTarget := target
		if logTarget == "" {
			logTarget = orchestrator
		}
		want = []string{refuseLine(logTarget, tc.reason)}
	}
	if !equal(o.logs, want) {
		t.Errorf("logs\n got %q\nwant %q", o.logs, want)
	}
}
