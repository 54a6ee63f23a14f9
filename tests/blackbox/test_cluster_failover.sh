#!/usr/bin/env bash
# test_cluster_failover.sh CELLCASTD MOCK_CLUSTER [SRC] — several cellcastd in one consumer
# group (issue 14): a 3-broker librdkafka mock cluster (tests/blackbox/kafka_mock_cluster.c), 12
# partitions, three daemons on distinct ports and state directories, 100 cells fed with
# kcat (key = cell id, so a cell's partition is stable). A member stopped with SIGTERM,
# restarted (rolling restart), another killed with SIGKILL and restarted, then a broker
# outage longer than session.timeout.ms. After each, on the API of every member:
#   - every cell is answered by exactly one member, live (with a forecast) at the step
#     just produced;
#   - no step lost or applied twice: its step count is the number of steps produced
#     (the history is contiguous from the first step);
# and on the alert topic (kcat -C): a ×20 spike injected at the first step after a move
# into the cells that moved is alerted, and every alert whose last transition on the topic
# is "firing" is firing at the cell's current owner (continued, same id). ~100 s.
# Exit 77 (skip) when kcat, curl or python3 is missing.
set -u
CELLCASTD=${1:-}
CLUSTER=${2:-}
SRC=${3:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init failover KILL "$CELLCASTD" "$CLUSTER"

S=900
NC=100                                  # cells
N=100                                   # steps of history before the first move
# The last step of the first N: at least 40 steps before now, and always at the same time
# of the week (Monday 14:30 UTC; the epoch began on a Thursday), as in blackbox/alerts.sh:
# the tiny model's time-of-day and day-of-week features then meet the series the same way
# at every run, and so do the spikes' alerts (pinned to the wall clock's step, whether an
# episode opened at the spike or a few steps before it, a busy cell, moved with the hour).
WEEK=604800
AT=$((4 * 86400 + 14 * 3600 + 30 * 60))
END=$((($(date +%s) - 40 * S - AT) / WEEK * WEEK + AT))
T0=$((END - (N - 1) * S))
P0=$((T0 / S))
declare -A MPID MPORT

# the cluster, driven through a fifo on its stdin
start_mock_cluster 3 kpis:12 kpis.state:12 alerts:1
cp "$TINY" "$TMP/model.safetensors"

# member NAME: its configuration (its own state directory; port 0)
mkcfg() {
    mkdir -p "$TMP/$1"
    cat >"$TMP/$1/cfg.yaml" <<EOF
model:
  path: "$TMP/model.safetensors"
kafka:
  brokers: "$EXT"
  group_id: failover
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "500"
http:
  port: 0
engine:
  kv_type: f32
snapshot:
  path: "$TMP/$1/state.snap"
  interval_s: 2
alerts:
  warn_z: 12
  crit_z: 20
  # busy() below: an episode and its cooldown of 6 steps (the defaults until 2026-11-25)
  resolve_m: 3
  cooldown_steps: 6
  missing_after_s: 1000000000
demo:
  enabled: false
EOF
}

start_member() {
    DAEMON_TRIES=200 start_daemon "$TMP/$1/log.$SECONDS" ready -c "$TMP/$1/cfg.yaml"
    MPID[$1]=$DPID
    MPORT[$1]=$PORT
}

stop_member() { # NAME SIGNAL
    kill -"$2" "${MPID[$1]}"
    wait "${MPID[$1]}" 2>/dev/null
    unset "MPORT[$1]"
}

# gen FROM TO SPIKE_AT [CELL...]: kcat lines `key|json` for steps [FROM, TO) of every cell;
# the listed cells get a ×20 spike at step SPIKE_AT.
gen() {
    python3 - "$1" "$2" "$3" "$T0" "$S" "$NC" "${@:4}" <<'PYEOF'
import json, math, sys
fr, to, spike, t0, S, nc = (int(x) for x in sys.argv[1:7])
spiked = set(sys.argv[7:])
for p in range(fr, to):
    for i in range(nc):
        cell = "c%03d" % i
        ph = 2 * math.pi * p / 96 + i * 0.37
        k = {"prb": 0.35 + 0.2 * math.sin(ph) + 0.03 * math.sin(p * 1.7 + i),
             "thr": 40000 + 20000 * math.sin(ph + 0.5) + 3000 * math.sin(p * 0.9 + i),
             "users": 20 + 10 * math.sin(ph - 0.3) + (p * 7 + i) % 5}
        if p == spike and cell in spiked:
            k = {n: v * 20 for n, v in k.items()}
        k = {"prb": round(k["prb"], 4), "thr": round(k["thr"]), "users": round(k["users"])}
        print(cell + "|" + json.dumps({"cell": cell, "ts": t0 + p * S, "kpis": k}))
PYEOF
}

# kcat's stderr (a refused bootstrap broker right after the outage, retried) into a file,
# shown when the produce fails
produce() { gen "$@" | kcat -b "$EXT" -P -t kpis -K '|' 2>>"$TMP/kcat.err" || fail "kcat produce: $(tail -3 "$TMP/kcat.err")"; }

# check STEP: every cell on exactly one live member, at step STEP, live, with STEP+1 steps.
# Prints the owners (cell member) on stdout when it holds; the problems on stderr.
check() {
    local urls=() m
    for m in "${!MPORT[@]}"; do urls+=("$m=http://127.0.0.1:${MPORT[$m]}"); done
    python3 - "$1" "$P0" "$NC" "${urls[@]}" <<'PYEOF'
import json, sys, urllib.request
step, p0, nc = (int(x) for x in sys.argv[1:4])
where = {}
for mu in sys.argv[4:]:
    m, _, u = mu.partition("=")
    try:
        cells = json.load(urllib.request.urlopen(u + "/v1/cells?limit=10000", timeout=5))["cells"]
    except Exception as e:
        print(f"{m}: {e}", file=sys.stderr); sys.exit(1)
    for c in cells:
        where.setdefault(c["id"], []).append((m, c))
bad = []
for i in range(nc):
    cid = "c%03d" % i
    w = where.get(cid, [])
    if len(w) != 1:
        bad.append(f"{cid} on {[m for m, _ in w]}"); continue
    m, c = w[0]
    if c["last_step"] != p0 + step or c["state"] != "live" or c["steps"] != step + 1:
        bad.append(f"{cid}@{m}: last_step {c['last_step'] - p0} state {c['state']} steps {c['steps']}")
if bad:
    print(f"{len(bad)} cell(s) wrong: {bad[:6]}", file=sys.stderr); sys.exit(1)
for cid in sorted(where):
    print(cid, where[cid][0][0])
PYEOF
}

# wait_all STEP TIMEOUT_S WHAT: until check STEP holds; the owners in $TMP/owners.
wait_all() {
    local end=$((SECONDS + $2)) t0=$SECONDS
    while [ $SECONDS -lt $end ]; do
        if check "$1" >"$TMP/owners" 2>"$TMP/check.err"; then
            ok "$3: every cell on exactly one member at step $1 with $(($1 + 1)) steps, live ($((SECONDS - t0)) s; split $(awk '{print $2}' "$TMP/owners" | sort | uniq -c | tr -s ' \n' ' '))"
            return 0
        fi
        sleep 0.5
    done
    fail "$3: step $1 not reached as required within $2 s: $(cat "$TMP/check.err")"
    for m in "${!MPORT[@]}"; do # what each consumer saw (a fetch stall: lag > 0, no messages)
        echo "  $m: $(curl -s "http://127.0.0.1:${MPORT[$m]}/metrics" | grep -E '^cellcast_(kafka_lag_messages|kafka_assigned_partitions|kafka_lost_partitions|ingest_messages_total\{source="kafka"\}) ' | tr '\n' ' ')"
    done
    return 1
}

cells_of() { awk -v m="$1" '$2 == m { print $1 }' "$TMP/owners" | tr '\n' ' '; }

# ---------------------------------------------------------------- three members
for m in a b c; do mkcfg $m; start_member $m; done
produce 0 "$N" -1
wait_all $((N - 1)) 60 "three members"

# ---------------------------------------------------------------- SIGTERM a
# the spike after this move goes to half of a's cells; the other half stays free of
# episodes and cooldowns for the next spike (range assignment may hand b a's old cells)
MOVED_A=$(cells_of a | tr ' ' '\n' | awk 'NR % 2' | tr '\n' ' ')
NA=$(cells_of a | wc -w)
stop_member a TERM
H=$(grep -h "handed over" "$TMP"/a/log.* | tail -1)
case $H in
*"handed over: $NA cell(s) with their newest state on 'kpis.state', 0 with an older one"*", 0 cold") ok "a's $NA cells handed over with their state at SIGTERM" ;;
*) fail "a held $NA cells; its handover line: $H" ;;
esac
produce "$N" $((N + 1)) "$N" $MOVED_A
wait_all "$N" 40 "a stopped (SIGTERM)"

