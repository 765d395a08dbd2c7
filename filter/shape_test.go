package filter_test

import (
	"encoding/base64"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/standintest"

	"jr2.dev/boundary/internal/contract"
)

// shapes are every kind of the table and a user's own.
func shapes() []*contract.Shape {
	var out []*contract.Shape
	for _, k := range contract.ShapeKinds {
		out = append(out, &contract.Shape{Kind: k.Kind})
	}
	return append(out, &contract.Shape{Prefix: "acme-", Length: 40})
}

func standInOf(t testing.TB, name string, sh *contract.Shape) string {
	t.Helper()
	si, err := contract.StandInOf(name, sh)
	if err != nil {
		t.Fatal(err)
	}
	return si
}

// shapeEngine holds KEY bound to api.example.com in x-api-key under /v1/
// (as allowedEngine) and GH bound to git.example.com in every default
// header, each stand-in of shape sh (nil: plain).
func shapeEngine(t testing.TB, sh *contract.Shape) *filter.Engine {
	t.Helper()
	e, err := filter.New(&filter.Config{Pod: "shape-test", Secrets: []filter.SecretConfig{
		{Name: "KEY", StandIn: standInOf(t, "KEY", sh), Shape: sh, Targets: []string{boundT}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
		{Name: "GH", StandIn: standInOf(t, "GH", sh), Shape: sh, Targets: []string{"git.example.com:443"}, Headers: contract.DefaultHeaders},
	}}, map[string][]byte{"KEY": []byte(allowedValue), "GH": []byte("ghp-SENTINEL-value-Wq4Zr8Tn2Ks0Lp7")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestShapedStandInSpelling: a shaped stand-in has its kind's prefix and
// length, the mark right after the prefix, only its alphabet after it, is
// the same on every call and differs between names; an access key id's
// holds '0', outside base32, so it is no access key id AWS issues.
func TestShapedStandInSpelling(t *testing.T) {
	for _, sh := range shapes() {
		r, err := sh.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		a, b := standInOf(t, "KEY", sh), standInOf(t, "KEY2", sh)
		if a != standInOf(t, "KEY", sh) {
			t.Errorf("%+v: not deterministic", sh)
		}
		if a == b {
			t.Errorf("%+v: KEY and KEY2 share %q", sh, a)
		}
		for _, si := range []string{a, b} {
			if len(si) != r.Length || !strings.HasPrefix(si, r.Prefix+contract.StandInMark) {
				t.Errorf("%+v: %q: want %d characters starting %q", sh, si, r.Length, r.Prefix+contract.StandInMark)
			}
			for _, c := range si[len(r.Prefix):] {
				ok := c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || !r.Upper && c >= 'a' && c <= 'z'
				if !ok {
					t.Errorf("%+v: %q holds %q", sh, si, c)
				}
			}
		}
		if sh.Kind == "aws-access-key-id" && strings.Trim(a[4:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == "" {
			t.Errorf("%q is all base32: it could be an access key id", a)
		}
	}
	for _, bad := range []struct {
		sh   contract.Shape
		want string
	}{
		{contract.Shape{Kind: "stripe"}, `"stripe" is no shape kind; write one of anthropic, openai, github, aws-access-key-id, or your own prefix and length`},
		{contract.Shape{Kind: "github", Length: 40}, "a shape is a kind (anthropic, openai, github, aws-access-key-id) or a prefix and a length, not both"},
		{contract.Shape{Prefix: "x-jr2-held-", Length: 40}, `prefix: may hold neither "jr2-held-" nor "JR2HELD0", which begin the kit's own stand-ins`},
		{contract.Shape{Prefix: "a jr2held0", Length: 40}, "prefix: use letters, digits, '-', '_' and '.'"},
		{contract.Shape{Prefix: "pre", Length: 11}, "length 11 is outside 12–256: a shaped stand-in is the prefix, the 8 characters JR2HELD0 and at least one more; write the length of the keys it imitates"},
		{contract.Shape{Length: 40}, "prefix: write 1–32 characters, the prefix of the keys it imitates (or a kind: anthropic, openai, github, aws-access-key-id)"},
	} {
		if _, err := contract.StandInOf("KEY", &bad.sh); err == nil || err.Error() != bad.want {
			t.Errorf("%+v: %v\nwant %s", bad.sh, err, bad.want)
		}
	}
}

// TestShapedConfig: custodian.json's shape is checked where the stand-in
// is: the stand-in must be the one the shape spells, the token has none,
// and two secrets whose stand-ins are one are refused with
// the path and the fix.
func TestShapedConfig(t *testing.T) {
	gh := &contract.Shape{Kind: "github"}
	mk := func(ss ...filter.SecretConfig) error {
		vals := map[string][]byte{}
		for _, s := range ss {
			vals[s.Name] = []byte("v-SENTINEL-" + s.Name + "-8fQ2mWz6Lp0Tn4Vb")
		}
		_, err := filter.New(&filter.Config{Pod: "p", Secrets: ss}, vals)
		return err
	}
	sec := func(name string, sh *contract.Shape, si string) filter.SecretConfig {
		return filter.SecretConfig{Name: name, StandIn: si, Shape: sh, Targets: []string{strings.ToLower(name) + ".example.com:443"}, Headers: []string{"x-api-key"}}
	}
	if err := mk(sec("A", gh, standInOf(t, "A", gh))); err != nil {
		t.Fatal(err)
	}
	want := `engine config: secrets[0].standIn: want "` + standInOf(t, "A", gh) + `", the stand-in of A`
	if err := mk(sec("A", gh, contract.StandIn("A"))); err == nil || err.Error() != want {
		t.Errorf("plain stand-in under a shape: %v", err)
	}
	want = "engine config: secrets[0].standIn: want \"jr2-held-A\", the stand-in of A"
	if err := mk(sec("A", nil, standInOf(t, "A", gh))); err == nil || err.Error() != want {
		t.Errorf("shaped stand-in without a shape: %v", err)
	}
	tok := filter.SecretConfig{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Shape: gh, Headers: []string{"authorization"}}
	want = "engine config: secrets[0].shape: JR2_SANDBOX_TOKEN is the kit's own and read by no SDK; leave shape out"
	if err := mk(tok); err == nil || err.Error() != want {
		t.Errorf("shaped token: %v", err)
	}
	// A user's shape with one character of its own spells 62 stand-ins:
	// 63 names cannot all differ.
	short := &contract.Shape{Prefix: "k", Length: 10}
	var ss []filter.SecretConfig
	for i := 0; i < 63; i++ {
		n := "N" + strconv.Itoa(i)
		ss = append(ss, sec(n, short, standInOf(t, n, short)))
	}
	err := mk(ss...)
	if err == nil || !strings.Contains(err.Error(), "'s stand-in is secrets[") || !strings.HasSuffix(err.Error(), "; give one of them a longer length or another prefix") || !strings.HasPrefix(err.Error(), "engine config: secrets[") {
		t.Errorf("colliding shapes: %v", err)
	}
}

// TestShapedStandInPlaces runs the shared table of rule 10's places on an
// engine whose stand-ins are shaped, every kind, as TestStandInPlaces does
// on plain ones. A stand-in with '_' (github's) in a header name is rule
// 2's 400 toward a bound target, as a plain one would be.
func TestShapedStandInPlaces(t *testing.T) {
	for _, sh := range shapes() {
		e := shapeEngine(t, sh)
		si := standInOf(t, "KEY", sh)
		check := func(how string, c standintest.Case, d filter.Decision) {
			t.Helper()
			want := standintest.Body("KEY", c.Place)
			status, reason := standintest.Status, standintest.Reason
			if strings.Contains(c.Header.Name, "_") && !strings.HasPrefix(how, "DecideAllowed open") {
				status, reason = 400, filter.ReasonUnderscore
				want = "jr2 custodian: header " + c.Header.Name + ` has "_" in its name; header names here use "-"`
				if len(c.Header.Name) > 64 {
					want = `jr2 custodian: header (not a token) has "_" in its name; header names here use "-"`
				}
			}
			if d.Reply == nil || d.Reply.Status != status || d.Reply.Reason != reason || d.Reply.Body != want {
				t.Errorf("%+v: %s, %s: %+v, want %d %s %q", sh, how, c.Name, d.Reply, status, reason, want)
			}
		}
		for _, c := range standintest.Cases(si, "/v1/") {
			r := filter.Request{Method: "GET", Authority: "api.example.com", Path: c.Path, Headers: []filter.Header{{Name: "x-api-key", Value: si}}}
			if c.Header.Name != "" {
				r.Headers = append(r.Headers, c.Header)
			}
			check("DecideRequest", c, e.DecideRequest(boundT, &r))
			check("DecideAllowed, bound", c, e.DecideAllowed(boundT, true, &r, filter.Upgrade{}))
		}
		for _, c := range append(standintest.Cases(si, "/v1/"), standintest.Unbound(si, "/v1/")...) {
			r := filter.Request{Method: "GET", Authority: "open.example.com", Path: c.Path}
			if c.Header.Name != "" {
				r.Headers = append(r.Headers, c.Header)
			}
			check("DecideAllowed open", c, e.DecideAllowed(openT, true, &r, filter.Upgrade{}))
		}
	}
}

// TestShapedSameAsPlain: an engine whose stand-ins are shaped decides
// every request exactly as the engine whose stand-ins are plain decides
// the same request with the plain stand-ins in their places — the swap in
// each form toward a bound host, the refusals toward the other, a header
// removed, the Basic user, the control listener — so no rule reads the
// one kind differently from the other.
func TestShapedSameAsPlain(t *testing.T) {
	plain := shapeEngine(t, nil)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	type req struct {
		target, authority, path string
		kv                      []string // header pairs; KEY and GH stand for the stand-ins
	}
	reqs := []req{
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "KEY"}},
		{boundT, "api.example.com", "/v1/x", []string{"X-Api-Key", "Bearer KEY", "accept", "*/*"}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "token KEY"}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "Basic " + b64("u:KEY")}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "Basic " + b64("KEY:KEY")}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "GH"}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "KEY", "authorization", "Bearer GH"}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "KEY", "x-note", "GH"}},
		{boundT, "api.example.com", "/v1/x?k=GH", []string{"x-api-key", "KEY"}},
		{boundT, "api.example.com", "/admin", []string{"x-api-key", "KEY"}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "KEY", "x-api-key", "KEY"}},
		{boundT, "api.example.com", "/v1/x", []string{"x-api-key", "xKEY"}},
		{boundT, "api.example.com", "/v1/x", nil},
		{"git.example.com:443", "git.example.com", "/r.git/info/refs", []string{"authorization", "Basic " + b64("x-access-token:GH")}},
		{"git.example.com:443", "git.example.com", "/r.git", []string{"authorization", "Bearer KEY"}},
		{"git.example.com:443", "git.example.com", "/r.git", nil},
		{"git.example.com:443", "git.example.com", "/r.git", []string{"api-key", "GH", "cookie", "a=KEY"}},
		{"git.example.com:443", "git.example.com", "/GH", []string{"api-key", "GH"}},
	}
	for _, sh := range shapes() {
		shaped := shapeEngine(t, sh)
		keySh, ghSh := standInOf(t, "KEY", sh), standInOf(t, "GH", sh)
		spell := func(s string, key, gh string) string {
			return strings.NewReplacer("KEY", key, "GH", gh).Replace(s)
		}
		build := func(q req, key, gh string) *filter.Request {
			r := &filter.Request{Method: "GET", Authority: q.authority, Path: spell(q.path, key, gh)}
			for i := 0; i+1 < len(q.kv); i += 2 {
				v := q.kv[i+1]
				if strings.HasPrefix(v, "Basic ") {
					raw, _ := base64.StdEncoding.DecodeString(v[6:])
					v = "Basic " + b64(spell(string(raw), key, gh))
				} else {
					v = spell(v, key, gh)
				}
				r.Headers = append(r.Headers, filter.Header{Name: q.kv[i], Value: v})
			}
			return r
		}
		for _, q := range reqs {
			want := plain.DecideRequest(q.target, build(q, contract.StandIn("KEY"), contract.StandIn("GH")))
			got := shaped.DecideRequest(q.target, build(q, keySh, ghSh))
			got.Path = strings.NewReplacer(keySh, contract.StandIn("KEY"), ghSh, contract.StandIn("GH")).Replace(got.Path)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%+v: %s %s %v:\n got %+v\nwant %+v", sh, q.target, q.path, q.kv, got, want)
			}
			for _, open := range []string{openT, plainT} {
				want := plain.DecideAllowed(open, open == openT, build(q, contract.StandIn("KEY"), contract.StandIn("GH")), filter.Upgrade{})
				got := shaped.DecideAllowed(open, open == openT, build(q, keySh, ghSh), filter.Upgrade{})
				got.Path = strings.NewReplacer(keySh, contract.StandIn("KEY"), ghSh, contract.StandIn("GH")).Replace(got.Path)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%+v: toward %s %s %v:\n got %+v\nwant %+v", sh, open, q.path, q.kv, got, want)
				}
			}
		}
		// A CONNECT whose target holds a shaped stand-in logs as one
		// holding a plain one: "[stand-in]", never as written.
		label := strings.ToLower(strings.ReplaceAll(keySh, "_", "-"))
		label = label[:min(len(label), 60)]
		for _, a := range []string{label + ".example.com:443", "x." + label + ":443"} {
			if got := shaped.DecideConnect("CONNECT", a).LogFields(); len(got) < 4 || got[3] != "[stand-in]" {
				t.Errorf("%+v: CONNECT %s logs %v", sh, a, got)
			}
		}
	}
}
