#!/usr/bin/env bash
# tests/blackbox/alert_delivery.sh — alert transitions are delivered at least once across a
# SIGKILL (issue 16): an external broker (cc_mockbroker, outlives the daemon) refuses every
# Produce (SIGUSR1: retriable errors, so the producer keeps retrying) while cellcastd steps
# a spike that fires and resolves; the transitions are computed, none reaches the topic, and
# the periodic checkpoint does not advance past them; SIGKILL; the broker accepts produces
# again (SIGUSR2); the restart produces the transitions from its journal (kcat -C) and counts
# them as recovered; once the dead member has left the group (session.timeout.ms 6 s) it
# replays the KPIs from the old offsets, recomputes the same transitions and does not produce
# them twice. Then a clean restart produces nothing again.
#
#   alert_delivery.sh CELLCASTD MOCKBROKER SOURCE_ROOT
#
# ~22 s. Exit 77 (skip) when kcat, curl or python3 is missing.
set -u

CELLCASTD=${1:-}
MOCKBROKER=${2:-}
SRC=${3:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init delivery KILL "$CELLCASTD" "$MOCKBROKER"

S=900
N=288
END=$(($(date +%s) / S * S - 40 * S)) # a replay with its original timestamps: no missing alerts
T0=$((END - (N - 1) * S))
P0=$((T0 / S))
SPIKE=$((P0 + 240))

start_mockbroker "$TMP" kpis:1 alerts:1
BROKER=${PIDS[-1]}
cat >"$TMP/cfg.yaml" <<EOF
model:
  path: "$TINY"
kafka:
  brokers: "$EXT"
  group_id: delivery
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
http:
  port: 0
engine:
  kv_type: f32
snapshot:
  path: "$TMP/state.snap"
  interval_s: 1
alerts:
  warn_z: 12
  crit_z: 20
demo:
  enabled: false
EOF

# one cell with a daily pattern and one ×20 step: one anomaly that fires and resolves
python3 - "$T0" "$S" "$N" 240 <<'PYEOF' | kcat -b "$EXT" -P -t kpis -K '|'
import json, math, sys
t0, S, n, spike = (int(x) for x in sys.argv[1:])
for p in range(n):
    ph = 2 * math.pi * p / 96
    k = {"prb": 0.35 + 0.2 * math.sin(ph) + 0.03 * math.sin(p * 1.7),
         "thr": 40000 + 20000 * math.sin(ph + 0.5) + 3000 * math.sin(p * 0.9),
         "users": 20 + 10 * math.sin(ph - 0.3) + (p * 7) % 5}
    if p == spike:
        k = {m: v * 20 for m, v in k.items()}
    k = {"prb": round(k["prb"], 4), "thr": round(k["thr"]), "users": round(k["users"])}
    print("spike-1|" + json.dumps({"cell": "spike-1", "ts": t0 + p * S, "kpis": k}))
PYEOF

kill -USR1 "$BROKER"
wait_log "$TMP/broker.log" "produce requests fail" || { fail "the broker did not take the fault"; exit 1; }

# alerts: the spike-1 anomaly's transitions on the topic, as "id state severity" lines (an
# escalation is a second firing of the same id: consumers dedupe on all three)
topic_states() {
    kcat -b "$EXT" -C -t alerts -o beginning -e -q -f '%s\n' 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    l = l.strip()
    if l:
        m = json.loads(l)
        if m["cell_id"] == "spike-1" and m["kind"] == "anomaly": print(m["id"], m["state"], m["severity"])'
}

LAST=$((P0 + N - 1))
start_daemon "$TMP/d1.log" health -c "$TMP/cfg.yaml"
wait_last spike-1 $LAST 40 && ok "every step stepped" || fail "spike-1 did not reach its last step"
# every transition computed (the tiny model's warm-up fires too), as the topic should get them
curl -sf "$U/v1/alerts?cell=spike-1&kind=anomaly&limit=1000" >"$TMP/alerts.json"
want=$(python3 -c 'import json,sys; [print(a["id"], a["state"], a["severity"]) for a in json.load(open(sys.argv[1]))["alerts"]]' "$TMP/alerts.json")
nwant=$(echo "$want" | wc -l)
# the spike's episode: critical at the spike's step, then resolved. Its id is the episode's
# onset, which can be a warning a few steps before the spike (the model's time features,
# and so its forecasts, move with the wall clock that dates the rows)
spike_id=$(python3 -c 'import json,sys
a = json.load(open(sys.argv[2]))["alerts"]
spike = int(sys.argv[1])
ids = {x["id"] for x in a if x["severity"] == "critical" and x["step"] == spike}
ids &= {x["id"] for x in a if x["state"] == "resolved"}
print(" ".join(sorted(ids)))' "$SPIKE" "$TMP/alerts.json")
[ -n "$spike_id" ] && ok "$nwant transitions computed, the spike's episode ($spike_id) critical at its step and resolved" ||
    fail "no episode critical at the spike's step $SPIKE and resolved among the transitions: $want"
[ -z "$(topic_states)" ] && ok "broker refusing produces: nothing delivered yet" ||
    fail "delivered despite the fault: $(topic_states)"
# the periodic checkpoint (every 1 s) must not commit the KPI offsets past transitions
# Kafka has not confirmed: else a crash would lose them if the journal were lost too
wait_log "$TMP/d1.log" "checkpoint skipped: .* still undelivered" &&
    ok "the periodic checkpoint waits for the undelivered transitions" ||
    fail "no checkpoint held back before the kill"
stop_daemon KILL

kill -USR2 "$BROKER"
wait_log "$TMP/broker.log" "produce requests succeed"
start_daemon "$TMP/d2.log" health -c "$TMP/cfg.yaml"
got=
end=$((SECONDS + 20))
while [ $SECONDS -lt $end ]; do
    got=$(topic_states)
    [ "$got" = "$want" ] && break
    sleep 0.2
done
[ "$got" = "$want" ] && ok "after SIGKILL and restart: all $nwant transitions delivered once each, the spike's resolved too (kcat -C)" ||
    fail "alert topic after the restart: '$got', want '$want'"
grep -q " $nwant transition(s) not confirmed by Kafka before the last stop" "$TMP/d2.log" &&
    ok "the restart logs the $nwant unconfirmed transitions it produces again" ||
    fail "no recovery line: $(grep journal "$TMP/d2.log")"
n=$(curl -sf "$U/metrics" | awk '$1 == "cellcast_alerts_redelivered_total{cause=\"recovered\"}" { print $2 }')
[ "$n" = "$nwant" ] && ok "cellcast_alerts_redelivered_total{cause=\"recovered\"} = $n" || fail "recovered = '$n'"
# the dead member leaves the group after session.timeout.ms: then this one is assigned the
# partition, replays the KPIs from the offsets committed before the transitions and
# recomputes them; the journal knows they were delivered
wait_last spike-1 $LAST 60 && ok "the restart replayed the KPIs from the old offsets" ||
    fail "the restart did not replay spike-1 to its last step"
sleep 1
got=$(topic_states)
[ "$got" = "$want" ] && ok "the replay recomputed the transitions and did not produce them again" ||
    fail "alert topic after the replay: '$got', want '$want'"
for _ in $(seq 50); do
    [ "$(curl -sf "$U/metrics" | awk '$1 == "cellcast_alerts_waiting" { print $2 }')" = 0 ] && break
    sleep 0.1
done
stop_daemon TERM || fail "SIGTERM: exit $?"

# confirmed now: a third start produces nothing again
start_daemon "$TMP/d3.log" health -c "$TMP/cfg.yaml"
wait_last spike-1 $LAST 30 || fail "the third start did not restore or replay spike-1"
sleep 1
got=$(topic_states)
[ "$got" = "$want" ] && ok "a clean restart produces no transition again" || fail "after the third start: '$got'"
grep -q " 0 transition(s) not confirmed" "$TMP/d3.log" && ok "nothing unconfirmed after the delivery reports" ||
    fail "journal at the third start: $(grep journal "$TMP/d3.log")"
stop_daemon TERM

[ "$FAILS" = 0 ] && echo "all alert-delivery checks passed" || echo "$FAILS check(s) failed"
exit $((FAILS > 0))
