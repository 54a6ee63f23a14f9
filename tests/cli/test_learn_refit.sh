#!/bin/bash
# test_learn_refit.sh — the learner's refit (issue 31, docs/learning.md "The refit"): the
# kind the gate chose is fitted again on every row of the round (the held-out rows
# included) with its recipe and seed, and that is published. On test_learn.sh's synthetic
# fleet (4 hourly cells, 6 bursts a day): a round on 3 days publishes the linear-only fit,
# one on 4 days the Transformer (fresh state directories, no model in service). Checked:
# - the published file is not the candidate scored (the weights differ) and its record
#   says so: refit.of is the scored candidate's hash, refit.hash the published file's,
#   refit.rows the round's every record (all.csv), the held-out scores the candidate's;
# - the published weights equal those of an independent fit on the same rows: the next
#   round's candidate of that kind (a fresh learner on one more day of data, whose training
#   rows are this round's every row), within float32 rounding (the ridge is solved in
#   double and each weight rounded to float32 once: 2 ulp of the weight plus 1 ulp of the
#   tensor's largest; the Transformer: the same seed and steps on one thread, so the same);
# - --no-refit publishes the scored candidate's bytes and writes no refit;
# - SIGTERM while the Transformer is refitted: exit 0, nothing written (no model, no
#   record, no round counted); SIGKILL there with a model in service: it stays whole;
# - --refresh: a round whose gate keeps the model in service publishes its kind refitted.
#   usage: test_learn_refit.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir learn-refit KILL

mkdir -p "$TMP/data"
"$CLI" synth --cells 4 --days 10 --step 3600 --features prb_dl,prb_ul --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --burst-rate 6 --out "$TMP/s.csv" 2>/dev/null ||
    { fail "synth"; exit 1; }
sed '1s/prb_dl/load_a/;1s/prb_ul/load_b/' "$TMP/s.csv" >"$TMP/data/fleet.csv"
SHAPE=(--data-dir "$TMP/data" --patch-len 4 --d-model 8 --n-heads 2 --d-ff 8 --tx-steps 200
    --transformer-days 3 --seed 1 --once)
# round DIR DAYS [ARGS]: a --once round in a fresh state directory DIR
round() {
    local d=$1 days=$2
    shift 2
    rm -rf "$TMP/$d"
    "$CLI" learn "${SHAPE[@]}" --out "$TMP/$d/m.safetensors" --data-days "$days" --quiet "$@" \
        2>>"$TMP/$d.log" || fail "round $d ($days days)"
}
# rec DIR EXPR: a Python expression of the published record r
rec() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$TMP/$1/m.safetensors.json"; }
# same_weights A B: every tensor of A equals B's within float32 rounding (the helper says how)
same_weights() { python3 "$(dirname "$0")/../helpers/same_weights.py" "$1" "$2"; }
# record_ok DIR KIND: the record of DIR publishes KIND refitted: refit.of the candidate's hash,
# refit.hash the record's (the published file's), refit.rows all.csv's records
record_ok() {
    local rows
    rows=$(($(wc -l <"$TMP/$1/all.csv") - 1))
    [ "$(rec "$1" 'r["published"]')" = "$2" ] &&
        [ "$(rec "$1" 'r["refit"]["of"] == [c["hash"] for c in r["candidates"] if c["kind"] == r["published"]][0]')" = True ] &&
        [ "$(rec "$1" 'r["refit"]["hash"] == r["hash"]')" = True ] &&
        [ "$(rec "$1" 'r["refit"]["rows"]')" = "$rows" ]
}

# 1. Linear-only: 3 days published and refitted; the independent fit: 4 days' candidate.
round lin 3
round lin_next 4
if record_ok lin linear && ! cmp -s "$TMP/lin/m.safetensors" "$TMP/lin/candidate-linear.safetensors" &&
    ! same_weights "$TMP/lin/m.safetensors" "$TMP/lin/candidate-linear.safetensors" >/dev/null; then
    ok "linear: the refit published, not the candidate scored (refit $(rec lin 'r["refit"]'))"
else
    fail "linear: published $(rec lin 'r.get("published")'), refit $(rec lin 'r.get("refit")')"
fi
if d=$(same_weights "$TMP/lin/m.safetensors" "$TMP/lin_next/candidate-linear.safetensors"); then
    ok "linear: the refit equals the ridge fit of the next round on the same rows"
else
    fail "linear: the refit differs from the next round's fit in: $d"
fi

# 2. Transformer: 4 days published and refitted; the independent run: 5 days' candidate.
round tx 4
round tx_next 5
if record_ok tx transformer && [ "$(rec tx 'r["refit"]["step_budget"]')" = 200 ] &&
    ! same_weights "$TMP/tx/m.safetensors" "$TMP/tx/candidate-transformer.safetensors" >/dev/null; then
    ok "transformer: the refit published, not the candidate scored (refit $(rec tx 'r["refit"]'))"
else
    fail "transformer: published $(rec tx 'r.get("published")'), refit $(rec tx 'r.get("refit")')"
