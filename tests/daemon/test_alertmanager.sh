#!/bin/bash
# test_alertmanager.sh — incidents sent to the REAL Alertmanager (issue 32, item 6): starts
# prometheus-alertmanager on loopback (no clustering, a temporary storage, one route to a
# webhook receiver that is a small python server recording every notification), adds an
# Alertmanager silence on site S2, then starts cellcastd (tiny model, no Kafka) with
# alertmanager.urls pointing at it and feeds two sites through POST /v1/kpis, as
# tests/daemon/test_incidents.sh does: every cell of S1 drops to zero for 8 steps, cell b2 of S2
# spikes alone. Checks:
#   - the S1 site incident appears in Alertmanager (GET /api/v2/alerts) with its labels
#     (alertname, incident, scope, site, region, severity, instance), annotations, startsAt
#     and a generatorURL to the dashboard, active, and the webhook receives it firing;
#   - with alertmanager.send_cell_alerts, the cells' alerts are there too (CellcastAlert,
#     with cell, site, kind, reason, severity), and resolve with the cells;
#   - it is resent while firing (cellcast_alertmanager_sent_total grows, resend_s 1);
#   - b2's incident is in Alertmanager, suppressed by the silence, and the webhook receives
#     nothing of site S2;
#   - once the cells recover the incident resolves: gone from GET /api/v2/alerts (endsAt in
#     the past), the webhook receives it resolved; nothing failed or was dropped;
#   - an unreachable Alertmanager is retried and its alerts dropped, counted;
#   - an operator's topology column named as Alertmanager refuses (vendor-name) is not sent:
#     every label name is [a-zA-Z_][a-zA-Z0-9_]*.
# Skips (77) when /usr/bin/prometheus-alertmanager is missing, unless CI=1.
#   usage: test_alertmanager.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
AM=${ALERTMANAGER:-/usr/bin/prometheus-alertmanager}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/site_feed.sh
. "$(dirname "$0")/../helpers/site_feed.sh"
if [ ! -x "$AM" ]; then
    [ "${CI:-}" = 1 ] && { echo "FAIL: $AM missing (apt-get install prometheus-alertmanager; .ci/deps.sh)"; exit 1; }
    echo "SKIP: $AM missing (apt-get install prometheus-alertmanager)"
    exit 77
fi
tiny_daemon_test_init alertmanager

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# the webhook receiver: one line of JSON per notification
cat >"$TMP/hook.py" <<'PYEOF'
import http.server, sys
out, portfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "ab") as f:
            f.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(portfile + ".tmp", "w").write(str(s.server_address[1])); __import__("os").rename(portfile + ".tmp", portfile)
s.serve_forever()
PYEOF
: >"$TMP/hook.jsonl"
$PY "$TMP/hook.py" "$TMP/hook.jsonl" "$TMP/hook.port" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$TMP/hook.port" ] && break; sleep 0.05; done
HOOK=$(cat "$TMP/hook.port")

AMPORT=$(free_port)
cat >"$TMP/am.yml" <<YAML
route:
  receiver: hook
  group_by: [incident, alert]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:$HOOK/
        send_resolved: true
YAML
"$AM" --config.file="$TMP/am.yml" --storage.path="$TMP/am" --cluster.listen-address= \
    --web.listen-address="127.0.0.1:$AMPORT" >"$TMP/am.log" 2>&1 &
PIDS+=($!)
AMU="http://127.0.0.1:$AMPORT"
for _ in $(seq 200); do curl -sf "$AMU/-/ready" >/dev/null && break; sleep 0.05; done
curl -sf "$AMU/-/ready" >/dev/null || { cat "$TMP/am.log"; fail "alertmanager did not start"; exit 1; }

# an Alertmanager silence on site S2, for an hour
SIL=$($PY - <<PYEOF
import json, datetime as dt
now = dt.datetime.now(dt.timezone.utc)
print(json.dumps({"matchers": [{"name": "site", "value": "S2", "isRegex": False, "isEqual": True}],
  "startsAt": now.isoformat(), "endsAt": (now + dt.timedelta(hours=1)).isoformat(),
  "createdBy": "test", "comment": "planned work on S2"}))
PYEOF
)
SID=$(curl -s -H 'Content-Type: application/json' -d "$SIL" "$AMU/api/v2/silences" | $PY -c 'import json,sys; print(json.load(sys.stdin)["silenceID"])')
[ -n "$SID" ] || fail "no Alertmanager silence"

site_feed_topology
# an operator's column whose name Alertmanager <= 0.26 refuses as a label name (it answers 400
# to the whole batch): it stays in cellcast's labels, and is not sent
sed -i '1s/$/,vendor-name/; 2,$s/$/,Z\xc3\xbcrich \\ Nord/' "$TMP/topo.csv"
site_feed_config "$TMP/c.yaml" <<YAML
alertmanager:
  urls: ["$AMU", "http://127.0.0.1:1/unreachable"]
  resend_s: 1
  retries: 1
  send_cell_alerts: true
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

