//go:build linux

package confine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/internal/landlock"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// A top-level entry the walk listed can vanish before its rule is added
// (another process's scratch directory, removed in between): the run goes
// on without it. A path the command named cannot: it refuses.
func TestAddRulesVanishedEntry(t *testing.T) {
	landlocktest.Require(t, 1)
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone")
	here := filepath.Join(dir, "here")
	if err := os.Mkdir(here, 0o755); err != nil {
		t.Fatal(err)
	}
	abi, err := landlock.Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		why     string
		wantErr bool
	}{
		{"system", false},
		{"scratch", true},
		{"secret", true},
		{"tree", true},
		{"device", true},
	} {
		rs, err := landlock.NewRuleset(abi, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = addRules(rs, []Rule{{here, landlock.ReadExec, "system"}, {gone, landlock.ReadExec, tc.why}})
		rs.Close()
		if tc.wantErr != (err != nil) {
			t.Errorf("%s rule on a vanished path: err = %v, want error %v", tc.why, err, tc.wantErr)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			t.Errorf("%s: err = %v, want ENOENT", tc.why, err)
		}
	}
	// Any other failure of a system rule still refuses.
	rs, err := landlock.NewRuleset(abi, 0)
	if err != nil {
		t.Fatal(err)
	}
	rs.Close()
	if err := addRules(rs, []Rule{{here, landlock.ReadExec, "system"}}); err == nil {
		t.Error("a closed ruleset accepted a system rule")
	}
}
