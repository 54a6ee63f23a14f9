#!/bin/sh
# tests/run.sh — the README's test command: installs missing Debian packages, builds with
# meson (warnings are errors), runs the whole suite, and ends with `N passed, N failed`
# counted from meson's own test log, so a run that executed nothing cannot pass unseen. Two
# tests at a time (the black-box ones that start several daemons on the mock cluster run
# alone: is_parallel false), which keeps CI's two runs of the suite within its budget.
# Safe to run twice. Environment: BUILD_DIR (default build), MESON_ARGS (extra setup args),
# TEST_ARGS (extra `meson test` args, e.g. "--suite unit").
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
sh "$root/.ci/deps.sh"
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Dwerror=true -Dtests=enabled ${MESON_ARGS:-}
fi
ninja -C "$build" -j"$(nproc)"
set +e
meson test -C "$build" --print-errorlogs --num-processes 2 ${TEST_ARGS:-}
rc=$?
set -e
log="$build/meson-logs/testlog.json"
if [ -f "$log" ]; then
    /usr/bin/python3 - "$log" <<'PY'
import json, sys
passed = failed = skipped = 0
for line in open(sys.argv[1], errors="replace"):
    if not line.strip():
        continue
    try:
        r = json.loads(line).get("result", "")
    except ValueError:  # a record meson could not write whole: counted as a failure
        failed += 1
        continue
    if r in ("OK", "EXPECTEDFAIL"): passed += 1
    elif r == "SKIP": skipped += 1
    else: failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
else
    echo "0 passed, 1 failed"
    rc=1
fi
exit $rc
