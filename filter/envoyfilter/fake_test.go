package envoyfilter

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter/pluginconf"
)

// Fakes of the SDK's interfaces, written from the SDK's pkg/http (the cgo
// implementation Envoy runs) so that they behave as it does where the
// adapter can tell: header maps keep a Go map of lowercase names, Set
// replaces, Add appends, GetAllHeaders copies; buffers are replaced by Set;
// AddData panics while data is processed (CAPIInvalidPhase in Envoy).

// ---- logging (api.CommonCAPI) ----

// logCapture is the api.CommonCAPI of every test: it records each line
// api.Log* writes at Info level or above.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Log(_ api.LogType, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, msg)
}

func (l *logCapture) LogLevel() api.LogType { return api.Info }

// take returns the lines written since the last take.
func (l *logCapture) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

var logs = &logCapture{}

func init() { api.SetCommonCAPI(logs) }

// ---- header maps ----

// fakeHeaders is a request or response header map, or a trailer map.
type fakeHeaders struct {
	m map[string][]string
}

var (
	_ api.RequestHeaderMap   = (*fakeHeaders)(nil)
	_ api.ResponseHeaderMap  = (*fakeHeaders)(nil)
	_ api.ResponseTrailerMap = (*fakeHeaders)(nil)
)

// headers builds a map from name, value pairs; a name may repeat.
func headers(kv ...string) *fakeHeaders {
	h := &fakeHeaders{m: map[string][]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func (h *fakeHeaders) GetRaw(name string) string {
	if v := h.m[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h *fakeHeaders) Get(key string) (string, bool) {
	v, ok := h.m[strings.ToLower(key)]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

func (h *fakeHeaders) Values(key string) []string { return h.m[strings.ToLower(key)] }

func (h *fakeHeaders) Set(key, value string) { h.m[strings.ToLower(key)] = []string{value} }

func (h *fakeHeaders) Add(key, value string) {
	k := strings.ToLower(key)
	h.m[k] = append(h.m[k], value)
}

func (h *fakeHeaders) Del(key string) { delete(h.m, strings.ToLower(key)) }

// Range visits the map in Go's map order, as the SDK does.
func (h *fakeHeaders) Range(f func(key, value string) bool) {
	for k, vs := range h.m {
		for _, v := range vs {
			if !f(k, v) {
				return
			}
		}
	}
}

func (h *fakeHeaders) RangeWithCopy(f func(key, value string) bool) { h.clone().Range(f) }

func (h *fakeHeaders) GetAllHeaders() map[string][]string { return h.clone().m }

func (h *fakeHeaders) Scheme() string          { v, _ := h.Get(":scheme"); return v }
func (h *fakeHeaders) Method() string          { v, _ := h.Get(":method"); return v }
func (h *fakeHeaders) Host() string            { v, _ := h.Get(":authority"); return v }
func (h *fakeHeaders) Path() string            { v, _ := h.Get(":path"); return v }
func (h *fakeHeaders) SetMethod(method string) { h.Set(":method", method) }
func (h *fakeHeaders) SetHost(host string)     { h.Set(":authority", host) }
func (h *fakeHeaders) SetPath(path string)     { h.Set(":path", path) }
func (h *fakeHeaders) Status() (int, bool) {
	v, ok := h.Get(":status")
	if !ok {
		return 0, false
	}
	n, _ := strconv.Atoi(v)
	return n, true
}

func (h *fakeHeaders) clone() *fakeHeaders {
	c := &fakeHeaders{m: make(map[string][]string, len(h.m))}
	for k, vs := range h.m {
		c.m[k] = append([]string(nil), vs...)
	}
	return c
}

// String renders the map sorted, one "name: value" per line.
func (h *fakeHeaders) String() string {
	var lines []string
	for k, vs := range h.m {
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// panicHeaders is a header map whose reading panics: it stands for any
// bug or SDK failure inside a callback.
type panicHeaders struct{ *fakeHeaders }

func (panicHeaders) GetAllHeaders() map[string][]string { panic("boom") }

// ---- buffers ----

// fakeBuffer is an api.BufferInstance over a byte slice.
type fakeBuffer struct{ b []byte }

var _ api.BufferInstance = (*fakeBuffer)(nil)

func (f *fakeBuffer) Write(p []byte) (int, error)       { f.b = append(f.b, p...); return len(p), nil }
func (f *fakeBuffer) WriteString(s string) (int, error) { f.b = append(f.b, s...); return len(s), nil }
func (f *fakeBuffer) WriteByte(p byte) error            { f.b = append(f.b, p); return nil }
func (f *fakeBuffer) WriteUint16(p uint16) error {
	_, err := f.WriteString(strconv.FormatUint(uint64(p), 10))
	return err
}
func (f *fakeBuffer) WriteUint32(p uint32) error {
	_, err := f.WriteString(strconv.FormatUint(uint64(p), 10))
	return err
}
func (f *fakeBuffer) WriteUint64(p uint64) error {
	_, err := f.WriteString(strconv.FormatUint(p, 10))
	return err
}

// Bytes returns a copy, as the SDK's cgo buffer does.
func (f *fakeBuffer) Bytes() []byte {
	if len(f.b) == 0 {
		return nil
	}
	return append([]byte(nil), f.b...)
}

func (f *fakeBuffer) Drain(offset int) {
	if offset <= 0 {
		return
	}
	if offset > len(f.b) {
		offset = len(f.b)
	}
	f.b = f.b[offset:]
}

func (f *fakeBuffer) Len() int                 { return len(f.b) }
func (f *fakeBuffer) Reset()                   { f.b = nil }
func (f *fakeBuffer) String() string           { return string(f.b) }
func (f *fakeBuffer) Append(data []byte) error { f.b = append(f.b, data...); return nil }
func (f *fakeBuffer) Set(data []byte) error    { f.b = append([]byte(nil), data...); return nil }
func (f *fakeBuffer) SetString(s string) error { f.b = []byte(s); return nil }
func (f *fakeBuffer) Prepend(data []byte) error {
	f.b = append(append([]byte(nil), data...), f.b...)
	return nil
}
func (f *fakeBuffer) PrependString(s string) error { return f.Prepend([]byte(s)) }
func (f *fakeBuffer) AppendString(s string) error  { f.b = append(f.b, s...); return nil }

// ---- callbacks ----

// localReply is one SendLocalReply call.
type localReply struct {
	status  int
	body    string
	headers map[string][]string
	grpc    int64
	details string
}

// phase is where the fake stream is; AddData is refused while data is
// processed, as Envoy refuses it.
type phase int

const (
	decodeHeaders phase = iota
	encodeHeaders
	encodeData
	encodeTrailers
)

// fakeProcess is the decoder or the encoder half of the callbacks.
type fakeProcess struct {
	cb        *fakeCallbacks
	replies   []localReply
	added     [][]byte
	continued []api.StatusType
	recovers  int
	// failReply makes SendLocalReply panic as the SDK does when the
	// request is already gone.
	failReply bool
}

var (
	_ api.DecoderFilterCallbacks = (*fakeProcess)(nil)
	_ api.EncoderFilterCallbacks = (*fakeProcess)(nil)
)

func (p *fakeProcess) Continue(st api.StatusType) { p.continued = append(p.continued, st) }

func (p *fakeProcess) SendLocalReply(code int, body string, h map[string][]string, grpc int64, details string) {
	if p.failReply {
		panic("request has been finished")
	}
	p.replies = append(p.replies, localReply{code, body, h, grpc, details})
}

func (p *fakeProcess) RecoverPanic() { p.recovers++ }

func (p *fakeProcess) AddData(data []byte, _ bool) {
	if p.cb.phase == encodeData {
		panic("invalid phase, maybe headers/buffer already continued")
	}
	p.added = append(p.added, append([]byte(nil), data...))
}

func (p *fakeProcess) InjectData([]byte) {
	// Envoy refuses InjectData from inside a callback (CAPIInvalidScene).
	panic("invalid scene for this API")
}

func (p *fakeProcess) SetUpstreamOverrideHost(string, bool) error {
	return errors.New("not used by the adapter")
}

// fakeCallbacks is an api.FilterCallbackHandler for one stream.
type fakeCallbacks struct {
	phase       phase
	meta        *fakeMetadata
	target      string // the connection's TargetFilterState; none when empty
	dec, enc    fakeProcess
	routeClears int
	logs        []string
}

var _ api.FilterCallbackHandler = (*fakeCallbacks)(nil)

func newCallbacks() *fakeCallbacks {
	cb := &fakeCallbacks{meta: &fakeMetadata{m: map[string]map[string]interface{}{}}}
	cb.dec.cb, cb.enc.cb = cb, cb
	return cb
}

func (c *fakeCallbacks) StreamInfo() api.StreamInfo {
	return &fakeStreamInfo{meta: c.meta, state: fakeFilterState{c.target}}
}
func (c *fakeCallbacks) ClearRouteCache()                   { c.routeClears++ }
func (c *fakeCallbacks) RefreshRouteCache()                 { c.routeClears++ }
func (c *fakeCallbacks) Log(_ api.LogType, msg string)      { c.logs = append(c.logs, msg) }
func (c *fakeCallbacks) LogLevel() api.LogType              { return api.Info }
func (c *fakeCallbacks) GetProperty(string) (string, error) { return "", api.ErrValueNotFound }
func (c *fakeCallbacks) SecretManager() api.SecretManager   { return noSecrets{} }
func (c *fakeCallbacks) DecoderFilterCallbacks() api.DecoderFilterCallbacks {
	return &c.dec
}
func (c *fakeCallbacks) EncoderFilterCallbacks() api.EncoderFilterCallbacks {
	return &c.enc
}

type noSecrets struct{}

func (noSecrets) GetGenericSecret(string) (string, bool) { return "", false }

// fakeStreamInfo implements the StreamInfo methods the adapter calls
// (DynamicMetadata, FilterState); any other call panics on the nil
// embedded interface, which a test sees as the adapter's 500.
type fakeStreamInfo struct {
	api.StreamInfo
	meta  *fakeMetadata
	state fakeFilterState
}

func (s *fakeStreamInfo) FilterState() api.FilterState { return s.state }

// fakeFilterState holds the connection's target, as the egress listener
// wrote it; any other call panics.
type fakeFilterState struct{ target string }

func (s fakeFilterState) GetString(key string) string {
	if key != pluginconf.TargetFilterState {
		return ""
	}
	return s.target
}

func (s fakeFilterState) SetString(string, string, api.StateType, api.LifeSpan, api.StreamSharing) {
	panic("the adapter sets no filter state")
}

func (s *fakeStreamInfo) DynamicMetadata() api.DynamicMetadata { return s.meta }

// fakeMetadata is a stream's dynamic metadata.
type fakeMetadata struct {
	m     map[string]map[string]interface{}
	panic bool // Set panics (a failing SDK call)
}

var _ api.DynamicMetadata = (*fakeMetadata)(nil)

func (f *fakeMetadata) Get(ns string) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range f.m[ns] {
		out[k] = v
	}
	return out
}

func (f *fakeMetadata) Set(ns, key string, v interface{}) {
	if f.panic {
		panic("metadata failed")
	}
	if f.m[ns] == nil {
		f.m[ns] = map[string]interface{}{}
	}
	f.m[ns][key] = v
}

// marked reports whether the mark the RBAC filter requires is set.
func (f *fakeMetadata) marked() bool {
	v, ok := f.m[pluginconf.MetadataNamespace][pluginconf.MarkKey].(bool)
	return ok && v
}

// ---- a model of Envoy around the filter ----

// upstream is what a test's upstream answers; nil chunks and trailers: a
// headers-only response.
type upstream struct {
	headers  *fakeHeaders
	chunks   []string
	trailers *fakeHeaders
}

// outcome is what one exchange through the filter came to.
type outcome struct {
	cb *fakeCallbacks
	// decodeStatus is what DecodeHeaders returned.
	decodeStatus api.StatusType
	// upstreamReq is the request as the router sends it (nil: nothing went
	// upstream).
	upstreamReq *fakeHeaders
	// local is the filter's local reply, if it made one.
	local *localReply
	// What the agent receives.
	status   int
	headers  *fakeHeaders
	writes   [][]byte // each piece of body passed downstream, in order
	trailers *fakeHeaders
	reset    bool
	logs     []string
}

func (o *outcome) body() string { return string(bytes.Join(o.writes, nil)) }

// exchange runs one request (and, when it goes upstream, resp) through a
// filter built by Factory(cfg), the way Envoy's filter manager would with
// the rendered RBAC filter after it:
//
//   - a local reply from DecodeHeaders goes through the encoder filters
//     (this one included) to the agent;
//   - a request that went on without the mark is answered 403 by RBAC;
//   - a local reply from EncodeHeaders (no header sent yet) goes straight
//     to the codec, bypassing the filters; one from EncodeData or
//     EncodeTrailers (headers already sent) resets the stream;
//   - AddData in EncodeTrailers adds body before the trailers.
func exchange(t testing.TB, cfg interface{}, req api.RequestHeaderMap, resp *upstream) *outcome {
	t.Helper()
	return exchangeOn(t, newCallbacks(), cfg, req, resp)
}

// exchangeOn is exchange over the stream callbacks cb (a connection's
// target set in them, say).
func exchangeOn(t testing.TB, cb *fakeCallbacks, cfg interface{}, req api.RequestHeaderMap, resp *upstream) *outcome {
	t.Helper()
	logs.take()
	f := Factory(cfg, cb)
	o := &outcome{cb: cb}
	defer func() {
		f.OnDestroy(api.Normal)
		o.logs = logs.take()
	}()

	cb.phase = decodeHeaders
	o.decodeStatus = f.DecodeHeaders(req, true)
	switch o.decodeStatus {
	case api.LocalReply:
		if len(cb.dec.replies) != 1 {
			t.Fatalf("DecodeHeaders returned LocalReply after %d local replies", len(cb.dec.replies))
		}
		r := cb.dec.replies[0]
		o.local = &r
		runThrough(t, f, cb, o, localReplyResponse(r))
		return o
	case api.Continue:
		if len(cb.dec.replies) != 0 {
			t.Fatalf("DecodeHeaders continued after a local reply")
		}
	default:
		t.Fatalf("DecodeHeaders returned status %d; the adapter never goes async or buffers", o.decodeStatus)
	}
	if !cb.meta.marked() {
		runThrough(t, f, cb, o, &upstream{
			headers: headers(":status", "403", "content-length", "19", "content-type", "text/plain"),
			chunks:  []string{"RBAC: access denied"},
		})
		return o
	}
	if fh, ok := req.(*fakeHeaders); ok {
		o.upstreamReq = fh.clone()
	}
	if resp == nil {
		resp = &upstream{headers: headers(":status", "200")}
	}
	runThrough(t, f, cb, o, resp)
	return o
}

// localReplyResponse is the response Envoy builds for a local reply.
func localReplyResponse(r localReply) *upstream {
	h := headers(":status", strconv.Itoa(r.status), "content-length", strconv.Itoa(len(r.body)))
	for k, vs := range r.headers {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return &upstream{headers: h, chunks: []string{r.body}}
}

// runThrough passes a response through the filter's encoder side.
func runThrough(t testing.TB, f api.StreamFilter, cb *fakeCallbacks, o *outcome, resp *upstream) {
	t.Helper()
	h := resp.headers.clone()
	cb.phase = encodeHeaders
	st := f.EncodeHeaders(h, len(resp.chunks) == 0 && resp.trailers == nil)
	switch st {
	case api.LocalReply:
		r := lastReply(t, &cb.enc)
		o.local = &r
		d := localReplyResponse(r)
		o.status, _ = d.headers.Status()
		o.headers = d.headers
		o.writes = [][]byte{[]byte(r.body)}
		return
	case api.Continue:
	default:
		t.Fatalf("EncodeHeaders returned status %d", st)
	}
	o.status, _ = h.Status()
	o.headers = h
	cb.phase = encodeData
	for i, c := range resp.chunks {
		buf := &fakeBuffer{b: []byte(c)}
		end := i == len(resp.chunks)-1 && resp.trailers == nil
		switch st := f.EncodeData(buf, end); st {
		case api.LocalReply:
			r := lastReply(t, &cb.enc)
			o.local = &r
			o.reset = true
			return
		case api.Continue:
			o.writes = append(o.writes, buf.Bytes())
		default:
			t.Fatalf("EncodeData returned status %d; the adapter streams", st)
		}
	}
	if resp.trailers == nil {
		return
	}
	tr := resp.trailers.clone()
	cb.phase = encodeTrailers
	before := len(cb.enc.added)
	switch st := f.EncodeTrailers(tr); st {
	case api.LocalReply:
		r := lastReply(t, &cb.enc)
		o.local = &r
		o.reset = true
		return
	case api.Continue:
		o.writes = append(o.writes, cb.enc.added[before:]...)
		o.trailers = tr
	default:
		t.Fatalf("EncodeTrailers returned status %d", st)
	}
}

func lastReply(t testing.TB, p *fakeProcess) localReply {
	t.Helper()
	if len(p.replies) == 0 {
		t.Fatal("LocalReply returned without a SendLocalReply")
	}
	return p.replies[len(p.replies)-1]
}

// describe renders an outcome for failure messages.
func (o *outcome) describe() string {
	return fmt.Sprintf("status %d, reset %v\nheaders:\n%v\nbody %q\nlogs %q", o.status, o.reset, o.headers, o.body(), o.logs)
}

// panicBuffer is a buffer whose reading panics.
type panicBuffer struct{ *fakeBuffer }

func (panicBuffer) Bytes() []byte { panic("boom") }
