package envoyfilter

import (
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream/streamtest"
)

// TestConformance: the stream suite both Envoy adapters run
// (filter/stream/streamtest), here over the fakes of the golang filter's
// SDK.
func TestConformance(t *testing.T) {
	// The config as the suite wrote it, its own values (newPod writes this
	// package's).
	p := NewParser()
	top, err := p.Parse(stringAny(t, writeEngine(t, streamtest.Config(t, t.TempDir()))), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs.take()
	pd := &pod{p: p, top: top}
	streamtest.Run(t, sdkDriver{pd.route(t, pluginconf.RoleIntercept, streamtest.Target)})
}

type sdkDriver struct{ cfg interface{} }

func (d sdkDriver) Run(t *testing.T, req []filter.Header, a streamtest.Answer) streamtest.Exchange {
	var kv []string
	for _, h := range req {
		kv = append(kv, h.Name, h.Value)
	}
	up := &upstream{headers: headers(":status", a.Status), chunks: a.Chunks}
	for _, h := range a.Headers {
		up.headers.Add(h.Name, h.Value)
	}
	o := exchange(t, d.cfg, headers(kv...), up)
	e := streamtest.Exchange{Status: o.status, Body: o.body(), Marked: o.cb.meta.marked()}
	if o.local == nil && o.upstreamReq != nil {
		e.Forwarded = fields(o.upstreamReq)
	}
	if o.headers != nil {
		e.Headers = fields(o.headers)
	}
	return e
}

func fields(h *fakeHeaders) []filter.Header {
	var out []filter.Header
	h.Range(func(k, v string) bool {
		out = append(out, filter.Header{Name: k, Value: v})
		return true
	})
	return out
}
