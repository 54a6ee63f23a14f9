#!/bin/sh
# daemon/quickstart.sh — the README's run command: installs missing Debian packages,
# builds with meson and runs cellcastd on the shipped configuration: embedded Kafka broker
# (librdkafka's mock cluster on loopback), the built-in synthetic demo feed and the shipped
# default model. Safe to run twice. Extra arguments go to cellcastd (e.g. --set http.port=9090).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
sh "$root/.ci/deps.sh"
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dtests=enabled
ninja -C "$build" -j"$(nproc)"
cd "$root"
echo "cellcastd: the API address is on the 'http: listening on' line (default http://127.0.0.1:8080); try curl -s localhost:8080/v1/cells/demo-0000/forecast" >&2
exec "$build/daemon/cellcastd" -c conf/cellcast.yaml "$@"
