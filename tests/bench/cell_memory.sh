#!/usr/bin/env bash
# tests/bench/cell_memory.sh — resident memory of cellcastd per cell (issue 16): the RSS a
# daemon (no Kafka, POST /v1/kpis open, the given model) gains for ONE_CELLS cells that got
# one record each (bogus ids: what an open POST /v1/kpis or a noisy feed creates), then
# for FULL_CELLS cells with a full history (the ring's R steps + 8: ring, KV caches, anomaly
# state and profiles all in use). Prints bytes per cell for both and the daemon's own
# estimate (GET /v1/cells: bytes_per_cell, the most a cell takes, which the memory budget
# divides).
#
#   cell_memory.sh CELLCASTD MODEL [ONE_CELLS] [FULL_CELLS]     (default 20000 200)
# RING_STEPS (environment): the model's ring steps (default 352, the default model's).
set -eu
CELLCASTD=$1 MODEL=$2 ONE=${3:-20000} FULL=${4:-200}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools curl python3
test_workdir cellmem

rss() { awk '/^VmRSS/ { printf "%d\n", $2 * 1024 }' "/proc/$DPID/status"; }
cells() { curl -sf "$U/metrics" | awk '$1 == "cellcast_cells" { print $2 }'; }
# post_records PREFIX N_CELLS N_STEPS: every (cell, step) as one record, 2000 per POST
post_records() {
    python3 - "$1" "$2" "$3" "$(($(date +%s) / 900 * 900))" "$TMP/batch" <<'PYEOF'
import json, math, sys
prefix, ncells, nsteps, now, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
recs, k = [], 0
def flush():
    global recs, k
    if recs:
        open(f"{out}.{k:06d}", "w").write(json.dumps(recs))
        k += 1
        recs = []
for s in range(nsteps):
    for c in range(ncells):
        p = s - nsteps + 1
        recs.append({"cell": f"{prefix}{c}", "ts": now + p * 900,
                     "kpis": {"prb_dl": 40 + 10 * math.sin(p / 15.3 + c), "prb_ul": 20, "thr_dl_mbps": 100 + p % 7,
                              "thr_ul_mbps": 20, "active_users": 30 + c % 5, "latency_ms": 12,
                              "cqi": 11, "drop_rate": 0.01}})
        if len(recs) == 2000:
            flush()
flush()
PYEOF
    local f code
    for f in "$TMP"/batch.*; do
        for _ in $(seq 100); do
            code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$f" "$U/v1/kpis")
            [ "$code" = 503 ] || break
            sleep 0.1
        done
        [ "$code" = 202 ] || { echo "POST /v1/kpis: $code"; exit 1; }
        rm -f "$f"
    done
}
settle() { sleep 2; }

start() {
    start_daemon "$TMP/d.log" health --set model.path="$MODEL" --set kafka.brokers=none \
        --set http.port=0 --set http.post_kpis=open --set http.max_body_bytes=4194304 \
        --set limits.max_cells=10000000
    settle
}
R=${RING_STEPS:-352} # the default model's ring: max(N·P + P, M + P - 1)
# each phase on a fresh daemon: memory freed by one phase would hide the next one's
start
r0=$(rss)
post_records one- "$ONE" 1
settle
r1=$(rss)
n1=$(cells)
stop_daemon || true
start
r2=$(rss)
post_records full- "$FULL" $((R + 8))
settle
r3=$(rss)
n3=$(cells)
est=$(curl -sf "$U/v1/info" | python3 -c 'import json,sys; c=json.load(sys.stdin)["cells"]; print(c["bytes_per_cell"], "max_resident", c["max_resident"])')
echo "model $(basename "$MODEL"); ring R=$R steps"
echo "one-record cells: $((n1)) cells, RSS +$(((r1 - r0) / 1024)) KiB = $(((r1 - r0) / ONE)) bytes/cell"
echo "full cells:       $n3 cells, RSS +$(((r3 - r2) / 1024)) KiB = $(((r3 - r2) / FULL)) bytes/cell"
echo "daemon's bytes_per_cell (the most a cell takes, used by the memory budget): $est"
stop_daemon || true
