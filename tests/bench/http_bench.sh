#!/usr/bin/env bash
# tests/bench/http_bench.sh — GET /v1/cells/{id}/forecast with wrk on loopback, idle and
# under ingest, against the real cellcastd (embedded broker, built-in demo feed as load).
#
#   http_bench.sh CELLCASTD MODEL [SECONDS] [INGEST_CELLS] [SPEEDUP] [PRODUCER]
#
# idle:   16 demo cells with 40 steps of history, no new steps; wrk -t1 -c16 on the full
#         forecast of one cell (all KPIs, the model's horizon: ~16 KB of JSON).
# ingest: INGEST_CELLS demo cells (default 10000) stepping SPEEDUP x real time (default 1350:
#         a 900 s step every 0.67 s, ~15k cell-steps/s) through the real Kafka path; the
#         same wrk once the cell has a forecast. Prints wrk's numbers, the cell-steps/s the
#         daemon sustained meanwhile and its event-loop lag histogram (cron lateness).
#         The demo feed generates and produces its messages on the event loop itself
#         (ccd_demo_tick: up to 1000 messages per 10 ms tick, ~10 ms of work).
# kafka:  with PRODUCER (tests/bench/ingest_bench): no demo feed; INGEST_CELLS cells fed from
#         that external producer process through the embedded broker, as a live network
#         feeds a daemon, kept 2-6 steps ahead of the daemon so that it consumes at full
#         speed (the engine worker never idles) for the whole wrk run; 20 steps of warm-up.
# wrk, the daemon, its worker and (kafka phase) the producer all share the machine's cores.
# PHASES (environment, default "idle ingest kafka") picks the phases to run.
set -eu
CELLCASTD=$1 MODEL=$2 SECS=${3:-10} CELLS=${4:-10000} SPEEDUP=${5:-1350} PRODUCER=${6:-}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools wrk
test_workdir httpbench

start() { # cells backfill speedup
    start_daemon "$TMP/d.log" port --set model.path="$MODEL" --set http.port=0 \
        --set demo.enabled=true --set demo.cells="$1" --set demo.backfill_steps="$2" \
        --set demo.speedup="$3" --set kafka.embedded_partitions=8
    wait_http "$U/v1/cells/demo-0001/forecast" 600 0.2 || { cat "$TMP/d.log"; echo "no forecast"; exit 1; }
}
stop() { stop_daemon || true; }
steps() { curl -s "$U/metrics" | awk '$1 == "cellcast_steps_total" { print $2 }'; }
wrk_on() { # CELL: wrk on the cell's forecast; sets s0 s1 t0 t1 (steps and time around it)
    s0=$(steps)
    t0=$(date +%s.%N)
    wrk -t1 -c16 -d"${SECS}s" --latency "$U/v1/cells/$1/forecast" | grep -E 'Requests/sec|Latency |50%|90%|99%'
    s1=$(steps)
    t1=$(date +%s.%N)
}
report() { # the cell-steps/s sustained during wrk and the event loop's lag histogram
    echo "cell-steps/s during wrk: $(echo "($s1 - $s0) / ($t1 - $t0)" | bc)"
    curl -s "$U/metrics" | grep -E '^cellcast_loop_lag_seconds_(bucket|count)' | grep -E 'le="0.002"|le="0.01"|le="0.05"|count'
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; } # utime + stime of the daemon

PHASES=${PHASES:-idle ingest kafka}
has() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }

if has idle; then
echo "== idle (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
start 16 40 1
sleep 2 # the demo's backfill of the other cells settles
# The daemon's CPU time per request (utime + stime of its process over the run): steadier
# than requests/s when other processes share the cores.
cpu0=$(cpu_ticks)
wrk -t1 -c16 -d"${SECS}s" --latency "$U/v1/cells/demo-0001/forecast" > "$TMP/wrk.txt"
cpu1=$(cpu_ticks)
grep -E 'Requests/sec|Latency |50%|90%|99%' "$TMP/wrk.txt"
reqs=$(awk '/requests in/ { print $1 }' "$TMP/wrk.txt")
echo "daemon CPU per request: $(echo "scale=1; ($cpu1 - $cpu0) * 1000000 / $(getconf CLK_TCK) / $reqs" | bc) us"
stop
fi

if has ingest; then
echo "== under ingest: $CELLS cells at ${SPEEDUP}x (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
start "$CELLS" 20 "$SPEEDUP"
sleep 3
wrk_on demo-0001
report
stop
fi

[ -n "$PRODUCER" ] && has kafka || exit 0
echo "== under full Kafka ingest: $CELLS cells from $(basename "$PRODUCER") (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
FEATS=prb_dl,prb_ul,thr_dl_mbps,thr_ul_mbps,active_users,latency_ms,cqi,drop_rate # the model's
DAEMON_TRIES=300 start_daemon "$TMP/d.log" assigned --set model.path="$MODEL" --set http.port=0 \
    --set demo.enabled=false --set kafka.embedded_partitions=16 --set log.level=info
[ -n "$BS" ] || { cat "$TMP/d.log"; echo "cellcastd did not start"; exit 1; }
produce() { "$PRODUCER" -b "$BS" -c "$CELLS" --from "$1" -n "$2" -S 900 -f "$FEATS" >/dev/null; }
wait_steps() { while [ "$(steps)" -lt "$1" ]; do kill -0 $DPID || exit 1; sleep 0.05; done; }
for ((p = 0; p < 20; p += 4)); do produce $p 4; wait_steps $((CELLS * (p + 4))); done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/cells/bench-000001/forecast")" = 200 ] ||
    { echo "no forecast for bench-000001"; exit 1; }
P=20
feed() { # keep the daemon 2-6 steps behind the producer until stopped
    while [ ! -e "$TMP/stop" ]; do
        if [ "$(steps)" -ge $((CELLS * (P - 2))) ]; then produce $P 4; P=$((P + 4)); else sleep 0.05; fi
    done
}
feed &
FPID=$!
sleep 3
wrk_on bench-000001
touch "$TMP/stop"
wait $FPID
report
curl -s "$U/metrics" | awk '$1 ~ /^cellcast_ingest_steps_total/ && /imputed|restart/'
stop
