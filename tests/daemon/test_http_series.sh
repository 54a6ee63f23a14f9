#!/bin/bash
# test_http_series.sh — black-box test of the dashboard's reads (issue 15): the long
# history (history.depth) with since/until and max_points, past forecasts against actuals
# and their scores, batch reads, null for KPIs no record gave, interval bounds clamped to
# the KPIs' physical bounds (alerts.kpis <kpi>.min/max), the level edge, kpis=/fields=/
# digits=, ETag and If-None-Match (304), CORS
# (http.cors_origins) and gzip. Starts the real daemon on loopback (tiny model, embedded
# broker) and feeds it through POST /v1/kpis; ~5 s.
#   usage: test_http_series.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools curl
[ -x "$PY" ] || { echo "SKIP: $PY is not installed"; exit 77; }
MODEL="$ROOT/tests/data/golden/tiny.safetensors" # F=3 (prb,thr,users), HZ=6, S=900
TMP=$(mktemp -d)
DPID=
FAILS=0
cleanup() { [ -n "$DPID" ] && kill "$DPID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

cat >"$TMP/c.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: embedded
  group_id: test-http-series
  embedded_partitions: 1
http:
  post_kpis: open
  port: 0
  max_read_values: 1000
  cors_origins: ["http://dash.example"]
ingest:
  batch_ms: 5
snapshot:
  path: "$TMP/state.snap"
alerts:
  kpis:
    prb.min: 0
    prb.max: 100
    users.min: 0
YAML
start_daemon "$TMP/log" health -c "$TMP/c.yaml"

# get PATH [CURL-ARG...]: the body into $TMP/body, the headers into $TMP/hdr; prints the status
get() {
    local path=$1
    shift
    curl -s -o "$TMP/body" -D "$TMP/hdr" -w '%{http_code}' "$@" "$U$path"
}
expect() { # expect PATH STATUS [CURL-ARG...]
    local path=$1 want=$2 got
    shift 2
    got=$(get "$path" "$@")
    [ "$got" = "$want" ] || fail "GET $path: $got, want $want: $(head -c 300 "$TMP/body")"
}
save() { # save NAME PATH: expect PATH 200, its body kept as $TMP/NAME
    expect "$2" 200
    cp "$TMP/body" "$TMP/$1"
}
post() { curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$1" "$U/v1/kpis"; }

# 60 steps of c1 (prb swings past 0..100 so that the clamped bounds bite), c2 with 30, and
# a new cell whose one record gives prb only
$PY - "$TMP" <<'PYEOF'
import json, math, sys
tmp = sys.argv[1]
S, p0 = 900, 1714557600 // 900
def rec(c, i, amp):
    v = 50 + amp * math.sin(i / 3.0)
    return {"cell": c, "ts": (p0 + i) * S, "kpis": {"prb": v, "thr": v * 3 + 200, "users": 1 + i % 7}}
json.dump([rec("c1", i, 60) for i in range(0, 40)], open(f"{tmp}/a.json", "w"))
json.dump([rec("c1", i, 60) for i in range(40, 59)], open(f"{tmp}/b.json", "w"))
json.dump([rec("c1", 59, 60)], open(f"{tmp}/last.json", "w"))
json.dump([rec("c2", i, 10) for i in range(30)], open(f"{tmp}/c2.json", "w"))
json.dump({"cell": "new1", "ts": p0 * S, "prb": 5}, open(f"{tmp}/new1.json", "w"))
PYEOF
for f in a b c2 new1; do
    [ "$(post "$TMP/$f.json")" = 202 ] || fail "POST $f.json"
done
wait_step() { # wait_step CELL STEP: until the cell's forecast is at STEP
    for _ in $(seq 100); do
        curl -s "$U/v1/cells/$1/forecast" | grep -q "\"observed_step\":$2," && return 0
        sleep 0.05
    done
    fail "cell $1 never reached step $2"
}
P0=$((1714557600 / 900))
wait_step c1 $((P0 + 58))
wait_step c2 $((P0 + 29))
# the forecast made at the step before the last: its points come back as past forecasts
curl -s "$U/v1/cells/c1/forecast" >"$TMP/fc58"
# replies are cached per published step (http_cache.h): the same bytes again, never stale
curl -s "$U/v1/cells/c1/history?max_points=5" >"$TMP/h58a"
curl -s "$U/v1/cells/c1/history?max_points=5" >"$TMP/h58b"
cmp -s "$TMP/h58a" "$TMP/h58b" || fail "a cached history differs"
grep -q "\"step\":$((P0 + 58)),[^]]*\]}\]}" "$TMP/h58a" || fail "history before the last step: $(tail -c 200 "$TMP/h58a")"
# a cached reply's weak ETag: If-None-Match → 304 without a body until the next step
etag() { grep -i '^etag:' "$TMP/hdr" | sed 's/^[^:]*: *//; s/\r$//'; }
expect "/v1/cells/c1/history?max_points=5" 200
E58=$(etag)
case $E58 in W/\"*\") ;; *) fail "no weak ETag on a cached reply: $(cat "$TMP/hdr")" ;; esac
grep -qi '^cache-control: no-cache' "$TMP/hdr" || fail "an ETag'd reply is not no-cache"
rm -f "$TMP/body" # curl writes no file for no body
expect "/v1/cells/c1/history?max_points=5" 304 -H "If-None-Match: $E58"
[ -s "$TMP/body" ] && fail "a 304 has a body: $(head -c 100 "$TMP/body")"
[ "$(etag)" = "$E58" ] || fail "the 304's ETag $(etag) is not $E58"
expect "/v1/cells/c1/history?max_points=6" 200 -H "If-None-Match: $E58"
expect "/v1/cells/c1/forecasts" 200 --compressed
EF=$(etag)
expect "/v1/cells/c1/forecasts" 304 -H "If-None-Match: \"x\", $EF" --compressed
[ "$(post "$TMP/last.json")" = 202 ] || fail "POST last.json"
wait_step c1 $((P0 + 59))
expect "/v1/cells/c1/history?max_points=5" 200 -H "If-None-Match: $E58"
[ "$(etag)" != "$E58" ] || fail "the ETag did not change with a new step"
for _ in $(seq 50); do curl -s "$U/v1/cells/new1" | grep -q '"last_observation"' && break; sleep 0.05; done

# --- since overflow (served everything) and the level edge (gave null bounds)
expect "/v1/cells/c1/history?since=9223372036854775807" 200
grep -q '"steps":\[\]' "$TMP/body" || fail "since=INT64_MAX is not empty: $(head -c 200 "$TMP/body")"
expect "/v1/cells/c1/history?until=-9223372036854775808" 200
grep -q '"steps":\[\]' "$TMP/body" || fail "until=INT64_MIN is not empty"
expect "/v1/cells/c1/forecast?level=0.9999999999999999" 200
$PY - "$TMP/body" <<'PYEOF' || fail "level=0.9999999999999999: $(head -c 300 "$TMP/body")"
import json, math, sys
d = json.load(open(sys.argv[1]))
assert math.isfinite(d["z"]) and d["z"] > 7, d["z"]
for f in d["forecast"]:
    for v in f["values"].values():
        assert all(isinstance(v[k], (int, float)) for k in ("lower", "upper")), v
PYEOF
expect "/v1/cells/c1/forecast?level=1" 422
expect "/v1/cells/c1/history?max_points=0" 422
expect "/v1/cells/c1/history?max_points=x" 400
expect "/v1/cells/c1/history?until=yesterday" 400
expect "/v1/alerts?until=yesterday" 400
expect "/v1/cells/nope/forecasts" 404

# --- nulls: a KPI no record gave is null, in the history and in the cell's last observation
expect /v1/cells/new1/history 200
grep -q '"values":\[5,null,null\]' "$TMP/body" || fail "new cell history: $(cat "$TMP/body")"
expect /v1/cells/new1 200
$PY - "$TMP/body" <<'PYEOF' || fail "new cell: $(head -c 400 "$TMP/body")"
import json, sys
k = json.load(open(sys.argv[1]))["last_observation"]["kpis"]
assert k["prb"]["observed"] == 5 and k["thr"]["observed"] is None and k["users"]["observed"] is None, k
PYEOF

# --- the long history: every step (the model's window is shorter), ranges, down-sampling
save hall /v1/cells/c1/history
S0=$(((P0 + 10) * 900)) S1=$(((P0 + 20) * 900 + 899))
save hrange "/v1/cells/c1/history?since=$S0&until=$S1"
save hrfc "/v1/cells/c1/history?since=2024-05-01T12:30:00Z&until=2024-05-01T15:00:00Z"
save hmax "/v1/cells/c1/history?max_points=7"
$PY - "$TMP" "$P0" <<'PYEOF' || fail "history ranges"
import json, math, sys
tmp, p0 = sys.argv[1], int(sys.argv[2])
a = json.load(open(f"{tmp}/hall"))
steps = [s["step"] for s in a["steps"]]
assert steps == list(range(p0, p0 + 60)), (steps[:3], len(steps))
v = a["steps"][7]["values"]
want = 50 + 60 * math.sin(7 / 3.0)
assert abs(v[0] - want) < 1e-4 and v[2] == 1 + 7 % 7, (v, want)
r = json.load(open(f"{tmp}/hrange"))
assert [s["step"] for s in r["steps"]] == list(range(p0 + 10, p0 + 21)), r["steps"]
r = json.load(open(f"{tmp}/hrfc"))  # 12:30 is step p0+10, 15:00 step p0+20
assert [s["step"] for s in r["steps"]] == list(range(p0 + 10, p0 + 21)), [s["step"] for s in r["steps"]]
m = json.load(open(f"{tmp}/hmax"))
ms = [s["step"] for s in m["steps"]]
assert 1 <= len(ms) <= 7 and ms[-1] == p0 + 59 and ms == sorted(ms), ms
PYEOF

# --- past forecasts: the one-step and horizon-end points are the forecasts served then
save fcs /v1/cells/c1/forecasts
save fcs5 "/v1/cells/c1/forecasts?max_points=5&since=$(((P0 + 30) * 900))"
$PY - "$TMP" "$P0" <<'PYEOF' || fail "past forecasts"
import json, math, sys
tmp, p0 = sys.argv[1], int(sys.argv[2])
fc = json.load(open(f"{tmp}/fc58"))
d = json.load(open(f"{tmp}/fcs"))
assert d["horizon"] == 6 and d["kpis"] == ["prb", "thr", "users"], d["kpis"]
by = {s["step"]: s for s in d["steps"]}
t = fc["observed_step"]
assert t == p0 + 58
def close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(b))
one, end = by[t + 1]["one_step"], by[t + 6]["horizon_end"]
for f, k in enumerate(d["kpis"]):
    p1, p6 = fc["forecast"][0]["values"][k], fc["forecast"][5]["values"][k]
    assert close(one["mean"][f], p1["mean"], 1e-5), (k, one["mean"][f], p1)
    assert close(end["mean"][f], p6["mean"], 1e-5), (k, end["mean"][f], p6)
    # 80 %: the served default level is 0.8, so the band is the served one (sd as bf16)
    assert close(one["lo80"][f], p1["lower"], 1e-2) and close(one["hi80"][f], p1["upper"], 1e-2), (k, one, p1)
# bands ordered and clamped to prb in [0, 100], users >= 0; actuals of future steps null
for s in d["steps"]:
    for kind in ("one_step", "horizon_end"):
        b = s[kind]
        if b is None:
            continue
        for f in range(3):
            assert b["lo95"][f] <= b["lo80"][f] <= b["mean"][f] <= b["hi80"][f] <= b["hi95"][f], (s["step"], kind, b)
        assert 0 <= b["lo95"][0] and b["hi95"][0] <= 100 and b["lo95"][2] >= 0, b
assert by[p0 + 59]["actual"][0] is not None and by[p0 + 60]["actual"] == [None] * 3, by[p0 + 60]
assert max(by) == p0 + 59 + 6 and by[p0 + 65]["one_step"] is None
assert any(s[k] and (s[k]["lo95"][0] == 0 or s[k]["hi95"][0] == 100)
           for s in d["steps"] for k in ("one_step", "horizon_end")), "prb's bounds never clamped"
# the scores are those of the points
for kind in ("one_step", "horizon_end"):
    pts = [s for s in d["steps"] if s[kind] and s["actual"][0] is not None]
    sc = d["scores"][kind]
    for f in range(3):
        mae = sum(abs(s["actual"][f] - s[kind]["mean"][f]) for s in pts) / len(pts)
        cov = sum(s[kind]["lo80"][f] <= s["actual"][f] <= s[kind]["hi80"][f] for s in pts) / len(pts)
        assert sc["n"][f] == len(pts) and close(sc["mae"][f], mae, 1e-4), (kind, f, sc, mae)
        assert abs(sc["coverage80"][f] - cov) < 1e-6, (kind, f, sc, cov)
e = json.load(open(f"{tmp}/fcs5"))
st = [s["step"] for s in e["steps"]]
assert len(st) <= 5 and st[-1] == p0 + 65 and st[0] >= p0 + 30, st
PYEOF

# --- batch reads
save bf "/v1/forecast?cells=c1,new1,zz,c2"
curl -s "$U/v1/cells/c2/forecast" >"$TMP/c2fc"
save bh "/v1/history?cells=c2,zz,c1&since=$(((P0 + 25) * 900))&max_points=3"
$PY - "$TMP" <<'PYEOF' || fail "batch reads: $(head -c 300 "$TMP/bf")"
import json, sys
tmp = sys.argv[1]
b = json.load(open(f"{tmp}/bf"))
assert [c["cell"] for c in b["cells"]] == ["c1", "c2"] and b["unknown"] == ["zz"] and b["pending"] == ["new1"], b
assert b["cells"][1] == json.load(open(f"{tmp}/c2fc"))
h = json.load(open(f"{tmp}/bh"))
assert [c["cell"] for c in h["cells"]] == ["c2", "c1"] and h["unknown"] == ["zz"], h
assert all(1 <= len(c["steps"]) <= 3 for c in h["cells"]), h
PYEOF
# --- asking only for what is drawn: kpis=, fields=, digits= (the defaults are all, 7)
save hsel "/v1/cells/c1/history?kpis=users,prb&fields=values&digits=3"
save fsel "/v1/cells/c1/forecasts?kpis=thr&fields=mean,scores&digits=4"
save fact "/v1/cells/c1/forecasts?fields=actual,ts"
save fone "/v1/cells/c1/forecasts?fields=one_step,mean,scores"
save fend "/v1/cells/c1/forecasts?fields=horizon_end"
save bsel "/v1/history?cells=c2,c1&kpis=thr&fields=imputed&max_points=2"
$PY - "$TMP" <<'PYEOF' || fail "kpis/fields/digits: $(head -c 300 "$TMP/fsel")"
import json, sys
tmp = sys.argv[1]
def sig(x, n):
    return x if x in (None, 0) else float(f"{x:.{n - 1}e}")
full, h = json.load(open(f"{tmp}/hall")), json.load(open(f"{tmp}/hsel"))
assert h["kpis"] == ["prb", "users"], h["kpis"]  # the model's order
assert [s["step"] for s in h["steps"]] == [s["step"] for s in full["steps"]]
for a, b in zip(full["steps"], h["steps"]):
    assert set(b) == {"step", "values"}, b
    want = [sig(a["values"][0], 3), sig(a["values"][2], 3)]
    assert all(x == y or abs(x - y) <= 1e-9 * abs(y) for x, y in zip(b["values"], want)), (b, want)
assert any(len(str(b["values"][0]).replace("-", "").replace(".", "").lstrip("0")) <= 3 < len(str(a["values"][0]))
           for a, b in zip(full["steps"], h["steps"])), "no value was shortened"
fc, f = json.load(open(f"{tmp}/fcs")), json.load(open(f"{tmp}/fsel"))
assert f["kpis"] == ["thr"] and [s["step"] for s in f["steps"]] == [s["step"] for s in fc["steps"]]
for a, b in zip(fc["steps"], f["steps"]):
    assert set(b) == {"step", "one_step", "horizon_end"}, b
    for k in ("one_step", "horizon_end"):
        assert (a[k] is None) == (b[k] is None) and (b[k] is None or (set(b[k]) == {"mean"} and
                b[k]["mean"][0] == sig(a[k]["mean"][1], 4))), (k, a[k], b[k])
for k in ("one_step", "horizon_end"):
    sa, sb = fc["scores"][k], f["scores"][k]
    assert sb["n"] == [sa["n"][1]] and sb["mae"] == [sig(sa["mae"][1], 4)], (sa, sb)
o, e = json.load(open(f"{tmp}/fone")), json.load(open(f"{tmp}/fend"))
assert all(set(s) == {"step", "one_step"} for s in o["steps"]) and set(o["scores"]) == {"one_step"}, o["scores"]
assert o["scores"]["one_step"]["mae"] == fc["scores"]["one_step"]["mae"]
assert all(set(s) == {"step", "horizon_end"} and s["horizon_end"] == a["horizon_end"]
           for a, s in zip(fc["steps"], e["steps"])) and "scores" not in e, e["steps"][-1]
x = json.load(open(f"{tmp}/fact"))
assert "scores" not in x and all(set(s) == {"step", "ts", "actual"} for s in x["steps"]), x["steps"][0]
b = json.load(open(f"{tmp}/bsel"))
assert [c["kpis"] for c in b["cells"]] == [["thr"], ["thr"]] and all(
    set(s) == {"step", "imputed"} for c in b["cells"] for s in c["steps"]), b
PYEOF
for bad in "history?fields=mean" "history?fields=values,bogus" "forecasts?fields=imputed" "forecasts?fields=" \
    "history?digits=0" "forecasts?digits=8" "history?kpis=nope"; do
    expect "/v1/cells/c1/$bad" 422
done
expect "/v1/cells/c1/history?digits=x" 400

ids=$(seq -s, -f 'c%g' 101)
expect "/v1/forecast?cells=$ids" 422
expect "/v1/history?cells=$ids" 422
expect "/v1/forecast" 422
expect "/v1/history?cells=" 422

# --- a batch read validates its ids as the single-cell routes do (400, no raw bytes echoed);
# a valid id this daemon does not hold stays in "unknown"
for bad in "%ff" "c1,%ff" "c1,a%20b" "c1,,c2" "$(printf 'x%.0s' $(seq 65))"; do
    expect "/v1/history?cells=$bad" 400
    $PY -c 'import json,sys; json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))' "$TMP/body" ||
        fail "cells=$bad: not UTF-8 JSON: $(head -c 200 "$TMP/body" | od -c | head -3)"
    expect "/v1/forecast?cells=$bad" 400
done
grep -q 'not a valid cell id' "$TMP/body" || fail "bad id message: $(cat "$TMP/body")"
curl -s "$U/metrics" | grep -q '^cellcast_http_reads_refused_total{reason="bad_cell_id"} 10$' ||
    fail "bad cell ids not counted: $(curl -s "$U/metrics" | grep reads_refused)"
# --- the work one read may ask for: cells x steps x KPIs <= http.max_read_values (1000 here)
many=c1$(printf ',c1%.0s' $(seq 11)) # 12 x ~60 steps x 3 KPIs
expect "/v1/history?cells=$many" 413
grep -q 'http.max_read_values is 1000' "$TMP/body" || fail "413 message: $(cat "$TMP/body")"
expect "/v1/history?cells=$many&kpis=prb" 200 # a third of the values
expect "/v1/history?cells=$many&max_points=20" 200
curl -s "$U/metrics" | grep -q '^cellcast_http_reads_refused_total{reason="max_read_values"} 1$' ||
    fail "read limit not counted: $(curl -s "$U/metrics" | grep reads_refused)"
# --- parameters no handler reads, their order, a name's case and percent-encoding are no
# reply-cache bypass: the same reply (ETag), served from the cache
hits() { curl -s "$U/metrics" | sed -n 's/^cellcast_http_reply_cache_total{result="hit"} //p'; }
expect "/v1/history?cells=c2,c1&max_points=7&x=1" 200
etag1=$(tr -d '\r' <"$TMP/hdr" | sed -n 's/^[Ee][Tt]ag: //p')
h0=$(hits)
for q in "cells=c2,c1&max_points=7&x=2" "max_points=7&_=123&cells=c2%2Cc1" "CELLS=c2,c1&Max_Points=7"; do
    expect "/v1/history?$q" 200
    etag=$(tr -d '\r' <"$TMP/hdr" | sed -n 's/^[Ee][Tt]ag: //p')
    [ -n "$etag" ] && [ "$etag" = "$etag1" ] || fail "?$q: ETag $etag, want $etag1"
done
[ "$(hits)" -ge $((h0 + 3)) ] || fail "unread parameters missed the reply cache: hits $h0 -> $(hits)"
expect "/v1/history?cells=c2,c1&max_points=6" 200 # a parameter read: another reply
etag=$(tr -d '\r' <"$TMP/hdr" | sed -n 's/^[Ee][Tt]ag: //p')
[ "$etag" != "$etag1" ] || fail "max_points=6 got the ETag of max_points=7"

# --- CORS: listed origin only; preflight answered with the route's methods
expect /v1/cells/c1/forecast 200 -X OPTIONS -H 'Origin: http://dash.example' \
    -H 'Access-Control-Request-Method: GET'
grep -qi '^access-control-allow-origin: http://dash.example' "$TMP/hdr" &&
    grep -qi '^access-control-allow-methods: GET' "$TMP/hdr" || fail "CORS preflight: $(cat "$TMP/hdr")"
expect /v1/cells/c1/forecast 200 -H 'Origin: http://dash.example'
grep -qi '^access-control-allow-origin: http://dash.example' "$TMP/hdr" || fail "CORS on GET"
expect /v1/cells/c1/forecast 200 -H 'Origin: http://other.example'
grep -qi '^access-control-allow-origin' "$TMP/hdr" && fail "CORS for an origin not listed"
expect /v1/cells/c1/forecast 405 -X OPTIONS -H 'Origin: http://other.example'

# --- gzip: same JSON, compressed, for a client that asks; small replies stay plain
curl -s "$U/v1/cells/c1/forecasts" >"$TMP/plain"
expect /v1/cells/c1/forecasts 200 --compressed
grep -qi '^content-encoding: gzip' "$TMP/hdr" || fail "no gzip: $(cat "$TMP/hdr")"
cmp -s "$TMP/body" "$TMP/plain" || fail "gzipped reply differs"
expect /v1/cells/c1/forecast 200 -H 'Accept-Encoding: gzip;q=0'
grep -qi '^content-encoding' "$TMP/hdr" && fail "gzip despite q=0"
expect /healthz 200 --compressed
grep -qi '^content-encoding' "$TMP/hdr" && fail "a tiny reply was gzipped"
curl -s "$U/metrics" | grep -q '^cellcast_http_gzip_replies_total [1-9]' || fail "gzip not counted"
curl -s "$U/metrics" | grep -q '^cellcast_http_reply_cache_total{result="hit"} [1-9]' || fail "no reply-cache hit"
# the last step is in the history fetched after it, through the same cached URL
curl -s "$U/v1/cells/c1/history?max_points=5" | grep -q "\"step\":$((P0 + 59)),[^]]*\]}\]}" ||
    fail "stale cached history"

# --- memory: the history counted in the cells' bytes
curl -s "$U/metrics" | grep -q '^cellcast_cell_history_bytes [1-9]' || fail "history bytes not reported"

stop_daemon || fail "cellcastd exit status"

# --- the long history and the past forecasts survive a restart (in the snapshot)
start_daemon "$TMP/log1" health -c "$TMP/c.yaml"
wait_log "$TMP/log1" 'restored: 3 cells (0 failed)' || fail "snapshot not restored: $(grep snapshot "$TMP/log1")"
save hall2 /v1/cells/c1/history
save fcs2 /v1/cells/c1/forecasts
cmp -s "$TMP/hall" "$TMP/hall2" || fail "history after a restart differs"
cmp -s "$TMP/fcs" "$TMP/fcs2" || fail "past forecasts after a restart differ: $(head -c 300 "$TMP/fcs2")"
stop_daemon || fail "cellcastd exit status (restart)"

# --- history.depth 0: the model's window only (as before issue 15), no past forecasts
start_daemon "$TMP/log0" health -c "$TMP/c.yaml" --set history.depth=0 --set snapshot.path=
[ "$(post "$TMP/a.json")" = 202 ] || fail "POST a.json (depth 0)"
wait_step c1 $((P0 + 39))
expect /v1/cells/c1/forecasts 404
expect "/v1/cells/c1/history?max_points=1000" 200
$PY - "$TMP/body" "$P0" <<'PYEOF' || fail "depth 0 history: $(head -c 300 "$TMP/body")"
import json, sys
st = [s["step"] for s in json.load(open(sys.argv[1]))["steps"]]
p0 = int(sys.argv[2])
assert st and st[-1] == p0 + 39 and st == list(range(st[0], p0 + 40)), st
PYEOF
curl -s "$U/metrics" | grep -q '^cellcast_cell_history_bytes 0$' || fail "depth 0 holds history bytes"
stop_daemon || fail "cellcastd exit status (depth 0)"
[ "$FAILS" = 0 ] && echo "test_http_series: all ok"
exit $((FAILS > 0))
