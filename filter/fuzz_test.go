package filter

import (
	"reflect"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// FuzzNormalizePath: the result starts with '/', holds no '\' and no dot
// segment, and normalising it again changes nothing.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", `/a\..\b`, "/a/..;/b", "/./.././", "//a//..//", "/a/b/..;x", "/%2e%2e/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		n := NormalizePath(p)
		if !strings.HasPrefix(n, "/") || strings.Contains(n, `\`) {
			t.Fatalf("NormalizePath(%q) = %q", p, n)
		}
		for _, seg := range strings.Split(n[1:], "/") {
			if d := dotSegment(seg); d == "." || d == ".." {
				t.Fatalf("NormalizePath(%q) = %q keeps a dot segment", p, n)
			}
		}
		if again := NormalizePath(n); again != n {
			t.Fatalf("not idempotent: %q -> %q -> %q", p, n, again)
		}
		if want := refNormalizePath(p); n != want {
			t.Fatalf("NormalizePath(%q) = %q, as it was: %q", p, n, want)
		}
	})
}

// FuzzDecideRequest: whatever the agent sends, no value appears in a reply
// or a log field, a value appears only in a Set header the secret rides,
// and no stand-in goes upstream in a header the engine leaves in place.
func FuzzDecideRequest(f *testing.F) {
	f.Add("GET", "api.anthropic.com", "/v1/x", "x-api-key", anthSI, "cookie", "a=b")
	f.Add("POST", "github.com", "/o/r.git/git-receive-pack", "authorization", basic("u", ghSI), "x-y", ghSI)
	f.Add("GET", "api.github.com", "/user?"+ghSI, "authorization", "Bearer "+ghSI, "api-key", "k")
	f.Add("TRACE", "x", "*", "x_y", "z", "host", "y")
	f.Add("GET", "api.anthropic.com", "/v1/x", "x-api-key", anthSI, "X-Jr2-Held-Paths", "1")
	f.Add("GET", "api.github.com", "/user", "accept", "*/*", "user-agent", "git/2.39.5")
	f.Fuzz(func(t *testing.T, method, authority, path, h1, v1, h2, v2 string) {
		e := testEngineFuzz(t)
		for _, target := range []string{anth, gh, "github.com:443", v6} {
			r := &Request{Method: method, Authority: authority, Path: path, Headers: []Header{{h1, v1}, {h2, v2}}}
			d := e.DecideRequest(target, r)
			log := strings.Join(d.LogFields(200), " ")
			for _, v := range sentinels {
				if strings.Contains(log, v) {
					t.Fatalf("log holds a value: %q", log)
				}
				if d.Reply != nil && strings.Contains(d.Reply.Body, v) && !strings.Contains(method+authority+path+h1+h2, v) {
					t.Fatalf("reply holds a value: %q", d.Reply.Body)
				}
			}
			if d.Reply != nil {
				if len(d.Set) != 0 || len(d.Remove) != 0 {
					t.Fatal("a refusal carries header changes")
				}
				// A reply's only header is rule 9's fixed challenge, on a
				// 401, and only when no credential header was sent.
				switch {
				case d.Reply.Status == 401 && !reflect.DeepEqual(d.Reply.Headers, []Header{{"www-authenticate", Challenge}}):
					t.Fatalf("401 with headers %q", d.Reply.Headers)
				case d.Reply.Status != 401 && len(d.Reply.Headers) != 0:
					t.Fatalf("%d with headers %q", d.Reply.Status, d.Reply.Headers)
				case d.Reply.Status == 401 && (e.cred[strings.ToLower(h1)] || e.cred[strings.ToLower(h2)]):
					t.Fatalf("a challenge to a request that sent a credential header (%q, %q)", h1, h2)
				}
				continue
			}
			for _, s := range d.Set {
				for _, si := range []string{anthSI, ghSI, pSI, contract.StandIn(contract.TokenName)} {
					if strings.Contains(s.Value, si) {
						t.Fatalf("a stand-in goes upstream in %s", s.Name)
					}
				}
			}
			removed := map[string]bool{}
			for _, n := range d.Remove {
				removed[n] = true
			}
			for _, s := range d.Set {
				removed[s.Name] = true
			}
			for _, hd := range r.Headers {
				if removed[strings.ToLower(hd.Name)] {
					continue
				}
				if n := e.findStandIn(hd.Value); n != "" {
					t.Fatalf("stand-in of %s left in header %q", n, hd.Name)
				}
				// A host folds a name's case; the stand-in is still there.
				if n := e.findStandInFold(hd.Name); n != "" {
					t.Fatalf("stand-in of %s left in header name %q", n, hd.Name)
				}
			}
			if p, q, _ := splitRequestTarget(d.Path); e.findStandIn(p) != "" || e.findStandIn(q) != "" {
				t.Fatalf("stand-in left in path %q", d.Path)
			}
		}
	})
}

// FuzzDecideConnect: no panic; a refusal never tunnels; a guarded spelling
// is never tunneled.
func FuzzDecideConnect(f *testing.F) {
	for _, s := range []string{"api.anthropic.com:443", "127.1:443", "[::ffff:7f00:1]:80", "0x7f.1:22", "a.localhost:1", "example.com", "[fe80::1%25lo]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, authority string) {
		e := testEngineFuzz(t)
		d := e.DecideConnect("CONNECT", authority)
		if d.Reply != nil && d.Intercept {
			t.Fatal("a refused target is intercepted")
		}
		if d.Reply == nil && !d.Intercept {
			host, _, err := contract.SplitTarget(d.Target)
			if err != nil {
				t.Fatalf("tunneled an unparsable target %q", d.Target)
			}
			if strings.HasPrefix(host, "[") {
				t.Fatalf("host kept brackets: %q", host)
			}
		}
	})
}

var fuzzEngine *Engine

func testEngineFuzz(t *testing.T) *Engine {
	if fuzzEngine == nil {
		fuzzEngine = testEngine(t)
	}
	return fuzzEngine
}
