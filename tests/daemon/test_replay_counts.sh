#!/bin/bash
# test_replay_counts.sh — a cell's counts after a crash and a replay: cellcastd (no Kafka)
# gets 30 steps of a cell, writes its snapshot, is killed with SIGKILL and restarted on the
# snapshot; then every record is delivered again (what Kafka redelivers from the last
# committed offset, which is never past the snapshot). The redelivered records are
# duplicates or late, dropped: the cell's `records` count must stay the number of records
# applied (it grew with every redelivered record), `steps` too.
#   usage: test_replay_counts.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init replay

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$ROOT/tests/data/golden/tiny.safetensors"
kafka:
  brokers: none
http:
  post_kpis: open
  port: 0
ingest:
  batch_ms: 5
snapshot:
  path: "$TMP/state.snap"
  interval_s: 1
YAML
$PY - "$TMP" <<'PYEOF'
import json, sys
S, p0 = 900, 1714557600 // 900
recs = [{"cell": "r1", "ts": (p0 + i) * S, "kpis": {"prb": 50 + i, "thr": 3 * i, "users": 10 + i % 7}}
        for i in range(30)]
json.dump(recs, open(f"{sys.argv[1]}/h.json", "w"))
PYEOF
post() { curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$TMP/h.json" "$U/v1/kpis"; }
counts() { curl -s "$U/v1/cells/r1" | $PY -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(c["records"], c["steps"], c["duplicates"] + c["late"])'; }

start_daemon "$TMP/log1" health -c "$TMP/c.yaml"
[ "$(post)" = 202 ] || fail "POST /v1/kpis"
# silent while r1 is not there yet (no "counts" to read: a traceback per try)
for _ in $(seq 50); do [ "$(counts 2>/dev/null | cut -d' ' -f2)" = 30 ] && break; sleep 0.1; done
n0=$(grep -c 'snapshot' "$TMP/log1")
for _ in $(seq 40); do # the next periodic snapshot holds all 30 steps
    [ "$(grep -c 'snapshot' "$TMP/log1")" -gt "$n0" ] && [ -s "$TMP/state.snap" ] && break
    sleep 0.1
done
sleep 1.2
stop_daemon KILL
start_daemon "$TMP/log2" health -c "$TMP/c.yaml"
before=$(counts)
[ "$before" = "30 30 0" ] || fail "restored from the snapshot: records steps dropped = '$before', want '30 30 0'"
[ "$(post)" = 202 ] || fail "POST /v1/kpis again"
# until the redelivered records are accounted for (dropped, or applied: then records moved),
# not a fixed 0.3 s, which a loaded machine can outlast
for _ in $(seq 50); do
    after=$(counts)
    [ "${after##* }" -ge 30 ] 2>/dev/null || [ "${after%% *}" != 30 ] && break
    sleep 0.1
done
[ "$after" = "30 30 30" ] && ok "after SIGKILL and a replay: 30 records, 30 steps, 30 redelivered dropped" ||
    fail "after SIGKILL and a replay: records steps dropped = '$after', want '30 30 30'"
stop_daemon || fail "SIGTERM exit status $?"
if [ "$FAILS" != 0 ]; then
    echo "--- log"; tail -20 "$TMP/log2"
    exit 1
fi
echo "replayed records are not counted again"
