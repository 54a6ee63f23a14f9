#!/bin/bash
# test_http.sh — black-box test of cellcastd's HTTP API: starts the real daemon on loopback
# with a temporary config (embedded Kafka broker, a tiny model), feeds it through
# POST /v1/kpis, and checks forecasts, every HTTP error path (status + problem+json),
# the connection limit, /metrics counting, that proto/openapi.yaml lists exactly the routes
# the server answers, and that SIGTERM exits 0.
# With the `cellcast` CLI as third argument it also checks that the served forecast equals
# `cellcast forward` on the same history (same engine, f16 KV as the daemon's default).
#   usage: test_http.sh CELLCASTD SOURCE_ROOT [CELLCAST]
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
CLI=${3:-}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init http
# the tiny model (F=3 (prb,thr,users), P=4, HZ=6, S=900) with a trainer's record added to its
# metadata, which GET /v1/model lists: same tensors, a new header
MODEL="$TMP/tiny-meta.safetensors"
$PY - "$ROOT/tests/data/golden/tiny.safetensors" "$MODEL" <<'PY' || { echo "FAIL: model copy"; exit 1; }
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
head.setdefault("__metadata__", {}).update({"command": "cellcast train --data h.csv", "val_mae_vs_last": "0.8123",
                                           "val_mse_vs_last": "0.7", "val_mae_vs_last_kpi": "0.75,1.13,0.6"})
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: embedded
  group_id: test-http
  embedded_partitions: 2
http:
  port: 0
  post_kpis: open
  max_body_bytes: 8192
  max_connections: 3
ingest:
  batch_ms: 5
log:
  level: info
YAML

"$CELLCASTD" -c "$TMP/c.yaml" --check-config >/dev/null || { echo "FAIL: --check-config"; exit 1; }
# --check-config refuses what used to pass and fail later: a FIFO as snapshot.path (the
# start hung on it), a device node (replaced by a regular file at shutdown), a URL that is
# not http(s), an illegal Kafka topic name
mkfifo "$TMP/fifo.snap"
for bad in "snapshot.path=$TMP/fifo.snap|a FIFO" "snapshot.path=/dev/null|a character device" \
    "http.advertise=ftp://x|not an http:// or https:// URL" \
    "kafka.topics=kpis,a b|not a Kafka topic name" "kafka.dead_letter_topic=..|not a Kafka topic name"; do
    set=${bad%%|*} want=${bad#*|}
    if out=$("$CELLCASTD" -c "$TMP/c.yaml" --set "$set" --check-config 2>&1); then
        fail "--check-config --set $set passed"
    else
        case $out in *"$want"*) ;; *) fail "--check-config --set $set: '$out' lacks '$want'" ;; esac
    fi
done
# The README's quick start runs the shipped configuration: it must keep the demo feed on
# (conf/cellcast.yaml is regenerated from the table, whose default is off).
if "$CELLCASTD" -c "$ROOT/conf/cellcast.yaml" --print-config |
    awk '/^demo:/ { d = 1 } d && /^  enabled:/ { print $2; exit }' | grep -qx true; then
    ok "conf/cellcast.yaml keeps the quick start's demo feed on"
else
    fail "conf/cellcast.yaml: demo.enabled is not true (the quick start would show no cells)"
fi
# ... and is otherwise the table's defaults, every value and comment (a default changed in
# the table and not here would leave the shipped daemon on the old value)
if "$CELLCASTD" --print-default-config |
    awk '/^demo:/{d=1} /^[a-z]/ && !/^demo:/{d=0} d && /^  enabled: false$/{print "  enabled: true"; next} {print}' |
    diff - "$ROOT/conf/cellcast.yaml" >"$TMP/conf.diff"; then
    ok "conf/cellcast.yaml is cellcastd --print-default-config with the demo feed on"
else
    fail "conf/cellcast.yaml differs from --print-default-config (regenerate it): $(head -c 600 "$TMP/conf.diff")"
