#!/bin/bash
# test_outage_hold.sh — black-box test of ingest.outage_hold_steps (issue 13): a cell whose
# KPIs all drop to 0 for 10 steps (an outage) is fed its last values meanwhile, so that its
# forecast after the outage is the one of a cell whose 10 steps were a gap (imputed with the
# last values), while its all_zero alert fires and resolves, its history shows the zeros and
# the held steps are counted (GET /v1/cells/{id}, /metrics). Starts the real daemon on
# loopback (tiny model, embedded broker), fed through POST /v1/kpis; ~3 s.
#   usage: test_outage_hold.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init outage-hold
MODEL="$ROOT/tests/data/golden/tiny.safetensors" # F=3 (prb,thr,users), HZ=6, M=22, S=900

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: embedded
  group_id: test-outage-hold
  embedded_partitions: 1
http:
  post_kpis: open
  port: 0
ingest:
  batch_ms: 5
  max_gap: 20
  outage_hold_steps: ${HOLD:-96}
snapshot:
  path: ""
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

# "out": 60 steps, 10 all-zero steps (an outage), 12 steps; "gap": the same without the
# outage's 10 steps (a gap of 10, imputed with the last values)
P0=$((1714557600 / 900))
$PY - "$TMP" "$P0" <<'PYEOF'
import json, math, sys
tmp, p0 = sys.argv[1], int(sys.argv[2])
def rec(c, i, zero=False):
    v = 0.0 if zero else 50 + 20 * math.sin(i / 3.0)
    return {"cell": c, "ts": (p0 + i) * 900,
            "kpis": {"prb": v, "thr": 0.0 if zero else 3 * v + 200, "users": 0 if zero else 5 + i % 7}}
out = [rec("out", i, 60 <= i < 70) for i in range(82)]
json.dump(out, open(f"{tmp}/out.json", "w"))
json.dump([r for i, r in enumerate(rec("gap", i) for i in range(82)) if not 60 <= i < 70],
          open(f"{tmp}/gap.json", "w"))
PYEOF
for f in out gap; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "@$TMP/$f.json" "$U/v1/kpis")
    [ "$code" = 202 ] || fail "POST $f.json: $code"
done
for c in out gap; do
    for _ in $(seq 100); do
        curl -s "$U/v1/cells/$c/forecast" | grep -q "\"observed_step\":$((P0 + 81))," && break
        sleep 0.05
    done
    curl -s "$U/v1/cells/$c/forecast" >"$TMP/fc_$c"
    curl -s "$U/v1/cells/$c" >"$TMP/cell_$c"
done
curl -s "$U/v1/cells/out/history" >"$TMP/hist"
curl -s "$U/v1/cells/out/alerts" >"$TMP/alerts"
curl -s "$U/metrics" >"$TMP/metrics"

# the forecast after the outage is the gap's (the engine batches both cells alike: equal to
# float rounding); fed the zeros, its sd would be inflated for the M = 22 steps after
$PY - "$TMP" <<'PYEOF' && ok "the forecast after a held outage is the one after a gap" || fail "forecasts differ"
import json, sys
t = sys.argv[1]
a, b = (json.load(open(f"{t}/fc_{c}")) for c in ("out", "gap"))
def walk(x, y, path):
    if isinstance(x, dict):
        for k in x:
            walk(x[k], y[k], path + "." + k)
    elif isinstance(x, list):
        assert len(x) == len(y), path
        for i, (u, v) in enumerate(zip(x, y)):
            walk(u, v, f"{path}[{i}]")
    elif isinstance(x, float):
        assert abs(x - y) <= 1e-4 * max(1.0, abs(x), abs(y)), f"{path}: {x} vs {y}"
n = len(a["forecast"])
assert n > 0, a
walk(a["forecast"], b["forecast"], "forecast")
PYEOF
$PY - "$TMP" "$P0" <<'PYEOF' && ok "all_zero fired and resolved; the history shows the zeros" || fail "alerts or history: $(head -c 600 "$TMP/alerts")"
import json, sys
t, p0 = sys.argv[1], int(sys.argv[2])
al = json.load(open(f"{t}/alerts"))
ev = [e for e in al["alerts"] if e["reason"] == "all_zero"]
states = [e["state"] for e in ev]
assert "firing" in states and "resolved" in states, ev
h = json.load(open(f"{t}/hist"))
steps = {s["step"]: s for s in h["steps"]}
for p in range(p0 + 60, p0 + 70):
    assert all(v == 0 for v in steps[p]["values"]), steps[p]
assert steps[p0 + 70]["values"][0] != 0
PYEOF
grep -q '^cellcast_ingest_outage_held_steps_total 10$' "$TMP/metrics" &&
    grep -q '"outage_held":10[,}]' "$TMP/cell_out" && grep -q '"outage_held":0[,}]' "$TMP/cell_gap" &&
    ok "10 held steps counted" ||
    fail "counts: $(grep outage_held "$TMP/metrics") $(grep -o '"counts":{[^}]*}' "$TMP/cell_out")"
[ "$FAILS" -eq 0 ] || { tail -20 "$TMP/log"; exit 1; }
