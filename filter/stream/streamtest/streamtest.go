// Package streamtest is the conformance suite of the stream machine's two
// Envoy adapters — the golang filter's (filter/envoyfilter, over fakes of
// its SDK) and the dynamic module's (filter/module, over a fake of its C
// ABI). Every case of the adapters' stream behaviour lives here once:
// each role's request decisions and refusal texts, the response scrub
// (headers, chunks, gzip, trailers, resets), the log lines, the mark, the
// route cache, and failing closed on a panic. A rule or a translation that
// differs between the two adapters fails one of them here.
//
// An adapter's test supplies a Driver: its own fake of Envoy's side of one
// stream, reached only through the hooks Envoy calls (Stream). The suite
// holds one model of Envoy's filter manager around those hooks (exchange):
// what the agent receives, what goes upstream, and the RBAC filter that
// refuses a request the filter did not mark.
package streamtest

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/contract"
)

// The suite's pod.
const (
	Anthropic    = "api.anthropic.com:443"
	GitHub       = "github.com:443"
	Orchestrator = "jr2-orchestrator.jr2.svc:4000"
	Sandbox      = "ws-7f3a"
)

// Sentinel values: a case fails if one reaches the agent, a log line or a
// reply.
const (
	AnthropicValue = "sk-ant-STREAMTEST-c4Vn8Qz2Lm6Xr1Tb"
	GitHubValue    = "ghp_STREAMTEST_github_Wq4Zr8Tn2Ks"
	TokenValue     = "tok-STREAMTEST-k9Pw3Hs7Jd2Fq5Zn"
	// HexValue is all lowercase, so that a host name can spell it.
	HexValue = "deadbeefcafe0123456789streamtest"
)

var sentinels = []string{AnthropicValue, GitHubValue, TokenValue, HexValue}

// The stand-ins of the pod's secrets.
var (
	AnthropicStandIn = contract.StandIn("ANTHROPIC_API_KEY")
	GitHubStandIn    = contract.StandIn("GITHUB_TOKEN")
	TokenStandIn     = contract.StandIn(contract.TokenName)
	HexStandIn       = contract.StandIn("HEX_TOKEN")
	standIns         = []string{AnthropicStandIn, GitHubStandIn, TokenStandIn, HexStandIn}
)

// The places pod: the suite's pod and one more secret, PLACES, whose name
// holds no '_', so that a header name holding its stand-in reaches rule 10
// (rule 2 would answer it first): the pod on which the shared table of
// rule 10's places (package standintest) runs.
const (
	Places      = "places.example:443"
	PlacesValue = "sk-places-STREAMTEST-Hq7Rt2Vw9Ky4"
)

// PlacesStandIn is the stand-in of PLACES.
var PlacesStandIn = contract.StandIn("PLACES")

// The places pod also holds SHAPED, whose stand-in is shaped as an
// Anthropic key (contract.StandInOf), bound to Shaped in x-api-key under
// /v1/: the shared table runs on it too, so a shaped stand-in is found
// wherever a plain one is.
const (
	Shaped      = "shaped.example:443"
	ShapedValue = "sk-shaped-STREAMTEST-Rw3Tz8Kq1Xv5"
)

// ShapedStandIn is the stand-in of SHAPED.
var ShapedStandIn, _ = contract.StandInOf("SHAPED", shapedShape)

var shapedShape = &contract.Shape{Kind: "anthropic"}

// placesConfig is Config with PLACES bound to Places in x-api-key, under
// /v1/.
func placesConfig(t testing.TB, dir string) filter.Config {
	t.Helper()
	c := Config(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "PLACES"), []byte(PlacesValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHAPED"), []byte(ShapedValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Secrets = append(c.Secrets, filter.SecretConfig{Name: "PLACES", StandIn: PlacesStandIn, Targets: []string{Places}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
		filter.SecretConfig{Name: "SHAPED", StandIn: ShapedStandIn, Shape: shapedShape, Targets: []string{Shaped}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}})
	return c
}

