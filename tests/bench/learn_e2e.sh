#!/bin/bash
# learn_e2e.sh — issue 31 end to end: a real set replayed through Kafka into cellcastd and
# `cellcast learn` at an accelerated data rate, starting with no model for its KPIs, and
# what cellcastd served per data day (docs/results.md "Through Kafka and cellcastd").
#
# cellcastd runs on its embedded broker (kafka.brokers embedded, kafka.embedded_port a free
# port) with model.source kafka, the shipped model as model.path (it has none of the set's
# KPIs: the cells are refused as no_kpis, "learning", until a first model arrives) and the
# defaults otherwise (forecast.interval_adapt and model.rollback on). The learner runs beside
# it on the same broker (`cellcast learn --brokers --topic kpis --poll 2`, restarted when it
# exits, like daemon/quickstart.sh: the first learned model has other KPIs, so cellcastd
# re-executes itself and the embedded broker starts empty). Data day d's messages (data
# order, tests/bench/replay_sets.py) are produced with kcat at the start of a slot of
# SECONDS_PER_DAY wall seconds; at its end /metrics and GET /v1/model are read. Per day:
#   - model in service (hash, the learner's candidate kind, learning state), swaps/rollbacks;
#   - served MAE over one-day seasonal naive's on the matured forecasts whose target is in
#     the day (cellcast_model_live_*_total differenced: the rollback watch's two kinds,
#     one-step and horizon-end, per KPI; a KPI's figure the mean of its kinds, the day's the
#     mean over KPIs; seasonal naive is 1 by construction);
#   - the realised P10-P90 coverage of the served intervals (cellcast_interval_{missed,
#     scored}_total differenced: every KPI and horizon step; by KPI "coverage_kpi", [scored,
#     missed] from cellcast_interval_kpi_{scored,missed}_total);
#   - "served_rel_mae_cells_alike": the same ratio with each cell weighed by 1 / its MASE
#     scale (cellcast_model_live_scaled_*_total: the rollback watch's own score; none until
#     the cells' scales have a day);
#   - messages ingested and refused as no_kpis (counters restart with a re-exec: a drop is
#     a restart, the day's delta then counts from it).
#
#   usage: learn_e2e.sh CELLCASTD CELLCAST SET WORKDIR [SEEDS] [DAYS] [SECONDS_PER_DAY] [TX_STEPS]
#     SET barcelona | hourly | ett | ett3 | nab-traffic | nab-machine (replay_sets.py);
#     SEEDS default "1"; DAYS default 14;
#     SECONDS_PER_DAY default 20; TX_STEPS (the learner's --tx-steps) default 1000.
#   Prints the table per seed (learn_e2e_table.py) and leaves WORKDIR/results.jsonl (one
#   line per seed x day; with each KPI's served P10-P90 coverage of the day, from every
#   cell's GET /v1/cells/{id}/forecasts scores).
#   Needs kcat, curl and python3 (exit 77 otherwise).
set -eu
CCD=$(realpath "${1:?cellcastd binary}")
CLI=$(realpath "${2:?cellcast binary}")
SET=${3:?set}
W=${4:?workdir}
SEEDS=${5:-1}
DAYS=${6:-14}
SPD=${7:-20}
TX_STEPS=${8:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
SHARED=$(cd "$SRC/.." && pwd)/shared/data
for t in kcat curl python3; do
    command -v $t >/dev/null || { echo "learn_e2e.sh: $t missing" >&2; exit 77; }
done
case $SET in
barcelona) EXTRA=(--patch-len 8) ;;
hourly | ett | ett3 | nab-traffic | nab-machine) EXTRA=() ;;
*) echo "learn_e2e.sh: SET must be barcelona, hourly, ett, ett3, nab-traffic or nab-machine" >&2; exit 2 ;;
esac
mkdir -p "$W"
W=$(realpath "$W")
python3 "$HERE/replay_sets.py" csv "$SET" "$SHARED" "$W/data"
mkdir -p "$W/days"
python3 "$HERE/replay_sets.py" kafka "$W/data" "$W/days" "$DAYS" >"$W/days/counts"
: >"$W/results.jsonl"
T0=$(head -c 200 "$W/days/day000.txt" | grep -o '"ts": [0-9]*' | head -1 | grep -o '[0-9]*$')
CELLS=()
for f in "$W"/data/*.csv; do CELLS+=("$(basename "$f" .csv)"); done

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || :; done
    wait 2>/dev/null || :
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
url() { echo "http://127.0.0.1:$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$1" | tail -1 | sed 's/.*://')"; }

for seed in $SEEDS; do
    R="$W/s$seed"
    rm -rf "$R"
    mkdir -p "$R/learner"
    PORT=$(free_port)
    cat >"$R/cfg.yaml" <<YAML
model:
  path: "$SRC/models/default.safetensors"
  source: kafka
  learned_path: "$R/learned.safetensors"
kafka:
  brokers: embedded
  embedded_port: $PORT
  group_id: learn-e2e
http:
  port: 0
snapshot:
  path: "$R/state.snap"
demo:
  enabled: false
YAML
    nice -n 5 "$CCD" -c "$R/cfg.yaml" >"$R/cellcastd.log" 2>&1 &
    CPID=$!
    PIDS+=("$CPID")
    for _ in $(seq 300); do grep -q 'listening on http' "$R/cellcastd.log" && break; sleep 0.1; done
    (
        trap 'kill "$lp" 2>/dev/null; exit 0' TERM
        while :; do
            nice -n 5 "$CLI" learn --brokers "127.0.0.1:$PORT" --topic kpis \
                --out "$R/learner/model.safetensors" --poll 2 --tx-steps "$TX_STEPS" \
                --seed "$seed" "${EXTRA[@]}" 2>>"$R/learner.log" &
            lp=$!
            wait "$lp" || :
            echo "--- learner exited $(date -u +%T)" >>"$R/learner.log"
            sleep 1
        done
    ) &
    PIDS+=($!)
    sleep 4 # the consumer group's first rebalance (the mock delays it ~3 s)
    t_run=$(date +%s)
    for ((d = 0; d < DAYS; d++)); do
        f=$(printf '%s/days/day%03d.txt' "$W" "$d")
        t0=$(date +%s.%N)
        [ -s "$f" ] && { kcat -b "127.0.0.1:$PORT" -P -t kpis -K '|' -l "$f" 2>>"$R/kcat.log" ||
            echo "day $d: kcat failed" >>"$R/kcat.log"; }
        sleep "$(python3 -c "import sys; print(max(0.0, $SPD - ($(date +%s.%N) - $t0)))")"
        u=$(url "$R/cellcastd.log")
        curl -s "$u/metrics" >"$R/day$d.metrics" || :
        curl -s "$u/v1/model" >"$R/day$d.model.json" || :
        for c in "${CELLS[@]}"; do # the day's past forecasts: per-KPI coverage80 and n
            curl -s "$u/v1/cells/$c/forecasts?since=$((T0 + d * 86400))&until=$((T0 + d * 86400 + 86399))" \
                >"$R/day$d.fc.$c.json" || :
        done
        cut -d' ' -f1-3 /proc/loadavg >"$R/day$d.load"
        kill -0 "$CPID" 2>/dev/null || echo "day $d: cellcastd exited" >>"$R/kcat.log"
    done
    echo "seed $seed: $(( $(date +%s) - t_run )) s wall" >&2
    cleanup
    PIDS=()
    python3 - "$R" "$seed" "$DAYS" "$W/days/counts" "${CELLS[@]}" >>"$W/results.jsonl" <<'PY'
import json, math, re, sys
R, seed, days = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cells = sys.argv[5:]
counts = [int(x) for x in open(sys.argv[4])]
LINE = re.compile(r'^([a-z_]+)(?:\{([^}]*)\})? (\S+)$')
def metrics(d):
    out = {}
    try:
        for l in open(f"{R}/day{d}.metrics"):
            m = LINE.match(l.strip())
            if m:
                out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    except OSError:
        pass
    return out
def model(d):
    try:
        return json.load(open(f"{R}/day{d}.model.json"))
    except (OSError, ValueError):
        return {}
prev = {}
for d in range(days):
    cur = metrics(d)
    # a counter below its previous value: the daemon restarted (re-exec); count from zero
    def delta(k):
        c = cur.get(k)
        if c is None:
            return 0.0
        p = prev.get(k, 0.0)
        return c - p if c >= p else c
    restarted = any(cur.get(k, 0) < v for k, v in prev.items() if k[0].endswith("_total"))
    kpis = sorted({re.search(r'kpi="([^"]*)"', k[1]).group(1) for k in cur
                   if k[0] == "cellcast_model_live_scored_total"})
    per_kpi, per_kind = {}, {"one_step": [], "horizon_end": []}
    scored = 0
    for kpi in kpis:
        r = []
        for kind in ("one_step", "horizon_end"):
            lab = f'kpi="{kpi}",kind="{kind}"'
            n = delta(("cellcast_model_live_scored_total", lab))
            e = delta(("cellcast_model_live_abs_error_total", lab))
            z = delta(("cellcast_model_live_naive_abs_error_total", lab))
            scored += n
            if n > 0 and z > 0:
                r.append(e / z)
                per_kind[kind].append(e / z)
        if r:
            per_kpi[kpi] = sum(r) / len(r)
    mean = lambda v: sum(v) / len(v) if v else None
    # the same with each cell weighed alike (1 / its MASE scale): the rollback watch's score
    scaled = []
    for kpi in kpis:
        r = []
        for kind in ("one_step", "horizon_end"):
            lab = f'kpi="{kpi}",kind="{kind}"'
            e = delta(("cellcast_model_live_scaled_abs_error_total", lab))
            z = delta(("cellcast_model_live_scaled_naive_abs_error_total", lab))
            if z > 0:
                r.append(e / z)
        if r:
            scaled.append(sum(r) / len(r))
    sc = delta(("cellcast_interval_scored_total", ""))
    mi = delta(("cellcast_interval_missed_total", ""))
    cov_kpi = {}
    for kpi in sorted({re.search(r'kpi="([^"]*)"', k[1]).group(1) for k in cur
                       if k[0] == "cellcast_interval_kpi_scored_total"}):
        ks = delta(("cellcast_interval_kpi_scored_total", f'kpi="{kpi}"'))
        km = delta(("cellcast_interval_kpi_missed_total", f'kpi="{kpi}"'))
        if ks > 0:
            cov_kpi[kpi] = [ks, km]
    # per KPI, the served P10-P90 coverage of the forecasts whose target is in the day
    # (GET /v1/cells/{id}/forecasts scores, one-step and horizon-end; summed over the cells)
    kpi_cov = {}
    for c in cells:
        try:
            fc = json.load(open(f"{R}/day{d}.fc.{c}.json"))
        except (OSError, ValueError):
            continue
        for kind in ("one_step", "horizon_end"):
            v = (fc.get("scores") or {}).get(kind) or {}
            for kpi, cov, n in zip(fc.get("kpis") or [], v.get("coverage80") or [], v.get("n") or []):
                if isinstance(cov, (int, float)) and n:
                    a = kpi_cov.setdefault(kpi, [0.0, 0])
                    a[0] += cov * n
                    a[1] += n
    m = model(d).get("serving", {})
    rec = m.get("record") or {}
    hist = m.get("history") or []
    print(json.dumps({
        "seed": seed, "day": d + 1, "messages": counts[d],
        "ingested": delta(("cellcast_ingest_messages_total", 'source="kafka"')),
        "restarted": restarted,
        "hash": m.get("hash"), "kind": rec.get("published"),
        "learning": (m.get("learning") or {}).get("state"),
        "applied": m.get("applied"), "rollbacks": m.get("rollbacks"),
        "history": [[h.get("event"), h.get("hash"), h.get("data_time")] for h in hist],
        "record_scores": {c.get("kind"): c.get("mase") for c in rec.get("candidates", [])},
        "served_rel_mae": mean(list(per_kpi.values())),
        "served_rel_mae_cells_alike": mean(scaled),
        "one_step": mean(per_kind["one_step"]), "horizon_end": mean(per_kind["horizon_end"]),
        "per_kpi": per_kpi, "watch_samples": scored,
        "coverage": 1 - mi / sc if sc > 0 else None, "interval_scored": sc,
        "coverage_kpi": cov_kpi,
        "kpi_coverage": {k: [v[0] / v[1], v[1]] for k, v in sorted(kpi_cov.items())},
        "live_mase_window": (m.get("live") or {}).get("mase"),
        "load": open(f"{R}/day{d}.load").read().strip() if d >= 0 else None,
    }))
    prev = cur
PY
done
python3 "$HERE/learn_e2e_table.py" "$W/results.jsonl" "$SET"
