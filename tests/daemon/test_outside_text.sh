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
# ~3 s.
#   usage: test_outside_text.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools curl python3
test_workdir outside-text

printf 'cell,site,region\nA1,Z\374rich,R1\n' >"$TMP/topo.csv" # ü in Latin-1
printf 'model:\n  path: "%s"\nkafka:\n  brokers: none\nhttp:\n  port: 0\n  post_kpis: open\ntopology:\n  path: "%s"\n' \
    "$ROOT/tests/data/golden/tiny.safetensors" "$TMP/topo.csv" >"$TMP/c.yaml"
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
import sys
b = open(sys.argv[1], "rb").read()
b.decode("utf-8")  # strict
assert b"\nab" not in b, "a raw newline from the id"' "$TMP/log" 2>"$TMP/py.err" &&
    ok "the log is UTF-8 text, ids escaped" || fail "the log: $(tail -1 "$TMP/py.err")"

[ "$FAILS" = 0 ] || exit 1
