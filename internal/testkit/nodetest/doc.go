// Package nodetest runs a real single-node Kubernetes for tests: etcd and
// kube-apiserver (internal/testkit/kubetest), kube-controller-manager,
// kube-scheduler, containerd with its runc shim, runc with seccomp, the
// bridge CNI plugin and a kubelet registered to the API server — the
// releases scripts/kube-tools.sh builds — so a Pod applied with kubectl is
// scheduled, pulled from images imported with ctr, started by the kubelet
// and runc, probed, rotated and stopped by the code a cluster runs.
//
// # Use
//
//	func TestX(t *testing.T) {
//		n := nodetest.Start(t, nodetest.Options{Images: tars})
//		if n == nil {
//			return // this process ran the test inside the node's namespaces
//		}
//		out, err := n.API.Run(t, dir, "kubectl apply …")
//	}
//
// Start must be called first in a top-level test. The first call re-runs
// the test binary for that test alone inside new mount, network and PID
// namespaces; there Start brings the node up and returns it, and the test
// body runs against it. The outer call waits, reports the inner run's
// output and exit, removes what the kernel keeps after the namespaces end
// (the node's cgroups), and checks that the host is as it was.
//
// The same two halves serve a program that is not a test
// (internal/noderun: make node-demo, node-up): Claim is the outer half's
// start (the lock, the host's snapshot, the cgroupRoot), Host.Command the
// inner run, Host.Release its end (the cgroups removed, the host
// compared); inside, Up brings the node up and Node.Stop ends it.
//
// # What the node changes, in order, and where it is undone
//
//  1. The mount namespace is made private, then shared within itself (the
//     kubelet's mount propagation), with a fresh /proc for the PID
//     namespace; every directory the parts write (containerd's root and
//     state, the kubelet's root, pod logs, CNI state) is on one tmpfs, and
//     /var, /etc and /opt are overlays whose upper is a tmpfs, so a write
//     nobody configured reaches no disk. All of it ends with the namespace.
//  2. The kubelet checks three kernel settings it would otherwise write on
//     the host (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops);
//     it runs with protectKernelDefaults and sees files bound over those
//     /proc/sys entries in its mount namespace, so the host's stay as they
//     are.
//  3. The network namespace is new: loopback, the node's address
//     (NodeIP, on lo) and the bridge the CNI plugin makes; it ends with the
//     namespace.
//  4. Every process is in the new PID namespace, whose first process is the
//     inner test binary: when it ends, for any reason, the kernel kills the
//     rest; the inner binary dies with the outer (Pdeathsig).
//  5. cgroups are the host's (v1 here): the kubelet's cgroupRoot,
//     /jr2-node-<id>, is made in every mounted controller before it starts
//     and removed by the outer call once the inner run is over, with what
//     runc makes below the same name in the hybrid host's cgroup2
//     (/sys/fs/cgroup/unified), which the host check covers too. A run
//     killed before it can remove them leaves empty ones, which the next
//     Start removes.
//
// # One node at a time
//
// Start's outer call (Claim to Release) holds an flock on
// .cache/kube/nodetest.lock from before the host's first snapshot to after
// its last, so the nodes of
// test binaries run side by side (go test ./... runs packages in
// parallel) take turns: a second node's cgroupRoot would read as a change
// of the host, and a starting node would remove another's not yet in use
// as a killed run's.
//
// # Not covered
//
// One node, no registry (imagePullPolicy Never or IfNotPresent on
// imported images), no kube-proxy and no cluster DNS (no Service's cluster
// IP or name answers; a pod reaches the addresses a Service's
// EndpointSlice names, as a headless Service's clients do), no
// NetworkPolicy (the bridge plugin enforces none), cgroup v1 only as this
// machine has it.
//
// # Invariant
//
// The host's sysctls, top-level cgroups, mounts and network interfaces,
// addresses and routes (but a route's use counters) are the same after
// Start's test as before it; the outer call fails the test when they are
// not (Release names each change). The e2e suite's veths
// (je<pid>x<n>h), which that suite makes and removes in its own run beside
// a node's, are left out of the comparison with their sysctls and routes.
package nodetest
