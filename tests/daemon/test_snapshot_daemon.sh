#!/bin/bash
# test_snapshot_daemon.sh — cellcastd restarted on a snapshot with crafted records whose
# checksums hold (a cell whose first step is near INT64_MAX, which used to overflow into a
# negative ring index and crash the daemon at every restart, and a cell id ingest would
# refuse; a cell whose steps end far ahead of the clock, which made its real records late
# for good; a cell whose anomaly state names a step past its data, refused after its ring
# was restored and left half-restored, its steps queued and never stepped; a positions
# record with a negative partition): the daemon starts, logs and counts each refused
# record as what it is, restores the other cell and serves its forecast, and the refused
# cells start anew with the records sent after the restart.
#   usage: test_snapshot_daemon.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init snapshot

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$ROOT/tests/data/golden/tiny.safetensors"
kafka:
  brokers: embedded
  group_id: test-snapshot
http:
  port: 0
  post_kpis: open
ingest:
  batch_ms: 5
snapshot:
  path: "$TMP/state.snap"
  interval_s: 0
YAML

start_daemon "$TMP/log1" health -c "$TMP/c.yaml"
$PY - "$TMP" <<'PYEOF'
import json, sys
S, p0 = 900, 1714557600 // 900
recs = [{"cell": c, "ts": (p0 + i) * S, "kpis": {"prb": 50 + i, "thr": 3 * i, "users": 10 + i % 7}}
        for i in range(40) for c in ("victim", "keeper", "future", "anom")]
json.dump(recs, open(f"{sys.argv[1]}/h.json", "w"))
PYEOF
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "@$TMP/h.json" "$U/v1/kpis")
[ "$code" = 202 ] || fail "POST /v1/kpis: $code"
for _ in $(seq 50); do
    curl -sf -o /dev/null "$U/v1/cells/keeper/forecast" &&
        curl -sf -o /dev/null "$U/v1/cells/victim/forecast" && break
    sleep 0.1
done
stop_daemon || fail "first run: SIGTERM exit status $?"
[ -s "$TMP/state.snap" ] || { cat "$TMP/log1"; echo "FAIL: no snapshot written"; exit 1; }

# Rewrite the snapshot: victim's first step (and sequence start) near INT64_MAX, plus a copy
# of keeper's record under the id "bad id!"; every record CRC, the count and the file CRC
# recomputed, so only the field checks can refuse them.
$PY - "$TMP/state.snap" <<'PYEOF'
import struct, sys, zlib
path = sys.argv[1]
b = open(path, "rb").read()
H = 212
out, o, recs = bytearray(b[:H]), H, []
while True:
    t, n = struct.unpack_from("<II", b, o)
    if t == 0x454E44:
        break
    recs.append([t, bytearray(b[o + 8:o + 8 + n])])
    o += 12 + n
extra = []
for r in recs:
    if r[0] != 1:
        continue
    idl = struct.unpack_from("<H", r[1], 0)[0]
    cid = bytes(r[1][2:2 + idl])
    if cid == b"victim":
        big = 2**63 - 6
        struct.pack_into("<qq", r[1], 2 + idl, big, big)
    elif cid == b"keeper":
        bad = b"bad id!"
        extra.append([1, bytearray(struct.pack("<H", len(bad)) + bad + r[1][2 + idl:])])
    elif cid == b"future":  # its 40 steps now end at step 281558111 (year 9900)
        count = struct.unpack_from("<i", r[1], 2 + idl + 16)[0]
        first = 281558111 - count + 1
        struct.pack_into("<qq", r[1], 2 + idl, first, first)
    elif cid == b"anom":  # its anomaly state's last step (offset 77 of it) = 2^62
        o2 = 2 + idl + 16
        count, F = struct.unpack_from("<ii", r[1], o2)
        al_at = o2 + 8 + count * F * 4
        al = struct.unpack_from("<I", r[1], al_at)[0]
        assert al > 85, "anom has no anomaly state"
        struct.pack_into("<q", r[1], al_at + 4 + 77, 2**62)
recs += extra
topic = b"kpis"  # a positions record with partition -1
recs.append([2, bytearray(struct.pack("<IH", 1, len(topic)) + topic + struct.pack("<iq", -1, 5))])
assert any(bytes(r[1][2:8]) == b"victim" for r in recs if r[0] == 1), "victim not in the snapshot"
for t, p in recs:
    rec = struct.pack("<II", t, len(p)) + bytes(p)
    out += rec + struct.pack("<I", zlib.crc32(rec))
