// Command jr2-node is `make node-demo`, `make node-up` and `make
// node-down`: see package noderun. It only wires: the subcommand, its
// flags, stdout and stderr, the signals, and the exit code.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"jr2.dev/boundary/internal/testkit/noderun"
)

const usage = `usage: jr2-node demo [--bin DIR]   bring a node up, run the demo on it, remove it
       jr2-node up [--state DIR]   leave a node running; print its kubeconfig
       jr2-node down [--state DIR] stop it and remove everything`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet("jr2-node "+cmd, flag.ExitOnError)
	bin := fs.String("bin", "bin", "demo: the directory holding the built controlplane")
	state, err := noderun.DefaultState()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jr2-node:", err)
		os.Exit(1)
	}
	fs.StringVar(&state, "state", state, "up, down: the directory of the running node's files")
	fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctl, err := filepath.Abs(filepath.Join(*bin, "controlplane"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "jr2-node:", err)
		os.Exit(1)
	}
	st, err := filepath.Abs(state)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jr2-node:", err)
		os.Exit(1)
	}
	c := noderun.Config{State: st, Controlplane: ctl, Out: os.Stdout, Err: os.Stderr}
	run := map[string]func(context.Context, noderun.Config) int{
		"demo": noderun.Demo, "up": noderun.Up, "serve": noderun.Serve, "down": noderun.Down,
	}[cmd]
	if run == nil {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	os.Exit(run(ctx, c))
}
