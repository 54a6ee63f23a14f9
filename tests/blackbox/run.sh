#!/usr/bin/env bash
# tests/blackbox/run.sh — black-box tests of the real cellcastd: started on loopback with a
# temporary config, fed with kcat, checked with curl (JSON checked by python3).
#
#   run.sh CELLCASTD CELLCAST MOCKBROKER SOURCE_ROOT
#
# 1. Embedded broker: 3 days of 15-min KPI history for 5 cells in five message shapes
#    (gen_history.awk), plus one malformed message of every class in the middle:
#    - every cell has all 288 steps (good messages around the bad ones all applied);
#    - /metrics counts each invalid class by its reason, and the dead-letter topic holds
#      every invalid message with the reason header;
#    - GET /v1/cells/{id}/forecast: finite means, timestamps observed_ts + k·S, intervals
#      that contain the mean;
#    - the served forecast equals `cellcast forward` on the same history (same engine).
# 2. External broker (cc_mockbroker, outlives the daemon), same consumer group:
#    - SIGTERM mid-stream, produce more, restart: the new process applies exactly the
#      steps after the last one applied before (nothing lost, nothing applied twice);
#    - SIGKILL mid-stream, produce more, restart: nothing lost (at-least-once: the new
#      process starts at or before the first step the killed one did not apply).
# Exit 77 (skip) when kcat, curl, python3 or the binaries are missing.
set -u

