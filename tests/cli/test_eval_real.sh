#!/bin/bash
# test_eval_real.sh — what a new user met running `cellcast eval` on real files (issue 31):
# NRMSE is RMSE over |mean| (never negative, on a KPI whose mean is negative); the JSON
# counts the horizon steps that lose to naive per KPI and the table prints them; the ETT
# protocol's header names the file. A model of one step is trained on the generated file
# (its quality does not matter, only the shape of the output). A few seconds.
#   usage: test_eval_real.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir eval-real
need_tools "$PY"

# two KPIs: one around -5 (a temperature, a z-scored channel), one constant at 50
awk 'BEGIN { srand(3); print "ts,cell_id,temp,users"
    for (c = 0; c < 2; c++) for (i = 0; i < 400; i++)
        printf "%d,c%d,%.4f,%d\n", 1700006400 + 3600 * i, c,
            -5 + sin(i / 24 * 6.2831853 + c) + 0.3 * rand(), 50 }' >"$TMP/cells.csv"
"$CLI" train --data "$TMP/cells.csv" --out "$TMP/m.safetensors" --steps 2 --horizon 6 \
    --patch-len 8 --n-patches 4 --norm-window 48 --linear-window 48 --d-model 16 --n-heads 2 \
    --d-ff 32 --threads 1 --quiet >/dev/null 2>"$TMP/train.err" ||
    fail "train: $(tail -2 "$TMP/train.err")"
"$CLI" eval --model "$TMP/m.safetensors" --data "$TMP/cells.csv" --json >"$TMP/ev.json" \
    2>"$TMP/err" || fail "eval --json: $(tail -1 "$TMP/err")"
$PY - "$TMP/ev.json" <<'PY' && ok "eval --json: NRMSE >= 0 on a KPI of mean -5; steps_losing_to_naive per KPI" ||
import json, sys
d = json.load(open(sys.argv[1]))
m = d["methods"]
for name, meth in m.items():
    for s in [meth["overall"]] + list(meth["per_kpi"].values()) + meth["per_step"]:
        assert s["nrmse"] is None or s["nrmse"] >= 0, (name, s)
t = m["naive"]["per_kpi"]["temp"]
assert abs(t["nrmse"] - t["rmse"] / abs(t["mean_true"] if "mean_true" in t else -5)) < 0.05 * t["nrmse"], t
per = d["model_per_step"]["steps_losing_to_naive_per_kpi"]
assert set(per) == {"temp", "users"}, per
assert all(0 <= v <= 6 for v in per.values()), per
assert d["model_per_step"]["steps_losing_to_naive"] <= 6
PY
    fail "eval --json: $(head -c 600 "$TMP/ev.json")"
"$CLI" eval --model "$TMP/m.safetensors" --data "$TMP/cells.csv" >"$TMP/ev.txt" 2>"$TMP/err" ||
    fail "eval: $(tail -1 "$TMP/err")"
grep -Eq "^Steps losing to naive \(MSE\) per KPI: temp [0-6]/6, users [0-6]/6$" "$TMP/ev.txt" &&
    ok "eval table: steps losing to naive per KPI" || fail "eval table: $(grep -i losing "$TMP/ev.txt")"

# --per-series: each series alone (its own MASE scale and `linear` fit), as --series gives it;
# an unknown series is named
"$CLI" eval --data "$TMP/cells.csv" --per-series --json >"$TMP/ps.json" 2>"$TMP/err" ||
    fail "eval --per-series: $(tail -1 "$TMP/err")"
"$CLI" eval --data "$TMP/cells.csv" --series c1 --json >"$TMP/c1.json" 2>"$TMP/err" ||
    fail "eval --series c1: $(tail -1 "$TMP/err")"
$PY - "$TMP/ps.json" "$TMP/c1.json" <<'PY' && ok "eval --per-series: one result per series, each as --series gives it" ||
import json, sys
d, one = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ps = d["per_series"]
assert [s["series_id"] for s in ps] == ["c0", "c1"], [s.get("series_id") for s in ps]
assert d["series"] == 2 and all(s["series"] == 1 for s in ps)
assert ps[1]["methods"]["linear"]["per_kpi"]["temp"] == one["methods"]["linear"]["per_kpi"]["temp"]
assert ps[0]["methods"]["linear"]["per_kpi"]["temp"] != one["methods"]["linear"]["per_kpi"]["temp"]
PY
    fail "eval --per-series: $(head -c 400 "$TMP/ps.json")"
"$CLI" eval --data "$TMP/cells.csv" --per-series >"$TMP/ps.txt" 2>&1 &&
    grep -Eq "^c1 +temp +- +[0-9.]+ +[0-9.]+ +[0-9.]+" "$TMP/ps.txt" &&
    ok "eval --per-series table: a row per series and KPI" || fail "eval --per-series table: $(tail -4 "$TMP/ps.txt")"
if "$CLI" eval --data "$TMP/cells.csv" --series zz >/dev/null 2>"$TMP/err"; then
    fail "eval --series zz: accepted"
else
    grep -q "no series 'zz'" "$TMP/err" && ok "eval --series zz: refused by name" ||
        fail "eval --series zz: $(cat "$TMP/err")"
fi

# the ETT protocol's header names the file (an ETT file of another name is not ETTh1)
awk 'BEGIN { srand(5); print "date,a,b,OT"
    for (i = 0; i < 14400; i++) {
        t = 1467331200 + 3600 * i
        printf "%s,%.3f,%.3f,%.3f\n", strftime("%Y-%m-%d %H:%M:%S", t, 1), sin(i / 24 * 6.2831853),
            rand(), -3 + rand() }
}' >"$TMP/ETTh2.csv"
"$CLI" eval --data "$TMP/ETTh2.csv" --protocol ett --horizon 4 >"$TMP/ett.txt" 2>"$TMP/err" ||
    fail "eval --protocol ett: $(tail -1 "$TMP/err")"
head -1 "$TMP/ett.txt" | grep -q "^cellcast eval — ETTh2.csv, ETT standard protocol" &&
    ok "eval --protocol ett: the header names the file" || fail "eval --protocol ett: $(head -1 "$TMP/ett.txt")"
[ "$FAILS" = 0 ] && echo "test_eval_real: all ok"
exit $((FAILS > 0))
