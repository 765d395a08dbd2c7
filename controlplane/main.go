// Command controlplane makes an instance's CA, renders each pod's Custodian
// directory (envoy.json, custodian.json, harness.env, leaves, trust files)
// from its held manifest, and prints Effector placement keys. See
// internal/cli for the command line; this file only wires it.
package main

import (
	"os"
	"runtime/debug"

	"jr2.dev/boundary/controlplane/internal/cli"
)

func main() {
	// A command that lives a fraction of a second over a live heap of a
	// few MB (8 MB at 400 targets): collecting at 100 % growth spent 7 %
	// of a cold render on 8 collections; at 800 % it runs one or none, and
	// the heap stays within tens of MB.
	debug.SetGCPercent(800)
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
