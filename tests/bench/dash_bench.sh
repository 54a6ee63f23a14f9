#!/usr/bin/env bash
# tests/bench/dash_bench.sh — what the dashboard's JSON costs the daemon (issue 15), against
# today's forecast route: daemon CPU per request (utime + stime of its process over a wrk
# run, as http_bench.sh) on an idle daemon whose CELLS demo cells (default 60) hold 7 days
# of 15-minute steps (672 + a few, the default history.depth), for
#   forecast    GET /v1/cells/{id}/forecast (the reference: cached per published forecast)
#   history     GET /v1/cells/{id}/history?max_points=POINTS (7 days, down-sampled)
#   forecasts   GET /v1/cells/{id}/forecasts?max_points=POINTS (past forecasts + scores)
#   batch50     GET /v1/forecast?cells=<50 ids>
# each plain and with Accept-Encoding: gzip; then the long history's bytes per cell.
#
#   dash_bench.sh CELLCASTD MODEL [SECONDS] [CELLS] [POINTS]
set -eu
CELLCASTD=$1 MODEL=$2 SECS=${3:-5} CELLS=${4:-60} POINTS=${5:-300}
# shellcheck source=../lib/daemon.sh
. "$(dirname "$0")/../lib/daemon.sh"
need_tools wrk curl
test_workdir dashbench
BACKFILL=680
start_daemon "$TMP/d.log" port --set model.path="$MODEL" --set http.port=0 \
    --set demo.enabled=true --set demo.cells="$CELLS" --set demo.backfill_steps=$BACKFILL \
    --set demo.speedup=1 --set kafka.embedded_partitions=4
wait_http "$U/v1/cells/demo-0001/forecast" 600 0.2 || { cat "$TMP/d.log"; echo "no forecast"; exit 1; }
steps() { curl -s "$U/metrics" | awk '$1 == "cellcast_steps_total" { print $2 }'; }
for _ in $(seq 600); do [ "$(steps)" -ge $((CELLS * BACKFILL)) ] && break; sleep 0.2; done
sleep 1
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
ids=$(seq -s, -f 'demo-%04g' 0 49)
run() { # NAME PATH [WRK-ARG...]
    local name=$1 path=$2 cpu0 cpu1 reqs bytes
    shift 2
    bytes=$(curl -s "$@" "$U$path" | wc -c)
    cpu0=$(cpu_ticks)
    wrk -t1 -c8 -d"${SECS}s" "$@" "$U$path" >"$TMP/wrk.txt"
    cpu1=$(cpu_ticks)
    reqs=$(awk '/requests in/ { print $1 }' "$TMP/wrk.txt")
    printf '%-22s %8s B  %9s req/s  daemon CPU %6s us/request\n' "$name" "$bytes" \
        "$(awk '/Requests\/sec/ { print $2 }' "$TMP/wrk.txt")" \
        "$(echo "scale=1; ($cpu1 - $cpu0) * 1000000 / $(getconf CLK_TCK) / $reqs" | bc)"
}
echo "== $CELLS cells x $BACKFILL steps, idle (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for gz in "" gzip; do
    h=()
    [ -n "$gz" ] && h=(-H 'Accept-Encoding: gzip')
    run "forecast${gz:+ (gzip)}" "/v1/cells/demo-0001/forecast" "${h[@]}"
    run "history 7d/$POINTS${gz:+ (gzip)}" "/v1/cells/demo-0001/history?max_points=$POINTS" "${h[@]}"
    run "forecasts 7d/$POINTS${gz:+ (gzip)}" "/v1/cells/demo-0001/forecasts?max_points=$POINTS" "${h[@]}"
    run "batch50${gz:+ (gzip)}" "/v1/forecast?cells=$ids" "${h[@]}"
done
n=$(curl -s "$U/v1/cells/demo-0001/history" | grep -o '"step":' | wc -l)
hb=$(curl -s "$U/metrics" | awk '$1 == "cellcast_cell_history_bytes" { print $2 }')
echo "history: $n steps of demo-0001 kept; long-history bytes $hb for $CELLS cells = $((hb / CELLS)) B/cell"
curl -s "$U/v1/info" | grep -o '"cells":{[^}]*}'
stop_daemon || true
