#!/bin/bash
# test_silences.sh — silences, black-box (issue 32): cellcastd (tiny model, no Kafka) with a
# topology of two sites and silences.path; a silence of site S2 (POST /v1/silences, admin
# token) while S1 loses traffic and b2 (in S2) spikes:
#   - the token is required; a bad silence is a 422 naming the field;
#   - S1's alerts fire (one site incident); b2's anomaly does not: not in /v1/alerts,
#     /v1/alerts/firing or any incident, and counted as held;
#   - DELETE /v1/silences/{id} expires it while b2's episode is still firing: the alert
#     fires then, and its site's incident opens;
#   - a recurring silence (every day, a window around now) holds b2 too: expiring the first
#     one does not let b2 fire while the recurring one's window lasts; one whose window is
#     later today is pending, with its next window, and holds nothing;
#   - the configuration's silences (silences.file): listed with source config, DELETE is a
#     409; a bad file refuses the reload and keeps them; a good one replaces them; a
#     maintenance one keeps cell a3's steps of its window (the data's time) out of learning
#     (cellcast_silences_maintenance_steps_total counts exactly its 10 steps);
#   - the silences survive a restart (the file), expired, active and recurring ones with
#     their state.
#   usage: test_silences.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/site_feed.sh
. "$(dirname "$0")/../helpers/site_feed.sh"
tiny_daemon_test_init silences

printf '%s\n' cell,site,region a1,S1,R1 a2,S1,R1 a3,S1,R1 b1,S2,R1 b2,S2,R1 b3,S2,R1 >"$TMP/topo.csv"
site_feed_config "$TMP/c.yaml" <<YAML
silences:
  path: "$TMP/silences.json"
  file: "$TMP/cfg-silences.json"
admin:
  token: "s3cret"
YAML
# the configuration's: a maintenance window of cell a3 over data steps 10..19 (02:30 to
# 05:00 on 2026-01-01, the feed's time), and a weekly window of a site S9 (no cell: it holds nothing)
cat >"$TMP/cfg-silences.json" <<'JSON'
{"silences": [
  {"id": "a3-works", "maintenance": true, "matchers": [{"name": "cell", "value": "a3"}],
   "startsAt": "2026-01-01T02:30:00Z", "endsAt": "2026-01-01T05:00:00Z", "comment": "swap"},
  {"id": "s9-tuesdays", "matchers": [{"name": "site", "value": "S9"}],
   "recurrence": {"weekly": [{"days": ["tue"], "start": "02:00", "end": "04:00"}], "timezone": "+01:00"}}
]}
JSON
start_daemon "$TMP/log" health -c "$TMP/c.yaml"
AUTH=(-H 'Authorization: Bearer s3cret' -H 'Content-Type: application/json')

# the two-site feed (tests/helpers/site_feed.sh): S1 all zero at steps 40..47, b2 far above at 44..47
site_feed_write 48

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

