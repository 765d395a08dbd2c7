package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpecCheck covers the refusals made before anything starts; it needs
// no privilege.
func TestSpecCheck(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "out", "run.jsonl")
	os.MkdirAll(filepath.Dir(bundle), 0o755)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "out"), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec Spec
		want string // "" accepted
	}{
		{Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{"/usr"}, Hidden: []string{bundle}}, ""},
		{Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{dir + "/o"}, Hidden: []string{bundle}}, ""},
		{Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{dir}, Hidden: []string{bundle}}, "read path"},
		{Spec{Argv: []string{"/bin/true"}, WritePaths: []string{dir + "/out/"}, Hidden: []string{bundle}}, "write path"},
		{Spec{Argv: []string{"/bin/true"}, WritePaths: []string{link}, Hidden: []string{bundle}}, "write path"},
		{Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{"/"}, Hidden: []string{bundle}}, "read path \"/\""},
		{Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{bundle}, Hidden: []string{bundle}}, "read path"},
		{Spec{Argv: []string{"/bin/true"}, ReadPaths: []string{"usr"}}, "not absolute"},
		{Spec{Argv: []string{"/bin/true"}, Dir: "tmp"}, "not absolute"},
		{Spec{Argv: []string{""}}, "no command"},
		{Spec{}, "no command"},
	} {
		err := tc.spec.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.spec, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v; want %q", tc.spec, err, tc.want)
		}
	}
}

func TestStepsAreDistinct(t *testing.T) {
	codes := map[int]string{}
	for _, s := range Steps {
		if prev, dup := codes[s.Code]; dup {
			t.Errorf("steps %s and %s share exit code %d", prev, s.Name, s.Code)
		}
		codes[s.Code] = s.Name
	}
	if stepCode("landlock") != 114 || stepCode("unknown") != 110 {
		t.Error("stepCode")
	}
}
