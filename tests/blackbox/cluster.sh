#!/usr/bin/env bash
# tests/blackbox/cluster.sh — two cellcastd in one consumer group on one standalone mock
# broker (cc_mockbroker, tests/blackbox/mockbroker.c; kpis has 4 partitions), fed with kcat
# using the Java-compatible partitioner, checked with curl:
#   - GET /v1/cluster on each member lists both, with their addresses and partitions, each
#     partition owned exactly once, one of them `self`;
#   - the partition cellcastd computes for a cell (/v1/cluster?cell=) is the partition kcat's
#     producer (partitioner murmur2_random) put the cell's messages in;
#   - a per-cell request to the member that does not hold the cell answers 307 with
#     Location = the owner's address + the same path and query; curl -L reaches the
#     forecast in one redirect; the owner serves it directly;
#   - an unknown cell: 404 from its owner, one 307 then 404 from the other (no loop); so a
#     query with raw bytes that are not UTF-8 (the JSON's location with U+FFFD; was 500);
#   - a second KPI topic (kpis2, 4 partitions): its cells are redirected right too;
#   - without a state topic (kafka.state_topic ""), a member stopped with SIGTERM hands its
#     cells over cold (its log line) and leaves the other's /v1/cluster at once (tombstone);
#   - a member of KPI topics with different partition counts (kpis, kpis3 with 2) warns
#     that they are not assigned alike.
# Usage: cluster.sh CELLCASTD MOCKBROKER [SRC]. Exit 77 (skip) without kcat, curl, python3.
# ~25 s (three group joins behind the mock's 3 s initial rebalance delay).
set -u

CELLCASTD=${1:-}
MOCKBROKER=${2:-}
SRC=${3:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init cluster TERM "$CELLCASTD" "$MOCKBROKER"

S=900
T0=1714521600

start_mockbroker "$TMP" kpis:4 kpis2:4 kpis3:2 alerts:1 kpis.members:1
cat >"$TMP/c.yaml" <<EOF
model:
  path: "$TINY"
kafka:
  brokers: "$EXT"
  group_id: bb-cluster
  topics: [kpis, kpis2]
  partitioner: murmur2_random
  state_topic: ""
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
http:
  port: 0
engine:
  kv_type: f32
ingest:
  fields:
    thr_kbps: "thr*1000"
demo:
  enabled: false
cluster:
  heartbeat_ms: 500
EOF

# Both members must be in the group before data flows, or the first would consume all.
start_daemon "$TMP/a.log" assigned -c "$TMP/c.yaml" --set cluster.instance=a
PA=$PORT APID=$DPID
start_daemon "$TMP/b.log" port -c "$TMP/c.yaml" --set cluster.instance=b
PB=$PORT BPID=$DPID

# cluster_ok PORT: both members listed, partitions 0..3 each owned once, group stable.
cluster_ok() {
    curl -sf "http://127.0.0.1:$1/v1/cluster" | python3 -c '
import json, sys
j = json.load(sys.stdin)
m = j["members"]
parts = sorted(p for x in m for p in x["partitions"])
ok = (len(m) == 2 and parts == [0, 1, 2, 3] and j["group_state"] == "stable"
      and sum(x["self"] for x in m) == 1 and all(x["partitions"] for x in m)
      and sorted(x["client_id"] for x in m) == ["cellcastd-a-%s" % sys.argv[1], "cellcastd-b-%s" % sys.argv[2]]
      and sorted(x["address"] for x in m) == sorted("http://127.0.0.1:%s" % p for p in sys.argv[1:3])
      and j["partitioner"] == "murmur2_random" and j["partitions"] == 4)
sys.exit(0 if ok else 1)' "$PA" "$PB" 2>/dev/null # polled: silent while a member is not up yet
}
for _ in $(seq 150); do cluster_ok "$PA" && cluster_ok "$PB" && break; sleep 0.1; done
if cluster_ok "$PA" && cluster_ok "$PB"; then
    ok "GET /v1/cluster on both members: 2 members, partitions 0-3 each owned once, stable"
else
    fail "GET /v1/cluster: $(curl -s "http://127.0.0.1:$PA/v1/cluster") / $(curl -s "http://127.0.0.1:$PB/v1/cluster")"
fi

# 100 steps of 5 cells; c-1, c-2/a and 17 come as one message per cell (key = cell id).
mkdir -p "$TMP/h"
awk -v S=$S -v T0=$T0 -v from=0 -v to=100 -v bad_at=-1 -v dir="$TMP/h" \
    -f "$SRC/tests/blackbox/gen_history.awk" >"$TMP/k.txt"
kcat -b "$EXT" -P -t kpis -K '|' -X partitioner=murmur2_random <"$TMP/k.txt" || fail "kcat produce"
kcat -b "$EXT" -C -t kpis -e -q -f '%k %p\n' 2>/dev/null | sort -u >"$TMP/kcat_parts.txt"

CELLS="c-1 c-2%2Fa 17"
declare -A OWNER OTHER
for c in $CELLS; do
    raw=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.argv[1]))' "$c")
    want=$(awk -v k="$raw" '$1 == k { print $2 }' "$TMP/kcat_parts.txt")
    got=$(curl -sf "http://127.0.0.1:$PA/v1/cluster?cell=$c" |
        python3 -c 'import json,sys; c=json.load(sys.stdin)["cell"]; print(c["partition"], c["address"])')
    if [ -n "$want" ] && [ "${got%% *}" = "$want" ]; then
        ok "cell $raw: cellcastd's partition $want = kcat's (murmur2_random)"
    else
        fail "cell $raw: kcat put it in partition '$want', cellcastd computes '$got'"
    fi
    OWNER[$c]=${got#* }
    [ "${OWNER[$c]}" = "http://127.0.0.1:$PA" ] && OTHER[$c]="http://127.0.0.1:$PB" || OTHER[$c]="http://127.0.0.1:$PA"
done

# Wait for the owners to hold a forecast of every cell.
for _ in $(seq 300); do
    all=1
    for c in $CELLS; do
        curl -sf -o /dev/null "${OWNER[$c]}/v1/cells/$c/forecast" || { all=0; break; }
    done
    [ $all = 1 ] && break
    sleep 0.1
done
for c in $CELLS; do
    q="/v1/cells/$c/forecast?horizon=2"
    st=$(curl -s -o /dev/null -w '%{http_code}' "${OWNER[$c]}$q")
    [ "$st" = 200 ] && ok "owner ${OWNER[$c]} serves $c" || fail "owner ${OWNER[$c]} answers $st for $q"
    out=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "${OTHER[$c]}$q")
    [ "$out" = "307 ${OWNER[$c]}$q" ] && ok "the other member answers 307 to ${OWNER[$c]}$q" ||
        fail "the other member answers '$out' for $q (want 307 ${OWNER[$c]}$q)"
    out=$(curl -sL -o "$TMP/fc.json" -w '%{http_code} %{num_redirects}' "${OTHER[$c]}$q")
    if [ "$out" = "200 1" ] && python3 -c 'import json,sys; sys.exit(0 if len(json.load(open(sys.argv[1]))["forecast"]) == 2 else 1)' "$TMP/fc.json"; then
        ok "curl -L from the other member reaches the forecast of $c (1 redirect, query kept)"
    else
        fail "curl -L for $c: '$out' $(head -c 300 "$TMP/fc.json")"
    fi
