#!/bin/bash
# test_train_defaults.sh — `cellcast train` defaults on short data (docs/training.md,
# "Training on your own data"): a 10-day hourly cell (168 training rows) gets a look-back,
# normalisation and linear window of at most half its training rows (the 336-step defaults
# would make every sample a cold start), at least 1000 steps with the warmup inside them
# (20 epochs were 20 steps, all warmup), options given are kept (with a warning), and a file
# without a patch and a horizon of training rows is refused with a clear message, and one
# KPI column holding series of scales 10^6 apart is warned about. A tiny model: a few seconds.
#   usage: test_train_defaults.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir train-defaults

"$CLI" synth --cells 1 --days 10 --step 3600 --features prb_dl --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --out "$TMP/s.csv" 2>/dev/null || { fail "synth"; exit 1; }
TINY=(--d-model 8 --n-heads 2 --d-ff 8 --threads 1 --horizon 6)
# hp MODEL KEY: an integer hyperparameter of the model (cellcast info)
hp() { "$CLI" info --model "$1" | sed -n "s/.*\"$2\": \\([0-9]*\\).*/\\1/p" | head -1; }

m="$TMP/d.safetensors"
if "$CLI" train --data "$TMP/s.csv" --out "$m" "${TINY[@]}" 2>"$TMP/d.log"; then
    n=$(hp "$m" n_patches) M=$(hp "$m" norm_window) R=$(hp "$m" linear_window)
    # 240 rows, split 0.7: 168 training rows, half 84: N = 84/16 = 5, M = R = 84
    [ "$n" = 5 ] && [ "$M" = 84 ] && [ "$R" = 84 ] && ok "168 training rows: N $n, M $M, R $R" ||
        fail "168 training rows: N '$n', M '$M', R '$R' (want 5, 84, 84)"
    grep -q "look-back 80 steps" "$TMP/d.log" && ok "the shortened look-back is reported" ||
        fail "no look-back note: $(grep -v '^step' "$TMP/d.log")"
    grep -q " 1000 steps of " "$TMP/d.log" && ok "at least 1000 steps" ||
        fail "step count: $(grep ' steps of ' "$TMP/d.log")"
    # warmup at most 100 of 1000 steps: the first validation (step 20) is past it... not with
    # the old 100-step warmup, which was longer than the whole run
    lr=$(sed -n 's/^step 20\/1000 .* lr \([0-9.e+-]*\) .*/\1/p' "$TMP/d.log")
    [ "$lr" = "2.00e-04" ] && ok "warmup 100 of 1000 steps (lr $lr at step 20)" ||
        fail "lr at step 20 '$lr' (want 2.00e-04: validation every 20, warmup 100)"
else
    fail "train on 240 rows: $(cat "$TMP/d.log")"
fi

# options given are kept, with a warning
if "$CLI" train --data "$TMP/s.csv" --out "$TMP/g.safetensors" "${TINY[@]}" --n-patches 21 \
    --steps 20 2>"$TMP/g.log"; then
    n=$(hp "$TMP/g.safetensors" n_patches)
    [ "$n" = 21 ] && grep -q "warning: the look-back (336 steps)" "$TMP/g.log" &&
        ok "--n-patches 21 kept, with a warning" || fail "--n-patches 21: N '$n', $(grep -v '^step' "$TMP/g.log")"
else
    fail "train --n-patches 21: $(cat "$TMP/g.log")"
fi

# too short: 20 rows, 14 of them training rows, one patch and the horizon need 22
head -21 "$TMP/s.csv" >"$TMP/t.csv"
if "$CLI" train --data "$TMP/t.csv" --out "$TMP/t.safetensors" "${TINY[@]}" 2>"$TMP/t.log"; then
    fail "20 rows: trained"
else
    grep -q "no training window: the longest series has 14 training rows" "$TMP/t.log" &&
        ok "20 rows refused: $(tail -1 "$TMP/t.log")" || fail "20 rows: $(cat "$TMP/t.log")"
fi

# one KPI column holding series whose scales lie 10^6 apart (bytes beside a percentage):
# warned once, naming the KPI; two cells of like scale are not
"$CLI" synth --cells 2 --days 10 --step 3600 --features prb_dl --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --out "$TMP/two.csv" 2>/dev/null || fail "synth two cells"
awk -F, -v OFS=, 'NR > 1 && $2 == "cell0001" { $3 = $3 * 1e6 } { print }' "$TMP/two.csv" >"$TMP/far.csv"
for f in two far; do
    "$CLI" train --data "$TMP/$f.csv" --out "$TMP/$f.safetensors" "${TINY[@]}" --steps 2 \
        2>"$TMP/$f.log" || fail "train $f: $(tail -1 "$TMP/$f.log")"
done
w=$(grep -c "warning: KPI 'prb_dl': the series' sds range from" "$TMP/far.log")
[ "$w" = 1 ] && ok "scales 10^6 apart: warned ($(grep -o "sds range from [^;]*" "$TMP/far.log"))" ||
    fail "scales 10^6 apart: $w warnings: $(grep -v '^step' "$TMP/far.log")"
grep -q "warning: KPI" "$TMP/two.log" && fail "like scales warned: $(grep 'warning: KPI' "$TMP/two.log")" ||
    ok "like scales: no warning"

# the large cell flat for its first five days, then moving: its windows after the flat
# stretch are millions of norm.floors (the small cell's scale) and are left out of the loss,
# said and recorded; --xn-bound 0 keeps them (and the loss blows up)
awk -F, -v OFS=, 'NR > 1 && $2 == "cell0001" && ++n <= 120 { $3 = 5e7 } { print }' \
    "$TMP/far.csv" >"$TMP/flat.csv"
for b in 1000 0; do
    "$CLI" train --data "$TMP/flat.csv" --out "$TMP/flat$b.safetensors" "${TINY[@]}" --steps 20 \
        --xn-bound $b 2>"$TMP/flat$b.log" || fail "train flat, bound $b: $(tail -1 "$TMP/flat$b.log")"
done
line=$(grep "training samples had a normalised value beyond +-1000 and were left out" "$TMP/flat1000.log")
meta=$("$CLI" info --model "$TMP/flat1000.safetensors" 2>&1 | grep -o "xn_excluded[^,]*" | head -1)
loss() { grep -o "largest batch loss [^ ]*" "$1" | awk '{print $4}'; }
if [ -n "$line" ] && [ -n "$meta" ] && awk -v a="$(loss "$TMP/flat1000.log")" \
    -v b="$(loss "$TMP/flat0.log")" 'BEGIN { exit !(a < 1e4 && b > 1e6) }'; then
    ok "flat large cell: $(echo "$line" | cut -d: -f2 | cut -c1-40)…; $meta; largest batch loss $(loss "$TMP/flat1000.log") (--xn-bound 0: $(loss "$TMP/flat0.log"))"
else
    fail "flat large cell: line '$line', metadata '$meta', losses $(loss "$TMP/flat1000.log") / $(loss "$TMP/flat0.log")"
fi
grep -q "training samples had a normalised value" "$TMP/flat0.log" && fail "--xn-bound 0 left samples out"
grep -q "training samples had a normalised value" "$TMP/two.log" && fail "like scales: samples left out"

[ "$FAILS" = 0 ] && echo "train defaults: all checks passed"
exit $((FAILS > 0))
