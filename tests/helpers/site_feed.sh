# tests/helpers/site_feed.sh — a small fleet fed to cellcastd over POST /v1/kpis, for the
# daemon tests of what becomes of alerts (tests/daemon/test_incidents.sh, test_silences.sh,
# test_alertmanager.sh, test_feedback.sh, test_msg_labels.sh): the daemon's configuration
# (the tiny model, no Kafka, an alert bar meant for grouping rather than detection), and the
# two-site feed of site S1's outage and cell b2's spike, written one file per step and
# posted step by step. Source it after tests/helpers/daemon.sh; expects PY, MODEL and TMP.

# SITE_FEED_P0: the feed's first step, 2026-01-01T00:00:00Z in 900 s steps.
SITE_FEED_P0=$((1767225600 / 900))

# post_config FILE SNAPSHOT_PATH: writes to FILE cellcastd's configuration for a test that
# feeds it through POST /v1/kpis: MODEL, no Kafka, POST /v1/kpis open, an ephemeral HTTP
# port, a batch every 5 ms and snapshot.path SNAPSHOT_PATH ("" for none); then stdin, the
# test's own sections (none of model, kafka, http, ingest, snapshot).
post_config() {
    cat >"$1" <<YAML
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
  path: "$2"
YAML
    cat >>"$1"
}

# high_alert_bar [KEY: VALUE...]: prints the alerts section of a test about what becomes of
# alerts rather than the detector: the KEY: VALUE lines given, then a high bar (warn_z 20,
# crit_z 40, no CUSUM or profile rule, after 8 warm-up steps), since the tiny model's
# forecasts of the feeds' waves are rough: only a gross spike or an outage fires.
high_alert_bar() {
    local setting
    echo "alerts:"
    for setting in "$@"; do echo "  $setting"; done
    cat <<'YAML'
  warmup_steps: 8
  warn_z: 20
  crit_z: 40
  cusum_h: 0
  profile_h: 0
YAML
}

# site_feed_topology: writes $TMP/topo.csv, the feed's two sites of three cells in one
# region (a1..a3 at S1, b1..b3 at S2, sectors 1..3).
site_feed_topology() {
    printf '%s\n' cell,site,region,sector a1,S1,R1,1 a2,S1,R1,2 a3,S1,R1,3 \
        b1,S2,R1,1 b2,S2,R1,2 b3,S2,R1,3 >"$TMP/topo.csv"
}

# site_feed_config FILE: post_config FILE "" for the two-site feed: no snapshot, the
# topology $TMP/topo.csv, stdin (the test's own sections, none of topology or alerts), and
# the high_alert_bar with all_zero after zero_steps 3.
site_feed_config() {
    local file=$1
    post_config "$file" "" <<YAML
topology:
  path: "$TMP/topo.csv"
YAML
    cat >>"$file"
    high_alert_bar "zero_steps: 3" >>"$file"
}

# site_feed_write STEPS: the feed of the cells a1..a3 (site S1) and b1..b3 (site S2) at
# steps 0..STEPS-1 from SITE_FEED_P0, one POST body a step ($TMP/in00.json, in01.json...):
# a smooth wave per cell (prb, thr, users: the tiny model's features); every cell of S1 all
# zero at steps 40..47 (a site-wide outage), b2 far above at 44..47 (a lone spike).
site_feed_write() {
    $PY - "$TMP" "$1" "$SITE_FEED_P0" <<'PYEOF'
import json, math, sys
tmp, steps, p0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
S = 900
cells = ["a1", "a2", "a3", "b1", "b2", "b3"]
for i in range(steps):
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
}

# post_until FROM TO: posts the feed's steps [FROM, TO) to the daemon at U in order, then
# waits until b3 (the last cell of each step) has stepped TO - 1; a failed check without.
post_until() {
    local i
    for ((i = $1; i < $2; i++)); do
        curl -s -o /dev/null -H 'Content-Type: application/json' \
            --data-binary "@$TMP/in$(printf %02d "$i").json" "$U/v1/kpis"
    done
    wait_observed b3 $((SITE_FEED_P0 + $2 - 1)) || fail "steps up to $2 not stepped"
}
