package module

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/cgo"
	"strings"
	"testing"
	"unsafe"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream/streamtest"
	"jr2.dev/boundary/internal/contract"
)

// The module's Go side against a fake of Envoy's ABI, written from Envoy's
// abi_impl.cc where the module can tell: set_header with an empty value
// removes, the received body is the chunk now passing (drain then append
// rewrites it), the buffered response body is what trailers add. The whole
// module, cgo included, runs in a real Envoy in every make test (e2e).

const (
	anthropicValue = "sk-ant-SENTINEL-module-Q7c2Lx9VbN4mRt6Y"
	anthropic      = "api.anthropic.com:443"
)

// fakeABI is one stream's Envoy.
type fakeABI struct {
	hdr      map[int][]filter.Header
	chunk    []byte     // the received response body now passing
	reqChunk []byte     // the received request body now passing
	appended []byte     // what went to the buffered response body
	reply    *fakeReply // the last of replies
	replies  []fakeReply
	mark     *bool
	route    uintptr
	clears   int
	// target is the connection's filter state TargetFilterState; none
	// when empty.
	target  string
	panicOn string // a callback that panics, as a bug in the adapter would
}

type fakeReply struct {
	status  int
	body    string
	details string
	headers []filter.Header
}

func (x *fakeABI) boom(name string) {
	if x.panicOn == name {
		panic("fake: " + name)
	}
}

// mapNames are the suite's names of the header maps (streamtest.PanicOn).
var mapNames = map[int]string{requestHeader: "request headers", responseHeader: "response headers", responseTrailer: "response trailers"}

func (x *fakeABI) headers(kind int, into *headerCopy) []filter.Header {
	x.boom("headers")
	x.boom(mapNames[kind])
	return copyHeaders(x.hdr[kind], into)
}

// copyHeaders copies hs into c as cabi copies Envoy's map.
func copyHeaders(hs []filter.Header, c *headerCopy) []filter.Header {
	size := 0
	for _, h := range hs {
		size += len(h.Name) + len(h.Value)
	}
	c.start(len(hs), size)
	for _, h := range hs {
		c.add(unsafe.Slice(unsafe.StringData(h.Name), len(h.Name)), unsafe.Slice(unsafe.StringData(h.Value), len(h.Value)))
	}
	return c.list
}

// setHeader keeps copies, as Envoy does: the module's strings may view
// memory a later stream reuses.
func (x *fakeABI) setHeader(kind int, name, value string) {
	x.boom("setHeader")
	name, value = strings.Clone(name), strings.Clone(value)
	var out []filter.Header
	set := false
	for _, h := range x.hdr[kind] {
		if h.Name != name {
			out = append(out, h)
		} else if value != "" && !set {
			out = append(out, filter.Header{Name: name, Value: value})
			set = true
		}
	}
	if value != "" && !set {
		out = append(out, filter.Header{Name: name, Value: value})
	}
	x.hdr[kind] = out
}

func (x *fakeABI) addHeader(kind int, name, value string) {
	x.hdr[kind] = append(x.hdr[kind], filter.Header{Name: strings.Clone(name), Value: strings.Clone(value)})
}

func (x *fakeABI) body(kind int, into []byte) []byte {
	x.boom("body")
	x.boom("response body")
	switch kind {
	case receivedResponseBody:
		return append(into, x.chunk...)
	case receivedRequestBody:
		return append(into, x.reqChunk...)
	}
	return into
}

func (x *fakeABI) drainBody(kind int, n int) {
	switch kind {
	case receivedResponseBody:
		n = min(n, len(x.chunk))
		x.chunk = x.chunk[n:]
	case receivedRequestBody:
		n = min(n, len(x.reqChunk))
		x.reqChunk = x.reqChunk[n:]
	}
}

func (x *fakeABI) appendBody(kind int, b []byte) {
	switch kind {
	case receivedResponseBody:
		x.chunk = append(x.chunk, b...)
	case receivedRequestBody:
		x.reqChunk = append(x.reqChunk, b...)
	case bufferedResponseBody:
		x.appended = append(x.appended, b...)
	}
}