// Config is the engine config of the suite's pod, its value files written
// into dir.
func Config(t testing.TB, dir string) filter.Config {
	t.Helper()
	for name, v := range map[string]string{"ANTHROPIC_API_KEY": AnthropicValue, "GITHUB_TOKEN": GitHubValue, contract.TokenName: TokenValue, "HEX_TOKEN": HexValue} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filter.Config{
		Pod: Sandbox, Sandbox: Sandbox, Orchestrator: Orchestrator, ValuesDir: dir,
		Listeners: filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
		Secrets: []filter.SecretConfig{
			{Name: "ANTHROPIC_API_KEY", StandIn: AnthropicStandIn, Targets: []string{Anthropic}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: "GITHUB_TOKEN", StandIn: GitHubStandIn, Targets: []string{"api.github.com:443", GitHub}, Headers: contract.DefaultHeaders},
			{Name: contract.TokenName, StandIn: TokenStandIn, Headers: []string{"authorization"}},
			{Name: "HEX_TOKEN", StandIn: HexStandIn, Targets: []string{"a.example:443"}, Headers: []string{"x-k"}},
		},
	}
}

// Driver builds an adapter's streams.
type Driver interface {
	// Pod loads c as the adapter's filter-level config, as Envoy would.
	Pod(t testing.TB, c filter.Config) Pod
}

// Pod is one loaded filter-level config.
type Pod interface {
	// Stream starts one stream on a route of role (intercept routes
	// toward target), its per-route config built as Envoy builds it.
	Stream(t *testing.T, role pluginconf.Role, target string) Stream
	// Unrouted starts one stream on a route that carries no per-route
	// config: Envoy hands the filter its filter-level config alone.
	Unrouted(t *testing.T) Stream
}

// Stream is one stream of the adapter, reached through the hooks Envoy
// calls, each through the adapter's fake of Envoy's side. A header list
// goes in as Envoy's map holds it and comes back as the hook left the map.
// stop reports a hook's "stop iteration"; a hook that answers anything the
// model cannot place fails the test inside the driver.
type Stream interface {
	RequestHeaders(h []filter.Header) (out []filter.Header, stop bool)
	ResponseHeaders(h []filter.Header, endStream bool) (out []filter.Header, stop bool)
	ResponseData(chunk []byte, endStream bool) (out []byte, stop bool)
	// ResponseTrailers also returns what the hook added to the body
	// before the trailers.
	ResponseTrailers(t []filter.Header) (out []filter.Header, added []byte, stop bool)
	// Destroy ends the stream as Envoy does, whether or not it completed.
	Destroy()

	// Replies is every local reply the stream sent, in order.
	Replies() []Reply
	// Mark is the jr2.custodian/decided mark: whether it is set, and to
	// what.
	Mark() (set, value bool)
	// RouteClears counts the times the route cache was cleared.
	RouteClears() int
	// Logs is every line the stream logged since it began.
	Logs() []string
	// Scrubbing reports whether the stream holds a body scrubber.
	Scrubbing() bool
	// PanicOn makes the fake panic wherever the adapter touches where:
	// "request headers", "response headers", "response body", "response
	// trailers" or "mark".
	PanicOn(where string)
}

// Reply is one local reply as the adapter handed it to Envoy.
type Reply struct {
	Status  int
	Body    string
	Details string
	// Headers are the reply's own, besides :status and content-length
	// (which Envoy adds).
	Headers []filter.Header
}

// Answer is what the upstream answers a forwarded request with. No Chunks
// and no Trailers: a headers-only answer.
type Answer struct {
	Status   string
	Headers  []filter.Header
	Chunks   []string
	Trailers []filter.Header
}

