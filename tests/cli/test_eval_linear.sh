#!/bin/bash
# test_eval_linear.sh — `cellcast eval`'s linear method end to end (issue 12): on a generated
# two-cell hourly file whose KPI is two sines (periods 24 and 16, both divide L = 48) plus
# noise, `--json` has the method "linear" with finite numbers at every step, as many pairs
# as naive, and beats naive; the table has its row; rows before the test range too short for
# any window skip it with a warning on stderr. Under a second.
#   usage: test_eval_linear.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir eval-linear
need_tools "$PY"

awk 'BEGIN { srand(7); print "ts,cell_id,load,users"
    for (c = 0; c < 2; c++) for (i = 0; i < 400; i++)
        printf "%d,c%d,%.4f,%d\n", 1700006400 + 3600 * i, c,
            10 + sin(i / 24 * 6.2831853 + c) + 0.5 * sin(i / 16 * 6.2831853) + 0.01 * rand(), 50 }' \
    >"$TMP/cells.csv"

"$CLI" eval --data "$TMP/cells.csv" --horizon 12 --linear-window 48 --json >"$TMP/ev.json" \
    2>"$TMP/err" || fail "eval --json: $(tail -1 "$TMP/err")"
$PY - "$TMP/ev.json" <<'PY' && ok "eval --json: linear, finite at every step, beats naive" ||
import json, math, sys
d = json.load(open(sys.argv[1]))
m = d["methods"]
lin, nv = m["linear"], m["naive"]
assert d["linear_window"] == 48, d.get("linear_window")
assert lin["overall"]["n"] == nv["overall"]["n"] > 0, (lin["overall"], nv["overall"])
steps = lin["per_step"]
assert len(steps) == 12
for s in steps + list(lin["per_kpi"].values()):
    for k in ("mae", "mse", "rmse"):
        assert s[k] is not None and math.isfinite(s[k]), s
assert lin["overall"]["mse"] < 0.05 * nv["overall"]["mse"], (lin["overall"], nv["overall"])
assert lin["per_kpi"]["users"]["mae"] < 1e-9, lin["per_kpi"]["users"]  # a constant KPI
PY
    fail "eval --json: $(head -c 400 "$TMP/ev.json")"

"$CLI" eval --data "$TMP/cells.csv" --horizon 12 >"$TMP/table" 2>"$TMP/err" &&
    grep -qE '^  all +linear ' "$TMP/table" && ok "eval table: a linear row (default window)" ||
    fail "eval table: no linear row: $(grep -E 'all|warning' "$TMP/table" | head -8)"

"$CLI" eval --data "$TMP/cells.csv" --horizon 12 --split rows:0-5,5-10,10-400 >"$TMP/table" \
    2>"$TMP/err" || fail "eval short rows: $(tail -1 "$TMP/err")"
grep -q "warning: linear skipped: the 20 rows before the test range" "$TMP/err" &&
    ! grep -qE '^  all +linear ' "$TMP/table" && ok "eval: too few rows before the test: skipped, said" ||
    fail "eval short rows: $(cat "$TMP/err")"

# no penalty on a constant KPI: a singular system, said, the other methods still scored
"$CLI" eval --data "$TMP/cells.csv" --horizon 12 --linear-lambda 0 >"$TMP/table" 2>"$TMP/err" &&
    grep -q "linear skipped: the system of KPI users is singular" "$TMP/err" &&
    grep -qE '^  all +naive ' "$TMP/table" && ok "eval --linear-lambda 0: singular, skipped, said" ||
    fail "eval --linear-lambda 0: $(cat "$TMP/err")"

[ "$FAILS" = 0 ] && echo "test_eval_linear: all ok"
exit $((FAILS > 0))
