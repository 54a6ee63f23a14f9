#!/bin/bash
# test_contracts.sh — the daemon's replies against its published contracts: starts cellcastd
# (tiny model, no Kafka), feeds two cells through POST /v1/kpis (one all-zero, so a
# data-quality alert fires), then
#   - validates the reply of every GET route (and the problem replies) against
#     proto/openapi.yaml, strictly (tests/helpers/openapi_check.py: an undocumented field fails);
#   - HEAD on every GET route answers like GET without a body;
#   - libevent's own error replies (malformed request line, disallowed method, body past
#     the hard limit) are application/problem+json;
#   - `promtool check metrics` on the live /metrics (skipped with a message when promtool is
#     not installed, outside CI: CI sets CI=1), and the metric contracts promtool does not
#     check (no negative sum or counter, no -1 for unknown, process_* metrics, the `code`
#     label, no daemon-computed rates, the firing gauge by severity);
#   - a port in use: the error names errno and a hint;
#   - Kafka consumer errors (a broker refusing connections) counted by error code.
#   usage: test_contracts.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init contracts
$PY -c 'import yaml, jsonschema' 2>/dev/null || { echo "SKIP: needs python3-yaml and python3-jsonschema"; exit 77; }
MODEL="$ROOT/tests/data/golden/tiny.safetensors" # F=3 (prb,thr,users), P=4, HZ=6, S=900

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: none
http:
  post_kpis: open
  port: 0
  max_body_bytes: 8192
ingest:
  batch_ms: 5
  max_past_s: 0
alerts:
  zero_steps: 4
admin:
  token: "s3cret"
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

$PY - "$TMP" <<'PYEOF'
import json, math, sys
tmp = sys.argv[1]
S, p0 = 900, 1714557600 // 900
recs = []
for i in range(40):
    v = 50 + 20 * math.sin(i / 6.0)
    recs.append({"cell": "c1", "ts": (p0 + i) * S, "kpis": {"prb": v, "thr": v * 3, "users": 10 + i % 7}})
    z = 0 if i >= 30 else v
    recs.append({"cell": "z0", "ts": (p0 + i) * S, "kpis": {"prb": z, "thr": z, "users": z}})
for k in range(0, len(recs), 40):
    json.dump(recs[k:k + 40], open(f"{tmp}/in{k // 40}.json", "w"))
PYEOF
for f in "$TMP"/in*.json; do
    curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary "@$f" "$U/v1/kpis"
done
for _ in $(seq 50); do
    curl -s "$U/v1/alerts/firing" | grep -q '"all_zero"' && break
    sleep 0.1
done

# get METHOD TEMPLATE URL-PATH [curl args...] — fetches and records the case
n=0
get() {
    local method=$1 tmpl=$2 path=$3
    shift 3
    n=$((n + 1))
    local code ctype
    code=$(curl -s -X "$method" -o "$TMP/b$n" -D "$TMP/h$n" -w '%{http_code}' "$@" "$U$path")
    ctype=$(tr -d '\r' <"$TMP/h$n" | awk -F': ' 'tolower($1) == "content-type" { print $2 }')
    printf '%s\t%s\t%s\t%s\t%s\n' "$method" "$tmpl" "$code" "$ctype" "$TMP/b$n" >>"$TMP/cases"
}
: >"$TMP/cases"
get GET /healthz /healthz
get GET /readyz /readyz
get GET /metrics /metrics
get GET /v1/info /v1/info
get GET /v1/info '/v1/info?format=text'
get GET /v1/info '/v1/info?format=xml'
get GET /v1/config /v1/config
get GET /v1/model /v1/model
get GET /v1/cells '/v1/cells?limit=1'
get GET /v1/cells '/v1/cells?limit=0'
get GET /v1/cells/{id} /v1/cells/c1
get GET /v1/cells/{id} /v1/cells/nope
get GET /v1/cells/{id}/forecast /v1/cells/c1/forecast
get GET /v1/cells/{id}/forecast '/v1/cells/c1/forecast?level=2'
get GET /v1/cells/{id}/history /v1/cells/c1/history
get GET /v1/cells/{id}/attention /v1/cells/c1/attention
get GET /v1/alerts /v1/alerts
get GET /v1/alerts '/v1/alerts?limit=abc'
get GET /v1/alerts/firing /v1/alerts/firing
get GET /v1/cells/{id}/alerts /v1/cells/z0/alerts
get GET /v1/cells/{id}/alerts '/v1/cells/z0/alerts?active'
get GET /v1/cells/{id}/scores /v1/cells/c1/scores
get GET /v1/incidents /v1/incidents
get GET /v1/incidents '/v1/incidents?state=bogus'
get GET /v1/silences /v1/silences
get POST /v1/silences /v1/silences -H 'Authorization: Bearer s3cret' --data-binary '{"matchers":[{"name":"cell","value":"nothing"}],"endsAt":"2099-01-01T00:00:00Z"}'
get POST /v1/silences /v1/silences -H 'Authorization: Bearer s3cret' --data-binary '{"matchers":[]}'
get POST /v1/silences /v1/silences -H 'Authorization: Bearer s3cret' --data-binary '{"matchers":[{"name":"site","value":"S9"}],"maintenance":true,"recurrence":{"weekly":[{"days":["sun"],"start":"22:00","end":"02:00"}],"timezone":"+01:00"}}'
get GET /v1/silences /v1/silences
get DELETE /v1/silences/{id} /v1/silences/nope -H 'Authorization: Bearer s3cret'
get POST /v1/kpis /v1/kpis -H 'Content-Type: application/json' --data-binary '{"cell":"c2","ts":1714557600,"prb":1}'
get POST /v1/kpis /v1/kpis -H 'Content-Type: application/json' --data-binary '{"cell":"bad id!","ts":1}'
get POST /v1/admin/reload /v1/admin/reload
get POST /v1/admin/reload /v1/admin/reload -H 'Authorization: Bearer wrong'
# a verdict on z0's firing alert: the firing list shows it (as GET /v1/alerts does)
fid=$(curl -s "$U/v1/cells/z0/alerts?active" | $PY -c 'import json,sys; print(json.load(sys.stdin)["active"][0]["id"])')
get POST /v1/alerts/{id}/feedback "/v1/alerts/$fid/feedback" -H 'Authorization: Bearer s3cret' --data-binary '{"verdict":"false_alarm","user":"noc"}'
get GET /v1/alerts/firing /v1/alerts/firing
grep -q '"feedback":{"verdict":"false_alarm"' "$TMP/b$n" || fail "no verdict on the firing alert $fid: $(head -c 400 "$TMP/b$n")"
grep -q '"alerts":\[{' "$TMP/b17" || fail "no alert in /v1/alerts to validate: $(head -c 300 "$TMP/b17")"
grep -q '"active":\[{' "$TMP/b21" || fail "no active alert for z0: $(head -c 300 "$TMP/b21")"
if $PY "$ROOT/tests/helpers/openapi_check.py" "$ROOT/proto/openapi.yaml" "$TMP/cases"; then
    ok "$n replies as documented in proto/openapi.yaml"
