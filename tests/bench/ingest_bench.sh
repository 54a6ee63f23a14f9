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
# The embedded broker is librdkafka's mock cluster, which keeps only the newest 5 MiB (and
# 100k message sets) per partition and silently drops older ones: the producer must not
# run further ahead of the consumer than that. Hence 16 partitions (80 MiB ≈ 380k
# messages of ~210 bytes), both phases produced in chunks of at most 130k messages (8
# steps at most; 1 step at 130k cells and more), phase 2 with at most two chunks not yet
# consumed (the producer, ~3x faster than the daemon, still never lets it idle), and a
# check that every produced record was applied with no imputed step or restart (no loss).
set -eu
CELLCASTD=$1 CELLCAST=$2 PRODUCER=$3
CELLS=${4:-10000} WARM=${5:-48} MEAS=${6:-32} THREADS=${7:-1}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir bench

"$CELLCAST" synth --cells 2 --days 10 --step 3600 --out "$TMP/synth.csv" >/dev/null 2>&1
"$CELLCAST" train --data "$TMP/synth.csv" --out "$TMP/model.safetensors" --steps 2 \
    --val-windows 16 --threads 1 >/dev/null 2>&1
cat >"$TMP/bench.yaml" <<EOF
model:
  path: "$TMP/model.safetensors"
kafka:
  brokers: embedded
  group_id: bench
  embedded_partitions: 16
http:
  port: 0
engine:
  threads: $THREADS
demo:
  enabled: false
log:
  level: warn
EOF
start_daemon "$TMP/d.log" assigned -c "$TMP/bench.yaml" --set log.level=info \
    ${BENCH_SET:+--set "$BENCH_SET"}
[ -n "$BS" ] || { cat "$TMP/d.log"; echo "cellcastd did not start"; exit 1; }

metrics() { curl -sf "http://127.0.0.1:$PORT/metrics" >"$1"; }
m() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
steps_now() { curl -sf "http://127.0.0.1:$PORT/metrics" | awk '$1 == "cellcast_steps_total" { print $2 }'; }
wait_steps() {
    while :; do
        s=$(steps_now)
        [ "${s:-0}" -ge "$1" ] && return 0
        kill -0 $DPID || { cat "$TMP/d.log"; exit 1; }
        # phase 2's producer runs in the background: without this the wait never ended
        [ ! -e "$TMP/feed.failed" ] || { echo "ingest_bench: the producer failed"; exit 1; }
        sleep 0.05
    done
}

CHUNK=$((130000 / CELLS))
CHUNK=$((CHUNK < 1 ? 1 : CHUNK > 8 ? 8 : CHUNK))
echo "warm-up: $CELLS cells x $WARM steps (chunks of $CHUNK steps)" >&2
for ((p = 0; p < WARM; p += CHUNK)); do
    n=$((WARM - p < CHUNK ? WARM - p : CHUNK))
    "$PRODUCER" -b "$BS" -c "$CELLS" --from $p -n $n >"$TMP/p1.json"
    wait_steps $((CELLS * (p + n)))
done
metrics "$TMP/m0"
t0=$(date +%s.%N)
echo "measure: $CELLS cells x $MEAS steps" >&2
feed() { # chunk k+1 once chunk k-1 is consumed: at most two chunks wait in the broker
    local p=$WARM k=0 n
    while ((p < WARM + MEAS)); do
        n=$((WARM + MEAS - p < CHUNK ? WARM + MEAS - p : CHUNK))
        ((k < 2)) || wait_steps $((CELLS * (p - CHUNK)))
        "$PRODUCER" -b "$BS" -c "$CELLS" --from $p -n $n >"$TMP/p2.$k.json" ||
            { touch "$TMP/feed.failed"; exit 1; }
        p=$((p + n)) k=$((k + 1))
    done
}
feed &
PP=$!
PIDS+=("$PP")
wait_steps $((CELLS * (WARM + MEAS)))
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
