// Package noderun runs internal/testkit/nodetest's single real node by hand, not
// from a test: `make node-demo` (Demo) brings it up, runs package demo's
// story on it (RunOnNode: the example pod applied with the documented
// kubectl lines, curl in the agent container) and removes it; `make
// node-up` (Up) leaves it running for a user, and `make node-down` (Down)
// stops it.
//
// Invariant: at most one Serve runs per STATE (a second Up refuses, naming
// `make node-down`), and at most one node per machine (the node lock,
// shared with the tests: a node test waits while a node is up). The host is
// as it was after Demo and after Down, by nodetest's own check; a change of
// it fails them, naming it. The node's value Secrets and every other file
// of the demo are on the node's tmpfs, gone with its mount namespace; only
// STATE/kubeconfig (an admin token of a node that lives as long as Serve)
// and the log are written on the host, and Down removes them. Serve and
// Down say how.
package noderun
