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
# A last round takes the deadline path: b frozen (SIGSTOP; session.timeout.ms 12 s) when c
# joins, so the group's rebalance cannot finish before a's close gives up; a is stopped
# alone, then b (continued) and c together — the same checks (a gives up after 5 s, logs it,
# exits 0: its consumer abandoned, not destroyed).
# Defect seen before the fix (2026-11-28): rd_kafka_cgrp_terminated: assert
# !rd_kafka_assignment_in_progress, or a member that never exits. ~60-80 s.
# STATIC=1: the members are static (kafka.group_instance_id): they do not leave the group.
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
# member ROUND NAME [SESSION_MS]: its configuration (group of the round, own snapshot, port 0,
# session.timeout.ms 6000 unless given), started
member() {
    local dir="$TMP/r$1/$2"
    mkdir -p "$dir"
    cat >"$dir/cfg.yaml" <<EOF
model:
  path: "$TMP/model.safetensors"
kafka:
  brokers: "$EXT"
  group_id: together$1
  group_instance_id: "${STATIC:+static-$1-$2}"
  properties:
    session.timeout.ms: "${3:-6000}"
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

# stop_together LABEL MEMBER...: SIGTERM to every MEMBER at once; each must exit 0 within
# BOUND_S with no assert or sanitizer report in its log (stacks of a hung one: TMP/rR/M/stacks.txt)
stop_together() {
    local label=$1 m rc bad t0 left
    shift
    declare -A took=()
    t0=$(date +%s%N)
    for m in "$@"; do kill -TERM "${MPID[$m]}" 2>/dev/null; done
    while :; do
        left=0
        for m in "$@"; do
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
    for m in "$@"; do
        if [ -z "${took[$m]:-}" ]; then
            fail "$label: member $m still running ${BOUND_S} s after SIGTERM: $(tail -2 "${MLOG[$m]}" | tr '\n' ' ')"
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
            ok "$label: member $m exited 0 in ${took[$m]} ms"
        else
            fail "$label: member $m exit $rc in ${took[$m]} ms: ${bad:-$(tail -2 "${MLOG[$m]}" | tr '\n' ' ')}"
        fi
    done
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
    stop_together "round $r (stop ${delay}s after c's start)" a b c
    PIDS=("${PIDS[0]}") # the cluster; the members are gone
done

# the deadline path: the rebalance waits for the frozen b
r=$ROUNDS
member "$r" a 12000
member "$r" b 12000
for _ in $(seq 300); do
    grep -q 'partition(s) assigned' "${MLOG[a]}" && grep -q 'partition(s) assigned' "${MLOG[b]}" && break
    sleep 0.1
done
sleep 2
kill -STOP "${MPID[b]}"
member "$r" c 12000
sleep 1.5
stop_together "round $r (b frozen)" a
grep -q 'did not leave the group within' "${MLOG[a]}" &&
    ok "round $r: a gave up leaving at the deadline (logged)" ||
    echo "note: round $r: the rebalance finished before a's deadline (the deadline path not taken)"
kill -CONT "${MPID[b]}"
stop_together "round $r (b continued)" b c
[ "$FAILS" = 0 ] && echo "all ok" || exit 1
