// Command demo is `make demo`: see package demo. It only wires: the
// binaries from --bin, curl from PATH when there is one, stdout, and the
// exit code.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"jr2.dev/boundary/demo"
)

func main() {
	bin := flag.String("bin", "bin", "the directory holding the built custodian and controlplane")
	flag.Parse()
	o := demo.Options{
		Custodian:    filepath.Join(*bin, "custodian"),
		Controlplane: filepath.Join(*bin, "controlplane"),
	}
	o.Curl, _ = exec.LookPath("curl")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := demo.Run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
