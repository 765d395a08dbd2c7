package streamtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMENamesWhereEachCaseRan: envoy/README.md's table names one row
// per conformance case, in the suite's order; both adapters' fakes ran
// each (their tests call Run, Rotation and OAuth, found in their sources here),
// and no row says the golang filter ran in Envoy, so nobody reads "proven
// in Envoy" for a filter only fakes ran.
func TestREADMENamesWhereEachCaseRan(t *testing.T) {
	const heading = "## Which adapters ran each conformance case"
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "envoy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), heading+"\n")
	if !ok {
		t.Fatalf("envoy/README.md has no %q section", heading)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("^\\| `([^`]+)` \\|(.*)\\|$")
	var names []string
	for _, line := range strings.Split(sec, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		names = append(names, m[1])
		cells := strings.Split(m[2], "|")
		if len(cells) != 4 {
			t.Errorf("row %q: %d cells after the case, want 4", m[1], len(cells))
			continue
		}
		for i, adapter := range []string{"filter/module", "filter/envoyfilter"} {
			if !strings.HasPrefix(strings.TrimSpace(cells[i]), "yes") {
				t.Errorf("row %q: %s over its fakes says %q; every case runs on both", m[1], adapter, cells[i])
			}
		}
		if strings.TrimSpace(cells[3]) != "no" {
			t.Errorf("row %q: the golang filter in Envoy says %q; no contrib Envoy ever ran it", m[1], cells[3])
		}
	}
	if strings.Join(names, ",") != strings.Join(Groups(), ",") {
		t.Errorf("the table's cases are %q; the suite's are %q", names, Groups())
	}
	for _, dir := range []string{"module", "envoyfilter"} {
		srcs, _ := filepath.Glob(filepath.Join("..", "..", dir, "*_test.go"))
		var all strings.Builder
		for _, f := range srcs {
			b, _ := os.ReadFile(f)
			all.Write(b)
		}
		for _, call := range []string{"streamtest.Run(t, ", "streamtest.Rotation(t, ", "streamtest.OAuth(t, "} {
			if !strings.Contains(all.String(), call) {
				t.Errorf("filter/%s's tests do not call %s…): the table's yes is not so", dir, call)
			}
		}
	}
}
