#!/usr/bin/env bash
# test_learn_kafka.sh CELLCAST CELLCASTD MOCK_CLUSTER [SRC] — issue 31 through Kafka: a
# synthetic fleet whose KPI names the shipped model does not have (load_a, load_b; 4 hourly
# cells) on a librdkafka mock cluster; two cellcastd members (model.source kafka, the
# shipped model in service) and `cellcast learn --once` reading the KPI topic's history and
# publishing to kpis.models in chunks (message.max.bytes 3500). Checked: both members swap
# to the learned model (another KPI set: a re-exec) and show the same hash and the learner's
# record in GET /v1/model; records that follow are served as load_a/load_b forecasts;
# hostile records on the models topic (truncated, huge, wrong hash, chunks missing, NaN
# weights, not a model) are refused, counted by reason in /metrics, and nobody crashes.
# ~30 s. Exit 77 (skip) when kcat, curl or python3 is missing.
set -u
CLI=${1:?cellcast binary}
CELLCASTD=${2:?cellcastd binary}
CLUSTER=${3:?mock cluster binary}
SRC=${4:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
kafka_test_init learn-kafka TERM "$CLI" "$CELLCASTD" "$CLUSTER"
MODEL="$SRC/models/default.safetensors"
need_files "$MODEL"

start_mock_cluster 1 kpis:2 kpis.state:2 kpis.models:1 alerts:1

# The fleet: 4 days; the first 3 are the learner's history, the 4th comes after the swap.
"$CLI" synth --cells 4 --days 4 --step 3600 --features prb_dl,prb_ul --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --out "$TMP/s.csv" 2>/dev/null || { fail "synth"; exit 1; }
python3 - "$TMP/s.csv" "$TMP" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t0 = int(rows[0]["ts"])
with open(sys.argv[2] + "/hist.txt", "w") as h, open(sys.argv[2] + "/after.txt", "w") as a:
    for r in rows:
        m = {"cell": r["cell_id"], "ts": int(r["ts"]),
             "load_a": float(r["prb_dl"]), "load_b": float(r["prb_ul"])}
        (h if int(r["ts"]) < t0 + 3 * 86400 else a).write(r["cell_id"] + "|" + json.dumps(m) + "\n")
EOF
kcat -b "$EXT" -P -t kpis -K '|' -l "$TMP/hist.txt" || { fail "kcat produce"; exit 1; }

# member NAME: its configuration, own state directory and learned file, HTTP port 0
declare -A MPID MLOG
start_member() {
    mkdir -p "$TMP/$1"
    cat >"$TMP/$1/cfg.yaml" <<EOF
model:
  path: "$MODEL"
  source: kafka
  learned_path: "$TMP/$1/learned.safetensors"
kafka:
  brokers: "$EXT"
  group_id: learnkafka
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "500"
http:
  port: 0
snapshot:
  path: "$TMP/$1/state.snap"
demo:
  enabled: false
EOF
    MLOG[$1]="$TMP/$1.log"
    start_daemon "${MLOG[$1]}" ready -c "$TMP/$1/cfg.yaml"
    MPID[$1]=$DPID
    DPID=
}
# url NAME: the member's base URL (the port of its newest start: a re-exec binds anew)
url() { echo "http://127.0.0.1:$(grep -o 'listening on http://127.0.0.1:[0-9]*' "${MLOG[$1]}" | tail -1 | sed 's/.*://')"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

start_member a
start_member b
for m in a b; do
    f=$(curl -s "$(url $m)/v1/model" | jq_py '"load_a" in d["features"]')
    [ "$f" = False ] || fail "member $m: the shipped model already has load_a?"
done

# The learner: the topic's history, one round, the model in 3500-byte messages (its record,
# ~2 KB with the refit's, must fit in one beside the 1 KiB kept for the key and headers).
OUT="$TMP/learner/model.safetensors"
if "$CLI" learn --brokers "$EXT" --topic kpis --out "$OUT" --once --patch-len 4 \
    --kafka-property message.max.bytes=3500 2>"$TMP/learner.log" &&
    grep -q 'published' "$TMP/learner.log"; then
    HASH=$(jq_py 'd["hash"]' <"$OUT.json")
    ok "learner: history read from Kafka, $HASH published ($(grep -o '[0-9]* new records' "$TMP/learner.log"))"
else
    fail "learner: $(tail -3 "$TMP/learner.log")"
    exit 1
fi
chunks=$(kcat -b "$EXT" -C -t kpis.models -e -q -f '%k\n' | grep -c "^learned#$HASH#")
[ "$chunks" -ge 2 ] && ok "the model travelled in $chunks chunks" || fail "chunks on the topic: $chunks"

# Both members re-execute on the learned model (another KPI set) and serve the same hash.
for m in a b; do
    if wait_log "${MLOG[$m]}" 'restarting in place' 150 && wait_log "${MLOG[$m]}" "serving.*$HASH\|ready: model" 150; then
        for _ in $(seq 100); do
            j=$(curl -s "$(url $m)/v1/model") && [ "$(echo "$j" | jq_py 'd["serving"].get("hash")')" = "$HASH" ] && break
            sleep 0.1
        done
        got=$(echo "$j" | jq_py '(d["serving"].get("hash"), d["features"], d["serving"].get("record", {}).get("published"))')
        case $got in
        *"$HASH"*load_a*load_b*linear*) ok "member $m serves the learned model: $got" ;;
        *) fail "member $m: /v1/model says $got" ;;
        esac
        kill -0 "${MPID[$m]}" || fail "member $m exited"
    else
        fail "member $m did not swap: $(tail -3 "${MLOG[$m]}")"
    fi
