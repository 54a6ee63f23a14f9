#!/usr/bin/env bash
# tests/bench/ingest_bench.sh — end-to-end ingest benchmark of cellcastd:
#   ingest_bench (C producer, librdkafka) → embedded broker (in cellcastd) → consumer →
#   decode → cell table → batched engine step → forecast published.
#
#   ingest_bench.sh CELLCASTD CELLCAST INGEST_BENCH [CELLS] [WARM_STEPS] [MEASURE_STEPS] [THREADS]
#
# The default model shape (F=8, P=16, N=21, D=64, L=2; weights from a 2-step training run
# on synthetic data: the values do not matter for speed). One message per cell-step.
# Phase 1 produces WARM_STEPS steps of every cell and waits until all are stepped; phase 2
# produces MEASURE_STEPS more while the daemon consumes, and measures from the start of
# phase 2 until the last cell-step's forecast is published (cellcast_steps_total). Where
# the time goes comes from /metrics deltas over phase 2: the event loop's decode (parse)
# and cell-table (state) time, and the worker's engine parts and publishing.
# Prints a JSON summary on the last line. BENCH_SET=key=value adds one --set to the daemon's
# command line (e.g. forecast.interval_adapt=true, to measure what it costs).
#
# The model, the daemon and the two phases of the load are tests/helpers/ingest_load.sh's
# (chunked: the embedded broker keeps only the newest 5 MiB per partition); a check that
# every produced record was applied with no imputed step or restart (no loss) ends the run.
set -eu
CELLCASTD=$1 CELLCAST=$2 PRODUCER=$3
CELLS=${4:-10000} WARM=${5:-48} MEAS=${6:-32} THREADS=${7:-1}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/ingest_load.sh
. "$(dirname "$0")/../helpers/ingest_load.sh"
test_workdir bench

ingest_model "$TMP"
ingest_daemon "$TMP" "$TMP/model.safetensors" "$THREADS" ${BENCH_SET:+--set "$BENCH_SET"}
metrics() { curl -sf "http://127.0.0.1:$PORT/metrics" >"$1"; }

echo "warm-up: $CELLS cells x $WARM steps (chunks of $INGEST_CHUNK steps)" >&2
ingest_warm
metrics "$TMP/m0"
t0=$(date +%s.%N)
echo "measure: $CELLS cells x $MEAS steps" >&2
ingest_feed &
PP=$!
PIDS+=("$PP")
ingest_wait_steps $((CELLS * (WARM + MEAS)))
t1=$(date +%s.%N)
wait $PP
cp "$TMP/p2.0.json" "$TMP/p2.json"
metrics "$TMP/m1"
rss=$(awk '/VmRSS/ { print $2 }' /proc/$DPID/status)

python3 - "$TMP" "$t0" "$t1" "$CELLS" "$MEAS" "$rss" "$THREADS" "$WARM" <<'EOF'
import json, sys
tmp, t0, t1, cells, meas, rss_kb, threads = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
def load(p):
    d = {}
    for line in open(p):
        if line.startswith("#") or not line.strip(): continue
        k, v = line.rsplit(" ", 1)
        d[k] = float(v)
    return d
a, b = load(f"{tmp}/m0"), load(f"{tmp}/m1")
dd = lambda k: b.get(k, 0) - a.get(k, 0)
steps = dd("cellcast_steps_total")
wall = t1 - t0
prod = json.loads(open(f"{tmp}/p2.json").read())
parts = {
    "loop_parse_s": dd('cellcast_ingest_seconds_total{part="parse"}'),
    "loop_state_s": dd('cellcast_ingest_seconds_total{part="state"}'),
    "engine_dense_s": dd('cellcast_engine_seconds_total{part="dense"}'),
    "engine_attention_s": dd('cellcast_engine_seconds_total{part="attention"}'),
    "engine_rebuild_s": dd('cellcast_engine_seconds_total{part="rebuild"}'),
    "engine_other_s": dd('cellcast_engine_seconds_total{part="other"}'),
    "publish_s": dd('cellcast_engine_seconds_total{part="publish"}'),
}
us = {k[:-2] + "_us_per_step": round(v / steps * 1e6, 2) for k, v in parts.items()}
out = {"cells": cells, "measured_steps_per_cell": meas, "cell_steps": int(steps),
       "wall_s": round(wall, 3), "cell_steps_per_s": round(steps / wall),
       "producer_msgs_per_s": prod["messages_per_s"], "engine_threads": threads,
       "rss_mb": round(rss_kb / 1024, 1), "rss_kb_per_cell": round(rss_kb / cells, 1),
       "batches": int(dd("cellcast_batch_size_count")) if "cellcast_batch_size_count" in b else None,
       "records_total": int(b.get("cellcast_ingest_records_total", -1)),
       "imputed_or_restarted": int(b.get('cellcast_ingest_steps_total{outcome="imputed"}', 0) + b.get('cellcast_ingest_steps_total{outcome="restart"}', 0)),
       **{k: round(v, 3) for k, v in parts.items()}, **us}
print(json.dumps(out))
want = cells * (meas + int(sys.argv[8]))
if out["records_total"] != want or out["imputed_or_restarted"]:
    print(f"WARNING: {out['records_total']} records applied, want {want}; "
          f"{out['imputed_or_restarted']} imputed/restarted steps: messages were lost", file=sys.stderr)
    sys.exit(1)
EOF
