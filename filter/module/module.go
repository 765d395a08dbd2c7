package module

import (
	"errors"
	"fmt"
	"sync"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream"
	"jr2.dev/boundary/internal/logline"
)

// The header maps and bodies of Envoy's ABI (abi.h).
const (
	requestHeader   = 0
	responseHeader  = 2
	responseTrailer = 3

	receivedResponseBody = 2
	bufferedResponseBody = 3
)

// The hooks' answers (envoy_dynamic_module_type_on_http_filter_*_status).
const (
	statusContinue      = 0
	statusStopIteration = 1 // headers and trailers
	statusStopNoBuffer  = 3 // a body chunk
)

// drainAll drains a whole body: the ABI drains at most what there is.
const drainAll = 1<<62 - 1

// abi is one stream's side of Envoy, as the module's Go code calls it: the
// ABI's callbacks in Envoy (cabi), a fake in tests. Every string or slice
// it returns is a copy, never a view of Envoy's memory.
type abi interface {
	headers(kind int) []filter.Header
	// setHeader replaces every value of name; an empty value removes the
	// header (the ABI's rule).
	setHeader(kind int, name, value string)
	addHeader(kind int, name, value string)
	body(kind int) []byte
	drainBody(kind int, n int)
	appendBody(kind int, b []byte)
	// sendResponse answers with body and exactly these headers (Envoy adds
	// :status and content-length).
	sendResponse(status int, body, details string, headers []filter.Header)
	setMark(v bool)
	clearRouteCache()
	// routeConfig is the handle of the route's per-route config, 0 when
	// the route has none.
	routeConfig() uintptr
}

// logf is where the module's lines go (Envoy's log in Envoy, a capture
// in tests). Errors go at error level.
var (
	logInfo  = func(string) {}
	logError = func(string) {}
)

// engines reads each custodian.json the filter configs name, and builds
// its engine, once per process.
var engines = stream.NewEngines(func(l string) { logInfo(l) })

// filterConfig is a filter-level config: the engine of the custodian.json
// its path names.
type filterConfig struct {
	engine *filter.Engine
}

// newFilterConfig reads the filter's config: name must be the plugin's,
// config a pluginconf.FilterConfig (custodian.json's path). Its errors
// name the fix, never a value.
func newFilterConfig(name string, config []byte) (*filterConfig, error) {
	if name != pluginconf.PluginName {
		return nil, fmt.Errorf("filter_name %q: want %q; render it with controlplane render --data-plane module", clip(name, 64), pluginconf.PluginName)
	}
	if len(config) == 0 {
		return nil, errors.New("filter_config is empty; set it to a google.protobuf.StringValue holding custodian.json's path (controlplane render --data-plane module)")
	}
	fc, err := pluginconf.ParseFilter(config)
	if err != nil {
		return nil, err
	}
	e, err := engines.Engine(fc)
	if err != nil {
		return nil, err
	}
	return &filterConfig{engine: e}, nil
}

// routeConfig is a per-route config, with the stream config merged from it
// and each engine it met (one in a rendered pod).
type routeConfig struct {
	route  pluginconf.RouteConfig
	mu     sync.Mutex
	merged map[*filter.Engine]*stream.Config
}

func newRouteConfig(name string, config []byte) (*routeConfig, error) {
	if name != pluginconf.PluginName {
		return nil, fmt.Errorf("per-route filter_name %q: want %q; render it with controlplane render --data-plane module", clip(name, 64), pluginconf.PluginName)
	}
	rc, err := pluginconf.ParseRoute(config)
	if err != nil {
		return nil, err
	}
	return &routeConfig{route: rc, merged: map[*filter.Engine]*stream.Config{}}, nil
}

// config merges the route with the filter-level engine once.
func (r *routeConfig) config(e *filter.Engine) *stream.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.merged[e]; ok {
		return c
	}
	c := stream.Merge(e, r.route, logError)
	r.merged[e] = c
	return c
}

// moduleFilter is one stream: the ABI's hooks translated into the stream
// machine's calls, and the machine's Host translated into the ABI.
type moduleFilter struct {
	x    abi
	conf *filterConfig
	// route finds the route's per-route config from its handle.
	route func(uintptr) *routeConfig
	m     *stream.Stream
	// failed: an adapter-level panic answered the stream; what follows of
	// it is dropped.
	failed bool
	// replied: a local reply was sent (by the machine or by fail).
	replied bool
	// The header maps and the body as the machine's Headers and Body,
	// kept here so that handing them to it boxes nothing per hook.
	reqHdr, respHdr, respTrl headerMap
	respBody                 body
}

// FailedBody is the fixed text of a stream the module failed closed
// outside the machine (a recovered panic in the adapter itself).
const FailedBody = "jr2 custodian: internal error in the Envoy module; nothing was passed on"