func (x *fakeABI) sendResponse(status int, body, details string, headers []filter.Header) {
	x.boom("sendResponse")
	x.replies = append(x.replies, fakeReply{status, body, details, headers})
	x.reply = &x.replies[len(x.replies)-1]
}

func (x *fakeABI) setMark(v bool)       { x.boom("mark"); x.mark = &v }
func (x *fakeABI) clearRouteCache()     { x.clears++ }
func (x *fakeABI) routeConfig() uintptr { x.boom("routeConfig"); return x.route }
func (x *fakeABI) filterState(key string) (string, bool) {
	x.boom("filterState")
	return x.target, key == pluginconf.TargetFilterState && x.target != ""
}

// pod builds a filter-level config over a values dir holding the sentinel,
// and an intercept route toward anthropic.
func pod(t *testing.T) (*filterConfig, *routeConfig) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ANTHROPIC_API_KEY"), []byte(anthropicValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := "tok-SENTINEL-module-8Hq2Zr5Wd1Kp7Xs3"
	if err := os.WriteFile(filepath.Join(dir, contract.TokenName), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := filter.Config{
		Pod: "ws-mod", Sandbox: "ws-mod", Orchestrator: "jr2-orchestrator.jr2.svc:4000", ValuesDir: dir,
		Listeners: filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
		Secrets: []filter.SecretConfig{
			{Name: "ANTHROPIC_API_KEY", StandIn: contract.StandIn("ANTHROPIC_API_KEY"), Targets: []string{anthropic}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Headers: []string{"authorization"}},
		},
	}
	return podOf(t, c, anthropic)
}

