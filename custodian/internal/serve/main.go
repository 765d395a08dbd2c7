package serve

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/internal/cliflag"
)

// Usage is `custodian serve --help`. It names every flag Main defines
// (TestUsageListsEveryFlag).
const Usage = `usage: custodian serve --config DIR/custodian.json [--control ADDR] [--egress ADDR] [--health ADDR]

Runs the Custodian from a directory controlplane render wrote: the control
listener (the four routes to the Orchestrator), the egress listener (CONNECT:
bound targets intercepted, others tunneled after the dial guard) and the
health listener (GET /healthz). It reads one value file per held secret from
custodian.json's valuesDir, JR2_SANDBOX_TOKEN's included, and does not start
without each. Flags override the listen addresses; port 0 picks one, and the
ready line names what was bound. SIGTERM or SIGINT stops it gracefully.

  --config FILE   custodian.json of a rendered directory (leaves and ca/ beside it)
  --control ADDR  control listener address (default 127.0.0.1:8081)
  --egress ADDR   egress listener address (default 127.0.0.1:15001, harness.env's
                  HTTPS_PROXY: another address needs the clients' proxy moved too)
  --health ADDR   health listener address (default 0.0.0.0:15021, every interface,
                  for the kubelet; on one machine use 127.0.0.1:15021)

On one machine (no pod): render with --values-dir "$PWD/values" (each value a
file there), --harness-ca-dir "$PWD/DIR/ca" (harness.env's trust files where
this machine sees them), --health 127.0.0.1:15021 and, for a bound target on
loopback, --allow-local-targets (or serve with --health 127.0.0.1:15021).
`

// Main runs `custodian serve` with args (the words after "serve") and
// returns the exit code: 0 after a graceful stop or for --help (the usage
// on stdout), 1 when it cannot start, 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs, o := Flags()
	if ok, code := cliflag.Parse(fs, args, Usage, stdout, stderr); !ok {
		return code
	}
	switch {
	case o.ConfigPath == "":
		fmt.Fprintf(stderr, "custodian serve: --config is required: the custodian.json of a directory controlplane render wrote (render --out DIR writes DIR/custodian.json)\n%s", Usage)
		return 2
	case fs.NArg() != 0:
		fmt.Fprintf(stderr, "custodian serve: unexpected argument %q; every input is a flag\n%s", fs.Arg(0), Usage)
		return 2
	}
	o.Log = stdout
	s, err := New(*o)
	if err != nil {
		fmt.Fprintf(stderr, "custodian serve: %v\n", err)
		return 1
	}
	relay.CaptureStdLog(s.log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "custodian serve: %v\n", err)
		return 1
	}
	return 0
}

// Flags is the flag set Main parses, and the Options it fills: the usage
// tests hold Usage to it.
func Flags() (*flag.FlagSet, *Options) {
	fs := flag.NewFlagSet("custodian serve", flag.ContinueOnError)
	var o Options
	fs.StringVar(&o.ConfigPath, "config", "", "custodian.json of a rendered directory")
	fs.StringVar(&o.Control, "control", "", "control listener address")
	fs.StringVar(&o.Egress, "egress", "", "egress listener address")
	fs.StringVar(&o.Health, "health", "", "health listener address")
	return fs, &o
}
