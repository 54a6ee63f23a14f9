#!/bin/bash
# test_reply_versions.sh — the cached status reads the dashboard polls (issue 15):
# GET /v1/cells, /v1/cells/{id}, /v1/alerts/firing and /v1/info carry a weak ETag; a
# request with If-None-Match gets a 304 while what the reply shows has not moved, and the
# new content (never the cached reply) once it has: a new cell, a step, a duplicate record
# (counts without a step), an alert firing, its episode moving on, resolving; /v1/info is
# a snapshot that moves with the 1 s rates tick. Runs the bench's setup (the demo feed at
# real speed: idle after its backfill) with cells fed by POST /v1/kpis; ~10 s.
#   usage: test_reply_versions.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init replyver
need_files "$ROOT/models/default.safetensors"

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$ROOT/models/default.safetensors"
kafka:
  brokers: embedded
  embedded_partitions: 2
http:
  port: 0
  post_kpis: open
ingest:
  batch_ms: 5
demo:
  enabled: true
  cells: 4
  backfill_steps: 80
  speedup: 1
alerts:
  kpis:
    prb_dl.min: 0
    prb_dl.max: 100
  missing_after_s: 1000000000 # the posted cells are hours behind the demo's clock
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"
metric() { curl -s "$U/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
# The backfill is 4 cells x 81 steps, less the steps the generator leaves missing (which
# ones fall in the window depends on the wall clock, so no count is expected): it is in
# once the consumer has no lag (the feed produced all of it at the start), nothing is
# pending and the step count has not moved for a second (the feed then idles until its
# next step on the wall clock).
last=-1 still=0
for _ in $(seq 300); do
    m=$(curl -s "$U/metrics")
    n=$(awk '$1 == "cellcast_steps_total" { print $2 }' <<<"$m")
    lag=$(awk '$1 == "cellcast_kafka_lag_messages" { print $2 }' <<<"$m")
    pend=$(awk '$1 == "cellcast_pending_steps" { print $2 }' <<<"$m")
    if [ "${n:-0}" -gt 0 ] 2>/dev/null && [ "$lag" = 0 ] && [ "$pend" = 0 ] && [ "$n" = "$last" ]; then
        still=$((still + 1))
        [ $still -ge 10 ] && break
    else
        still=0
    fi
    last=${n:-0}
    sleep 0.1
done
[ $still -ge 10 ] && ok "demo backfill in: $n steps, no lag, nothing pending" ||
    fail "demo backfill not settled: $(metric cellcast_steps_total) steps, lag '$lag', pending '$pend'"
# The feed's next step (at speedup 1, the next multiple of step_seconds on the wall clock)
# would move the list and maybe the firing list under the 304 checks below: when it is due
# within the next 30 s, wait until it has been stepped.
S=$(curl -s "$U/v1/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["model"]["step_seconds"])')
left=$((S - $(date +%s) % S))
if [ "$left" -le 30 ]; then
    echo "# the demo's next step is due in ${left} s: waiting for it"
    before=$(metric cellcast_steps_total)
    sleep "$left"
    for _ in $(seq 100); do [ "$(metric cellcast_steps_total)" -gt "$before" ] && break; sleep 0.1; done
    sleep 1
fi
G0=$(date +%s)

# get PATH [CURL-ARG...]: body into $TMP/body, headers into $TMP/hdr; prints the status
get() {
    local path=$1
    shift
    rm -f "$TMP/body"
    curl -s -o "$TMP/body" -D "$TMP/hdr" -w '%{http_code}' "$@" "$U$path"
}
etag() { grep -i '^etag:' "$TMP/hdr" | sed 's/^[^:]*: *//; s/\r$//'; }
# tag PATH: GETs it (200, a weak ETag, no-cache); prints the ETag, the body in $TMP/body
tag() {
    local code
    code=$(get "$1")
    [ "$code" = 200 ] || fail "GET $1: $code"
    grep -qi '^cache-control: no-cache' "$TMP/hdr" || fail "GET $1: not no-cache"
    case $(etag) in W/\"*\") ;; *) fail "GET $1: no weak ETag" ;; esac
    etag
}
# same PATH ETAG WHAT: 304 without a body (nothing it shows moved)
same() {
    local code
    code=$(get "$1" -H "If-None-Match: $2")
    [ "$code" = 304 ] && [ ! -s "$TMP/body" ] && ok "$1: 304 $3" || fail "$1: $code, want 304 $3"
}
# moved PATH VAR WHAT PYCHECK: with If-None-Match $VAR, 200 with a new ETag (kept in VAR),
# and the body passes PYCHECK (d = the JSON)
moved() {
    local code
    local -n tag_var=$2
    code=$(get "$1" -H "If-None-Match: $tag_var")
    if [ "$code" != 200 ] || [ "$(etag)" = "$tag_var" ]; then
        fail "$1: $code (ETag $(etag)), want 200 and a new ETag $3"
        return
    fi
    tag_var=$(etag)
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert $4, d" "$TMP/body" 2>"$TMP/err" &&
        ok "$1: 200 $3" || fail "$1 $3: $(tail -1 "$TMP/err") $(head -c 300 "$TMP/body")"
}
post() {
    local code
    code=$(curl -s -o "$TMP/post" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$1" "$U/v1/kpis")
    [ "$code" = 202 ] || fail "POST $1: $code $(head -c 200 "$TMP/post")"
}
# rec CELL K PRB: a record K steps before the demo's last step (T), prb_dl = PRB, the other
# KPIs varying (a KPI left out is filled: stuck, a data-quality alert of its own)
T=$(curl -s "$U/v1/cells/demo-0000" | python3 -c 'import json,sys,datetime
print(int(datetime.datetime.fromisoformat(json.load(sys.stdin)["last_ts"].replace("Z","+00:00")).timestamp()))')
rec() {
    local v=$((10 + $2 * 7 % 11))
    echo "{\"cell\":\"$1\",\"ts\":$((T - 900 * $2)),\"kpis\":{\"prb_dl\":$3,\"prb_ul\":$v,\"thr_dl_mbps\":$v,\"thr_ul_mbps\":$v,\"active_users\":$v,\"latency_ms\":$v,\"cqi\":$v,\"drop_rate\":$v}}"
}
# until_ok PATH PYCHECK: waits (5 s at most) until GET PATH passes PYCHECK
until_ok() {
    for _ in $(seq 100); do
        curl -s "$U$1" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if $2 else 1)" 2>/dev/null &&
            return 0
        sleep 0.05
    done
    fail "$1 never reached: $2"
}
wait_stepped() { until_ok "/v1/cells/$1" "d['counts']['steps'] == $2 and d['pending_steps'] == 0"; }

post "[$(for k in $(seq 40 -1 20); do rec v1 "$k" $((40 + k % 3)); done | paste -sd,)]"
wait_stepped v1 21
CELLS=/v1/cells?limit=100 CELL=/v1/cells/v1 FIRING=/v1/alerts/firing
EL=$(tag $CELLS) EC=$(tag $CELL) EF=$(tag $FIRING)
same $CELLS "$EL" "while nothing changed"
same $CELL "$EC" "while nothing changed"
same $FIRING "$EF" "while nothing changed"
same $CELL "\"x\", $EC" "(a list of ETags)"
[ "$(get $CELL -H 'If-None-Match: W/"0000000000000000"')" = 200 ] && ok "another ETag: 200" ||
    fail "another ETag: not 200"
cp "$TMP/body" "$TMP/cached"
curl -s "$U$CELL" | cmp -s - "$TMP/cached" && ok "the cached reply is the same bytes" ||
    fail "two reads with nothing changed differ"

# a new cell: the list moves, the other cell's reply and the firing list do not
post "[$(rec v2 20 30)]"
until_ok $CELLS "any(c['id'] == 'v2' for c in d['cells'])"
moved $CELLS EL "after a new cell" "d['total'] == 6 and any(c['id'] == 'v2' for c in d['cells'])"
same $CELL "$EC" "after another cell's record"
same $FIRING "$EF" "after a record that fires nothing"

# a step of v1: its reply and the list move
post "[$(rec v1 19 41)]"
wait_stepped v1 22
moved $CELL EC "after a step" "d['counts']['steps'] == 22 and d['last_observation']['kpis']['prb_dl']['observed'] == 41"
moved $CELLS EL "after a step" "[c['steps'] for c in d['cells'] if c['id'] == 'v1'] == [22]"
same $CELL "$EC" "after the step, nothing since"
# a duplicate record: counts move without a step or a publish
post "[$(rec v1 19 41)]"
until_ok $CELL "d['counts']['duplicates'] == 1"
moved $CELL EC "after a duplicate record" "d['counts']['duplicates'] == 1 and d['counts']['steps'] == 22"

# an alert: prb_dl out of its bounds fires at once (data quality, bounds)
post "[$(rec v1 18 500)]"
wait_stepped v1 23
bounds="[a for a in d['alerts'] if a['cell_id'] == 'v1' and a['reason'] == 'bounds']"
moved $FIRING EF "after an alert fired" "len($bounds) == 1 and $bounds[0]['step'] == $bounds[0]['start_step']"
moved $CELL EC "after its alert fired" "d['scores']['data_quality_firing'] == 1"
same $FIRING "$EF" "while the alert fires and nothing moves"
# the episode goes on (its step moves, no transition), then resolves after 3 clear steps
post "[$(rec v1 17 600)]"
wait_stepped v1 24
moved $FIRING EF "after the firing episode's next step" "len($bounds) == 1 and $bounds[0]['step'] == $bounds[0]['start_step'] + 1"
post "[$(rec v1 16 40),$(rec v1 15 42),$(rec v1 14 44)]"
wait_stepped v1 27
moved $FIRING EF "after the alert resolved" "$bounds == []"
same $FIRING "$EF" "after it resolved, nothing since"
# The guard holds while the checks since it take under 30 s (printed): if they took longer
# and the demo's step fell among them, say so next to a 304 failure.
echo "# the 304 checks took $(($(date +%s) - G0)) s after the guard (it allows 30)"
[ $(($(date +%s) / S)) = $((G0 / S)) ] ||
    echo "# the demo's next step fell within the 304 checks: a 304 failure above can be that step"

# /v1/info: a snapshot moved by the 1 s rates tick (uptime, rates), not per request. A tick
# can fall between the tag and its check (the suite's load stretches that gap), so each of
# three tries tags afresh and asks again at once: a snapshot per request never gives a 304.
n304=0
for _ in 1 2 3; do
    EI=$(tag /v1/info)
    [ "$(get /v1/info -H "If-None-Match: $EI")" = 304 ] && n304=$((n304 + 1))
done
[ "$n304" -ge 1 ] && ok "/v1/info: 304 within its second ($n304 of 3)" || fail "/v1/info: never 304"
sleep 1.2
moved /v1/info EI "after the next rates tick" "d['cells']['resident'] == 6 and d['uptime_s'] > 0"
[ "$(get '/v1/info?format=text')" = 200 ] && ! grep -qi '^etag' "$TMP/hdr" &&
    grep -q '^resident:6' "$TMP/body" && ok "/v1/info?format=text: rendered, no ETag" ||
    fail "/v1/info?format=text: $(head -c 200 "$TMP/body")"

stop_daemon || fail "cellcastd exit status"
[ "$FAILS" = 0 ] && echo "test_reply_versions: all ok"
exit $((FAILS > 0))
