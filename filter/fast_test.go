package filter

import (
	"encoding/base64"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// The allocation-free request decision must decide exactly as
// the engine did before it (ref_test.go): same reply, path, Set, Remove
// and Secrets for every request. wideEngine's gateway has more than
// manySlots (secret, header) pairs, so its swaps are found by header name.

const wide = "gw.example.com:443"

func wideEngine(t testing.TB) *Engine {
	t.Helper()
	c := testConfig()
	vals := testValues()
	hdrs := [][]string{{"authorization", "x-a"}, {"x-api-key"}, {"x-b", "x-c", "x-d"}, {"api-key", "x-e"}, {"x-goog-api-key"}}
	for i, h := range hdrs {
		name := fmt.Sprintf("WIDE_%d", i)
		c.Secrets = append(c.Secrets, SecretConfig{Name: name, StandIn: contract.StandIn(name), Targets: []string{wide}, Headers: h, Paths: []string{"/v1/", "/w"}})
		vals[name] = []byte(fmt.Sprintf("wide-%d-SENTINEL-0123456789abcdef", i))
	}
	e, err := New(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	if e.bound[wide].byCred == nil {
		t.Fatalf("the wide target has %d slots, not more than %d", len(e.bound[wide].slots), manySlots)
	}
	return e
}

var sameEngines []*Engine

func sameEnginesFor(t testing.TB) []*Engine {
	if sameEngines == nil {
		sameEngines = []*Engine{testEngine(t), wideEngine(t)}
	}
	return sameEngines
}

var sameTargets = []string{anth, gh, "github.com:443", v6, wide, "evil.example:443"}

// checkSame fails when the fast decision of r differs from the reference.
func checkSame(t *testing.T, e *Engine, target string, r *Request) {
	t.Helper()
	before := cloneReq(*r)
	got := e.DecideRequest(target, r)
	want := e.refDecideRequest(target, r)
	want.Reply = e.scrubReply(want.Reply)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecideRequest(%s, %q)\n got %s\nwant %s", target, *r, showDecision(got), showDecision(want))
	}
	gotC, wantC := e.DecideControl(r), e.refDecideControl(r)
	wantC.Reply = e.scrubReply(wantC.Reply)
	if !reflect.DeepEqual(gotC, wantC) {
		t.Fatalf("DecideControl(%q)\n got %s\nwant %s", *r, showDecision(gotC), showDecision(wantC))
	}
	if !reflect.DeepEqual(before, *r) {
		t.Fatal("the request was modified")
	}
}

func showDecision(d Decision) string {
	s := fmt.Sprintf("path %q set %q remove %q secrets %q method %q read %v", d.Path, d.Set, d.Remove, d.Secrets, d.Method, d.Read)
	if d.Reply != nil {
		s = fmt.Sprintf("reply %+v; %s", *d.Reply, s)
	}
	return s
}

func TestDecideRequestSame(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	wideSI := contract.StandIn("WIDE_2")
	authorities := []string{"api.anthropic.com", "API.Anthropic.com.", "api.github.com:443", "github.com", "[2001:DB8::1]:8443",
		"2001:db8::1", "gw.example.com", "GW.example.com:443", "gw.example.com:", "[gw.example.com]:443", "[gw.example.com]",
		"gw.example.com:80", "a:b:c", "[::1", "x]:1", "\u212aey.com", "gw.example.\u212aom", ""}
	paths := []string{"/v1/x", "/w", "/w/../v1/y?q=1", `/v1\..\w`, "/v1/..;/a", "/a/./b?x", "/v1/x?key=" + ghSI, "/v1/%6Ar2-held-PATHS",
		"*", "/v1/%2e", "/agents/a-1/surface", "/agents/a-1/surface?wait=1", "/fetch", "/agents/a/deliveries/d?x", "/b/", "/a"}
	headerSets := [][]Header{
		nil,
		hs("x-api-key", anthSI),
		hs("X-Api-Key", anthSI, "content-type", "application/json"),
		hs("authorization", "Bearer "+ghSI),
		hs("Authorization", "token "+ghSI, "Range", "bytes=0-1"),
		hs("authorization", "bearer "+contract.StandIn(contract.TokenName), "x-api-key", "k", "if-range", "e"),
		hs("authorization", "Bearer "+contract.StandIn(contract.TokenName), "authorization", "x"),
		hs("authorization", basic("x-access-token", ghSI)),
		hs("authorization", "Basic "+base64.RawStdEncoding.EncodeToString([]byte("u:"+pSI))),
		hs("authorization", basic(ghSI, "p")),
		hs("authorization", basic(contract.StandIn(contract.TokenName), ghSI)),
		hs("authorization", basic("jr2-held-", ghSI)),
		hs("authorization", basic(strings.Repeat("u", 300), ghSI)),
		hs("authorization", basic(strings.Repeat("v", 180), ghSI)),
		hs("authorization", basic(strings.Repeat("w", 180)+contract.StandIn("PATHS"), ghSI)),
		hs("authorization", "Basic "+strings.Repeat("A", 400)),
		hs("authorization", pSI),
		hs("x-b", wideSI, "x-d", wideSI, "x-c", "no"),
		hs("x-c", wideSI, "x-api-key", contract.StandIn("WIDE_1"), "x-a", "Bearer "+contract.StandIn("WIDE_0")),
		hs("x-a", "Basic "+b64([]byte("me:"+contract.StandIn("WIDE_0"))), "X-A", "again"),
		hs("x-e", contract.StandIn("WIDE_3"), "x-b", contract.StandIn("WIDE_3")),
		hs("x-\u212a", "v", "x-b", wideSI),
		hs("api-key", ghSI, "cookie", "a="+anthSI),
		hs("x-api-key", anthSI, "X-Jr2-Held-Paths", "1"),
		hs("x-api-key", anthSI, "x_y", "1"),
		hs("x-api-key", anthSI, "host", "evil.example"),
		hs("x-api-key", anthSI, "Host", "api.anthropic.com"),
		hs("proxy-authorization", "Basic eDp5", "x-api-key", anthSI, "authorization", "Bearer sk"),
	}
	n := 0
	for _, e := range sameEnginesFor(t) {
		for _, target := range sameTargets {
			for _, m := range []string{"GET", "POST", "TRACE"} {
				for _, a := range authorities {
					for _, p := range paths {
						for _, h := range headerSets {
							checkSame(t, e, target, &Request{Method: m, Authority: a, Path: p, Headers: h})
							n++
						}
					}
				}
			}
		}
	}
	t.Logf("%d requests decided as before", n)
}

// FuzzDecideRequestSame: whatever the agent sends, the fast decision is
// the reference decision.
func FuzzDecideRequestSame(f *testing.F) {
	f.Add("GET", "api.anthropic.com", "/v1/x", "x-api-key", anthSI, "cookie", "a=b", "x-b", "")
	f.Add("POST", "github.com", "/o/r.git/git-receive-pack", "authorization", basic("u", ghSI), "x-y", ghSI, "Range", "1")
	f.Add("GET", "gw.example.com", "/w?x", "x-c", contract.StandIn("WIDE_2"), "x-a", "Bearer "+contract.StandIn("WIDE_0"), "X-C", "z")
	f.Add("GET", "[2001:db8::1]:8443", `/a\.\b`, "authorization", "Basic "+base64.RawStdEncoding.EncodeToString([]byte("u:"+pSI)), "api-key", "k", "x-api-key", "k")
	f.Add("GET", "127.0.0.1:8081", "/agents/a-1/surface?w=1", "Authorization", "Bearer "+contract.StandIn(contract.TokenName), "x-api-key", "k", "if-range", "e")
	f.Fuzz(func(t *testing.T, method, authority, path, h1, v1, h2, v2, h3, v3 string) {
		for _, e := range sameEnginesFor(t) {
			for _, target := range sameTargets {
				checkSame(t, e, target, &Request{Method: method, Authority: authority, Path: path, Headers: []Header{{h1, v1}, {h2, v2}, {h3, v3}}})
			}
		}
	})
}

// FuzzSplitHostPort: splitHostPort fails exactly where net.SplitHostPort
// does, and otherwise splits the same.
func FuzzSplitHostPort(f *testing.F) {
	for _, s := range []string{"a:1", "a", "[::1]:2", "[::1]", "::1", "[a]:b:c", "a]:1", "[a[]:1", ":", "[]:", "[:]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, p, ok := splitHostPort(s)
		wh, wp, err := net.SplitHostPort(s)
		if ok != (err == nil) || h != wh || p != wp {
			t.Fatalf("splitHostPort(%q) = %q %q %v, net: %q %q %v", s, h, p, ok, wh, wp, err)
		}
	})
}

