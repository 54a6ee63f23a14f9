#!/usr/bin/env bash
# tests/bench/interval_restart.sh — what the interval scales in the cell record (issue 31,
# daemon/interval.h) do to the coverage served after a restart, end to end: the shipped
# model (trained on `cellcast synth` data of noise 0.08) fed synthetic cells of another noise
# level through POST /v1/kpis with forecast.interval_adapt on (the default); the daemon is
# stopped (SIGTERM: the snapshot) after RESTART_DAY days and started again from the snapshot
# for the rest. Coverage is read back from the daemon: the P10–P90 coverage of the served
# band (GET /v1/cells/{id}/forecasts scores: one-step and horizon-end forecasts, mean over
# KPIs and cells) over the day before the restart, the 6 h after it and the day after it.
# Run it with a binary that keeps the scales and one that does not (scale 1 after a
# restart) to compare.
#
#   interval_restart.sh CELLCASTD CELLCAST SOURCE_ROOT [NOISE] [SEED] [CELLS] [DAYS] [RESTART_DAY]
#
# The cells, their POST bodies, the daemon's configuration and the coverage read back are
# tests/helpers/synth_post.sh's. Prints one JSON line.
set -eu
CELLCASTD=$1 CELLCAST=$2 ROOT=$3
NOISE=${4:-0.5} SEED=${5:-1} CELLS=${6:-8} DAYS=${7:-8} R=${8:-5}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/synth_post.sh
. "$(dirname "$0")/../helpers/synth_post.sh"
test_workdir interval-restart
export DAEMON_TRIES=${DAEMON_TRIES:-300} # the restart restores the snapshot first

synth_bodies "$DAYS" "$SEED" "$NOISE"
RTS=$((DAY0 + R * 86400)) # the first time fed after the restart
synth_post_config "$TMP/c.yaml" interval-restart <<YAML
forecast:
  interval_adapt: true
snapshot:
  path: "$TMP/state.snap"
  interval_s: 0
YAML
start_daemon "$TMP/log.1" health -c "$TMP/c.yaml" --set log.level=info
post_days 0 "$R"
stop_daemon || true
start_daemon "$TMP/log.2" health -c "$TMP/c.yaml" --set log.level=info
post_days "$R" "$DAYS"
served_scores before $((RTS - 86400)) $((RTS - 900))
served_scores after6h "$RTS" $((RTS + 6 * 3600 - 900))
served_scores after1d "$RTS" $((RTS + 86400 - 900))
stop_daemon || true
python3 - "$NOISE" "$SEED" "$R" "$(coverage80 before after6h after1d)" <<'PYEOF'
import json, sys
noise, seed, r, cov = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
print(json.dumps({"noise": noise, "seed": seed, "restart_day": r, **cov}))
PYEOF
