// Package e2e is the Custodian's end-to-end suite: it renders a pod with
// `controlplane render`, starts the Custodian from that directory as a
// process, and drives it with real clients (curl, git, Go net/http, Node
// with an npm proxy agent, Python requests; boto3 and the AWS SDK for Go
// for SigV4), each with the rendered harness.env as its whole environment.
// It speaks to the Custodian only through its listeners and its output, so
// the same tests run against `custodian serve` and core Envoy with the
// dynamic module, both by default (hostsToRun: JR2_E2E_HOST=serve is the
// one way to leave Envoy out; without an Envoy binary the suite fails).
//
// Invariant: every secret value of the suite is a fresh sentinel; a test
// asserts that no value, in any form the scrubber covers, and no stand-in
// reaches an upstream (stand-ins), a client (values), or the Custodian's
// stdout and stderr (both). What runs is real: TLS on both sides under
// test CAs made in code, a network namespace on a veth pair (an address
// neither loopback nor guarded, so the pod is rendered as for production),
// git's smart HTTP, and a mount namespace whose /etc/hosts makes names
// resolve to guarded addresses.
//
// Not covered: the Go filter in an envoy-contrib binary (envoy/README.md);
// anything of a Pod — the kubelet, a container runtime, an image — which
// controlplane's TestPodOnNode runs on a real node (nodetest). Here only
// the value directory is updated as the kubelet does (valuedirtest.Write),
// so the rotation tests run fast and under -race.
package e2e