fi
# --check-config refuses what would fail later (each with the key in the message)
bad_config() { # bad_config WHAT-IN-ERROR ARG...
    local want=$1 out
    shift
    if out=$(timeout 10 "$CELLCASTD" "$@" --check-config 2>&1); then
        echo "FAIL: --check-config passed $*"; FAILS=$((FAILS + 1))
    elif ! grep -qF -- "$want" <<<"$out"; then
        echo "FAIL: --check-config $*: '$out' lacks '$want'"; FAILS=$((FAILS + 1))
    fi
}
# the NAB settings as daemon keys, as the measurement log (`git show 0c50596:docs/operations.md` §7) gives them: accepted and applied
$PY - "$ROOT/docs/operations.md" "$TMP/c.yaml" "$TMP/nab.yaml" <<'PY' || fail "docs/operations.md: no alerts block after 'The NAB settings as the daemon's keys'"
import sys
doc, base, out = sys.argv[1:]
text = open(doc).read()
i = text.index("The NAB settings as the daemon's keys")
a = text.index("```yaml\n", i) + len("```yaml\n")
block = text[a:text.index("```", a)]
assert block.startswith("alerts:\n"), block
open(out, "w").write(open(base).read() + block)
PY
if "$CELLCASTD" -c "$TMP/nab.yaml" --check-config >/dev/null 2>"$TMP/nab.err" &&
    "$CELLCASTD" -c "$TMP/nab.yaml" --print-config | grep -A20 '^alerts:' | grep -q '^  warn_z: 20$'; then
    ok "the docs' NAB settings block is a valid alerts config (warn_z 20 applied)"
else
    fail "the docs' NAB settings block: $(cat "$TMP/nab.err")"
fi
bad_config "kafka.properties.no.such.property" -c "$TMP/c.yaml" --set kafka.properties.no.such.property=1
bad_config "kafka.properties.session.timeout.ms" -c "$TMP/c.yaml" --set kafka.properties.session.timeout.ms=soon
bad_config "http.bind" -c "$TMP/c.yaml" --set http.bind=999.1.1.1
bad_config "snapshot.path" -c "$TMP/c.yaml" --set snapshot.path=/nonexistent/dir/state.snap
bad_config "ingest.fields.x" -c "$TMP/c.yaml" --set ingest.fields.x=no_such_kpi
bad_config "is a directory" -c "$TMP"
mkfifo "$TMP/fifo" && bad_config "not a regular file" -c "$TMP/fifo"
"$CELLCASTD" -c "$TMP/c.yaml" --set http.bind=::1 --set snapshot.path="$TMP/s.snap" \
    --set kafka.properties.client.id=x --check-config >/dev/null || { echo "FAIL: --check-config of a good config"; FAILS=$((FAILS + 1)); }
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

# check METHOD PATH STATUS [BODY-FILE] — the status, and problem+json for errors
check() {
    local method=$1 path=$2 want=$3 body=${4:-}
    local args=(-s -o "$TMP/body" -D "$TMP/hdr" -w '%{http_code}' -X "$method")
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "@$body")
    local got
    got=$(curl "${args[@]}" "$U$path")
    if [ "$got" != "$want" ]; then
        fail "$method $path: status $got, want $want: $(head -c 300 "$TMP/body")"
        return
    fi
    if [ "$want" -ge 400 ]; then
        grep -qi '^content-type: application/problem+json' "$TMP/hdr" ||
            fail "$method $path: $want without application/problem+json"
        $PY - "$TMP/body" "$want" <<'PYEOF' || fail "$method $path: bad problem body: $(head -c 300 "$TMP/body")"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["status"] == int(sys.argv[2]), p
assert p["type"] and p["title"] and p["detail"], p
PYEOF
    fi
}

