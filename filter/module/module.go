package module

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

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

	receivedRequestBody  = 0
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
// it returns is a copy, never a view of Envoy's memory: headers copies
// into the filter's headerCopy, body into the filter's buffer.
type abi interface {
	headers(kind int, into *headerCopy) []filter.Header
	// setHeader replaces every value of name; an empty value removes the
	// header (the ABI's rule).
	setHeader(kind int, name, value string)
	addHeader(kind int, name, value string)
	// body appends the body's bytes to into.
	body(kind int, into []byte) []byte
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
	// filterState is the string filter state at key, and whether there is
	// one: a view valid only during the hook that asked.
	filterState(key string) (string, bool)
}

// Where the module's lines go (Envoy's log in Envoy, a capture in tests).
// Errors go at error level. logStream takes a stream's line as the
// machine's buffer, valid only during the call: in Envoy it goes straight
// to Envoy's log, which copies it; elsewhere it is copied to logInfo.
var (
	logInfo   = func(string) {}
	logError  = func(string) {}
	logStream = func(line []byte) { logInfo(string(line)) }
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
// machine's calls, and the machine's Host translated into the ABI. A
// filter serves one stream at a time; when the stream is destroyed, it is
// emptied (end) and serves a later one (the filter table), keeping the
// memory its buffers grew, so that a passed request and its answer
// allocate nothing on the module's side (TestPassedRequestAllocatesNothing).
// Because the strings of a header copy live as long as their stream, a
// filter is emptied only at destroy, and nothing of a stream (the engine
// keeps nothing per request) outlives it.
type moduleFilter struct {
	x    abi
	ce   cabi // Envoy's side, when x is it (x then points here)
	conf *filterConfig
	// route finds the route's per-route config from its handle.
	route func(uintptr) *routeConfig
	// m is the stream's machine, started by requestHeaders.
	m       stream.Stream
	started bool
	// failed: an adapter-level panic answered the stream; what follows of
	// it is dropped.
	failed bool
	// replied: a local reply was sent (by the machine or by fail).
	replied bool
	// The header maps and the body as the machine's Headers and Body,
	// kept here so that handing them to it boxes nothing per hook.
	reqHdr, respHdr, respTrl headerMap
	reqBody, respBody        body
	// The copies out of Envoy: the request's and the response's headers
	// (each read once per stream) and the chunk now passing.
	reqCopy, respCopy headerCopy
	chunk             []byte
}

// end empties f when its stream is destroyed: it keeps no reference into
// the stream (its ABI, config, machine state, copies) and no byte of it,
// only the zeroed memory of its buffers, or none past stream.KeepCap bytes
// each.
func (f *moduleFilter) end() {
	if f.started {
		f.m.Done()
	}
	f.m.Reset(nil, nil)
	*f = moduleFilter{
		m:        f.m,
		reqCopy:  f.reqCopy.emptied(),
		respCopy: f.respCopy.emptied(),
		chunk:    stream.Emptied(f.chunk),
	}
}

// headerCopy holds one header map copied out of Envoy: every name and
// value in one buffer, the list over them. A filter reads each map once
// per stream into its own copy and reuses the copy's memory only for its
// next stream (end), after which nothing of the last stream is read: its
// strings are valid while their stream lives. A second read of one map in
// a stream gets new memory, never the first's.
type headerCopy struct {
	buf  []byte
	list []filter.Header
	used bool // read in this stream: the next read must not reuse buf
}

// start readies c for a map of n headers whose names and values hold size
// bytes.
func (c *headerCopy) start(n, size int) {
	if c.used || cap(c.buf) < size {
		c.buf = make([]byte, 0, size)
	}
	if c.used || cap(c.list) < n {
		c.list = make([]filter.Header, 0, n)
	}
	c.used = true
	c.buf, c.list = c.buf[:0], c.list[:0]
}

// add appends one header, copying its name and value into buf.
func (c *headerCopy) add(name, value []byte) {
	c.list = append(c.list, filter.Header{Name: c.str(name), Value: c.str(value)})
}

// str copies b into buf and returns it as a string over that memory. buf
// never grows (start sized it), so the strings never see it move; a b that
// would not fit is copied on its own.
func (c *headerCopy) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(c.buf)+len(b) > cap(c.buf) {
		return string(b)
	}
	at := len(c.buf)
	c.buf = append(c.buf, b...)
	return unsafe.String(&c.buf[at], len(b))
}

// emptied is c zeroed and emptied for the filter's next stream
// (stream.Emptied).
func (c headerCopy) emptied() headerCopy {
	return headerCopy{buf: stream.Emptied(c.buf), list: stream.Emptied(c.list)}
}

// FailedBody is the fixed text of a stream the module failed closed
// outside the machine (a recovered panic in the adapter itself).
const FailedBody = "jr2 custodian: internal error in the Envoy module; nothing was passed on"