else
    fail "replies not as documented in proto/openapi.yaml"
fi

# --- HEAD on every GET route: GET's status and headers (Content-Length of GET's body), no body
"$CELLCASTD" --routes | awk '$1 ~ /GET/ { print $2 }' | sed 's/{id}/c1/' >"$TMP/getroutes"
while read -r path; do
    # GET, HEAD, GET: an alert may fire or resolve between two requests (the firing list
    # answers from its cache at once, without waiting for a step being made), so HEAD's
    # length must be the body's on one side of it
    curl -s -o "$TMP/g" -D "$TMP/gh" "$U$path"
    curl -s -o "$TMP/hb" -D "$TMP/hh" -I "$U$path"
    curl -s -o "$TMP/g2" "$U$path"
    gs=$(head -1 "$TMP/gh" | cut -d' ' -f2)
    hs=$(head -1 "$TMP/hh" | cut -d' ' -f2)
    hl=$(tr -d '\r' <"$TMP/hh" | awk -F': ' 'tolower($1) == "content-length" { print $2 }')
    gl=$(wc -c <"$TMP/g")
    gl2=$(wc -c <"$TMP/g2")
    [ "$gs" = "$hs" ] || fail "HEAD $path: status $hs, GET $gs"
    case $path in
    /metrics | /v1/info | /healthz) ;; # their bodies change between two requests
    *) [ "$hl" = "$gl" ] || [ "$hl" = "$gl2" ] ||
        fail "HEAD $path: Content-Length '$hl', GET's body is $gl bytes before and $gl2 after" ;;
    esac
done <"$TMP/getroutes"
# a HEAD that reads no body: the next request on the same connection is answered
curl -s -o /dev/null -w '%{http_code} %{num_connects}\n' -I "$U/v1/model" -o /dev/null "$U/healthz" >"$TMP/keep"
[ "$(tr '\n' ' ' <"$TMP/keep")" = "200 1 200 0 " ] || fail "HEAD then GET on one connection: $(tr '\n' ' ' <"$TMP/keep")"
curl -s -o /dev/null -D "$TMP/kh" -I "$U/v1/kpis"
grep -q '^HTTP/1.1 405' "$TMP/kh" && grep -qi '^allow: POST' "$TMP/kh" || fail "HEAD /v1/kpis: want 405, Allow: POST: $(head -1 "$TMP/kh")"
curl -s -o /dev/null -D "$TMP/kh" -X DELETE "$U/v1/model"
grep -qi '^allow: GET, HEAD' "$TMP/kh" || fail "DELETE /v1/model: Allow lacks HEAD: $(grep -i '^allow' "$TMP/kh")"
[ "$(wc -l <"$TMP/getroutes")" -ge 14 ] && ok "HEAD on $(wc -l <"$TMP/getroutes") GET routes"