# --- history for two cells through POST /v1/kpis (an array, ts as unix seconds and RFC 3339)
$PY - "$TMP" <<'PYEOF'
import json, math, sys
tmp = sys.argv[1]
S, p0 = 900, 1714557600 // 900
recs = []
for i in range(40):
    for c, amp in (("c1", 1.0), ("enb-7/2", 2.0)):
        v = 50 + 20 * amp * math.sin(i / 6.0)
        recs.append({"cell": c, "ts": (p0 + i) * S, "kpis": {"prb": v, "thr": v * 3, "users": 10 + i % 7}})
json.dump(recs[:40], open(f"{tmp}/a.json", "w"))
json.dump(recs[40:], open(f"{tmp}/b.json", "w"))
json.dump({"cell": "cold1", "ts": "2024-05-01T10:00:00Z", "prb": 1, "thr": 2, "users": 3, "vendor": "x"}, open(f"{tmp}/cold.json", "w"))
json.dump([{"cell": "c9", "ts": p0 * S, "prb": 1, "thr": 2, "users": 3}, {"cell": "c9", "prb": 1}], open(f"{tmp}/mixed.json", "w"))
json.dump({"cell": "x"}, open(f"{tmp}/nots.json", "w"))
json.dump([{"cell": "bad id!", "ts": 1, "prb": 1}], open(f"{tmp}/badid.json", "w"))
open(f"{tmp}/notjson.json", "w").write("{not json")
open(f"{tmp}/big.json", "w").write(json.dumps([{"cell": "b", "ts": 1, "prb": 1}] * 330))
PYEOF
check POST /v1/kpis 202 "$TMP/a.json"
check POST /v1/kpis 202 "$TMP/b.json"
check POST /v1/kpis 202 "$TMP/cold.json"
check POST /v1/kpis 202 "$TMP/mixed.json"
$PY -c "import json,sys; d=json.load(open('$TMP/body')); assert d['accepted']==1 and d['rejected']==1, d" ||
    fail "mixed message: $(cat "$TMP/body")"
