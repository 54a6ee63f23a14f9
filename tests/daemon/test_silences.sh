#!/bin/bash
# test_silences.sh — silences, black-box (issue 32): cellcastd (tiny model, no Kafka) with a
# topology of two sites and silences.path; a silence of site S2 (POST /v1/silences, admin
# token) while S1 loses traffic and b2 (in S2) spikes:
#   - the token is required; a bad silence is a 422 naming the field;
#   - S1's alerts fire (one site incident); b2's anomaly does not: not in /v1/alerts,
#     /v1/alerts/firing or any incident, and counted as held;
#   - DELETE /v1/silences/{id} expires it while b2's episode is still firing: the alert
#     fires then, and its site's incident opens;
#   - the silences survive a restart (the file), expired and active ones with their state.
#   usage: test_silences.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init silences
MODEL="$ROOT/tests/data/golden/tiny.safetensors" # F=3 (prb,thr,users), HZ=6, S=900
need_files "$MODEL"

printf '%s\n' cell,site,region a1,S1,R1 a2,S1,R1 a3,S1,R1 b1,S2,R1 b2,S2,R1 b3,S2,R1 >"$TMP/topo.csv"
cat >"$TMP/c.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: none
http:
  post_kpis: open
  port: 0
ingest:
  batch_ms: 5
snapshot:
  path: ""
topology:
  path: "$TMP/topo.csv"
silences:
  path: "$TMP/silences.json"
admin:
  token: "s3cret"
alerts:
  zero_steps: 3
  warmup_steps: 8
  warn_z: 20
  crit_z: 40
  cusum_h: 0
  profile_h: 0
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"
AUTH=(-H 'Authorization: Bearer s3cret' -H 'Content-Type: application/json')

# the same feed as test_incidents.sh: S1 all zero at steps 40..47, b2 far above at 44..47
$PY - "$TMP" <<'PYEOF'
import json, math, sys
tmp = sys.argv[1]
S, p0 = 900, 1767225600 // 900
cells = ["a1", "a2", "a3", "b1", "b2", "b3"]
for i in range(48):
    recs = []
    for j, c in enumerate(cells):
        v = 50 + 20 * math.sin((i + j) / 6.0)
        k = {"prb": v, "thr": 3 * v, "users": 20 + 5 * math.cos((i + j) / 6.0)}
        if c[0] == "a" and 40 <= i < 48:
            k = {"prb": 0, "thr": 0, "users": 0}
        if c == "b2" and 44 <= i < 48:
            k = {"prb": 100, "thr": 3000, "users": 400}
        recs.append({"cell": c, "ts": (p0 + i) * S, "kpis": k})
    json.dump(recs, open(f"{tmp}/in{i:02d}.json", "w"))
PYEOF

end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
body='{"matchers":[{"name":"site","value":"S2"}],"endsAt":"'$end'","createdBy":"test","comment":"planned work"}'
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d "$body" "$U/v1/silences")
[ "$code" = 401 ] || fail "POST /v1/silences without the token: $code, not 401"
curl -s "${AUTH[@]}" -d '{"matchers":[{"name":"planet","value":"x"}],"endsAt":"'$end'"}' "$U/v1/silences" >"$TMP/bad"
grep -q '"status":422' "$TMP/bad" && grep -q 'matchers\[0\]' "$TMP/bad" || fail "a bad silence: $(cat "$TMP/bad")"
sid=$(curl -s "${AUTH[@]}" -d "$body" "$U/v1/silences" | $PY -c 'import json,sys; print(json.load(sys.stdin)["silenceID"])')
[ -n "$sid" ] || fail "no silence id"
curl -s "$U/v1/silences" | grep -q '"state":"active"' || fail "the silence is not active"
ok "silence $sid of site S2 added (token required, a bad one refused)"

for ((i = 0; i < 48; i++)); do
    curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary "@$TMP/in$(printf %02d "$i").json" "$U/v1/kpis"
done
wait_observed b3 $((1767225600 / 900 + 47)) || fail "the steps were not stepped"
for _ in $(seq 50); do
    curl -s "$U/metrics" | grep -q '^cellcast_silences_held_alerts 1$' && break
    sleep 0.1
done
curl -s "$U/metrics" | grep -q '^cellcast_silences_held_alerts 1$' || fail "b2's alert not held: $(curl -s "$U/metrics" | grep silences)"
curl -s "$U/v1/alerts?limit=1000" >"$TMP/alerts"
grep -q '"cell_id":"a1"' "$TMP/alerts" || fail "S1's alerts did not fire"
grep -q '"cell_id":"b2"' "$TMP/alerts" && fail "b2's silenced alert is in /v1/alerts"
curl -s "$U/v1/alerts/firing" | grep -q '"cell_id":"b2"' && fail "b2's silenced alert is in /v1/alerts/firing"
curl -s "$U/v1/incidents" >"$TMP/inc"
grep -q '"group":"S1"' "$TMP/inc" || fail "no S1 incident: $(head -c 300 "$TMP/inc")"
grep -q '"group":"S2"' "$TMP/inc" && fail "an S2 incident while S2 is silenced"
ok "silenced: S1 fires, b2's anomaly is held back (no alert, no incident)"

curl -s -X DELETE "${AUTH[@]}" "$U/v1/silences/$sid" | grep -q '"state":"expired"' || fail "DELETE did not expire $sid"
for _ in $(seq 50); do
    curl -s "$U/v1/alerts/firing" | grep -q '"cell_id":"b2"' && break
    sleep 0.1
done
curl -s "$U/v1/alerts/firing" | grep -q '"cell_id":"b2"' || fail "b2's alert does not fire after the silence ended"
curl -s "$U/v1/alerts?cell=b2" | grep -q '"state":"firing"' || fail "b2's firing transition is not in /v1/alerts"
curl -s "$U/v1/incidents?state=firing" | grep -q '"group":"S2"' || fail "no S2 incident after the silence ended"
curl -s "$U/metrics" | grep -q '^cellcast_silences_alerts_total{outcome="released"} 1$' || fail "the release is not counted"
ok "the silence expired: b2's still-firing alert fires then, with its incident"

# a second silence, then a restart: both are there, with their states
curl -s "${AUTH[@]}" -d '{"matchers":[{"name":"cell","value":"a[0-9]+","isRegex":true}],"endsAt":"'$end'"}' "$U/v1/silences" | grep -q silenceID || fail "second silence refused"
kill "$DPID"
wait "$DPID" 2>/dev/null
start_daemon "$TMP/log2" health -c "$TMP/c.yaml"
curl -s "$U/v1/silences" >"$TMP/after"
$PY - "$TMP/after" "$sid" <<'PYEOF' || fail "silences after a restart: $(cat "$TMP/after")"
import json, sys
s = json.load(open(sys.argv[1]))["silences"]
st = {x["id"]: x["status"]["state"] for x in s}
assert len(s) == 2 and st.pop(sys.argv[2]) == "expired" and list(st.values()) == ["active"], st
assert any(m["isRegex"] and m["value"] == "a[0-9]+" for x in s for m in x["matchers"]), s
PYEOF
ok "silences survive a restart"
[ "$FAILS" = 0 ]
