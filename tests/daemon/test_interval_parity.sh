#!/bin/bash
# test_interval_parity.sh — black-box check that `cellcast eval --adapt` scores the intervals
# cellcastd serves with forecast.interval_adapt (issue 12: the coverage of docs/results.md
# "Online calibration of the served intervals" is the daemon's). A synthetic cell of 12
# days, noisier than the default model expects (its static P10-P90 intervals cover ~0.64),
# is fed to the daemon through POST /v1/kpis with interval_adapt on from its first step,
# and scored by eval with the whole series as the test range (--split 0,0: its online
# scales start at the first origin, as the daemon's start at the cell's first forecast).
# For every KPI, the hits of the one-step and horizon-end bands the daemon recorded
# (GET /v1/cells/{id}/forecasts) must equal eval's model_adaptive hits at steps 1 and 24 to
# 3 of ~1100: the daemon records the sd in bf16, which moves a band's edge by up to 0.4 %,
# enough to flip a truth that lies on it. Static bands would miss by ~170. ~5 s.
#   usage: test_interval_parity.sh CELLCAST CELLCASTD SOURCE_ROOT
set -u
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
parity_test_init interval-parity "$@"

"$CLI" synth --cells 1 --days 12 --seed 3 --gap-rate 0 --missing-rate 0 >"$TMP/s.csv" 2>/dev/null ||
    { echo "FAIL: cellcast synth"; exit 1; }
$PY - "$TMP" <<'PYEOF' || { echo "FAIL: the noisy series"; exit 1; }
import csv, json, random, statistics, sys
tmp = sys.argv[1]
random.seed(7)
rows = list(csv.DictReader(open(f"{tmp}/s.csv")))
kpis = [k for k in rows[0] if k not in ("ts", "cell_id")]
sd = {k: statistics.pstdev(float(r[k]) for r in rows) for k in kpis}
for r in rows:
    for k in kpis:
        r[k] = "%.5g" % (float(r[k]) + random.gauss(0, 0.25 * sd[k]))
w = csv.DictWriter(open(f"{tmp}/n.csv", "w"), fieldnames=list(rows[0]))
w.writeheader()
w.writerows(rows)
json.dump([{"cell": r["cell_id"], "ts": int(r["ts"]), "kpis": {k: float(r[k]) for k in kpis}}
           for r in rows], open(f"{tmp}/n.json", "w"))
open(f"{tmp}/steps", "w").write(f"{int(rows[0]['ts']) // 900} {int(rows[-1]['ts']) // 900}\n")
PYEOF
read -r P0 PLAST <"$TMP/steps"

"$CLI" eval --model "$MODEL" --data "$TMP/n.csv" --split 0,0 --adapt --json \
    >"$TMP/eval.json" 2>"$TMP/eval.err" || fail "eval exit $?: $(tail -3 "$TMP/eval.err")"
start_daemon "$TMP/d.log" health -c "$ROOT/conf/cellcast.yaml" \
    --set model.path="$MODEL" --set demo.enabled=false --set http.port=0 \
    --set snapshot.path= --set engine.kv_type=f32 --set http.post_kpis=open \
    --set forecast.interval_adapt=true --set history.depth=30d \
    --set kafka.group_id=interval-parity
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "@$TMP/n.json" "$U/v1/kpis")
[ "$code" = 202 ] || fail "POST: $code"
wait_observed cell0000 "$PLAST" || fail "cell0000 did not step its step $PLAST"
curl -s "$U/v1/cells/cell0000/forecasts?fields=one_step,horizon_end,lo80,hi80,actual&max_points=5000&digits=7" \
    >"$TMP/fc.json"
stop_daemon >/dev/null || true

$PY - "$TMP/eval.json" "$TMP/fc.json" "$P0" <<'PYEOF' || fail "the daemon's bands differ from eval's model_adaptive"
import json, sys
ev, fc, p0 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
m = ev["methods"]
H, kpis = ev["horizon"], fc["kpis"]
steps = {s["step"]: s for s in fc["steps"]}
first = min(s["step"] for s in fc["steps"] if s.get("one_step")) - 1 - p0  # first origin row
bad = 0
for kind, k in (("one_step", 0), ("horizon_end", H - 1)):
    for f, kpi in enumerate(kpis):
        cell = m["model_adaptive"]["per_kpi_step"][kpi][k]
        n = cell["n"]
        want = round(cell["coverage80"] * n)
        hits = 0
        for o in range(first, first + n):
            s = steps[p0 + o + 1 + k]
            a, lo, hi = s["actual"][f], s[kind]["lo80"][f], s[kind]["hi80"][f]
            hits += lo <= a <= hi
        static = round(m["model"]["per_kpi_step"][kpi][k]["coverage80"] * n)
        ok = abs(hits - want) <= 3
        bad += not ok
        print(f"{'ok' if ok else 'FAIL'}: {kind} {kpi}: daemon {hits}/{n}, eval adaptive {want}, static {static}")
assert m["model"]["overall"]["coverage80"] < 0.72, "the static bands cover too much: the test no longer separates"
sys.exit(1 if bad else 0)
PYEOF

if [ "$FAILS" != 0 ]; then
    echo "interval parity: $FAILS failure(s)"
    exit 1
fi
echo "interval parity: ok"
