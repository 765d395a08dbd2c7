package serve

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartRefusesALooseConfig: custodian serve does not start on a
// custodian.json whose first key is repeated or spelled in another case
// (encoding/json alone would take the last repeat, or match "POD" to pod);
// the refusal names the key and the fix.
func TestStartRefusesALooseConfig(t *testing.T) {
	f := newFixture(t, nil)
	good, err := os.ReadFile(f.config)
	must(t, err)
	if !strings.HasPrefix(string(good), "{\n  \"pod\": ") {
		t.Fatalf("the fixture's custodian.json does not begin with pod: %.40s", good)
	}
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"repeated", `"pod": `, `"pod": "other", "pod": `,
			`custodian.json: pod: given twice; give it once; render it with controlplane render`},
		{"case", `"pod": `, `"POD": `,
			`custodian.json: POD: spelled "POD"; write "pod" (keys are matched exactly); render it with controlplane render`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Dir(f.config)
			path := filepath.Join(dir, "custodian-"+c.name+".json")
			must(t, os.WriteFile(path, []byte(strings.Replace(string(good), c.from, c.to, 1)), 0o644))
			if _, err := New(Options{ConfigPath: path, Log: io.Discard}); err == nil {
				t.Fatal("custodian serve started on it")
			} else if err.Error() != c.want {
				t.Errorf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}
