package filter

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

type h = Header

func hs(kv ...string) []Header {
	var out []Header
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Header{kv[i], kv[i+1]})
	}
	return out
}

const (
	anth = "api.anthropic.com:443"
	gh   = "api.github.com:443"
	v6   = "[2001:db8::1]:8443"
)

var (
	anthSI = contract.StandIn("ANTHROPIC_API_KEY")
	ghSI   = contract.StandIn("GITHUB_TOKEN")
	pSI    = contract.StandIn("PATHS")
)

// Each rule of "An intercepted request" has rows that fail when the rule
// is removed: the status and the exact body.
func TestDecideRequestRefusals(t *testing.T) {
	e := testEngine(t)
	cases := []struct {
		name    string
		target  string
		req     Request
		status  int
		body    string
		reason  string
		comment string
	}{
		// 1
		{"rule1 TRACE", anth, Request{"TRACE", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI), ""}, 405,
			"jr2 custodian: method TRACE is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", ReasonMethod, ""},
		{"rule1 CONNECT inside", anth, Request{"CONNECT", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI), ""}, 405,
			"jr2 custodian: method CONNECT is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", ReasonMethod, ""},
		{"rule1 lowercase get", anth, Request{"get", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI), ""}, 405,
			"jr2 custodian: method get is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", ReasonMethod, ""},
		// 2
		{"rule2 underscore", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "x_api_key", "whatever"), ""}, 400,
			`jr2 custodian: header x_api_key has "_" in its name; header names here use "-"`, ReasonUnderscore, ""},
		{"rule2 before host", anth, Request{"GET", "evil.example", "/v1/x", hs("x_a", "1"), ""}, 400,
			`jr2 custodian: header x_a has "_" in its name; header names here use "-"`, ReasonUnderscore, "order: 2 before 3"},
		// 3
		{"rule3 other host", anth, Request{"GET", "evil.example", "/v1/x", hs("x-api-key", anthSI), ""}, 421,
			"jr2 custodian: the Host header must name api.anthropic.com:443", ReasonHost, ""},
		{"rule3 other port", anth, Request{"GET", "api.anthropic.com:8443", "/v1/x", hs("x-api-key", anthSI), ""}, 421,
			"jr2 custodian: the Host header must name api.anthropic.com:443", ReasonHost, ""},
		{"rule3 second host header", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "host", "evil.example"), ""}, 421,
			"jr2 custodian: the Host header must name api.anthropic.com:443", ReasonHost, ""},
		{"rule3 empty host", anth, Request{"GET", "", "/v1/x", hs("x-api-key", anthSI), ""}, 421,
			"jr2 custodian: the Host header must name api.anthropic.com:443", ReasonHost, ""},
		// 4
		{"rule4 %2f", anth, Request{"GET", "api.anthropic.com", "/v1/a%2fb", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`, ReasonEncoded, ""},
		{"rule4 %2E", anth, Request{"GET", "api.anthropic.com", "/v1/%2E%2E/admin", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`, ReasonEncoded, ""},
		{"rule4 %5C", anth, Request{"GET", "api.anthropic.com", "/v1/..%5Cadmin", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`, ReasonEncoded, ""},
		{"rule4 before rule5", anth, Request{"GET", "api.anthropic.com", "/admin%2f", nil, ""}, 400,
			`jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`, ReasonEncoded, ""},
		{"not a path", anth, Request{"OPTIONS", "api.anthropic.com", "*", hs("x-api-key", anthSI), ""}, 400,
			"jr2 custodian: the request target must be a path that starts with /", ReasonPath, ""},
		// IIS reads %u002e as '.', net/http refuses the
		// request line; every '%' that begins no %XX escape is refused
		{"rule4 %u escape", anth, Request{"GET", "api.anthropic.com", "/v1/%u002e%u002e/admin", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the path holds a "%" that does not begin a %XX escape (such as IIS's %u002e); send "%" as %25`, ReasonEncoded, ""},
		{"rule4 % at the end", anth, Request{"GET", "api.anthropic.com", "/v1/x%4", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the path holds a "%" that does not begin a %XX escape (such as IIS's %u002e); send "%" as %25`, ReasonEncoded, ""},
		{"rule4 an encoded separator first", anth, Request{"GET", "api.anthropic.com", "/v1/%u002e%2e", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`, ReasonEncoded, ""},
		// an absolute URI (userinfo and all) is not a path; Envoy's parser
		// would drop the userinfo, stand-in and all, before the engine saw it
		{"absolute URI with userinfo", anth, Request{"GET", "api.anthropic.com", "https://user:" + anthSI + "@api.anthropic.com/v1/x", hs("x-api-key", anthSI), ""}, 400,
			"jr2 custodian: the request target must be a path that starts with /", ReasonPath, ""},
		// a fragment is never sent; cut, it would hide the
		// dot segments the path check reads
		{"fragment", anth, Request{"GET", "api.anthropic.com", "/v1/x#/../../admin", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the request target holds "#"; a fragment is never sent, send the path and query only`, ReasonPath, ""},
		{"fragment in the query", anth, Request{"GET", "api.anthropic.com", "/v1/x?a=b#c", hs("x-api-key", anthSI), ""}, 400,
			`jr2 custodian: the request target holds "#"; a fragment is never sent, send the path and query only`, ReasonPath, ""},
		// 5
		{"rule5 outside", anth, Request{"GET", "api.anthropic.com", "/admin", hs("x-api-key", anthSI), ""}, 403,
			"jr2 custodian: ANTHROPIC_API_KEY may not be sent to this path; its paths are /v1/", ReasonPath, ""},
		{"rule5 dot segments", anth, Request{"GET", "api.anthropic.com", "/v1/../admin", hs("x-api-key", anthSI), ""}, 403,
			"jr2 custodian: ANTHROPIC_API_KEY may not be sent to this path; its paths are /v1/", ReasonPath, ""},
		{"rule5 backslash", anth, Request{"GET", "api.anthropic.com", `/v1\..\admin`, hs("x-api-key", anthSI), ""}, 403,
			"jr2 custodian: ANTHROPIC_API_KEY may not be sent to this path; its paths are /v1/", ReasonPath, ""},
		{"rule5 tomcat ..;", anth, Request{"GET", "api.anthropic.com", "/v1/..;/admin", hs("x-api-key", anthSI), ""}, 403,
			"jr2 custodian: ANTHROPIC_API_KEY may not be sent to this path; its paths are /v1/", ReasonPath, ""},
		{"rule5 prefix without slash", v6, Request{"GET", "[2001:db8::1]:8443", "/ab", hs("authorization", "Bearer "+pSI), ""}, 403,
			"jr2 custodian: PATHS may not be sent to this path; its paths are /a, /b/", ReasonPath, ""},
		{"rule5 no stand-in, path first", anth, Request{"GET", "api.anthropic.com", "/admin", nil, ""}, 403,
			"jr2 custodian: ANTHROPIC_API_KEY may not be sent to this path; its paths are /v1/", ReasonPath, "order: 5 before 9"},
		// 6
		{"rule6 twice", gh, Request{"GET", "api.github.com", "/user", hs("authorization", "Bearer "+ghSI, "Authorization", "Bearer "+ghSI), ""}, 400,
			"jr2 custodian: header authorization was sent more than once; send it once", ReasonDuplicate, ""},
		{"rule6 other credential twice", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "api-key", "a", "api-key", "b"), ""}, 400,
			"jr2 custodian: header api-key was sent more than once; send it once", ReasonDuplicate, ""},
		// Envoy joins a repeated authorization into "a,b"
		// before any filter sees it; a ',' is a list of two in every host
		{"rule6 joined by a proxy", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "authorization", "a,b"), ""}, 400,
			"jr2 custodian: header authorization was sent more than once; send it once", ReasonDuplicate, ""},
		{"rule6 a list in the swapped header", gh, Request{"GET", "api.github.com", "/user", hs("authorization", "Bearer "+ghSI+",Bearer "+ghSI), ""}, 400,
			"jr2 custodian: header authorization was sent more than once; send it once", ReasonDuplicate, ""},
		// 9
		{"rule9 none", anth, Request{"GET", "api.anthropic.com", "/v1/x", nil, ""}, 403,
			"jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key", ReasonNoStandIn, ""},
		{"rule9 wrong header", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("authorization", "Bearer "+anthSI), ""}, 403,
			"jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key", ReasonNoStandIn, ""},
		{"rule9 real-looking key", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", "sk-ant-api03-agentguess"), ""}, 403,
			"jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key", ReasonNoStandIn, ""},
		{"rule9 other secret's stand-in", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", ghSI), ""}, 403,
			"jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key", ReasonNoStandIn, ""},
		{"rule9 two schemes", gh, Request{"GET", "api.github.com", "/user", hs("authorization", "Bearer token "+ghSI), ""}, 403,
			"jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key", ReasonNoStandIn, ""},
		{"rule9 stand-in with suffix", gh, Request{"GET", "api.github.com", "/user", hs("authorization", "Bearer "+ghSI+"x"), ""}, 403,
			"jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key", ReasonNoStandIn, ""},
		{"rule9 no credential header, authorization bound: the challenge", gh, Request{"GET", "api.github.com", "/user", nil, ""}, 401,
			"jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key", ReasonNoStandIn, "git asks without credentials first"},
		{"rule9 the challenge on HEAD and POST", gh, Request{"POST", "api.github.com", "/repo.git/git-upload-pack", hs("content-type", "application/x-git-upload-pack-request", "accept", "*/*"), ""}, 401,
			"jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key", ReasonNoStandIn, ""},
		{"rule9 the challenge on an IPv6 target", v6, Request{"GET", "[2001:db8::1]:8443", "/a", nil, ""}, 401,
			"jr2 custodian: needs the stand-in of PATHS in authorization", ReasonNoStandIn, ""},
		{"rule9 a guess in another credential header: no challenge", gh, Request{"GET", "api.github.com", "/user", hs("api-key", "guess"), ""}, 403,
			"jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key", ReasonNoStandIn, "a credential was sent: a challenge would only make the client retry"},
		{"rule9 proxy-authorization alone: no challenge", gh, Request{"GET", "api.github.com", "/user", hs("proxy-authorization", "Basic eDp5"), ""}, 403,
			"jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key", ReasonNoStandIn, ""},
		{"rule5 before the challenge", v6, Request{"GET", "[2001:db8::1]:8443", "/c", nil, ""}, 403,
			"jr2 custodian: PATHS may not be sent to this path; its paths are /a, /b/", ReasonPath, "order: 5 before 9"},
		{"rule9 basic user only", gh, Request{"GET", "api.github.com", "/user", hs("authorization", basic(ghSI, "x-oauth-basic")), ""}, 403,
			"jr2 custodian: needs the stand-in of GITHUB_TOKEN in authorization or x-api-key or x-goog-api-key or api-key", ReasonNoStandIn, ""},
		// 10
		{"rule10 query", anth, Request{"GET", "api.anthropic.com", "/v1/x?key=" + anthSI, hs("x-api-key", anthSI), ""}, 403,
			"jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, ""},
		{"rule10 query encoded", anth, Request{"GET", "api.anthropic.com", "/v1/x?key=%6Ar2-held-GITHUB_TOKEN", hs("x-api-key", anthSI), ""}, 403,
			"jr2 custodian: the stand-in of GITHUB_TOKEN is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, ""},
		{"rule10 path", anth, Request{"GET", "api.anthropic.com", "/v1/" + ghSI, hs("x-api-key", anthSI), ""}, 403,
			"jr2 custodian: the stand-in of GITHUB_TOKEN is in the path; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, ""},
		{"rule10 other header", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "x-forward-me", "Bearer "+contract.StandIn(contract.TokenName)), ""}, 403,
			"jr2 custodian: the stand-in of JR2_SANDBOX_TOKEN is in header x-forward-me; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, ""},
		{"rule10 longest stand-in named", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "cookie", "a="+anthSI), ""}, 403,
			"jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in header cookie; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, ""},
		{"rule10 header name", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "x-"+pSI, "1"), ""}, 403,
			"jr2 custodian: the stand-in of PATHS is in a header name; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, ""},
		{"rule10 header name as Go spells it", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "X-Jr2-Held-Paths", "1"), ""}, 403,
			"jr2 custodian: the stand-in of PATHS is in a header name; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, "Go canonicalises names"},
		{"rule10 header name as Envoy spells it", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "x-jr2-held-paths", "1"), ""}, 403,
			"jr2 custodian: the stand-in of PATHS is in a header name; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, "Envoy lowercases names"},
		{"rule10 basic user", gh, Request{"GET", "api.github.com", "/user", hs("authorization", basic(contract.StandIn(contract.TokenName), ghSI)), ""}, 403,
			"jr2 custodian: the stand-in of JR2_SANDBOX_TOKEN is in the Basic user of header authorization; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn, ""},
		{"not bound", "evil.example:443", Request{"GET", "evil.example", "/", nil, ""}, 421,
			"jr2 custodian: evil.example:443 is not a bound target", ReasonTarget, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := cloneReq(c.req)
			d := e.DecideRequest(c.target, &c.req)
			if d.Reply == nil {
				t.Fatalf("forwarded (path %q set %v remove %v), want %d", d.Path, names(d.Set), d.Remove, c.status)
			}
			if d.Reply.Status != c.status || d.Reply.Body != c.body || d.Reply.Reason != c.reason {
				t.Fatalf("reply %d %q (%s)\nwant  %d %q (%s)", d.Reply.Status, d.Reply.Body, d.Reply.Reason, c.status, c.body, c.reason)
			}
			if len(d.Set) != 0 || len(d.Remove) != 0 || len(d.Secrets) != 0 {
				t.Fatalf("a refusal carries header changes: set %v remove %v secrets %v", names(d.Set), d.Remove, d.Secrets)
			}
			// Only rule 9's 401 carries a header: the fixed challenge.
			var challenge []Header
			if c.status == 401 {
				challenge = []Header{{"www-authenticate", `Basic realm="jr2 custodian"`}}
			}
			if !reflect.DeepEqual(d.Reply.Headers, challenge) {
				t.Fatalf("reply headers %q, want %q", d.Reply.Headers, challenge)
			}
			noSentinel(t, "reply body", d.Reply.Body)
			noSentinel(t, "log", strings.Join(d.LogFields(d.Reply.Status), " "))
			if got := strings.Join(d.LogFields(0), " "); got != "action refuse target "+c.target+" reason "+c.reason {
				t.Fatalf("log fields %q", got)
			}
			if !reflect.DeepEqual(before, c.req) {
				t.Fatal("the request was modified")
			}
		})
	}
}

