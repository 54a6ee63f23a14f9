#!/bin/bash
# test_anomaly_eval.sh — `cellcast anomaly-eval` as a tool (docs/operations.md section 5):
# on a small synthetic series with the default model it runs, the model detector scores the
# history rows too (the daemon's state is warm when the test rows start; alerts are still
# counted from the test rows only), --variant adds one detector row per variant on the same
# engine pass, --set and --variant take alerts.* keys by name and refuse unknown ones, and
# --lag -1 (the model's horizon) is accepted while a lag beyond the horizon is refused, and
# --budget calibrates thresholds on the history rows (monotone in the budget; the novelty
# margin scaled with them), and --json gives the rows with their episode check.
#   usage: test_anomaly_eval.sh CELLCAST SOURCE_ROOT
set -u
CLI=${1:?cellcast binary}
ROOT=${2:?source root}
MODEL="$ROOT/models/default.safetensors" # F=8, S=900, HZ=24
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_files "$MODEL"
test_workdir anomaly-eval

"$CLI" synth --cells 2 --days 8 --seed 3 --burst-rate 0 --outage-rate 0 --gap-rate 0 \
    --missing-rate 0 >"$TMP/s.csv" 2>/dev/null || { echo "FAIL: cellcast synth"; exit 1; }
rows=$(($(wc -l <"$TMP/s.csv") - 1))
per_cell=$((rows / 2))
test_rows=$((per_cell - (per_cell * 8 / 10)))

"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --verbose \
    --set cooldown_steps=7 --variant lag_steps=0 --variant warn_z=6,crit_z=9 \
    >"$TMP/out" 2>"$TMP/err" || fail "anomaly-eval exit $?: $(tail -3 "$TMP/err")"
grep -q "cooldown 7" "$TMP/out" || fail "--set cooldown_steps=7 not applied: $(head -3 "$TMP/out")"
[ "$(grep -c '^model z>=' "$TMP/out")" = 3 ] || fail "want 3 model rows: $(cat "$TMP/out")"
grep -q '^variant lag_steps=0:' "$TMP/out" || fail "no row for --variant lag_steps=0"
grep -q '^model z>=6/9' "$TMP/out" || fail "no row for --variant warn_z=6,crit_z=9"
[ "$(grep -c '^3sigma-roll' "$TMP/out")" = 1 ] || fail "want one baseline row"
# history scoring: every cell scores (much) more steps than it has test rows
n=0
while read -r scored; do
    n=$((n + 1))
    [ "$scored" -gt $((test_rows + 100)) ] ||
        fail "a cell scored $scored steps, test rows $test_rows: history not scored"
done < <(sed -n 's/.*: \([0-9]*\) steps scored.*/\1/p' "$TMP/err")
[ "$n" -ge 2 ] || fail "no 'steps scored' lines in --verbose output"

"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --set nosuch=1 \
    >/dev/null 2>"$TMP/err" && fail "--set nosuch=1 accepted"
grep -q "unknown setting" "$TMP/err" || fail "--set nosuch: $(cat "$TMP/err")"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --variant warn_z \
    >/dev/null 2>"$TMP/err" && fail "--variant warn_z (no value) accepted"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 \
    --variant lag_steps=25 >/dev/null 2>"$TMP/err" && fail "--variant lag_steps=25 > HZ accepted"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --lag -1 \
    >"$TMP/out" 2>"$TMP/err" || fail "--lag -1 refused: $(tail -2 "$TMP/err")"

# --budget: thresholds calibrated on the history rows; a tighter budget never gives lower
# thresholds, and the history rate it reports is within the budget
budget_z() { # BUDGET -> the calibrated warn_z (and checks the row and the rate)
    "$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --budget "$1" \
        >"$TMP/out" 2>"$TMP/err" || { fail "--budget $1 exit: $(tail -2 "$TMP/err")"; return; }
    grep -q "^budget $1:" "$TMP/out" || fail "--budget $1: no detector row: $(cat "$TMP/out")"
    local line
    line=$(grep "^budget $1 false alerts per cell-week" "$TMP/out")
    [ -n "$line" ] || { fail "--budget $1: no calibration line"; return; }
    awk -v b="$1" '{ r = $NF; sub(/\)/, "", r); if (r + 0 > b + 0) exit 1 }' <<<"$line" ||
        fail "--budget $1: history rate over the budget: $line"
    sed 's/.*warn_z \([0-9.]*\),.*/\1/' <<<"$line"
}
z1=$(budget_z 1)
z0=$(budget_z 0.05)
awk -v a="$z1" -v b="$z0" 'BEGIN { exit !(a + 0 >= 2 && b + 0 >= a + 0) }' ||
    fail "--budget 1 gave warn_z '$z1', --budget 0.05 '$z0' (want 2 <= z1 <= z0)"
