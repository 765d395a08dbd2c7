package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"jr2.dev/boundary/custodian/internal/launcher"
)

const usage = `usage: custodian run --policy POLICY.toml --bundle OUT.jsonl [--mode live] -- CMD [ARG…]

Runs CMD contained: in a network namespace whose only peer is the mediator,
under Landlock (the policy's read_paths and write_paths), seccomp, with no
capabilities, holding stand-ins only. Every DNS question and every
connection attempt is decided by the policy and recorded in OUT.jsonl, a
hash-chained bundle that custodian verify checks. The exit code is CMD's;
2 for a usage error, 1 when the run could not start (nothing ran), 110-127
when the contained child could not be set up (nothing ran).
`

// Main runs `custodian run` with args (the words after "run") and returns
// the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("custodian run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	o := Options{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr}
	fs.StringVar(&o.Policy, "policy", "", "the policy file (TOML)")
	fs.StringVar(&o.Bundle, "bundle", "", "the bundle to write; it must not exist")
	fs.StringVar(&o.Mode, "mode", "live", "the mode: live")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.Argv = fs.Args()
	if o.Policy == "" || o.Bundle == "" || len(o.Argv) == 0 {
		fs.Usage()
		return 2
	}
	code, err := Run(context.Background(), o)
	if err != nil {
		var ce *launcher.ChildError
		switch {
		case errors.As(err, &ce):
			fmt.Fprintf(stderr, "custodian run: %v (exit %d)\n", err, code)
		case errors.Is(err, ErrUsage):
			fmt.Fprintf(stderr, "%v\n", err)
		default:
			fmt.Fprintf(stderr, "custodian run: %v\n", err)
		}
	}
	return code
}
