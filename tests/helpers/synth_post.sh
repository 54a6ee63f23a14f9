# tests/helpers/synth_post.sh — `cellcast synth` cells fed to cellcastd (the shipped model)
# over POST /v1/kpis, and the P10–P90 coverage it then serves, for the coverage benchmarks
# (tests/bench/interval_coverage.sh, interval_restart.sh). Source it after
# tests/helpers/daemon.sh; expects CELLCAST, ROOT (the source root), CELLS and TMP, and U
# (start_daemon) once a daemon runs.

# synth_bodies DAYS SEED NOISE: CELLS synthetic cells (cell0000...) of DAYS days at 15 minutes
# from 2024-03-01 ($TMP/synth.csv), split into one POST body per cell and day (http.max_body_bytes
# is 1 MiB): $TMP/body.DDD.CELL.json, DDD the day counted from the first. Sets DAY0, the
# first day's start (unix seconds).
synth_bodies() {
    "$CELLCAST" synth --cells "$CELLS" --days "$1" --seed "$2" --noise "$3" \
        --start 2024-03-01 --out "$TMP/synth.csv" >/dev/null
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
}

# synth_post_config FILE GROUP: writes to FILE cellcastd's configuration for the bodies: the
# shipped model, the embedded broker (group GROUP, 1 partition), POST /v1/kpis open, an
# ephemeral HTTP port, log level warn; then stdin, the benchmark's own sections (forecast,
# snapshot).
synth_post_config() {
    cat >"$1" <<YAML
model:
  path: "$ROOT/models/default.safetensors"
kafka:
  brokers: embedded
  group_id: $2
  embedded_partitions: 1
http:
  post_kpis: open
  port: 0
log:
  level: warn
YAML
    cat >>"$1"
}

# post_days FROM TO: posts the bodies of days [FROM, TO) to the daemon at U (day order, then
# cell), then waits (wait_last, 120 s a cell) until every cell has stepped the last step of
# day TO - 1. Exits 1 when a body is not accepted (202) or a cell never gets there.
post_days() {
    local b d code last=$(((DAY0 + $2 * 86400) / 900 - 1)) c
    for b in "$TMP"/body.*.json; do
        d=$(basename "$b" | cut -d. -f2)
        d=$((10#$d))
        [ "$d" -ge "$1" ] && [ "$d" -lt "$2" ] || continue
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary "@$b" "$U/v1/kpis")
        [ "$code" = 202 ] || { echo "POST $b: $code"; exit 1; }
    done
    for c in $(seq 0 $((CELLS - 1))); do
        wait_last "$(printf 'cell%04d' "$c")" "$last" 120 || { echo "cell $c not at $last"; exit 1; }
    done
}

# served_scores NAME SINCE [UNTIL]: each cell's past forecasts' scores from SINCE (to UNTIL,
# unix seconds) as the daemon at U serves them: $TMP/fc.NAME.C for cell C.
served_scores() {
    local c
    for c in $(seq 0 $((CELLS - 1))); do
        curl -s "$U/v1/cells/$(printf 'cell%04d' "$c")/forecasts?fields=scores&since=$2${3:+&until=$3}" \
            >"$TMP/fc.$1.$c"
    done
}

# coverage80 NAME...: prints one JSON object, for each NAME of served_scores the served band's
# P10–P90 coverage of the one-step and of the horizon-end forecasts (coverage80_one_step_NAME,
# coverage80_horizon_end_NAME): the mean over cells and KPIs, to 4 places.
coverage80() {
    python3 - "$TMP" "$CELLS" "$@" <<'PYEOF'
import json, sys
tmp, cells = sys.argv[1], int(sys.argv[2])
out = {}
for name in sys.argv[3:]:
    for k in ("one_step", "horizon_end"):
        v = []
        for c in range(cells):
            s = json.load(open(f"{tmp}/fc.{name}.{c}"))["scores"]
            v += [x for x in s[k]["coverage80"] if x is not None]
        out[f"coverage80_{k}_{name}"] = round(sum(v) / len(v), 4)
print(json.dumps(out))
PYEOF
}
