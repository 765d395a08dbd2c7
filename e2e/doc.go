// Package e2e is the Custodian's end-to-end suite: it renders a pod with
// `controlplane render`, starts the Custodian from that directory as a
// process, and drives it with real clients — curl, git, a Go net/http
// program, Node with a proxy agent from npm, and Debian's Python requests —
// each run as its own process with the rendered harness.env as its whole
// environment.
//
// The suite speaks to the Custodian only through its listeners and reads
// only its output, so the same tests run against any host of the engine: by
// default `custodian serve`; with JR2_E2E_HOST=envoy, Envoy with the Go
// filter (envoy/run-e2e), which skips loudly where no envoy binary exists.
//
// What is real here: TLS on both sides under test CAs made in code; a
// network namespace joined by a veth pair, whose far end holds the tunnel's
// test host and whose near end the bound upstreams listen on (an address
// neither loopback nor guarded, so the pod is rendered as for production
// and harness.env's NO_PROXY sends no client around the Custodian); git's
// smart HTTP through `git http-backend`; and a mount namespace whose
// /etc/hosts makes names resolve to guarded addresses.
//
// Invariant: every secret value of the suite is a fresh sentinel; a test
// asserts that no value, in any form the scrubber covers, and no stand-in
// reaches an upstream (stand-ins), a client (values), or the Custodian's
// stdout and stderr (both).
//
// TestKubePod takes the same Custodian through Kubernetes:
// it applies the pod's rendered objects to a real API server
// (internal/kubetest) with the documented kubectl line, reads back the Pod
// and the objects its volumes name, lays the volumes out as the kubelet
// does and runs the Custodian container's own command, env, user and
// mounts, then curl as the agent container (internal/podrun), each in the
// Pod's own network and mount namespaces; the values exist only in the API
// server's Secrets and, through the layout, in the Custodian's volume.
//
// Not covered: the Envoy run itself where no envoy binary is installed (see
// envoy/README.md for what only that run proves); a kubelet, scheduler or
// container runtime (podrun stands in for them, and says what it does not
// model); an image built from the recipes (their binaries are bound where
// the Pod's command and envoy.json name them).
package e2e
