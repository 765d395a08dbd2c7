// Command controlplane makes an instance's CA, renders each pod's Custodian
// directory (envoy.json, custodian.json, harness.env, leaves, trust files)
// from its held manifest, and prints Effector placement keys. See
// internal/cli for the command line; this file only wires it.
package main

import (
	"os"

	"jr2.dev/boundary/controlplane/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
