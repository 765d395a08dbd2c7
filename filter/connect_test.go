package filter

import (
	"net/netip"
	"strings"
	"testing"
)

func TestDecideConnect(t *testing.T) {
	e := testEngine(t)
	cases := []struct {
		method, authority string
		intercept         bool
		target            string
		status            int
		body              string
		log               string
	}{
		{"CONNECT", "api.anthropic.com:443", true, "api.anthropic.com:443", 0, "", ""},
		{"CONNECT", "API.Anthropic.COM.:443", true, "api.anthropic.com:443", 0, "", ""},
		{"CONNECT", "[2001:DB8::1]:8443", true, "[2001:db8::1]:8443", 0, "", ""},
		{"CONNECT", "api.anthropic.com:8443", false, "api.anthropic.com:8443", 0, "", "action tunnel target api.anthropic.com:8443"},
		{"CONNECT", "example.com:443", false, "example.com:443", 0, "", "action tunnel target example.com:443"},
		{"CONNECT", "1.1.1.1:443", false, "1.1.1.1:443", 0, "", "action tunnel target 1.1.1.1:443"},
		{"CONNECT", "127.1:443", false, "127.1:443", 403, "jr2 custodian: 127.1:443 is guarded (loopback); a tunnel never reaches it", "action refuse target 127.1:443 reason guard"},
		{"CONNECT", "0x7f.0.0.1:22", false, "0x7f.0.0.1:22", 403, "jr2 custodian: 0x7f.0.0.1:22 is guarded (loopback); a tunnel never reaches it", "action refuse target 0x7f.0.0.1:22 reason guard"},
		{"CONNECT", "[::ffff:169.254.169.254]:80", false, "[::ffff:169.254.169.254]:80", 403,
			"jr2 custodian: [::ffff:169.254.169.254]:80 is guarded (IPv4-mapped form of link-local (the cloud metadata address 169.254.169.254 included)); a tunnel never reaches it", "action refuse target [::ffff:169.254.169.254]:80 reason guard"},
		{"CONNECT", "metadata.localhost:80", false, "metadata.localhost:80", 403, "jr2 custodian: metadata.localhost:80 is guarded (a localhost name); a tunnel never reaches it", "action refuse target metadata.localhost:80 reason guard"},
		{"CONNECT", "example.com", false, "-", 400, "jr2 custodian: a CONNECT target is host:port: want host:port", "action refuse target - reason target"},
		{"CONNECT", "a b:443", false, "-", 400, "jr2 custodian: a CONNECT target is host:port: not a host name or an IP address", "action refuse target - reason target"},
		{"GET", "http://example.com/", false, "-", 405, "jr2 custodian: this listener takes CONNECT only; use it as HTTPS_PROXY", "action refuse target - reason not-connect"},
		{"CONNECT", "jr2-held-paths.evil.example:443", false, "jr2-held-paths.evil.example:443", 0, "", "action tunnel target [stand-in]"},
		// Envoy's codec refuses '_' in a CONNECT target before any
		// filter; the engine refuses it the same way, so every host does
		{"CONNECT", "jr2-held-rt_key_a.example:443", false, "-", 400, "jr2 custodian: a CONNECT target is host:port: not a host name or an IP address", "action refuse target - reason target"},
		{"CONNECT", "a_b.example:443", false, "-", 400, "jr2 custodian: a CONNECT target is host:port: not a host name or an IP address", "action refuse target - reason target"},
	}
	for _, c := range cases {
		t.Run(c.authority, func(t *testing.T) {
			d := e.DecideConnect(c.method, c.authority)
			if d.Intercept != c.intercept || d.Target != c.target {
				t.Fatalf("intercept %v target %s, want %v %s", d.Intercept, d.Target, c.intercept, c.target)
			}
			if c.status != 0 {
				if d.Reply == nil || d.Reply.Status != c.status || d.Reply.Body != c.body {
					t.Fatalf("reply %+v, want %d %q", d.Reply, c.status, c.body)
				}
			} else if d.Reply != nil {
				t.Fatalf("reply %+v", d.Reply)
			}
			if got := strings.Join(d.LogFields(), " "); got != c.log {
				t.Fatalf("log %q, want %q", got, c.log)
			}
		})
	}
}

func TestAllowDial(t *testing.T) {
	e := testEngine(t)
	if r := e.AllowDial("rebind.example:443", netip.MustParseAddr("127.0.0.1")); r == nil || r.Status != 403 || r.Reason != ReasonGuard ||
		r.Body != "jr2 custodian: rebind.example:443 is guarded (loopback); a tunnel never reaches it" {
		t.Fatalf("loopback dial allowed or misworded: %+v", r)
	}
	if r := e.AllowDial("meta.example:80", netip.MustParseAddr("::ffff:169.254.169.254")); r == nil {
		t.Fatal("mapped metadata address allowed")
	}
	if r := e.AllowDial("example.com:443", netip.MustParseAddr("93.184.216.34")); r != nil {
		t.Fatalf("public address refused: %+v", r)
	}
}
