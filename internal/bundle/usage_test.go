package bundle

import (
	"bytes"
	"testing"

	"jr2.dev/boundary/internal/testkit/usagetest"
)

// TestUsageListsEveryFlag: verify's usage names exactly VerifyFlags and
// inspect's names exactly InspectFlags, each of which InspectMain accepts
// while it refuses one it does not know; --help prints each usage on
// stdout.
func TestUsageListsEveryFlag(t *testing.T) {
	usagetest.Check(t, "custodian verify", VerifyUsage, VerifyFlags)
	usagetest.Check(t, "custodian inspect", InspectUsage, InspectFlags)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"--json"}, 2, ""}, // a known flag, no bundle: the usage error, not an unknown flag
		{[]string{"--bogus", "x.jsonl"}, 2, ""},
		{[]string{"--help"}, 0, InspectUsage},
		{[]string{"-h"}, 0, InspectUsage},
	} {
		var stdout, stderr bytes.Buffer
		code := InspectMain(tc.args, &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || (code != 0) != (stderr.String() == InspectUsage) {
			t.Errorf("inspect %q: exit %d, stdout %q, stderr %q; want %d, %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout)
		}
	}
}
