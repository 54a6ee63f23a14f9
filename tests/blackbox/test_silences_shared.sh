#!/bin/bash
# test_silences_shared.sh — the API's silences shared by the members through the compacted
# silences topic (issue 32; silences.topic). Two members on a mock Kafka cluster, each with
# its own silences.path file:
#   - a silence posted to A is listed by B (same id, source api, active) and counts in B's
#     cellcast_silences_active; expired on A, it is expired on B;
#   - hostile records written to kpis.silences (a key that is no API id, a configuration's
#     id, a value that is not JSON, an id that is not its key, a silence whose updatedAt is
#     far ahead) are refused by both, counted and logged, and change nothing;
#   - B restarted without its file gets the silence back from the topic.
#   usage: test_silences_shared.sh CELLCASTD MOCK_CLUSTER SOURCE_ROOT
set -u
CELLCASTD=${1:-}
CLUSTER=${2:-}
SRC=${3:-$(cd "$(dirname "$0")/../.." && pwd)} # kafka_test_init reads it (TINY)
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init silences_shared TERM "$CELLCASTD" "$CLUSTER"

start_mock_cluster 1 kpis:2 kpis.state:2 kpis.silences:1 alerts:1
mkcfg() {
    cat >"$TMP/$1.yaml" <<EOF
model:
  path: "$TINY"
kafka:
  brokers: "$EXT"
  group_id: silences-shared
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "500"
http:
  port: 0
snapshot:
  path: ""
silences:
  path: "$TMP/$1.silences"
admin:
  token: "s3cret"
demo:
  enabled: false
EOF
}
mkcfg a
mkcfg b
AUTH=(-H 'Authorization: Bearer s3cret' -H 'Content-Type: application/json')
DAEMON_TRIES=200 start_daemon "$TMP/loga" health -c "$TMP/a.yaml"
UA=$U PA=$DPID
DAEMON_TRIES=200 start_daemon "$TMP/logb" health -c "$TMP/b.yaml"
UB=$U

end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
sid=$(curl -s "${AUTH[@]}" -d '{"matchers":[{"name":"site","value":"S1"}],"endsAt":"'"$end"'","comment":"shared"}' "$UA/v1/silences" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["silenceID"])')
[ -n "$sid" ] || { fail "no silence id from A"; exit 1; }
# state ID URL: the silence's state and source there ("" when not listed)
state() { curl -s "$2/v1/silences" | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin)["silences"] if x["id"] == sys.argv[1]]
print(s[0]["status"]["state"] + "/" + s[0]["source"] if s else "")' "$1"; }
for _ in $(seq 150); do [ "$(state "$sid" "$UB")" = active/api ] && break; sleep 0.1; done
[ "$(state "$sid" "$UB")" = active/api ] || fail "B does not list A's silence: $(curl -s "$UB/v1/silences")"
curl -s "$UB/metrics" | grep -q '^cellcast_silences_active 1$' || fail "B: $(curl -s "$UB/metrics" | grep silences_active)"
ok "a silence posted to A is active on B"

curl -s -X DELETE "${AUTH[@]}" "$UA/v1/silences/$sid" | grep -q '"state":"expired"' || fail "DELETE on A"
for _ in $(seq 150); do [ "$(state "$sid" "$UB")" = expired/api ] && break; sleep 0.1; done
[ "$(state "$sid" "$UB")" = expired/api ] || fail "B: A's expired silence is '$(state "$sid" "$UB")'"
ok "expired on A, expired on B"

# hostile records
good='{"id":"KEY","matchers":[{"name":"cell","value":"x"}],"startsAt":"2026-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z","updatedAt":"UP"}'
now_up=$(date -u +%Y-%m-%dT%H:%M:%SZ)
{
    echo "cfg-x|${good//KEY/cfg-x}" | sed "s/UP/$now_up/"
    echo "bad id|${good//KEY/bad id}" | sed "s/UP/$now_up/"
    echo "s7-1-1|{nope"
    echo "s7-1-2|${good//KEY/s7-1-3}" | sed "s/UP/$now_up/"
    echo "s7-1-4|${good//KEY/s7-1-4}" | sed "s/UP/2099-01-01T00:00:00Z/"
} | kcat -b "$EXT" -P -t kpis.silences -K '|' || fail "kcat produce"
for U in "$UA" "$UB"; do
    for _ in $(seq 100); do curl -s "$U/metrics" | grep -q '^cellcast_silences_topic_records_total{result="refused"} 5$' && break; sleep 0.1; done
    curl -s "$U/metrics" | grep -q '^cellcast_silences_topic_records_total{result="refused"} 5$' ||
        fail "$U: $(curl -s "$U/metrics" | grep topic_records)"
    n=$(curl -s "$U/v1/silences" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["silences"]))')
    [ "$n" = 1 ] || fail "$U lists $n silences after the hostile records"
done
for w in "not a silence id" "not a JSON object" "its id is not its key" "an hour ahead"; do
    grep -q "a record of 'kpis.silences'.*refused: .*$w" "$TMP/logb" || fail "B's log lacks '$w'"
done
ok "hostile records refused by both, counted and logged"

stop_daemon
rm -f "$TMP/b.silences"
DAEMON_TRIES=200 start_daemon "$TMP/logb2" health -c "$TMP/b.yaml"
UB=$U
for _ in $(seq 150); do [ "$(state "$sid" "$UB")" = expired/api ] && break; sleep 0.1; done
[ "$(state "$sid" "$UB")" = expired/api ] || fail "B restarted without its file: '$(state "$sid" "$UB")'"
ok "B restarted without its file has the silence from the topic"
kill "$PA" 2>/dev/null
[ "$FAILS" = 0 ]