# rolling restart of a
start_member a
produce $((N + 1)) $((N + 2)) -1
wait_all $((N + 1)) 40 "a restarted"

# ---------------------------------------------------------------- SIGKILL b
# the spike goes to b's cells that were not spiked before (a spike into a cell whose
# episode still fires continues that episode: no new transition)
MOVED_B=$(for c in $(cells_of b); do case " $MOVED_A " in *" $c "*) ;; *) echo "$c" ;; esac; done | tr '\n' ' ')
stop_member b KILL
produce $((N + 2)) $((N + 3)) $((N + 2)) $MOVED_B
wait_all $((N + 2)) 60 "b killed (SIGKILL)"
start_member b
produce $((N + 3)) $((N + 4)) -1
wait_all $((N + 3)) 40 "b restarted"

# ---------------------------------------------------------------- broker outage
OUTAGE_S=${OUTAGE_S:-9} # > session.timeout.ms (6 s): the members lose their partitions
for b in 1 2 3; do echo "down $b" >&3; done
sleep "$OUTAGE_S"
R=$(curl -s "http://127.0.0.1:${MPORT[c]}/readyz")
case $R in
*lost* | *"no partition"*) ok "during the outage /readyz says why: $R" ;;
*) fail "during the outage /readyz: $R" ;;
esac
LAG=$(curl -s "http://127.0.0.1:${MPORT[c]}/metrics" | awk '$1 == "cellcast_kafka_lag_messages" { print $2 }')
LOST=$(curl -s "http://127.0.0.1:${MPORT[c]}/metrics" | awk '$1 == "cellcast_kafka_lost_partitions" { print $2 }')
# unknown lag is no series at all (never 0, never -1: /metrics omits what it does not know)
[ -z "$LAG" ] && [ "${LOST:-0}" -gt 0 ] && ok "during the outage: lag unknown (absent), $LOST partition(s) lost, cells kept" ||
    fail "during the outage: lag '$LAG' (want absent), lost partitions $LOST"
