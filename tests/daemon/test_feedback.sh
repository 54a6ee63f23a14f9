#!/bin/bash
# test_feedback.sh — the operator's verdict on an alert, black-box (issue 32, item 5):
# cellcastd (tiny model, no Kafka, snapshots on) gets a cell whose KPIs spike for two steps
# (an anomaly alert), then:
#   - POST /v1/alerts/{id}/feedback needs the admin token (401), a known verdict (422) and a
#     known alert (404); a false_alarm is accepted and names the KPIs whose bar it raised
#     (x1.25);
#   - GET /v1/alerts shows the verdict on the alert, GET /v1/feedback lists it, /metrics
#     counts it; the journal <snapshot.path>.feedback holds one line;
#   - after a restart GET /v1/feedback and /metrics still show it (read from the journal).
#   usage: test_feedback.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/site_feed.sh
. "$(dirname "$0")/../helpers/site_feed.sh"
tiny_daemon_test_init feedback
post_config "$TMP/c.yaml" "$TMP/state.snap" <<YAML
admin:
  token: "s3cret"
$(high_alert_bar)
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"
AUTH=(-H 'Authorization: Bearer s3cret' -H 'Content-Type: application/json')

$PY - "$TMP" <<'PYEOF'
import json, math, sys
S, p0 = 900, 1767225600 // 900
recs = []
for i in range(40):
    v = 50 + 20 * math.sin(i / 6.0)
    k = {"prb": v, "thr": 3 * v, "users": 20 + 5 * math.cos(i / 6.0)}
    if 30 <= i < 32:
        k = {"prb": 100, "thr": 3000, "users": 400}
    recs.append({"cell": "c1", "ts": (p0 + i) * S, "kpis": k})
json.dump(recs, open(sys.argv[1] + "/in.json", "w"))
PYEOF
curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary "@$TMP/in.json" "$U/v1/kpis"
wait_observed c1 $((1767225600 / 900 + 39)) || fail "steps not stepped"
ID=$(curl -s "$U/v1/alerts?kind=anomaly&state=firing" | $PY -c 'import json,sys; a=json.load(sys.stdin)["alerts"]; print(a[0]["id"] if a else "")')
[ -n "$ID" ] || { fail "no anomaly alert: $(curl -s "$U/v1/alerts")"; exit 1; }
FB="$U/v1/alerts/$ID/feedback"

code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{"verdict":"false_alarm"}' "$FB")
[ "$code" = 401 ] || fail "without the token: $code, not 401"
code=$(curl -s -o "$TMP/r422" -w '%{http_code}' "${AUTH[@]}" -d '{"verdict":"maybe"}' "$FB")
[ "$code" = 422 ] && grep -q 'false_alarm or confirmed' "$TMP/r422" || fail "a bad verdict: $code $(cat "$TMP/r422")"
code=$(curl -s -o /dev/null -w '%{http_code}' "${AUTH[@]}" -d '{"verdict":"confirmed"}' "$U/v1/alerts/c1:anomaly:1/feedback")
[ "$code" = 404 ] || fail "an unknown alert: $code, not 404"
ok "the token, a known verdict and a known alert are required"

curl -s -o "$TMP/r" -w '%{http_code}' "${AUTH[@]}" \
    -d '{"verdict":"false_alarm","comment":"planned drive test","user":"noc-1"}' "$FB" >"$TMP/code"
$PY - "$TMP/r" "$ID" <<'PYEOF' && [ "$(cat "$TMP/code")" = 200 ] || fail "POST feedback: $(cat "$TMP/code") $(cat "$TMP/r")"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["alert"] == sys.argv[2] and e["verdict"] == "false_alarm" and e["cell"] == "c1", e
assert e["comment"] == "planned drive test" and e["user"] == "noc-1", e
assert e["kpis"] and set(e["kpis"]) <= {"prb", "thr", "users"} and e["bar"] == 1.25, e
PYEOF
ok "a false alarm is accepted and raises the bar of the alert's KPIs"

check_shown() {
    curl -s "$U/v1/feedback" >"$TMP/fb"
    $PY - "$TMP/fb" "$ID" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["total"] == 1 and d["feedback"][0]["alert"] == sys.argv[2], d
assert d["feedback"][0]["verdict"] == "false_alarm" and d["feedback"][0]["user"] == "noc-1", d
PYEOF
}
curl -s "$U/v1/alerts?kind=anomaly" >"$TMP/alerts"
$PY - "$TMP/alerts" "$ID" <<'PYEOF' || fail "GET /v1/alerts: $(head -c 1000 "$TMP/alerts")"
import json, sys
a = [x for x in json.load(open(sys.argv[1]))["alerts"] if x["id"] == sys.argv[2]]
assert a and all(x["feedback"]["verdict"] == "false_alarm" for x in a), a
assert a[0]["feedback"]["comment"] == "planned drive test", a[0]
PYEOF
check_shown || fail "GET /v1/feedback: $(cat "$TMP/fb")"
curl -s "$U/metrics" | grep -q '^cellcast_alert_feedback_total{verdict="false_alarm"} 1$' || fail "not counted"
[ "$(wc -l <"$TMP/state.snap.feedback")" = 1 ] || fail "journal: $(cat "$TMP/state.snap.feedback")"
ok "the verdict is on the alert, in GET /v1/feedback, counted and journaled"

stop_daemon || fail "cellcastd did not stop cleanly"
start_daemon "$TMP/log2" health -c "$TMP/c.yaml"
check_shown || fail "after a restart GET /v1/feedback: $(cat "$TMP/fb")"
curl -s "$U/metrics" | grep -q '^cellcast_alert_feedback_total{verdict="false_alarm"} 1$' || fail "not counted after a restart"
ok "after a restart the verdict is read back from the journal"

[ "$FAILS" = 0 ]
