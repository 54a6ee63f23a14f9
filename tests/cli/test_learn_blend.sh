#!/bin/bash
# test_learn_blend.sh — `cellcast learn --blend A` (issue 31, docs/learning.md "Blending with
# the seasonal naive"): the linear-only and Transformer candidates, and what is published of
# them, are A x the model + (1 - A) x the seasonal naive, scored by the gate as blended. On
# test_learn.sh's synthetic fleet (4 hourly cells, 6 bursts a day), fresh state directories:
# - --blend 0: the linear-only candidate is the seasonal naive, so it scores the seasonal
#   candidate's held-out MASE (within float32 rounding of the forecasts: 1e-5 relative);
# - --blend 0.5 on 4 days (Transformer candidate): each candidate file equals the same
#   round's unblended candidate (same seed and rows: the same training) blended by
#   tests/bench/blend_sim.py's independent writer of model.md's combination (2 ulp), its
#   metadata says the weight, the record says it, and the published file says it too;
# - --blend-candidates 0.5: linear-blend and transformer-blend scored beside the unblended
#   candidates (which stay the round's without blends), each the blend of its kind's
#   candidate, and the gate publishes the lowest criterion of the five (blended if a blend);
# - without --blend the record has no blend and the files no weight; --blend 1.5 refused,
#   and --blend with --blend-candidates.
#   usage: test_learn_blend.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir learn-blend KILL

mkdir -p "$TMP/data"
"$CLI" synth --cells 4 --days 10 --step 3600 --features prb_dl,prb_ul --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --burst-rate 6 --out "$TMP/s.csv" 2>/dev/null ||
    { fail "synth"; exit 1; }
sed '1s/prb_dl/load_a/;1s/prb_ul/load_b/' "$TMP/s.csv" >"$TMP/data/fleet.csv"
SHAPE=(--data-dir "$TMP/data" --patch-len 4 --d-model 8 --n-heads 2 --d-ff 8 --tx-steps 200
    --transformer-days 3 --seed 1 --once --quiet)
# round DIR DAYS [ARGS]: a --once round in a fresh state directory DIR
round() {
    local d=$1 days=$2
    shift 2
    rm -rf "${TMP:?}/$d"
    "$CLI" learn "${SHAPE[@]}" --out "$TMP/$d/m.safetensors" --data-days "$days" "$@" \
        2>>"$TMP/$d.log" || fail "round $d ($days days)"
}
# rec DIR EXPR: a Python expression of the last round's record r of DIR
rec() {
    tail -n 1 "$TMP/$1/rounds.jsonl" |
        python3 -c 'import json, sys; r = json.load(sys.stdin); print(eval(sys.argv[1]))' "$2"
}
# meta FILE: the file's blend_seasonal metadata, read from its safetensors header
meta() {
    python3 - "$1" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
print(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"].get("blend_seasonal"))
PY
}
# same_weights A B: every tensor of A equals B's within float32 rounding (the helper says how)
same_weights() { python3 "$(dirname "$0")/../helpers/same_weights.py" "$1" "$2"; }

# 1. --blend 0: the linear-only candidate becomes the seasonal naive.
round zero 3 --blend 0 --transformer-days 100
lin=$(rec zero '[c["mase"] for c in r["candidates"] if c["kind"] == "linear"][0]')
sn=$(rec zero '[c["mase"] for c in r["candidates"] if c["kind"] == "seasonal"][0]')
if python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-5 * b)' \
    "$lin" "$sn" && [ "$(rec zero 'r["blend"]["weight"]')" = 0.0 ] &&
    [ "$(meta "$TMP/zero/candidate-linear.safetensors")" = 0 ]; then
    ok "--blend 0: the linear-only candidate scores the seasonal naive ($lin, $sn)"
else
    fail "--blend 0: linear $lin, seasonal $sn, record $(rec zero 'r.get("blend")')"
fi