# a far-future time is refused against the clock (ingest.max_future_s), not applied
echo '{"cell":"c1","ts":"9999-12-31T23:45:00Z","prb":1,"thr":2,"users":3}' >"$TMP/future.json"
# nothing accepted: 422 (as for invalid records), each refusal named with its reason (it
# answered 202 with an empty errors list)
check POST /v1/kpis 422 "$TMP/future.json"
$PY - "$TMP/body" <<'PYEOF' || fail "far-future record: $(cat "$TMP/body")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["accepted"] == 0 and d["rejected"] == 1 and d["type"].endswith("/future_ts"), d
assert [(e["element"], e["reason"]) for e in d["errors"]] == [(0, "future_ts")], d
assert "9999-12-31T23:45:00Z" in d["errors"][0]["message"] and "ingest.max_future_s = 900" in d["errors"][0]["message"], d
assert "element 0: future_ts" in d["detail"], d
PYEOF
# some accepted: 202, the future one named in errors
echo "[{\"cell\":\"c9\",\"ts\":$((1714557600 + 900)),\"prb\":1,\"thr\":2,\"users\":3},
  {\"cell\":\"bad id!\",\"ts\":1,\"prb\":1},
  {\"cell\":\"c9\",\"ts\":\"9999-12-31T23:45:00Z\",\"prb\":1}]" >"$TMP/future2.json"
check POST /v1/kpis 202 "$TMP/future2.json"
$PY - "$TMP/body" <<'PYEOF' || fail "future record beside a valid one: $(cat "$TMP/body")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["accepted"] == 1 and d["rejected"] == 2, d
assert sorted((e["element"], e["reason"]) for e in d["errors"]) == [(1, "bad_cell_id"), (2, "future_ts")], d
PYEOF

ok=
for _ in $(seq 50); do
    [ "$(curl -s -o "$TMP/fc" -w '%{http_code}' "$U/v1/cells/c1/forecast")" = 200 ] &&
        [ "$(curl -s -o "$TMP/fc2" -w '%{http_code}' "$U/v1/cells/enb-7%2F2/forecast?level=0.95&kpis=prb,users&horizon=3")" = 200 ] && ok=1 && break
    sleep 0.1
done
[ -n "$ok" ] || fail "no forecast for c1 / enb-7/2: $(cat "$TMP/fc" "$TMP/fc2")"
$PY - "$TMP/fc" "$TMP/fc2" <<'PYEOF' || fail "forecast content"
import json, math, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
S, p0 = 900, 1714557600 // 900
for d, h, kp in ((a, 6, ["prb", "thr", "users"]), (b, 3, ["prb", "users"])):
    assert d["observed_step"] == p0 + 39, d["observed_step"]
    assert d["horizon"] == h and len(d["forecast"]) == h and d["kpis"] == kp, d
    for k, f in enumerate(d["forecast"]):
        assert f["step"] == p0 + 40 + k and f["ts"].endswith("Z"), f
        assert sorted(f["values"]) == sorted(kp), f
        for v in f["values"].values():
            assert all(math.isfinite(v[x]) for x in ("mean", "lower", "upper", "sd")), v
            assert v["lower"] <= v["mean"] <= v["upper"] and v["sd"] > 0, v
assert abs(b["z"] - 1.959964) < 1e-4 and abs(a["z"] - 1.281552) < 1e-4
PYEOF

# --- the default forecast reply is cached per published forecast (api.c): explicit default
# parameters get the same bytes, and a new step replaces it (never a stale reply)
curl -s "$U/v1/cells/enb-7%2F2/forecast" >"$TMP/e1"
curl -s "$U/v1/cells/enb-7%2F2/forecast" >"$TMP/e1b"
curl -s "$U/v1/cells/enb-7%2F2/forecast?kpis=users,prb,thr&horizon=6&level=0.8" >"$TMP/e1c"
cmp -s "$TMP/e1" "$TMP/e1b" && cmp -s "$TMP/e1" "$TMP/e1c" || fail "default forecast replies differ"
echo '{"cell": "enb-7/2", "ts": 1714593600, "kpis": {"prb": 61, "thr": 183, "users": 12}}' >"$TMP/next.json"
check POST /v1/kpis 202 "$TMP/next.json"
for _ in $(seq 50); do
    curl -s "$U/v1/cells/enb-7%2F2/forecast" >"$TMP/e2"
    grep -q '"observed_step":1905104,' "$TMP/e2" && break
    sleep 0.1
done
curl -s "$U/v1/cells/enb-7%2F2/forecast?horizon=6" >"$TMP/e2b"
$PY - "$TMP/e1" "$TMP/e2" "$TMP/e2b" <<'PYEOF' || fail "forecast after a new step: $(head -c 200 "$TMP/e2")"
import json, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:4])
assert a["observed_step"] == 1714557600 // 900 + 39 and b["observed_step"] == a["observed_step"] + 1, (a["observed_step"], b["observed_step"])
assert b["forecast"][0]["step"] == b["observed_step"] + 1 and b["forecast"] != a["forecast"]
assert b == c, "cached and explicit-parameter replies differ"
PYEOF

# --- the served forecast equals `cellcast forward` on the same history
if [ -n "$CLI" ]; then
    SERIES="$ROOT/tests/data/golden/series.csv"
    "$CLI" forward --model "$MODEL" --input "$SERIES" --kv f16 >"$TMP/fwd.json" || fail "cellcast forward"
    $PY - "$SERIES" "$TMP/series.json" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
recs = [{"cell": "golden", "ts": int(r["ts"]), "kpis": {k: float(v) for k, v in r.items() if k != "ts"}}
        for r in rows]
for i in range(0, len(recs), 40):  # under http.max_body_bytes
    json.dump(recs[i:i + 40], open(f"{sys.argv[2]}.{i // 40:02d}", "w"))
PYEOF
    for f in "$TMP"/series.json.*; do check POST /v1/kpis 202 "$f"; done
    for _ in $(seq 50); do
        curl -s "$U/v1/cells/golden/forecast" >"$TMP/gfc"
        $PY -c "import json,sys; d=json.load(open('$TMP/gfc')); sys.exit(0 if d.get('observed_step')==$(tail -1 "$SERIES" | cut -d, -f1)//900 else 1)" 2>/dev/null && break
        sleep 0.1
    done
    $PY - "$TMP/fwd.json" "$TMP/gfc" <<'PYEOF' || fail "forecast differs from cellcast forward"
