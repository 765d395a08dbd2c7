package envoyfilter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream/streamtest"
	"jr2.dev/boundary/internal/contract"
)

// Sentinel values: a test fails if one appears where no value may.
const (
	anthropicValue = "sk-ant-SENTINEL-anthropic-0123456789"
	githubValue    = "ghp_SENTINEL_github_abcdefghijklmn"
	tokenValue     = "tok-SENTINEL-sandbox-token-98765"
	// hexValue is all lowercase, so that a host name can spell it.
	hexValue = "deadbeefcafe0123456789sentinel"
)

var sentinels = []string{anthropicValue, githubValue, tokenValue, hexValue}

const (
	anthropic    = "api.anthropic.com:443"
	github       = "github.com:443"
	orchestrator = "jr2-orchestrator.jr2.svc:4000"
)

// testConfig is the engine config of the tests' pod: its valuesDir is
// filled in by writeConfig.
func testConfig() filter.Config {
	return filter.Config{
		Pod:          "ws-7f3a",
		Sandbox:      "ws-7f3a",
		Orchestrator: orchestrator,
		Listeners:    filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
		Secrets: []filter.SecretConfig{
			{Name: "ANTHROPIC_API_KEY", StandIn: contract.StandIn("ANTHROPIC_API_KEY"), Targets: []string{anthropic}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: "GITHUB_TOKEN", StandIn: contract.StandIn("GITHUB_TOKEN"), Targets: []string{"api.github.com:443", github}, Headers: contract.DefaultHeaders},
			{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Headers: []string{"authorization"}},
		},
	}
}

// writeConfig writes the values of c's secrets into a fresh directory,
// points c at it, writes c as custodian.json into another, and returns the
// filter-level plugin config that names that file.
func writeConfig(t testing.TB, c filter.Config) []byte {
	t.Helper()
	dir := t.TempDir()
	values := map[string]string{"ANTHROPIC_API_KEY": anthropicValue, "GITHUB_TOKEN": githubValue, contract.TokenName: tokenValue, "HEX_TOKEN": hexValue}
	for _, s := range c.Secrets {
		if err := os.WriteFile(filepath.Join(dir, s.Name), []byte(values[s.Name]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.ValuesDir = dir
	return writeEngine(t, c)
}

// writeEngine writes c, as it is, as custodian.json into a fresh directory
// and returns the filter-level plugin config that names it.
func writeEngine(t testing.TB, c filter.Config) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	streamtest.Prepare(t, c, dir)
	return engineFile(t, dir, b)
}

// engineFile writes b as dir/custodian.json and returns the filter-level
// plugin config that names it.
func engineFile(t testing.TB, dir string, b []byte) []byte {
	t.Helper()
	path := filepath.Join(dir, "custodian.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return pluginconf.FilterConfig{EngineConfig: path}.Marshal()
}

// engineConfig is the custodian.json a filter-level plugin config names,
// parsed.
func engineConfig(t testing.TB, b []byte) *filter.Config {
	t.Helper()
	fc, err := pluginconf.ParseFilter(b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := filter.LoadConfig(fc.EngineConfig)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stringAny packs b as the golang filter's plugin config.
func stringAny(t testing.TB, b []byte) *anypb.Any {
	t.Helper()
	a, err := anypb.New(wrapperspb.String(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pod is a parsed filter-level config and the parser that built it.
type pod struct {
	p   *Parser
	top interface{}
}

func newPod(t testing.TB, c filter.Config) *pod {
	t.Helper()
	p := NewParser()
	top, err := p.Parse(stringAny(t, writeConfig(t, c)), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs.take()
	return &pod{p: p, top: top}
}

// route returns the stream config of a route with role (and target), as
// Envoy builds it: Parse of the per-route config, then Merge.
func (p *pod) route(t testing.TB, role pluginconf.Role, target string) interface{} {
	t.Helper()
	child, err := p.p.Parse(stringAny(t, pluginconf.RouteConfig{Role: role, Target: target}.Marshal()), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.p.Merge(p.top, child)
}

// noSentinel fails when a held value is in s.
func noSentinel(t testing.TB, where, s string) {
	t.Helper()
	for _, v := range sentinels {
		if strings.Contains(s, v) {
			t.Errorf("%s holds a held value: %q", where, s)
		}
	}
}

// noStandIn fails when the stand-in of a held secret is in s.
func noStandIn(t testing.TB, where, s string) {
	t.Helper()
	for _, name := range []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN", contract.TokenName, "HEX_TOKEN"} {
		if strings.Contains(s, contract.StandIn(name)) {
			t.Errorf("%s holds a stand-in: %q", where, s)
		}
	}
}
