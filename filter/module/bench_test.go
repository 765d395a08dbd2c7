package module

import (
	"bytes"
	"runtime/cgo"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// passABI is Envoy's side of a stream the module passes, as the bench's
// load sends it (a 1 KiB POST answered with the same bytes), over fixed
// maps: unlike fakeABI, it allocates nothing itself, so what a stream
// allocates through it is the module's own. It copies the maps and the
// body into the filter's memory as cabi does.
type passABI struct {
	req, resp []filter.Header
	chunk     []byte
	mark      int // 1: set true, -1: set false
	sets      int
	authority string // the :authority the module set
	key       string // the x-api-key the module set
	drained   bool
	appended  int
}

func newPassABI() *passABI {
	return &passABI{
		req: hs(":method", "POST", ":scheme", "https", ":authority", "API.Anthropic.com.", ":path", "/v1/echo",
			"user-agent", "Go-http-client/1.1", "content-length", "1024", "x-api-key", "jr2-held-ANTHROPIC_API_KEY", "accept-encoding", "gzip",
			"x-forwarded-proto", "https", "x-request-id", "5b0cc8c5-8f4e-4f4b-9d7e-4b1e0f7f0c11"),
		resp: hs(":status", "200", "content-type", "application/octet-stream",
			"content-length", "1024", "date", "Fri, 04 Dec 2026 10:30:00 GMT"),
		chunk: bytes.Repeat([]byte("a"), 1024),
	}
}

func hs(kv ...string) []filter.Header {
	var out []filter.Header
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, filter.Header{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func (x *passABI) headers(kind int, into *headerCopy) []filter.Header {
	switch kind {
	case requestHeader:
		return copyHeaders(x.req, into)
	case responseHeader:
		return copyHeaders(x.resp, into)
	}
	return copyHeaders(nil, into)
}

func (x *passABI) setHeader(kind int, name, value string) {
	x.sets++
	if kind != requestHeader {
		return
	}
	switch name {
	case ":authority":
		x.authority = value
	case "x-api-key":
		x.key = value
	}
}

func (x *passABI) addHeader(int, string, string)  { x.sets++ }
func (x *passABI) body(_ int, into []byte) []byte { return append(into, x.chunk...) }
func (x *passABI) drainBody(int, int)             { x.drained = true }
func (x *passABI) appendBody(_ int, b []byte)     { x.appended += len(b) }
func (x *passABI) clearRouteCache()               {}
func (x *passABI) routeConfig() uintptr           { return 1 }

// filterState is the connection's target, as the egress listener wrote
// it: the shared intercept listener's route has no target of its own.
func (x *passABI) filterState(key string) (string, bool) {
	return anthropic, key == pluginconf.TargetFilterState
}
func (x *passABI) sendResponse(int, string, string, []filter.Header) {
	panic("the module answered a request it should pass")
}
func (x *passABI) setMark(v bool) {
	x.mark = -1
	if v {
		x.mark = 1
	}
}

// passOne runs one passed stream through the hooks Envoy calls, from the
// filter's creation to its destruction, and reports what went wrong.
func passOne(conf uintptr, x *passABI) string {
	*x = passABI{req: x.req, resp: x.resp, chunk: x.chunk}
	h := newFilterHook(conf, x)
	if h == 0 {
		return "no filter"
	}
	defer destroyHook(h)
	f := filterOf(h)
	f.route = func(uintptr) *routeConfig { return passRoute }
	if requestHeadersHook(nil, h) != statusContinue || x.mark != 1 {
		return "the request was not passed marked"
	}
	if x.authority != "api.anthropic.com" || x.key != anthropicValue {
		return "the request's host or key was not set"
	}
	if responseHeadersHook(h, false) != statusContinue {
		return "the answer's headers were stopped"
	}
	if responseBodyHook(h, true) != statusContinue || x.drained || x.appended != 0 {
		return "the answer's body was stopped or changed"
	}
	streamCompleteHook(h)
	return ""
}

// passRoute is the intercept route passOne's streams take, the shared
// intercept listener's, whose target (anthropic) is the connection's (a
// package variable: a closure over it would be an allocation of the
// test's, not the module's).
var passRoute *routeConfig

// countLines makes the module's stream lines go where Envoy's callback
// takes them, without a copy (outside Envoy, logStream copies each line
// to logInfo), and counts the action=intercept lines.
func countLines(tb testing.TB) *int {
	n := new(int)
	saved := logStream
	logStream = func(l []byte) {
		if bytes.HasPrefix(l, []byte("jr2.custodian action=intercept target=api.anthropic.com:443 secret=ANTHROPIC_API_KEY method=POST status=200")) {
			*n++
		}
	}
	tb.Cleanup(func() { logStream = saved })
	return n
}

// TestPassedRequestAllocatesNothing: once the filter table has a filter
// whose buffers fit, a passed request and its answer allocate nothing on
// the module's Go side, from the filter's creation to its destruction. The
// ABI copies the maps and the body into the filter's memory, as cabi does.
// A count, not a timing.
func TestPassedRequestAllocatesNothing(t *testing.T) {
	fc, _ := pod(t)
	conf := cgo.NewHandle(fc)
	defer conf.Delete()
	passRoute = connectionRoute(t)
	lines := countLines(t)
	x := newPassABI()
	if why := passOne(uintptr(conf), x); why != "" {
		t.Fatal(why)
	}
	if *lines != 1 {
		t.Fatalf("%d action=intercept lines for one stream, want 1", *lines)
	}
	var why string
	n := testing.AllocsPerRun(200, func() {
		if w := passOne(uintptr(conf), x); w != "" {
			why = w
		}
	})
	if why != "" {
		t.Fatal(why)
	}
	if *lines != 202 { // AllocsPerRun runs it once more than asked
		t.Fatalf("%d action=intercept lines for 202 streams", *lines)
	}
	if n != 0 {
		t.Errorf("a passed request allocates %v objects on the module's side, want 0 (go test -run xxx -bench PassedRequest -memprofile shows where)", n)
	}
}

// BenchmarkPassedRequest is TestPassedRequestAllocatesNothing's stream,
// timed: the module's cost per passed request inside Envoy, the ABI's
// crossings aside.
func BenchmarkPassedRequest(b *testing.B) {
	fc, _ := pod(&testing.T{})
	conf := cgo.NewHandle(fc)
	defer conf.Delete()
	passRoute = connectionRoute(b)
	countLines(b)
	x := newPassABI()
	b.ReportAllocs()
	for b.Loop() {
		if why := passOne(uintptr(conf), x); why != "" {
			b.Fatal(why)
		}
	}
}

// TestReusedFilterKeepsNothing: a filter emptied at a stream's destroy
// serves the next stream with nothing of the last. The first stream is
// cut off mid-answer while its scrubber holds the start of the value; the
// next stream, on the same filter's memory (same slot), passes its own
// answer whole and unchanged, holds nothing, and its handle is not the
// first's, which finds nothing.
func TestReusedFilterKeepsNothing(t *testing.T) {
	fc, rc := pod(t)
	conf := cgo.NewHandle(fc)
	defer conf.Delete()
	route := cgo.NewHandle(rc)
	defer route.Delete()
	req := hs(":method", "GET", ":scheme", "https", ":authority", "api.anthropic.com", ":path", "/v1/models",
		"x-api-key", "jr2-held-ANTHROPIC_API_KEY")
	resp := hs(":status", "200", "content-type", "text/plain")
	stream := func(chunk string, end bool) (uintptr, *moduleFilter, *fakeABI) {
		t.Helper()
		x := &fakeABI{hdr: map[int][]filter.Header{requestHeader: req, responseHeader: resp}, route: uintptr(route)}
		h := newFilterHook(uintptr(conf), x)
		if requestHeadersHook(nil, h) != statusContinue || x.mark == nil || !*x.mark {
			t.Fatal("the request was not passed marked")
		}
		if responseHeadersHook(h, false) != statusContinue {
			t.Fatal("the answer's headers were stopped")
		}
		x.chunk = []byte(chunk)
		if responseBodyHook(h, end) != statusContinue {
			t.Fatal("the chunk was stopped")
		}
		return h, filterOf(h), x
	}
	h1, f1, x1 := stream("the value starts here: "+anthropicValue[:12], false)
	if bytes.Contains(x1.chunk, []byte(anthropicValue[:12])) || !f1.m.Scrubbing() {
		t.Fatalf("the first stream passed %q: the scrubber held nothing back, so the test proves nothing", x1.chunk)
	}
	streamCompleteHook(h1)
	destroyHook(h1)
	for name, b := range map[string][]byte{"chunk": f1.chunk, "request headers": f1.reqCopy.buf, "response headers": f1.respCopy.buf} {
		if bytes.ContainsFunc(b[:cap(b)], func(r rune) bool { return r != 0 }) {
			t.Errorf("the emptied filter's %s memory still holds bytes of its stream", name)
		}
	}
	h2, f2, x2 := stream("a plain answer", true)
	defer destroyHook(h2)
	if f2 != f1 {
		t.Fatal("the next stream got another filter: the test proves nothing about reuse")
	}
	if h2 == h1 || filterOf(h1) != nil {
		t.Fatal("the first stream's handle finds the filter now serving the next")
	}
	if string(x2.chunk) != "a plain answer" || len(x2.appended) != 0 || f2.m.Scrubbing() {
		t.Fatalf("the next stream's answer came out %q (+%q): something of the first stream's body passed", x2.chunk, x2.appended)
	}
}

// TestFilterTableKeepsFewFilters: after a burst of streams, at most
// keepSlots free slots keep a filter (and its memory); a stale handle
// finds nothing, and every slot serves again.
func TestFilterTableKeepsFewFilters(t *testing.T) {
	var hs []uintptr
	for range keepSlots + 40 {
		h := newFilterHook(0, &fakeABI{hdr: map[int][]filter.Header{}})
		if h == 0 || filterOf(h) == nil {
			t.Fatal("no filter")
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		destroyHook(h)
		if filterOf(h) != nil {
			t.Fatal("a destroyed stream's handle finds a filter")
		}
	}
	filters.mu.RLock()
	kept := 0
	for _, i := range filters.free {
		if filters.slots[i].f != nil {
			kept++
		}
	}
	free := len(filters.free)
	filters.mu.RUnlock()
	if kept > keepSlots || free < len(hs) {
		t.Fatalf("%d free slots, %d keep a filter; want at least %d free, at most %d kept", free, kept, len(hs), keepSlots)
	}
	for range len(hs) {
		h := newFilterHook(0, &fakeABI{hdr: map[int][]filter.Header{}})
		if filterOf(h) == nil {
			t.Fatal("a reused slot has no filter")
		}
		defer destroyHook(h)
	}
}
