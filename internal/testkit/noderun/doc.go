// Package noderun runs internal/testkit/nodetest's single real node by hand, not
// from a test: `make node-demo` (Demo) brings it up, runs package demo's
// story on it (RunOnNode: the example pod applied with the documented
// kubectl lines, curl in the agent container) and removes it; `make
// node-up` (Up) leaves it running for a user, and `make node-down` (Down)
// stops it.
//
// # The processes
//
// Demo and Serve are each two halves of one binary, as nodetest.Start is:
// the outer half claims the host (nodetest.Claim: the machine's node lock,
// the host's snapshot, the kubelet's cgroupRoot) and re-runs the binary in
// the node's namespaces (Host.Command); the inner half brings the node up
// (nodetest.Up) and runs on it. When the inner half has ended, the outer
// removes the cgroups and compares the host (Host.Release).
//
// Up starts Serve detached (a session of its own, its output in
// STATE/node.log) and returns once the node is ready. Serve holds an
// flock on STATE/lock for as long as it runs, writes its pid to
// STATE/pid and, once the node is ready, STATE/kubeconfig: the node's API
// server, reached through a listener Serve makes on the host's loopback
// before the namespaces exist and hands to the inner half, which forwards
// each connection to the API server inside the node's network namespace
// (kubectl exec, logs and port-forward included). On SIGTERM or SIGINT the
// inner half stops the node, and Serve releases the host, writes what the
// host check found to STATE/result and removes its other files. Down
// signals the pid and waits for the flock to be free (the kernel frees it
// when Serve ends, however it ends), prints the result and removes STATE.
//
// # Invariant
//
// At most one Serve runs per STATE (a second Up refuses, naming `make
// node-down`), and at most one node per machine (the node lock, shared
// with the tests: a node test waits while a node is up). The host is as it
// was after Demo and after Down, by nodetest's own check; a change of it
// fails them, naming it. The node's value Secrets and every other file of
// the demo are on the node's tmpfs, gone with its mount namespace; only
// STATE/kubeconfig (an admin token of a node that lives as long as Serve)
// and the log are written on the host, and Down removes them.
package noderun