// Exchange is what one request and, when it went upstream, its answer
// came to.
type Exchange struct {
	// What the agent got.
	Status   int
	Headers  []filter.Header // the answer's headers, :status included
	Writes   []string        // each piece of body passed on, in order
	Trailers []filter.Header // nil: none passed
	Reset    bool            // the stream was reset after its headers

	// Forwarded is the request as it went upstream; nil when it did not.
	Forwarded []filter.Header
	// Local is the adapter's own reply, if it made one.
	Local *Reply
	// The mark as the stream ended.
	MarkSet, Marked bool
	RouteCleared    bool
	Logs            []string
	// Dropped: after the adapter stopped the answer, a further chunk of
	// the upstream's was fed and passed nothing.
	Dropped bool
}

// Body is every piece of body the agent got.
func (e Exchange) Body() string { return strings.Join(e.Writes, "") }

// H builds headers from name, value pairs.
func H(kv ...string) []filter.Header {
	var hs []filter.Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, filter.Header{Name: kv[i], Value: kv[i+1]})
	}
	return hs
}

// Lines renders headers as sorted "name: value" lines.
func Lines(hs []filter.Header) string {
	var l []string
	for _, h := range hs {
		l = append(l, h.Name+": "+h.Value)
	}
	sort.Strings(l)
	return strings.Join(l, "\n")
}

