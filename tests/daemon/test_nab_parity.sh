#!/bin/bash
# test_nab_parity.sh — black-box check that `cellcast anomaly-eval --nab` scores what the
# daemon raises (issue 13: the NAB numbers are the daemon's detector): a NAB-layout corpus
# of one 5-minute series (a daily wave with spikes, a dip, a flat stretch, gaps of 5 and 30
# steps) is run through --nab (--results: a row whose anomaly score is ≥ 0.5 is a new
# anomaly episode), and the same rows are fed to cellcastd through POST /v1/kpis with the
# same model (trained by the test on the corpus's probationary rows), the same alerts.*
# values and ingest.max_gap 1000 (--nab fills gaps of up to 1000 steps). Both must fire at
# the same steps, with the alert defaults and with the NAB settings of docs/operations.md
# (the likelihood, the lagged forecast, shape novelty). Rows on or before the previous
# row's step, which --nab moves to the next step and the daemon merges or drops, are not
# in the corpus (docs/operations.md §5 "NAB"). ~6 s.
#   usage: test_nab_parity.sh CELLCAST CELLCASTD SOURCE_ROOT
set -u
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
parity_test_init nab-parity "$@"
need_files "$ROOT/tests/data/nab/config/profiles.json"

C=$TMP/corpus
mkdir -p "$C/data/synth" "$C/labels" "$C/config"
cp "$ROOT/tests/data/nab/config/profiles.json" "$C/config/"
$PY - "$C" <<'PYEOF' || { echo "FAIL: the corpus"; exit 1; }
import datetime, json, math, random, sys
c = sys.argv[1]
random.seed(4)
t0 = datetime.datetime(2024, 1, 1)
rows, n = [], 0
while n < 2880:                      # 10 days of 5-minute steps
    if n in (1500, 2200):            # gaps of 5 and 30 steps
        n += 5 if n == 1500 else 30
        continue
    v = 50 + 20 * math.sin(2 * math.pi * n / 288) + random.gauss(0, 2)
    if n in (700, 1000, 1250, 1900, 2600, 2750):
        v += 40                      # spikes
    if 2400 <= n < 2460:
        v -= 25                      # a dip of five hours
    if 1700 <= n < 1740:
        v = 61.5                     # a flat stretch
    rows.append(((t0 + datetime.timedelta(minutes=5 * n)).strftime("%Y-%m-%d %H:%M:%S"), round(v, 3)))
    n += 1
with open(f"{c}/data/synth/s.csv", "w") as f:
    f.write("timestamp,value\n")
    f.writelines(f"{t},{v}\n" for t, v in rows)
win = [[rows[i - 10][0] + ".000000", rows[i + 10][0] + ".000000"] for i in (1000, 1880)]
json.dump({"synth/s.csv": win}, open(f"{c}/labels/combined_windows.json", "w"))
json.dump({"synth/s.csv": [rows[1000][0], rows[1880][0]]}, open(f"{c}/labels/combined_labels.json", "w"))
recs = [{"cell": "s", "ts": int(datetime.datetime.fromisoformat(t).replace(
    tzinfo=datetime.timezone.utc).timestamp()), "kpis": {"value": v}} for t, v in rows]
for i in range(0, len(recs), 500):
    json.dump(recs[i:i + 500], open(f"{c}/../r{i // 500:02d}.json", "w"))
open(f"{c}/../last", "w").write(f"{recs[-1]['ts'] // 300}\n")
PYEOF
"$CLI" anomaly-eval --nab "$C" --probation-csv "$TMP/prob.csv" >/dev/null 2>"$TMP/prob.err" ||
    { echo "FAIL: --probation-csv: $(tail -2 "$TMP/prob.err")"; exit 1; }
"$CLI" train --data "$TMP/prob.csv" --out "$TMP/m.safetensors" --step 300 --steps 60 \
    --threads 1 --seed 1 --quiet >/dev/null 2>"$TMP/train.err" ||
    { echo "FAIL: train: $(tail -2 "$TMP/train.err")"; exit 1; }
LAST=$(cat "$TMP/last")

# run NAME K=V,...: the steps where --nab and the daemon fire, in NAME.nab and NAME.daemon
run() {
    local name=$1 set=$2 args=() kv f code
    [ -n "$set" ] && args=(--set "$set")
    "$CLI" anomaly-eval --nab "$C" --model "$TMP/m.safetensors" "${args[@]}" \
        --results "$TMP/$name.res" >"$TMP/$name.nab.out" 2>"$TMP/$name.nab.err" ||
        { fail "$name: --nab exit $?: $(tail -3 "$TMP/$name.nab.err")"; return; }
    $PY - "$TMP/$name.res/cellcast/synth/cellcast_s.csv" <<'PYEOF' >"$TMP/$name.nab"
import csv, datetime, sys
for r in csv.DictReader(open(sys.argv[1])):
    if float(r["anomaly_score"]) >= 0.5:
        print(int(datetime.datetime.fromisoformat(r["timestamp"]).replace(
            tzinfo=datetime.timezone.utc).timestamp()) // 300)
PYEOF
    args=()
    for kv in ${set//,/ }; do args+=(--set "alerts.$kv"); done
    start_daemon "$TMP/$name.log" health -c "$ROOT/conf/cellcast.yaml" \
        --set model.path="$TMP/m.safetensors" --set demo.enabled=false --set http.port=0 \
        --set snapshot.path= --set engine.kv_type=f32 --set http.post_kpis=open \
        --set ingest.max_gap=1000 --set kafka.group_id="nab-parity-$name" "${args[@]}"
    for f in "$TMP"/r*.json; do
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary "@$f" "$U/v1/kpis")
        [ "$code" = 202 ] || fail "$name: POST $f: $code"
    done
    wait_observed s "$LAST" || fail "$name: the cell did not step its step $LAST"
    sleep 0.3 # the last batch's transitions reach the history on the loop thread
    curl -s "$U/v1/alerts?state=firing&kind=anomaly&limit=1000" >"$TMP/$name.alerts.json"
    $PY - "$TMP/$name.alerts.json" <<'PYEOF' >"$TMP/$name.daemon"
import json, sys
seen = set()
for a in sorted(json.load(open(sys.argv[1]))["alerts"], key=lambda a: a["seq"]):
    if a["id"] not in seen:  # not an escalation of an alert already firing
        seen.add(a["id"])
        print(a["step"])
PYEOF
    stop_daemon >/dev/null || true
    sort -n -o "$TMP/$name.nab" "$TMP/$name.nab"
    sort -n -o "$TMP/$name.daemon" "$TMP/$name.daemon"
    if diff "$TMP/$name.nab" "$TMP/$name.daemon" >"$TMP/$name.diff"; then
        ok "$name: --nab and the daemon fire at the same $(wc -l <"$TMP/$name.nab") steps"
    else
        fail "$name: the daemon's firings (>) differ from --nab's (<): $(cat "$TMP/$name.diff")"
    fi
}

run defaults ""
run nab "warn_k=1,warn_z=20,crit_z=30,cooldown_steps=20,resolve_m=6,lik_over=0.7,lik_short_n=20,novelty_tol=0.05,lag_steps=-1,profile_k=1.75,profile_h=10,shape_w=8,novelty_min_s=0"
n=$(cat "$TMP/defaults.nab" "$TMP/nab.nab" | wc -l)
[ "$n" -ge 6 ] || fail "only $n firings in both runs: the corpus no longer tests much"

if [ "$FAILS" != 0 ]; then
    echo "nab parity: $FAILS failure(s)"
    exit 1
fi
echo "nab parity: ok"
