#!/bin/sh
# .ci/fuzz.sh — builds the libFuzzer targets with clang (ASan+UBSan) in their own build dir
# and fuzzes one for a bounded time, starting from the committed seeds: FUZZ_TARGET=loader
# (weight files, default), kpi (KPI messages), snapshot (snapshot files), state
# (state-topic records), query (HTTP query strings) or csv (users' CSV exports).
# Safe to run twice. Exits non-zero on a crash, leak, sanitizer report or timeout; the
# offending input is left in $FUZZ_ARTIFACTS.
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_TIME seconds (default 20).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
time=${FUZZ_TIME:-20}
target=${FUZZ_TARGET:-loader}
case $target in
loader) corpus=$root/tests/data/fuzz_corpus; maxlen=65536 ;;
kpi) corpus=$root/tests/data/kpi_corpus; maxlen=16384 ;;
snapshot) corpus=$root/tests/data/snapshot_corpus; maxlen=32768 ;;
state) corpus=$root/tests/data/state_corpus; maxlen=32768 ;;
query) corpus=$root/tests/data/query_corpus; maxlen=4096 ;;
csv) corpus=$root/tests/data/csv_corpus; maxlen=8192 ;;
*) echo "fuzz.sh: unknown FUZZ_TARGET '$target' (loader|kpi|snapshot|state|query|csv)" >&2; exit 2 ;;
esac
artifacts=${FUZZ_ARTIFACTS:-$build/fuzz-artifacts}

command -v clang >/dev/null || { echo "fuzz.sh: clang is required (apt-get install clang libclang-rt-dev)" >&2; exit 1; }
if [ ! -f "$build/build.ninja" ]; then
    CC=clang meson setup "$build" "$root" -Dfuzz=true -Ddaemon=disabled -Dtests=enabled \
        -Dbuildtype=debugoptimized
fi
ninja -C "$build" -j2 "tests/fuzz/fuzz_$target"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"
# New inputs go to the first (scratch) corpus dir; the committed seeds are read only.
"$build/tests/fuzz/fuzz_$target" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 \
    -max_len=$maxlen -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "$corpus"
