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
# The cells, their POST bodies, the daemon's configuration and the coverage read back are
# tests/helpers/synth_post.sh's. Prints one JSON line per mode (off, on).
set -eu
CELLCASTD=$1 CELLCAST=$2 ROOT=$3
NOISE=${4:-0.2} SEED=${5:-1} RATE=${6:-0} CELLS=${7:-8} DAYS=${8:-10}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/synth_post.sh
. "$(dirname "$0")/../helpers/synth_post.sh"
test_workdir interval-coverage

synth_bodies "$DAYS" "$SEED" "$NOISE"
LAST=$((DAY0 + DAYS * 86400 - 900)) # the last step's time

for mode in off on; do
    on=false
    [ $mode = on ] && on=true
    synth_post_config "$TMP/c.yaml" interval-coverage <<YAML
forecast:
  interval_adapt: $on
  interval_adapt_rate: $RATE
snapshot:
  path: ""
YAML
    start_daemon "$TMP/log.$mode" health -c "$TMP/c.yaml" --set log.level=info
    post_days 0 "$DAYS"
    curl -s "$U/metrics" >"$TMP/metrics.$mode"
    served_scores last3d $((LAST - 3 * 86400))
    stop_daemon || true
    cov=$(coverage80 last3d)
    python3 - "$TMP" "$mode" "$NOISE" "$SEED" "$RATE" "$cov" <<'PYEOF'
import json, sys
tmp, mode, noise, seed, rate, cov = sys.argv[1:]
m = {}
for line in open(f"{tmp}/metrics.{mode}"):
    if line.startswith("cellcast_interval_"):
        name, v = line.split()
        m[name] = int(float(v))
out = {"mode": mode, "rate": float(rate) if mode == "on" else None, "noise": float(noise), "seed": int(seed),
       **json.loads(cov)}
sc, mi = m.get("cellcast_interval_scored_total", 0), m.get("cellcast_interval_missed_total", 0)
if sc:
    out.update(scored=sc, realised_coverage_all_steps=round(1 - mi / sc, 4))
print(json.dumps(out))
PYEOF
done