// requestHeaders starts the stream's machine with the route's config and
// decides the request.
func (f *moduleFilter) requestHeaders() int {
	cfg := stream.NoConfig
	if f.conf != nil {
		cfg = stream.NoRouteConfig
		if rc := f.route(f.x.routeConfig()); rc != nil {
			cfg = rc.config(f.conf.engine)
		}
	}
	f.m = stream.New(cfg, f)
	f.reqHdr = headerMap{f.x, requestHeader}
	return headersStatus(f.m.RequestHeaders(&f.reqHdr))
}

// The encode hooks of a stream whose request the module never saw (Envoy
// answered it itself, before any filter: a target that is not a path) let
// Envoy's own reply pass; no upstream answered it, since a request goes
// upstream only marked.
func (f *moduleFilter) responseHeaders(endStream bool) int {
	if f.failed {
		return statusStopIteration
	}
	if f.m == nil {
		return statusContinue
	}
	f.respHdr = headerMap{f.x, responseHeader}
	return headersStatus(f.m.ResponseHeaders(&f.respHdr, endStream))
}

func (f *moduleFilter) responseBody(endStream bool) int {
	if f.failed {
		f.x.drainBody(receivedResponseBody, drainAll)
		return statusStopNoBuffer
	}
	if f.m == nil {
		return statusContinue
	}
	f.respBody = body{f.x}
	if f.m.ResponseData(&f.respBody, endStream) == stream.Answered {
		return statusStopNoBuffer
	}
	return statusContinue
}

func (f *moduleFilter) responseTrailers() int {
	if f.failed {
		return statusStopIteration
	}
	if f.m == nil {
		return statusContinue
	}
	f.respTrl = headerMap{f.x, responseTrailer}
	return headersStatus(f.m.ResponseTrailers(&f.respTrl))
}

func (f *moduleFilter) streamComplete() {
	if f.m != nil {
		f.m.Done()
	}
}

// fail closes a stream whose adapter code panicked: no mark, the fixed 502
// unless a reply already went out, and nothing more of the stream passes.
func (f *moduleFilter) fail() {
	f.failed = true
	func() {
		defer func() { _ = recover() }()
		f.x.setMark(false)
	}()
	logError(logline.Format(logline.Custodian, "action", "refuse", "target", "-", "reason", stream.ReasonInternal))
	if f.replied {
		return
	}
	f.replied = true
	func() {
		defer func() { _ = recover() }()
		f.x.sendResponse(502, FailedBody, "jr2_custodian_"+stream.ReasonInternal, replyHeaders(nil))
	}()
}

func headersStatus(s stream.Status) int {
	if s == stream.Answered {
		return statusStopIteration
	}
	return statusContinue
}

// The machine's Host.

func (f *moduleFilter) SetMark(v bool)   { f.x.setMark(v) }
func (f *moduleFilter) ClearRouteCache() { f.x.clearRouteCache() }
func (f *moduleFilter) Log(line string)  { logInfo(line) }

func (f *moduleFilter) SendLocalReply(_ bool, status int, text, details string, headers []filter.Header) {
	f.replied = true
	f.x.sendResponse(status, text, details, replyHeaders(headers))
}

// replyHeaders is the header set of every local reply: text/plain, then
// the reply's own (rule 9's challenge).
func replyHeaders(extra []filter.Header) []filter.Header {
	return append([]filter.Header{{Name: "content-type", Value: "text/plain; charset=utf-8"}}, extra...)
}

// AppendResponseBody adds b after the last chunk, from the trailers phase
// (Envoy's addEncodedData).
func (f *moduleFilter) AppendResponseBody(b []byte) { f.x.appendBody(bufferedResponseBody, b) }

// headerMap is one of the ABI's header maps as the machine's Headers.
type headerMap struct {
	x    abi
	kind int
}

func (h headerMap) All() []filter.Header   { return h.x.headers(h.kind) }
func (h headerMap) Set(name, value string) { h.x.setHeader(h.kind, name, value) }
func (h headerMap) Add(name, value string) { h.x.addHeader(h.kind, name, value) }
func (h headerMap) Del(name string)        { h.x.setHeader(h.kind, name, "") }

// body is the response chunk now passing (the ABI's received response
// body) as the machine's Body.
type body struct{ x abi }

func (b body) Bytes() []byte { return b.x.body(receivedResponseBody) }

func (b body) Set(p []byte) error {
	b.x.drainBody(receivedResponseBody, drainAll)
	if len(p) > 0 {
		b.x.appendBody(receivedResponseBody, p)
	}
	return nil
}

// clip bounds a string quoted into an error.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
