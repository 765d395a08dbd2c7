package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"jr2.dev/boundary/custodian/internal/launcher"
	"jr2.dev/boundary/internal/cliflag"
	"jr2.dev/boundary/internal/logline"
)

// Usage is `custodian run --help`. It names every flag Main defines
// (TestUsageListsEveryFlag).
const Usage = `usage: custodian run --policy POLICY.toml --bundle OUT.jsonl [--mode MODE [--from RUN.jsonl] [--timing fast|recorded] [--seed N --faults SPEC]] -- CMD [ARG…]

Runs CMD contained: in a network namespace whose only peer is the mediator,
under Landlock (the policy's read_paths and write_paths, each of which must
exist), seccomp, with no capabilities, holding stand-ins only; each secret's
value comes from the runner's environment variable the policy names. Every DNS
question and every connection attempt is decided by the policy and recorded in
OUT.jsonl, a hash-chained bundle that custodian verify checks. Linux, as root.

  --policy FILE   the policy (TOML): allow_hosts, read_paths, write_paths, [secrets]
  --bundle FILE   the bundle to write; it must not exist (a bundle is never
                  overwritten) and must lie outside every read and write path
  --mode MODE     live (the default: the command's effects happen); read-only
                  (only GET, HEAD and OPTIONS without a body pass); replay
                  (answered from --from, nothing leaves the machine); faults
                  (sent, with seeded faults); preflight (nothing sent, every
                  effect recorded as planned). docs/modes.md says each.
  --from FILE     replay (required), preflight (optional): a recorded bundle,
                  which must verify
  --timing PACE   replay: fast (the default) or recorded (the recorded gaps)
  --seed N        faults: the seed of the draws
  --faults SPEC   faults: SELECTOR=RATE[:KIND+KIND…], comma-separated; SELECTOR
                  read, write, * or a host, RATE 0 to 1, KIND error, rate-limit,
                  timeout, truncate, corrupt or reset (default: all), e.g.
                  '*=0.5:error+rate-limit' or write=0.1,example.com=0.5:reset

The exit code is CMD's; 2 for a usage error; 1 when the run was refused or
could not start, 110-127 when the contained child could not be set up. A run
refused before CMD starts writes no bundle (stderr says why): fix it and run the
same line again. Once CMD has started, the bundle holds the run, sealed when
it ends.
`

// Main runs `custodian run` with args (the words after "run") and returns
// the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs, o := Flags()
	o.Stdin, o.Stdout, o.Stderr = os.Stdin, stdout, stderr
	if ok, code := cliflag.Parse(fs, args, Usage, stdout, stderr); !ok {
		return code
	}
	o.Argv = fs.Args()
	if missing := missingArgs(o); missing != "" {
		fmt.Fprintf(stderr, "custodian run: %s\n%s", missing, Usage)
		return 2
	}
	// The runner's own logger — net/http's Transport of the mediator's
	// upstreams writes there, quoting what an upstream sent — writes the
	// contract's error line with a fixed word, as custodian serve's does
	// (logline.CaptureStdLog, the one capture every host takes).
	logline.CaptureStdLog(logline.NewWriter(stderr, logline.Custodian))
	code, err := Run(context.Background(), *o)
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

// missingArgs says what a command line without a policy, a bundle or a
// command lacks, and how to give it; "" when nothing is missing.
func missingArgs(o *Options) string {
	switch {
	case o.Policy == "":
		return "--policy is required: the policy file (TOML), such as examples/policy.toml"
	case o.Bundle == "":
		return "--bundle is required: the bundle to write, a file that does not exist yet"
	case len(o.Argv) == 0:
		return "no command: write it after --, such as -- sh -c 'curl https://example.com/'"
	}
	return ""
}

// Flags is the flag set Main parses, and the Options it fills: the usage
// tests hold Usage to it.
func Flags() (*flag.FlagSet, *Options) {
	fs := flag.NewFlagSet("custodian run", flag.ContinueOnError)
	o := &Options{}
	fs.StringVar(&o.Policy, "policy", "", "the policy file (TOML)")
	fs.StringVar(&o.Bundle, "bundle", "", "the bundle to write; it must not exist")
	fs.StringVar(&o.Mode, "mode", "live", "the mode: live, read-only, replay, faults, preflight")
	fs.StringVar(&o.From, "from", "", "the recorded bundle to answer from")
	fs.StringVar(&o.Timing, "timing", "", "replay's pace: fast or recorded")
	fs.Uint64Var(&o.Seed, "seed", 0, "the faults' seed")
	fs.StringVar(&o.Faults, "faults", "", "the faults' SPEC")
	return fs, o
}
