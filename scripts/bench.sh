#!/usr/bin/env bash
# make bench: every measurement the project sets a goal for, each printed as a table
# with its comparison. Timings are of this machine at this moment: run it on
# a quiet machine, and compare rows of one run, not runs.
set -uo pipefail
cd "$(dirname "$0")/.."
table() { go run ./scripts/benchtable "$@"; }
status=0
# Every goal row of every table lands here; the summary at the end prints
# them all from this one run.
export JR2_BENCH_GOALS
JR2_BENCH_GOALS=$(mktemp /tmp/jr2-bench-goals.XXXXXX)
trap 'rm -f "$JR2_BENCH_GOALS"' EXIT

echo "# jr2 boundary: make bench ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"

# The engine: the scrubber beside bytes.Index of one pattern and a
# naive per-form replace loop; one request's decision with 100 held secrets,
# and what a credential of another kind adds to it: an AWS key's SigV4
# request verified with the stand-ins and signed again, an OAuth secret's
# minted token swapped in, each beside a plain value's swap in one engine.
# Each is the median of 5 runs (benchtable): these take a second or less,
# and one slow moment of a shared machine moved a single run's row by half.
go test ./filter/scrub -run '^$' -bench 'Scrub/|Baseline' -benchtime 1s -count 5 \
	| table -title "scrub throughput on 64 KiB chunks of mixed text (MB/s, medians of 5; ratio to bytes.Index of one pattern)" -vs 'Baseline/bytes.Index' -unit MB/s \
	-goal 'scrub, 64 KiB chunks, 64 secrets, one core|^Scrub/secrets=64$|MB/s|>=|1000' || status=1
go test ./filter -run '^$' -bench 'DecideRequest|DecideKinds' -benchmem -count 5 \
	| table -title "one intercepted request's decision, 100 held secrets, medians of 5 (DecideKinds: one AWS key and one OAuth secret held beside them)" \
	-goal 'DecideRequest, 100 secrets, a swap: time|^DecideRequest$|ns/op|<=|500' \
	-goal 'DecideRequest, 100 secrets, a swap: allocations|^DecideRequest$|allocs/op|<=|2' \
	-goal 'DecideRequest, a SigV4 request re-signed, at most 20 µs over a plain swap|^DecideKinds/sigv4$|ns/op|<=|@^DecideKinds/plain$+20000|the SigV4 work itself: the signature checked with the stand-ins and made again with the real key, each a canonical request hashed and a signing key derived (four HMAC-SHA256), and the headers rewritten ({^DecideKinds/sigv4$ allocs/op} allocations)' \
	-goal 'DecideRequest, a SigV4 request re-signed: allocations|^DecideKinds/sigv4$|allocs/op|<=|200' \
	-goal 'DecideRequest, an OAuth token swapped (minted), at most 200 ns over a plain swap|^DecideKinds/oauth$|ns/op|<=|@^DecideKinds/plain$+200' \
	-goal 'DecideRequest, an OAuth token swapped (minted): allocations|^DecideKinds/oauth$|allocs/op|<=|2' || status=1
go test ./filter/envoyfilter -run '^$' -bench . -benchmem \
	| table -title "the Envoy adapter over fakes of the SDK (no Envoy here)" || status=1
go test ./filter/module -run '^$' -bench PassedRequest -benchmem \
	| table -title "one 1 KiB request the dynamic module passes, filter's creation to its destruction, over a fake ABI that copies headers and body into the filter's memory as Envoy's does" \
	-goal 'the module, a passed 1 KiB request: allocations|^PassedRequest$|allocs/op|<=|0' || status=1

# controlplane render: a cold process, 10 to 400 targets.
go test ./controlplane -run '^$' -bench RenderCold -benchtime 5x \
	| table -title "controlplane render, cold process (secrets = targets/2; 400 targets = 200 secrets)" -vs 'RenderCold/targets=10/fresh' \
	-goal 'controlplane render cold, 200 secrets, 400 targets, the best of 5 (DIR on this disk)|^RenderCold/targets=400/fresh$|best-ms/op|<=|150|the same render into tmpfs takes {^RenderCold/targets=400/fresh-tmpfs$ best-ms/op} at best; writing its {^RenderCold/targets=400/fresh$ files} again on this disk right after each render, nothing rendered, takes {^RenderCold/targets=400/fresh$ files-only-ms/op}: the creates of this ext4 disk, not the render' \
	-goal 'controlplane render cold, 200 secrets, 400 targets, the best of 5 (DIR on tmpfs)|^RenderCold/targets=400/fresh-tmpfs$|best-ms/op|<=|150' \
	-goal 'envoy.json, 200 secrets, 400 targets|^RenderCold/targets=400/fresh$|envoy.json-bytes|<=|600000' || status=1

