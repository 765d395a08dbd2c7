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
)

const usage = `usage: custodian serve --config DIR/custodian.json [--control ADDR] [--egress ADDR] [--health ADDR]

Runs the Custodian from a directory controlplane render wrote: the control
listener (the four routes to the Orchestrator), the egress listener (CONNECT:
bound targets intercepted, others tunneled after the dial guard) and the
health listener. Flags override the listen addresses; port 0 picks one, and
the ready line names what was bound. SIGTERM or SIGINT stops it gracefully.
`

// Main runs `custodian serve` with args (the words after "serve") and
// returns the exit code: 0 after a graceful stop, 1 when it cannot start,
// 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("custodian serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	var o Options
	fs.StringVar(&o.ConfigPath, "config", "", "custodian.json of a rendered directory")
	fs.StringVar(&o.Control, "control", "", "control listener address")
	fs.StringVar(&o.Egress, "egress", "", "egress listener address")
	fs.StringVar(&o.Health, "health", "", "health listener address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.ConfigPath == "" || fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	o.Log = stdout
	s, err := New(o)
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