func TestDecideRequestForwards(t *testing.T) {
	e := testEngine(t)
	b64 := base64.StdEncoding.EncodeToString
	cases := []struct {
		name    string
		target  string
		req     Request
		path    string
		set     []Header
		remove  []string
		secrets []string
	}{
		{"stand-in alone", anth, Request{"POST", "api.anthropic.com", "/v1/messages", hs("x-api-key", anthSI, "content-type", "application/json"), ""},
			"/v1/messages", hs("x-api-key", anthropicValue, "accept-encoding", "identity"), nil, []string{"ANTHROPIC_API_KEY"}},
		{"bearer", gh, Request{"GET", "api.github.com", "/user", hs("Authorization", "Bearer "+ghSI), ""},
			"/user", hs("authorization", "Bearer "+githubValue, "accept-encoding", "identity"), nil, []string{"GITHUB_TOKEN"}},
		{"other scheme kept", gh, Request{"GET", "api.github.com:443", "/user", hs("authorization", "token "+ghSI), ""},
			"/user", hs("authorization", "token "+githubValue, "accept-encoding", "identity"), nil, []string{"GITHUB_TOKEN"}},
		{"git basic pair", "github.com:443", Request{"GET", "github.com", "/o/r.git/info/refs?service=git-upload-pack", hs("authorization", basic("x-access-token", ghSI)), ""},
			"/o/r.git/info/refs?service=git-upload-pack", hs("authorization", "Basic "+b64([]byte("x-access-token:"+githubValue)), "accept-encoding", "identity"), nil, []string{"GITHUB_TOKEN"}},
		{"basic unpadded", "github.com:443", Request{"GET", "github.com", "/", hs("authorization", "Basic "+base64.RawStdEncoding.EncodeToString([]byte("u:"+ghSI))), ""},
			"/", hs("authorization", "Basic "+b64([]byte("u:"+githubValue)), "accept-encoding", "identity"), nil, []string{"GITHUB_TOKEN"}},
		{"strip other credentials", anth, Request{"GET", "API.Anthropic.com.", "/v1/x", hs("authorization", "Bearer sk-agent", "x-api-key", anthSI, "proxy-authorization", "Basic x", "api-key", ghSI), ""},
			"/v1/x", hs("x-api-key", anthropicValue, "accept-encoding", "identity"), []string{"api-key", "authorization", "proxy-authorization"}, []string{"ANTHROPIC_API_KEY"}},
		{"normalised path goes upstream", anth, Request{"GET", "api.anthropic.com:443", `/v1/a/./b/../c\d?x=1&y=%2f`, hs("x-api-key", anthSI), ""},
			"/v1/a/c/d?x=1&y=%2f", hs("x-api-key", anthropicValue, "accept-encoding", "identity"), nil, []string{"ANTHROPIC_API_KEY"}},
		{"ipv6 target", v6, Request{"DELETE", "[2001:DB8::1]:8443", "/b/x", hs("authorization", pSI), ""},
			"/b/x", hs("authorization", pathsValue, "accept-encoding", "identity"), nil, []string{"PATHS"}},
		{"prefix itself", v6, Request{"HEAD", "[2001:db8::1]:8443", "/a", hs("authorization", pSI), ""},
			"/a", hs("authorization", pathsValue, "accept-encoding", "identity"), nil, []string{"PATHS"}},
		{"prefix subpath", v6, Request{"OPTIONS", "[2001:db8::1]:8443", "/a/z", hs("authorization", pSI), ""},
			"/a/z", hs("authorization", pathsValue, "accept-encoding", "identity"), nil, []string{"PATHS"}},
		{"encoded slash in query is fine", gh, Request{"PATCH", "api.github.com", "/r?next=%2Fhome", hs("x-goog-api-key", ghSI), ""},
			"/r?next=%2Fhome", hs("x-goog-api-key", githubValue, "accept-encoding", "identity"), nil, []string{"GITHUB_TOKEN"}},
		{"range never goes upstream", gh, Request{"GET", "api.github.com", "/r", hs("authorization", "Bearer "+ghSI, "Range", "bytes=9-20", "if-range", `"e1"`, "x-api-key", "k"), ""},
			"/r", hs("authorization", "Bearer "+githubValue, "accept-encoding", "identity"), []string{"x-api-key", "range", "if-range"}, []string{"GITHUB_TOKEN"}},
		{"accept-encoding replaced", gh, Request{"PUT", "api.github.com", "/r", hs("api-key", ghSI, "accept-encoding", "br, gzip"), ""},
			"/r", hs("api-key", githubValue, "accept-encoding", "identity"), nil, []string{"GITHUB_TOKEN"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := e.DecideRequest(c.target, &c.req)
			if d.Reply != nil {
				t.Fatalf("refused %d %q", d.Reply.Status, d.Reply.Body)
			}
			if d.Path != c.path {
				t.Errorf("path %q, want %q", d.Path, c.path)
			}
			if !reflect.DeepEqual(d.Set, c.set) {
				t.Errorf("set %v, want %v", d.Set, c.set)
			}
			if !reflect.DeepEqual(d.Remove, c.remove) {
				t.Errorf("remove %v, want %v", d.Remove, c.remove)
			}
			if !reflect.DeepEqual(d.Secrets, c.secrets) {
				t.Errorf("secrets %v, want %v", d.Secrets, c.secrets)
			}
			log := strings.Join(d.LogFields(200), " ")
			noSentinel(t, "log", log)
			want := "action intercept target " + c.target + " secret " + strings.Join(c.secrets, ",") + " method " + c.req.Method + " status 200"
			if log != want {
				t.Errorf("log %q, want %q", log, want)
			}
			for _, si := range []string{anthSI, ghSI, pSI} {
				for _, s := range d.Set {
					if strings.Contains(s.Value, si) {
						t.Errorf("a stand-in goes upstream in %s", s.Name)
					}
				}
			}
		})
	}
}

