#!/bin/bash
# test_msg_labels.sh — a cell's labels from fields of its KPI messages (ingest.labels, issue
# 32), black-box: cellcastd (tiny model, no Kafka) with ingest.labels site <- site_id,
# region <- region_id, vendor <- vendor and a topology file that lists only x1 (site FILE);
# the records of m1, m2 and x1 carry site_id MS-1, region_id R-7, vendor acme. Checks:
#   - GET /v1/cells?site=MS-1 lists m1 and m2 with the messages' labels; x1 is in site FILE
#     (the file's label wins) with the messages' vendor;
#   - m1's lone spike alerts with its labels (GET /v1/alerts) and is an incident of site
#     MS-1 whose cells_total (2) the messages gave;
#   - a site_id of 100 bytes is refused and counted, m2 keeps MS-1; a record without the
#     field leaves the label; a SIGHUP keeps the labels.
#   usage: test_msg_labels.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/site_feed.sh
. "$(dirname "$0")/../helpers/site_feed.sh"
tiny_daemon_test_init msg_labels

printf 'cell,site\nx1,FILE\n' >"$TMP/topo.csv"
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
  labels:
    site: site_id
    region: region_id
    vendor: vendor
snapshot:
  path: ""
topology:
  path: "$TMP/topo.csv"
$(high_alert_bar)
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

# steps 0..39: a smooth wave per cell, labels on every record but m2's after step 5 (the
# label stays); m1 far above at 30..33; at step 20 m2's site_id is 100 bytes (refused)
$PY - "$TMP" <<'PYEOF'
import json, math, sys
tmp = sys.argv[1]
S, p0 = 900, 1767225600 // 900
for i in range(40):
    recs = []
    for j, c in enumerate(["m1", "m2", "x1"]):
        v = 50 + 20 * math.sin((i + j) / 6.0)
        r = {"cell": c, "ts": (p0 + i) * S, "prb": v, "thr": 3 * v,
             "users": 20 + 5 * math.cos((i + j) / 6.0)}
        if c == "m1" and 30 <= i < 34:
            r.update(prb=100, thr=3000, users=400)
        if c != "m2" or i < 5:
            r.update(site_id="MS-1", region_id="R-7", vendor="acme")
        if c == "m2" and i == 20:
            r["site_id"] = "S" * 100
        recs.append(r)
    json.dump(recs, open(f"{tmp}/in{i:02d}.json", "w"))
PYEOF
for ((i = 0; i < 40; i++)); do
    curl -s -o /dev/null -H 'Content-Type: application/json' \
        --data-binary "@$TMP/in$(printf %02d "$i").json" "$U/v1/kpis"
done
wait_observed x1 $((1767225600 / 900 + 39)) || fail "steps not stepped"

curl -s "$U/v1/cells?site=MS-1" >"$TMP/cells"
curl -s "$U/v1/cells?site=FILE" >"$TMP/cells_file"
$PY - "$TMP/cells" "$TMP/cells_file" <<'PYEOF' || fail "labels from messages: $(head -c 600 "$TMP/cells") $(head -c 300 "$TMP/cells_file")"
import json, sys
d = json.load(open(sys.argv[1]))
ids = sorted(c["id"] for c in d["cells"])
assert ids == ["m1", "m2"], ids
for c in d["cells"]:
    assert c["labels"] == {"site": "MS-1", "region": "R-7", "vendor": "acme"}, c
f = json.load(open(sys.argv[2]))["cells"]
assert [c["id"] for c in f] == ["x1"], f
assert f[0]["labels"] == {"site": "FILE", "region": "R-7", "vendor": "acme"}, f[0]
PYEOF
ok "GET /v1/cells?site= lists the cells whose messages name the site; the file's label wins"

for _ in $(seq 50); do
    curl -s "$U/v1/incidents" >"$TMP/inc"
    grep -q '"group":"MS-1"' "$TMP/inc" && break
    sleep 0.1
done
curl -s "$U/v1/alerts?limit=1000" >"$TMP/alerts"
$PY - "$TMP/alerts" "$TMP/inc" <<'PYEOF' || fail "alerts and incidents: $(head -c 800 "$TMP/alerts") $(head -c 600 "$TMP/inc")"
import json, sys
alerts = [a for a in json.load(open(sys.argv[1]))["alerts"] if a["cell_id"] == "m1"]
assert alerts, "no alert of m1"
for a in alerts:
    assert a["labels"] == {"site": "MS-1", "region": "R-7", "vendor": "acme"}, a
inc = [i for i in json.load(open(sys.argv[2]))["incidents"] if i["group"] == "MS-1"]
assert inc and inc[0]["cells"] == ["m1"] and inc[0]["cells_total"] == 2, inc
PYEOF
ok "m1's alerts carry the messages' labels; its incident is of site MS-1 (2 cells)"

curl -s "$U/metrics" >"$TMP/metrics"
grep -q '^cellcast_ingest_labels_refused_total{reason="too_long"} 1$' "$TMP/metrics" &&
    grep -q '^cellcast_ingest_label_cells 3$' "$TMP/metrics" ||
    fail "metrics: $(grep -E 'label' "$TMP/metrics")"
grep -q 'm2' "$TMP/cells" || fail "m2 lost its site"
ok "a 100-byte value refused and counted; the cell keeps its label"

kill -HUP "$DPID"
for _ in $(seq 50); do
    grep -q 'reload' "$TMP/log" && break
    sleep 0.1
done
sleep 0.3
[ "$(curl -s "$U/v1/cells?site=MS-1" | grep -o '"total":[0-9]*')" = '"total":2' ] || fail "SIGHUP lost the labels"
ok "a reload keeps the messages' labels"

[ "$FAILS" = 0 ]
