#!/usr/bin/env bash
# test_model_rollback.sh CELLCAST CELLCASTD MOCK_CLUSTER [SRC] — issue 31: a published model
# that degrades live is rolled back. cellcastd (model.source kafka) serves the shipped model
# on 6 synthetic cells (its 8 KPIs, 15-minute steps) for three days of data time, so that
# the rollback watch has the shipped model's live MASE over a day (one-day seasonal naive
# needs the first day, and a cell weighs once its own scale has learnt the second: each
# cell weighs alike, model_watch.h); GET /v1/model's learning says "waiting" with the hours
# of data seen.
# Day 3: a copy of the shipped model as good as it (linear weights x 1.001) is published on
# kpis.models, swapped in (same KPIs and step: the reload path) and, after a day of its own
# matured forecasts, kept. Day 4: a degraded copy (linear path negated and doubled, biases
# shifted) is published; its live MASE over the day is far above the good copy's, so
# cellcastd swaps back to <learned_path>.prev (the good copy), says why in GET /v1/model
# (live.verdict, history) and the log, counts cellcast_model_rollbacks_total, notes the hash
# in <learned_path>.rolled_back, and refuses that model when it reads it again after a
# restart (rolled_back). The rollback is noted for the learner on kpis.models (key
# rollback/<hash>: the hash, the model it went back to, the member, the live scores) and
# read back and counted; hostile rollback records and a record of an unknown kind are
# refused or skipped with a message and counted, never taken for a model. Then a learner
# whose champion (--out) is the rolled-back model and whose STATE_DIR/previous.safetensors
# is the good copy (what it holds after publishing the good copy, then the degraded one)
# runs a round on the KPI topic: it logs the rollback, takes the good copy as its champion
# again (its --out, republished on the topic), scores its candidates against it, refuses
# the hostile records with a message, and publishes nothing with the rolled-back hash; a
# candidate whose bytes a rollback record names is refused; the learner looping on the
# topics exits 0 within 5 s of a SIGTERM while it waits for records. ~30-50 s.
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

start_mock_cluster 1 kpis:1 kpis.state:1 kpis.models:1 alerts:1

"$CLI" synth --cells 6 --days 5 --step 900 --missing-rate 0 --gap-rate 0 --outage-rate 0 \
    --out "$TMP/s.csv" 2>/dev/null || { fail "synth"; exit 1; }
python3 - "$TMP/s.csv" "$TMP" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t0 = int(rows[0]["ts"])
out = {d: open("%s/d%d.txt" % (sys.argv[2], d), "w") for d in (2, 3, 4)}
for r in rows:
    m = {"cell": r["cell_id"], "ts": int(r["ts"])}
    m.update({k: float(v) for k, v in r.items() if k not in ("ts", "cell_id") and v != ""})
    out[max(2, (int(r["ts"]) - t0) // 86400)].write(r["cell_id"] + "|" + json.dumps(m) + "\n")
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
# the shipped model's window fills: a day of target steps after the first two
for _ in $(seq 300); do
    live=$(curl -s "$URL/v1/model" | jq_py 'd["serving"]["live"]["forecasts"]')
    [ "${live:-0}" -ge 5000 ] && break
    sleep 0.1
done
m=$(curl -s "$URL/v1/model")
got=$(echo "$m" | jq_py '(d["serving"]["learning"]["state"], round(d["serving"]["learning"]["data_hours"]), d["serving"]["learning"].get("first_model_expected_at"), d["serving"]["live"]["mase"])')
case $got in
"('waiting', 72, '20"*) ok "before a learned model: learning $got" ;;
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

# The rollback noted on the models topic for the learner, and read back (counted).
jrec() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().split('|',1)[1]); print(eval(sys.argv[1]))" "$1"; }
# (read back by the member: then it is on the topic)
for _ in $(seq 50); do
    got=$(curl -s "$URL/v1/model" | jq_py '(d["serving"]["rollback_records"]["produced"], d["serving"]["rollback_records"]["read"], d["serving"]["rollback_records"].get("last", {}).get("hash"))')
    [ "$got" = "(1, 1, '$BAD')" ] && break
    sleep 0.1
