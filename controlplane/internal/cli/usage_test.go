package cli_test

import (
	"strings"
	"testing"

	"jr2.dev/boundary/controlplane/internal/cli"
	"jr2.dev/boundary/internal/testkit/usagetest"
)

// TestUsageListsEveryFlag: each command's section of Usage names exactly
// the flags the command defines (a flag the README named was missing from
// --help).
func TestUsageListsEveryFlag(t *testing.T) {
	sets := cli.FlagSets()
	for _, tc := range []struct{ command, next string }{
		{"controlplane ca init", "controlplane help"},
		{"controlplane render", "controlplane effector"},
		{"controlplane effector", "controlplane key"},
		{"controlplane key", ""},
	} {
		fs := sets[strings.TrimPrefix(tc.command, "controlplane ")]
		if fs == nil {
			t.Fatalf("no flag set for %s", tc.command)
		}
		usagetest.Check(t, tc.command, usagetest.Section(t, cli.Usage, tc.command, tc.next), usagetest.Defined(fs))
	}
}

// TestHelp: help, -h and --help, alone or after a command, print Usage on
// stdout and exit 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"render", "--help"}, {"ca", "init", "-h"}, {"ca", "--help"}, {"ca", "-h"}, {"key", "--help"}} {
		code, out, errOut := run(args...)
		if code != cli.ExitOK || out != cli.Usage || errOut != "" {
			t.Errorf("%q: exit %d, stdout %d bytes, stderr %q; want 0 and the usage", args, code, len(out), errOut)
		}
	}
}
