#!/bin/bash
# test_outside_text.sh — bytes from outside that are not UTF-8 text, or that hold a newline,
# on their way into the daemon's outputs (tiny model, no Kafka, http.post_kpis open):
#   - a topology file saved as Latin-1 is refused at start, counted
#     (cellcast_topology_errors_total 1), its error naming line and column;
#   - GET /v1/cells/%FF%0A...: the 400 problem keeps its "detail" (json_string refused the
#     decoded id, and the field was dropped), the bad bytes shown as U+FFFD;
#   - POST /v1/kpis of a record whose cell id of 2-byte characters the decoder's message
#     cuts in the middle of one: the 422 names its reason and lists the refusal (it was
#     "problems/(null)" with an empty "errors");
#   - the log is UTF-8 text, one line per message (a newline in an id escaped).
# The model is the tiny one with what a model file from the models topic may carry: a quote
# and a backslash in a KPI name, a quote and a newline in its name; its JSON replies parse,
# with the names intact, and the text form of /v1/info keeps the name on one line. Then a
# daemon on a model without a name, named by its path that a cut to 159 bytes splits in a
# character: /readyz answered 500 and /metrics was not UTF-8; its file name, given by --set,
# holds a byte that is not UTF-8: /v1/model answered 500 and /v1/info lacked the model, and
# then dropped the "why" of its swap history's start (the path) and GET /v1/config the
# setting. Then the demo feed (embedded
# broker) on the odd model: its messages were not JSON (the KPI name unescaped), every one
# refused. ~9 s.
#   usage: test_outside_text.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools curl python3
test_workdir outside-text

MODEL="$TMP/odd.safetensors"
python3 - "$ROOT/tests/data/golden/tiny.safetensors" "$MODEL" <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["features"] = 'prb,thr"q\\1,users'
h["__metadata__"]["name"] = 'golden "tiny"\nx'
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PYEOF

printf 'cell,site,region\nA1,Z\374rich,R1\n' >"$TMP/topo.csv" # ü in Latin-1
printf 'model:\n  path: "%s"\nkafka:\n  brokers: none\nhttp:\n  port: 0\n  post_kpis: open\ntopology:\n  path: "%s"\n' \
    "$MODEL" "$TMP/topo.csv" >"$TMP/c.yaml"
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

curl -s "$U/metrics" | grep -q '^cellcast_topology_errors_total 1$' &&
    grep -q 'topo.csv:2: site value is not UTF-8' "$TMP/log" &&
    ok "a Latin-1 topology file is refused and counted, its error naming line and column" ||
    fail "Latin-1 topology: $(curl -s "$U/metrics" | grep '^cellcast_topology_errors_total'), log: $(grep topology "$TMP/log")"

# check_json NAME STATUS WANT_STATUS PYTHON_ASSERTION: the body in $TMP/body
check_json() {
    local name=$1 got=$2 want=$3 expr=$4
    if [ "$got" = "$want" ] && python3 -c "
import json, sys
d = json.load(open(sys.argv[1], encoding='utf-8'))
assert $expr, d" "$TMP/body" 2>"$TMP/py.err"; then
        ok "$name"
    else
        fail "$name: HTTP $got (want $want): $(cat "$TMP/body") $(tail -1 "$TMP/py.err")"
    fi
}

st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/v1/cells/%FF%0Aab")
check_json "GET /v1/cells/%FF%0Aab: 400 with its detail" "$st" 400 \
    "d['type'].endswith('/bad-cell-id') and \"'\ufffd\nab' is not a valid cell id\" in d['detail']"

python3 -c '
import json, sys, time
print(json.dumps({"cell": "a" + "\u00e9" * 30, "ts": int(time.time()) // 900 * 900,
                  "kpis": {"prb": 1}}, ensure_ascii=False))' >"$TMP/kpis.json"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$TMP/kpis.json" "$U/v1/kpis")
check_json "POST /v1/kpis, a cell id cut mid-character in the message: 422 naming the refusal" \
    "$st" 422 "d['type'].endswith('/bad_cell_id') and len(d['errors']) == 1 and d['errors'][0]['reason'] == 'bad_cell_id' and d['errors'][0]['message'].startswith('cell id \"a\u00e9') and 'bad_cell_id: cell id' in d['detail']"

python3 -c '
import json, sys, time
t = int(time.time()) // 900 * 900
print(json.dumps([{"cell": "A1", "ts": t - 900 * i, "kpis": {"prb": 1 + i % 3, "thr\"q\\1": 5, "users": 2}}
                  for i in range(39, -1, -1)]))' >"$TMP/ok.json"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$TMP/ok.json" "$U/v1/kpis")
check_json "POST /v1/kpis under a KPI name with a quote and a backslash: all 40 accepted" "$st" 202 \
    "d['accepted'] == 40"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/v1/model")
check_json "GET /v1/model: the odd names intact" "$st" 200 \
    'd["name"] == "golden \"tiny\"\nx" and d["features"][1] == "thr\"q\\1"'