# novelty fires on the value alone: the budget scales its margin with warn_z (the default 10 → z)
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --budget 1 \
    --set novelty_tol=0.05 >"$TMP/out" 2>"$TMP/err" || fail "--budget with novelty: exit"
sed -n 's/^budget 1 false.*warn_z \([0-9.]*\),.*novelty_tol \([0-9.]*\) .*/\1 \2/p' "$TMP/out" |
    awk '{ exit !(NF == 2 && $2 > 0 && ($2 / 0.05) / ($1 / 10) > 0.99 && ($2 / 0.05) / ($1 / 10) < 1.01) }' ||
    fail "--budget 1 did not scale novelty_tol with warn_z: $(grep '^budget 1 false' "$TMP/out")"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0 --budget 1 \
    >/dev/null 2>"$TMP/err" && fail "--budget without history accepted"
grep -q "needs history" "$TMP/err" || fail "--budget without history: $(tail -2 "$TMP/err")"

# --labels: an outage written into cell0000's test rows, labelled there, is found (1/1);
# a window on a cell that does not exist is reported unused; a bad file is refused
awk -F, -v OFS=, 'NR > 1 && $2 == "cell0000" && $1 >= 1704697200 && $1 <= 1704706200 {
    for (i = 3; i <= NF; i++) $i = 0 } { print }' "$TMP/s.csv" >"$TMP/so.csv"
printf 'start,end,cell_id\n1704697200,1704706200,cell0000\n2024-01-07 00:00:00,2024-01-07 01:00:00,nocell\n' \
    >"$TMP/lab.csv"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/so.csv" --test-frac 0.2 --labels "$TMP/lab.csv" \
    >"$TMP/out" 2>"$TMP/err" || fail "--labels exit: $(tail -2 "$TMP/err")"
grep -q '^model z>=.* 1/1 ' "$TMP/out" || fail "--labels: the labelled outage not detected: $(cat "$TMP/out")"
grep -q 'labelled *recall 1.000 (1/1)' "$TMP/out" || fail "--labels: no labelled row"
grep -q '1 of 2 labelled windows unused' "$TMP/err" || fail "--labels: unused window not reported"
printf '{"so.csv": [["2024-01-08 07:00:00", "2024-01-08 09:30:00"]]}' >"$TMP/lab.json"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/so.csv" --test-frac 0.2 --labels "$TMP/lab.json" \
    >"$TMP/out" 2>"$TMP/err" || fail "--labels JSON exit: $(tail -2 "$TMP/err")"
grep -q '^model z>=.*/2 ' "$TMP/out" || fail "--labels JSON: the file key selects both cells: $(cat "$TMP/out")"
printf 'start,end\n2024-01-08 09:30:00,2024-01-08 07:00:00\n' >"$TMP/bad.csv"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/so.csv" --test-frac 0.2 --labels "$TMP/bad.csv" \
    >/dev/null 2>"$TMP/err" && fail "--labels with end before start accepted"
grep -q 'end before start' "$TMP/err" || fail "--labels bad file: $(cat "$TMP/err")"

# --protocol noise: the five types, spikes apart from the events
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --protocol noise \
    --spacing 30 >"$TMP/out" 2>"$TMP/err" || fail "--protocol noise exit: $(tail -2 "$TMP/err")"
for t in surge drop outage level_shift spike 'events (no spikes)'; do
    grep -q "^    $t " "$TMP/out" || fail "--protocol noise: no '$t' row: $(cat "$TMP/out")"
done
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --protocol loud \
    >/dev/null 2>&1 && fail "--protocol loud accepted"

# --json with --data (issue 13): the rows as JSON on stdout, each with its episode check
# (length = deviation + excess + hysteresis), the table on stderr
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --json \
    --variant sustained_live=0 >"$TMP/j" 2>"$TMP/err" || fail "--json exit: $(tail -2 "$TMP/err")"
grep -q '^model z>=' "$TMP/err" || fail "--json: the table is not on stderr"
python3 - "$TMP/j" <<'PY' || fail "--json: $(head -c 600 "$TMP/j")"
import json, sys
o = json.load(open(sys.argv[1]))
rows = o["rows"]
assert [r["detector"] for r in rows] == ["model", "3sigma-roll", "model"], rows
assert rows[2]["variant"] == "sustained_live=0"
for r in rows:
    e = r["scores"]["episodes"]
    assert e["resolved"] >= len(e["worst"]) and e["exceed"] <= e["resolved"]
    for w in e["worst"]:
        assert w["hysteresis"] == r["resolve_m"], w  # the baseline has its own lifecycle
        assert w["length"] == w["deviation"] + w["excess"] + w["hysteresis"], w
        assert w["excess"] <= e["max_excess"], w
assert rows[0]["resolve_m"] == o["resolve_m"] and rows[1]["resolve_m"] == 3, rows
PY

[ "$FAILS" = 0 ] && echo "anomaly-eval: all checks passed"
exit $((FAILS > 0))