# a recurring silence of b2, every day from an hour ago to an hour from now (UTC; it may
# cross midnight), and one of a1 later today (pending)
read -r W0 W1 P0 P1 < <($PY -c '
import time
t = int(time.time()) // 60
f = lambda m: "%02d:%02d" % (m % 1440 // 60, m % 60)
print(f(t - 60), f(t + 60), f(t + 180), f(t + 240))')
rid=$(curl -s "${AUTH[@]}" -d '{"matchers":[{"name":"cell","value":"b2"}],"recurrence":{"weekly":[{"start":"'"$W0"'","end":"'"$W1"'"}]},"comment":"nightly"}' "$U/v1/silences" | $PY -c 'import json,sys; print(json.load(sys.stdin)["silenceID"])')
pid=$(curl -s "${AUTH[@]}" -d '{"matchers":[{"name":"cell","value":"a1"}],"recurrence":{"weekly":[{"start":"'"$P0"'","end":"'"$P1"'"}],"timezone":"UTC"}}' "$U/v1/silences" | $PY -c 'import json,sys; print(json.load(sys.stdin)["silenceID"])')
curl -s "$U/v1/silences" >"$TMP/all"
$PY - "$TMP/all" "$rid" "$pid" <<'PYEOF' || fail "recurring silences: $(cat "$TMP/all")"
import json, sys, time
s = {x["id"]: x for x in json.load(open(sys.argv[1]))["silences"]}
r, p = s[sys.argv[2]], s[sys.argv[3]]
assert r["status"]["state"] == "active" and r["endsAt"].startswith("9999-"), r
assert p["status"]["state"] == "pending", p
nw = p["status"]["nextWindow"]
start = time.mktime(time.strptime(nw["startsAt"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
assert 0 < start - time.time() <= 3 * 3600 + 60, nw
assert r["recurrence"]["weekly"][0]["start"] and len(r["recurrence"]["weekly"]) == 7, r
c = s["cfg-a3-works"]
assert c["source"] == "config" and c["maintenance"] and c["status"]["state"] == "expired", c
t = s["cfg-s9-tuesdays"]
assert t["recurrence"]["timezone"] == "+01:00" and t["status"]["state"] in ("active", "pending"), t
assert all(x["source"] == "api" for k, x in s.items() if not k.startswith("cfg-")), s
PYEOF
code=$(curl -s -o "$TMP/del" -w '%{http_code}' -X DELETE "${AUTH[@]}" "$U/v1/silences/cfg-a3-works")
[ "$code" = 409 ] && grep -q 'silences.file' "$TMP/del" || fail "DELETE of a configuration's silence: $code $(cat "$TMP/del")"
ok "recurring silences: one active around now, one pending with its next window; the configuration's are read-only"

post_until 0 48
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

curl -s "$U/metrics" | grep -q '^cellcast_silences_maintenance_steps_total 10$' || fail "a3's maintenance steps: $(curl -s "$U/metrics" | grep maintenance_steps)"
ok "a maintenance window of the configuration: a3's 10 steps in it were kept out of learning"

curl -s -X DELETE "${AUTH[@]}" "$U/v1/silences/$sid" | grep -q '"state":"expired"' || fail "DELETE did not expire $sid"
sleep 1.5 # the cron lets go what no silence matches any more: the recurring one still does
curl -s "$U/v1/alerts/firing" | grep -q '"cell_id":"b2"' && fail "b2 fires while its recurring silence's window lasts"
curl -s "$U/metrics" | grep -q '^cellcast_silences_held_alerts 1$' || fail "b2 not held by the recurring silence"
curl -s -X DELETE "${AUTH[@]}" "$U/v1/silences/$rid" | grep -q '"state":"expired"' || fail "DELETE did not expire $rid"
for _ in $(seq 50); do
    curl -s "$U/v1/alerts/firing" | grep -q '"cell_id":"b2"' && break
    sleep 0.1
done
curl -s "$U/v1/alerts/firing" | grep -q '"cell_id":"b2"' || fail "b2's alert does not fire after the silence ended"
curl -s "$U/v1/alerts?cell=b2" | grep -q '"state":"firing"' || fail "b2's firing transition is not in /v1/alerts"
curl -s "$U/v1/incidents?state=firing" | grep -q '"group":"S2"' || fail "no S2 incident after the silence ended"
curl -s "$U/metrics" | grep -q '^cellcast_silences_alerts_total{outcome="released"} 1$' || fail "the release is not counted"
ok "the silences expired: b2's still-firing alert fires then, with its incident"

# the configuration's silences at a reload: a bad file refuses it, a good one replaces them
echo '{"silences": [{"id": "x", "matchers": [{"name": "site", "value": "S1"}], "recurrence": {"weekly": [{"start": "25:00", "end": "02:00"}]}}]}' >"$TMP/cfg-silences.json"
code=$(curl -s -o "$TMP/rl" -w '%{http_code}' -X POST "${AUTH[@]}" "$U/v1/admin/reload")
[ "$code" = 422 ] && grep -q 'silences\[0\]: recurrence.weekly\[0\].start' "$TMP/rl" || fail "a bad silences.file: $code $(cat "$TMP/rl")"
curl -s "$U/v1/silences" | grep -q '"cfg-a3-works"' || fail "the configuration's silences were lost with a refused reload"
echo '[{"id": "s2-sundays", "matchers": [{"name": "site", "value": "S2"}], "recurrence": {"weekly": [{"days": ["sun"], "start": "22:00", "end": "03:00"}]}}]' >"$TMP/cfg-silences.json"
kill -HUP "$DPID"
for _ in $(seq 50); do
    curl -s "$U/v1/silences" | grep -q '"cfg-s2-sundays"' && break
    sleep 0.1
done
curl -s "$U/v1/silences" >"$TMP/all"
grep -q '"cfg-s2-sundays"' "$TMP/all" && ! grep -q '"cfg-a3-works"' "$TMP/all" || fail "SIGHUP did not replace the configuration's silences: $(cat "$TMP/all")"
ok "the configuration's silences: a bad file refuses the reload, SIGHUP replaces them"

# a second silence, then a restart: both are there, with their states
curl -s "${AUTH[@]}" -d '{"matchers":[{"name":"cell","value":"a[0-9]+","isRegex":true}],"endsAt":"'$end'"}' "$U/v1/silences" | grep -q silenceID || fail "second silence refused"
kill "$DPID"
wait "$DPID" 2>/dev/null
start_daemon "$TMP/log2" health -c "$TMP/c.yaml"
curl -s "$U/v1/silences" >"$TMP/after"
$PY - "$TMP/after" "$sid" "$rid" "$pid" <<'PYEOF' || fail "silences after a restart: $(cat "$TMP/after")"
import json, sys
s = [x for x in json.load(open(sys.argv[1]))["silences"] if x["source"] == "api"]
st = {x["id"]: x["status"]["state"] for x in s}
assert len(s) == 4 and st.pop(sys.argv[2]) == "expired" and st.pop(sys.argv[3]) == "expired", st
assert st.pop(sys.argv[4]) == "pending" and list(st.values()) == ["active"], st
assert any(m["isRegex"] and m["value"] == "a[0-9]+" for x in s for m in x["matchers"]), s
assert [x for x in s if x["id"] == sys.argv[4]][0]["recurrence"]["weekly"][0]["days"], s
PYEOF
ok "silences survive a restart"

# a silences.file that does not parse stops the start, naming the file and the entry
kill "$DPID"
wait "$DPID" 2>/dev/null
echo '[{"id": "bad id!", "matchers": [{"name": "cell", "value": "x"}], "endsAt": 1767657600}, {"id": "old", "matchers": [{"name": "cell", "value": "x"}], "endsAt": 1600000000}]' >"$TMP/cfg-silences.json"
timeout 20 "$CELLCASTD" -c "$TMP/c.yaml" >"$TMP/log3" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "silences.file $TMP/cfg-silences.json: silences\[0\]: id must be" "$TMP/log3" ||
    fail "a bad silences.file at start: rc $rc, $(tail -3 "$TMP/log3")"
ok "a bad silences.file stops the start with its error"
[ "$FAILS" = 0 ]