CELLCASTD=${1:-}
CELLCAST=${2:-}
MOCKBROKER=${3:-}
SRC=${4:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init bb TERM "$CELLCASTD" "$CELLCAST" "$MOCKBROKER"

S=900
T0=1714521600                # 2024-05-01T00:00:00Z, a multiple of S
P0=$((T0 / S))
CELLS="c-1 c-2%2Fa 17 cell.x c%3A5"   # URL-encoded ids

# wait_steps LAST_STEP TIMEOUT_S: until every cell's last_step is LAST_STEP.
wait_steps() {
    local want=$1 end=$((SECONDS + $2)) c j
    while [ $SECONDS -lt $end ]; do
        local all=1
        for c in $CELLS; do
            j=$(curl -sf "http://127.0.0.1:$PORT/v1/cells/$c") || { all=0; break; }
            # a cell listed before its first step has no last_step yet: not there, silently
            python3 -c 'import json,sys; j = json.loads(sys.argv[1]); sys.exit(0 if j.get("last_step") == int(sys.argv[2]) and j.get("pending_steps", 0) == 0 else 1)' "$j" "$want" || { all=0; break; }
        done
        [ $all = 1 ] && return 0
        sleep 0.2
    done
    return 1
}

metric() { # metric NAME_WITH_LABELS
    curl -sf "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}

gen() { # gen FROM TO BAD_AT DIR
    awk -v S=$S -v T0=$T0 -v from="$1" -v to="$2" -v bad_at="$3" -v dir="$4" \
        -f "$SRC/tests/blackbox/gen_history.awk"
}

# ---------------------------------------------------------------- 1. embedded broker
mkdir -p "$TMP/h1"
cat >"$TMP/embedded.yaml" <<EOF
model:
  path: "$TINY"
kafka:
  brokers: embedded
  group_id: bb-embedded
  embedded_partitions: 2
  dead_letter_topic: dlq
  # The mock broker keeps a dead or departed member's rebalance waiting for
  # session.timeout.ms - 1 s: keep restarts quick.
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
http:
  port: 0
engine:
  kv_type: f32
ingest:
  max_message_bytes: 2048
  fields:
    thr_kbps: "thr*1000"
demo:
  enabled: false
log:
  level: info
EOF
start_daemon "$TMP/embedded.log" ready -c "$TMP/embedded.yaml"
[ -n "$BS" ] || { cat "$TMP/embedded.log"; echo "FAIL: no embedded bootstrap address logged"; exit 1; }
ok "cellcastd up on port $PORT, embedded broker $BS"

PAD=$(head -c 3000 /dev/zero | tr '\0' 'x')
{
    gen 0 100 -1 "$TMP/h1"
    cat <<EOF
bad|{"cell":"c-1","ts":
bad|42
bad|[]
bad|{"ts":$T0,"prb":1}
bad|{"cell":"bad cell","ts":$T0,"prb":1}
bad|{"cell":"c-1","prb":1}
bad|{"cell":"c-1","ts":"yesterday","prb":1}
bad|{"cell":"c-1","ts":$T0,"prb":"high"}
bad|{"cell":"c-1","ts":$T0,"prb":"NaN"}
bad|{"cell":"c-1","ts":$T0,"prb":1e16}
bad|{"cell":"c-1","ts":$T0,"other":1}
bad|{"cell":"c-1","ts":$T0,"prb":1,"pad":"$PAD"}
bad|{"cell":"c-1","ts":"9999-12-31T23:45:00Z","kpis":{"prb":1,"thr":2,"users":3}}
EOF
    gen 100 288 150 "$TMP/h1"  # step 150 carries a bad element inside a good array
} >"$TMP/h1/kcat.txt"
# gen writes the CSV header only for from == 0; the second call appends.
kcat -b "$BS" -P -t kpis -K '|' <"$TMP/h1/kcat.txt" || fail "kcat produce"
LAST=$((P0 + 287))
wait_steps $LAST 60 && ok "all 5 cells reached step $LAST" || fail "cells did not reach step $LAST"

python3 - "$PORT" "$LAST" $CELLS <<'EOF' || FAILS=$((FAILS + 1))
import json, math, sys, urllib.request
port, last, cells = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
bad = 0
for c in cells:
    j = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/cells/{c}"))
    n = j["counts"]
    if j["first_step"] != last - 287 or n["steps"] != 288 or n["duplicates"] or n["late"] or n["imputed"]:
        print("FAIL: cell", c, "counts", j["first_step"], n); bad += 1
sys.exit(1 if bad else 0)
EOF
[ $? = 0 ] && ok "every cell holds its 288 steps, no duplicate/late/imputed"

declare -A WANT=([not_json]=1 [not_object]=1 [empty]=1 [missing_cell]=1 [bad_cell_id]=1
    [missing_ts]=1 [bad_ts]=2 [bad_value_type]=1 [non_finite]=1 [absurd_value]=1
    [no_kpis]=1 [oversize]=1 [too_many_records]=0 [misaligned_ts]=0)
for r in "${!WANT[@]}"; do
    got=$(metric "cellcast_ingest_invalid_total{reason=\"$r\"}")
    [ "$got" = "${WANT[$r]}" ] || { fail "invalid reason $r: want ${WANT[$r]}, /metrics says '$got'"; bad_reason=1; }
done
[ -z "${bad_reason:-}" ] && ok "invalid messages counted by reason in /metrics"
# A far-future time (schema-valid) would reset c-1 and make every later record late: it is
# refused against the wall clock (ingest.max_future_s), counted and dead-lettered.
got=$(metric 'cellcast_ingest_out_of_range_total{reason="future_ts"}')
[ "$got" = 1 ] && ok "far-future record refused and counted" || fail "future_ts: /metrics says '$got', want 1"
rec=$(metric cellcast_ingest_records_total)
[ "$rec" = 1440 ] && ok "1440 good records applied" || fail "records_total $rec, want 1440"

# Dead letters: 12 invalid messages, the far-future one + the array with one bad element.
# The dead-letter producer delivers asynchronously: read until all are there (≤ 10 s).
for _ in $(seq 20); do
    kcat -b "$BS" -C -t dlq -o beginning -e -q -f '%h\n' >"$TMP/dlq.txt" 2>/dev/null
    ndlq=$(grep -c 'cellcast-reason=' "$TMP/dlq.txt")
    [ "$ndlq" -ge 14 ] && break
    sleep 0.5
done
[ "$ndlq" = 14 ] && ok "14 dead letters with a reason header" || fail "dead letters: $ndlq, want 14"
grep -q 'cellcast-reason=oversize' "$TMP/dlq.txt" || fail "no oversize dead letter"
grep -q 'cellcast-reason=future_ts' "$TMP/dlq.txt" || fail "no future_ts dead letter"

# Forecasts: shape, finiteness, timestamps, intervals; and equality with cellcast forward.
i=0
for c in $CELLS; do
    curl -sf "http://127.0.0.1:$PORT/v1/cells/$c/forecast" >"$TMP/fc$i.json" || fail "forecast $c"
    "$CELLCAST" forward --model "$TINY" --input "$TMP/h1/$i.csv" --kv f32 >"$TMP/fw$i.json" 2>"$TMP/fw$i.err" \
        || fail "cellcast forward $c: $(cat "$TMP/fw$i.err")"
    i=$((i + 1))
done
python3 - "$TMP" "$S" "$((T0 + 287 * S))" <<'EOF' && ok "forecasts finite, timestamps right, intervals contain the mean, equal to cellcast forward" || FAILS=$((FAILS + 1))
import json, math, sys
tmp, S, last_ts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
from datetime import datetime, timezone
def iso(t): return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
bad, worst = 0, 0.0
for i in range(5):
    fc = json.load(open(f"{tmp}/fc{i}.json"))
    fw = json.loads(open(f"{tmp}/fw{i}.json").read().strip().splitlines()[-1])
    F, HZ = len(fc["kpis"]), fc["horizon"]
    if fc["observed_ts"] != iso(last_ts) or fw["ts"] != last_ts or len(fc["forecast"]) != HZ:
        print("FAIL: cell", fc["cell"], "observed", fc["observed_ts"], fw["ts"]); bad += 1
    for k, pt in enumerate(fc["forecast"]):
        if pt["ts"] != iso(last_ts + (k + 1) * S):
            print("FAIL: cell", fc["cell"], "step", k, "ts", pt["ts"]); bad += 1
        for f, name in enumerate(fc["kpis"]):
            v = pt["values"][name]
            if not all(math.isfinite(v[x]) for x in ("mean", "lower", "upper", "sd")) or \
               not v["lower"] <= v["mean"] <= v["upper"]:
                print("FAIL: cell", fc["cell"], name, k, v); bad += 1
            y = fw["y"][(f * HZ + k) * 2]
            want = y * fw["sigma"][f] + fw["mu"][f]
            err = abs(v["mean"] - want) / (abs(fw["sigma"][f]) + 1e-12)
            worst = max(worst, err)
            if err > 1e-3:
                print("FAIL: cell", fc["cell"], name, k, "served", v["mean"], "forward", want); bad += 1
print(f"   largest |served - forward| / sigma = {worst:.2e}")
sys.exit(1 if bad else 0)
EOF
stop_daemon; rc=$?
[ $rc = 0 ] && ok "SIGTERM: exit 0" || fail "SIGTERM exit status $rc"

# ---------------------------------------------------------------- 2. restarts
start_mockbroker "$TMP" kpis:2 alerts:1
sed -e "s|brokers: embedded|brokers: \"$EXT\"|" -e 's|group_id: bb-embedded|group_id: bb-restart|' \
    -e '/dead_letter_topic/d' "$TMP/embedded.yaml" >"$TMP/ext.yaml"
mkdir -p "$TMP/h2"
gen 0 150 -1 "$TMP/h2" >"$TMP/h2/a.txt"
gen 150 288 -1 "$TMP/h2" >"$TMP/h2/b.txt"
gen 288 320 -1 "$TMP/h2" >"$TMP/h2/c.txt"
gen 320 352 -1 "$TMP/h2" >"$TMP/h2/d.txt"

cell_json() { curl -sf "http://127.0.0.1:$PORT/v1/cells/$1"; }
field() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2], {}, j))' "$1" "$2"; }