# custodian serve and Envoy with the module: each
# against the same upstream reached directly, in separate processes; beside
# them Envoy alone (the same envoy.json without the module), Envoy + module
# on two workers and with GOMAXPROCS=1 and =CPUs.
go test ./e2e -run '^$' -bench '^BenchmarkServe$' -benchtime 1x -count=1 || status=1

# The Effector.
go test ./effector -run '^$' -bench 'Effect' -benchtime 2s \
	| table -title "signed http effect vs a direct call to the same upstream (x-direct: ratio)" \
	-goal 'Effector: an http effect that names a secret, p50 c=1|^Effect/answer=1KiB/secret=bearer$|p50-ms|<=|3' \
	-goal 'Effector: effects/s, 32 concurrent, bearer|^EffectsPerSecond$|effects/s|>=|1500|the same 32 callers calling the upstream straight, a new TLS connection each as an effect has (resumed), reach {^EffectsPerSecond$ direct-fresh/s}: an effect opens its own connection so no request is ever sent twice on a stale one (effector/README.md)' || status=1
go test ./effector -run '^$' -bench 'SecretEffectsRSS' -benchtime 1x \
	| table -title "the Effector's resident memory over 1,000 effects that name a held secret" \
	-goal 'Effector: RSS after 1,000 effects that name a secret|^SecretEffectsRSS$|rss-MiB|<=|100' \
	-goal 'Effector: RSS growth from 100 to 1,000 such effects (flat)|^SecretEffectsRSS$|growth-MiB|<=|32' || status=1
go test ./effector/internal/confine -run '^$' -bench Start -benchtime 200x \
	| table -title "start cost of effector confine -- /bin/true beside a bare exec, the smallest static Go program that executes it (go-floor: the Go runtime's own start), the same Go binary unconfined, and bwrap" -vs '^Start/bare$' \
	-goal 'effector-confine -- /bin/true, at most bwrap|^Start/effector-confine$|ns/op|<=|@^Start/bwrap$' \
	-goal 'effector-confine -- /bin/true, at most 1.5 ms over a bare exec|^Start/effector-confine$|ns/op|<=|@^Start/bare$+1500000|the smallest static Go program that only executes /bin/true takes {^Start/go-floor$ ns/op} against a bare exec of {^Start/bare$ ns/op}: the Go runtime'"'"'s start is most of the budget, and the confiner (Landlock, seccomp, capabilities, close_range) the rest' || status=1
go test ./effector -run '^$' -bench 'CommandStart|HundredCommands' -benchtime 2s \
	| table -title "start cost of a full signed command effect; 100 concurrent commands settling with no survivor" -vs '^CommandStart/bare$' || status=1

# The push kind: start to settle through the built binary
# against a plain git push of the same commit to the same sshd remote.
go test ./effector -run '^$' -bench '^BenchmarkPush$' -benchtime 2s \
	| table -title "push effect start-to-settle vs a plain git push to the same remote (x-plain: ratio)" -vs '^Push/plain$' || status=1

# custodian run: HTTPS through the mediator vs direct vs mitmdump.
command -v mitmdump >/dev/null || echo "bench: mitmdump not installed (apt-get install mitmproxy); its column is left out"
go test ./custodian/internal/mediator -run '^$' -bench BenchmarkHTTPS -benchtime 10000x || status=1

summary() {
	echo "| figure | now | goal | | what stops it |"
	echo "| --- | --- | --- | --- | --- |"
	while IFS=$'\t' read -r figure now goal mark limit; do
		echo "| $figure | $now | $goal | $mark | $limit |"
	done <"$JR2_BENCH_GOALS"
}
echo
echo "## The goals, from this run"
echo
summary

# The README's performance table is this run's summary: rewritten between
# its markers, with the run's date and machine, unless JR2_BENCH_README=0.
if [ "${JR2_BENCH_README:-1}" != 0 ] && grep -q '^<!-- bench:begin -->$' README.md; then
	table_file=$(mktemp /tmp/jr2-bench-readme.XXXXXX)
	{
		echo "<!-- bench:begin -->"
		echo "From \`make bench\` on $(date -u +%Y-%m-%d), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), one run; ratios are within that run."
		echo
		summary
		echo "<!-- bench:end -->"
	} >"$table_file"
	awk -v f="$table_file" '
		/^<!-- bench:begin -->$/ { while ((getline l < f) > 0) print l; skip = 1; next }
		/^<!-- bench:end -->$/ { skip = 0; next }
		!skip { print }' README.md >"$table_file.readme" && mv "$table_file.readme" README.md
	rm -f "$table_file"
	echo
	echo "bench: README.md's performance table rewritten from this run"
fi

exit $status
