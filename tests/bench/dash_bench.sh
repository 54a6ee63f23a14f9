#!/usr/bin/env bash
# tests/bench/dash_bench.sh — what the dashboard's JSON costs the daemon (issue 15), against
# today's forecast route: daemon CPU per request (utime + stime of its process over a wrk
# run, as http_bench.sh) on an idle daemon whose CELLS demo cells (default 60) hold 7 days
# of 15-minute steps (672 + a few, the default history.depth), for
#   forecast    GET /v1/cells/{id}/forecast (the reference: cached per published forecast)
#   history     GET /v1/cells/{id}/history?max_points=POINTS (7 days, down-sampled)
#   forecasts   GET /v1/cells/{id}/forecasts?max_points=POINTS (past forecasts + scores)
#   batch50     GET /v1/forecast?cells=<50 ids>
# each plain and with Accept-Encoding: gzip; then every read the page's cell view and list
# make, as the browser asks them (gzip), the series with the page's query (PAGE_HISTORY_Q,
# PAGE_PAST_Q: web/src/app.js's; give the old page's to measure an older daemon) and again
# as its refresh that finds no new step (If-None-Match: the reply's ETag → 304); then the
# long history's bytes per cell. The status reads the page polls (the cell, the list, the
# firing alerts, /v1/info) also as a 304 refresh and rendered (every request a new URL).
# Each figure is measured REPEAT times (default 3): mean ± sd.
#
#   dash_bench.sh CELLCASTD MODEL [SECONDS] [CELLS] [POINTS]
set -eu
CELLCASTD=$1 MODEL=$2 SECS=${3:-5} CELLS=${4:-60} POINTS=${5:-300} REPEAT=${REPEAT:-3}
PAGE_HISTORY_Q=${PAGE_HISTORY_Q:-digits=4&fields=values&max_points=1260}
PAGE_PAST_Q=${PAGE_PAST_Q:-digits=4&fields=one_step,mean,scores&max_points=1260}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools wrk curl bc
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
run() { # NAME PATH [CURL/WRK-ARG...]: REPEAT wrk runs (WRK_SCRIPT: its -s); the reply's
    # bytes, req/s and daemon CPU
    local name=$1 path=$2 cpu0 cpu1 reqs bytes code us=() rps=()
    shift 2
    rm -f "$TMP/body" # curl writes no file for a 304
    code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$@" "$U$path")
    bytes=$(cat "$TMP/body" 2>/dev/null | wc -c)
    for _ in $(seq "$REPEAT"); do
        cpu0=$(cpu_ticks)
        wrk -t1 -c8 -d"${SECS}s" ${WRK_SCRIPT:+-s "$WRK_SCRIPT"} "$@" "$U$path" >"$TMP/wrk.txt"
        cpu1=$(cpu_ticks)
        reqs=$(awk '/requests in/ { print $1 }' "$TMP/wrk.txt")
        rps+=("$(awk '/Requests\/sec/ { printf "%.0f", $2 }' "$TMP/wrk.txt")")
        us+=("$(echo "scale=2; ($cpu1 - $cpu0) * 1000000 / $(getconf CLK_TCK) / $reqs" | bc)")
    done
    printf '%-30s %3s %8s B  %6s req/s  daemon CPU %s us/request\n' "$name" "$code" "$bytes" \
        "$(printf '%s\n' "${rps[@]}" | sort -n | sed -n "$(((REPEAT + 1) / 2))p")" \
        "$(printf '%s\n' "${us[@]}" | awk '{ s += $1; q += $1 * $1; n++ }
            END { m = s / n; sd = n > 1 ? sqrt((q - n * m * m) / (n - 1)) : 0; if (sd < 0) sd = 0
                  printf "%6.1f ± %4.1f", m, sd }')"
}
etag() { curl -s -D - -o /dev/null "$@" | awk -F': ' 'tolower($1) == "etag" { sub(/\r$/, "", $2); print $2 }'; }
echo "== $CELLS cells x $BACKFILL steps, idle (load average: $(cut -d' ' -f1-3 /proc/loadavg)); $REPEAT x ${SECS} s per figure"
for gz in "" gzip; do
    h=()
    [ -n "$gz" ] && h=(-H 'Accept-Encoding: gzip')
    run "forecast${gz:+ (gzip)}" "/v1/cells/demo-0001/forecast" "${h[@]}"
    run "history 7d/$POINTS${gz:+ (gzip)}" "/v1/cells/demo-0001/history?max_points=$POINTS" "${h[@]}"
    run "forecasts 7d/$POINTS${gz:+ (gzip)}" "/v1/cells/demo-0001/forecasts?max_points=$POINTS" "${h[@]}"
    run "batch50${gz:+ (gzip)}" "/v1/forecast?cells=$ids" "${h[@]}"
