#!/bin/bash
# test_incidents_hold.sh — the incidents' resolve hold, black-box (issue 32): starts cellcastd
# (tiny model, no Kafka) with a topology of two sites of three cells and
# incidents.resolve_hold_steps 4, feeds it through POST /v1/kpis: every cell of site S1
# drops to zero at steps 40..47 (a site outage: its all_zero alerts, one site incident), the
# rows recover at 48 and the alerts resolve (in the flush of step 50); at step 53 cell a1
# sends a PRB past its bound (alerts.kpis prb.max) for one step: a bounds alert, which alone
# the paging rule would hold.
# Checks:
#   - while the hold runs the incident stays firing, with no firing alert
#     (cellcast_incidents_resolving 1), and the bounds alert joins it again: one incident of
#     S1, the same id, its alerts the outage's and the bound's
#     (cellcast_incidents_hold_total{outcome="rejoined"} 1);
#   - once the data pass the hold (4 steps after the bound's alert resolved) it is resolved,
#     end_time = the time its last alert resolved (GET /v1/alerts), not the hold's end
#     (outcome="expired" 1, resolving 0).
#   usage: test_incidents_hold.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/site_feed.sh
. "$(dirname "$0")/../helpers/site_feed.sh"
tiny_daemon_test_init incidents_hold # MODEL: F=3 (prb,thr,users), HZ=6, S=900

site_feed_topology
post_config "$TMP/c.yaml" "" <<YAML
topology:
  path: "$TMP/topo.csv"
incidents:
  resolve_hold_steps: 4
YAML
high_alert_bar "zero_steps: 3" "kpis:" '  prb.min: "0"' '  prb.max: "120"' >>"$TMP/c.yaml"
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

# steps 0..69: the wave of tests/helpers/site_feed.sh (posted by its post_until), without b2's
# spike; S1 all zero at 40..47; a1's PRB 150 (past prb.max) at step 53
$PY - "$TMP" <<'PYEOF'
import json, math, sys
tmp = sys.argv[1]
S, p0 = 900, 1767225600 // 900
cells = ["a1", "a2", "a3", "b1", "b2", "b3"]
for i in range(70):
    recs = []
    for j, c in enumerate(cells):
        v = 50 + 20 * math.sin((i + j) / 6.0)
        k = {"prb": v, "thr": 3 * v, "users": 20 + 5 * math.cos((i + j) / 6.0)}
        if c[0] == "a" and 40 <= i < 48:
            k = {"prb": 0, "thr": 0, "users": 0}
        if c == "a1" and i == 53:
            k["prb"] = 150
        recs.append({"cell": c, "ts": (p0 + i) * S, "kpis": k})
    json.dump(recs, open(f"{tmp}/in{i:02d}.json", "w"))
PYEOF
metric() { curl -s "$U/metrics" | grep "^$1 " | awk '{print $2}'; }

post_until 0 48
for _ in $(seq 50); do
    curl -s "$U/v1/incidents?site=S1" >"$TMP/s1a"
    grep -q '"scope":"site"' "$TMP/s1a" && break
    sleep 0.1
done
s1id=$(grep -o '"id":"site:S1:[0-9]*"' "$TMP/s1a" | head -1)
[ -n "$s1id" ] || fail "no site incident of S1's outage: $(head -c 800 "$TMP/s1a")"

# the rows recover at 48 (the all_zero alerts resolve at 50: the hold through 54), the bound
# is crossed at 53: the alert joins the incident again
post_until 48 51
for _ in $(seq 50); do
    [ "$(metric cellcast_incidents_resolving)" = 1 ] && break
    sleep 0.1
done
[ "$(metric cellcast_incidents_resolving)" = 1 ] ||
    fail "not in the hold after the outage: $(curl -s "$U/v1/incidents?site=S1" | head -c 1200)"
post_until 51 54
for _ in $(seq 50); do
    curl -s "$U/v1/incidents?site=S1" >"$TMP/s1b"
    grep -q '"a1:bounds:' "$TMP/s1b" && break
    sleep 0.1
done
curl -s "$U/v1/alerts?limit=1000" >"$TMP/alerts1"
$PY - "$TMP/s1b" "$TMP/alerts1" "$s1id" <<'PYEOF' || fail "the bound's alert did not join S1's incident in the hold: $(head -c 1500 "$TMP/s1b")"
import json, sys
inc = json.load(open(sys.argv[1]))["incidents"]
alerts = json.load(open(sys.argv[2]))["alerts"]
want_id = sys.argv[3].split('"')[3]
assert len(inc) == 1 and inc[0]["id"] == want_id, [i["id"] for i in inc]
i = inc[0]
bounds = {a["id"] for a in alerts if a["cell_id"] == "a1" and a["reason"] == "bounds"}
assert bounds and bounds <= set(i["alerts"]), (bounds, i["alerts"])
assert any(a.endswith("all_zero:" + str(1767225600 // 900 + 40)) for a in i["alerts"]), i["alerts"]
assert i["state"] == "firing" and i["end_time"] is None, i
PYEOF
[ "$(metric 'cellcast_incidents_hold_total{outcome="rejoined"}')" = 1 ] ||
    fail "hold rejoined: $(curl -s "$U/metrics" | grep incidents_hold)"
ok "an alert of the site in the resolve hold joins the outage's incident ($s1id)"

# the bound's alert resolves (at 56): the incident holds again, firing
post_until 54 58
curl -s "$U/v1/incidents?site=S1" >"$TMP/s1c"
$PY - "$TMP/s1c" <<'PYEOF' || fail "not firing in the hold: $(head -c 1200 "$TMP/s1c")"
import json, sys
inc = json.load(open(sys.argv[1]))["incidents"]
assert len(inc) == 1 and inc[0]["state"] == "firing" and not inc[0]["firing_alerts"], inc
PYEOF
[ "$(metric cellcast_incidents_resolving)" = 1 ] ||
    fail "resolving: $(curl -s "$U/metrics" | grep incidents_resolving)"
ok "in the hold: firing, no firing alert, cellcast_incidents_resolving 1"

post_until 55 70
for _ in $(seq 50); do
    curl -s "$U/v1/incidents?site=S1" >"$TMP/s1d"
    grep -q '"state":"resolved"' "$TMP/s1d" && break
    sleep 0.1
done
curl -s "$U/v1/alerts?limit=1000" >"$TMP/alerts2"
$PY - "$TMP/s1d" "$TMP/alerts2" <<'PYEOF' || fail "resolved after the hold: $(head -c 1500 "$TMP/s1d")"
import json, sys
inc = json.load(open(sys.argv[1]))["incidents"]
alerts = json.load(open(sys.argv[2]))["alerts"]
assert len(inc) == 1 and inc[0]["state"] == "resolved", inc
i = inc[0]
# end_time: its last alert's resolution, long before the data reached step 69
last = max(a["time"] for a in alerts if a["state"] == "resolved" and a["id"] in i["alerts"])
assert i["end_time"] == last, (i["end_time"], last)
assert "; resolved " in i["summary"], i["summary"]
PYEOF
[ "$(metric 'cellcast_incidents_hold_total{outcome="expired"}')" = 1 ] &&
    [ "$(metric cellcast_incidents_resolving)" = 0 ] ||
    fail "hold expired: $(curl -s "$U/metrics" | grep -E 'incidents_hold|incidents_resolving')"
ok "at the hold's end: resolved, end_time = its last alert's resolution"

[ "$FAILS" = 0 ]
