// Command custodian is the Custodian's Go host and the contained local run:
//
//	custodian serve --config DIR/custodian.json [--control ADDR] [--egress ADDR] [--health ADDR]
//	custodian envoy -- ENVOY -c DIR/envoy.json [ENVOY-ARG…]
//	custodian run --policy POLICY.toml --bundle OUT.jsonl [--mode MODE …] -- CMD [ARG…]
//	custodian verify OUT.jsonl
//	custodian inspect OUT.jsonl [--json]
//
// This package only wires subcommands to their packages. Each line of
// usage names every flag of its subcommand, and each subcommand's --help
// prints its own usage (main_test.go holds both to the flag sets).
package main

import (
	"fmt"
	"io"
	"os"

	"jr2.dev/boundary/custodian/internal/envoyrun"
	"jr2.dev/boundary/custodian/internal/launcher"
	"jr2.dev/boundary/custodian/internal/run"
	"jr2.dev/boundary/custodian/internal/serve"
	"jr2.dev/boundary/internal/bundle"
)

const usage = `usage: custodian serve|envoy|run|verify|inspect|help …
  custodian serve --config DIR/custodian.json [--control ADDR] [--egress ADDR] [--health ADDR]
  custodian envoy -- ENVOY -c DIR/envoy.json [ENVOY-ARG…]
  custodian run --policy POLICY.toml --bundle OUT.jsonl [--mode MODE] [--from RUN.jsonl] [--timing PACE] [--seed N] [--faults SPEC] -- CMD [ARG…]
  custodian verify [--pubkey KEY] OUT.jsonl
  custodian inspect OUT.jsonl [--json | --plan]
  custodian help            this text; COMMAND --help prints a command's usage
`

func main() {
	launcher.MaybeChild() // first: a re-executed contained child never returns
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand args[0] and returns the exit code.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve.Main(args[1:], stdout, stderr)
	case "envoy":
		return envoyrun.Main(args[1:], stdout, stderr)
	case "run":
		return run.Main(args[1:], stdout, stderr)
	case "verify":
		return bundle.VerifyMain(args[1:], stdout, stderr)
	case "inspect":
		return bundle.InspectMain(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "custodian: unknown command %q\n%s", args[0], usage)
	return 2
}