func get(hs []filter.Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// Run runs the whole suite on d.
func Run(t *testing.T, d Driver) {
	pod := d.Pod(t, Config(t, t.TempDir()))
	noSandbox := Config(t, t.TempDir())
	noSandbox.Sandbox = ""
	s := suite{pod: pod, noSandbox: d.Pod(t, noSandbox), placesPod: d.Pod(t, placesConfig(t, t.TempDir()))}
	for _, g := range s.groups() {
		t.Run(g.name, g.run)
	}
}

// group is one conformance case of Run: a subtest of its own, holding the
// cases of one concern.
type group struct {
	name string
	run  func(*testing.T)
}

func (s suite) groups() []group {
	return []group{
		{"intercept", s.intercept},
		{"control", s.control},
		{"egress", s.egress},
		{"request side", s.requestSide},
		{"answers", s.answers},
		{"websocket", s.webSocket},
		{"stream ends", s.streamEnds},
		{"panics", s.panics},
		{"no route config", s.unrouted},
		{"sentinels", s.sentinels},
	}
}

// Groups are the names of Run's conformance cases, in the order it runs
// them, and then "Rotation" and "OAuth" (the suite's other entry points). envoy/README.md
// names, for each, which adapters ran it (TestREADMENamesWhereEachCaseRan).
func Groups() []string {
	var names []string
	for _, g := range (suite{}).groups() {
		names = append(names, g.name)
	}
	return append(names, "Rotation", "OAuth")
}

type suite struct{ pod, noSandbox, placesPod Pod }

// exchange runs one request (and, when it goes upstream, a; nil: the
// stream ends before any answer) through s, the way Envoy's filter manager
// does with the rendered RBAC filter after the Custodian's:
//
//   - a local reply from the request headers goes through the filter's
//     response hooks to the agent;
//   - a request that went on without the mark is answered 403 by RBAC;
//   - a local reply from the response headers (none sent yet) goes
//     straight to the agent; one from a body chunk or the trailers
//     (headers already sent) resets the stream;
//   - once the filter stopped the answer, a further chunk of the
//     upstream's must pass nothing.
//
// Whatever happened, no held value reached the agent, a reply or a log.
func exchange(t *testing.T, s Stream, req []filter.Header, a *Answer) (e Exchange) {
	t.Helper()
	defer func() {
		s.Destroy()
		e.Logs = s.Logs()
		e.MarkSet, e.Marked = s.Mark()
		e.RouteCleared = s.RouteClears() > 0
		noValue(t, e)
	}()
	out, stop := s.RequestHeaders(append([]filter.Header(nil), req...))
	rs := s.Replies()
	if stop {
		if len(rs) != 1 {
			t.Fatalf("the request headers stopped after %d local replies, want one", len(rs))
		}
		e.Local = &rs[0]
		through(t, s, &e, replyAnswer(rs[0]))
		return e
	}
	if len(rs) != 0 {
		t.Fatalf("the request headers went on after a local reply")
	}
	if set, v := s.Mark(); !set || !v {
		through(t, s, &e, &Answer{Status: "403", Headers: H("content-length", "19", "content-type", "text/plain"), Chunks: []string{"RBAC: access denied"}})
		return e
	}
	e.Forwarded = out
	if a != nil {
		through(t, s, &e, a)
	}
	return e
}

// replyAnswer is the answer Envoy builds for a local reply.
func replyAnswer(r Reply) *Answer {
	return &Answer{Status: strconv.Itoa(r.Status), Headers: append(H("content-length", strconv.Itoa(len(r.Body))), r.Headers...), Chunks: []string{r.Body}}
}

// through passes an answer through the stream's response hooks.
func through(t *testing.T, s Stream, e *Exchange, a *Answer) {
	t.Helper()
	h := append(H(":status", a.Status), a.Headers...)
	before := len(s.Replies())
	out, stop := s.ResponseHeaders(h, len(a.Chunks) == 0 && a.Trailers == nil)
	if stop {
		r := newReply(t, s, before, "the response headers")
		e.Local = &r
		d := replyAnswer(r)
		e.Status, e.Headers, e.Writes = r.Status, append(H(":status", d.Status), d.Headers...), d.Chunks
		e.Dropped = dropsRest(t, s)
		return
	}
	e.Status, _ = strconv.Atoi(get(out, ":status"))
	e.Headers = out
	for i, c := range a.Chunks {
		before := len(s.Replies())
		b, stop := s.ResponseData([]byte(c), i == len(a.Chunks)-1 && a.Trailers == nil)
		if stop {
			r := newReply(t, s, before, "a body chunk")
			e.Local, e.Reset = &r, true
			e.Dropped = dropsRest(t, s)
			return
		}
		e.Writes = append(e.Writes, string(b))
	}
	if a.Trailers == nil {
		return
	}
	before = len(s.Replies())
	tr, added, stop := s.ResponseTrailers(append([]filter.Header(nil), a.Trailers...))
	if stop {
		r := newReply(t, s, before, "the trailers")
		e.Local, e.Reset = &r, true
		return
	}
	if len(added) > 0 {
		e.Writes = append(e.Writes, string(added))
	}
	e.Trailers = tr
}

// newReply is the reply a stopping response hook must have sent: a stop
// with none would leave the agent waiting.
func newReply(t *testing.T, s Stream, before int, where string) Reply {
	t.Helper()
	rs := s.Replies()
	if len(rs) != before+1 {
		t.Fatalf("%s stopped after %d new local replies, want one", where, len(rs)-before)
	}
	return rs[len(rs)-1]
}

// dropsRest feeds one more chunk of the upstream's, holding a value, after
// the filter stopped the answer: it must stop and pass nothing.
func dropsRest(t *testing.T, s Stream) bool {
	t.Helper()
	b, stop := s.ResponseData([]byte("late "+AnthropicValue), true)
	if !stop || len(b) != 0 {
		t.Errorf("a chunk after the answer was stopped: stop %v, %d bytes passed", stop, len(b))
		return false
	}
	return true
}

// noValue fails when a held value is anywhere the agent, a reply or a log
// can read it.
func noValue(t *testing.T, e Exchange) {
	t.Helper()
	where := map[string]string{
		"the answer's headers": Lines(e.Headers), "the body": e.Body(), "the trailers": Lines(e.Trailers),
		"the logs": strings.Join(e.Logs, "\n"),
	}
	if e.Local != nil {
		where["the local reply"] = e.Local.Body + "\n" + e.Local.Details + "\n" + Lines(e.Local.Headers)
	}
	for w, s := range where {
		for _, v := range sentinels {
			if strings.Contains(s, v) {
				t.Errorf("%s hold a held value", w)
			}
		}
	}
	for _, v := range standIns {
		if strings.Contains(Lines(e.Forwarded), v) {
			t.Errorf("a stand-in went upstream")
		}
		if strings.Contains(strings.Join(e.Logs, "\n"), v) {
			t.Errorf("a log line holds a stand-in")
		}
	}
}
