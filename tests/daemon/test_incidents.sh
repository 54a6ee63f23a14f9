#!/bin/bash
# test_incidents.sh — alerts grouped into incidents by site, black-box (issue 32): starts
# cellcastd (tiny model, no Kafka) with a topology file of two sites of three cells
# (topology.path), feeds them through POST /v1/kpis (tests/helpers/site_feed.sh, the
# configuration and feed it shares with the other alert tests): every cell of S1 drops to zero
# for 8 steps (a site-wide outage: transport loss), then recovers; cell b2 of site S2
# spikes for 4 steps alone. Checks:
#   - GET /v1/cells?site=S1 lists a1..a3 with their labels; ?region= and ?sector= filter;
#   - every alert carries its cell's labels (GET /v1/alerts);
#   - the outage is one site incident (3 of 3 cells, critical), not one per cell, and the
#     spike one cell incident of S2 (4 steps far past the bar: it meets the paging rule,
#     incidents.cell_persist_*); both resolve once their cells' alerts resolve;
#   - cells together as evidence (incidents.evidence_*): the three cells of S1 are at 2 of
#     zero_steps 3 all-zero steps at step 41, past half their bar, which opens the site
#     incident there (id site:S1:<step 41>), one step before all_zero fires (step 42); b2's
#     lone spike gets no evidence member (a lone cell needs its own alert); a transport loss
#     of S2 (no records): the cells' silence past half of missing_after_s at one step opens
#     nothing (incidents.evidence_missing_steps 2; refused, counted), at the next it opens
#     S2's incident before any missing alert, and the missing alerts join it; not while a
#     silence would hold those alerts;
#   - the incident's alert ids are the alerts of /v1/alerts; the incidents' metrics (the
#     paging rule's below_paging count and held gauge included);
#   - a topology file changed and reloaded (SIGHUP) moves a cell; a bad one is refused and
#     counted, the previous one kept.
#   usage: test_incidents.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/site_feed.sh
. "$(dirname "$0")/../helpers/site_feed.sh"
tiny_daemon_test_init incidents

# two sites of three cells, one region, with coordinates and a vendor: the checks below
# read the labels, and the bad line appended at the end is line 9
cat >"$TMP/topo.csv" <<'CSV'
# two sites of three cells, one region
cell,site,region,sector,lat,lon,vendor
a1,S1,R1,1,41.38,2.17,acme
a2,S1,R1,2,41.38,2.17,acme
a3,S1,R1,3,41.38,2.17,acme
b1,S2,R1,1,41.40,2.19,acme
b2,S2,R1,2,41.40,2.19,acme
b3,S2,R1,3,41.40,2.19,acme
CSV
# resolve_hold_steps 0: the feed ends 12 steps after the outage, inside the default hold;
# this test checks the resolutions (test_incidents_hold.sh checks the hold)
site_feed_config "$TMP/c.yaml" <<'YAML'
admin:
  token: "s3cret"
incidents:
  resolve_hold_steps: 0
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

# the two-site feed (tests/helpers/site_feed.sh) at steps 0..59: S1 all zero at 40..47, b2
# far above at 44..47, then the recovery
site_feed_write 60

# topology in the API
curl -s "$U/v1/cells?site=S1" >"$TMP/cells_s1" # no cell yet: an empty page
post_until 0 10
curl -s "$U/v1/cells?site=S1" >"$TMP/cells_s1"
$PY - "$TMP/cells_s1" <<'PYEOF' || fail "GET /v1/cells?site=S1: $(head -c 400 "$TMP/cells_s1")"
import json, sys
d = json.load(open(sys.argv[1]))
ids = [c["id"] for c in d["cells"]]
assert ids == ["a1", "a2", "a3"] and d["total"] == 3, ids
assert d["cells"][1]["labels"] == {"site": "S1", "region": "R1", "sector": "2", "vendor": "acme"}, d["cells"][1]
PYEOF
[ "$(curl -s "$U/v1/cells?region=R1" | grep -o '"id"' | wc -l)" = 6 ] || fail "?region=R1 is not the 6 cells"
[ "$(curl -s "$U/v1/cells?sector=2&site=S2" | grep -o '"id":"[a-z0-9]*"')" = '"id":"b2"' ] || fail "?sector=2&site=S2 is not b2"
ok "GET /v1/cells filters by site, region, sector and shows the labels"

# the outage and the spike, then the recovery
post_until 10 48
for _ in $(seq 50); do
    curl -s "$U/v1/incidents?state=firing" >"$TMP/firing"
    grep -q '"scope":"site"' "$TMP/firing" && grep -q '"group":"S2"' "$TMP/firing" && break
    sleep 0.1
done
curl -s "$U/v1/alerts?limit=1000" >"$TMP/alerts1"
$PY - "$TMP/firing" "$TMP/alerts1" "$SITE_FEED_P0" <<'PYEOF' || fail "firing incidents: $(head -c 1500 "$TMP/firing")"
import json, sys
inc = json.load(open(sys.argv[1]))["incidents"]
alerts = json.load(open(sys.argv[2]))["alerts"]
ids = {a["id"] for a in alerts}
for a in alerts:
    want = "S1" if a["cell_id"][0] == "a" else "S2"
    assert a["labels"]["site"] == want and a["labels"]["region"] == "R1", a
