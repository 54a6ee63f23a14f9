#!/usr/bin/env bash
# cluster_bench.sh — several cellcastd in one consumer group (issue 14; docs/operations.md,
# "Several instances"): on a librdkafka mock cluster (tests/blackbox/kafka_mock_cluster.c, 3
# brokers, 48 partitions: the mock keeps only ~5 MiB per partition),
#   1. takeover: one member consumes CELLS cells × STEPS steps, is stopped (SIGTERM: it
#      writes every cell's state record), a second member takes every partition over; the
#      state records' bytes per cell, the handover write time, the takeover (read +
#      restore) time and the time until the new member serves every cell;
#   2. CPU time per cell-step with 1, 2 and 3 members consuming STEPS2 more steps of every
#      cell (utime + stime of the daemons over the wall time until every cell has them).
# Usage: cluster_bench.sh [cellcastd] [cells (10000)] [steps (40)] [steps2 (20)] [model]
# (model default: a random model of the default shape, tests/bench/random_model.py).
# A 2-core machine shared with other work: the CPU figures are noisy (run it twice); with
# 3 members on 2 cores the members compete for the cores.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
CELLCASTD=${1:-$root/build/daemon/cellcastd}
CELLS=${2:-10000}
STEPS=${3:-40}
STEPS2=${4:-20}
CLUSTER=$root/build/tests/blackbox/cc_kafka_mock_cluster
# shellcheck source=../helpers/daemon.sh
. "$root/tests/helpers/daemon.sh"
need_tools kcat curl python3
on_exit() { exec 3>&- 2>/dev/null; } # the mock cluster's control fifo
test_workdir clbench KILL
MODEL=${5:-$TMP/model.safetensors}
[ -f "$MODEL" ] || /usr/bin/python3 "$root/tests/bench/random_model.py" "$MODEL" 336 >/dev/null
FEATS=$(/usr/bin/python3 -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
m = json.loads(b[8:8 + n])["__metadata__"]; print(m["features"], m["step_seconds"])' "$MODEL")
S=${FEATS##* }
FEATS=${FEATS% *}
T0=$((($(date +%s) / S - STEPS - STEPS2 - 10) * S))
P0=$((T0 / S))

mkfifo "$TMP/ctl"
"$CLUSTER" 3 kpis:48 kpis.state:48 alerts:1 <"$TMP/ctl" >"$TMP/cluster.out" 2>/dev/null &
PIDS+=($!)
exec 3>"$TMP/ctl"
for _ in $(seq 50); do EXT=$(head -1 "$TMP/cluster.out"); [ -n "$EXT" ] && break; sleep 0.1; done

cfg() { # NAME
    mkdir -p "$TMP/$1"
    cat >"$TMP/$1/cfg.yaml" <<EOF
model:
  path: "$MODEL"
kafka:
  brokers: "$EXT"
  group_id: bench
  max_poll_messages: 2000
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "500"
http:
  port: 0
limits:
  max_cells: $((CELLS + 100))
snapshot:
  path: ""
  interval_s: 3600
demo:
  enabled: false
EOF
}
declare -A MP MPORT
start() { cfg "$1"; DAEMON_TRIES=300 start_daemon "$TMP/$1/log" ready -c "$TMP/$1/cfg.yaml"; MP[$1]=$DPID; MPORT[$1]=$PORT; }
produce() { # FROM TO
    /usr/bin/python3 - "$1" "$2" "$T0" "$S" "$CELLS" "$FEATS" <<'PY' | kcat -b "$EXT" -P -t kpis -K '|' -X queue.buffering.max.messages=1000000
import json, math, sys
fr, to, t0, S, n = (int(x) for x in sys.argv[1:6])
feats = sys.argv[6].split(",")
out = sys.stdout
for p in range(fr, to):
    for i in range(n):
        cell = "cell%05d" % i
        k = {f: round(50 + 30 * math.sin(p * 0.26 + i + j), 3) for j, f in enumerate(feats)}
        out.write(cell + "|" + json.dumps({"cell": cell, "ts": t0 + p * S, "kpis": k}) + "\n")
PY
}
# total STEP: cells at step STEP (summed over the members), and cells in total
at_step() {
    local m t=0 n
    for m in "${!MPORT[@]}"; do
        n=$(curl -s "http://127.0.0.1:${MPORT[$m]}/v1/cells?limit=10000" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin); print(sum(c["last_step"] == int(sys.argv[1]) for c in d["cells"]))' "$1" 2>/dev/null || echo 0)
        t=$((t + n))
    done
    echo "$t"
}
wait_step() { # STEP TIMEOUT
    local end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do [ "$(at_step "$1")" -ge "$CELLS" ] && return 0; sleep 0.5; done
    echo "timeout: $(at_step "$1") of $CELLS cells at step $1"; return 1
}
cpu_ticks() { local t=0 p; for p in "${MP[@]}"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }

echo "model: $MODEL (features $FEATS, S=$S); $CELLS cells, $STEPS steps; mock cluster 3 brokers, 48 partitions"
# ---- 1. takeover
start a
produce 0 "$STEPS"
wait_step $((P0 + STEPS - 1)) 300
t0=$(date +%s.%N)
kill -TERM "${MP[a]}"; wait "${MP[a]}" || true
t1=$(date +%s.%N)
unset "MP[a]" "MPORT[a]"
kcat -b "$EXT" -C -t kpis.state -o beginning -e -q -f '%k %K %S\n' 2>/dev/null >"$TMP/state.sizes"
start b
ts=$(date +%s.%N)
wait_step $((P0 + STEPS - 1)) 300
te=$(date +%s.%N)
grep -h "takeover of" "$TMP/b/log" | sed 's/^.*handover: /b: /'
/usr/bin/python3 - "$TMP/state.sizes" "$t0" "$t1" "$ts" "$te" "$CELLS" <<'PY'
import sys
sizes, t0, t1, ts, te, n = sys.argv[1], *map(float, sys.argv[2:6]), int(sys.argv[6])
last = {}
for l in open(sizes):
    k, kl, v = l.split()
    last[k] = int(kl) + max(int(v), 0)
recs = sum(1 for _ in open(sizes))
print(f"state topic: {recs} records, newest per cell {sum(last.values()) / max(len(last), 1):.0f} "
      f"bytes (key + value) for {len(last)} cells")
print(f"a stopped in {t1 - t0:.2f} s (drain, state records, commit, leave); b started and "
      f"served all {n} cells {te - ts:.2f} s after its start (join + takeover + catch-up)")
PY

# ---- 2. CPU per cell-step with 1, 2, 3 members (b is running)
from=$STEPS
for k in 1 2 3; do
    [ "$k" = 2 ] && start c
    [ "$k" = 3 ] && start d
    if [ "$k" -gt 1 ]; then # until the new member took its partitions over
        m=$([ "$k" = 2 ] && echo c || echo d)
        for _ in $(seq 600); do
            n=$(curl -s "http://127.0.0.1:${MPORT[$m]}/v1/cells?limit=1" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])' 2>/dev/null || echo 0)
            [ "${n:-0}" -gt 0 ] && break
            sleep 0.1
        done
        wait_step $((P0 + from - 1)) 120 || true
        sleep 2
    fi
    to=$((from + STEPS2 / 3 + 1))
    c0=$(cpu_ticks)
    w0=$(date +%s.%N)
    produce "$from" "$to"
    wait_step $((P0 + to - 1)) 300 || true
    w1=$(date +%s.%N)
    c1=$(cpu_ticks)
    /usr/bin/python3 -c '
import sys
k, c0, c1, w0, w1, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
hz = 100; cpu = (c1 - c0) / hz; wall = w1 - w0
print(f"{k} member(s): {n} cell-steps in {wall:.2f} s wall (incl. producing) = {n / wall:.0f} cell-steps/s; "
      f"daemon CPU {cpu:.2f} s = {cpu / n * 1e6:.1f} us per cell-step")' "$k" "$c0" "$c1" "$w0" "$w1" "$((CELLS * (to - from)))"
    from=$to
done