fi
if d=$(same_weights "$TMP/tx/m.safetensors" "$TMP/tx_next/candidate-transformer.safetensors"); then
    ok "transformer: the refit equals the next round's candidate on the same rows (seed, steps)"
else
    fail "transformer: the refit differs from the next round's candidate in: $d"
fi

# 3. --no-refit: the scored candidate's bytes, no refit in the record.
round off 3 --no-refit
if cmp -s "$TMP/off/m.safetensors" "$TMP/off/candidate-$(rec off 'r["published"]').safetensors" &&
    [ "$(rec off '"refit" in r')" = False ]; then
    ok "--no-refit: the candidate scored is published as it is"
else
    fail "--no-refit: published $(rec off 'r.get("published")'), refit $(rec off 'r.get("refit")')"
fi

# 4. Signals while the Transformer is refitted (a long budget: early stopping ends it after
# ~1000 steps, about a second; the signal goes when the learner says it refits).
# long_refit DIR: a 4-day round of DIR in the background (PIDS[0]); waits for the refit
long_refit() {
    "$CLI" learn "${SHAPE[@]}" --out "$TMP/$1/m.safetensors" --data-days 4 --tx-steps 1000000 \
        >/dev/null 2>"$TMP/$1.log" &
    PIDS=($!)
    for _ in $(seq 1200); do
        grep -q "refitting the transformer" "$TMP/$1.log" && return 0
        kill -0 "${PIDS[0]}" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
rm -rf "$TMP/stop"
if long_refit stop; then
    kill -TERM "${PIDS[0]}"
    wait "${PIDS[0]}"
    rc=$?
    PIDS=()
    if [ "$rc" = 0 ] && [ ! -e "$TMP/stop/m.safetensors" ] && [ ! -e "$TMP/stop/m.safetensors.json" ] &&
        [ ! -e "$TMP/stop/state.json" ] && [ ! -e "$TMP/stop/refit.safetensors" ] &&
        ! ls "$TMP"/stop/*.tmp.* >/dev/null 2>&1 && grep -q "abandoned while refitting" "$TMP/stop.log"; then
        ok "SIGTERM while refitting: exit 0, nothing published, no round counted"
    else
        fail "SIGTERM while refitting: rc $rc; $(ls "$TMP/stop"); $(grep -v '^step' "$TMP/stop.log" | tail -2)"
    fi
else
    fail "SIGTERM while refitting: the round never refitted a Transformer ($(tail -1 "$TMP/stop.log"))"
fi
round kill 3 # a linear model in service; the 4-day Transformer beats it (section 2's scores)
h=$(cksum <"$TMP/kill/m.safetensors")
if long_refit kill; then
    kill -KILL "${PIDS[0]}"
    wait "${PIDS[0]}" 2>/dev/null
    PIDS=()
    if [ "$(cksum <"$TMP/kill/m.safetensors")" = "$h" ] && "$CLI" info --model "$TMP/kill/m.safetensors" >/dev/null; then
        ok "SIGKILL while refitting: the model in service is whole and unchanged"
    else
        fail "SIGKILL while refitting: the model in service changed or does not load"
    fi
else
    fail "SIGKILL while refitting: the round never refitted a Transformer ($(tail -1 "$TMP/kill.log"))"
fi

# 5. --refresh: a linear model in service (3 days), a round on 4 days with linear-only
# candidates: its linear candidate is that model (the same rows: the refit), so the gate keeps
# it; with --refresh the kind in service is refitted on the 4 days and published (equal to the
# 5-day round's candidate), without it nothing is.
round keep 3 --transformer-days 100
cp -r "$TMP/keep" "$TMP/fresh"
h=$(cksum <"$TMP/keep/m.safetensors")
"$CLI" learn "${SHAPE[@]}" --out "$TMP/keep/m.safetensors" --data-days 4 --transformer-days 100 \
    --quiet 2>>"$TMP/keep.log" || fail "round keep 4"
"$CLI" learn "${SHAPE[@]}" --out "$TMP/fresh/m.safetensors" --data-days 4 --transformer-days 100 \
    --refresh --quiet 2>>"$TMP/fresh.log" || fail "round fresh 4"
round fresh_next 5 --transformer-days 100
if [ "$(cksum <"$TMP/keep/m.safetensors")" = "$h" ] &&
    tail -n 1 "$TMP/keep/rounds.jsonl" | grep -q '"decision":"refused' &&
    [ "$(rec fresh 'r["decision"]')" = "published: the kind in service refreshed on the newest rows (--refresh)" ] &&
    [ "$(rec fresh 'r["published"]')" = linear ] && [ "$(rec fresh 'r["parent"]')" != None ] &&
    same_weights "$TMP/fresh/m.safetensors" "$TMP/fresh_next/candidate-linear.safetensors" >/dev/null; then
    ok "--refresh: the kept kind refitted on the newest rows is published (without: refused)"
else
    fail "--refresh: $(rec fresh 'r["decision"]'); kept: $(tail -n 1 "$TMP/keep/rounds.jsonl" | head -c 300)"
fi

[ "$FAILS" = 0 ] && echo "learn-refit: all checks passed"
exit $((FAILS > 0))