end = struct.pack("<II", 0x454E44, 12) + struct.pack("<QI", len(recs), zlib.crc32(bytes(out)))
out += end + struct.pack("<I", zlib.crc32(end))
open(path, "wb").write(out)
PYEOF
[ $? = 0 ] || fail "could not craft the snapshot"

start_daemon "$TMP/log2" health -c "$TMP/c.yaml"
grep -q "record refused: .*cell victim: malformed record" "$TMP/log2" ||
    fail "the overflowing record is not refused in the log"
grep -q "record refused: .*invalid id" "$TMP/log2" || fail "the bad id is not refused in the log"
grep -q "cell future: its steps end at 281558111.*ingest.max_future_s" "$TMP/log2" ||
    fail "the far-future record is not refused in the log"
grep -q "cell anom: anomaly state: steps past the cell's last step" "$TMP/log2" ||
    fail "the anomaly state past the cell's steps is not refused in the log"
grep -q "positions record refused: .*partition -1" "$TMP/log2" ||
    fail "the positions record is not refused in the log"
grep -q "restored: 1 cells (4 failed)" "$TMP/log2" || fail "restore counts: $(grep restored "$TMP/log2")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/cells/keeper/forecast")" = 200 ] ||
    fail "the valid cell is not served after the restore"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/cells/victim/forecast")" = 404 ] ||
    fail "the refused cell is served"
curl -s "$U/metrics" | grep -qx "cellcast_snapshot_refused_cells 4" ||
    fail "metrics: $(curl -s "$U/metrics" | grep snapshot_refused)"
curl -s "$U/metrics" | grep -qx "cellcast_snapshot_refused_positions 1" ||
    fail "metrics: $(curl -s "$U/metrics" | grep snapshot_refused)"
# the refused cells start anew: future's next records are not late, anom's 40 steps (up
# to the step its discarded ring ended at) are all stepped
$PY - "$TMP" <<'PYEOF'
import json, sys
S, p0 = 900, 1714557600 // 900
recs = [{"cell": "future", "ts": (p0 + i) * S, "kpis": {"prb": 50 + i, "thr": 3 * i, "users": 10}}
        for i in range(40, 45)]
recs += [{"cell": "anom", "ts": (p0 + i) * S, "kpis": {"prb": 50 + i, "thr": 3 * i, "users": 10}}
         for i in range(40)]
json.dump(recs, open(f"{sys.argv[1]}/h2.json", "w"))
PYEOF
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "@$TMP/h2.json" "$U/v1/kpis")
[ "$code" = 202 ] || fail "POST /v1/kpis after the restart: $code"
P0=$((1714557600 / 900))
cell_is() { # ID LAST_STEP STEPS: polls until the cell has stepped up to LAST_STEP, none late
    for _ in $(seq 50); do
        curl -s "$U/v1/cells/$1" >"$TMP/cell.json"
        $PY - "$TMP/cell.json" "$2" "$3" <<'PYEOF' && return 0
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(not (j["last_step"] == int(sys.argv[2]) and j["counts"]["steps"] == int(sys.argv[3])
              and j["counts"]["late"] == 0))
PYEOF
        sleep 0.1
    done
    return 1
}
cell_is future $((P0 + 44)) 5 || fail "future after the restart: $(cat "$TMP/cell.json")"
cell_is anom $((P0 + 39)) 40 || fail "anom after the restart: $(cat "$TMP/cell.json")"
stop_daemon || fail "second run: SIGTERM exit status $?"

# without Kafka the restore does not promise that Kafka resumes
sed 's/brokers: embedded/brokers: none/' "$TMP/c.yaml" >"$TMP/none.yaml"
start_daemon "$TMP/log3" health -c "$TMP/none.yaml"
grep -q "restored: .*no Kafka (kafka.brokers none)" "$TMP/log3" ||
    fail "restore line without Kafka: $(grep restored "$TMP/log3")"
stop_daemon || fail "third run: SIGTERM exit status $?"

if [ "$FAILS" != 0 ]; then
    echo "--- daemon log (restart)"; tail -30 "$TMP/log2"
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "ok: crafted snapshot records refused and counted; the daemon restored the rest"