CELLS_C=$(curl -s "http://127.0.0.1:${MPORT[c]}/v1/cells?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
[ "${CELLS_C:-0}" -gt 0 ] && ok "during the outage c still serves its $CELLS_C cells" || fail "during the outage c serves no cell"

for b in 1 2 3; do echo "up $b" >&3; done
produce $((N + 4)) $((N + 5)) -1
wait_all $((N + 4)) 60 "after a $OUTAGE_S s outage of every broker"

# ---------------------------------------------------------------- alerts
# The last step's transitions reach the topic a moment after the step is served (an
# episode the step resolved can be firing on the topic and resolved at its owner): the
# check is repeated, every second for up to 10 s, until the two agree.
urls=()
for m in "${!MPORT[@]}"; do urls+=("http://127.0.0.1:${MPORT[$m]}"); done
check_alerts() {
    kcat -b "$EXT" -C -t alerts -o beginning -e -q -f '%k|%s\n' >"$TMP/alerts.txt" 2>/dev/null
python3 - "$TMP/alerts.txt" "$P0" "$N" "$MOVED_A" "$MOVED_B" "${urls[@]}" <<'PYEOF'
import json, sys, urllib.request
path, p0, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
moved = {n: sys.argv[4].split(), n + 2: sys.argv[5].split()}
last, fired, trans = {}, set(), []
for line in open(path):
    if not line.strip():
        continue
    m = json.loads(line.partition("|")[2])
    last[m["id"]] = m
    if m["kind"] == "anomaly":
        trans.append(m)
        if m["state"] == "firing":
            fired.add((m["cell_id"], m["step"]))  # the id's onset may precede the spike

def busy(cell, s):
    # an episode of the cell still firing at step s, or resolved within the cooldown
    # (alerts.cooldown_steps, 6): a spike then raises no new transition, by design
    st = {}
    for m in trans:
        if m["cell_id"] == cell and m["step"] < s:
            st[m["id"]] = m
    return any(m["state"] == "firing" or m["step"] >= s - 6 for m in st.values())

bad = []
for step, cells in moved.items():
    s = p0 + step
    tested = [c for c in cells if not busy(c, s)]
    miss = [c for c in tested if (c, s) not in fired]
    print(f"spike at step {step}: {len(tested) - len(miss)} of {len(tested)} moved cells alerted "
          f"({len(cells) - len(tested)} in an episode or its cooldown)", file=sys.stderr)
    if miss or len(tested) < 5 or len(tested) < len(cells) // 2:
        bad.append(f"spike at step {step} not alerted for {len(miss)} of {len(tested)} moved cells: {miss[:5]}")
firing_now = set()
for u in sys.argv[6:]:
    after = None
    while True:
        q = u + "/v1/alerts/firing?limit=1000" + (f"&after={after}" if after else "")
        o = json.load(urllib.request.urlopen(q, timeout=5))
        items = o.get("alerts", o.get("items", []))
        firing_now.update(a["id"] for a in items)
        after = o.get("next")
        if not after or not items:
            break
left = [i for i, m in last.items() if m["state"] == "firing" and i not in firing_now]
if left:
    bad.append(f"{len(left)} alert(s) firing on the topic, firing nowhere: {left[:5]}")
print(f"{len(fired)} anomaly alert(s) fired, {sum(m['state'] == 'firing' for m in last.values())} still firing", file=sys.stderr)
if bad:
    print("\n".join(bad)); sys.exit(1)
PYEOF
}
st=1
for _ in $(seq 10); do check_alerts >"$TMP/alerts.out" 2>&1 && { st=0; break; }; sleep 1; done
cat "$TMP/alerts.out"
[ $st = 0 ] && ok "alerts: spikes after each move alerted; every alert left firing on the topic is firing at the cell's owner" || fail "alerts"

grep -h "takeover of" "$TMP"/?/log.* | sed 's/^.*takeover/takeover/' | sort | uniq -c | sort -rn | head -5
[ "$FAILS" = 0 ] && echo "PASS" || { echo "$FAILS failure(s)"; exit 1; }
