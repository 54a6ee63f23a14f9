#!/usr/bin/env bash
# tests/bench/http_bench.sh — GET /v1/cells/{id}/forecast with wrk on loopback, idle and
# under ingest, against the real cellcastd (embedded broker, built-in demo feed as load).
#
#   http_bench.sh CELLCASTD MODEL [SECONDS] [INGEST_CELLS] [SPEEDUP]
#
# idle:   16 demo cells with 40 steps of history, no new steps; wrk -t1 -c16 on the full
#         forecast of one cell (all KPIs, the model's horizon: ~16 KB of JSON).
# ingest: INGEST_CELLS demo cells (default 10000) stepping SPEEDUP x real time (default 1350:
#         a 900 s step every 0.67 s, ~15k cell-steps/s) through the real Kafka path; the
#         same wrk once the cell has a forecast. Prints wrk's numbers, the cell-steps/s the
#         daemon sustained meanwhile and its event-loop lag histogram (cron lateness).
set -eu
CCD=$1 MODEL=$2 SECS=${3:-10} CELLS=${4:-10000} SPEEDUP=${5:-1350}
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)"; exit 77; }
TMP=$(mktemp -d /tmp/cellcast-httpbench.XXXXXX)
DPID=
trap '[ -n "$DPID" ] && kill $DPID 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT

start() { # cells backfill speedup
    "$CCD" --set model.path="$MODEL" --set http.port=0 --set demo.enabled=true \
        --set demo.cells="$1" --set demo.backfill_steps="$2" --set demo.speedup="$3" \
        --set kafka.embedded_partitions=8 >"$TMP/d.log" 2>&1 &
    DPID=$!
    for _ in $(seq 100); do
        PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/d.log" | head -1 | sed 's/.*://')
        [ -n "$PORT" ] && break
        sleep 0.1
    done
    U="http://127.0.0.1:$PORT"
    for _ in $(seq 600); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/cells/demo-0001/forecast")" = 200 ] && return
        sleep 0.2
    done
    cat "$TMP/d.log"
    echo "no forecast"
    exit 1
}
stop() { kill "$DPID"; wait "$DPID" || true; DPID=; }
steps() { curl -s "$U/metrics" | awk '$1 == "cellcast_steps_total" { print $2 }'; }

echo "== idle (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
start 16 40 1
wrk -t1 -c16 -d"${SECS}s" --latency "$U/v1/cells/demo-0001/forecast" | grep -E 'Requests/sec|Latency |50%|90%|99%'
stop

echo "== under ingest: $CELLS cells at ${SPEEDUP}x (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
start "$CELLS" 20 "$SPEEDUP"
sleep 3
s0=$(steps)
t0=$(date +%s.%N)
wrk -t1 -c16 -d"${SECS}s" --latency "$U/v1/cells/demo-0001/forecast" | grep -E 'Requests/sec|Latency |50%|90%|99%'
s1=$(steps)
t1=$(date +%s.%N)
echo "cell-steps/s during wrk: $(echo "($s1 - $s0) / ($t1 - $t0)" | bc)"
curl -s "$U/metrics" | grep -E '^cellcast_loop_lag_seconds_(bucket|count)' | grep -E 'le="0.002"|le="0.01"|le="0.05"|count'
stop