s1 = [i for i in inc if i["group"] == "S1"]
s2 = [i for i in inc if i["group"] == "S2"]
assert len(s1) == 1, ("the outage is not one incident", s1)
assert len(inc) == 2, [i["id"] for i in inc]
s1, s2 = s1[0], s2[0]
assert s1["scope"] == "site" and sorted(s1["cells"]) == ["a1", "a2", "a3"], s1
assert s1["cells_total"] == 3 and s1["severity"] == "critical", s1
assert s1["summary"].startswith("site S1: 3 of 3 cells"), s1["summary"]
p0 = int(sys.argv[3])
assert s1["id"] == f"site:S1:{p0 + 41}", s1["id"]  # the evidence, one step before all_zero
evidence = [a for a in s1["alerts"] if ":evidence:" in a]
assert sorted(evidence) == [f"a{i}:evidence:all_zero:{p0 + 41}" for i in (1, 2, 3)], s1["alerts"]
assert sorted(a for a in s1["alerts"] if a not in evidence) == [
    f"a{i}:all_zero:{p0 + 40}" for i in (1, 2, 3)], s1["alerts"]  # all_zero's onset: step 40
assert s2["scope"] == "cell" and s2["cells"] == ["b2"], s2
assert s2["alerts"] == [a for a in s2["alerts"] if ":evidence:" not in a], s2
assert s2["summary"].startswith("cell b2 (site S2): "), s2["summary"]
for i in (s1, s2):
    assert i["state"] == "firing" and i["end_time"] is None
    assert {a for a in i["alerts"] if ":evidence:" not in a} <= ids, (i["alerts"], ids)
    assert i["firing_alerts"], i
print(s1["summary"]); print(s2["summary"])
PYEOF
n_alerts=$(grep -o '"state":"firing"' "$TMP/alerts1" | wc -l)
ok "site outage: one site incident; lone spike: one cell incident ($n_alerts alert firings)"

post_until 48 60
for _ in $(seq 50); do
    curl -s "$U/v1/incidents" >"$TMP/all"
    curl -s "$U/v1/incidents?state=firing" | grep -q '"incidents":\[\]' && break
    sleep 0.1
done
$PY - "$TMP/all" <<'PYEOF' || fail "resolved incidents: $(head -c 1500 "$TMP/all")"
import json, sys
inc = json.load(open(sys.argv[1]))["incidents"]
assert len(inc) == 2, [i["id"] for i in inc]
for i in inc:
    assert i["state"] == "resolved" and i["end_time"] and not i["firing_alerts"], i
    assert "; resolved " in i["summary"], i["summary"]
PYEOF
curl -s "$U/v1/incidents?scope=site&state=resolved" | grep -q '"total":1' || fail "?scope=site&state=resolved is not the one site incident"
curl -s "$U/metrics" >"$TMP/metrics"
grep -q '^cellcast_incidents_transitions_total{transition="opened"} 2$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_transitions_total{transition="resolved"} 2$' "$TMP/metrics" &&
    grep -q '^cellcast_topology_cells 6$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_evidence_total{what="opened"} 1$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_evidence_total{what="members"} 3$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_alerts_total{outcome="below_paging"} [0-9][0-9]*$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_profile_alerts_total{outcome="held"} [0-9][0-9]*$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_stuck_alerts_total{outcome="held"} [0-9][0-9]*$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_pair_refused_total [0-9][0-9]*$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_persist_other_kpi_total [0-9][0-9]*$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_evidence_total{what="refused"} 0$' "$TMP/metrics" &&
    grep -q '^cellcast_incidents_held 0$' "$TMP/metrics" ||
    fail "metrics: $(grep -E 'incidents|topology' "$TMP/metrics")"
ok "both incidents resolve with their last alerts"

[ "$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/incidents?scope=planet")" = 422 ] || fail "?scope=planet not refused"

# a transport loss of S2: b1..b3 send nothing after step 59 while S1 goes on. At step 61 they
# are 2 steps silent, past half of missing_after_s (3 steps), at one step: too few; at step 62
# the second step of their silence opens S2's site incident, before any missing alert; the
# missing alerts join it
post_a() { # steps [from, to) of S1's cells only
    local i
    for ((i = $1; i < $2; i++)); do
        $PY -c "import json, math; print(json.dumps([{'cell': c, 'ts': ($SITE_FEED_P0 + $i) * 900,
            'kpis': {'prb': 50 + 20 * math.sin(($i + j) / 6.0), 'thr': 150 + 60 * math.sin(($i + j) / 6.0),
                     'users': 20 + 5 * math.cos(($i + j) / 6.0)}} for j, c in enumerate(['a1', 'a2', 'a3'])]))" |
            curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary @- "$U/v1/kpis"
    done
    wait_observed a3 $((SITE_FEED_P0 + $2 - 1)) || fail "S1's steps up to $2 not stepped"
}
# first under a silence of S2's missing alerts: its cells' silence does not count either
end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
sid=$(curl -s -H 'Authorization: Bearer s3cret' -H 'Content-Type: application/json' \
    -d '{"matchers":[{"name":"site","value":"S2"},{"name":"reason","value":"missing"}],"endsAt":"'$end'"}' \
    "$U/v1/silences" | $PY -c 'import json,sys; print(json.load(sys.stdin)["silenceID"])')
