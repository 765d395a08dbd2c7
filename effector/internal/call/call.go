// Package call is `effector call`: one signed effect by hand, through the
// project's own client (effector/client), for a person at a terminal or a
// script — what an Orchestrator does, without writing Go.
//
//	effector call --key effector.key --address 127.0.0.1:8082 --start start.json
//
// It reads a start body (the wire's JSON, docs/effector.md), checks it
// with the wire's own decoder before anything is sent, signs it with the
// placement key, starts it on the one replica named, polls until it
// settles, and prints the replica's signed state, verified, as one JSON
// line on stdout.
//
// # Invariant
//
// Only a verified answer is printed: an answer whose signature does not
// verify under the key is never decoded (effector/client). Nothing here
// prints the key, and a start names secrets, never values; what the
// Effector answers it has already scrubbed. Every error names the flag or
// the fix.
package call

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/cliflag"
	"jr2.dev/boundary/internal/effectorkey"
)

// Usage is `effector call --help`, and the call section of effector's
// usage; it names every flag Flags defines (effector's usage test).
const Usage = `usage: effector call --key FILE --start FILE [--address HOST:PORT] [--id ID]

Sends one signed effect to one Effector replica and waits until it settles:
the start (the wire's JSON, docs/effector.md) is checked, signed with the
placement key, sent as POST /effects/ID, polled with GET until settled, and
the replica's signed answer, verified, is printed as one JSON line.

  --key FILE           the placement key (controlplane key prints it)
  --start FILE         the start body, JSON; - reads it from stdin
  --address HOST:PORT  the replica's POD_IP:port, which it signs with (default
                       127.0.0.1:8082)
  --id ID              the effect's id, 1-128 of A-Z a-z 0-9 . _ - (default: a
                       new random one); the same id again attaches to it

Exit 0 when the effect settled as a response, an exit or a push; 3 when it
settled otherwise (refused, unreachable, unknown, timeout, rejected: the
outcome says which); 1 when it could not be started or followed; 2 for a
usage error.
`

// Exit codes.
const (
	ExitSettled    = 0
	ExitFailed     = 1
	ExitUsage      = 2
	ExitNotSuccess = 3
)

// Options are one call's flags.
type Options struct {
	Key, Start, Address, ID string
}

// Flags is the flag set Main parses, and the Options it fills.
func Flags() (*flag.FlagSet, *Options) {
	fs := flag.NewFlagSet("effector call", flag.ContinueOnError)
	o := &Options{}
	fs.StringVar(&o.Key, "key", "", "the placement key file")
	fs.StringVar(&o.Start, "start", "", "the start body (JSON); - for stdin")
	fs.StringVar(&o.Address, "address", "127.0.0.1:8082", "the replica's POD_IP:port")
	fs.StringVar(&o.ID, "id", "", "the effect's id")
	return fs, o
}

// Main runs `effector call` with args (the words after "call").
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, o := Flags()
	if ok, code := cliflag.Parse(fs, args, Usage, stdout, stderr); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "effector call: "+format+"\n%s", append(a, Usage)...)
		return ExitUsage
	}
	switch {
	case fs.NArg() != 0:
		return usage("unexpected argument %q; every input is a flag", fs.Arg(0))
	case o.Key == "":
		return usage("--key is required: the placement key file (controlplane key --signing-key FILE --placement NAME > effector.key)")
	case o.Start == "":
		return usage("--start is required: a file holding the start body, or - for stdin")
	case o.ID != "" && !wire.ValidID(o.ID):
		return usage("--id %q: want 1-128 of A-Z a-z 0-9 . _ -", o.ID)
	}
	if o.ID == "" {
		o.ID = "call-" + client.NewNonce()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	state, err := Call(ctx, *o, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "effector call: %v\n", err)
		return ExitFailed
	}
	b, err := wire.Marshal(state)
	if err != nil {
		fmt.Fprintf(stderr, "effector call: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "%s\n", b)
	switch state.Outcome.Kind {
	case wire.OutcomeResponse, wire.OutcomeExited, wire.OutcomePushed:
		return ExitSettled
	}
	return ExitNotSuccess
}

// Call reads o's key and start (stdin for "-"), sends the start to
// o.Address and polls until the effect settles; it returns the settled
// state, verified.
func Call(ctx context.Context, o Options, stdin io.Reader) (*wire.State, error) {
	raw, err := os.ReadFile(o.Key)
	if err != nil {
		return nil, fmt.Errorf("--key: %w; write the placement key there (controlplane key)", err)
	}
	key, err := effectorkey.ParseHexKey(raw)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", o.Key, err)
	}
	var body []byte
	if o.Start == "-" {
		body, err = io.ReadAll(io.LimitReader(stdin, wire.MaxBody+1))
	} else {
		body, err = os.ReadFile(o.Start)
	}
	if err != nil {
		return nil, fmt.Errorf("--start: %w", err)
	}
	start, err := wire.DecodeStart(body)
	if err != nil {
		return nil, fmt.Errorf("--start %s: %w; nothing was sent (docs/effector.md has the start's fields)", o.Start, err)
	}
	c := &client.Client{Key: key, Addresses: func(context.Context) ([]string, error) { return []string{o.Address}, nil }}
	a, err := c.Start(ctx, o.ID, start)
	switch {
	case errors.Is(err, client.ErrNotStarted):
		return nil, fmt.Errorf("%w: is the Effector listening on --address %s?", err, o.Address)
	case errors.Is(err, client.ErrLost) || errors.Is(err, client.ErrUnknownEffect):
		return nil, fmt.Errorf("%w: the start may have arrived; a wrong --key or --address (the replica's POD_IP:port, which it signs with) gives no signed answer", err)
	case err != nil:
		return nil, err
	}
	for {
		if a.Error != nil {
			return nil, fmt.Errorf("the Effector refused the start (%d): %s; nothing ran", a.Status, a.Error.Error)
		}
		if a.State.State == wire.StateSettled {
			if a.State.Outcome == nil {
				return nil, fmt.Errorf("effect %s: %w (settled without an outcome)", o.ID, client.ErrDefect)
			}
			return a.State, nil
		}
		if a.State.State == wire.StateUnknown {
			return nil, fmt.Errorf("effect %s: the replica at %s does not hold it", o.ID, a.Address)
		}
		if a, err = c.Poll(ctx, o.ID, a.Address); err != nil {
			return nil, fmt.Errorf("effect %s: %w", o.ID, err)
		}
	}
}