site_feed_write 60
metric() { curl -s "$U/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

post_until 0 48
# the S1 incident firing in Alertmanager, and b2's there, suppressed
check_firing() {
    $PY - "$TMP/am_alerts" "$SID" "$PORT" <<'PYEOF'
import json, sys
alerts, sid, port = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
s1 = [a for a in alerts if a["labels"].get("incident", "").startswith("site:S1:")
      and a["labels"].get("scope") == "site"]
s2 = [a for a in alerts if a["labels"].get("site") == "S2"]
assert len(s1) == 1, ("S1", alerts)
a = s1[0]
l = a["labels"]
assert l["alertname"] == "CellcastIncident" and l["site"] == "S1" and l["region"] == "R1", l
assert l["severity"] == "critical" and l["group"] == "S1", l
assert l["instance"] == f"127.0.0.1:{port}", l
assert "vendor-name" not in l and all(k.replace("_", "a").isalnum() and k.isascii() and not k[0].isdigit() for k in l), l
assert a["annotations"]["summary"].startswith("site S1: 3 of 3 cells"), a["annotations"]
assert "a1" in a["annotations"]["description"], a["annotations"]
assert a["startsAt"].startswith("2026-01-01T10:00:00"), a["startsAt"]
assert a["generatorURL"] == f"http://127.0.0.1:{port}/#/incidents/" + l["incident"].replace(":", "%3A"), a["generatorURL"]
assert a["status"]["state"] == "active", a["status"]
assert s2 and all(x["status"]["state"] == "suppressed" and sid in x["status"]["silencedBy"] for x in s2), s2
assert any(x["labels"].get("cell") == "b2" for x in s2), s2
cell = [x for x in alerts if x["labels"]["alertname"] == "CellcastAlert" and x["labels"]["cell"] == "a1"]
assert cell and all(x["labels"]["site"] == "S1" and x["labels"]["kind"] in ("anomaly", "data_quality") for x in cell), cell
assert any(x["labels"]["reason"] == "all_zero" and x["labels"]["severity"] == "critical" for x in cell), cell
assert all(x["generatorURL"] == f"http://127.0.0.1:{port}/#/cells/a1" for x in cell), cell
PYEOF
}
for _ in $(seq 100); do
    curl -s "$AMU/api/v2/alerts" >"$TMP/am_alerts"
    check_firing 2>/dev/null && break
    sleep 0.1
done
check_firing && ok "the S1 site incident is active in Alertmanager; b2's is suppressed by its silence" ||
    fail "Alertmanager's alerts: $(head -c 2000 "$TMP/am_alerts")"
for _ in $(seq 100); do
    grep -q '"status":"firing".*site:S1:' "$TMP/hook.jsonl" && break
    sleep 0.1
done
grep -q '"status":"firing".*site:S1:' "$TMP/hook.jsonl" && ok "the webhook receiver got the S1 incident firing" ||
    fail "no firing notification: $(head -c 1000 "$TMP/hook.jsonl")"

sent1=$(metric cellcast_alertmanager_sent_total)
sleep 2.5
sent2=$(metric cellcast_alertmanager_sent_total)
[ -n "$sent1" ] && [ "$sent2" -gt "$sent1" ] && ok "firing incidents are resent ($sent1 -> $sent2 alerts sent)" ||
    fail "no resend: sent_total $sent1 -> $sent2"

post_until 48 60
gone() {
    $PY - "$TMP/am_alerts" <<'PYEOF'
import json, sys
alerts = json.load(open(sys.argv[1]))
assert not [a for a in alerts if a["labels"].get("site") == "S1"], alerts
PYEOF
}
for _ in $(seq 100); do
    curl -s "$AMU/api/v2/alerts" >"$TMP/am_alerts"
    gone 2>/dev/null && grep -q '"status":"resolved".*site:S1:' "$TMP/hook.jsonl" && break
    sleep 0.1
done
gone && ok "the S1 incident resolved in Alertmanager (no longer among its alerts)" ||
    fail "S1 still in Alertmanager: $(head -c 1500 "$TMP/am_alerts")"
grep -q '"status":"resolved".*site:S1:' "$TMP/hook.jsonl" && ok "the webhook receiver got it resolved" ||
    fail "no resolved notification: $(tail -c 1500 "$TMP/hook.jsonl")"
grep -q '"S2"' "$TMP/hook.jsonl" && fail "a notification of silenced S2 went out: $(grep S2 "$TMP/hook.jsonl" | head -c 800)" ||
    ok "the silence held S2's notification"

# the unreachable URL: every request failed, its alerts dropped after one retry
sleep 3
curl -s "$U/metrics" >"$TMP/metrics"
failed=$(awk '$1 == "cellcast_alertmanager_failed_total" { print $2 }' "$TMP/metrics")
dropped=$(awk '$1 == "cellcast_alertmanager_dropped_total" { print $2 }' "$TMP/metrics")
[ "${failed:-0}" -ge 2 ] && [ "${dropped:-0}" -ge 1 ] && ok "an unreachable Alertmanager: $failed failed POSTs, $dropped alerts dropped" ||
    fail "unreachable URL not counted: $(grep alertmanager "$TMP/metrics")"
grep -q 'alertmanager.*127.0.0.1:1/unreachable.*dropped' "$TMP/log" || fail "dropped alerts not logged"

[ "$FAILS" = 0 ]
