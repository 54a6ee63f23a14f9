#!/bin/bash
# .ci/coretypes.sh — the unit suite and the scripts that compare numbers across programs once
# under each OpenBLAS kernel set this CPU can execute (OPENBLAS_CORETYPE=Prescott ...
# SkylakeX), because Debian's OpenBLAS (DYNAMIC_ARCH) picks its
# set by CPU model: a CPU it does not know gets an older set, whose summation order differs,
# and a float tolerance tuned on one set fails on another. The test binaries do not re-exec
# like cellcast and cellcastd (host/host.c), so the variable reaches them as set here; the
# scripts run with them pass it on to the programs they start (set by the operator, it wins
# over blas_coretype). The scripts: the parity tests (suite daemon: cellcastd and the offline
# tools on the same rows) and anomaly_eval, labels_outsider (suite cli), which sat in the
# unit suite before tests/ was sorted by what runs.
# Skipped: kafka and cluster (librdkafka's mock cluster, no BLAS; ~65 s of waiting each run).
# Environment: BUILD_DIR (default build, built by tests/run.sh first), CORETYPES (default:
# Prescott, Haswell and SkylakeX where /proc/cpuinfo lists their instructions: the oldest
# set (SSE3), the AVX2/FMA one (also what 0.3.21 gives AMD Zen) and the AVX-512 one, which
# span the summation orders of the sets between them; "all" adds Nehalem, Sandybridge, Zen).
# Prints one line per set and ends with `N passed, N failed` summed over them.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { # every flag named is in /proc/cpuinfo's
    local f
    for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done
}
if [ -z "${CORETYPES:-}" ] || [ "${CORETYPES:-}" = all ]; then
    all=${CORETYPES:-}
    CORETYPES=""
    has pni && CORETYPES+=" Prescott"
    [ -n "$all" ] && has sse4_2 && CORETYPES+=" Nehalem"
    [ -n "$all" ] && has avx && CORETYPES+=" Sandybridge"
    has avx2 fma && CORETYPES+=" Haswell"
    [ -n "$all" ] && has avx2 fma && CORETYPES+=" Zen"
    has avx512f avx512bw avx512dq avx512vl && CORETYPES+=" SkylakeX"
fi
ninja -C "$build" > /dev/null || { echo "coretypes: build FAILED"; echo "0 passed, 1 failed"; exit 1; }
tests="$(meson test -C "$build" --no-rebuild --list 2>/dev/null | sed -n 's|^cellcast:unit / ||p' |
    grep -vxE 'kafka|cluster') alert_parity nab_parity interval_parity anomaly_eval labels_outsider"
pass=0
fail=0
for core in $CORETYPES; do
    log=$build/meson-logs/coretype-$core.console # meson's own: coretype-$core.txt
    start=$(date +%s)
    # shellcheck disable=SC2086 # $tests: one word per test name
    OPENBLAS_CORETYPE=$core meson test -C "$build" --no-rebuild --print-errorlogs \
        --num-processes 1 --logbase "coretype-$core" $tests > "$log" 2>&1
    ok=$(sed -nE 's/^Ok: +([0-9]+).*/\1/p' "$log" | tail -n 1)
    bad=$(sed -nE 's/^(Fail|Unexpected Pass|Timeout): +([0-9]+).*/\2/p' "$log" |
        awk '{s += $1} END {print s + 0}')
    [ -n "$ok" ] || bad=$((bad + 1)) # meson printed no summary: count the run as failed
    pass=$((pass + ${ok:-0}))
    fail=$((fail + bad))
    echo "coretype $core: ${ok:-0} passed, $bad failed ($(($(date +%s) - start)) s)"
    [ "$bad" -eq 0 ] || grep -E ' (FAIL|TIMEOUT) |UNEXPECTEDPASS' "$log" | sort -u
done
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
