#!/bin/bash
# test_train_select.sh — `cellcast train --select mae|mase` end to end: the criterion a
# model was kept by (its val_mae / val_mase metadata) is the MAE and MASE `cellcast eval`
# gives on the same validation rows (--split A,0: the rows after A scored, the MASE scale
# from the rows before it, a day's seasonal naive), and --mase-season changes the scale;
# --linear-init naive --eval-start keeps a model no worse than naive on the criterion.
# Two synthetic hourly cells of 12 days with no missing step, so that eval's MASE pooled
# over the pairs is the mean over the cells the criterion takes. About a second.
#   usage: test_train_select.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir train-select

"$CLI" synth --cells 2 --days 12 --step 3600 --features prb_dl --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --out "$TMP/s.csv" 2>/dev/null || { fail "synth"; exit 1; }
SHAPE=(--patch-len 4 --n-patches 4 --d-model 8 --n-heads 2 --d-ff 8 --horizon 4
    --linear-window 24 --steps 60 --eval-every 20 --split 0.7,0.3 --threads 1 --quiet)

# meta MODEL KEY: a string of the model's metadata (cellcast info)
meta() { "$CLI" info --model "$1" | sed -n "s/.*\"$2\": \"\\([^\"]*\\)\".*/\\1/p"; }
# close A B: |A - B| <= 1e-4 |B|
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(a != "" && (d < 0 ? -d : d) <= 1e-4 * (b < 0 ? -b : b)) }'; }

for sel in mae mase; do
    m="$TMP/$sel.safetensors"
    "$CLI" train --data "$TMP/s.csv" --out "$m" "${SHAPE[@]}" --select "$sel" ||
        { fail "train --select $sel"; continue; }
    [ "$(meta "$m" select)" = "$sel" ] || fail "--select $sel: metadata select '$(meta "$m" select)'"
    ev=$("$CLI" eval --model "$m" --data "$TMP/s.csv" --split 0.7,0 --horizon 4 --json |
        python3 -c "import json,sys; o=json.load(sys.stdin)['methods']['model']['overall']; print(o['mae'], o['mase'])")
    read -r emae emase <<<"$ev"
    vmae=$(meta "$m" val_mae) vmase=$(meta "$m" val_mase)
    if close "$vmae" "$emae" && close "$vmase" "$emase"; then
        ok "--select $sel: val_mae $vmae, val_mase $vmase = eval's $emae, $emase"
    else
        fail "--select $sel: val_mae $vmae, val_mase $vmase; eval on the validation rows: $emae, $emase"
    fi
done
# the scale of a one-step naive instead of a day's: another number for the same weights
"$CLI" train --data "$TMP/s.csv" --out "$TMP/s1.safetensors" "${SHAPE[@]}" --select mase \
    --mase-season 1 || fail "train --mase-season 1"
a=$(meta "$TMP/mase.safetensors" val_mase) b=$(meta "$TMP/s1.safetensors" val_mase)
[ -n "$b" ] && ! close "$b" "$a" && ok "--mase-season 1: val_mase $b (a day: $a)" ||
    fail "--mase-season 1: val_mase '$b', a day's '$a'"


# --linear-init naive --eval-start: the start is the last-value forecast (after one step at
# the smallest rate, eval's model MAE is naive's), so the kept model is no worse than naive
# on the criterion; a model without a linear path is refused
# evmae MODEL: eval's model and naive MAE on the validation rows
evmae() { "$CLI" eval --model "$1" --data "$TMP/s.csv" --split 0.7,0 --horizon 4 --json |
    python3 -c "import json,sys; m=json.load(sys.stdin)['methods']; print(m['model']['overall']['mae'], m['naive']['overall']['mae'])"; }
NV=(--linear-init naive --eval-start --select mae)
if "$CLI" train --data "$TMP/s.csv" --out "$TMP/n1.safetensors" "${SHAPE[@]}" "${NV[@]}" \
    --steps 1 --lr 1e-7; then
    read -r m n <<<"$(evmae "$TMP/n1.safetensors")"
    close "$m" "$n" && ok "naive start: model MAE $m = naive $n" ||
        fail "naive start: model MAE $m, naive $n"
else fail "train --linear-init naive --steps 1"; fi
if "$CLI" train --data "$TMP/s.csv" --out "$TMP/n60.safetensors" "${SHAPE[@]}" "${NV[@]}"; then
    read -r m n <<<"$(evmae "$TMP/n60.safetensors")"
    v=$(meta "$TMP/n60.safetensors" val_mae)
    awk -v v="$v" -v n="$n" 'BEGIN { exit !(v != "" && v <= n * (1 + 1e-4)) }' &&
        ok "naive start, 60 steps: val_mae $v <= naive $n (eval's model $m)" ||
        fail "naive start, 60 steps: val_mae '$v' above naive $n"
else fail "train --linear-init naive"; fi
"$CLI" train --data "$TMP/s.csv" --out "$TMP/n0.safetensors" "${SHAPE[@]}" "${NV[@]}" \
    --linear-window 0 2>"$TMP/n0.err" && fail "--linear-init naive --linear-window 0 accepted" ||
    { grep -q 'needs a linear path' "$TMP/n0.err" && ok "naive start without a linear path refused" ||
        fail "naive start without a linear path: $(cat "$TMP/n0.err")"; }

