//go:build !linux

package noderun

import (
	"context"
	"fmt"
	"io"
)

// Config is what a command runs with (Linux only).
type Config struct {
	State, Controlplane string
	Out, Err            io.Writer
}

// DefaultState is .cache/node (Linux only).
func DefaultState() (string, error) { return ".cache/node", nil }

func linuxOnly(c Config) int {
	fmt.Fprintln(c.Err, "noderun: a node runs on Linux only (namespaces, cgroups, runc)")
	return 1
}

// Demo fails: a node needs Linux.
func Demo(ctx context.Context, c Config) int { return linuxOnly(c) }

// Up fails: a node needs Linux.
func Up(ctx context.Context, c Config) int { return linuxOnly(c) }

// Serve fails: a node needs Linux.
func Serve(ctx context.Context, c Config) int { return linuxOnly(c) }

// Down fails: a node needs Linux.
func Down(ctx context.Context, c Config) int { return linuxOnly(c) }
