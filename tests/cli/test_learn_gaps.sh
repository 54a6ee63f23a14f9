#!/bin/bash
# test_learn_gaps.sh — `cellcast learn` on cells with gaps (issue 31: replays of sets the
# learner was not tuned on, docs/results.md "Sets the learner was not tuned on"). Three
# hourly cells missing half (and 30 %) of their steps at random, 4 days:
#   - the round's step is 3600 s, the step `cellcast train` and `eval` read (the learner
#     took each cell's median difference: 7200 s);
#   - the linear-only candidate keeps only windows whose every horizon step is observed, so
#     it fits a handful of samples (30 %: 4) or none (50 %: refused): the learner says so on
#     stderr (it said nothing) and its summary line prints no "nan" (eval's `linear`
#     skipped: "-").
# The same cells whole: step 3600 s, no such warning. `--step 7200` on the gappy cells: the
# round's step is 7200 s.
#   usage: test_learn_gaps.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir learn-gaps

for rate in 0.5 0.3 0; do
    mkdir -p "$TMP/d$rate" "$TMP/o$rate"
    "$CLI" synth --cells 3 --days 5 --step 3600 --features prb_dl --missing-rate "$rate" \
        --gap-rate 0 --outage-rate 0 --seed 3 --out "$TMP/d$rate/fleet.csv" 2>/dev/null ||
        { fail "synth"; exit 1; }
    "$CLI" learn --data-dir "$TMP/d$rate" --out "$TMP/o$rate/model.safetensors" --once \
        --data-days 4 --tx-steps 50 2>"$TMP/log$rate" || fail "learn, missing rate $rate: $(tail -3 "$TMP/log$rate")"
    step=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["step_seconds"])' \
        "$TMP/o$rate/rounds.jsonl" 2>/dev/null)
    [ "$step" = 3600 ] || fail "missing rate $rate: the round's step is $step, not 3600"
    ! grep -qi 'nan' "$TMP/log$rate" || fail "missing rate $rate: $(grep -i nan "$TMP/log$rate")"
done
grep -q 'warning: the linear-only candidate' "$TMP/log0.5" ||
    fail "50 %: no warning on the linear-only candidate: $(grep 'round 1' "$TMP/log0.5")"
grep -q 'warning: the linear-only candidate was fitted on [0-9]* windows' "$TMP/log0.3" ||
    fail "30 %: no warning on the linear-only fit's few windows: $(grep 'round 1' "$TMP/log0.3")"
! grep -q 'warning: the linear-only candidate' "$TMP/log0" ||
    fail "the warning on whole cells: $(grep 'linear-only' "$TMP/log0")"
ok "cells missing half or 30 % of their steps: step 3600 s, the linear-only fit's few windows named, no nan"

# --step: the operator's step for cells sampled irregularly (NAB's realTraffic: ~5-10
# minutes); it was no option of the learner, though its --time-index help names it
mkdir -p "$TMP/o-step"
"$CLI" learn --data-dir "$TMP/d0.5" --out "$TMP/o-step/model.safetensors" --once --data-days 4 \
    --tx-steps 50 --step 7200 2>"$TMP/log-step" || fail "learn --step 7200: $(tail -2 "$TMP/log-step")"
step=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["step_seconds"])' \
    "$TMP/o-step/rounds.jsonl" 2>/dev/null)
[ "$step" = 7200 ] || fail "--step 7200: the round's step is $step"
ok "--step 7200: the round's step is the one given"
[ "$FAILS" = 0 ]