import json, math, sys
fw = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
d = json.load(open(sys.argv[2]))
kp = d["kpis"]
F, HZ = len(kp), d["horizon"]
assert len(fw["y"]) == F * HZ * 2, (len(fw["y"]), F, HZ)
assert d["observed_step"] * d["step_seconds"] == fw["ts"], (d["observed_step"], fw["ts"])
worst = 0
for f, name in enumerate(kp):
    for k in range(HZ):
        y0, y1 = fw["y"][(f * HZ + k) * 2], fw["y"][(f * HZ + k) * 2 + 1]
        mean = y0 * fw["sigma"][f] + fw["mu"][f]
        sd = math.exp(y1) * fw["sigma"][f]
        got = d["forecast"][k]["values"][name]
        for a, b in ((got["mean"], mean), (got["sd"], sd)):
            worst = max(worst, abs(a - b) / max(abs(b), 1e-9 * fw["sigma"][f], 1e-30))
assert worst < 2e-5, f"largest relative difference {worst:.3g}"
print(f"forecast = cellcast forward (largest relative difference {worst:.2g})")
PYEOF
fi

check GET /healthz 200
check GET /v1/info 200
check GET "/v1/info?format=text" 200
grep -q '^# cells' "$TMP/body" && grep -q '^resident:' "$TMP/body" || fail "info as text: $(head -c 300 "$TMP/body")"
check GET "/v1/info?format=xml" 422
check GET /v1/config 200
check GET /v1/model 200
$PY -c "
import json; d = json.load(open('$TMP/body'))
assert d['linear_window'] == 0 and d['metadata']['val_mae_vs_last'] == '0.8123', d
assert d['metadata']['command'] == 'cellcast train --data h.csv', d" &&
    ok "/v1/model: linear_window and the trainer's metadata" || fail "/v1/model: $(cat "$TMP/body")"
if [ -n "$CLI" ]; then # the same metadata as cellcast info's
    "$CLI" info --model "$MODEL" | $PY -c "
import json, sys; i = json.load(sys.stdin); d = json.load(open('$TMP/body'))
assert i['metadata'] == d['metadata'] and i['hparams']['linear_window'] == d['linear_window'], (i, d)" ||
        fail "/v1/model metadata differs from cellcast info's"
fi
# the trainer's validation ratios as gauges, and the start log names the KPI that lost (thr)
curl -sf "$U/metrics" >"$TMP/m" || fail "GET /metrics"
grep -qx 'cellcast_model_validation_vs_last{metric="mae"} 0.8123' "$TMP/m" &&
    grep -qx 'cellcast_model_validation_vs_last{metric="mse"} 0.7' "$TMP/m" &&
    grep -qx 'cellcast_model_validation_mae_vs_last{kpi="thr"} 1.13' "$TMP/m" &&
    grep -qx 'cellcast_model_validation_mae_vs_last{kpi="users"} 0.6' "$TMP/m" &&
    grep "model's mean was worse than the last value" "$TMP/log" | grep -q "by KPI: thr 1.13)" &&
    ok "the model's validation ratios: gauges by KPI, and the start log names thr" ||
    fail "model ratios: $(grep model_validation "$TMP/m"); log: $(grep "last value" "$TMP/log")"
check GET "/v1/cells?limit=1" 200
NCELLS=4; [ -n "$CLI" ] && NCELLS=5
$PY -c "import json; d=json.load(open('$TMP/body')); assert len(d['cells'])==1 and d['next']=='c1' and d['total']==$NCELLS, d" ||
    fail "paging: $(cat "$TMP/body")"