done
[ "$got" = "(1, 1, '$BAD')" ] && ok "rollback_records in /v1/model: produced 1, read back 1" ||
    fail "rollback_records in /v1/model: $got"
rb=$(kcat -b "$EXT" -C -t kpis.models -e -q -f '%k|%s\n' 2>/dev/null | grep -a "^rollback/$BAD|" | tail -1)
if [ -n "$rb" ] &&
    [ "$(echo "$rb" | jrec '(d["format"], d["hash"], d["to"], d["member"] != "", d["live_mase"] > d["baseline_mase"] > 0, d["forecasts"] > 0)')" = "('cellcast-rollback/1', '$BAD', '$GOOD', True, True, True)" ]; then
    ok "the rollback is on kpis.models: $(echo "$rb" | cut -c1-200)"
else
    fail "no rollback record for $BAD on kpis.models: '$rb'"
fi
applied=$(curl -s "$URL/v1/model" | jq_py 'd["serving"]["applied"]')

# Hostile rollback records and a record of a kind this version does not read.
printf 'rollback/1111111111111111|not json\n' >"$TMP/hostile.txt"
printf 'rollback/2222222222222222|{"format":"cellcast-rollback/1","hash":"3333333333333333","to":"%s","member":"x"}\n' "$GOOD" >>"$TMP/hostile.txt"
printf 'rollback/%s|{"format":"cellcast-rollback/1","hash":"%s","to":"%s","member":"x","live_mase":"NaN"}\n' "$GOOD" "$GOOD" "$BAD" >>"$TMP/hostile.txt"
printf 'notes/something|{"a":1}\n' >>"$TMP/hostile.txt"
kcat -b "$EXT" -P -t kpis.models -p 0 -K '|' -l "$TMP/hostile.txt" || fail "kcat: the hostile records"
for _ in $(seq 50); do
    got=$(curl -s "$URL/v1/model" | jq_py '(d["serving"]["refused"]["bad_rollback"], d["serving"]["rollback_records"]["skipped_records"], d["serving"]["hash"], d["serving"]["applied"])')
    [ "$got" = "(3, 1, '$GOOD', $applied)" ] && break
    sleep 0.1
done
if [ "$got" = "(3, 1, '$GOOD', $applied)" ] && grep -q "refused (bad_rollback): rollback record: 'hash' is not the key's" "$TMP/d.log" &&
    curl -s "$URL/metrics" | grep -q '^cellcast_models_refused_total{reason="bad_rollback"} 3$'; then
    ok "hostile rollback records refused (3), an unknown kind skipped (1), no model taken from them"
else
    fail "hostile rollback records: (bad_rollback, skipped, hash, applied) = $got; $(grep -c bad_rollback "$TMP/d.log") log lines"
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

# The learner learns of the rollback: its champion (--out) is the degraded model, the good
# copy is STATE_DIR/previous.safetensors with its record, as after publishing both.
L="$TMP/learner"
mkdir -p "$L"
cp "$TMP/bad.safetensors" "$L/model.safetensors"
printf '{"format":"cellcast-learn-record/1","hash":"%s","published":"linear"}\n' "$BAD" >"$L/model.safetensors.json"
cp "$TMP/good.safetensors" "$L/previous.safetensors"
printf '{"format":"cellcast-learn-record/1","hash":"%s","published":"linear"}\n' "$GOOD" >"$L/previous.safetensors.json"
heads_of() { kcat -b "$EXT" -C -t kpis.models -e -q -f '%k %h\n' 2>/dev/null | grep "^learned .*cellcast-hash=$1" | wc -l; }
bad_heads=$(heads_of "$BAD")
if "$CLI" learn --brokers "$EXT" --topic kpis --out "$L/model.safetensors" --once --patch-len 4 \
    2>"$TMP/learner.log"; then
    last_rec=$(tail -1 "$L/rounds.jsonl")
    champ=$(echo "x|$last_rec" | jrec 'd["champion_before"].get("hash")')
    pub=$(echo "x|$last_rec" | jrec 'd.get("hash")')
    if grep -q "model $BAD was rolled back to $GOOD by member" "$TMP/learner.log" &&
        grep -q "the champion is $GOOD again" "$TMP/learner.log" && [ "$champ" = "$GOOD" ] &&
        [ "$pub" != "$BAD" ] && ! cmp -s "$L/model.safetensors" "$TMP/bad.safetensors" &&
        [ "$(heads_of "$BAD")" = "$bad_heads" ] && [ "$(heads_of "$GOOD")" -ge 2 ] &&
        echo "x|$last_rec" | jrec '"'"$BAD"'" in [r["hash"] for r in d["rolled_back"]]' | grep -q True; then
        ok "learner: $BAD refused, $GOOD its champion again and republished; round: $(echo "x|$last_rec" | jrec 'd["decision"]')"
    else
        fail "learner after the rollback: champion '$champ', published '$pub', heads of $BAD $(heads_of "$BAD") (before $bad_heads); $(grep -E 'rolled|champion' "$TMP/learner.log" | head -3)"
    fi
    [ "$(grep -c 'rollback record at offset [0-9]* refused' "$TMP/learner.log")" = 3 ] &&
        ok "learner: the 3 hostile rollback records refused with a message" ||
        fail "learner: hostile rollback records: $(grep -c refused "$TMP/learner.log") refusals"
