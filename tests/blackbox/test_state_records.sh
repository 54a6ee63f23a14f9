#!/bin/bash
# test_state_records.sh — forged records on the state topic (issue 29: anyone with write
# access to it can write one). A member steps two cells from a mock Kafka cluster and hands
# their state over at SIGTERM; then a record keyed `zz-1` that carries c2's state with every
# value 42 (its CRC recomputed), and c1's real record with its steps moved far past the
# clock, are written to the state topic; a second member takes the partitions over. It
# must refuse both (logged with the reason, cellcast_state_records_refused_total), keep c2
# as handed over (a forecast from its real values, not 42, with the interval scales it
# served), serve no cell zz-1, restore c3 (whose record's first interval scale was made
# NaN) at scale 1 with the scales refused and counted (cellcast_interval_scales_refused_total),
# and start
# c1 anew from its next records instead of calling them late.
#   usage: test_state_records.sh CELLCASTD MOCK_CLUSTER SOURCE_ROOT
set -u
CELLCASTD=${1:-}
CLUSTER=${2:-}
SRC=${3:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init state_records TERM "$CELLCASTD" "$CLUSTER"

S=900
P0=$((($(date +%s) - 100 * S) / S)) # 20 steps ending ~80 steps before now
start_mock_cluster 1 kpis:2 kpis.state:2 alerts:1
cat >"$TMP/cfg.yaml" <<EOF
model:
  path: "$TINY"
kafka:
  brokers: "$EXT"
  group_id: state-records
  partitioner: murmur2_random
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "500"
http:
  port: 0
snapshot:
  path: ""
  interval_s: 1
demo:
  enabled: false
EOF

# gen FROM TO: kcat lines `key|json` of c1, c2 and c3 for steps P0+FROM .. P0+TO-1
gen() {
    python3 - "$1" "$2" "$P0" "$S" <<'PYEOF'
import json, math, sys
fr, to, p0, S = (int(x) for x in sys.argv[1:5])
for p in range(fr, to):
    for i, cell in enumerate(("c1", "c2", "c3")):
        k = {"prb": round(0.4 + 0.2 * math.sin(p / 5 + i), 4), "thr": 30000 + 500 * (p % 7),
             "users": 20 + (p + i) % 5}
        print(cell + "|" + json.dumps({"cell": cell, "ts": (p0 + p) * S, "kpis": k}))
PYEOF
}
produce() { gen "$@" | kcat -b "$EXT" -P -t kpis -K '|' -X partitioner=murmur2_random || fail "kcat produce"; }
# last_step ID: the cell's last step on the running member (empty when unknown)
last_step() { curl -s "$U/v1/cells/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("last_step",""))' 2>/dev/null; }

DAEMON_TRIES=200 start_daemon "$TMP/log1" assigned -c "$TMP/cfg.yaml"
produce 0 20
for _ in $(seq 100); do
    [ "$(last_step c1)" = $((P0 + 19)) ] && [ "$(last_step c2)" = $((P0 + 19)) ] &&
        [ "$(last_step c3)" = $((P0 + 19)) ] && break
    sleep 0.1
done
[ "$(last_step c2)" = $((P0 + 19)) ] || fail "first member: c2 not stepped to $((P0 + 19))"
# the forecast's means, and its online interval scales (interval.h), which the state record
# carries (issue 31)
scales() { curl -s "$U/v1/cells/$1/forecast" | python3 -c '
import json, sys
print(json.dumps([v["interval_scale"] for pt in json.load(sys.stdin)["forecast"] for v in pt["values"].values()]))'; }
means() { curl -s "$U/v1/cells/$1/forecast" | python3 -c '
import json, sys
def walk(x):
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in ([x[k]] if k == "mean" else walk(x[k]))]
    return [v for y in x for v in walk(y)] if isinstance(x, list) else []
print(json.dumps(walk(json.load(sys.stdin)["forecast"])))'; }
MEAN1=$(means c2)
SCALE1=$(scales c2)
stop_daemon || fail "first member: SIGTERM exit status $?"
grep -q "state record(s).*written to 'kpis.state'" "$TMP/log1" || fail "no state records written"

# the records handed over, then the forged ones
kcat -b "$EXT" -C -t kpis.state -o beginning -e -f '%k|%p|%S|%s' >"$TMP/state.bin" 2>/dev/null
python3 - "$TMP" <<'PYEOF' || fail "could not forge the records"
import struct, sys, zlib
tmp = sys.argv[1]
b, o, recs = open(f"{tmp}/state.bin", "rb").read(), 0, {}
while o < len(b):
    k_end = b.index(b"|", o); p_end = b.index(b"|", k_end + 1); s_end = b.index(b"|", p_end + 1)
    key, part, size = b[o:k_end].decode(), int(b[k_end + 1:p_end]), int(b[p_end + 1:s_end])
    recs[key] = (part, b[s_end + 1:s_end + 1 + size])
    o = s_end + 1 + size
assert "c1" in recs and "c2" in recs, f"records read: {sorted(recs)}"
def payload(rec):  # frame: magic, hash, F, S (24 bytes) | cell payload | CRC
    v = bytearray(rec[:-4])
    idl = struct.unpack_from("<H", v, 24)[0]
    at = 24 + 2 + idl
    return v, at
def seal(v):
    return bytes(v) + struct.pack("<I", zlib.crc32(bytes(v)))
# zz-1: c2's state with every value 42
part2, rec2 = recs["c2"]
v, at = payload(rec2)
count, F = struct.unpack_from("<ii", v, at + 16)
for j in range(count * F):
    struct.pack_into("<f", v, at + 24 + 4 * j, 42.0)
open(f"{tmp}/zz.bin", "wb").write(seal(v))
# c1: its steps moved to end at step 281558111
part1, rec1 = recs["c1"]
v, at = payload(rec1)
count = struct.unpack_from("<i", v, at + 16)[0]
first = 281558111 - count + 1
struct.pack_into("<qq", v, at, first, first)
open(f"{tmp}/c1.bin", "wb").write(seal(v))
# c3: its interval scales (after the 40 bytes of the host's fields, daemon/cell_record.h:
# magic, F, HZ, per_step, F levels, F x HZ offsets) with the first KPI's level NaN
part3, rec3 = recs["c3"]
v, at = payload(rec3)
count, F = struct.unpack_from("<ii", v, at + 16)
o = at + 24 + 4 * count * F
o += 4 + struct.unpack_from("<I", v, o)[0]  # the anomaly state
el = struct.unpack_from("<I", v, o)[0]
scales = o + 4 + 40
assert el > 40 and v[scales:scales + 4] == b"CCO1", (el, bytes(v[scales:scales + 4]))
struct.pack_into("<f", v, scales + 16, float("nan"))
open(f"{tmp}/c3.bin", "wb").write(seal(v))
open(f"{tmp}/parts", "w").write(f"{part1} {part2} {part3}\n")
PYEOF
read -r PART1 PART2 PART3 <"$TMP/parts"
kcat -b "$EXT" -P -t kpis.state -p "$PART3" -k c3 "$TMP/c3.bin" || fail "kcat produce c3"
kcat -b "$EXT" -P -t kpis.state -p "$PART2" -k zz-1 "$TMP/zz.bin" || fail "kcat produce zz-1"
kcat -b "$EXT" -P -t kpis.state -p "$PART1" -k c1 "$TMP/c1.bin" || fail "kcat produce c1"

DAEMON_TRIES=200 start_daemon "$TMP/log2" assigned -c "$TMP/cfg.yaml"
wait_log "$TMP/log2" "takeover of" 200 || fail "no takeover logged"
grep -q "state record keyed 'zz-1' on partition $PART2 refused: keyed 'zz-1' but holds cell 'c2'" "$TMP/log2" ||
    fail "the record keyed zz-1 is not refused in the log"
grep -q "state record keyed 'c1' on partition $PART1 refused: cell c1: its steps end at 281558111" "$TMP/log2" ||
    fail "c1's far-future record is not refused in the log"
curl -s "$U/metrics" | grep -qx "cellcast_state_records_refused_total 2" ||
    fail "metrics: $(curl -s "$U/metrics" | grep state_records)"
[ "$(last_step c2)" = $((P0 + 19)) ] || fail "c2 not restored at its step: $(last_step c2)"
# c3's NaN scale: refused and counted, the cell restored all the same, at scale 1
grep -q "cell c3: its record's interval scales: log-scale nan at KPI 0 is not finite" "$TMP/log2" ||
    fail "c3's NaN interval scale is not refused in the log"
curl -s "$U/metrics" | grep -qx "cellcast_interval_scales_refused_total 1" ||
    fail "metrics: $(curl -s "$U/metrics" | grep scales_refused)"
[ "$(last_step c3)" = $((P0 + 19)) ] || fail "c3 not restored at its step: $(last_step c3)"
python3 -c 'import json, sys; a = json.loads(sys.argv[1]); sys.exit(not (a and all(x == 1 for x in a)))' \
    "$(scales c3)" || fail "c3 not at scale 1: $(scales c3)"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/cells/zz-1")" = 404 ] || fail "a cell zz-1 is served"
curl -s "$U/v1/cells/c2" | python3 -c '
import json, sys
j = json.load(sys.stdin)
obs = {k: v["observed"] for k, v in j["last_observation"]["kpis"].items()}
sys.exit(any(v == 42 for v in obs.values()))' || fail "c2 holds the forged values: $(curl -s "$U/v1/cells/c2")"
MEAN2=$(means c2)
[ "$MEAN1" != "[]" ] && [ "$MEAN1" = "$MEAN2" ] || fail "c2's forecast means changed across the handover: $MEAN1 / $MEAN2"
# the scales come back from the record's log-scales: float32 rounding (exp_offset is kept
# by products, ≤ HZ=6 of ≤ 2 ulp) and the reply's ~6-7 digits, 1e-5 relative bounds both
python3 - "$SCALE1" "$(scales c2)" <<'PYEOF' || fail "c2's interval scales changed across the handover: $SCALE1 / $(scales c2)"
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:])
assert a and any(x != 1 for x in a) and len(a) == len(b), (a, b)
assert all(abs(x - y) <= 1e-5 * x for x, y in zip(a, b)), (a, b)
PYEOF
# c1 starts anew: its next records are stepped, none late
produce 20 25
for _ in $(seq 100); do [ "$(last_step c1)" = $((P0 + 24)) ] && break; sleep 0.1; done
curl -s "$U/v1/cells/c1" >"$TMP/c1.json"
python3 - "$TMP/c1.json" $((P0 + 24)) <<'PYEOF' || fail "c1 after the takeover: $(cat "$TMP/c1.json")"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(not (j["last_step"] == int(sys.argv[2]) and j["counts"]["late"] == 0))
PYEOF
stop_daemon || fail "second member: SIGTERM exit status $?"

if [ "$FAILS" != 0 ]; then
    echo "--- second member's log"; grep -E "handover|state" "$TMP/log2" | tail -20
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "ok: forged state records refused and counted; the real state kept; forged interval scales refused, the cell at scale 1"