[ -n "$sid" ] || fail "no silence"
post_a 60 62
sleep 2.5 # two ticks of the cron, which judges the silence
curl -s "$U/v1/incidents?state=firing&site=S2" | grep -q '"group":"S2"' &&
    fail "an S2 incident on the evidence of silenced cells: $(curl -s "$U/v1/incidents?site=S2" | head -c 600)"
curl -s -X DELETE -H 'Authorization: Bearer s3cret' "$U/v1/silences/$sid" | grep -q '"state":"expired"' ||
    fail "the silence did not expire"
# unsilenced, the silence is one step past the share: too few (incidents.evidence_missing_steps
# 2: one late row makes as much), refused and counted, no incident
for _ in $(seq 50); do
    curl -s "$U/metrics" | grep -q '^cellcast_incidents_evidence_total{what="refused"} [1-9]' && break
    sleep 0.1
done
curl -s "$U/metrics" | grep -q '^cellcast_incidents_evidence_total{what="refused"} [1-9]' ||
    fail "one step of silence not refused: $(curl -s "$U/metrics" | grep evidence_total)"
curl -s "$U/v1/incidents?state=firing&site=S2" | grep -q '"group":"S2"' &&
    fail "an S2 incident on one step of silence: $(curl -s "$U/v1/incidents?site=S2" | head -c 600)"
# the next step: the silence's second step opens S2's site incident, before any missing alert
# (missing_after_s); at the step after the missing alerts join it
post_a 62 63
for _ in $(seq 50); do
    curl -s "$U/v1/incidents?state=firing&site=S2" >"$TMP/s2"
    grep -q ':evidence:missing:' "$TMP/s2" && break
    sleep 0.1
done
curl -s "$U/v1/alerts?limit=1000" >"$TMP/alerts2"
$PY - "$TMP/s2" "$TMP/alerts2" <<'PYEOF' || fail "transport loss on evidence: $(head -c 1200 "$TMP/s2")"
import json, sys
inc = json.load(open(sys.argv[1]))["incidents"]
assert len(inc) == 1 and inc[0]["scope"] == "site" and sorted(inc[0]["cells"]) == ["b1", "b2", "b3"], inc
assert all(":evidence:missing:" in a for a in inc[0]["alerts"]), inc[0]["alerts"]
assert inc[0]["summary"].startswith("site S2: 3 of 3 cells stopped reporting"), inc[0]["summary"]
missing = [a for a in json.load(open(sys.argv[2]))["alerts"] if a["reason"] == "missing"]
assert not missing, missing  # no alert yet: the evidence alone
PYEOF
s2id=$(grep -o '"id":"site:S2:[0-9]*"' "$TMP/s2")
post_a 63 65
for _ in $(seq 50); do
    curl -s "$U/v1/incidents?state=firing&site=S2" >"$TMP/s2b"
    grep -q 'b3:missing:' "$TMP/s2b" && break
    sleep 0.1
done
grep -q "$s2id" "$TMP/s2b" && grep -q 'b1:missing:' "$TMP/s2b" && grep -q 'b3:missing:' "$TMP/s2b" ||
    fail "the missing alerts did not join the evidence's incident $s2id: $(head -c 1200 "$TMP/s2b")"
ok "a transport loss: one step of silence refused, the second opens its site incident before the missing alerts, which join it"

# reload: b1 moves to S1; then a file that does not parse keeps it
sed -i 's/^b1,S2,/b1,S1,/' "$TMP/topo.csv"
kill -HUP "$DPID"
for _ in $(seq 50); do
    [ "$(curl -s "$U/v1/cells?site=S1" | grep -o '"total":[0-9]*')" = '"total":4' ] && break
    sleep 0.1
done
[ "$(curl -s "$U/v1/cells?site=S1" | grep -o '"total":[0-9]*')" = '"total":4' ] || fail "SIGHUP: b1 not in S1"
echo 'b9,S3,R1,1,999,0,x' >>"$TMP/topo.csv"
kill -HUP "$DPID"
for _ in $(seq 50); do
    curl -s "$U/metrics" | grep -q '^cellcast_topology_errors_total 1$' && break
    sleep 0.1
done
curl -s "$U/metrics" | grep -q '^cellcast_topology_errors_total 1$' || fail "a bad topology is not counted"
grep -q 'topo.csv:9: lat .999. is not a number' "$TMP/log" || fail "the bad line is not named in the log"
[ "$(curl -s "$U/v1/cells?site=S1" | grep -o '"total":[0-9]*')" = '"total":4' ] || fail "a bad topology did not keep the previous one"
ok "topology reloaded on SIGHUP; a bad file refused, counted and the previous one kept"

[ "$FAILS" = 0 ]