done

# The day after: the members' cells are of load_a and load_b.
sleep 4 # the group settles after the re-executions
kcat -b "$EXT" -P -t kpis -K '|' -l "$TMP/after.txt"
served=0
for _ in $(seq 100); do
    served=0
    for c in cell0000 cell0001 cell0002 cell0003; do
        for m in a b; do
            curl -s "$(url $m)/v1/cells/$c/forecast" | grep -q '"load_a"' && served=$((served + 1))
        done
    done
    [ $served = 4 ] && break
    sleep 0.2
done
[ $served = 4 ] && ok "4 cells forecast as load_a/load_b" || fail "cells served with the learned KPIs: $served of 4"

# Hostile records: each refused with a reason, counted, the model in service kept.
H="$TMP/hostile"
mkdir -p "$H"
python3 - "$OUT" "$H" <<'EOF'
import json, struct, sys
src, h = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
def fnv(x):
    v = 0xcbf29ce484222325
    for c in x:
        v = ((v ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % v
def put(name, data, hdr):
    open(h + "/" + name, "wb").write(data)
    open(h + "/" + name + ".h", "w").write(" ".join("-H %s=%s" % kv for kv in hdr.items()))
real = fnv(b)
put("truncated", b[:100], {"cellcast-hash": real, "cellcast-size": len(b), "cellcast-chunks": 0})
put("too_large", b, {"cellcast-hash": real, "cellcast-size": 10**12, "cellcast-chunks": 0})
put("hash_mismatch", b, {"cellcast-hash": "0123456789abcdef", "cellcast-size": len(b), "cellcast-chunks": 0})
put("chunks_missing", b"chunked", {"cellcast-hash": "fedcba9876543210", "cellcast-size": 5000, "cellcast-chunks": 3})
# NaN in the last weight: the header's length, then the data; the last 4 bytes are a float
nan = b[:-4] + struct.pack("<f", float("nan"))
put("bad_model", nan, {"cellcast-hash": fnv(nan), "cellcast-size": len(nan), "cellcast-chunks": 0})
junk = b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":[1,2,3]}   " + bytes(range(200))
put("bad_model2", junk, {"cellcast-hash": fnv(junk), "cellcast-size": len(junk), "cellcast-chunks": 0})
put("bad_headers", b, {"cellcast-hash": "xyz", "cellcast-chunks": 0})
EOF
for r in truncated too_large hash_mismatch chunks_missing bad_model bad_model2 bad_headers; do
    # shellcheck disable=SC2046
    kcat -b "$EXT" -P -t kpis.models -p 0 -k learned $(cat "$H/$r.h") "$H/$r" ||
        fail "kcat: $r"
done
declare -A WANT=([truncated]=1 [too_large]=1 [hash_mismatch]=1 [chunks_missing]=1 [bad_model]=2 [bad_headers]=1)
for m in a b; do
    for _ in $(seq 100); do
        curl -s "$(url $m)/metrics" >"$TMP/$m.metrics"
        grep -q 'cellcast_models_refused_total{reason="bad_headers"} 1' "$TMP/$m.metrics" && break
        sleep 0.1
    done
    bad=""
    for r in "${!WANT[@]}"; do
        grep -q "cellcast_models_refused_total{reason=\"$r\"} ${WANT[$r]}\$" "$TMP/$m.metrics" || bad+=" $r"
    done
    h=$(curl -s "$(url $m)/v1/model" | jq_py 'd["serving"].get("hash")')
    if [ -z "$bad" ] && [ "$h" = "$HASH" ] && kill -0 "${MPID[$m]}" 2>/dev/null; then
        ok "member $m: 7 hostile records refused by reason, still serving $h"
    else
        fail "member $m: counts wrong for:$bad; serving $h; $(grep refused_total "$TMP/$m.metrics" | tr '\n' ' ')"
    fi
done
grep -q "refused (hash_mismatch)" "${MLOG[a]}" && ok "refusals are logged" || fail "no refusal in the log"

# both members stopped at once, as a service manager stops them (the close during the
# rebalance that follows: test_stop_together.sh)
for m in a b; do kill -TERM "${MPID[$m]}" 2>/dev/null; done
for m in a b; do wait "${MPID[$m]}" 2>/dev/null || fail "member $m did not stop cleanly"; done
[ "$FAILS" = 0 ] && echo "all ok" || exit 1