else
    fail "learner: $(tail -3 "$TMP/learner.log")"
fi
# A candidate with the bytes of a model a member rolled back is refused: the same data gives
# the same linear-only candidate, whose hash a rollback record now names.
LIN=$(tail -1 "$L/rounds.jsonl" | sed 's/^/x|/' | jrec '[c["hash"] for c in d["candidates"] if c["kind"] == "linear"][0]')
printf 'rollback/%s|{"format":"cellcast-rollback/1","hash":"%s","to":"%s","member":"test-member"}\n' \
    "$LIN" "$LIN" "$GOOD" | kcat -b "$EXT" -P -t kpis.models -p 0 -K '|' || fail "kcat: rollback of $LIN"
if "$CLI" learn --brokers "$EXT" --topic kpis --out "$L/model.safetensors" --once --patch-len 4 \
    2>"$TMP/learner2.log"; then
    why=$(tail -1 "$L/rounds.jsonl" | sed 's/^/x|/' | jrec '[c.get("refused") for c in d["candidates"] if c.get("hash") == "'"$LIN"'"]')
    case $why in
    *"was rolled back by test-member"*) ok "learner: the candidate $LIN refused as rolled back ($why)" ;;
    *) fail "learner: candidate $LIN: $why" ;;
    esac
    [ "$(heads_of "$LIN")" = 0 ] && ok "learner: $LIN never published" || fail "learner published $LIN"
else
    fail "learner, second run: $(tail -3 "$TMP/learner2.log")"
fi
# The learner looping on the topics stops promptly on SIGTERM while it waits for records.
n0=$(wc -l <"$L/rounds.jsonl")
"$CLI" learn --brokers "$EXT" --topic kpis --out "$L/model.safetensors" --patch-len 4 \
    --retrain-hours 0 --poll 30 2>"$TMP/learner3.log" &
LP=$!
PIDS+=("$LP")
for _ in $(seq 300); do [ "$(wc -l <"$L/rounds.jsonl")" -gt "$n0" ] && break; sleep 0.1; done
sleep 1 # past the round: waiting for records (--poll 30)
kill -TERM "$LP"
for _ in $(seq 50); do kill -0 "$LP" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$LP" 2>/dev/null; then
    kill -KILL "$LP"
    fail "learner: still running 5 s after SIGTERM while waiting for records"
else
    wait "$LP" && ok "learner: SIGTERM while waiting for records: exit 0 within 5 s" ||
        fail "learner: SIGTERM while waiting: exit status $?"
fi
h=$(curl -s "$URL/v1/model" | jq_py 'd["serving"]["hash"]')
[ "$h" != "$BAD" ] && ok "the member serves $h after the learner's round" || fail "the member serves $BAD"
stop_daemon
[ "$FAILS" = 0 ] && echo "all ok" || exit 1
