#!/usr/bin/env bash
# tests/bench/batch_read_bench.sh — what one client looping on batch history reads does to
# everyone else (issue 29): the forecast route's latency (wrk -t1 -c4 on
# GET /v1/cells/{id}/forecast, p50/p99) on an idle daemon whose CELLS demo cells (default
# 100) hold BACKFILL 15-minute steps (default 680: the default history.depth of 7 days),
#   alone        no other client;
#   unread-param one client (wrk -t1 -c1) asking GET /v1/history?cells=<CELLS ids> with a
#                new parameter the daemon does not read at every request (&x=N: before
#                issue 29 a reply-cache bypass; every request rendered every cell's steps);
#   read-param   the same with since= moved by one second at every request (a parameter the
#                daemon reads, so a reply rendered each time: what http.max_read_values
#                bounds; since stays within one step, so each reply is the same size).
# Both looping phases run twice: on the whole history (100 x 680 x 8 KPIs = 544,000 values,
# over the default http.max_read_values of 200,000: refused with 413 since issue 29) and
# with max_points=240 (192,000 values, ~1.7 MB: rendered, and small enough for the reply
# cache).
# Each phase prints the forecast route's req/s, p50 and p99, the looping client's req/s and
# its statuses, and the daemon's CPU over the phase (utime + stime, % of one core).
# Figures, never pass/fail; the machine's other load shows in them (load average printed).
#
#   batch_read_bench.sh CELLCASTD MODEL [SECONDS] [CELLS] [BACKFILL]
set -eu
CELLCASTD=$1 MODEL=$2 SECS=${3:-8} CELLS=${4:-100} BACKFILL=${5:-680}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools wrk curl bc
test_workdir batchreadbench
start_daemon "$TMP/d.log" port --set model.path="$MODEL" --set http.port=0 \
    --set demo.enabled=true --set demo.cells="$CELLS" --set demo.backfill_steps="$BACKFILL" \
    --set demo.speedup=1 --set kafka.embedded_partitions=4
wait_http "$U/v1/cells/demo-0001/forecast" 600 0.2 || { cat "$TMP/d.log"; echo "no forecast"; exit 1; }
steps() { curl -s "$U/metrics" | awk '$1 == "cellcast_steps_total" { print $2 }'; }
for _ in $(seq 900); do [ "$(steps)" -ge $((CELLS * BACKFILL)) ] && break; sleep 0.2; done
sleep 1
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
ids=$(seq -s, -f 'demo-%04g' 0 $((CELLS - 1)))
bytes=$(curl -s "$U/v1/history?cells=$ids" | wc -c)
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/history?cells=$ids")
echo "== $CELLS cells x $BACKFILL steps (load average: $(cut -d' ' -f1-3 /proc/loadavg)); GET /v1/history?cells=<$CELLS ids>: $code, $bytes B"
since0=$(($(date +%s) - 30 * 86400))
cat >"$TMP/unread.lua" <<'LUA'
n = 0
request = function()
    n = n + 1
    return wrk.format(nil, wrk.path .. "&x=" .. n)
end
LUA
cat >"$TMP/read.lua" <<LUA
n = 0
request = function()
    n = n + 1
    return wrk.format(nil, wrk.path .. "&since=" .. ($since0 + 0) + n % 900)
end
LUA
# statuses of the looping client: wrk counts non-2xx replies
cat >>"$TMP/unread.lua" <<'LUA'
done = function(summary, latency, requests)
    io.write(string.format("loop client: %d requests, %d non-2xx\n", summary.requests, summary.errors.status))
end
LUA
sed -n '/^done = /,$p' "$TMP/unread.lua" >>"$TMP/read.lua"
phase() { # NAME [LOOP-SCRIPT [QUERY]]
    local name=$1 script=${2:-} q=${3:-} cpu0 cpu1 lp=
    cpu0=$(cpu_ticks)
    if [ -n "$script" ]; then
        wrk -t1 -c1 -d"$((SECS + 2))s" -s "$script" "$U/v1/history?cells=$ids$q" >"$TMP/loop.txt" &
        lp=$!
        sleep 1
    fi
    wrk -t1 -c4 -d"${SECS}s" --latency "$U/v1/cells/demo-0001/forecast" >"$TMP/fc.txt"
    cpu1=$(cpu_ticks)
    [ -n "$lp" ] && wait "$lp"
    printf '%-22s forecast %7s req/s  p50 %8s  p99 %8s  daemon CPU %s %%' "$name" \
        "$(awk '/Requests\/sec/ { printf "%.0f", $2 }' "$TMP/fc.txt")" \
        "$(awk '$1 == "50%" { print $2 }' "$TMP/fc.txt")" "$(awk '$1 == "99%" { print $2 }' "$TMP/fc.txt")" \
        "$(echo "scale=0; ($cpu1 - $cpu0) * 100 / $(getconf CLK_TCK) / $SECS" | bc)"
    if [ -n "$lp" ]; then
        printf '  | loop %s req/s, %s' "$(awk '/Requests\/sec/ { printf "%.0f", $2 }' "$TMP/loop.txt")" \
            "$(grep 'loop client' "$TMP/loop.txt" | sed 's/loop client: //')"
    fi
    echo
}
phase alone
phase unread-param "$TMP/unread.lua"
phase read-param "$TMP/read.lua"
echo "GET /v1/history?cells=<$CELLS ids>&max_points=240: $(curl -s -o /dev/null -w '%{http_code}, %{size_download} B' "$U/v1/history?cells=$ids&max_points=240")"
phase "unread-param mp=240" "$TMP/unread.lua" "&max_points=240"
phase "read-param mp=240" "$TMP/read.lua" "&max_points=240"
curl -s "$U/metrics" | grep -E '^cellcast_http_(reads_refused|reply_cache)_total' || true
stop_daemon || true
