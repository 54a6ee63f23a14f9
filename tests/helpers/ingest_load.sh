# tests/helpers/ingest_load.sh — the ingest load of tests/bench/ingest_bench.sh and
# ingest_learn_bench.sh: a model of the default shape to step with, cellcastd on its embedded
# broker, and the C producer's messages (tests/bench/ingest_bench.c: one per cell-step, hourly
# steps) in two phases, produced in chunks the embedded broker keeps. Source it after
# tests/helpers/daemon.sh; expects CELLCASTD, CELLCAST, PRODUCER (the producer binary) and
# CELLS, WARM, MEAS (cells, warm-up steps, measured steps).
#
# The embedded broker is librdkafka's mock cluster, which keeps only the newest 5 MiB (and
# 100k message sets) per partition and silently drops older ones: the producer must not run
# further ahead of the consumer than that. Hence 16 partitions (80 MiB ≈ 380k messages of
# ~210 bytes), both phases produced in chunks of at most 130k messages (8 steps at most; 1
# step at 130k cells and more), and phase 2 with at most two chunks not yet consumed (the
# producer, ~3x faster than the daemon, still never lets it idle).

# ingest_model DIR: DIR/model.safetensors, the default model's shape (F=8, P=16, N=21, D=64,
# L=2) after a 2-step training run on 2 synthetic cells: its values do not matter for speed.
ingest_model() {
    "$CELLCAST" synth --cells 2 --days 10 --step 3600 --out "$1/synth.csv" >/dev/null 2>&1
    "$CELLCAST" train --data "$1/synth.csv" --out "$1/model.safetensors" --steps 2 \
        --val-windows 16 --threads 1 >/dev/null 2>&1
}

# ingest_daemon DIR MODEL THREADS [ARG...]: writes DIR/bench.yaml (MODEL, the embedded broker
# with 16 partitions, group bench, an ephemeral HTTP port, THREADS engine threads, no demo
# feed, log level warn) and starts cellcastd on it with log.level=info and ARG... (its log
# DIR/d.log) until its consumer has its partitions; INGEST_DIR=DIR. Exits 1 without a broker.
ingest_daemon() {
    INGEST_DIR=$1
    local model=$2 threads=$3
    shift 3
    cat >"$INGEST_DIR/bench.yaml" <<EOF
model:
  path: "$model"
kafka:
  brokers: embedded
  group_id: bench
  embedded_partitions: 16
http:
  port: 0
engine:
  threads: $threads
demo:
  enabled: false
log:
  level: warn
EOF
    start_daemon "$INGEST_DIR/d.log" assigned -c "$INGEST_DIR/bench.yaml" --set log.level=info "$@"
    [ -n "$BS" ] || { cat "$INGEST_DIR/d.log"; echo "cellcastd did not start"; exit 1; }
    INGEST_CHUNK=$((130000 / CELLS))
    INGEST_CHUNK=$((INGEST_CHUNK < 1 ? 1 : INGEST_CHUNK > 8 ? 8 : INGEST_CHUNK))
}

# ingest_steps: the daemon's cellcast_steps_total now (empty while it does not answer).
ingest_steps() { curl -sf "http://127.0.0.1:$PORT/metrics" | awk '$1 == "cellcast_steps_total" { print $2 }'; }

# ingest_wait_steps N: waits until the daemon has made N cell-steps; exits 1, showing its log,
# when it has exited, or when the producer of ingest_feed has failed (without this check the
# wait for a background producer's records would never end).
ingest_wait_steps() {
    local s
    while :; do
        s=$(ingest_steps)
        [ "${s:-0}" -ge "$1" ] && return 0
        kill -0 "$DPID" || { cat "$INGEST_DIR/d.log"; exit 1; }
        [ ! -e "$INGEST_DIR/feed.failed" ] || { echo "$(basename "$0"): the producer failed"; exit 1; }
        sleep 0.05
    done
}

# ingest_warm: phase 1, steps 0..WARM-1 of every cell, a chunk at a time, each waited for
# (the producer's report of the last chunk in INGEST_DIR/p1.json).
ingest_warm() {
    local p n
    for ((p = 0; p < WARM; p += INGEST_CHUNK)); do
        n=$((WARM - p < INGEST_CHUNK ? WARM - p : INGEST_CHUNK))
        "$PRODUCER" -b "$BS" -c "$CELLS" --from "$p" -n "$n" >"$INGEST_DIR/p1.json"
        ingest_wait_steps $((CELLS * (p + n)))
    done
}

# ingest_feed: phase 2, steps WARM..WARM+MEAS-1, chunk k+1 once chunk k-1 is consumed (at most
# two chunks wait in the broker); run it in the background and wait for its steps with
# ingest_wait_steps. The producer's report of chunk k: INGEST_DIR/p2.k.json; a failed
# producer leaves INGEST_DIR/feed.failed.
ingest_feed() {
    local p=$WARM k=0 n
    while ((p < WARM + MEAS)); do
        n=$((WARM + MEAS - p < INGEST_CHUNK ? WARM + MEAS - p : INGEST_CHUNK))
        ((k < 2)) || ingest_wait_steps $((CELLS * (p - INGEST_CHUNK)))
        "$PRODUCER" -b "$BS" -c "$CELLS" --from "$p" -n "$n" >"$INGEST_DIR/p2.$k.json" ||
            { touch "$INGEST_DIR/feed.failed"; exit 1; }
        p=$((p + n)) k=$((k + 1))
    done
}
