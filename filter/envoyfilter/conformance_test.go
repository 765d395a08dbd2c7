package envoyfilter

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream/streamtest"
)

// TestConformance: the stream suite both Envoy adapters run
// (filter/stream/streamtest), here over the fakes of the golang filter's
// SDK: every decode, answer, stream-end and panic case of the adapter.
func TestConformance(t *testing.T) {
	streamtest.Run(t, sdkDriver{})
}

// TestSigV4: the shared SigV4 table through the golang filter's adapter,
// over its fakes (streamtest.SigV4): the request held for its body where
// the engine hashes it, each chunk taken, the headers set at the last.
func TestSigV4(t *testing.T) {
	streamtest.SigV4(t, sdkDriver{})
}

// TestRotation: the values' reload through the golang filter's adapter,
// over its fakes (streamtest.Rotation).
func TestRotation(t *testing.T) {
	streamtest.Rotation(t, sdkDriver{})
}

// TestOAuth: an OAuth secret's token, minted on Go's side, through the
// golang filter's adapter over its fakes (streamtest.OAuth).
func TestOAuth(t *testing.T) {
	streamtest.OAuth(t, sdkDriver{})
}

type sdkDriver struct{}

func (sdkDriver) Pod(t testing.TB, c filter.Config) streamtest.Pod {
	p := NewParser()
	top, err := p.Parse(stringAny(t, writeEngine(t, c)), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs.take()
	return sdkPod{&pod{p: p, top: top}}
}

type sdkPod struct{ p *pod }

func (p sdkPod) Stream(t *testing.T, role pluginconf.Role, target string) streamtest.Stream {
	return p.stream(t, p.p.route(t, role, target))
}

// Unrouted: Envoy passes the filter-level config when the route has none.
func (p sdkPod) Unrouted(t *testing.T) streamtest.Stream { return p.stream(t, p.p.top) }

func (p sdkPod) stream(t *testing.T, cfg interface{}) streamtest.Stream {
	logs.take()
	cb := newCallbacks()
	return &sdkStream{t: t, cb: cb, f: Factory(cfg, cb)}
}

// sdkStream is one stream through Factory's filter, each hook called as
// the SDK calls it.
type sdkStream struct {
	t         *testing.T
	cb        *fakeCallbacks
	f         api.StreamFilter
	panicOn   string
	destroyed bool
	lines     []string
	req       *fakeHeaders // the request's header map, for BodyStream
}

func toFake(hs []filter.Header) *fakeHeaders {
	h := headers()
	for _, x := range hs {
		h.Add(x.Name, x.Value)
	}
	return h
}

func fields(h *fakeHeaders) []filter.Header {
	var out []filter.Header
	h.Range(func(k, v string) bool {
		out = append(out, filter.Header{Name: k, Value: v})
		return true
	})
	return out
}

// stop is the model's "stop" for the SDK's status; the adapter never goes
// async or buffers.
func (s *sdkStream) stop(where string, st api.StatusType) bool {
	s.t.Helper()
	switch st {
	case api.Continue:
		return false
	case api.LocalReply:
		return true
	}
	s.t.Fatalf("%s returned status %d; the adapter never goes async or buffers", where, st)
	return false
}

func (s *sdkStream) RequestHeaders(hs []filter.Header) ([]filter.Header, bool) {
	s.cb.phase = decodeHeaders
	h := toFake(hs)
	var m api.RequestHeaderMap = h
	if s.panicOn == "request headers" {
		m = panicHeaders{h}
	}
	s.cb.meta.panic = s.panicOn == "mark"
	st := s.f.DecodeHeaders(m, true)
	return fields(h), s.stop("DecodeHeaders", st)
}

func (s *sdkStream) RequestHeadersEnd(hs []filter.Header, end bool) ([]filter.Header, bool) {
	s.cb.phase = decodeHeaders
	s.req = toFake(hs)
	switch st := s.f.DecodeHeaders(s.req, end); st {
	case api.StopAndBufferWatermark:
		return fields(s.req), true
	default:
		return fields(s.req), s.stop("DecodeHeaders", st)
	}
}

func (s *sdkStream) RequestData(chunk []byte, end bool) ([]byte, bool) {
	b := &fakeBuffer{b: append([]byte(nil), chunk...)}
	switch st := s.f.DecodeData(b, end); st {
	case api.StopNoBuffer:
		return b.Bytes(), true
	default:
		return b.Bytes(), s.stop("DecodeData", st)
	}
}

func (s *sdkStream) RequestTrailers() bool {
	return s.stop("DecodeTrailers", s.f.DecodeTrailers(headers()))
}

func (s *sdkStream) Request() []filter.Header { return fields(s.req) }

func (s *sdkStream) ResponseHeaders(hs []filter.Header, end bool) ([]filter.Header, bool) {
	s.cb.phase = encodeHeaders
	h := toFake(hs)
	var m api.ResponseHeaderMap = h
	if s.panicOn == "response headers" {
		m = panicHeaders{h}
	}
	st := s.f.EncodeHeaders(m, end)
	return fields(h), s.stop("EncodeHeaders", st)
}

func (s *sdkStream) ResponseData(chunk []byte, end bool) ([]byte, bool) {
	s.cb.phase = encodeData
	b := &fakeBuffer{b: append([]byte(nil), chunk...)}
	var buf api.BufferInstance = b
	if s.panicOn == "response body" {
		buf = panicBuffer{b}
	}
	st := s.f.EncodeData(buf, end)
	return b.Bytes(), s.stop("EncodeData", st)
}

func (s *sdkStream) ResponseTrailers(hs []filter.Header) ([]filter.Header, []byte, bool) {
	s.cb.phase = encodeTrailers
	h := toFake(hs)
	var m api.ResponseTrailerMap = h
	if s.panicOn == "response trailers" {
		m = panicHeaders{h}
	}
	before := len(s.cb.enc.added)
	st := s.f.EncodeTrailers(m)
	return fields(h), bytes.Join(s.cb.enc.added[before:], nil), s.stop("EncodeTrailers", st)
}

func (s *sdkStream) Destroy() {
	if !s.destroyed {
		s.destroyed = true
		s.f.OnDestroy(api.Normal)
	}
}

// Replies translates the SDK's local replies; each must carry no gRPC
// status.
func (s *sdkStream) Replies() []streamtest.Reply {
	var out []streamtest.Reply
	for _, r := range append(append([]localReply(nil), s.cb.dec.replies...), s.cb.enc.replies...) {
		if r.grpc != noGRPCStatus {
			s.t.Errorf("a local reply with gRPC status %d", r.grpc)
		}
		var hs []filter.Header
		for _, k := range slices.Sorted(maps.Keys(r.headers)) {
			for _, v := range r.headers[k] {
				hs = append(hs, filter.Header{Name: k, Value: v})
			}
		}
		out = append(out, streamtest.Reply{Status: r.status, Body: r.body, Details: r.details, Headers: hs})
	}
	return out
}

func (s *sdkStream) Mark() (set, value bool) {
	v, ok := s.cb.meta.m[pluginconf.MetadataNamespace][pluginconf.MarkKey].(bool)
	return ok, v
}

func (s *sdkStream) RouteClears() int { return s.cb.routeClears }

func (s *sdkStream) Logs() []string {
	s.lines = append(s.lines, logs.take()...)
	return s.lines
}

func (s *sdkStream) Scrubbing() bool { return s.f.(*goFilter).m.Scrubbing() }

func (s *sdkStream) PanicOn(where string) { s.panicOn = where }
