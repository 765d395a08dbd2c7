#!/bin/sh
# envoy/validate.sh DIR — run `envoy --mode validate` on a directory that
# `controlplane render` wrote. Render it for core Envoy with the module
# built (make module) and DIR mounted where envoy.json says (the default
# --mount-dir is DIR's own absolute path), e.g.:
#
#   controlplane render --manifest held.json --ca CA --out /tmp/pod --data-plane module --module "$PWD/bin/custodian-module.so"
#   envoy/validate.sh /tmp/pod
#
# (A golang render needs Envoy's contrib build; core Envoy refuses it.)
#
# Exits 2, and says so, where no envoy binary is on PATH.
set -eu
dir=${1:?usage: envoy/validate.sh DIR (a directory controlplane render wrote)}
if ! command -v envoy >/dev/null 2>&1; then
	echo "envoy/validate.sh: no envoy binary on PATH; $dir/envoy.json was NOT validated" >&2
	exit 2
fi
exec envoy --mode validate -c "$dir/envoy.json" --concurrency 1 --disable-hot-restart
