package run

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/mode"
)

// TestFaultsUsageMatchesTheReadme: every --faults SPEC the README passes
// is one of the examples `custodian run --help` shows, and every example
// there parses (the usage once showed a syntax the README did not use).
func TestFaultsUsageMatchesTheReadme(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`--faults ('[^']+'|\S+)`).FindAllStringSubmatch(string(readme), -1)
	if len(used) == 0 {
		t.Fatal("the README passes no --faults SPEC")
	}
	_, help, ok := strings.Cut(Usage, "--faults SPEC   ")
	if !ok {
		t.Fatal("the usage does not describe --faults SPEC")
	}
	help, _, _ = strings.Cut(help, "\n\n")
	for _, u := range used {
		if !strings.Contains(help, u[1]) {
			t.Errorf("the README's --faults %s is not among the usage's examples:\n%s", u[1], help)
		}
	}
	_, examples, ok := strings.Cut(help, "e.g.")
	if !ok {
		t.Fatal("the usage's --faults gives no example")
	}
	for _, ex := range strings.Split(examples, " or ") {
		spec := strings.Trim(strings.TrimSpace(ex), "'")
		if _, err := mode.New(mode.Config{Mode: mode.Faults, Seed: 1, Faults: spec}, modeNames, nil); err != nil {
			t.Errorf("the usage's example %q does not parse: %v", spec, err)
		}
	}
}