# --- libevent's own refusals are problem+json too (counted under route "unmatched")
raw() { $PY "$ROOT/tests/helpers/rawhttp.py" "$PORT" >"$TMP/raw"; }
problem_reply() { # problem_reply WHAT STATUS
    if ! grep -q "^HTTP/1.1 $2 " "$TMP/raw" || ! grep -qi '^content-type: application/problem+json' "$TMP/raw" ||
        ! tail -1 "$TMP/raw" | $PY -c "import json,sys; p=json.load(sys.stdin); assert p['status']==$2 and p['title'] and p['detail']"; then
        fail "$1: not a $2 problem+json reply: $(head -c 400 "$TMP/raw")"
    fi
}
printf 'GARBAGE\r\n\r\n' | raw
problem_reply "malformed request line" 400
printf 'GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n' | raw
problem_reply "malformed header" 400
printf 'TRACE / HTTP/1.1\r\nHost: x\r\n\r\n' | raw
problem_reply "TRACE (not implemented)" 501
{ printf 'POST /v1/kpis HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n'; head -c 20000 /dev/zero; } | raw
problem_reply "body past 2 x http.max_body_bytes" 413
curl -s "$U/metrics" >"$TMP/m"
for want in 'route="unmatched",code="400"} 2' 'route="unmatched",code="501"} 1' \
    'route="unmatched",code="413"} 1' 'route="/v1/admin/reload",code="401"} 1' \
    'route="/v1/admin/reload",code="403"} 1'; do
    grep -qF "$want" "$TMP/m" || fail "/metrics lacks cellcast_http_requests_total{...$want"
done

# --- /metrics: promtool's checks, and the contracts promtool does not check
curl -s "$U/metrics" >"$TMP/m"
if command -v promtool >/dev/null; then
    if promtool check metrics <"$TMP/m" >"$TMP/promtool" 2>&1; then
        ok "promtool check metrics"
    else
        fail "promtool check metrics: $(head -20 "$TMP/promtool")"
    fi
elif [ -n "${CI:-}" ]; then
    fail "promtool is not installed (CI needs it: .ci/deps.sh installs prometheus)"
else
    echo "SKIP (one check): promtool is not installed (apt-get install prometheus): /metrics not linted"
fi
$PY - "$TMP/m" <<'PYEOF' || fail "/metrics contracts"
import re, sys
lines = [l for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
samples = {}
for l in lines:
    name, value = l.rsplit(" ", 1)
    samples[name] = float(value)
bad = []
for name, v in samples.items():
    base = name.split("{")[0]
    if base.endswith(("_sum", "_count", "_bucket", "_total")) and v < 0:
        bad.append(f"negative {name} {v}")
    if v == -1 and base in ("cellcast_kafka_lag_messages", "cellcast_snapshot_age_seconds"):
        bad.append(f"-1 for unknown: {name}")
    if 'status="' in name:
        bad.append(f"label status (want code): {name}")
    if base == "cellcast_ingest_rate":
        bad.append(f"a rate computed in the daemon: {name}")
for want in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
             "process_max_fds", "process_start_time_seconds", "process_virtual_memory_bytes"):
    if want not in samples:
        bad.append(f"no {want}")
# snapshots are off in this daemon: the age is unknown, so absent
if "cellcast_snapshot_age_seconds" in samples:
    bad.append("cellcast_snapshot_age_seconds without a snapshot")
if samples.get('cellcast_alerts_firing{kind="data_quality",severity="critical"}', 0) < 1:
    bad.append("the all_zero alert (critical) not in cellcast_alerts_firing{...severity=\"critical\"}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PYEOF

# --- the port in use: the error names the cause and what to do
out=$(timeout 10 "$CELLCASTD" -c "$TMP/c.yaml" --set http.port="$PORT" 2>&1)
grep -q "Address already in use (another cellcastd? change http.bind or http.port)" <<<"$out" ||
    fail "port in use: '$(tail -1 <<<"$out")'"

# --- Kafka consumer errors are exported by error code: a broker that refuses connections
stop_daemon >/dev/null
sed 's/brokers: none/brokers: "127.0.0.1:1"/' "$TMP/c.yaml" >"$TMP/k.yaml"
start_daemon "$TMP/klog" health -c "$TMP/k.yaml"
for _ in $(seq 50); do
    curl -s "$U/metrics" | grep -q '^cellcast_kafka_consumer_errors_total{code="_' && break
    sleep 0.1
done
curl -s "$U/metrics" | grep -E '^cellcast_kafka_consumer_errors_total\{code="_(TRANSPORT|ALL_BROKERS_DOWN)"\} [1-9]' >/dev/null &&
    ok "Kafka consumer errors by code" ||
    fail "no cellcast_kafka_consumer_errors_total{code=...} with the broker down: $(curl -s "$U/metrics" | grep kafka_consumer_errors)"

if [ "$FAILS" != 0 ]; then
    echo "--- daemon log"; tail -30 "$TMP/log"
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all contract checks passed"