done

# A second KPI topic with the first one's partition count: the range assignor gives
# partition p of both to one member, so the redirect computed from the first topic is right
# for cells consumed from the second (docs/operations.md, "Several KPI topics").
python3 - "$T0" "$S" >"$TMP/k2.txt" <<'PYEOF'
import json, sys
t0, s = int(sys.argv[1]), int(sys.argv[2])
for p in range(12):
    for i in range(6):
        c = "t2-%d" % i
        k = {"prb": 0.3 + 0.01 * ((p + i) % 7), "thr": 30000 + 1000 * ((3 * p + i) % 5), "users": 10 + (p + i) % 4}
        print(c + "|" + json.dumps({"cell": c, "ts": t0 + p * s, "kpis": k}))
PYEOF
kcat -b "$EXT" -P -t kpis2 -K '|' -X partitioner=murmur2_random <"$TMP/k2.txt" || fail "kcat produce kpis2"
for i in 0 1 2 3 4 5; do
    c=t2-$i
    own=$(curl -sf "http://127.0.0.1:$PA/v1/cluster?cell=$c" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cell"]["address"])')
    [ "$own" = "http://127.0.0.1:$PA" ] && oth="http://127.0.0.1:$PB" || oth="http://127.0.0.1:$PA"
    wait_http "$own/v1/cells/$c" 100
    st=$(curl -s -o /dev/null -w '%{http_code}' "$own/v1/cells/$c")
    out=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$oth/v1/cells/$c")
    [ "$st" = 200 ] && [ "$out" = "307 $own/v1/cells/$c" ] &&
        ok "cell $c of kpis2: served by ${own##*:}, the other member redirects there" ||
        fail "cell $c of kpis2: owner by kpis ${own##*:} answers $st, the other '$out'"
done
grep -h "not the same ones" "$TMP/a.log" "$TMP/b.log" && fail "kpis and kpis2 assigned differently"

# A cell nobody has seen: its owner says 404, the other member redirects there once.
for i in $(seq 100); do
    nc="never-seen-$i"
    o=$(curl -sf "http://127.0.0.1:$PA/v1/cluster?cell=$nc" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cell"]["owner"])')
    [ "$o" = other ] && break
done
out=$(curl -sL -o "$TMP/nf.json" -w '%{http_code} %{num_redirects}' "http://127.0.0.1:$PA/v1/cells/$nc")
[ "$out" = "404 1" ] && grep -q cell-not-found "$TMP/nf.json" &&
    ok "unknown cell: one 307 to its owner, which answers 404 (no loop)" ||
    fail "unknown cell $nc: '$out' $(cat "$TMP/nf.json")"
# The same redirect for a request whose query holds raw bytes that are not UTF-8 (a client
# may send them unencoded): its JSON quotes the location, which json_pack refused (500).
python3 - "$PA" "/v1/cells/$nc" >"$TMP/raw.txt" <<'PYEOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET " + sys.argv[2].encode() + b"?q=\xe9t\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
b = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    b += c
head, _, body = b.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode("latin-1"))
print(body.decode("utf-8", "replace"))
PYEOF
head -1 "$TMP/raw.txt" | grep -q ' 307 ' &&
    python3 -c 'import json,sys; l = open(sys.argv[1]).read().split("\n", 1)[1]; sys.exit(0 if json.loads(l)["location"].endswith("?q=\ufffdt\ufffd") else 1)' "$TMP/raw.txt" &&
    ok "a raw query byte that is not UTF-8: 307, its location with U+FFFD in the JSON" ||
    fail "raw query bytes: $(cat "$TMP/raw.txt")"

# SIGTERM b: its tombstone takes it out of a's view before the group notices. Without a
# state topic its cells are handed over cold, and its log says so.
NB=$(curl -sf "http://127.0.0.1:$PB/v1/cells?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
DPID=$BPID
stop_daemon || fail "b's exit status $?"
# one line per KPI topic: "handed over: A cell(s) with their newest state on 'T', B with an
# older one (...), C cold (no state topic ...)"
H=$(sed -n "s/.*handed over: \([0-9]*\) cell(s) with their newest state on '(none)', \([0-9]*\) with an older one.*, \([0-9]*\) cold (no state topic.*/\1 \2 \3/p" "$TMP/b.log" |
    awk '{ a += $1; b += $2; c += $3 } END { print a + 0, b + 0, c + 0 }')
[ "${NB:-0}" -gt 0 ] && [ "$H" = "0 0 $NB" ] && ok "b's $NB cell(s) handed over cold at SIGTERM (kafka.state_topic \"\")" ||
    fail "b held ${NB:-?} cell(s), handed over (with state, older, cold) $H: $(grep 'handed over' "$TMP/b.log")"
t0=$SECONDS
for _ in $(seq 30); do
    n=$(curl -sf "http://127.0.0.1:$PA/v1/cluster" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["members"]))' 2>/dev/null)
    [ "$n" = 1 ] && break
    sleep 0.1
done
[ "$n" = 1 ] && ok "b left a's /v1/cluster within $((SECONDS - t0)) s of SIGTERM" ||
    fail "b still listed by a 3 s after SIGTERM"
DPID=$APID
stop_daemon || fail "a's exit status $?"

# KPI topics of different partition counts cannot be assigned alike: the member says that
# redirects (computed from the first topic) may then be wrong for the other's cells.
sed -e 's/topics: \[kpis, kpis2\]/topics: [kpis, kpis3]/' -e 's/group_id: bb-cluster/group_id: bb-other/' \
    "$TMP/c.yaml" >"$TMP/c3.yaml"
start_daemon "$TMP/c3.log" assigned -c "$TMP/c3.yaml"
wait_log "$TMP/c3.log" "not the same ones" 30
grep -q "holds 4 partition(s) of 'kpis' and 2 of 'kpis3', not the same ones: redirects" "$TMP/c3.log" &&
    ok "kpis (4 partitions) and kpis3 (2): the member warns that redirects follow kpis" ||
    fail "no co-partitioning warning: $(grep cluster: "$TMP/c3.log" | tail -3)"
stop_daemon || fail "exit status $?"
grep -h "ERROR\|error " "$TMP/a.log" "$TMP/b.log" | grep -v "offset commit" | head -5
echo "$FAILS failure(s)"
[ "$FAILS" = 0 ]
