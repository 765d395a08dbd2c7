package envoyfilter

import (
	"os"
	"path/filepath"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// TestSentinel: a broken value makes the config fail with an error that
// quotes none of it. Every stream's sentinels are the shared suite's
// (TestConformance/sentinels, and noValue in every case).
func TestSentinel(t *testing.T) {
	t.Run("config errors", func(t *testing.T) {
		dir := t.TempDir()
		for name, v := range map[string]string{
			"ANTHROPIC_API_KEY": anthropicValue + "\x7f",
			"GITHUB_TOKEN":      githubValue + "\n\n",
			"HEX_TOKEN":         hexValue + "\x00" + hexValue,
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "HEX_TOKEN"} {
			one := testConfig()
			one.Secrets = []filter.SecretConfig{{Name: name, StandIn: contract.StandIn(name), Targets: []string{"a.example:443"}, Headers: []string{"x-k"}}}
			one.ValuesDir = dir
			b := writeEngine(t, one)
			_, err := NewParser().Parse(stringAny(t, b), nil)
			if err == nil {
				t.Fatalf("%s: a broken value was accepted", name)
			}
			noSentinel(t, "a config error", err.Error())
		}
		for _, l := range logs.take() {
			noSentinel(t, "a log line", l)
		}
	})
}