# the text form of /v1/info is key:value lines: the name's newline must not start a line
curl -s "$U/v1/info?format=text" >"$TMP/info.txt"
grep -qxF 'name:golden "tiny"\x0ax' "$TMP/info.txt" && ! grep -qx 'x' "$TMP/info.txt" &&
    ok "GET /v1/info?format=text: the model name's newline escaped, one line" ||
    fail "/v1/info?format=text: $(grep -A1 '^name:' "$TMP/info.txt")"
for _ in $(seq 50); do
    st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/v1/cells/A1/forecast")
    [ "$st" = 200 ] && break
    sleep 0.1
done
check_json "GET /v1/cells/A1/forecast: JSON, the odd KPI name a key" "$st" 200 \
    'd["kpis"][1] == "thr\"q\\1" and "thr\"q\\1" in d["forecast"][0]["values"] and d["model"] == "golden \"tiny\"\nx"'

python3 -c '
import sys
b = open(sys.argv[1], "rb").read()
b.decode("utf-8")  # strict
assert b"\nab" not in b and b"\nx" not in b, "a raw newline from an id or the model name"' \
    "$TMP/log" 2>"$TMP/py.err" &&
    ok "the log is UTF-8 text, ids and names escaped" || fail "the log: $(tail -1 "$TMP/py.err")"
stop_daemon

# a model without a name is named by its path, cut to 159 bytes: here in the middle of a
# 2-byte character (a directory named in Latin letters with accents); /readyz answered 500
# (json_pack refused the name) and /metrics held bytes that are not UTF-8
python3 - "$ROOT/tests/data/golden/tiny.safetensors" "$TMP" <<'PYEOF'
import json, os, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"].pop("name", None)
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
base = sys.argv[2].encode() + b"/"
pad = b"a" * ((159 - len(base)) % 2 == 0)  # byte 158 the first of an "\xc3\xa9"
d = base + pad + "\u00e9".encode() * 80
os.mkdir(d)
open(d + b"/m\xfc.safetensors", "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
open(sys.argv[2] + "/longdir", "wb").write(d)
PYEOF
# (its file name holds a Latin-1 byte, which only --set can give: YAML is UTF-8)
printf 'model:\n  path: "%s"\nkafka:\n  brokers: none\nhttp:\n  port: 0\n' "$MODEL" >"$TMP/c3.yaml"
start_daemon "$TMP/log3" health -c "$TMP/c3.yaml" --set model.path="$(cat "$TMP/longdir")/m$(printf '\374').safetensors"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/readyz")
check_json "a model named by its long path, cut at 159 bytes: /readyz 200, the name UTF-8" "$st" 200 \
    'd["model"].endswith("\u00e9") and len(d["model"].encode()) in (157, 158)'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/v1/model")
check_json "GET /v1/model with a model.path that is not UTF-8: 200, the path with U+FFFD" "$st" 200 \
    'd["path"].endswith("/m\ufffd.safetensors")'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/v1/config")
check_json "GET /v1/config: model.path there, with U+FFFD" "$st" 200 \
    'd["model"]["path"].endswith("/m\ufffd.safetensors")'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/v1/info")
check_json "GET /v1/info: the model's section there, its path with U+FFFD" "$st" 200 \
    'd["model"]["path"].endswith("/m\ufffd.safetensors")'
curl -s "$U/metrics" >"$TMP/metrics3"
python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$TMP/metrics3" 2>"$TMP/py.err" &&
    ok "/metrics is UTF-8 with that name" || fail "/metrics: $(tail -1 "$TMP/py.err")"
stop_daemon

# the demo feed on that model: its messages are JSON (the model's file name holds a byte that
# is not UTF-8: with Kafka, GET /v1/model lists the start of its swap history by that path)
MODEL_L1="$TMP/odd$(printf '\374').safetensors"
cp "$MODEL" "$MODEL_L1"
start_daemon "$TMP/log2" health -c "$ROOT/conf/cellcast.yaml" --set http.port=0 \
    --set snapshot.path= --set demo.backfill_steps=20 --set model.path="$MODEL_L1"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$U/v1/model")
check_json "GET /v1/model: the start in the swap history names the path, with U+FFFD" "$st" 200 \
    'd["serving"]["history"][0]["event"] == "start" and d["serving"]["history"][0]["why"].endswith("/odd\ufffd.safetensors")'
for _ in $(seq 100); do
    curl -s "$U/metrics" >"$TMP/metrics"
    grep -q '^cellcast_ingest_records_total [1-9]' "$TMP/metrics" && break
    sleep 0.1
done
grep -q '^cellcast_ingest_records_total [1-9]' "$TMP/metrics" &&
    grep -q '^cellcast_ingest_invalid_total{reason="not_json"} 0$' "$TMP/metrics" &&
    ok "the demo feed under a KPI name with a quote: $(grep '^cellcast_ingest_records_total' "$TMP/metrics" | cut -d' ' -f2) records, none refused" ||
    fail "demo feed: $(grep -E '^cellcast_ingest_(records_total|invalid_total.*not_json)' "$TMP/metrics" | tr '\n' ' ')"

[ "$FAILS" = 0 ] || exit 1
