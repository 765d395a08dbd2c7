package main

import (
	"bytes"
	"strings"
	"testing"

	"jr2.dev/boundary/custodian/internal/envoyrun"
	"jr2.dev/boundary/custodian/internal/run"
	"jr2.dev/boundary/custodian/internal/serve"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/testkit/usagetest"
)

// TestUsageListsEveryFlag: each line of custodian's usage, and each
// subcommand's own usage, names exactly the flags the subcommand parses
// (a flag the README named was once missing from --help).
func TestUsageListsEveryFlag(t *testing.T) {
	serveFlags, _ := serve.Flags()
	runFlags, _ := run.Flags()
	for _, tc := range []struct {
		command, own string
		flags        []string
	}{
		// serve's usage ends with render's flags for one machine.
		{"custodian serve", usagetest.Section(t, serve.Usage, "usage:", "\nOn one machine"), usagetest.Defined(serveFlags)},
		// envoy's usage goes on with Envoy's own arguments, not its flags.
		{"custodian envoy", usagetest.Section(t, envoyrun.Usage, "usage:", "\nRuns Envoy"), usagetest.Defined(envoyrun.Flags())},
		{"custodian run", run.Usage, usagetest.Defined(runFlags)},
		{"custodian verify", bundle.VerifyUsage, bundle.VerifyFlags},
		{"custodian inspect", bundle.InspectUsage, bundle.InspectFlags},
	} {
		line := usagetest.Section(t, usage, "\n  "+tc.command+" ", "\n")
		usagetest.Check(t, tc.command+" (custodian's usage)", line, tc.flags)
		usagetest.Check(t, tc.command+" --help", tc.own, tc.flags)
	}
}

// TestHelp: help and --help print the usage on stdout and exit 0, for
// custodian and for each subcommand; no command is a usage error.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // stdout for 0, else in stderr
	}{
		{[]string{"help"}, 0, usage},
		{[]string{"--help"}, 0, usage},
		{[]string{"serve", "--help"}, 0, serve.Usage},
		{[]string{"run", "-h"}, 0, run.Usage},
		{[]string{"envoy", "--help"}, 0, envoyrun.Usage},
		{[]string{"envoy"}, 2, "custodian envoy: no Envoy command: write it after --, such as -- envoy -c DIR/envoy.json\n" + envoyrun.Usage},
		{[]string{"envoy", "--", "envoy", "--version"}, 2, "custodian envoy: Envoy is given no config: add -c DIR/envoy.json"},
		{[]string{"envoy", "--", "envoy", "-c", "/nonexistent/envoy.json"}, 1, "custodian envoy: open /nonexistent/envoy.json: no such file or directory; give Envoy the envoy.json controlplane render wrote"},
		{[]string{"verify", "--help"}, 0, bundle.VerifyUsage},
		{[]string{"inspect", "--help"}, 0, bundle.InspectUsage},
		{nil, 2, usage},
		{[]string{"sevre"}, 2, `custodian: unknown command "sevre"`},
		{[]string{"serve", "--cofig", "x"}, 2, "flag provided but not defined: -cofig"},
		// A usage error says what is missing, not only the usage.
		{[]string{"serve"}, 2, "custodian serve: --config is required: the custodian.json of a directory controlplane render wrote (render --out DIR writes DIR/custodian.json)\n" + serve.Usage},
		{[]string{"serve", "--config", "x", "extra"}, 2, `custodian serve: unexpected argument "extra"; every input is a flag`},
		{[]string{"run", "--bundle", "b", "--", "true"}, 2, "custodian run: --policy is required: the policy file (TOML), such as examples/policy.toml\n" + run.Usage},
		{[]string{"run", "--policy", "p", "--", "true"}, 2, "custodian run: --bundle is required: the bundle to write, a file that does not exist yet\n"},
		{[]string{"run", "--policy", "p", "--bundle", "b"}, 2, "custodian run: no command: write it after --, such as -- sh -c 'curl https://example.com/'\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch(tc.args, &stdout, &stderr)
		if code != tc.code || code == 0 && stdout.String() != tc.want || code != 0 && !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.want)
		}
	}
}
