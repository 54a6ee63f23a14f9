#!/bin/bash
# test_train_outliers.sh — `cellcast train` tells outlier batches from a diverging loss
# (issue 31). One isolated spike in the training rows (a KPI of 5-40 at 3000: a hundred
# sigmas of its window) makes about one batch in five cost 10-1000x the others, each alone,
# while the median batch loss does not rise: the run names them outlier batches and does
# not say the loss diverged. The same shape on the clean rows with --lr 1 --clip 0 lifts
# the median batch loss from ~0.8 to ~7 after the warmup: that run says it diverged.
# Three synthetic hourly cells of 10 days; under a second.
#   usage: test_train_outliers.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir train-outliers

"$CLI" synth --cells 3 --days 10 --step 3600 --features prb_dl --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --out "$TMP/s.csv" 2>/dev/null || { fail "synth"; exit 1; }
# row 301: step 99 of cell0002, inside the training rows (split 0.8 of 240 steps)
awk -F, 'BEGIN { OFS = "," } NR == 301 { $3 = 3000 } { print }' "$TMP/s.csv" >"$TMP/spiky.csv"
SHAPE=(--patch-len 4 --n-patches 4 --d-model 8 --n-heads 2 --d-ff 8 --horizon 4
    --linear-window 24 --eval-every 20 --split 0.8,0.2 --threads 1 --steps 300)

for seed in 1 2; do
    "$CLI" train --data "$TMP/spiky.csv" --out "$TMP/m$seed.safetensors" "${SHAPE[@]}" \
        --seed "$seed" 2>"$TMP/spiky$seed.log" || { fail "train on the spiky rows (seed $seed)"; continue; }
    line=$(grep -o "[0-9]* outlier batch(es).*" "$TMP/spiky$seed.log")
    if grep -q "the training loss diverged" "$TMP/spiky$seed.log"; then
        fail "one spike, seed $seed: says the loss diverged: $(grep diverged "$TMP/spiky$seed.log")"
    elif [ -z "$line" ]; then
        fail "one spike, seed $seed: no outlier batches named; log in $TMP/spiky$seed.log"
    else
        ok "one spike, seed $seed: ${line:0:100}..."
    fi
done

"$CLI" train --data "$TMP/s.csv" --out "$TMP/d.safetensors" "${SHAPE[@]}" --seed 1 \
    --lr 1 --clip 0 --warmup 60 2>"$TMP/diverge.log" || fail "train with --lr 1"
if grep -q "warning: the training loss diverged: the median" "$TMP/diverge.log"; then
    ok "--lr 1 --clip 0: $(grep -o 'the training loss diverged: [^;]*' "$TMP/diverge.log")"
else
    fail "--lr 1 --clip 0: no divergence warning; log in $TMP/diverge.log"
fi
[ "$FAILS" = 0 ] && echo "train outliers: all checks passed"
exit $((FAILS > 0))
