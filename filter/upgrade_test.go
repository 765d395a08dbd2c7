package filter

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"jr2.dev/boundary/filter/wsframe"
)

var wsHeaders = hs("x-api-key", anthSI, "sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version", "13",
	"sec-websocket-extensions", "permessage-deflate; client_max_window_bits")

// Each upgrade refusal: status, exact body, reason.
func TestDecideUpgradeRefusals(t *testing.T) {
	e := testEngine(t)
	ws := []string{"websocket"}
	cases := []struct {
		name   string
		target string
		req    Request
		u      Upgrade
		status int
		body   string
		reason string
	}{
		{"h2c", anth, Request{"GET", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: []string{"h2c"}}, 400, "jr2 custodian: " + UpgradeText, ReasonUpgrade},
		{"TLS/1.0", anth, Request{"GET", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: []string{"TLS/1.0"}}, 400, "jr2 custodian: " + UpgradeText, ReasonUpgrade},
		{"websocket and h2c", anth, Request{"GET", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: []string{"websocket, h2c"}}, 400, "jr2 custodian: " + UpgradeText, ReasonUpgrade},
		{"two Upgrade headers", anth, Request{"GET", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: []string{"websocket", "websocket"}}, 400, "jr2 custodian: " + UpgradeText, ReasonUpgrade},
		{"POST", anth, Request{"POST", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: ws}, 400, "jr2 custodian: " + UpgradeText, ReasonUpgrade},
		{"with a body", anth, Request{"GET", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: ws, Body: true}, 400, "jr2 custodian: " + UpgradeText, ReasonUpgrade},
		{"unbound target", "ws.example:443", Request{"GET", "ws.example", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: ws}, 421, "jr2 custodian: ws.example:443 is not a bound target", ReasonTarget},
		{"rules 1-11: no stand-in", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("sec-websocket-key", "k"), ""}, Upgrade{Tokens: ws}, 403, "jr2 custodian: needs the stand-in of ANTHROPIC_API_KEY in x-api-key", ReasonNoStandIn},
		{"rules 1-11: stand-in in the subprotocol", anth, Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "sec-websocket-protocol", "key."+anthSI), ""}, Upgrade{Tokens: ws}, 403,
			"jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in header sec-websocket-protocol; a stand-in rides only a header its secret is bound to, and is never sent upstream", ReasonStandIn},
		{"rules 1-11: host", anth, Request{"GET", "evil.example", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: ws}, 421, "jr2 custodian: the Host header must name api.anthropic.com:443", ReasonHost},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := e.DecideUpgrade(c.target, &c.req, c.u)
			if d.Reply == nil {
				t.Fatalf("forwarded, want %d", c.status)
			}
			if d.Reply.Status != c.status || d.Reply.Body != c.body || d.Reply.Reason != c.reason || d.WebSocket {
				t.Fatalf("got %d %q %s", d.Reply.Status, d.Reply.Body, d.Reply.Reason)
			}
		})
	}
	d := e.DecideControlUpgrade()
	if d.Reply == nil || d.Reply.Status != 400 || d.Reply.Body != "jr2 custodian: "+ControlUpgradeText || d.Reply.Reason != ReasonUpgrade {
		t.Fatalf("control: %+v", d.Reply)
	}
}

