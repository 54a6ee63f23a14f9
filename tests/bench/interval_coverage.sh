#!/usr/bin/env bash
# tests/bench/interval_coverage.sh — what forecast.interval_adapt does to the coverage the
# daemon serves (issue 12, daemon/interval.h), end to end: the shipped model
# (models/default.safetensors, trained on `cellcast synth` data of noise 0.08) fed synthetic
# cells of another noise level (burstier or calmer than its training and validation), through
# POST /v1/kpis, once with the feature off and once on. Coverage is read back from the
# daemon: the P10–P90 coverage of the past forecasts' served band over the last 3 days
# (GET /v1/cells/{id}/forecasts scores: coverage80 of the one-step and horizon-end forecasts,
# mean over KPIs and cells) and, on, cellcast_interval_{scored,missed}_total over the whole run
# (every horizon step).
#
#   interval_coverage.sh CELLCASTD CELLCAST SOURCE_ROOT [NOISE] [SEED] [RATE] [CELLS] [DAYS]
# (RATE: forecast.interval_adapt_rate when on; 0, the default, is min(0.05, 4/horizon))
#
# Prints one JSON line per mode (off, on).
set -eu
CELLCASTD=$1 CELLCAST=$2 ROOT=$3
NOISE=${4:-0.2} SEED=${5:-1} RATE=${6:-0} CELLS=${7:-8} DAYS=${8:-10}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir interval-coverage

"$CELLCAST" synth --cells "$CELLS" --days "$DAYS" --seed "$SEED" --noise "$NOISE" \
    --start 2024-03-01 --out "$TMP/synth.csv" >/dev/null
# one POST body per cell and day (http.max_body_bytes is 1 MiB)
python3 - "$TMP" <<'PYEOF'
import csv, json, sys, collections
tmp = sys.argv[1]
rows = collections.defaultdict(list)
with open(f"{tmp}/synth.csv") as f:
    r = csv.DictReader(f)
    kpis = [k for k in r.fieldnames if k not in ("ts", "cell_id")]
    for row in r:
        rec = {"cell": row["cell_id"], "ts": int(row["ts"]),
               "kpis": {k: float(row[k]) for k in kpis if row[k] != ""}}
        rows[(int(row["ts"]) // 86400, row["cell_id"])].append(rec)
for i, key in enumerate(sorted(rows)):
    json.dump(rows[key], open(f"{tmp}/body.{i:05d}.json", "w"))
last = max(int(r["ts"]) for v in rows.values() for r in v)
open(f"{tmp}/last_ts", "w").write(str(last))
PYEOF
LAST=$(cat "$TMP/last_ts")

for mode in off on; do
    on=false
    [ $mode = on ] && on=true
    cat >"$TMP/c.yaml" <<YAML
model:
  path: "$ROOT/models/default.safetensors"
kafka:
  brokers: embedded
  group_id: interval-coverage
  embedded_partitions: 1
http:
  post_kpis: open
  port: 0
forecast:
  interval_adapt: $on
  interval_adapt_rate: $RATE
snapshot:
  path: ""
log:
  level: warn
YAML
    start_daemon "$TMP/log.$mode" health -c "$TMP/c.yaml" --set log.level=info
    for b in "$TMP"/body.*.json; do
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary "@$b" "$U/v1/kpis")
        [ "$code" = 202 ] || { echo "POST $b: $code"; exit 1; }
    done
    for c in $(seq 0 $((CELLS - 1))); do
        wait_last "$(printf 'cell%04d' "$c")" $((LAST / 900)) 120 || { echo "cell $c not done"; exit 1; }
    done
    curl -s "$U/metrics" >"$TMP/metrics.$mode"
    for c in $(seq 0 $((CELLS - 1))); do
        curl -s "$U/v1/cells/$(printf 'cell%04d' "$c")/forecasts?fields=scores&since=$((LAST - 3 * 86400))" \
            >"$TMP/fc.$mode.$c"
    done
    stop_daemon || true
    python3 - "$TMP" "$mode" "$CELLS" "$NOISE" "$SEED" "$RATE" <<'PYEOF'
import json, sys
tmp, mode, cells, noise, seed, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:]
cov = {"one_step": [], "horizon_end": []}
for c in range(cells):
    s = json.load(open(f"{tmp}/fc.{mode}.{c}"))["scores"]
    for k in cov:
        cov[k] += [v for v in s[k]["coverage80"] if v is not None]
m = {}
for line in open(f"{tmp}/metrics.{mode}"):
    if line.startswith("cellcast_interval_"):
        name, v = line.split()
        m[name] = int(float(v))
out = {"mode": mode, "rate": float(rate) if mode == "on" else None, "noise": float(noise), "seed": int(seed),
       "coverage80_one_step_last3d": round(sum(cov["one_step"]) / len(cov["one_step"]), 4),
       "coverage80_horizon_end_last3d": round(sum(cov["horizon_end"]) / len(cov["horizon_end"]), 4)}
sc, mi = m.get("cellcast_interval_scored_total", 0), m.get("cellcast_interval_missed_total", 0)
if sc:
    out.update(scored=sc, realised_coverage_all_steps=round(1 - mi / sc, 4))
print(json.dumps(out))
PYEOF
done
