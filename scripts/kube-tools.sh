#!/usr/bin/env bash
# Builds the real Kubernetes the tests apply rendered objects to and run
# pods on: kube-apiserver, kubectl, kube-controller-manager, kube-scheduler
# and kubelet at v1.37.2 (tools/kube), etcd at v3.7.3 (tools/etcd), and
# the node's runtime, containerd v2.4.2 with its runc shim and ctr
# (tools/containerd) and runc v1.5.3 with seccomp (tools/runc: cgo and
# Debian's libseccomp-dev), from the Go module proxy, into .cache/kube/bin/
# (ignored). The CNI plugins come from Debian's containernetworking-plugins
# (.ci/run installs both packages). Nothing is built when the binaries there were
# built from the same pins (tools/*/go.mod and go.sum) by the same Go.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/.cache/kube/bin
go=${GO:-go}

k8s=v1.37.2
etcd=v3.7.3
containerd=v2.4.2
runc=v1.5.3
stamp="$out/.pins"
want=$(
	echo "kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet $k8s etcd $etcd containerd containerd-shim-runc-v2 ctr $containerd runc $runc $($go env GOVERSION GOOS GOARCH | tr '\n' ' ')"
	cat tools/kube/go.mod tools/kube/go.sum tools/etcd/go.mod tools/etcd/go.sum tools/containerd/go.mod tools/containerd/go.sum tools/runc/go.mod tools/runc/go.sum | sha256sum
)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	[ -x "$out/kube-apiserver" ] && [ -x "$out/kubectl" ] && [ -x "$out/etcd" ] &&
	[ -x "$out/kubelet" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kube-scheduler" ] &&
	[ -x "$out/containerd" ] && [ -x "$out/containerd-shim-runc-v2" ] && [ -x "$out/ctr" ] && [ -x "$out/runc" ]; then
	exit 0
fi
# The tests take binaries named by these instead (internal/testkit/kubetest).
if [ -n "${JR2_KUBE_APISERVER:-}" ] && [ -n "${JR2_KUBECTL:-}" ] && [ -n "${JR2_ETCD:-}" ]; then
	exit 0
fi
if [ "${JR2_KUBE_TESTS:-}" = skip ] && [ "${JR2_REQUIRE_ALL:-}" != 1 ]; then
	echo "kube-tools: not built: JR2_KUBE_TESTS=skip runs the tests without a real API server" >&2
	exit 0
fi

if ! pkg-config --exists libseccomp 2>/dev/null; then
	echo "kube-tools: runc $runc is built with seccomp and needs libseccomp's headers: apt-get install libseccomp-dev pkg-config" >&2
	exit 1
fi
echo "kube-tools: building kube-apiserver, kubectl, kube-controller-manager, kube-scheduler and kubelet $k8s, etcd $etcd, containerd $containerd and runc $runc from Go modules into ${out#"$root"/} for the tests against a real API server and node; the first build takes several minutes (later ones come from Go's cache)" >&2
mkdir -p "$out"
rm -f "$stamp"
# The version the binaries report (kube-apiserver --version, kubectl
# version), as Kubernetes' own release build sets it.
ver="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
ver="$ver -X k8s.io/client-go/pkg/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitTreeState=clean"
(cd tools/kube && CGO_ENABLED=0 $go build -trimpath -ldflags "-s -w $ver" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
	k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
(cd tools/etcd && CGO_ENABLED=0 $go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
# containerd as its release builds it, static; btrfs and the devmapper
# snapshotter need cgo and drop out (the node uses overlayfs).
cver="-X github.com/containerd/containerd/v2/version.Version=$containerd -X github.com/containerd/containerd/v2/version.Revision=jr2"
(cd tools/containerd && CGO_ENABLED=0 $go build -trimpath -tags "no_btrfs no_devmapper" -ldflags "-s -w $cver" -o "$out/" \
	github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr)
# runc needs cgo for seccomp; a runc without it fails every container
# whose Pod asks for seccompProfile RuntimeDefault.
(cd tools/runc && CGO_ENABLED=1 $go build -trimpath -tags seccomp -ldflags "-s -w -X main.version=${runc#v}" -o "$out/runc" github.com/opencontainers/runc)
printf '%s\n' "$want" >"$stamp"
