// Command effector is the Effector: `effector` serves the signed wire;
// `effector confine -- ARGV` and `effector keep …` are the confiner and the
// keeper a credentialed command runs under; `effector credential …` is the
// git credential helper of an https push. This file only wires.
package main

import (
	"fmt"
	"os"

	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/keep"
	"jr2.dev/boundary/effector/internal/pushkind"
	"jr2.dev/boundary/effector/internal/serve"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(serve.Main(os.Getenv, os.Stdout, os.Stderr))
	}
	switch os.Args[1] {
	case "confine":
		os.Exit(confine.Main(os.Args[2:]))
	case "keep":
		os.Exit(keep.Main(os.Args[2:]))
	case "credential":
		os.Exit(pushkind.CredentialMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	fmt.Fprintf(os.Stderr, "effector: unknown sub-command %q; run effector with no argument to serve, or confine, keep, credential\n", os.Args[1])
	os.Exit(2)
}
