#!/usr/bin/env bash
# test_stop_together.sh CELLCASTD MOCK_CLUSTER [SRC] [ROUNDS] — several members of one
# consumer group stopped (SIGTERM) at the same moment, while the group rebalances: on a
# librdkafka mock cluster (tests/blackbox/kafka_mock_cluster.c, 6 partitions, KPIs fed with
# kcat), each round starts members a and b, waits until both own partitions, starts c (its
# join revokes everything from a and b: an eager rebalance in flight) and, DELAY after c's
# start, sends SIGTERM to all three at once. Checked for every member of every round:
#   - it exits 0 (no abort, no sanitizer report: an ASan build's report exits non-zero),
#     within BOUND_S of the signal;
#   - its log has no librdkafka assert ("*** ...: assert: ...") nor sanitizer report.
# BOUND_S is cellcastd's shutdown budget for Kafka (daemon/cellcastd.c: the last commit
# ≤ 5 s, the cluster's tombstone ≤ 1 s, ccd_kafka_close ≤ 5 s: 11 s) plus 4 s for the rest
# of the shutdown (snapshot, sanitizer's exit) — a member that hangs in librdkafka's close
# blows it. The rounds vary DELAY (0, 0.3, 0.8, 1.5 s after c's start: before c's
# JoinGroup, during the revoke, during the sync, after the assignment).
# Defect seen before the fix (2026-11-28): rd_kafka_cgrp_terminated: assert
# !rd_kafka_assignment_in_progress, or a member that never exits. ~40-60 s.
# Exit 77 (skip) when kcat, curl or python3 is missing.
set -u
CELLCASTD=${1:-}
CLUSTER=${2:-}
SRC=${3:-$(cd "$(dirname "$0")/../.." && pwd)}
ROUNDS=${4:-${STOP_TOGETHER_ROUNDS:-4}}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init stop-together KILL "$CELLCASTD" "$CLUSTER"

BOUND_S=$((5 + 1 + 5 + 4))
DELAYS=(0 0.3 0.8 1.5)
start_mock_cluster 1 kpis:6 kpis.state:6 alerts:1
cp "$TINY" "$TMP/model.safetensors"

# Some history for every partition: the members step cells, hand them over and commit.
python3 - >"$TMP/feed.txt" <<'EOF'
import json
t0 = 1700000000 // 900 * 900
for p in range(40):
    for i in range(24):
        c = "c%02d" % i
        print(c + "|" + json.dumps({"cell": c, "ts": t0 + p * 900,
              "kpis": {"prb": 0.3 + 0.01 * (p % 7), "thr": 40000 + 100 * i, "users": 20 + p % 5}}))
EOF
kcat -b "$EXT" -P -t kpis -K '|' -l "$TMP/feed.txt" || { fail "kcat produce"; exit 1; }

declare -A MPID MLOG
# member ROUND NAME: its configuration (group of the round, own snapshot, port 0), started
member() {
    local dir="$TMP/r$1/$2"
    mkdir -p "$dir"
    cat >"$dir/cfg.yaml" <<EOF
model:
  path: "$TMP/model.safetensors"
kafka:
  brokers: "$EXT"
  group_id: together$1
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "500"
http:
  port: 0
engine:
  kv_type: f32
snapshot:
  path: "$dir/state.snap"
demo:
  enabled: false
EOF
    MLOG[$2]="$dir/member.log"
    DAEMON_TRIES=200 start_daemon "${MLOG[$2]}" port -c "$dir/cfg.yaml"
    MPID[$2]=$DPID
    DPID=
}

for ((r = 0; r < ROUNDS; r++)); do
    delay=${DELAYS[r % ${#DELAYS[@]}]}
    member "$r" a
    member "$r" b
    # the group is steady: a and b hold the 6 partitions between them (each one's newest
    # "N partition(s) assigned (eager), F new, H held": H)
    for _ in $(seq 300); do
        held=0
        for m in a b; do
            h=$(grep -o 'partition(s) assigned.* \([0-9]*\) held' "${MLOG[$m]}" | tail -1 | sed 's/.* \([0-9]*\) held/\1/')
            held=$((held + ${h:-0}))
            [ -n "$h" ] && [ "$h" != 0 ] || held=-99
        done
        [ $held = 6 ] && break
        sleep 0.1
    done
    [ $held = 6 ] || fail "round $r: a and b do not hold the 6 partitions between them"
    sleep 1 # fetching, stepping, auto-commits
    member "$r" c
    sleep "$delay"
    t0=$(date +%s%N)
    for m in a b c; do kill -TERM "${MPID[$m]}" 2>/dev/null; done
    declare -A took=()
    while :; do
        left=0
        for m in a b c; do
            [ -n "${took[$m]:-}" ] && continue
            if kill -0 "${MPID[$m]}" 2>/dev/null; then
                left=1
            else
                took[$m]=$((($(date +%s%N) - t0) / 1000000))
            fi
        done
        [ $left = 0 ] && break
        [ $((($(date +%s%N) - t0) / 1000000000)) -ge $BOUND_S ] && break
        sleep 0.05
    done
    for m in a b c; do
        if [ -z "${took[$m]:-}" ]; then
            fail "round $r (stop ${delay}s after c's start): member $m still running ${BOUND_S} s after SIGTERM: $(tail -2 "${MLOG[$m]}" | tr '\n' ' ')"
            # where it hangs, for the record
            command -v gdb >/dev/null && timeout 20 gdb -p "${MPID[$m]}" -batch \
                -ex 'thread apply all bt' >"$TMP/r$r/$m/stacks.txt" 2>&1
            kill -KILL "${MPID[$m]}" 2>/dev/null
            wait "${MPID[$m]}" 2>/dev/null
            continue
        fi
        rc=0
        wait "${MPID[$m]}" 2>/dev/null || rc=$?
        bad=$(grep -m1 -e '\*\*\* .*assert' -e 'AddressSanitizer' -e 'LeakSanitizer' -e 'runtime error:' "${MLOG[$m]}")
        if [ $rc = 0 ] && [ -z "$bad" ]; then
            ok "round $r (stop ${delay}s after c's start): member $m exited 0 in ${took[$m]} ms"
        else
            fail "round $r (stop ${delay}s after c's start): member $m exit $rc in ${took[$m]} ms: ${bad:-$(tail -2 "${MLOG[$m]}" | tr '\n' ' ')}"
        fi
    done
    unset took
    PIDS=("${PIDS[0]}") # the cluster; the members are gone
done
[ "$FAILS" = 0 ] && echo "all ok" || exit 1