// The pass path allocates nothing for a stand-in alone or "Bearer
// <stand-in>", in a target of one secret or of many: the Decision shares
// the engine's precomputed Set and Secrets and the request's path. Any
// other scheme, and a Basic pair, builds its value and its Set (2); a path
// that normalising changes is built once (1). A count, not a timing.
func TestDecideRequestAllocs(t *testing.T) {
	e := benchEngine(t, 100)
	w := wideEngine(t)
	sh := &contract.Shape{Kind: "anthropic"}
	es := benchEngineShaped(t, 100, sh)
	si099, _ := contract.StandInOf("SECRET_099", sh)
	cases := []struct {
		name   string
		e      *Engine
		target string
		r      Request
		want   float64
	}{
		{"stand-in alone, 100 secrets (the benchmark)", e, "h050.example.com:443", benchRequest(), 0},
		{"Go's spelling of names and host", e, "h050.example.com:443", Request{"POST", "H050.example.com:443", "/v1/messages", hs("X-Key-050", contract.StandIn("SECRET_050"), "User-Agent", "x", "Accept-Encoding", "gzip"), ""}, 0},
		{"gateway of 100", e, "gateway.example.com:443", Request{"GET", "gateway.example.com", "/v1/models", hs("x-key-099", contract.StandIn("SECRET_099"), "accept", "application/json"), ""}, 0},
		{"bearer", w, wide, Request{"GET", "gw.example.com", "/w?x=1", hs("x-a", "Bearer "+contract.StandIn("WIDE_0"), "accept", "*/*"), ""}, 0},
		{"a credential removed", w, wide, Request{"GET", "gw.example.com", "/w", hs("x-a", contract.StandIn("WIDE_0"), "Authorization", "Bearer x"), ""}, 1},
		{"a path normalised, with a query", w, wide, Request{"GET", "gw.example.com", "/w/./x?q", hs("x-a", contract.StandIn("WIDE_0")), ""}, 1},
		{"other scheme", w, wide, Request{"GET", "gw.example.com", "/w", hs("x-a", "token "+contract.StandIn("WIDE_0")), ""}, 2},
		{"git's Basic pair", w, wide, Request{"GET", "gw.example.com", "/w/info/refs?service=git-upload-pack", hs("x-a", basic("x-access-token", contract.StandIn("WIDE_0"))), ""}, 2},
		{"shaped stand-in alone, 100 shaped secrets", es, "h050.example.com:443", benchRequestShaped(t), 0},
		{"shaped bearer, gateway of 100", es, "gateway.example.com:443", Request{"GET", "gateway.example.com", "/v1/models", hs("X-Key-099", "Bearer "+si099, "Accept", "application/json"), ""}, 0},
		{"control surface", testEngine(t), "", Request{"GET", "127.0.0.1:8081", "/agents/a-1/surface?wait=1", hs("Authorization", "Bearer "+contract.StandIn(contract.TokenName)), ""}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d Decision
			got := testing.AllocsPerRun(200, func() {
				if c.target == "" {
					d = c.e.DecideControl(&c.r)
				} else {
					d = c.e.DecideRequest(c.target, &c.r)
				}
			})
			if d.Reply != nil {
				t.Fatalf("refused: %s", d.Reply.Body)
			}
			if got != c.want {
				t.Fatalf("%v allocations per decision, want %v", got, c.want)
			}
		})
	}
}

// TestStatusWord: every status spells as strconv does.
func TestStatusWord(t *testing.T) {
	for n := -1; n < 1100; n++ {
		if got := statusWord(n); got != strconv.Itoa(n) {
			t.Fatalf("statusWord(%d) = %q", n, got)
		}
	}
}
