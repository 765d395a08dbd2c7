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

	"jr2.dev/boundary/custodian/internal/serve"
)

const usage = `usage: custodian serve|run|verify|inspect …
  custodian serve --config DIR/custodian.json [--control ADDR] [--egress ADDR] [--health ADDR]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve.Main(os.Args[2:], os.Stdout, os.Stderr))
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}
