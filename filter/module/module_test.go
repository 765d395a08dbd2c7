package module

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream/streamtest"
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
	chunk    []byte // the received response body now passing
	appended []byte // what went to the buffered response body
	reply    *fakeReply
	mark     *bool
	route    uintptr
	panicOn  string // a callback that panics, as a bug in the adapter would
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

func (x *fakeABI) headers(kind int) []filter.Header {
	x.boom("headers")
	return append([]filter.Header(nil), x.hdr[kind]...)
}

func (x *fakeABI) setHeader(kind int, name, value string) {
	x.boom("setHeader")
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
	x.hdr[kind] = append(x.hdr[kind], filter.Header{Name: name, Value: value})
}

func (x *fakeABI) body(kind int) []byte {
	x.boom("body")
	if kind != receivedResponseBody {
		return nil
	}
	return append([]byte(nil), x.chunk...)
}

func (x *fakeABI) drainBody(kind int, n int) {
	if kind == receivedResponseBody {
		n = min(n, len(x.chunk))
		x.chunk = x.chunk[n:]
	}
}

func (x *fakeABI) appendBody(kind int, b []byte) {
	switch kind {
	case receivedResponseBody:
		x.chunk = append(x.chunk, b...)
	case bufferedResponseBody:
		x.appended = append(x.appended, b...)
	}
}

func (x *fakeABI) sendResponse(status int, body, details string, headers []filter.Header) {
	x.boom("sendResponse")
	x.reply = &fakeReply{status, body, details, headers}
}

func (x *fakeABI) setMark(v bool)       { x.mark = &v }
func (x *fakeABI) clearRouteCache()     {}
func (x *fakeABI) routeConfig() uintptr { x.boom("routeConfig"); return x.route }

// pod builds a filter-level config over a values dir holding the sentinel,
// and an intercept route toward anthropic.
func pod(t *testing.T) (*filterConfig, *routeConfig) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ANTHROPIC_API_KEY"), []byte(anthropicValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := "tok-SENTINEL-module-8Hq2Zr5Wd1Kp7Xs3"
	if err := os.WriteFile(filepath.Join(dir, filter.TokenName), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := filter.Config{
		Pod: "ws-mod", Sandbox: "ws-mod", Orchestrator: "jr2-orchestrator.jr2.svc:4000", ValuesDir: dir,
		Listeners: filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
		Secrets: []filter.SecretConfig{
			{Name: "ANTHROPIC_API_KEY", StandIn: filter.StandIn("ANTHROPIC_API_KEY"), Targets: []string{anthropic}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: filter.TokenName, StandIn: filter.StandIn(filter.TokenName), Headers: []string{"authorization"}},
		},
	}
	return podOf(t, c, anthropic)
}

// podOf is c's filter-level config and an intercept route toward target.
func podOf(t *testing.T, c filter.Config, target string) (*filterConfig, *routeConfig) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "custodian.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fc, err := newFilterConfig(pluginconf.PluginName, pluginconf.FilterConfig{EngineConfig: path}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := newRouteConfig(pluginconf.PluginName, pluginconf.RouteConfig{Role: pluginconf.RoleIntercept, Target: target}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return fc, rc
}

// newStream is one stream of the route, its request headers set.
func newStream(fc *filterConfig, rc *routeConfig, req ...string) (*moduleFilter, *fakeABI) {
	x := &fakeABI{hdr: map[int][]filter.Header{}, route: 1}
	for i := 0; i+1 < len(req); i += 2 {
		x.hdr[requestHeader] = append(x.hdr[requestHeader], filter.Header{Name: req[i], Value: req[i+1]})
	}
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

// TestSwapAndScrub: a request is swapped and marked; an echo of the value,
// split across chunks, reaches the agent scrubbed, the held tail arriving
// before the trailers.
func TestSwapAndScrub(t *testing.T) {
	fc, rc := pod(t)
	f, x := newStream(fc, rc, swapRequest...)
	if st := f.requestHeaders(); st != statusContinue {
		t.Fatalf("request headers: status %d, reply %+v", st, x.reply)
	}
	if got := header(x.hdr[requestHeader], "x-api-key"); got != anthropicValue {
		t.Fatalf("x-api-key upstream %q", got)
	}
	if x.mark == nil || !*x.mark {
		t.Fatal("a forwarded request was not marked")
	}
	x.hdr[responseHeader] = []filter.Header{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "text/plain"}}
	if st := f.responseHeaders(false); st != statusContinue {
		t.Fatalf("response headers: %d", st)
	}
	var agent []byte
	for _, c := range []string{"echo: " + anthropicValue[:10], anthropicValue[10:] + " end"} {
		x.chunk = []byte(c)
		if st := f.responseBody(false); st != statusContinue {
			t.Fatalf("response body: %d", st)
		}
		agent = append(agent, x.chunk...)
	}
	x.hdr[responseTrailer] = []filter.Header{{Name: "x-echo", Value: anthropicValue}}
	if st := f.responseTrailers(); st != statusContinue {
		t.Fatalf("trailers: %d", st)
	}
	agent = append(agent, x.appended...)
	if want := "echo: [secret:ANTHROPIC_API_KEY] end"; string(agent) != want {
		t.Errorf("the agent read %q, want %q", agent, want)
	}
	if v := header(x.hdr[responseTrailer], "x-echo"); strings.Contains(v, anthropicValue) {
		t.Errorf("a trailer kept the value: %q", v)
	}
	f.streamComplete()
}

