#!/usr/bin/env bash
# Runs every fuzz target of the module briefly (FUZZTIME each, default 10s),
# with its seed corpus from the package's testdata/fuzz/. Fails on the first
# crasher, which go test writes into testdata/fuzz/ for the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
n=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	grep -lq '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $target ($fuzztime)"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
		n=$((n + 1))
	done
done
echo "fuzz: $n targets ran for $fuzztime each"
