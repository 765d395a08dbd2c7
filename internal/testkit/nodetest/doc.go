// Package nodetest runs a real single-node Kubernetes for tests: etcd and
// kube-apiserver (internal/testkit/kubetest), kube-controller-manager,
// kube-scheduler, containerd with its runc shim, runc with seccomp, the
// bridge CNI plugin and a kubelet registered to the API server — the
// releases scripts/kube-tools.sh builds — so a Pod applied with kubectl is
// scheduled, pulled from images imported with ctr, started by the kubelet
// and runc, probed, rotated and stopped by the code a cluster runs.
//
// Invariant: the host's sysctls, top-level cgroups, mounts and network
// interfaces, addresses and routes (but a route's use counters) are the
// same after Start's test as before it; the outer call fails the test when
// they are not (Release names each change). The e2e suite's veths
// (je<pid>x<n>h), which that suite makes and removes in its own run beside
// a node's, are left out of the comparison with their sysctls and routes.
// One node runs per machine at a time (Claim's lock). Up lists what the
// node changes, in order, and where each is undone.
//
// Start runs a test in two halves (Start; Claim, Host.Command and
// Host.Release are the same halves for a program that is not a test,
// internal/testkit/noderun).
//
// Not covered: one node, no registry (imagePullPolicy Never or IfNotPresent
// on imported images), no kube-proxy and no cluster DNS (no Service's
// cluster IP or name answers; a pod reaches the addresses a Service's
// EndpointSlice names, as a headless Service's clients do), no
// NetworkPolicy (the bridge plugin enforces none), cgroup v1 only as this
// machine has it.
package nodetest