// TestRefusalAndChallenge: a refused request is answered by the module,
// never marked, and rule 9's 401 carries its challenge header.
func TestRefusalAndChallenge(t *testing.T) {
	fc, rc := pod(t)
	f, x := newStream(fc, rc, ":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/models")
	if st := f.requestHeaders(); st != statusStopIteration {
		t.Fatalf("status %d", st)
	}
	if x.reply == nil || x.mark != nil && *x.mark {
		t.Fatalf("reply %+v, mark %v", x.reply, x.mark)
	}
	if x.reply.status == 401 && header(x.reply.headers, "www-authenticate") == "" && header(x.reply.headers, "WWW-Authenticate") == "" {
		t.Errorf("a 401 without its challenge: %+v", x.reply)
	}
	if x.reply.status != 401 && x.reply.status != 403 {
		t.Errorf("status %d, want rule 9's answer", x.reply.status)
	}
}

// TestAdapterPanicFailsClosed: a panic in the adapter's own code (here,
// reading the route) is the fixed 502 and no mark; a panic inside the
// machine (a callback it calls) is the machine's 500, and nothing more of
// the response passes.
func TestAdapterPanicFailsClosed(t *testing.T) {
	fc, rc := pod(t)
	f, x := newStream(fc, rc, swapRequest...)
	x.panicOn = "routeConfig"
	var st int32
	func() {
		defer guard(f, &st, statusStopIteration)
		st = int32(f.requestHeaders())
	}()
	if st != statusStopIteration || x.reply == nil || x.reply.status != 502 || x.reply.body != FailedBody {
		t.Fatalf("status %d, reply %+v", st, x.reply)
	}
	if x.mark == nil || *x.mark {
		t.Error("the mark was not set false")
	}

	f, x = newStream(fc, rc, swapRequest...)
	if st := f.requestHeaders(); st != statusContinue {
		t.Fatalf("request headers: %d", st)
	}
	x.hdr[responseHeader] = []filter.Header{{Name: ":status", Value: "200"}}
	x.panicOn = "headers"
	if st := f.responseHeaders(false); st != statusStopIteration || x.reply == nil || x.reply.status != 500 {
		t.Fatalf("status %d, reply %+v", st, x.reply)
	}
	if x.mark == nil || *x.mark {
		t.Error("the mark was not overwritten with false")
	}
	x.panicOn = ""
	x.chunk = []byte(anthropicValue)
	if st := f.responseBody(true); st != statusStopNoBuffer || len(x.chunk) != 0 {
		t.Errorf("after the refusal: status %d, chunk %q passed", st, x.chunk)
	}
}

// TestNoRouteConfigRefuses: a stream whose route has no per-route config is
// refused, never marked.
func TestNoRouteConfigRefuses(t *testing.T) {
	fc, rc := pod(t)
	f, x := newStream(fc, rc, swapRequest...)
	x.route = 0
	if st := f.requestHeaders(); st != statusStopIteration || x.reply == nil || x.reply.status != 500 {
		t.Fatalf("status %d reply %+v", st, x.reply)
	}
	if x.mark != nil && *x.mark {
		t.Error("marked")
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
		{"not a filter config", func() error { _, err := newFilterConfig(pluginconf.PluginName, []byte("nope")); return err }, "filter config: invalid character"},
		{"custodian.json inline", func() error {
			_, err := newFilterConfig(pluginconf.PluginName, []byte(`{"pod":"p","orchestrator":"o:1","valuesDir":"/v","secrets":[]}`))
			return err
		}, `filter config: json: unknown field "pod"`},
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
// (filter/stream/streamtest), here over the fake ABI.
func TestConformance(t *testing.T) {
	fc, rc := podOf(t, streamtest.Config(t, t.TempDir()), streamtest.Target)
	streamtest.Run(t, moduleDriver{fc, rc})
}

type moduleDriver struct {
	fc *filterConfig
	rc *routeConfig
}

func (d moduleDriver) Run(t *testing.T, req []filter.Header, a streamtest.Answer) streamtest.Exchange {
	var kv []string
	for _, h := range req {
		kv = append(kv, h.Name, h.Value)
	}
	f, x := newStream(d.fc, d.rc, kv...)
	defer f.streamComplete()
	st := f.requestHeaders()
	if x.reply != nil {
		if st != statusStopIteration {
			t.Errorf("a local reply, and the request headers returned %d", st)
		}
		return streamtest.Exchange{Status: x.reply.status, Body: x.reply.body, Marked: x.mark != nil && *x.mark}
	}
	e := streamtest.Exchange{Forwarded: append([]filter.Header(nil), x.hdr[requestHeader]...), Marked: x.mark != nil && *x.mark}
	x.hdr[responseHeader] = append(streamtest.H(":status", a.Status), a.Headers...)
	st = f.responseHeaders(len(a.Chunks) == 0)
	if x.reply != nil { // the module answers instead of the upstream
		e.Status, e.Body = x.reply.status, x.reply.body
		return e
	}
	if st != statusContinue {
		t.Fatalf("response headers: %d", st)
	}
	var body []byte
	for i, c := range a.Chunks {
		x.chunk = []byte(c)
		if st := f.responseBody(i == len(a.Chunks)-1); st != statusContinue {
			t.Fatalf("response body: %d", st)
		}
		body = append(body, x.chunk...)
	}
	e.Body = string(append(body, x.appended...))
	e.Headers = x.hdr[responseHeader]
	e.Status, _ = strconv.Atoi(header(e.Headers, ":status"))
	return e
}
