//go:build !linux

package nodetest

import "testing"

// Options are what a node is started with (Linux only).
type Options struct {
	Images []string
	Pause  string
}

// Node is a running node (Linux only).
type Node struct{}

// Start fails: a node needs Linux namespaces and cgroups.
func Start(t *testing.T, o Options) *Node {
	t.Fatal("nodetest: a node runs on Linux only (namespaces, cgroups, runc)")
	return nil
}