func TestNormalizePath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/", "/"}, {"/a/b", "/a/b"}, {"/a/./b", "/a/b"}, {"/a/../b", "/b"}, {"/a/b/..", "/a/"},
		{"/a/b/.", "/a/b/"}, {"/..", "/"}, {"/../../x", "/x"}, {`\a\..\b`, "/b"}, {"/a/..;/b", "/b"},
		{"/a/..;jsessionid=1/b", "/b"}, {"/a/.;x/b", "/a/b"}, {"/a//b", "/a//b"}, {"/a//..", "/a/"},
		{"/a/...", "/a/..."}, {"/a/..x", "/a/..x"}, {"/a/", "/a/"},
	} {
		if got := NormalizePath(c.in); got != c.want {
			t.Errorf("NormalizePath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestUpstreamHost(t *testing.T) {
	for _, c := range []struct{ target, want string }{
		{"api.anthropic.com:443", "api.anthropic.com"}, {"gw.example:8443", "gw.example:8443"},
		{"[2001:db8::1]:443", "[2001:db8::1]"}, {"[2001:db8::1]:8443", "[2001:db8::1]:8443"}, {"10.0.0.1:443", "10.0.0.1"},
	} {
		if got := contract.UpstreamHost(c.target); got != c.want {
			t.Errorf("UpstreamHost(%q) = %q, want %q", c.target, got, c.want)
		}
	}
}

func cloneReq(r Request) Request {
	r.Headers = append([]Header(nil), r.Headers...)
	return r
}

func names(hs []Header) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name)
	}
	return out
}
