package envoyfilter

import (
	"testing"

	"jr2.dev/boundary/filter/pluginconf"
)

// The panics of the stream machine are the shared suite's
// (TestConformance/panics). This is the one the SDK alone has.

// TestReplyItselfFails: when SendLocalReply panics (the SDK's "request has
// been finished"), the panic is passed on to the SDK's own recovery, and
// nothing was marked.
func TestReplyItselfFails(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleIntercept, anthropic)
	cb := newCallbacks()
	cb.dec.failReply = true
	f := Factory(cfg, cb)
	defer func() {
		if r := recover(); r != "request has been finished" {
			t.Errorf("recovered %v, want the SDK's panic passed on", r)
		}
		if cb.meta.marked() {
			t.Error("marked")
		}
		logs.take()
	}()
	f.DecodeHeaders(headers(":method", "TRACE", ":authority", "api.anthropic.com", ":path", "/"), true)
	t.Error("DecodeHeaders returned")
}
