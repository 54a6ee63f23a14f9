#!/bin/bash
# test_alert_parity.sh — black-box check that `cellcast anomaly-eval` and cellcastd run one
# detector (issue 13: "the same code in anomaly-eval and the daemon"). Two synthetic cells
# of 14 days with bursts, outages, missing values (null KPIs) and gaps are fed to the real
# daemon through POST /v1/kpis and run through anomaly-eval (--no-history --no-inject: every
# row scored, nothing injected, every alert listed by --verbose). Both must raise the same
# alerts: the same cells, firing steps, kinds (anomaly, data-quality reason and KPI), first
# attributed KPI and z (to the 0.1 that anomaly-eval prints), with the default alerts.*
# settings (every gap of the data, 4-18 steps, imputed) and with other values given to both
# (--set / --set alerts.*: thresholds, k-of-n, shape novelty, no novelty wait, a shorter
# stuck run; and a max gap of 3, so that the sequence restarts after each of those gaps).
# KV caches f32 on both sides (the daemon's default f16 could move a z in its third digit).
# A third run stops the daemon halfway (its snapshot written at shutdown) and starts it
# again on that snapshot: the alerts of both starts are those of one uninterrupted run.
# Two differences this test found (2026-11-25) and that are now gone: a KPI sent as null
# was observed to the daemon's detector (the value carried for the model was scored, and a
# KPI null for 12 steps raised `stuck`), and a gap longer than ingest.max_gap restarted the
# daemon's sequence while anomaly-eval stepped the model through every gap (now
# --max-gap). ~12 s.
#   usage: test_alert_parity.sh CELLCAST CELLCASTD SOURCE_ROOT
set -u
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
parity_test_init alert-parity "$@"

"$CLI" synth --cells 2 --days 14 --seed 6 >"$TMP/s.csv" 2>/dev/null ||
    { echo "FAIL: cellcast synth"; exit 1; }
# the records as the daemon takes them (null = not measured this step), 200 a request;
# TMP/cells: each cell's first and last step
$PY - "$TMP" <<'PYEOF' || { echo "FAIL: the records of s.csv"; exit 1; }
import csv, json, sys
tmp = sys.argv[1]
rows = list(csv.DictReader(open(f"{tmp}/s.csv")))
kpis = [k for k in rows[0] if k not in ("ts", "cell_id")]
recs = [{"cell": r["cell_id"], "ts": int(r["ts"]),
         "kpis": {k: float(r[k]) if r[k] else None for k in kpis}} for r in rows]
nulls = sum(v is None for r in recs for v in r["kpis"].values())
assert nulls > 20, f"want null KPIs in the data, got {nulls}"
for i in range(0, len(recs), 200):
    json.dump(recs[i:i + 200], open(f"{tmp}/r{i // 200:03d}.json", "w"))
first, last, half = {}, {}, {}
for i, r in enumerate(recs):
    first.setdefault(r["cell"], r["ts"] // 900)
    last[r["cell"]] = r["ts"] // 900
    if i < 1400:  # the records of r000..r006.json
        half[r["cell"]] = r["ts"] // 900
with open(f"{tmp}/cells", "w") as o:
    o.writelines(f"{c} {first[c]} {last[c]}\n" for c in sorted(first))
with open(f"{tmp}/cells.half", "w") as o:
    o.writelines(f"{c} {first[c]} {half[c]}\n" for c in sorted(first))
PYEOF

# daemon_part NAME FILE... -- CELLS -- ARG...: starts the daemon with ARG..., posts the
# files, waits until every cell of CELLS ("cell first last") has stepped its last step,
# keeps GET /v1/alerts?state=firing (one line) in NAME.alerts.json and stops the daemon
daemon_part() {
    local name=$1 files=() cells f code c plast
    shift
    while [ "$1" != -- ]; do files+=("$1"); shift; done
    cells=$2
    shift 3
    start_daemon "$TMP/$name.log" health -c "$ROOT/conf/cellcast.yaml" \
        --set model.path="$MODEL" --set demo.enabled=false --set http.port=0 \
        --set snapshot.path= --set engine.kv_type=f32 --set http.post_kpis=open \
        --set kafka.group_id="parity-$name" "$@"
    for f in "${files[@]}"; do
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary "@$f" "$U/v1/kpis")
        [ "$code" = 202 ] || fail "$name: POST $f: $code"
    done
    while read -r c _ plast; do
        wait_observed "$c" "$plast" || fail "$name: $c did not step its step $plast"
    done <"$cells"
    sleep 0.3 # the last batch's transitions reach the history on the loop thread
    curl -s "$U/v1/alerts?state=firing&limit=1000" >"$TMP/$name.alerts.json"
    echo >>"$TMP/$name.alerts.json" # a reply a line
    stop_daemon >/dev/null || true
}

