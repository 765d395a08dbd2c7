package envoyfilter

import (
	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream"
)

// Reasons of the stream's own refusals (package stream).
const (
	ReasonMisconfigured = stream.ReasonMisconfigured
	ReasonInternal      = stream.ReasonInternal
)

// noGRPCStatus is SendLocalReply's "no gRPC status".
const noGRPCStatus = -1

// Factory is the plugin's api.StreamFilterFactory: one filter per stream,
// holding the stream's machine. config is what Merge returned for the
// stream's route, or the filter-level config when the route has none; any
// config but a usable merged one makes the filter refuse the request.
func Factory(config interface{}, callbacks api.FilterCallbackHandler) api.StreamFilter {
	cfg := errNoConfig
	switch c := config.(type) {
	case *streamConfig:
		if c != nil {
			cfg = c
			if c.FromConnection() {
				// The shared intercept listener's route: the target
				// is the connection's, which the egress listener wrote.
				t := callbacks.StreamInfo().FilterState().GetString(pluginconf.TargetFilterState)
				cfg = c.ForConnection(t, t != "", api.LogError)
			}
		}
	case *filterConfig:
		cfg = errNoRouteConfig
	}
	f := &goFilter{cb: callbacks}
	f.m = stream.New(cfg, f)
	return f
}

var _ api.StreamFilterFactory = Factory

// goFilter is the filter of one stream: the golang SDK's callbacks
// translated into the stream machine's calls, and the machine's Host
// translated back into the SDK's callbacks.
type goFilter struct {
	api.PassThroughStreamFilter
	cb api.FilterCallbackHandler
	m  *stream.Stream
}

// status is the SDK's answer for a machine's status.
func status(s stream.Status) api.StatusType {
	if s == stream.Answered {
		return api.LocalReply
	}
	return api.Continue
}

// DecodeHeaders decides the request. One the machine holds for its body
// (a SigV4 signature over the body's hash) waits for each chunk
// (StopAndBufferWatermark: the SDK calls DecodeData per chunk, keeping
// the header map changeable until the headers go on).
func (f *goFilter) DecodeHeaders(h api.RequestHeaderMap, endStream bool) api.StatusType {
	st := f.m.RequestHeadersEnd(requestHeaders{h}, endStream)
	if st == stream.Held {
		return api.StopAndBufferWatermark
	}
	return status(st)
}

// DecodeData passes a request chunk to the machine: a chunk it holds is
// taken (StopNoBuffer drops Envoy's copy), and the last carries the whole
// body on.
func (f *goFilter) DecodeData(buf api.BufferInstance, endStream bool) api.StatusType {
	st := f.m.RequestData(body{buf}, endStream)
	if st == stream.Held {
		return api.StopNoBuffer
	}
	return status(st)
}

func (f *goFilter) DecodeTrailers(api.RequestTrailerMap) api.StatusType {
	return status(f.m.RequestTrailers())
}

func (f *goFilter) EncodeHeaders(h api.ResponseHeaderMap, endStream bool) api.StatusType {
	return status(f.m.ResponseHeaders(headerMap{h}, endStream))
}

func (f *goFilter) EncodeData(buf api.BufferInstance, endStream bool) api.StatusType {
	return status(f.m.ResponseData(body{buf}, endStream))
}

func (f *goFilter) EncodeTrailers(t api.ResponseTrailerMap) api.StatusType {
	return status(f.m.ResponseTrailers(headerMap{t}))
}

func (f *goFilter) OnDestroy(api.DestroyReason) { f.m.Done() }

// SetMark writes the mark the RBAC filter after this one requires.
func (f *goFilter) SetMark(v bool) {
	f.cb.StreamInfo().DynamicMetadata().Set(pluginconf.MetadataNamespace, pluginconf.MarkKey, v)
}

func (f *goFilter) ClearRouteCache() { f.cb.ClearRouteCache() }

func (f *goFilter) SendLocalReply(encoding bool, code int, text, details string, extra []filter.Header) {
	var cb api.FilterProcessCallbacks = f.cb.DecoderFilterCallbacks()
	if encoding {
		cb = f.cb.EncoderFilterCallbacks()
	}
	h := textPlain()
	for _, x := range extra {
		h[x.Name] = append(h[x.Name], x.Value)
	}
	cb.SendLocalReply(code, text, h, noGRPCStatus, details)
}

// AppendResponseBody adds b after the last chunk (AddData from the
// trailers phase).
func (f *goFilter) AppendResponseBody(b []byte) {
	f.cb.EncoderFilterCallbacks().AddData(b, true)
}

func (f *goFilter) Log(line []byte) { api.LogInfo(string(line)) }

// textPlain is the header set of every local reply.
func textPlain() map[string][]string {
	return map[string][]string{"content-type": {"text/plain; charset=utf-8"}}
}
