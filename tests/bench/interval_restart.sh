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
# Prints one JSON line.
set -eu
CELLCASTD=$1 CELLCAST=$2 ROOT=$3
NOISE=${4:-0.5} SEED=${5:-1} CELLS=${6:-8} DAYS=${7:-8} R=${8:-5}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir interval-restart
export DAEMON_TRIES=${DAEMON_TRIES:-300} # the restart restores the snapshot first

"$CELLCAST" synth --cells "$CELLS" --days "$DAYS" --seed "$SEED" --noise "$NOISE" \
    --start 2024-03-01 --out "$TMP/synth.csv" >/dev/null
# one POST body per cell and day (http.max_body_bytes is 1 MiB), named by the day
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
day0 = min(d for d, _ in rows)
for (d, cell), v in rows.items():
    json.dump(v, open(f"{tmp}/body.{d - day0:03d}.{cell}.json", "w"))
open(f"{tmp}/day0", "w").write(str(day0 * 86400))
PYEOF
DAY0=$(cat "$TMP/day0")
RTS=$((DAY0 + R * 86400)) # the first time fed after the restart

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$ROOT/models/default.safetensors"
kafka:
  brokers: embedded
  group_id: interval-restart
  embedded_partitions: 1
http:
  post_kpis: open
  port: 0
forecast:
  interval_adapt: true
snapshot:
  path: "$TMP/state.snap"
  interval_s: 0
log:
  level: warn
YAML
feed() { # feed FROM_DAY TO_DAY (exclusive), then waits for every cell's last step
    local last=0 b d
    for b in "$TMP"/body.*.json; do
        d=$(basename "$b" | cut -d. -f2)
        d=$((10#$d))
        [ "$d" -ge "$1" ] && [ "$d" -lt "$2" ] || continue
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary "@$b" "$U/v1/kpis")
        [ "$code" = 202 ] || { echo "POST $b: $code"; exit 1; }
    done
    last=$(((DAY0 + $2 * 86400) / 900 - 1))
    for c in $(seq 0 $((CELLS - 1))); do
        wait_last "$(printf 'cell%04d' "$c")" "$last" 120 || { echo "cell $c not at $last"; exit 1; }
    done
}
start_daemon "$TMP/log.1" health -c "$TMP/c.yaml" --set log.level=info
feed 0 "$R"
stop_daemon || true
start_daemon "$TMP/log.2" health -c "$TMP/c.yaml" --set log.level=info
feed "$R" "$DAYS"
for w in before:$((RTS - 86400)):$((RTS - 900)) after6h:$RTS:$((RTS + 6 * 3600 - 900)) after1d:$RTS:$((RTS + 86400 - 900)); do
    IFS=: read -r name since until <<<"$w"
    for c in $(seq 0 $((CELLS - 1))); do
        curl -s "$U/v1/cells/$(printf 'cell%04d' "$c")/forecasts?fields=scores&since=$since&until=$until" \
            >"$TMP/fc.$name.$c"
    done
done
stop_daemon || true
python3 - "$TMP" "$CELLS" "$NOISE" "$SEED" "$R" <<'PYEOF'
import json, sys
tmp, cells, noise, seed, r = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
out = {"noise": noise, "seed": seed, "restart_day": r}
for name in ("before", "after6h", "after1d"):
    for k in ("one_step", "horizon_end"):
        v = []
        for c in range(cells):
            s = json.load(open(f"{tmp}/fc.{name}.{c}"))["scores"]
            v += [x for x in s[k]["coverage80"] if x is not None]
        out[f"coverage80_{k}_{name}"] = round(sum(v) / len(v), 4)
print(json.dumps(out))
PYEOF