check GET "/v1/cells?limit=10&after=c1" 200
$PY -c "import json; d=json.load(open('$TMP/body')); assert [c['id'] for c in d['cells'] if c['id']!='golden']==['c9','cold1','enb-7/2'] and d['next'] is None, d" ||
    fail "paging after: $(cat "$TMP/body")"
check GET /v1/cells/c1 200
$PY -c "import json; d=json.load(open('$TMP/body')); assert d['counts']['steps']==40 and d['state']=='live', d" ||
    fail "cell c1: $(cat "$TMP/body")"
check GET "/v1/cells/c1/history?since=2024-05-01T18:00:00Z" 200
$PY -c "import json; d=json.load(open('$TMP/body')); assert len(d['steps'])==8 and d['steps'][0]['ts']=='2024-05-01T18:00:00Z' and d['steps'][-1]['ts']=='2024-05-01T19:45:00Z', d" ||
    fail "history since: $(head -c 300 "$TMP/body")"
check GET "/v1/cells/c1/history" 200 # the ring holds at least max(N*P+P, M) = 24 steps of the tiny model
$PY -c "import json; d=json.load(open('$TMP/body')); st=[s['step'] for s in d['steps']]; assert len(st)>=24 and st[-1]==1714557600//900+39 and st==list(range(st[0],st[-1]+1)) and not any(s['imputed'] for s in d['steps']), d" ||
    fail "history: $(head -c 300 "$TMP/body")"
check GET /v1/cells/c1/attention 200
$PY -c "import json; d=json.load(open('$TMP/body')); w=d['kpis']['prb']; assert len(w)==d['layers'] and len(w[0])==d['heads'] and abs(sum(w[0][0])-1)<1e-3 and len(w[0][0])==len(d['tokens']), d" ||
    fail "attention: $(head -c 300 "$TMP/body")"
wait_http "$U/readyz" 100 # ready once the consumer has its partitions (group join: ~3 s)
check GET /readyz 200

# --- every error path
check GET /nope 404
check GET /v1/cells/nosuch 404
check GET /v1/cells/nosuch/forecast 404
check GET /v1/cells/nosuch/history 404
check GET /v1/cells/nosuch/attention 404
check GET "/v1/cells/bad%20id/forecast" 400
check GET /v1/cells/c1/forecast/extra 404
check POST /healthz 405
grep -qi '^allow: GET' "$TMP/hdr" || fail "405 without Allow: GET"
check DELETE /v1/kpis 405
grep -qi '^allow: POST' "$TMP/hdr" || fail "405 without Allow: POST"
check PUT /v1/cells/c1 405
check GET /v1/kpis 405
check GET "/v1/cells/c1/forecast?horizon=abc" 400
check GET "/v1/cells/c1/forecast?horizon=0" 422
check GET "/v1/cells/c1/forecast?horizon=7" 422
check GET "/v1/cells/c1/forecast?level=x" 400
check GET "/v1/cells/c1/forecast?level=1" 422
check GET "/v1/cells/c1/forecast?kpis=prb,nosuch" 422
check GET "/v1/cells/c1/attention?kpis=nosuch" 422
check GET "/v1/cells/c1/history?since=yesterday" 400
check GET "/v1/cells?limit=x" 400
check GET "/v1/cells?limit=0" 422
check GET /v1/cells/cold1/forecast 503
grep -qi '^retry-after:' "$TMP/hdr" || fail "503 without Retry-After"
check POST /v1/kpis 400 "$TMP/notjson.json"
check POST /v1/kpis 422 "$TMP/nots.json"
check POST /v1/kpis 422 "$TMP/badid.json"
check POST /v1/kpis 413 "$TMP/big.json"
: >"$TMP/empty.json"
check POST /v1/kpis 400 "$TMP/empty.json"

# --- connection limit (3): every connection counts from accept, idle or not; the 4th
# concurrent one is closed at once (counted), and the log is not flooded
$PY - "$PORT" <<'PYEOF' || fail "connection limit"
import http.client, json, sys
port = int(sys.argv[1])
conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for _ in range(4)]
codes = []
for c in conns:
    try:
        c.request("GET", "/healthz")
        r = c.getresponse()
        codes.append(r.status)
        r.read()
    except (ConnectionError, http.client.HTTPException):
        codes.append("closed")