start_daemon "$TMP/run1.log" ready -c "$TMP/ext.yaml"
kcat -b "$EXT" -P -t kpis -K '|' <"$TMP/h2/a.txt"
wait_steps $((P0 + 149)) 60 || fail "run1 did not reach step $((P0 + 149))"
stop_daemon || fail "run1 SIGTERM exit status $?"
kcat -b "$EXT" -P -t kpis -K '|' <"$TMP/h2/b.txt"
start_daemon "$TMP/run2.log" ready -c "$TMP/ext.yaml"
wait_steps $((P0 + 287)) 60 || fail "run2 did not reach step $((P0 + 287))"
for c in $CELLS; do
    j=$(cell_json "$c")
    first=$(field "$j" first_step)
    steps=$(field "$j" 'counts["steps"]')
    dup=$(field "$j" 'counts["duplicates"]')
    # Without a state snapshot the new process starts the cell at the first step it reads.
    if [ "$first" = $((P0 + 150)) ]; then
        [ "$steps" = 138 ] && [ "$dup" = 0 ] || fail "run2 cell $c: steps $steps duplicates $dup"
    elif [ "$first" = $P0 ]; then # restored from a snapshot: must hold all 288, no duplicate
        [ "$steps" = 288 ] && [ "$dup" = 0 ] || fail "run2 cell $c (snapshot): steps $steps dup $dup"
    else
        fail "run2 cell $c starts at step $((first - P0)), want 150 (exactly after run1's last)"
    fi
done
# Applied (queued) steps of run2: exactly the 138 new steps of each cell. A step of run1
# read again would be applied again without a snapshot (more than 690) or counted as a
# duplicate with one (then not applied); a lost one makes fewer.
applied=$(metric 'cellcast_ingest_steps_total{outcome="queued"}')
late=$(metric 'cellcast_ingest_steps_total{outcome="late"}')
[ "$applied" = 690 ] && [ "$late" = 0 ] \
    && ok "SIGTERM restart: run2 applied exactly steps 150..287 of every cell (690 steps)" \
    || fail "SIGTERM restart: run2 applied $applied steps ($late late), want 690"

kcat -b "$EXT" -P -t kpis -K '|' <"$TMP/h2/c.txt"
wait_steps $((P0 + 319)) 60 || fail "run2 did not reach step $((P0 + 319))"
stop_daemon KILL
kcat -b "$EXT" -P -t kpis -K '|' <"$TMP/h2/d.txt"
start_daemon "$TMP/run3.log" ready -c "$TMP/ext.yaml"
wait_steps $((P0 + 351)) 60 || fail "run3 did not reach step $((P0 + 351))"
before=$FAILS
for c in $CELLS; do
    j=$(cell_json "$c")
    first=$(field "$j" first_step)
    steps=$(field "$j" 'counts["steps"]')
    last=$(field "$j" last_step)
    # No loss: run3 starts at or before step 320 and holds every step up to 351 once.
    if [ "$first" -gt $((P0 + 320)) ] || [ "$steps" != $((last - first + 1)) ]; then
        fail "SIGKILL restart: cell $c first step $((first - P0)), $steps steps to $((last - P0))"
    fi
done
[ "$FAILS" = "$before" ] && ok "SIGKILL restart: no step lost (redelivered from the last commit)"

if [ "$FAILS" = 0 ]; then echo "PASS"; exit 0; fi
echo "$FAILS failure(s)"; exit 1