// podOf is c's filter-level config and an intercept route toward target.
func podOf(t *testing.T, c filter.Config, target string) (*filterConfig, *routeConfig) {
	t.Helper()
	fc := filterConfigOf(t, c)
	rc, err := newRouteConfig(pluginconf.PluginName, pluginconf.RouteConfig{Role: pluginconf.RoleIntercept, Target: target}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return fc, rc
}

// connectionRoute is the shared intercept listener's route config: no
// target of its own, the connection's (pluginconf.TargetFilterState).
func connectionRoute(t testing.TB) *routeConfig {
	t.Helper()
	rc, err := newRouteConfig(pluginconf.PluginName, pluginconf.RouteConfig{Role: pluginconf.RoleIntercept}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// filterConfigOf writes c as custodian.json and loads the filter-level
// config that names it, as Envoy's config hook does.
func filterConfigOf(t testing.TB, c filter.Config) *filterConfig {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	streamtest.Prepare(t, c, dir)
	path := filepath.Join(dir, "custodian.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fc, err := newFilterConfig(pluginconf.PluginName, pluginconf.FilterConfig{EngineConfig: path}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

// newStream is one stream of the route, its request headers set.
func newStream(fc *filterConfig, rc *routeConfig, req ...string) (*moduleFilter, *fakeABI) {
	x := &fakeABI{hdr: map[int][]filter.Header{requestHeader: hs(req...)}, route: 1}
	f := &moduleFilter{x: x, conf: fc, route: func(h uintptr) *routeConfig {
		if h == 1 {
			return rc
		}
		return nil
	}}
	return f, x
}

func header(hs []filter.Header, name string) string {
	for _, h := range hs {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

var swapRequest = []string{":method", "POST", ":authority", "api.anthropic.com", ":path", "/v1/messages", "x-api-key", "jr2-held-ANTHROPIC_API_KEY"}

// TestAdapterPanicFailsClosed: a panic in the adapter's own code (here,
// reading the route) is the fixed 502 and no mark. A panic inside the
// machine is the shared suite's (TestConformance/panics).
func TestAdapterPanicFailsClosed(t *testing.T) {
	fc, rc := pod(t)
	f, x := newStream(fc, rc, swapRequest...)
	x.panicOn = "routeConfig"
	var st int32
	func() {
		defer guard(f, &st, statusStopIteration)
		st = int32(f.requestHeaders(false))
	}()
	if st != statusStopIteration || x.reply == nil || x.reply.status != 502 || x.reply.body != FailedBody {
		t.Fatalf("status %d, reply %+v", st, x.reply)
	}
	if x.mark == nil || *x.mark {
		t.Error("the mark was not set false")
	}
}

// TestConnectionTarget: the shared intercept listener's route config has
// no target; the stream takes the connection's (TargetFilterState) and is
// decided for it, the value swapped in as on a route of that target's own.
// A connection that carries no target, or one custodian.json does not
// bind, is refused 500 unmarked and nothing is swapped.
func TestConnectionTarget(t *testing.T) {
	fc, _ := pod(t)
	rc := connectionRoute(t)
	for _, c := range []struct {
		name, target string
		status       int
	}{
		{"bound", anthropic, 0},
		{"none", "", 500},
		{"not bound", "api.openai.com:443", 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, x := newStream(fc, rc, swapRequest...)
			x.target = c.target
			f.requestHeaders(false)
			if c.status == 0 {
				if x.reply != nil || x.mark == nil || !*x.mark || header(x.hdr[requestHeader], "x-api-key") != anthropicValue {
					t.Fatalf("reply %+v, mark %v, x-api-key %q; want the swap, marked", x.reply, x.mark, header(x.hdr[requestHeader], "x-api-key"))
				}
				return
			}
			if x.reply == nil || x.reply.status != c.status || (x.mark != nil && *x.mark) || header(x.hdr[requestHeader], "x-api-key") == anthropicValue {
				t.Fatalf("reply %+v, mark %v; want %d, unmarked, nothing swapped", x.reply, x.mark, c.status)
			}
		})
	}
}

// TestConfigRefusals: the filter's and the route's configs are refused
// with errors that name the fix and hold no value.
func TestConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"wrong filter name", func() error { _, err := newFilterConfig("other", []byte("{}")); return err }, `filter_name "other": want "jr2-custodian"`},
		{"empty filter config", func() error { _, err := newFilterConfig(pluginconf.PluginName, nil); return err }, "filter_config is empty"},
		{"not a filter config", func() error { _, err := newFilterConfig(pluginconf.PluginName, []byte("nope")); return err }, "filter config: not one JSON value: invalid JSON at byte 2"},
		{"custodian.json inline", func() error {
			_, err := newFilterConfig(pluginconf.PluginName, []byte(`{"pod":"p","orchestrator":"o:1","valuesDir":"/v","secrets":[]}`))
			return err
		}, `filter config: pod: unknown field (known: engineConfig)`},
		{"relative path", func() error {
			_, err := newFilterConfig(pluginconf.PluginName, []byte(`{"engineConfig":"custodian.json"}`))
			return err
		}, `engineConfig "custodian.json": want an absolute, clean path`},
		{"unreadable path", func() error {
			_, err := newFilterConfig(pluginconf.PluginName, []byte(`{"engineConfig":"/nonexistent/jr2/custodian.json"}`))
			return err
		}, "engineConfig /nonexistent/jr2/custodian.json: cannot be read (no such file or directory); mount controlplane render's directory there"},
		{"wrong route name", func() error { _, err := newRouteConfig("x", []byte(`{"role":"control"}`)); return err }, `per-route filter_name "x"`},
		{"bad route", func() error { _, err := newRouteConfig(pluginconf.PluginName, []byte(`{"role":"health"}`)); return err }, "route config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestNoFilterFailsClosed: a stream whose filter was never made (its
// creation failed or panicked, so Envoy calls on with a null pointer) gets
// the fixed 502 and the mark false at its request headers, not a hold.
func TestNoFilterFailsClosed(t *testing.T) {
	fc, rc := pod(t)
	_, x := newStream(fc, rc, swapRequest...)
	st := requestHeadersHook(func() abi { return x }, 0)
	if st != statusStopIteration || x.reply == nil || x.reply.status != 502 || x.reply.body != FailedBody {
		t.Fatalf("status %d, reply %+v; want the fixed 502", st, x.reply)
	}
	if x.mark == nil || *x.mark {
		t.Error("the mark was not set false")
	}
}

// TestConformance: the stream suite both Envoy adapters run
// (filter/stream/streamtest), here over the fake ABI, through the very
// hook functions the exports call.
func TestConformance(t *testing.T) {
	streamtest.Run(t, moduleDriver{lines: captureLogs(t)})
}

// captureLogs sends the module's lines, info and error, to the list it
// returns until the test ends.
func captureLogs(t *testing.T) *[]string {
	var lines []string
	info, errs := logInfo, logError
	logInfo = func(l string) { lines = append(lines, l) }
	logError = logInfo
	t.Cleanup(func() { logInfo, logError = info, errs })
	return &lines
}

// TestSigV4: the shared SigV4 table through the module's hooks
// (streamtest.SigV4): the request held for its body where the engine
// hashes it, the headers set once it is whole.
func TestSigV4(t *testing.T) {
	streamtest.SigV4(t, moduleDriver{lines: captureLogs(t)})
}

// TestOAuth: an OAuth secret's token through the module
// (streamtest.OAuth). The minter runs on a goroutine of Go's own, its
// fetch never on an Envoy callback; its lines go where the reload's go,
// never to Envoy's log callback.
func TestOAuth(t *testing.T) {
	lines := captureLog(t)
	streamtest.OAuth(t, moduleDriver{lines: lines})
	for _, l := range *lines {
		if strings.Contains(l, "action=mint") {
			t.Fatalf("a mint line reached Envoy's log callback: %q", l)
		}
	}
}

// captureLog sends the lines written to Envoy's log callback to the slice
// it returns, for the test's life.
func captureLog(t *testing.T) *[]string {
	var lines []string
	info, errs := logInfo, logError
	logInfo = func(l string) { lines = append(lines, l) }
	logError = logInfo
	t.Cleanup(func() { logInfo, logError = info, errs })
	return &lines
}

// TestRotation: the values' reload through the module
// (streamtest.Rotation). The reload runs on a goroutine of Go's own and
// swaps the pointer the hooks read when a stream begins; its lines go to
// stderr, never to Envoy's log callback (under -race, a call from that
// goroutine into logInfo below would race with the test's reads).
func TestRotation(t *testing.T) {
	lines := captureLog(t)
	streamtest.Rotation(t, moduleDriver{lines: lines})
	for _, l := range *lines {
		if strings.Contains(l, "action=reload") {
			t.Fatalf("a reload line reached Envoy's log callback: %q", l)
		}
	}
}

type moduleDriver struct{ lines *[]string }

func (d moduleDriver) Pod(t testing.TB, c filter.Config) streamtest.Pod {
	h := cgo.NewHandle(filterConfigOf(t, c))
	t.Cleanup(h.Delete)
	*d.lines = nil
	return modulePod{d: d, conf: uintptr(h)}
}

type modulePod struct {
	d    moduleDriver
	conf uintptr
}

func (p modulePod) Stream(t *testing.T, role pluginconf.Role, target string) streamtest.Stream {
	rc, err := newRouteConfig(pluginconf.PluginName, pluginconf.RouteConfig{Role: role, Target: target}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	rh := cgo.NewHandle(rc)
	t.Cleanup(rh.Delete)
	return p.stream(t, uintptr(rh))
}

// Unrouted: the ABI's most specific route config is 0.
func (p modulePod) Unrouted(t *testing.T) streamtest.Stream { return p.stream(t, 0) }

func (p modulePod) stream(t *testing.T, route uintptr) streamtest.Stream {
	x := &fakeABI{hdr: map[int][]filter.Header{}, route: route}
	h := newFilterHook(p.conf, x)
	if h == 0 {
		t.Fatal("no filter")
	}
	*p.d.lines = nil
	return &abiStream{t: t, x: x, h: h, lines: p.d.lines}
}

// abiStream is one stream through the module's hooks over a fake ABI.
type abiStream struct {
	t         *testing.T
	x         *fakeABI
	h         uintptr
	destroyed bool
	lines     *[]string
	seen      []string
	scrubbing bool // after Destroy: whether a scrubber outlived stream_complete
}

func (s *abiStream) stop(where string, st int32, stop int32) bool {
	s.t.Helper()
	switch st {
	case statusContinue:
		return false
	case stop:
		return true
	}
	s.t.Fatalf("%s returned status %d", where, st)
	return false
}

// envoyMap is hs as Envoy's header map holds them: names lowercased.
func envoyMap(hs []filter.Header) []filter.Header {
	out := make([]filter.Header, len(hs))
	for i, h := range hs {
		out[i] = filter.Header{Name: strings.ToLower(h.Name), Value: h.Value}
	}
	return out
}

func (s *abiStream) RequestHeaders(hs []filter.Header) ([]filter.Header, bool) {
	s.x.hdr[requestHeader] = envoyMap(hs)
	st := requestHeadersHook(func() abi { return s.x }, s.h)
	return s.x.hdr[requestHeader], s.stop("request headers", st, statusStopIteration)
}

func (s *abiStream) RequestHeadersEnd(hs []filter.Header, end bool) ([]filter.Header, bool) {
	s.x.hdr[requestHeader] = envoyMap(hs)
	st := requestHeadersEndHook(func() abi { return s.x }, s.h, end)
	return s.x.hdr[requestHeader], s.stop("request headers", st, statusStopIteration)
}

func (s *abiStream) RequestData(chunk []byte, end bool) ([]byte, bool) {
	s.x.reqChunk = append([]byte(nil), chunk...)
	st := requestBodyHook(s.h, end)
	return s.x.reqChunk, s.stop("request body", st, statusStopNoBuffer)
}

func (s *abiStream) RequestTrailers() bool {
	return s.stop("request trailers", requestTrailersHook(s.h), statusStopIteration)
}

func (s *abiStream) Request() []filter.Header { return s.x.hdr[requestHeader] }

func (s *abiStream) ResponseHeaders(hs []filter.Header, end bool) ([]filter.Header, bool) {
	s.x.hdr[responseHeader] = envoyMap(hs)
	st := responseHeadersHook(s.h, end)
	return s.x.hdr[responseHeader], s.stop("response headers", st, statusStopIteration)
}

func (s *abiStream) ResponseData(chunk []byte, end bool) ([]byte, bool) {
	s.x.chunk = append([]byte(nil), chunk...)
	st := responseBodyHook(s.h, end)
	return s.x.chunk, s.stop("response body", st, statusStopNoBuffer)
}

func (s *abiStream) ResponseTrailers(hs []filter.Header) ([]filter.Header, []byte, bool) {
	s.x.hdr[responseTrailer] = envoyMap(hs)
	before := len(s.x.appended)
	st := responseTrailersHook(s.h)
	return s.x.hdr[responseTrailer], s.x.appended[before:], s.stop("response trailers", st, statusStopIteration)
}

// Destroy is Envoy's order: stream_complete, then destroy.
func (s *abiStream) Destroy() {
	if s.destroyed {
		return
	}
	s.destroyed = true
	streamCompleteHook(s.h)
	s.scrubbing = s.filterScrubbing()
	destroyHook(s.h)
	if filterOf(s.h) != nil {
		s.t.Error("the stream's handle outlived destroy")
	}
}

func (s *abiStream) Replies() []streamtest.Reply {
	var out []streamtest.Reply
	for _, r := range s.x.replies {
		out = append(out, streamtest.Reply{Status: r.status, Body: r.body, Details: r.details, Headers: r.headers})
	}
	return out
}

func (s *abiStream) Mark() (set, value bool) {
	if s.x.mark == nil {
		return false, false
	}
	return true, *s.x.mark
}

func (s *abiStream) RouteClears() int { return s.x.clears }

func (s *abiStream) Logs() []string {
	s.seen = append(s.seen, *s.lines...)
	*s.lines = nil
	return s.seen
}

func (s *abiStream) filterScrubbing() bool {
	f := filterOf(s.h)
	return f != nil && f.started && f.m.Scrubbing()
}

func (s *abiStream) Scrubbing() bool {
	if s.destroyed {
		return s.scrubbing
	}
	return s.filterScrubbing()
}

func (s *abiStream) PanicOn(where string) { s.x.panicOn = where }

// FuzzStream: the shared suite's fuzz target (streamtest.Fuzz) over the
// fake ABI.
func FuzzStream(f *testing.F) {
	info, errs := logInfo, logError
	var lines []string
	logInfo = func(l string) { lines = append(lines, l) }
	logError = logInfo
	f.Cleanup(func() { logInfo, logError = info, errs })
	streamtest.Fuzz(f, moduleDriver{lines: &lines})
}
