package envoyfilter

import (
	"strings"
	"testing"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter/pluginconf"
)

const internal500 = "jr2 custodian: internal error; the request was not passed on"

// TestPanicInDecode: a panic while deciding answers 500, sets no mark, and
// logs one line without details.
func TestPanicInDecode(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleIntercept, anthropic)

	t.Run("reading the headers", func(t *testing.T) {
		o := exchange(t, cfg, panicHeaders{anthropicRequest("GET")}, nil)
		if o.local == nil || o.local.status != 500 || o.local.body != internal500 || o.cb.meta.marked() {
			t.Fatalf("got\n%s", o.describe())
		}
		if want := []string{refuseLine("-", ReasonInternal)}; !equal(o.logs, want) {
			t.Errorf("logs %q, want %q", o.logs, want)
		}
	})

	t.Run("setting the mark", func(t *testing.T) {
		logs.take()
		cb := newCallbacks()
		cb.meta.panic = true
		f := Factory(cfg, cb)
		if st := f.DecodeHeaders(anthropicRequest("GET"), true); st != api.LocalReply {
			t.Fatalf("DecodeHeaders: %d, want LocalReply", st)
		}
		if len(cb.dec.replies) != 1 || cb.dec.replies[0].status != 500 || cb.dec.replies[0].body != internal500 {
			t.Fatalf("replies %+v", cb.dec.replies)
		}
		f.OnDestroy(api.Normal)
		want := []string{refuseLine(anthropic, ReasonInternal)}
		got := logs.take()
		if !equal(got, want) {
			t.Errorf("logs %q, want %q", got, want)
		}
		// The value was already swapped into the request's headers; it
		// stays there, in a request that goes nowhere.
		noSentinel(t, "the reply", cb.dec.replies[0].body)
		noSentinel(t, "the log", strings.Join(got, "\n"))
	})

	t.Run("the reply itself fails: the SDK's own recovery takes over", func(t *testing.T) {
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
	})
}

// TestPanicInEncode: a panic on the response side answers 500 (a reset
// once headers went out), overwrites the mark with false, drops what
// follows, and still logs the request's one intercept line.
func TestPanicInEncode(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleIntercept, anthropic)

	start := func(t *testing.T) (*fakeCallbacks, api.StreamFilter) {
		t.Helper()
		logs.take()
		cb := newCallbacks()
		f := Factory(cfg, cb)
		if st := f.DecodeHeaders(anthropicRequest("GET"), true); st != api.Continue || !cb.meta.marked() {
			t.Fatalf("DecodeHeaders: %d", st)
		}
		return cb, f
	}
	check := func(t *testing.T, cb *fakeCallbacks, f api.StreamFilter, wantLogs []string) {
		t.Helper()
		if len(cb.enc.replies) != 1 || cb.enc.replies[0].status != 500 || cb.enc.replies[0].body != internal500 {
			t.Fatalf("encoder replies %+v", cb.enc.replies)
		}
		v, ok := cb.meta.m[pluginconf.MetadataNamespace][pluginconf.MarkKey].(bool)
		if !ok || v {
			t.Errorf("mark %v after a panic, want false", cb.meta.m)
		}
		more := &fakeBuffer{b: []byte("late " + anthropicValue)}
		if st := f.EncodeData(more, true); st != api.LocalReply || more.Len() != 0 {
			t.Errorf("data after the panic: status %d, %q passed", st, more.b)
		}
		f.OnDestroy(api.Normal)
		if got := logs.take(); !equal(got, wantLogs) {
			t.Errorf("logs %q, want %q", got, wantLogs)
		}
	}
	line500 := interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET")
	line500 = line500[:len(line500)-3] + "500"

	t.Run("EncodeHeaders", func(t *testing.T) {
		cb, f := start(t)
		if st := f.EncodeHeaders(panicHeaders{headers(":status", "200")}, false); st != api.LocalReply {
			t.Fatalf("EncodeHeaders: %d", st)
		}
		check(t, cb, f, []string{line500, refuseLine(anthropic, ReasonInternal)})
	})
	t.Run("EncodeData", func(t *testing.T) {
		cb, f := start(t)
		if st := f.EncodeHeaders(headers(":status", "200"), false); st != api.Continue {
			t.Fatalf("EncodeHeaders: %d", st)
		}
		if st := f.EncodeData(panicBuffer{&fakeBuffer{b: []byte("x")}}, false); st != api.LocalReply {
			t.Fatalf("EncodeData: %d", st)
		}
		check(t, cb, f, []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET"), refuseLine(anthropic, ReasonInternal)})
	})
	t.Run("EncodeTrailers", func(t *testing.T) {
		cb, f := start(t)
		f.EncodeHeaders(headers(":status", "200"), false)
		if st := f.EncodeTrailers(panicHeaders{headers("x-t", "1")}); st != api.LocalReply {
			t.Fatalf("EncodeTrailers: %d", st)
		}
		check(t, cb, f, []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET"), refuseLine(anthropic, ReasonInternal)})
	})
}
