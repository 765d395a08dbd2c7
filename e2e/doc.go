// Package e2e is the Custodian's end-to-end suite: it renders a pod with
// `controlplane render`, starts the Custodian from that directory as a
// process, and drives it with real clients — curl, git, a Go net/http
// program, Node with a proxy agent from npm, and Debian's Python requests —
// each run as its own process with the rendered harness.env as its whole
// environment; and, for a held AWS key (TestSigV4Clients), boto3 and the
// AWS SDK for Go against an upstream that checks SigV4 with botocore.
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
// The rendered Pod itself is run elsewhere: controlplane's TestPodOnNode
// applies it to a real single node (internal/testkit/nodetest: kubelet,
// containerd, runc), which runs the Custodian and the agent from the
// images `make images` built. Here the Custodian is a process; only its value directory is
// updated as the kubelet does (valuedirtest.Write, the atomic writer's
// steps), so the rotation tests run fast and under -race.
//
// Not covered: the Envoy run itself where no envoy binary is installed (see
// envoy/README.md for what only that run proves); anything of a Pod — the
// kubelet, a container runtime, an image (TestPodOnNode's).
package e2e
