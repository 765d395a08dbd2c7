package bootstrap

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// TestLeanBuildIsBuild: a lean build's envoy.json is Build's, byte for
// byte, whatever its targets — DNS names on several ports, a '_', a name
// as long as a host may be, a name holding a placeholder's, IPv4, IPv6
// and a mapped address — on both data planes; and only the plain DNS names'
// clusters are written from the template.
func TestLeanBuildIsBuild(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 57) + ".com"
	cases := []struct {
		targets []string
		lean    int // how many clusters the template writes
	}{
		{[]string{"api.example.com:443", "svc-001.example.com:8443", "a_b.example.com:443", long + ":443", "x.example:1", "y.example:65535"}, 6},
		{[]string{"10.0.0.7:8443", "[fd00::10]:443", "[::ffff:10.0.0.1]:443", "api.example.com:443"}, 1},
		{[]string{"jr2-upstream-a.invalid.example.com:443", "api.example.com:443"}, 1},
		{[]string{"10.0.0.7:8443"}, 0},
	}
	for _, c := range cases {
		for _, dp := range []DataPlane{DataPlaneModule, DataPlaneGolang} {
			cfg := &filter.Config{
				Pod: "ws-7f3a", Orchestrator: "jr2-orchestrator.jr2.svc:4000", ValuesDir: "/etc/jr2/custodian/values",
				Listeners: filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
				Secrets: []filter.SecretConfig{
					{Name: "KEY", StandIn: contract.StandIn("KEY"), Targets: c.targets, Headers: []string{"x-api-key"}},
					{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Targets: []string{}, Headers: []string{"authorization"}},
				},
			}
			js, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			in := Input{Config: cfg, ConfigJSON: js, DataPlane: dp, Plugin: "/opt/jr2/lib/custodian.so", Module: "/opt/jr2/lib/custodian-module.so", MountDir: "/etc/jr2/custodian", AdminSocket: "/tmp/jr2-custodian-admin-0123456789ab.sock"}
			bs, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Marshal(bs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := marshalBuild(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s, %v: the lean build's envoy.json differs from Build's (%d bytes, want %d)", dp, c.targets, len(got), len(want))
			}
			_, lo, err := build(in, true)
			if err != nil {
				t.Fatal(err)
			}
			if lo == nil || len(lo.at) != c.lean {
				t.Errorf("%s, %v: the template wrote %v clusters, want %d", dp, c.targets, lo, c.lean)
			}
		}
	}
}

// TestUpstreamTemplateCheck: a cluster that spells its target in a form
// the template does not fill (here the leaf's file name) is caught by the
// second placeholder's build, so the build is not lean.
func TestUpstreamTemplateCheck(t *testing.T) {
	a, b := upstreamPlaceholders[0], upstreamPlaceholders[1]
	of := func(p upstreamFill) []byte {
		return []byte(`{"name":"upstream|` + p.target + `","address":"` + p.host + `","port_value":` + p.port + `,"leaf":"` + contract.LeafBase(p.target) + `"}`)
	}
	if got := parseUpstream(of(a), a).fill(b); bytes.Equal(got, of(b)) {
		t.Errorf("a target's other spelling was filled as the template's: %s", got)
	}
	plain := func(p upstreamFill) []byte {
		return []byte(`{"name":"upstream|` + p.target + `","address":"` + p.host + `","port_value":` + p.port + `,"sni":"` + p.host + `"}`)
	}
	if got := parseUpstream(plain(a), a).fill(b); !bytes.Equal(got, plain(b)) {
		t.Errorf("fill: %s, want %s", got, plain(b))
	}
}
