#!/usr/bin/env bash
# Builds the images images/images.json describes — core Envoy with the
# module, custodian serve, the Effector, an agent with real clients, and a
# pause image — into .cache/images/NAME.tar with .cache/images/index.json
# (ignored), for the tests' Kubernetes node: from Debian packages that
# `apt-get download` fetches into .cache/debs/, this repository's builds
# and this machine's Envoy and Node, put together by tools/images
# (go-containerregistry); no registry, no container engine. Nothing is
# written when every input hashes as at the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
go=${GO:-go}

if [ "${JR2_KUBE_TESTS:-}" = skip ] && [ "${JR2_REQUIRE_ALL:-}" != 1 ]; then
	echo "images: not built: JR2_KUBE_TESTS=skip runs the tests without a Kubernetes node" >&2
	exit 0
fi
for cmd in apt-get dpkg-deb; do
	if ! command -v "$cmd" >/dev/null; then
		echo "images: the images are made of Debian packages and need $cmd (Debian 12's apt and dpkg); or set JR2_KUBE_TESTS=skip" >&2
		exit 1
	fi
done
cd tools/images
exec $go run . --root "$root"