assert codes == [200, 200, 200, "closed"], codes
for c in conns:
    c.close()
PYEOF
sleep 0.2
shed0=$(curl -sf "${U}/metrics" | awk '$1 == "cellcast_http_connections_refused_total" { print $2 }')
# 20 idle connections that never send a byte (bash /dev/tcp; loopback, bounded)
IDLE=()
for _ in $(seq 20); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$PORT" && IDLE+=("$fd")
done
sleep 0.5
for fd in "${IDLE[@]}"; do exec {fd}>&-; done
# until the daemon has seen the closes (a loaded machine can take longer than a fixed 0.3 s)
for _ in $(seq 50); do
    curl -sf "$U/metrics" | grep -q '^cellcast_http_connections [0-2]$' && break
    sleep 0.1
done
check GET /metrics 200
shed=$(awk '$1 == "cellcast_http_connections_refused_total" { print $2 }' "$TMP/body")
[ $((shed - shed0)) -ge 17 ] || fail "idle connections beyond http.max_connections: $((shed - shed0)) shed, want >= 17"
grep -q '^cellcast_http_connections [0-2]$' "$TMP/body" || fail "connections not released: $(grep '^cellcast_http_connections ' "$TMP/body")"
nlog=$(grep -c "closed at accept" "$TMP/log")
[ "$nlog" -le 6 ] || fail "$nlog log lines for shed connections (rate limit: 5 per 10 s)"
check GET /healthz 200

# --- /metrics counted the routes and statuses
check GET /metrics 200
for want in 'cellcast_http_requests_total{route="/v1/kpis",code="413"} 1' \
            'cellcast_http_requests_total{route="unmatched",code="404"} 2' \
            'cellcast_http_requests_total{route="/v1/cells/{id}/forecast",code="422"} 4' \
            'cellcast_ingest_invalid_total{reason="missing_ts"} 2' \
            'cellcast_ingest_invalid_total{reason="bad_cell_id"} 2' \
            'cellcast_ingest_invalid_total{reason="not_json"} 1' \
            'cellcast_ingest_unmapped_fields_total 1' \
            'cellcast_ingest_out_of_range_total{reason="future_ts"} 2' \
            "cellcast_cells $NCELLS"; do
    grep -qF "$want" "$TMP/body" || fail "/metrics lacks '$want'"
done

# --- OpenAPI lists exactly the routes the server answers (cellcastd --routes)
"$CELLCASTD" --routes >"$TMP/routes"
if ! $PY -c 'import yaml' 2>/dev/null; then
    echo "SKIP: the OpenAPI check needs python3-yaml"
else
$PY - "$ROOT/proto/openapi.yaml" "$TMP/routes" <<'PYEOF' || fail "openapi.yaml vs routes"
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
assert doc["openapi"].startswith("3."), doc["openapi"]
api = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops if m in ("get", "post", "put", "delete", "patch")}
srv = set()
for line in open(sys.argv[2]):
    methods, path = line.split()
    srv |= {(m, path) for m in methods.split(",")}
assert api == srv, f"only in openapi: {api - srv}; only in the server: {srv - api}"
PYEOF
fi

# --- SIGTERM: drain, commit, exit 0
stop_daemon
rc=$?
[ "$rc" = 0 ] || fail "SIGTERM exit status $rc"
grep -q "stopped cleanly" "$TMP/log" || fail "no clean stop in the log"
grep -q "offsets committed" "$TMP/log" || fail "no commit on shutdown"

# --- out of descriptors: a daemon with 48 descriptors (no Kafka) and more idle connections
# than it can accept pauses accept (counted, the log rate-limited) instead of spinning, and
# answers again once they close
cat >"$TMP/fd.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: none
http:
  port: 0
  max_connections: 1000
