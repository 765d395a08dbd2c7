package render_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/manifesttest"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/internal/hostlimits"
)

// envoySize is the size of envoy.json for a held manifest, on data plane dp.
func envoySize(t *testing.T, held []byte, dp bootstrap.DataPlane) int {
	t.Helper()
	m, err := manifest.Parse(held)
	if err != nil {
		t.Fatal(err)
	}
	cfg := render.Config(m, render.DefaultValuesDir)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := bootstrap.Build(bootstrap.Input{Config: cfg, ConfigJSON: js, DataPlane: dp, Plugin: render.DefaultPlugin, Module: render.DefaultModule, MountDir: mountDir, AdminSocket: hostlimits.AdminSocketPath("0123456789ab")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bootstrap.Marshal(bs)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// oneTargetEach is a manifest of n secrets, each bound to a host of its
// own: as many secrets as targets.
func oneTargetEach(n int) []byte {
	s := `{"pod":"ws-bench","orchestrator":"jr2-orchestrator.jr2.svc:4000","secrets":[`
	for i := range n {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(`{"name":"SECRET_%03d","hosts":["svc-%03d.example.com"],"paths":["/v1/"]}`, i, i)
	}
	return []byte(s + "]}")
}

// TestEnvoySizeIsLinear: envoy.json grows with the targets, by the same
// bytes per target from 100 to 200 as from 200 to 400 (within 1 %), and
// not with the secrets bound to them: 400 targets held by 400 secrets are
// within 1 % of 400 targets held by 200. custodian.json is named by path,
// never copied per listener, and every target named by a DNS name shares
// one intercept listener (its leaf, its route), so no term is targets ×
// secrets. At most 600 KB at 400 targets (make bench's goal row; a
// ConfigMap's limit is 1 MiB), about 1.2 KiB per target now.
func TestEnvoySizeIsLinear(t *testing.T) {
	for _, dp := range []bootstrap.DataPlane{bootstrap.DataPlaneGolang, bootstrap.DataPlaneModule} {
		t.Run(string(dp), func(t *testing.T) {
			s0 := envoySize(t, manifesttest.Generate(0), dp)
			s100 := envoySize(t, manifesttest.Generate(100), dp)
			s200 := envoySize(t, manifesttest.Generate(200), dp)
			s400 := envoySize(t, manifesttest.Generate(400), dp)
			first, second := 2*(s200-s100), s400-s200
			t.Logf("envoy.json: %d bytes with no target, %d at 200, %d at 400 (%d per target)", s0, s200, s400, second/200)
			if d := first - second; d*100 > second || -d*100 > second {
				t.Errorf("100→200 targets added %d bytes (×2), 200→400 added %d: not linear", first, second)
			}
			if s400 > 600_000 {
				t.Errorf("%d bytes at 400 targets; at most 600 KB (%d per target)", s400, second/200)
			}
			s400x400 := envoySize(t, oneTargetEach(400), dp)
			if d := s400x400 - s400; d*100 > s400 || -d*100 > s400 {
				t.Errorf("400 targets: %d bytes held by 200 secrets, %d by 400: grows with the secrets", s400, s400x400)
			}
		})
	}
}