# 2. --blend 0.5 with a Transformer: the candidates are the unblended ones blended.
round plain 4
round half 4 --blend 0.5
bad=""
for k in linear transformer; do
    python3 "$HERE/../bench/blend_sim.py" blend "$TMP/plain/candidate-$k.safetensors" \
        "$TMP/want-$k.safetensors" 0.5 || bad+=" $k: blend_sim.py failed"
    d=$(same_weights "$TMP/half/candidate-$k.safetensors" "$TMP/want-$k.safetensors") ||
        bad+=" $k: tensors $d differ"
    [ "$(meta "$TMP/half/candidate-$k.safetensors")" = 0.5 ] || bad+=" $k: no weight 0.5"
done
pub=$(rec half 'r.get("published")')
case $pub in
linear | transformer) [ "$(meta "$TMP/half/m.safetensors")" = 0.5 ] || bad+=" published: no weight" ;;
seasonal) [ "$(meta "$TMP/half/m.safetensors")" = None ] || bad+=" seasonal published blended" ;;
*) bad+=" nothing published ($pub)" ;;
esac
if [ -z "$bad" ] && [ "$(rec half 'r["blend"]["weight"]')" = 0.5 ] &&
    [ "$(rec plain '"blend" in r')" = False ] &&
    [ "$(meta "$TMP/plain/candidate-transformer.safetensors")" = None ]; then
    ok "--blend 0.5: candidates are the round's models blended; published $pub"
else
    fail "--blend 0.5:$bad; record $(rec half 'r.get("blend")') / $(rec plain 'r.get("blend")')"
fi

# 3. --blend-candidates 0.5: the blends are two more candidates beside the models, each the
# round's candidate of its kind blended; the gate takes the lowest criterion of the five
# (no model in service, so the best is published: a blend's refit is blended too).
round cand 4 --blend-candidates 0.5
bad=""
for k in linear transformer; do
    d=$(same_weights "$TMP/cand/candidate-$k-blend.safetensors" "$TMP/want-$k.safetensors") ||
        bad+=" $k-blend: tensors $d differ from the blend of the unblended candidate"
    d=$(same_weights "$TMP/cand/candidate-$k.safetensors" "$TMP/plain/candidate-$k.safetensors") ||
        bad+=" $k: tensors $d differ from the round without blends"
done
pub=$(rec cand 'r.get("published")')
best=$(rec cand 'min((c for c in r["candidates"] if "mase" in c), key=lambda c: r["gate_pool"]["criterion"][c["kind"]])["kind"]')
kinds=$(rec cand '" ".join(c["kind"] for c in r["candidates"])')
case $pub in
*-blend) [ "$(meta "$TMP/cand/m.safetensors")" = 0.5 ] || bad+=" published $pub: no weight" ;;
*) [ "$(meta "$TMP/cand/m.safetensors")" = None ] || bad+=" published $pub blended" ;;
esac
if [ -z "$bad" ] && [ "$pub" = "$best" ] &&
    [ "$kinds" = "linear seasonal transformer linear-blend transformer-blend" ] &&
    [ "$(rec cand 'r["blend"]["candidates_weight"]')" = 0.5 ] &&
    [ "$(rec plain '" ".join(c["kind"] for c in r["candidates"])')" = "linear seasonal transformer" ]; then
    ok "--blend-candidates 0.5: five candidates, the best published ($pub)"
else
    fail "--blend-candidates 0.5:$bad; published $pub, best $best, kinds $kinds"
fi

# 4. Both options at once are refused before any round, and so is a weight outside [0, 1].
if ! "$CLI" learn "${SHAPE[@]}" --out "$TMP/both/m.safetensors" --data-days 3 --blend 0.5 \
    --blend-candidates 0.5 2>"$TMP/both.log" && [ ! -e "$TMP/both/m.safetensors" ]; then
    ok "--blend with --blend-candidates refused: $(head -c 120 "$TMP/both.log")"
else
    fail "--blend with --blend-candidates accepted"
fi
if ! "$CLI" learn "${SHAPE[@]}" --out "$TMP/bad/m.safetensors" --data-days 3 --blend 1.5 \
    2>"$TMP/bad.log" && [ ! -e "$TMP/bad/m.safetensors" ]; then
    ok "--blend 1.5 refused: $(head -c 120 "$TMP/bad.log")"
else
    fail "--blend 1.5 accepted"
fi

[ "$FAILS" = 0 ] && echo "learn-blend: all checks passed"
exit $((FAILS > 0))