// requestHeaders starts the stream's machine with the route's config and
// decides the request. A request the machine holds for its body (a SigV4
// signature over the body's hash) stops here, and goes on from
// requestBody once the body is whole.
func (f *moduleFilter) requestHeaders(endStream bool) int {
	cfg := stream.NoConfig
	if f.conf != nil {
		cfg = stream.NoRouteConfig
		if rc := f.route(f.x.routeConfig()); rc != nil {
			cfg = rc.config(f.conf.engine)
			if cfg.FromConnection() {
				t, ok := f.x.filterState(pluginconf.TargetFilterState)
				cfg = cfg.ForConnection(t, ok, logError)
			}
		}
	}
	f.m.Reset(cfg, f)
	f.started = true
	f.reqHdr = headerMap{f, requestHeader, &f.reqCopy}
	return headersStatus(f.m.RequestHeadersEnd(&f.reqHdr, endStream))
}

// requestBody passes a request chunk to the machine: one it holds is
// taken out of Envoy's buffer into the machine's (stop, Envoy buffering
// nothing, so Envoy's buffer limit never answers first), and the last
// carries the whole body on with the headers the engine decided. Envoy
// keeps the request headers until then, and a filter may change them
// while their iteration is stopped.
func (f *moduleFilter) requestBody(endStream bool) int {
	if f.failed {
		f.x.drainBody(receivedRequestBody, drainAll)
		return statusStopNoBuffer
	}
	if !f.started {
		return statusContinue
	}
	f.reqBody = body{f, receivedRequestBody}
	if f.m.RequestData(&f.reqBody, endStream) != stream.Continue {
		return statusStopNoBuffer
	}
	return statusContinue
}

func (f *moduleFilter) requestTrailers() int {
	if f.failed {
		return statusStopIteration
	}
	if !f.started {
		return statusContinue
	}
	return headersStatus(f.m.RequestTrailers())
}

// The encode hooks of a stream whose request the module never saw (Envoy
// answered it itself, before any filter: a target that is not a path) let
// Envoy's own reply pass; no upstream answered it, since a request goes
// upstream only marked.
func (f *moduleFilter) responseHeaders(endStream bool) int {
	if f.failed {
		return statusStopIteration
	}
	if !f.started {
		return statusContinue
	}
	f.respHdr = headerMap{f, responseHeader, &f.respCopy}
	return headersStatus(f.m.ResponseHeaders(&f.respHdr, endStream))
}

func (f *moduleFilter) responseBody(endStream bool) int {
	if f.failed {
		f.x.drainBody(receivedResponseBody, drainAll)
		return statusStopNoBuffer
	}
	if !f.started {
		return statusContinue
	}
	f.respBody = body{f, receivedResponseBody}
	if f.m.ResponseData(&f.respBody, endStream) == stream.Answered {
		return statusStopNoBuffer
	}
	return statusContinue
}

func (f *moduleFilter) responseTrailers() int {
	if f.failed {
		return statusStopIteration
	}
	if !f.started {
		return statusContinue
	}
	f.respTrl = headerMap{f, responseTrailer, nil}
	return headersStatus(f.m.ResponseTrailers(&f.respTrl))
}

func (f *moduleFilter) streamComplete() {
	if f.started {
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
	if s != stream.Continue {
		return statusStopIteration
	}
	return statusContinue
}

// The machine's Host.

func (f *moduleFilter) SetMark(v bool)   { f.x.setMark(v) }
func (f *moduleFilter) ClearRouteCache() { f.x.clearRouteCache() }
func (f *moduleFilter) Log(line []byte)  { logStream(line) }

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

// headerMap is one of the ABI's header maps as the machine's Headers,
// read into the filter's copy (a new one each read when copy is nil).
type headerMap struct {
	f    *moduleFilter
	kind int
	copy *headerCopy
}

func (h headerMap) All() []filter.Header {
	if h.copy == nil {
		return h.f.x.headers(h.kind, &headerCopy{})
	}
	return h.f.x.headers(h.kind, h.copy)
}
func (h headerMap) Set(name, value string) { h.f.x.setHeader(h.kind, name, value) }
func (h headerMap) Add(name, value string) { h.f.x.addHeader(h.kind, name, value) }
func (h headerMap) Del(name string)        { h.f.x.setHeader(h.kind, name, "") }

// body is the chunk now passing (the ABI's received request or response
// body, by kind) as the machine's Body: a copy in the filter's buffer,
// valid until the next chunk.
type body struct {
	f    *moduleFilter
	kind int
}

func (b body) Bytes() []byte {
	b.f.chunk = b.f.x.body(b.kind, b.f.chunk[:0])
	return b.f.chunk
}

func (b body) Set(p []byte) error {
	b.f.x.drainBody(b.kind, drainAll)
	if len(p) > 0 {
		b.f.x.appendBody(b.kind, p)
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