// A websocket upgrade toward a bound target is swapped as any request, and
// goes without Sec-WebSocket-Extensions; without an upgrade DecideUpgrade
// is DecideRequest.
func TestDecideUpgradeForwards(t *testing.T) {
	e := testEngine(t)
	for _, tok := range []string{"websocket", "WebSocket", " websocket "} {
		d := e.DecideUpgrade(anth, &Request{"GET", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{Tokens: []string{tok}})
		if d.Reply != nil || !d.WebSocket {
			t.Fatalf("%q: %+v", tok, d.Reply)
		}
		if !slices.Contains(d.Remove, ExtensionsHeader) {
			t.Fatalf("Remove %v lacks %s", d.Remove, ExtensionsHeader)
		}
		if got := headerVal(d.Set, "x-api-key"); got != e.byName["ANTHROPIC_API_KEY"].valueStr {
			t.Fatalf("no swap: %v", d.Set)
		}
	}
	d := e.DecideUpgrade(anth, &Request{"GET", "api.anthropic.com", "/v1/x", wsHeaders, ""}, Upgrade{})
	if d.Reply != nil || d.WebSocket || slices.Contains(d.Remove, ExtensionsHeader) {
		t.Fatalf("no upgrade: %+v", d)
	}
}

func headerVal(hs []Header, name string) string {
	for _, h := range hs {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// A 101 is an answer: its headers scrubbed; one selecting an extension or
// another protocol is 502 with a fixed text.
func TestDecideSwitch(t *testing.T) {
	e := testEngine(t)
	val := e.byName["ANTHROPIC_API_KEY"].valueStr
	d := e.DecideSwitch(anth, hs("Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Accept", "x", "X-Echo", "k="+val))
	if d.Reply != nil || !d.WebSocket || len(d.Set) != 1 || d.Set[0].Name != "x-echo" || d.Set[0].Value != "k=[secret:ANTHROPIC_API_KEY]" {
		t.Fatalf("%+v", d)
	}
	for _, c := range []struct {
		name string
		hs   []Header
		body string
	}{
		{"permessage-deflate", hs("Upgrade", "websocket", "Sec-WebSocket-Extensions", "permessage-deflate"),
			"jr2 custodian: api.anthropic.com:443 answered the upgrade with a WebSocket extension, which the Custodian cannot read to scrub; the connection was closed"},
		{"h2c", hs("Upgrade", "h2c"), "jr2 custodian: api.anthropic.com:443 switched to a protocol other than websocket; the connection was closed"},
		{"no upgrade", hs("Connection", "Upgrade"), "jr2 custodian: api.anthropic.com:443 switched to a protocol other than websocket; the connection was closed"},
	} {
		d := e.DecideSwitch(anth, c.hs)
		if d.Reply == nil || d.Reply.Status != 502 || d.Reply.Body != c.body || d.Reply.Reason != ReasonUpgrade || d.WebSocket {
			t.Fatalf("%s: %+v", c.name, d.Reply)
		}
	}
}

// The engine's frame scrubber holds every value and the config's hold.
func TestNewFrames(t *testing.T) {
	e := testEngine(t)
	val := e.byName["ANTHROPIC_API_KEY"].valueStr
	in := append([]byte{0x81, byte(len(val) + 2)}, "k="+val...)
	out, err := e.NewFrames().Write(nil, in)
	if err != nil || bytes.Contains(out, []byte(val)) || !strings.Contains(string(out), "k=[secret:ANTHROPIC_API_KEY]") {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := e.NewFrames().Write(nil, []byte{0x81, 0x81, 1, 2, 3, 4, 5}); err != wsframe.ErrMalformed {
		t.Fatalf("a masked frame: %v", err)
	}
}

// FuzzDecideUpgrade: any upgrade the agent spells is either refused (no
// header change, no value in the reply or the line) or carried as
// websocket only for a GET asking for websocket alone with no body, the
// extension offer removed; DecideSwitch on any 101 headers either refuses
// 502 or carries websocket alone, no value in any header it sets.
func FuzzDecideUpgrade(f *testing.F) {
	f.Add("GET", "websocket", "", false, "sec-websocket-extensions", "permessage-deflate")
	f.Add("GET", "h2c", "TLS/1.0", false, "x-api-key", anthSI)
	f.Add("POST", "WebSocket", "", true, "upgrade", "websocket")
	f.Fuzz(func(t *testing.T, method, tok1, tok2 string, body bool, hn, hv string) {
		e := testEngineFuzz(t)
		var toks []string
		for _, tk := range []string{tok1, tok2} {
			if tk != "" {
				toks = append(toks, tk)
			}
		}
		r := &Request{Method: method, Authority: "api.anthropic.com", Path: "/v1/ws", Headers: []Header{{"x-api-key", anthSI}, {hn, hv}}}
		d := e.DecideUpgrade(anth, r, Upgrade{Tokens: toks, Body: body})
		for _, v := range sentinels {
			if strings.Contains(strings.Join(d.LogFields(101), " "), v) || d.Reply != nil && strings.Contains(d.Reply.Body, v) && !strings.Contains(method+hn+hv, v) {
				t.Fatal("a value in the line or the reply")
			}
		}
		if d.WebSocket {
			if d.Reply != nil || method != "GET" || body || len(toks) != 1 || !strings.EqualFold(strings.TrimSpace(toks[0]), "websocket") || !slices.Contains(d.Remove, ExtensionsHeader) {
				t.Fatalf("carried: %q %q body %v", method, toks, body)
			}
		}
		if len(toks) > 0 && d.Reply == nil && !d.WebSocket {
			t.Fatal("an upgrade forwarded as a plain request")
		}
		rd := e.DecideSwitch(anth, []Header{{"upgrade", tok1}, {hn, hv}, {"x-echo", e.byName["ANTHROPIC_API_KEY"].valueStr}})
		if rd.WebSocket == (rd.Reply != nil) {
			t.Fatal("a 101 both carried and refused, or neither")
		}
		for _, h := range rd.Set {
			for _, v := range sentinels {
				if strings.Contains(h.Value, v) {
					t.Fatal("a value in a 101's header")
				}
			}
		}
	})
}
