// Command custodian is the Custodian's Go host and the contained local run:
//
//	custodian serve --config DIR/custodian.json [--control ADDR] [--egress ADDR] [--health ADDR]
//	custodian run --policy POLICY.toml --bundle OUT.jsonl [--mode live] -- CMD [ARG…]
//	custodian verify OUT.jsonl
//	custodian inspect OUT.jsonl [--json]
//
// This package only wires subcommands to their packages.
package main

import (
	"fmt"
	"os"

	"jr2.dev/boundary/custodian/internal/bundle"
	"jr2.dev/boundary/custodian/internal/launcher"
	"jr2.dev/boundary/custodian/internal/run"
	"jr2.dev/boundary/custodian/internal/serve"
	_ "jr2.dev/boundary/internal/benchstats" // only with -tags jr2bench: make bench reads allocations
)

const usage = `usage: custodian serve|run|verify|inspect …
  custodian serve --config DIR/custodian.json [--control ADDR] [--egress ADDR] [--health ADDR]
  custodian run --policy POLICY.toml --bundle OUT.jsonl [--mode live] -- CMD [ARG…]
  custodian verify OUT.jsonl
  custodian inspect OUT.jsonl [--json]
`

func main() {
	launcher.MaybeChild() // first: a re-executed contained child never returns
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve.Main(os.Args[2:], os.Stdout, os.Stderr))
	case "run":
		os.Exit(run.Main(os.Args[2:], os.Stdout, os.Stderr))
	case "verify":
		os.Exit(bundle.VerifyMain(os.Args[2:], os.Stdout, os.Stderr))
	case "inspect":
		os.Exit(bundle.InspectMain(os.Args[2:], os.Stdout, os.Stderr))
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}
