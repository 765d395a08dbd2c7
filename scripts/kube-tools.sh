#!/usr/bin/env bash
# Builds the real Kubernetes API server the tests apply rendered objects to
# (internal/kubetest): kube-apiserver and kubectl at v1.37.2 (tools/kube),
# etcd at v3.7.3 (tools/etcd), from the Go module proxy, into
# .cache/kube/bin/ (ignored). Nothing is built when the binaries there were
# built from the same pins (tools/*/go.mod and go.sum) by the same Go.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/.cache/kube/bin
go=${GO:-go}

k8s=v1.37.2
etcd=v3.7.3
stamp="$out/.pins"
want=$(
	echo "kube-apiserver kubectl $k8s etcd $etcd $($go env GOVERSION GOOS GOARCH | tr '\n' ' ')"
	cat tools/kube/go.mod tools/kube/go.sum tools/etcd/go.mod tools/etcd/go.sum | sha256sum
)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	[ -x "$out/kube-apiserver" ] && [ -x "$out/kubectl" ] && [ -x "$out/etcd" ]; then
	exit 0
fi
# The tests take binaries named by these instead (internal/kubetest).
if [ -n "${JR2_KUBE_APISERVER:-}" ] && [ -n "${JR2_KUBECTL:-}" ] && [ -n "${JR2_ETCD:-}" ]; then
	exit 0
fi
if [ "${JR2_KUBE_TESTS:-}" = skip ] && [ "${JR2_REQUIRE_ALL:-}" != 1 ]; then
	echo "kube-tools: not built: JR2_KUBE_TESTS=skip runs the tests without a real API server" >&2
	exit 0
fi

echo "kube-tools: building kube-apiserver and kubectl $k8s and etcd $etcd from Go modules into ${out#"$root"/} for the tests against a real API server; the first build takes several minutes (later ones come from Go's cache)" >&2
mkdir -p "$out"
rm -f "$stamp"
# The version the binaries report (kube-apiserver --version, kubectl
# version), as Kubernetes' own release build sets it.
ver="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
ver="$ver -X k8s.io/client-go/pkg/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitTreeState=clean"
(cd tools/kube && CGO_ENABLED=0 $go build -trimpath -ldflags "-s -w $ver" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
(cd tools/etcd && CGO_ENABLED=0 $go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
printf '%s\n' "$want" >"$stamp"
