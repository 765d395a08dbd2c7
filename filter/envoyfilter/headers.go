package envoyfilter

import (
	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter"
)

// headerMap is an SDK header map as the stream machine's Headers. The SDK
// keeps headers in a Go map (name → values in arrival order), so the order
// between names is lost; the machine sorts names itself.
type headerMap struct{ h api.HeaderMap }

func (m headerMap) All() []filter.Header {
	var out []filter.Header
	for name, vs := range m.h.GetAllHeaders() {
		for _, v := range vs {
			out = append(out, filter.Header{Name: name, Value: v})
		}
	}
	return out
}

func (m headerMap) Set(name, value string) { m.h.Set(name, value) }
func (m headerMap) Add(name, value string) { m.h.Add(name, value) }
func (m headerMap) Del(name string)        { m.h.Del(name) }

// requestHeaders is a request header map: :path and :authority go through
// the SDK's own setters.
type requestHeaders struct{ h api.RequestHeaderMap }

func (m requestHeaders) All() []filter.Header   { return headerMap{m.h}.All() }
func (m requestHeaders) Add(name, value string) { m.h.Add(name, value) }
func (m requestHeaders) Del(name string)        { m.h.Del(name) }

func (m requestHeaders) Set(name, value string) {
	switch name {
	case ":path":
		m.h.SetPath(value)
	case ":authority":
		m.h.SetHost(value)
	default:
		m.h.Set(name, value)
	}
}

// body is a chunk buffer as the machine's Body.
type body struct{ b api.BufferInstance }

func (b body) Bytes() []byte { return b.b.Bytes() }

func (b body) Set(p []byte) error {
	if len(p) == 0 {
		b.b.Reset()
		return nil
	}
	return b.b.Set(p)
}