# run NAME K=V,... [MAX_GAP [restart]]: both detectors with those alerts.* values (and that
# max gap; with "restart" the daemon is stopped halfway and started again on its snapshot);
# their alerts as lines "cell kind[/reason] row kpi z" (row = step - the cell's first step)
# in NAME.cli and NAME.daemon
run() {
    local name=$1 set=$2 gap=${3:-} restart=${4:-} args=() kv
    [ -n "$set" ] && args=(--set "$set")
    [ -n "$gap" ] && args+=(--max-gap "$gap")
    "$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --no-history --no-inject \
        --verbose "${args[@]}" >"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" ||
        { fail "$name: anomaly-eval exit $?: $(tail -3 "$TMP/$name.cli.err")"; return; }
    sed -n -e 's/^ *\([^ ]*\) false alert at row \([0-9]*\): \([^ ]*\) z \([-+0-9.]*\)$/\1 anomaly \2 \3 \4/p' \
        -e 's/^ *\([^ ]*\) data-quality alert outside labels at row \([0-9]*\): \([^ ]*\) \([^ ]*\)$/\1 dq\/\3 \2 \4 -/p' \
        "$TMP/$name.cli.err" | sort >"$TMP/$name.cli"
    args=()
    for kv in ${set//,/ }; do args+=(--set "alerts.$kv"); done
    [ -n "$gap" ] && args+=(--set "ingest.max_gap=$gap")
    if [ -z "$restart" ]; then
        daemon_part "$name" "$TMP"/r*.json -- "$TMP/cells" -- "${args[@]}"
    else # stopped after r006.json (its snapshot written), started again on that snapshot
        daemon_part "$name.1" "$TMP"/r00[0-6].json -- "$TMP/cells.half" -- \
            --set snapshot.path="$TMP/$name.snap" "${args[@]}"
        daemon_part "$name.2" "$TMP"/r00[7-9].json "$TMP"/r01*.json -- "$TMP/cells" -- \
            --set snapshot.path="$TMP/$name.snap" "${args[@]}"
        grep -q 'restored: 2 cells (0 failed)' "$TMP/$name.2.log" ||
            fail "$name: the second start did not restore the two cells"
        cat "$TMP/$name.1.alerts.json" "$TMP/$name.2.alerts.json" >"$TMP/$name.alerts.json"
    fi
    $PY - "$TMP/$name.alerts.json" "$TMP/cells" <<'PYEOF' | sort >"$TMP/$name.daemon"
import json, sys
p0 = {c: int(f) for c, f, _ in (line.split() for line in open(sys.argv[2]))}
alerts = []
for doc in open(sys.argv[1]):  # one reply a line (one a start of the daemon)
    if doc.strip():
        alerts += sorted(json.loads(doc)["alerts"], key=lambda a: a["seq"])
seen = set()
for a in alerts:
    if a["id"] in seen:  # an escalation (warning -> critical) of an alert already firing
        continue
    seen.add(a["id"])
    row = a["step"] - p0[a["cell_id"]]
    if a["kind"] == "anomaly":
        top = a["attribution"][0] if a.get("attribution") else {"kpi": "?", "z": 0.0}
        print(f"{a['cell_id']} anomaly {row} {top['kpi']} {top['z']:+.1f}")
    else:
        print(f"{a['cell_id']} dq/{a['reason']} {row} {a.get('kpi') or ''} -")
PYEOF
    if diff "$TMP/$name.cli" "$TMP/$name.daemon" >"$TMP/$name.diff"; then
        ok "$name: the daemon and anomaly-eval raise the same $(wc -l <"$TMP/$name.cli") alerts"
    else
        fail "$name: the daemon's alerts (>) differ from anomaly-eval's (<): $(cat "$TMP/$name.diff")"
    fi
}

run defaults ""
run set "warn_z=6,crit_z=9,warn_k=2,shape_w=8,novelty_min_s=0,stuck_steps=6" 3
run restart "" "" restart

# the comparison must have had something to compare
n_an=$(cat "$TMP/defaults.cli" "$TMP/set.cli" | grep -c ' anomaly ')
n_dq=$(cat "$TMP/defaults.cli" "$TMP/set.cli" | grep -c ' dq/')
[ "$n_an" -ge 10 ] || fail "only $n_an anomaly alerts in both runs: the data no longer tests much"
[ "$n_dq" -ge 1 ] || fail "no data-quality alert in either run: the data no longer tests the DQ rules"
cut -d' ' -f1 "$TMP/defaults.cli" "$TMP/set.cli" | sort -u | grep -q cell0001 ||
    fail "no alert on cell0001: the second cell is not compared"
grep -q ' [1-9][0-9]* restart(s) after a gap' "$TMP/set.cli.err" ||
    fail "no gap longer than 3 in the data: the restart after a gap is not compared"
grep -q ' [1-9][0-9]* restart(s) after a gap' "$TMP/defaults.cli.err" &&
    fail "a restart with the default max gap: the imputed gaps are not compared"

if [ "$FAILS" != 0 ]; then
    echo "alert parity: $FAILS failure(s)"
    exit 1
fi
echo "alert parity: ok"
