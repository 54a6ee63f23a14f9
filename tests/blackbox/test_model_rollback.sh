#!/usr/bin/env bash
# test_model_rollback.sh CELLCAST CELLCASTD MOCK_CLUSTER [SRC] — issue 31: a published model
# that degrades live is rolled back. cellcastd (model.source kafka) serves the shipped model
# on 6 synthetic cells (its 8 KPIs, 15-minute steps) for two days of data time, so that the
# rollback watch has the shipped model's live MASE over a day (one-day seasonal naive needs
# the first day); GET /v1/model's learning says "waiting" with the hours of data seen.
# Day 3: a copy of the shipped model as good as it (linear weights x 1.001) is published on
# kpis.models, swapped in (same KPIs and step: the reload path) and, after a day of its own
# matured forecasts, kept. Day 4: a degraded copy (linear path negated and doubled, biases
# shifted) is published; its live MASE over the day is far above the good copy's, so
# cellcastd swaps back to <learned_path>.prev (the good copy), says why in GET /v1/model
# (live.verdict, history) and the log, counts cellcast_model_rollbacks_total, notes the hash
# in <learned_path>.rolled_back, and refuses that model when it reads it again after a
# restart (rolled_back). ~20-35 s.
# Exit 77 (skip) when kcat, curl or python3 is missing.
set -u
CLI=${1:?cellcast binary}
CELLCASTD=${2:?cellcastd binary}
CLUSTER=${3:?mock cluster binary}
SRC=${4:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init model-rollback TERM "$CLI" "$CELLCASTD" "$CLUSTER"
MODEL="$SRC/models/default.safetensors"
need_files "$MODEL"

on_exit() { exec 3>&- 2>/dev/null; } # the mock cluster's stdin: it exits at EOF
mkfifo "$TMP/ctl"
"$CLUSTER" 1 kpis:1 kpis.state:1 kpis.models:1 alerts:1 <"$TMP/ctl" >"$TMP/cluster.out" \
    2>"$TMP/cluster.log" &
PIDS+=($!)
exec 3>"$TMP/ctl"
for _ in $(seq 50); do EXT=$(head -1 "$TMP/cluster.out" 2>/dev/null); [ -n "$EXT" ] && break; sleep 0.1; done
[ -n "$EXT" ] || { echo "FAIL: the mock cluster gave no address"; exit 1; }

"$CLI" synth --cells 6 --days 4 --step 900 --missing-rate 0 --gap-rate 0 --outage-rate 0 \
    --out "$TMP/s.csv" 2>/dev/null || { fail "synth"; exit 1; }
python3 - "$TMP/s.csv" "$TMP" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t0 = int(rows[0]["ts"])
out = {d: open("%s/d%d.txt" % (sys.argv[2], d), "w") for d in (2, 3, 4)}
for r in rows:
    m = {"cell": r["cell_id"], "ts": int(r["ts"])}
    m.update({k: float(v) for k, v in r.items() if k not in ("ts", "cell_id") and v != ""})
    out[max(2, (int(r["ts"]) - t0) // 86400 + 1)].write(r["cell_id"] + "|" + json.dumps(m) + "\n")
EOF

cat >"$TMP/cfg.yaml" <<EOF
model:
  path: "$MODEL"
  source: kafka
  learned_path: "$TMP/learned.safetensors"
kafka:
  brokers: "$EXT"
  group_id: rollback
http:
  port: 0
snapshot:
  path: "$TMP/state.snap"
demo:
  enabled: false
EOF
start_daemon "$TMP/d.log" ready -c "$TMP/cfg.yaml"
URL="http://127.0.0.1:$(daemon_port "$TMP/d.log")"
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

kcat -b "$EXT" -P -t kpis -K '|' -l "$TMP/d2.txt" || { fail "kcat produce"; exit 1; }
# the shipped model's window fills: a day of target steps after the first day
for _ in $(seq 150); do
    live=$(curl -s "$URL/v1/model" | jq_py 'd["serving"]["live"]["forecasts"]')
    [ "${live:-0}" -ge 5000 ] && break
    sleep 0.1
done
m=$(curl -s "$URL/v1/model")
got=$(echo "$m" | jq_py '(d["serving"]["learning"]["state"], round(d["serving"]["learning"]["data_hours"]), d["serving"]["learning"].get("first_model_expected_at"), d["serving"]["live"]["mase"])')
case $got in
"('waiting', 48, '20"*) ok "before a learned model: learning $got" ;;
*) fail "learning / live before the swap: $got" ;;
esac

# make_model NAME MUL ADD: the shipped file with its linear path's weights times MUL and
# the linear and head biases plus ADD, and kcat's headers for it in $TMP/NAME.h
make_model() {
python3 - "$MODEL" "$TMP/$1.safetensors" "$TMP/$1.h" "$2" "$3" <<'EOF'
import json, struct, sys
mul, add = float(sys.argv[4]), float(sys.argv[5])
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
base = 8 + n
def scale(name, mul, add):
    s, e = h[name]["data_offsets"]
    for o in range(base + s, base + e, 4):
        struct.pack_into("<f", b, o, struct.unpack_from("<f", b, o)[0] * mul + add)
scale("linear.weight", mul, 0.0)
scale("linear.bias", 1.0, add)
scale("head.bias", 1.0, add)
open(sys.argv[2], "wb").write(b)
v = 0xcbf29ce484222325
for c in b:
    v = ((v ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
rec = json.dumps({"format": "cellcast-learn-record/1", "hash": "%016x" % v, "published": "linear",
                  "decision": "published:a-degraded-copy(test)"}, separators=(",", ":"))
open(sys.argv[3], "w").write("-H cellcast-hash=%016x -H cellcast-size=%d -H cellcast-chunks=0 -H cellcast-record=%s" % (v, len(b), rec))
EOF
sed 's/.*cellcast-hash=\([0-9a-f]*\).*/\1/' "$TMP/$1.h"
}
publish() { # shellcheck disable=SC2046
    kcat -b "$EXT" -P -t kpis.models -p 0 -k learned $(cat "$TMP/$1.h") "$TMP/$1.safetensors" ||
        fail "kcat: the model $1"
}

# A model as good as the shipped one (its linear weights scaled by 1.001): kept.
GOOD=$(make_model good 1.001 0)
publish good
wait_log "$TMP/d.log" "serving the learned model $GOOD" 100 || fail "the good copy was not swapped in"
kcat -b "$EXT" -P -t kpis -K '|' -l "$TMP/d3.txt" || fail "kcat produce day 3"
if wait_log "$TMP/d.log" "model $GOOD kept" 150; then
    ok "a model as good as the previous one is kept: $(curl -s "$URL/v1/model" | jq_py 'd["serving"]["live"]["verdict"]')"
else
    fail "the good copy was not kept: $(curl -s "$URL/v1/model" | jq_py 'd["serving"]["live"]') $(grep models "$TMP/d.log" | tail -2)"
fi
cmp -s "$MODEL" "$TMP/learned.safetensors.prev" &&
    ok "the shipped model kept as learned.safetensors.prev" || fail "no .prev copy of the shipped model"

# The degraded model: the linear path negated and doubled, the biases shifted by 3.
BAD=$(make_model bad -2 3)
publish bad
if wait_log "$TMP/d.log" "serving the learned model $BAD" 100; then
    v=$(curl -s "$URL/v1/model" | jq_py '(d["serving"]["learning"]["state"], d["serving"]["live"]["state"], d["serving"]["history"][0]["event"])')
    [ "$v" = "('serving', 'watching', 'swap')" ] && ok "the degraded model $BAD swapped in and watched" ||
        fail "after the swap: $v ($(curl -s "$URL/v1/model" | jq_py 'd["serving"]["live"]["verdict"]'))"
else
    fail "the degraded model was not swapped in: $(tail -3 "$TMP/d.log")"
fi
cmp -s "$TMP/good.safetensors" "$TMP/learned.safetensors.prev" &&
    ok "the good copy kept as learned.safetensors.prev" || fail "no .prev copy of the good copy"

kcat -b "$EXT" -P -t kpis -K '|' -l "$TMP/d4.txt" || fail "kcat produce day 4"
if wait_log "$TMP/d.log" "rolled back to $GOOD" 150; then
    m=$(curl -s "$URL/v1/model")
    got=$(echo "$m" | jq_py '(d["serving"]["hash"], d["serving"]["rollbacks"], d["serving"]["history"][0]["event"], d["serving"]["history"][0]["from"])')
    [ "$got" = "('$GOOD', 1, 'rollback', '$BAD')" ] && ok "rolled back: $(echo "$m" | jq_py 'd["serving"]["live"]["verdict"]')" ||
        fail "after the rollback /v1/model says $got"
    curl -s "$URL/metrics" | grep -q '^cellcast_model_rollbacks_total 1$' &&
        ok "cellcast_model_rollbacks_total 1" || fail "no rollback in /metrics"
    grep -qx "$BAD" "$TMP/learned.safetensors.rolled_back" && ok "the hash noted in .rolled_back" ||
        fail ".rolled_back does not hold $BAD"
    cmp -s "$TMP/good.safetensors" "$TMP/learned.safetensors" && ok "learned.safetensors is the good copy again" ||
        fail "learned.safetensors is not the previous model"
else
    fail "no rollback: $(curl -s "$URL/v1/model" | jq_py 'd["serving"]["live"]') $(tail -3 "$TMP/d.log")"
fi

# A restart reads the topic from its beginning: the rolled-back model is refused.
stop_daemon
start_daemon "$TMP/d2.log" ready -c "$TMP/cfg.yaml"
URL="http://127.0.0.1:$(daemon_port "$TMP/d2.log")"
if wait_log "$TMP/d2.log" "refused (rolled_back)" 100; then
    h=$(curl -s "$URL/v1/model" | jq_py 'd["serving"]["hash"]')
    [ "$h" = "$GOOD" ] && ok "after a restart the rolled-back model is refused, $h serves" ||
        fail "after a restart serving $h"
else
    fail "after a restart: $(tail -3 "$TMP/d2.log")"
fi
stop_daemon
[ "$FAILS" = 0 ] && echo "all ok" || exit 1
