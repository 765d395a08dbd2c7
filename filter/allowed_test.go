package filter_test

import (
	"encoding/base64"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/standintest"
	"jr2.dev/boundary/internal/contract"
)

const (
	allowedValue = "sk-allowed-SENTINEL-8fQ2mWz6Lp0Tn4Vb"
	boundT       = "api.example.com:443"
	openT        = "open.example.com:443"
	plainT       = "plain.example.com:80"
)

var keySI = contract.StandIn("KEY")

// allowedEngine holds KEY, bound to api.example.com in x-api-key under
// /v1/.
func allowedEngine(t testing.TB) *filter.Engine {
	t.Helper()
	e, err := filter.New(&filter.Config{Pod: "allowed-test", Secrets: []filter.SecretConfig{
		{Name: "KEY", StandIn: keySI, Targets: []string{boundT}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
	}}, map[string][]byte{"KEY": []byte(allowedValue)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestStandInPlaces runs the shared table of rule 10's places (package
// standintest) on the engine: toward a bound target by DecideRequest and
// by DecideAllowed (one decision), and toward targets no secret is bound
// to, over TLS and plain HTTP, by DecideAllowed, Unbound's places too.
func TestStandInPlaces(t *testing.T) {
	e := allowedEngine(t)
	check := func(t *testing.T, how string, c standintest.Case, d filter.Decision) {
		t.Helper()
		want := standintest.Body("KEY", c.Place)
		if d.Reply == nil || d.Reply.Status != standintest.Status || d.Reply.Reason != standintest.Reason || d.Reply.Body != want {
			t.Errorf("%s, %s: %+v, want %d %s %q", how, c.Name, d.Reply, standintest.Status, standintest.Reason, want)
		}
	}
	for _, c := range standintest.Cases(keySI, "/v1/") {
		r := filter.Request{Method: "GET", Authority: "api.example.com", Path: c.Path, Headers: []filter.Header{{Name: "x-api-key", Value: keySI}}}
		if c.Header.Name != "" {
			r.Headers = append(r.Headers, c.Header)
		}
		check(t, "DecideRequest", c, e.DecideRequest(boundT, &r))
		check(t, "DecideAllowed, bound", c, e.DecideAllowed(boundT, true, &r, filter.Upgrade{}))
	}
	for _, target := range []struct {
		t, host string
		tls     bool
	}{{openT, "open.example.com", true}, {plainT, "plain.example.com", false}} {
		for _, c := range append(standintest.Cases(keySI, "/v1/"), standintest.Unbound(keySI, "/v1/")...) {
			r := filter.Request{Method: "GET", Authority: target.host, Path: c.Path}
			if c.Header.Name != "" {
				r.Headers = append(r.Headers, c.Header)
			}
			check(t, "DecideAllowed "+target.t, c, e.DecideAllowed(target.t, target.tls, &r, filter.Upgrade{}))
		}
	}
}

// TestDecideAllowed: DecideAllowed's own rules, with the exact answers,
// and what goes upstream toward a target no secret is bound to.
func TestDecideAllowed(t *testing.T) {
	e := allowedEngine(t)
	get := func(host, path string, kv ...string) *filter.Request {
		r := &filter.Request{Method: "GET", Authority: host, Path: path}
		for i := 0; i+1 < len(kv); i += 2 {
			r.Headers = append(r.Headers, filter.Header{Name: kv[i], Value: kv[i+1]})
		}
		return r
	}
	ws := filter.Upgrade{Tokens: []string{"websocket"}}
	for _, tc := range []struct {
		name   string
		target string
		tls    bool
		r      *filter.Request
		u      filter.Upgrade
		status int
		reason string
		body   string
	}{
		{"a bound target over plain HTTP", boundT, false, get("api.example.com", "/v1/x", "x-api-key", keySI), filter.Upgrade{}, 403, filter.ReasonPlaintext,
			"jr2 custodian: a secret is bound to api.example.com:443 and values cross the network only inside TLS; use https"},
		{"a bound target over TLS is rules 1-11", boundT, true, get("api.example.com", "/admin", "x-api-key", keySI), filter.Upgrade{}, 403, filter.ReasonPath,
			"jr2 custodian: KEY may not be sent to this path; its paths are /v1/"},
		{"a bound target's upgrade is DecideUpgrade's", boundT, true, &filter.Request{Method: "POST", Authority: "api.example.com", Path: "/v1/x"}, ws, 400, filter.ReasonUpgrade,
			"jr2 custodian: " + filter.UpgradeText},
		{"an upgrade toward an unbound target", openT, true, get("open.example.com", "/ws"), ws, 400, filter.ReasonUpgrade,
			"jr2 custodian: no secret is bound to open.example.com:443; an upgrade (WebSocket) is carried only to a bound target"},
		{"rule 3: another host", openT, true, get("evil.example", "/"), filter.Upgrade{}, 421, filter.ReasonHost,
			"jr2 custodian: the Host header must name open.example.com:443"},
		{"rule 3: port 80 is not the default over TLS", openT, true, get("open.example.com:80", "/"), filter.Upgrade{}, 421, filter.ReasonHost,
			"jr2 custodian: the Host header must name open.example.com:443"},
		{"rule 3: port 443 is not the default over plain HTTP", plainT, false, get("plain.example.com", "/x"), filter.Upgrade{}, 0, "", ""},
		{"rule 3: plain HTTP to port 443 names it", plainT, false, get("plain.example.com:443", "/x"), filter.Upgrade{}, 421, filter.ReasonHost,
			"jr2 custodian: the Host header must name plain.example.com:80"},
		{"rule 3: a second host header", openT, true, get("open.example.com", "/", "host", "evil.example"), filter.Upgrade{}, 421, filter.ReasonHost,
			"jr2 custodian: the Host header must name open.example.com:443"},
		{"rule 5: not a path", openT, true, get("open.example.com", "*"), filter.Upgrade{}, 400, filter.ReasonPath,
			"jr2 custodian: " + filter.NotAPathText},
		{"rule 5: a fragment", openT, true, get("open.example.com", "/a#/../b"), filter.Upgrade{}, 400, filter.ReasonPath,
			"jr2 custodian: " + filter.FragmentText},
		{"another secret's stand-in is refused as any", openT, true, get("open.example.com", "/", "cookie", "s="+keySI), filter.Upgrade{}, 403, filter.ReasonStandIn,
			standintest.Body("KEY", "header cookie")},
	} {
		d := e.DecideAllowed(tc.target, tc.tls, tc.r, tc.u)
		if tc.status == 0 {
			if d.Reply != nil {
				t.Errorf("%s: %+v, want forwarded", tc.name, d.Reply)
			}
			continue
		}
		if d.Reply == nil || d.Reply.Status != tc.status || d.Reply.Reason != tc.reason || d.Reply.Body != tc.body {
			t.Errorf("%s: %+v, want %d %s %q", tc.name, d.Reply, tc.status, tc.reason, tc.body)
		}
		if d.Reply != nil && strings.Contains(d.Reply.Body, allowedValue) {
			t.Errorf("%s: the reply holds the value", tc.name)
		}
	}

	// Forwarded: the path as sent, the agent's own credentials as sent,
	// identity asked for, range and if-range removed.
	r := get("Open.Example.COM.:443", "/a/../b?q=%2e", "authorization", "Bearer agent-own", "x-api-key", "agent-key", "range", "bytes=1-2", "if-range", `"e"`)
	d := e.DecideAllowed(openT, true, r, filter.Upgrade{})
	want := filter.Decision{Target: openT, Path: "/a/../b?q=%2e", Set: []filter.Header{{Name: "accept-encoding", Value: "identity"}}, Remove: []string{"range", "if-range"}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("forwarded:\n got %+v\nwant %+v", d, want)
	}
	// The bound target decides exactly as DecideUpgrade does.
	br := get("api.example.com", "/v1/x", "x-api-key", keySI)
	if a, b := e.DecideAllowed(boundT, true, br, filter.Upgrade{}), e.DecideUpgrade(boundT, br, filter.Upgrade{}); !reflect.DeepEqual(a, b) {
		t.Errorf("DecideAllowed %+v, DecideUpgrade %+v", a, b)
	}
}

// FuzzDecideAllowed: whatever a request toward a target no secret is
// bound to holds, a stand-in never goes upstream: a forwarded request
// holds none in its path, header names (any case) or values, nor in a
// Basic pair; and no reply holds the value.
func FuzzDecideAllowed(f *testing.F) {
	for _, s := range [][3]string{
		{"/v1/x", "x-note", "1"},
		{"/" + keySI, "a", "b"},
		{"/x", keySI, "1"},
		{"/x", "X-Jr2-Held-Key", "1"},
		{"/x?k=jr2%2dheld-KEY", "a", "b"},
		{"/x", "authorization", "Basic YWdlbnQ6anIyLWhlbGQtS0VZ"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	e := allowedEngine(f)
	f.Fuzz(func(t *testing.T, path, name, value string) {
		r := filter.Request{Method: "GET", Authority: "open.example.com", Path: path, Headers: []filter.Header{{Name: name, Value: value}}}
		d := e.DecideAllowed(openT, true, &r, filter.Upgrade{})
		if d.Reply != nil {
			if strings.Contains(d.Reply.Body, allowedValue) {
				t.Fatalf("the reply holds the value: %q", d.Reply.Body)
			}
			return
		}
		pair := ""
		if scheme, rest, ok := strings.Cut(value, " "); ok && strings.EqualFold(scheme, "basic") {
			b, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
			pair = string(b)
		}
		if strings.Contains(path, keySI) || strings.Contains(strings.ToLower(name), strings.ToLower(keySI)) ||
			strings.Contains(value, keySI) || strings.Contains(pair, keySI) {
			t.Fatalf("forwarded a stand-in: %q %q %q", path, name, value)
		}
	})
}

// TestDialAllowed: a bound target dials as DialBound (a guarded address
// allowed under localTargets), any other as AllowDial (never).
func TestDialAllowed(t *testing.T) {
	loop, pub := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.1")
	for _, local := range []bool{false, true} {
		e, err := filter.New(&filter.Config{Pod: "dial-test", LocalTargets: local, Secrets: []filter.SecretConfig{
			{Name: "KEY", StandIn: keySI, Targets: []string{boundT}, Headers: []string{"x-api-key"}},
		}}, map[string][]byte{"KEY": []byte(allowedValue)})
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{boundT, openT} {
			got, want := e.DialAllowed(target, loop), e.AllowDial(target, loop)
			if target == boundT {
				want = e.DialBound(target, loop)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("local %v, %s: %+v, want %+v", local, target, got, want)
			}
			if r := e.DialAllowed(target, pub); r != nil {
				t.Errorf("local %v, %s: a public address refused: %+v", local, target, r)
			}
		}
		if r := e.DialAllowed(openT, loop); r == nil || r.Reason != filter.ReasonGuard {
			t.Errorf("local %v: loopback for an unbound target: %+v, want the guard", local, r)
		}
		if r := e.DialAllowed(boundT, loop); (r == nil) != local {
			t.Errorf("local %v: loopback for the bound target: %+v", local, r)
		}
	}
}