done
# the page's reads as the browser makes them (gzip), since = 7 days before the last step
h=(-H 'Accept-Encoding: gzip')
one=$(curl -s "$U/v1/cells/demo-0001/history?max_points=1")
last=$(grep -o '"step":[0-9]*' <<<"$one" | tail -1 | cut -d: -f2)
since=$((last * $(grep -o '"step_seconds":[0-9]*' <<<"$one" | cut -d: -f2) - 7 * 86400))
echo "== the page (gzip): a cell view, its refresh with nothing new, the list"
run "page forecast level=0.8" "/v1/cells/demo-0001/forecast?level=0.8" "${h[@]}"
run "page history" "/v1/cells/demo-0001/history?$PAGE_HISTORY_Q&since=$since" "${h[@]}"
run "page forecasts" "/v1/cells/demo-0001/forecasts?$PAGE_PAST_Q&since=$since" "${h[@]}"
run "page cell" "/v1/cells/demo-0001" "${h[@]}"
run "page alerts" "/v1/cells/demo-0001/alerts?limit=1000" "${h[@]}"
run "page attention" "/v1/cells/demo-0001/attention" "${h[@]}"
refresh() { # PATH: asked again with its ETag (a 304), as a browser's refresh
    local e name=${1#/v1/cells/demo-0001/}
    name=${name%%\?*}
    e=$(etag "${h[@]}" "$U$1")
    if [ -n "$e" ]; then
        run "refresh $name (304)" "$1" "${h[@]}" -H "If-None-Match: $e"
    else
        echo "refresh $name: no ETag"
    fi
}
for p in "forecast?level=0.8" "history?$PAGE_HISTORY_Q&since=$since" "forecasts?$PAGE_PAST_Q&since=$since"; do
    refresh "/v1/cells/demo-0001/$p"
done
status=("/v1/cells/demo-0001" "/v1/cells?limit=10000" "/v1/alerts/firing?limit=1000" "/v1/info")
run "page list /v1/cells" "${status[1]}" "${h[@]}"
run "page /v1/alerts/firing" "${status[2]}" "${h[@]}"
run "page /v1/info" "${status[3]}" "${h[@]}"
# the status reads again as a refresh that finds nothing new (304), then each request a
# distinct request the reply cache has rarely seen (a parameter the daemon does not read
# is no longer one, issue 29: limit= moved within what changes nothing, level= by 1e-9, the
# cell id percent-encoded in one of 512 spellings, of which the 256-slot cache keeps few:
# ~9 in 10 miss; /v1/info has none and hits between its 1 s updates): what a reply costs when it
# must be rendered, as after a change (a live feed moves the list at every record, a cell
# at each of its records)
for p in "${status[@]}"; do refresh "$p"; done
cat >"$TMP/miss.lua" <<'LUA'
n = 0
request = function()
    n = n + 1
    local p = wrk.path
    p = string.gsub(p, "limit=(%d+)", function(v)
        return "limit=" .. (tonumber(v) - n % (tonumber(v) - 100))
    end)
    p = string.gsub(p, "level=0%.8", function() return string.format("level=%.9f", 0.8 + (n % 100000) * 1e-9) end)
    p = string.gsub(p, "demo%-(%d%d%d%d)", function(id)
        local s, k = "demo-" .. id, n % 512
        local out = ""
        for i = 1, #s do
            local c = string.sub(s, i, i)
            if k % 2 == 1 then c = string.format("%%%02X", string.byte(c)) end
            k = math.floor(k / 2)
            out = out .. c
        end
        return out
    end)
    return wrk.format(nil, p)
end
LUA
# the reference rendered the same way: the forecast route at a URL it has not cached
for p in "/v1/cells/demo-0001/forecast?level=0.8" "${status[@]}"; do
    WRK_SCRIPT="$TMP/miss.lua" run "rendered ${p%%\?*}" "$p" "${h[@]}"
done
n=$(curl -s "$U/v1/cells/demo-0001/history" | grep -o '"step":' | wc -l)
hb=$(curl -s "$U/metrics" | awk '$1 == "cellcast_cell_history_bytes" { print $2 }')
echo "history: $n steps of demo-0001 kept; long-history bytes $hb for $CELLS cells = $((hb / CELLS)) B/cell"
curl -s "$U/v1/info" | grep -o '"cells":{[^}]*}'
stop_daemon || true