# every run ends with its kept weights' validation MAE and MSE against the last value's on the same
# targets (val_mae_vs_last, and per KPI val_mae_vs_last_kpi): eval's model MAE over naive's
# on the validation rows; a model worse than the last value by more than 2 % is named in a
# warning, even under --quiet; the naive start after one step at the smallest rate is a tie
# and not named. The untrained random start (one step at the smallest rate) loses to it.
"$CLI" train --data "$TMP/s.csv" --out "$TMP/r1.safetensors" "${SHAPE[@]}" --steps 1 --lr 1e-7 \
    2>"$TMP/r1.err" || fail "train --steps 1 (random start)"
read -r m n <<<"$(evmae "$TMP/r1.safetensors")"
want=$(awk -v m="$m" -v n="$n" 'BEGIN { printf "%.4f", m / n }')
v=$(meta "$TMP/r1.safetensors" val_mae_vs_last) k=$(meta "$TMP/r1.safetensors" val_mae_vs_last_kpi)
v2=$(meta "$TMP/r1.safetensors" val_mse_vs_last)
awk -v v="$v2" 'BEGIN { exit !(v != "" && v > 1.02) }' && ok "random start: val_mse_vs_last $v2" ||
    fail "random start: val_mse_vs_last '$v2'"
# the KPI's ratio pools its two cells as eval's overall MAE does; val_mae_vs_last is the
# geometric mean of the cells' ratios, so near it but not equal
awk -v k="$k" -v w="$want" -v v="$v" 'BEGIN { d = k - w; exit !(k != "" && (d < 0 ? -d : d) <= 5e-4 * w && v > 1.02 && v / k > 0.9 && v / k < 1.1) }' &&
    ok "random start: val_mae_vs_last_kpi $k = eval's model/naive MAE $m / $n (cells' mean $v)" ||
    fail "random start: val_mae_vs_last_kpi '$k' (mean '$v'), eval's model/naive MAE $m / $n = $want"
grep -q "warning: .*worse than the last value on 1 of 1 KPIs (MAE/MSE ratio: prb_dl .*); train with --fallback, or docs" "$TMP/r1.err" &&
    ok "random start: warned, --fallback suggested (quiet run)" || fail "random start not warned: $(cat "$TMP/r1.err")"
# with the selection given, --fallback does not apply and is not suggested
"$CLI" train --data "$TMP/s.csv" --out "$TMP/r2.safetensors" "${SHAPE[@]}" --steps 1 --lr 1e-7 \
    --select nll 2>"$TMP/r2.err" || fail "train --steps 1 --select nll"
grep -q "warning: .*worse than the last value" "$TMP/r2.err" && ! grep -q -- "--fallback" "$TMP/r2.err" &&
    ok "--select given: warned, --fallback not suggested" || fail "--select nll: $(cat "$TMP/r2.err")"
"$CLI" train --data "$TMP/s.csv" --out "$TMP/n1b.safetensors" "${SHAPE[@]}" "${NV[@]}" \
    --steps 1 --lr 1e-7 2>"$TMP/n1b.err" || fail "train --linear-init naive --steps 1"
v=$(meta "$TMP/n1b.safetensors" val_mae_vs_last)
awk -v v="$v" 'BEGIN { exit !(v != "" && v > 0.98 && v <= 1.02) }' &&
    ! grep -q "worse than the last value" "$TMP/n1b.err" &&
    ok "naive start: val_mae_vs_last $v, no warning" ||
    fail "naive start: val_mae_vs_last '$v'; $(cat "$TMP/n1b.err")"

# --fallback: the same losing run trains again with the fallback options and keeps the
# second model (the naive start: a tie with the last value, below the first), its metadata
# saying so; no .fallback file is left. It excludes a given loss or selection.
"$CLI" train --data "$TMP/s.csv" --out "$TMP/f1.safetensors" "${SHAPE[@]}" --steps 1 --lr 1e-7 \
    --fallback 2>"$TMP/f1.err" || fail "train --steps 1 --fallback"
v=$(meta "$TMP/f1.safetensors" val_mae_vs_last) fb=$(meta "$TMP/f1.safetensors" fallback)
if grep -q "training again with --mae-weight 1 --nll-mean 0 --select mase --linear-init naive --eval-start" "$TMP/f1.err" &&
    grep -q "kept the second model (MAE 1.000, MSE 1.000 of the last value's, against 1.4" "$TMP/f1.err" &&
    ! grep -q "warning: on the validation rows" "$TMP/f1.err" &&
    [ "$(meta "$TMP/f1.safetensors" select)" = mase ] && [ -n "$fb" ] &&
    awk -v v="$v" 'BEGIN { exit !(v > 0.98 && v <= 1.02) }' &&
    ! ls "$TMP"/f1.safetensors.fallback* >/dev/null 2>&1 && [ -f "$TMP/f1.safetensors.optim" ]; then
    ok "fallback: kept the second model, val_mae_vs_last $v, metadata fallback '$fb'"
else
    fail "fallback: val_mae_vs_last '$v', fallback '$fb'; $(cat "$TMP/f1.err"); $(ls "$TMP")"
fi
grep -q "training again" "$TMP/r1.err" && fail "a run without --fallback trained again" ||
    ok "no fallback without --fallback"
"$CLI" train --data "$TMP/s.csv" --out "$TMP/f3.safetensors" "${SHAPE[@]}" --fallback \
    --select nll 2>"$TMP/f3.err" && fail "--fallback --select nll accepted" ||
    { grep -q -- "--fallback applies to a new tx/3 model with the default loss" "$TMP/f3.err" &&
        ok "--fallback --select refused" || fail "--fallback --select nll: $(cat "$TMP/f3.err")"; }

[ "$FAILS" = 0 ] && echo "train --select: all checks passed"
exit $((FAILS > 0))
