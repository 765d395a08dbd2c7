#!/usr/bin/env bash
# scripts/leftovers.sh CMD [ARG...]: runs CMD and fails (exit 1, listing
# each) when it leaves anything behind in the places tests write to, or in
# the clone it runs in; otherwise exits with CMD's code. .ci/run runs
# make test through it.
#
# A check that compares a listing before and after cannot see a file that
# was already there: on a machine that ran Envoy before, hot restart's
# /dev/shm/envoy_shared_memory_0 is "not new", and only a fresh machine
# shows it. So, as root, each scratch place (/tmp, /dev/shm, /var/tmp) is
# an overlay in a private mount namespace: what is there stays readable,
# and everything CMD creates or writes lands in the overlay's upper
# directory, where it is seen whether or not a file of that name existed.
# The clone and Go's caches are bound back through the overlay, so what is
# built stays built. Places that cannot be overlaid (/, /run, /run/netns)
# and the clone are compared by listing; a directory the system makes on
# first use (/run/netns) is no leftover, what is inside it is.
#
# Without root (or mount namespaces) every place is compared by listing,
# after one loud line; with JR2_REQUIRE_ALL=1 that is a failure instead.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/leftovers.sh CMD [ARG...]" >&2; exit 2; }

overlaid="/tmp /dev/shm /var/tmp"
listed="/ /run /run/netns"
system_dirs="/run/netns"
clone=$(git rev-parse --show-toplevel)

list() { # the entries of each place in $*, one path a line
	for d in "$@"; do { ls -A "$d" 2>/dev/null || true; } | sed "s|^|${d%/}/|"; done |
		while IFS= read -r p; do
			case " $system_dirs " in *" $p "*) [ -d "$p" ] && [ ! -L "$p" ] && continue ;; esac
			printf '%s\n' "$p"
		done
}
clone_state() {
	(cd "$clone" && { git status --porcelain --ignored | grep -v -e ' bin/$' -e 'node_modules/$' -e ' \.cache/$' || true; }) | sed 's|^|clone: |'
}

if [ "${JR2_LEFTOVERS_NS:-}" != 1 ]; then
	if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
		exec env JR2_LEFTOVERS_NS=1 unshare --mount --propagation private -- "$0" "$@"
	fi
	if [ "${JR2_REQUIRE_ALL:-}" = 1 ]; then
		echo "leftovers: cannot overlay $overlaid (needs root and a mount namespace), so a file that existed before the run would not be seen; run as root, or unset JR2_REQUIRE_ALL to compare listings only" >&2
		exit 1
	fi
	echo "leftovers: NOT CHECKED as on a fresh machine: not root, so $overlaid are compared by listing and a file that existed before the run is not seen" >&2
	listed="$overlaid $listed"
	overlaid=""
fi

# The overlays' upper directories live on a tmpfs of this namespace, in the
# clone's ignored .cache/ (a place no test writes to).
work="$clone/.cache/leftovers"
if [ -n "$overlaid" ]; then
	mkdir -p "$work"
	mount -t tmpfs -o mode=0700 jr2-leftovers "$work"
	keep_paths="$clone $(go env GOCACHE GOMODCACHE 2>/dev/null | tr '\n' ' ')"
	for place in $overlaid; do
		[ -d "$place" ] || continue
		n=$(echo "$place" | tr / _)
		mkdir -p "$work/$n/lower" "$work/$n/upper" "$work/$n/work"
		mount --bind "$place" "$work/$n/lower"
		mount -t overlay jr2-leftovers -o "lowerdir=$work/$n/lower,upperdir=$work/$n/upper,workdir=$work/$n/work" "$place"
		chmod --reference="$work/$n/lower" "$place"
		for k in $keep_paths; do
			case "$k/" in "$place"/*) [ -d "$k" ] && mount --bind "$work/$n/lower/${k#"$place"/}" "$k" ;; esac
		done
	done
fi

mkdir -p "$clone/.cache"
before=$(mktemp -p "$clone/.cache" leftovers-before.XXXXXX)
trap 'rm -f "$before"' EXIT
{ list $listed; clone_state; } | sort >"$before"

code=0
(unset JR2_LEFTOVERS_NS; "$@") || code=$?

new() {
	{ list $listed; clone_state; } | sort | comm -13 "$before" -
	for place in $overlaid; do
		n=$(echo "$place" | tr / _)
		up="$work/$n/upper"
		[ -d "$up" ] || continue
		# Everything written is in upper: a file is a leftover (new, or an
		# old one rewritten); a directory only when it is new (an old one is
		# copied up to hold what changed inside it). Whiteouts (deletions)
		# and what lies in a path bound back (the clone) are not.
		(cd "$up" && find . -mindepth 1) |
			while IFS= read -r rel; do
				p="${place%/}/${rel#./}"
				for k in ${keep_paths:-}; do case "$p/" in "$k"/*) continue 2 ;; esac; done
				if [ -d "$up/$rel" ] && [ -e "$work/$n/lower/${rel#./}" ]; then continue; fi
				[ -c "$up/$rel" ] && continue
				printf '%s\n' "$p"
			done
	done
}
left=$(new)
if [ -n "$left" ]; then
	echo "leftovers: $* left these behind (a test that does not clean up):" >&2
	printf '%s\n' "$left" | sed 's/^/  /' >&2
	exit 1
fi
echo "leftovers: $* left nothing behind in ${overlaid:+$overlaid (overlaid: nothing new or rewritten) }$listed or the clone"
exit "$code"
