package filter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// strongValue is a value the guess floor lets through: random-looking
// letters and digits, well past 2^64 candidates.
const strongValue = "Qm7rT2vK9xLp4WzN8cYh3JdF"

// Weak values: each passes the length and printable checks and is refused
// by the guess floor, both where the Custodian reads the value directory
// (LoadValues) and where an engine is built from values read another way
// (New: the contained run's broker). The refusal names the secret and says
// why and what to do; it holds no byte of the value.
var weakValues = []struct{ name, value string }{
	{"8-digit number (the issue's oracle)", "48213976"},
	{"a run of digits", "0123456789"},
	{"one character repeated", strings.Repeat("z", 64)},
	{"a short word repeated", strings.Repeat("pass1", 12)},
	{"12 hex", "9f3ac2e8b1d4"},
	{"short mixed", "s3cr3t-pw"},
}

const weakWant = "the value is too easy to guess"

func TestLoadValuesRefusesWeakValues(t *testing.T) {
	for _, c := range weakValues {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "WEAK_KEY"), []byte(c.value+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadValues(&Config{ValuesDir: dir, Secrets: []SecretConfig{{Name: "WEAK_KEY"}}})
			checkWeakRefusal(t, err, c.value)
		})
	}
}

func TestNewRefusesWeakValues(t *testing.T) {
	for _, c := range weakValues {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Secrets[1].Name, cfg.Secrets[1].StandIn = "WEAK_KEY", contract.StandIn("WEAK_KEY")
			v := testValues()
			delete(v, "GITHUB_TOKEN")
			v["WEAK_KEY"] = []byte(c.value)
			_, err := New(cfg, v)
			checkWeakRefusal(t, err, c.value)
		})
	}
}

func checkWeakRefusal(t *testing.T, err error, value string) {
	t.Helper()
	if err == nil {
		t.Fatal("a weak value was accepted")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "held secret WEAK_KEY: "+weakWant) || !strings.Contains(msg, "generated credential") {
		t.Fatalf("err = %q, want the secret's name, %q and the fix", msg, weakWant)
	}
	if strings.Contains(msg, value) {
		t.Fatalf("the refusal holds the value: %q", msg)
	}
	noSentinel(t, "the refusal", msg)
}

// The fixtures' values all clear the floor: a test that builds the engine
// from them tests the engine, not the floor.
func TestFixtureValuesClearTheFloor(t *testing.T) {
	if _, err := New(testConfig(), testValues()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "A"), []byte(strongValue), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadValues(&Config{ValuesDir: dir, Secrets: []SecretConfig{{Name: "A"}}}); err != nil {
		t.Fatal(err)
	}
}