YAML
(ulimit -n 48 && exec "$CELLCASTD" -c "$TMP/fd.yaml") >"$TMP/fdlog" 2>&1 &
DPID=$!
for _ in $(seq 100); do PORT=$(daemon_port "$TMP/fdlog"); [ -n "$PORT" ] && break; sleep 0.1; done
IDLE=()
for _ in $(seq 60); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$PORT" && IDLE+=("$fd")
done
sleep 1
cpu=$(ps -o time= -p "$DPID")
for fd in "${IDLE[@]}"; do exec {fd}>&-; done
sleep 0.5
body=$(curl -sf -m 5 "http://127.0.0.1:$PORT/metrics") || fail "no answer after the descriptors were freed"
errs=$(echo "$body" | awk '$1 == "cellcast_http_accept_errors_total" { print $2 }')
[ "${errs:-0}" -ge 1 ] && [ "$errs" -le 40 ] || fail "accept errors: '$errs', want 1..40 (paused 250 ms each)"
nlog=$(grep -c 'accept failed' "$TMP/fdlog")
[ "$nlog" -le 6 ] || fail "$nlog log lines for failed accepts (rate limit: 5 per 10 s)"
case $cpu in 00:00:0[0-1] | 0:0[0-1]) ;; *) fail "daemon CPU time $cpu while out of descriptors" ;; esac
grep -q 'http.max_connections = 1000 is above the descriptor limit (RLIMIT_NOFILE 48)' "$TMP/fdlog" ||
    fail "no warning that http.max_connections exceeds RLIMIT_NOFILE: $(grep -i descriptor "$TMP/fdlog")"
stop_daemon >/dev/null

# --- slow request heads: one byte a second (each read within http.timeout_s) used to hold
# a connection for ever; http.header_timeout_s bounds the whole head. A keep-alive
# connection idle between requests has no such deadline, and normal requests are served.
cat >"$TMP/slow.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: none
http:
  port: 0
  timeout_s: 3
  header_timeout_s: 2
YAML
"$CELLCASTD" -c "$TMP/slow.yaml" >"$TMP/slowlog" 2>&1 &
DPID=$!
for _ in $(seq 100); do PORT=$(daemon_port "$TMP/slowlog"); [ -n "$PORT" ] && break; sleep 0.1; done
$PY - "$PORT" <<'PYEOF' || fail "slow request head"
import socket, sys, threading, time, urllib.request
port = int(sys.argv[1])
head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaa\r\n\r\n"
closed_after = []
def trickle():
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    try:
        for b in head:
            s.sendall(bytes([b]))
            s.settimeout(1.0)
            try:
                if s.recv(4096) == b"":
                    break
            except socket.timeout:
                pass
    except OSError:
        pass
    closed_after.append(time.monotonic() - t0)
slow = [threading.Thread(target=trickle) for _ in range(3)]
for t in slow:
    t.start()
time.sleep(0.5)
# normal requests are served meanwhile
assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200
# a keep-alive connection idle past the head's deadline between two requests is kept
k = socket.create_connection(("127.0.0.1", port), timeout=5)
for _ in range(2):
    k.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = k.recv(4096)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:80]
    time.sleep(2.6)
for t in slow:
    t.join(12)
# closed at the deadline (2 s, the next byte at most 1 s late), long before the head's
# len(head) s of trickling ended
assert len(closed_after) == 3 and all(1.8 <= c <= 4.0 for c in closed_after), closed_after
PYEOF
n=$(curl -sf "http://127.0.0.1:$PORT/metrics" | awk '$1 == "cellcast_http_header_timeouts_total" { print $2 }')
[ "$n" = 3 ] || fail "header timeouts counted: '$n', want 3"
grep -q 'no complete request head within http.header_timeout_s = 2 s' "$TMP/slowlog" ||
    fail "no log line for the slow head"
stop_daemon >/dev/null

if [ "$FAILS" != 0 ]; then
    echo "--- daemon log"; tail -30 "$TMP/log"
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all HTTP checks passed"
