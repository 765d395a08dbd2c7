package filter

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// Sentinel values: a test fails if one of them appears where no value may.
const (
	anthropicValue = "sk-ant-SENTINEL-value-0123456789"
	githubValue    = "ghp_SENTINEL_github_abcdefghijkl"
	tokenValue     = "tok-SENTINEL-sandbox-token-xyz"
	pathsValue     = "pth-SENTINEL-paths-restricted"
)

var sentinels = []string{anthropicValue, githubValue, tokenValue, pathsValue}

func testConfig() *Config {
	return &Config{
		Pod:          "ws-7f3a",
		Sandbox:      "ws-7f3a",
		Orchestrator: "jr2-orchestrator.jr2.svc:4000",
		ValuesDir:    "/nonexistent",
		Listeners:    Listeners{Control: DefaultControl, Egress: DefaultEgress, Health: DefaultHealth},
		Secrets: []SecretConfig{
			{Name: "ANTHROPIC_API_KEY", StandIn: contract.StandIn("ANTHROPIC_API_KEY"), Targets: []string{"api.anthropic.com:443"}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: "GITHUB_TOKEN", StandIn: contract.StandIn("GITHUB_TOKEN"), Targets: []string{"api.github.com:443", "github.com:443"}, Headers: contract.DefaultHeaders},
			{Name: "PATHS", StandIn: contract.StandIn("PATHS"), Targets: []string{"[2001:db8::1]:8443"}, Headers: []string{"authorization"}, Paths: []string{"/a", "/b/"}},
			{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Headers: []string{"authorization"}},
		},
	}
}

func testValues() map[string][]byte {
	return map[string][]byte{
		"ANTHROPIC_API_KEY": []byte(anthropicValue),
		"GITHUB_TOKEN":      []byte(githubValue),
		"PATHS":             []byte(pathsValue),
		contract.TokenName:  []byte(tokenValue),
	}
}

func testEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := New(testConfig(), testValues())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// noSentinel fails when any sentinel value is in s.
func noSentinel(t *testing.T, where, s string) {
	t.Helper()
	for _, v := range sentinels {
		if strings.Contains(s, v) {
			t.Fatalf("%s holds a held value: %q", where, s)
		}
	}
}

func TestParseConfigRefusals(t *testing.T) {
	files, err := filepath.Glob("testdata/config/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/config cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".want")
			if err != nil {
				t.Fatal(err)
			}
			_, perr := ParseConfig(b)
			if strings.HasPrefix(name, "ok-") {
				if perr != nil {
					t.Fatalf("refused a good config: %v", perr)
				}
				return
			}
			if perr == nil {
				t.Fatal("accepted a broken config")
			}
			if got := perr.Error(); got != strings.TrimSpace(string(want)) {
				t.Fatalf("error\n got: %s\nwant: %s", got, strings.TrimSpace(string(want)))
			}
		})
	}
}

func TestLoadValues(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  string // "" = ok
	}{
		{"ok with newline", map[string]string{"A": strongValue + "\n"}, ""},
		{"ok with crlf", map[string]string{"A": strongValue + "\r\n"}, ""},
		{"missing", map[string]string{}, "held secret A: no value file A in the value directory; mount the secret's value there"},
		{"empty", map[string]string{"A": "\n"}, "held secret A: the value is empty; write the credential into its file"},
		{"short", map[string]string{"A": "abc"}, "held secret A: the value is shorter than 8 bytes; a value that short would be scrubbed from ordinary text"},
		{"control byte", map[string]string{"A": "abcdefgh\tij"}, "held secret A: byte 8 of the value is outside 0x20-0x7E; a header value must be printable ASCII"},
		{"two newlines", map[string]string{"A": "abcdefghij\n\n"}, "held secret A: byte 10 of the value is outside 0x20-0x7E; a header value must be printable ASCII"},
		{"non-ascii", map[string]string{"A": "abcdefghé"}, "held secret A: byte 8 of the value is outside 0x20-0x7E; a header value must be printable ASCII"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, v := range c.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := &Config{ValuesDir: dir, Secrets: []SecretConfig{{Name: "A"}}}
			vals, err := LoadValues(cfg)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if string(vals["A"]) != strongValue {
					t.Fatalf("value = %q", vals["A"])
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("err = %v, want %s", err, c.want)
			}
			for _, v := range c.files {
				if len(strings.TrimSpace(v)) > 0 && strings.Contains(err.Error(), strings.TrimSpace(v)) {
					t.Fatalf("error holds the value: %v", err)
				}
			}
		})
	}
}

func TestLoadConfigRelativeValuesDir(t *testing.T) {
	dir := t.TempDir()
	c := testConfig()
	c.ValuesDir = "values"
	b := mustJSON(t, c)
	p := filepath.Join(dir, "custodian.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.ValuesDir != filepath.Join(dir, "values") {
		t.Fatalf("valuesDir = %s", got.ValuesDir)
	}
}

func TestNewNeedsEveryValue(t *testing.T) {
	v := testValues()
	delete(v, "GITHUB_TOKEN")
	if _, err := New(testConfig(), v); err == nil || err.Error() != "held secret GITHUB_TOKEN: no value was loaded" {
		t.Fatalf("err = %v", err)
	}
}

func TestReadyFields(t *testing.T) {
	got := strings.Join(testEngine(t).ReadyFields(), " ")
	if got != "secrets ANTHROPIC_API_KEY,GITHUB_TOKEN,PATHS,JR2_SANDBOX_TOKEN hosts 4" {
		t.Fatalf("ready = %s", got)
	}
}

func TestCredentialHeaders(t *testing.T) {
	got := strings.Join(testEngine(t).CredentialHeaders(), ",")
	if got != "api-key,authorization,proxy-authorization,x-api-key,x-goog-api-key" {
		t.Fatalf("credential headers = %s", got)
	}
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
