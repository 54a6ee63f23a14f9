#!/bin/sh
# .ci/deps.sh — installs the Debian 12 packages cellcast needs, only those missing.
# Safe to run twice; needs root (or sudo) only when something is missing.
set -eu
pkgs="build-essential meson ninja-build pkg-config libevent-dev libjansson-dev
libopenblas-dev libyaml-dev librdkafka-dev libcmocka-dev kcat curl clang
libclang-rt-dev clang-format python3 python3-yaml python3-jsonschema prometheus prometheus-alertmanager zlib1g-dev"
# npm (the OpenAPI linters, .ci/openapi-lint.sh): any install will do (NodeSource's nodejs
# ships it and conflicts with Debian's npm package)
command -v npm >/dev/null || pkgs="$pkgs npm"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# The dashboard (web/, `npm ci` at build time) and its browser test (tests/daemon/browser:
# playwright-core driving Debian's chromium). npm by command, not by package: a nodejs
# from elsewhere (NodeSource) bundles its own npm and conflicts with Debian's.
command -v npm >/dev/null || missing="$missing nodejs npm"
for p in chromium prometheus prometheus-alertmanager; do # the browser test; promtool for conf/prometheus-rules.yaml; tests/daemon/test_alertmanager.sh
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
