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

// gcLimit is the heap size at which controlplane's collector runs (it
// runs at no other).
const gcLimit = 512 << 20

func main() {
	// A command that lives a fraction of a second over a live heap of a
	// few MB (16 MB at 400 targets): collecting at 100 % growth spent 7 %
	// of a cold render on 8 collections, and at 800 % its one collection
	// still marked for ~75 ms of CPU, a quarter of the render. So none
	// runs until the heap reaches the limit below, which a render of 400
	// targets stays far under (~60 MB resident); a larger one collects
	// there rather than grow without bound.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(gcLimit)
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
