#!/bin/bash
# test_interval_adapt.sh — black-box test of forecast.interval_adapt (issue 12,
# daemon/interval.h): a cell fed values much noisier than the tiny model's sd is served
# intervals widened by its online scales (lo/hi = mean ± z·sd·interval_scale, sd the model's),
# /metrics counts every matured forecast (KPI, horizon step) and the miss share of the later
# steps is nearer 0.2 than the early steps'; the past forecasts (/forecasts) carry the served
# band. Reloaded off, the reply has no interval_scale and lo/hi = mean ± z·sd, nothing more is
# counted; on again, every scale starts at 1; a reload with another rate keeps the scales;
# after a restart the cell comes back from the snapshot with its scales (its record holds
# them, issue 31) and goes on scoring from its first forecast. Bad rates are refused, at
# start and by a reload.
# Starts the real daemon on loopback (tiny model, embedded broker), fed through POST
# /v1/kpis; ~5 s.
#   usage: test_interval_adapt.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
daemon_test_init interval-adapt
# The tiny model (F=3, HZ=6, S=900) with its second KPI and its name as a model file from
# the models topic may carry them: a quote, a backslash and a newline, which /metrics must
# escape in its label values (daemon/prom.h).
MODEL="$TMP/tiny.safetensors"
$PY - "$ROOT/tests/data/golden/tiny.safetensors" "$MODEL" <<'PYEOF'
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
F=3
HZ=6

config() { # config ON RATE: the daemon's file with forecast.interval_adapt ON, its rate RATE
    cat >"$TMP/c.yaml" <<YAML
model:
  path: "$MODEL"
kafka:
  brokers: embedded
  group_id: test-interval-adapt
  embedded_partitions: 1
http:
  post_kpis: open
  port: 0
ingest:
  batch_ms: 5
forecast:
  interval_adapt: $1
  interval_adapt_rate: $2
admin:
  token: t0k
snapshot:
  path: "$TMP/state.snap"
  interval_s: 0
YAML
}

# refused at start, with a message naming the key
for bad in -0.1 1.5 nan; do
    config true 0.05
    if "$CELLCASTD" -c "$TMP/c.yaml" --set "forecast.interval_adapt_rate=$bad" --print-config \
        >/dev/null 2>"$TMP/bad.err"; then
        fail "forecast.interval_adapt_rate=$bad accepted"
    elif grep -q "forecast.interval_adapt_rate.*\(out of range\|expected a number\)" "$TMP/bad.err"; then
        ok "forecast.interval_adapt_rate=$bad refused: $(head -1 "$TMP/bad.err")"
    else
        fail "forecast.interval_adapt_rate=$bad: unclear message: $(cat "$TMP/bad.err")"
    fi
done

config true 0 # the default rate: min(0.05, 4/HZ) = 0.05 at HZ 6
start_daemon "$TMP/log" health -c "$TMP/c.yaml"
P0=$((1714557600 / 900))

# 50 + 20 sin(i/3) plus Gaussian noise of sd 15 (prb): the tiny model's sd is far smaller
$PY - "$TMP" "$P0" <<'PYEOF'
import json, math, random, sys
tmp, p0 = sys.argv[1], int(sys.argv[2])
random.seed(12)
def rec(i):
    v = 50 + 20 * math.sin(i / 3.0)
    return {"cell": "noisy", "ts": (p0 + i) * 900,
            "kpis": {"prb": v + random.gauss(0, 15), 'thr"q\\1': 3 * v + 200 + random.gauss(0, 45),
                     "users": 5 + i % 7 + random.gauss(0, 3)}}
for name, lo, hi in (("a", 0, 100), ("b", 100, 300), ("c", 300, 310), ("d", 310, 330), ("e", 330, 332)):
    json.dump([rec(i) for i in range(lo, hi)], open(f"{tmp}/{name}.json", "w"))
PYEOF
post() { # post FILE LAST_STEP
    local code
    code=$(curl -s -o "$TMP/post.out" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "@$TMP/$1" "$U/v1/kpis")
    [ "$code" = 202 ] || fail "POST $1: $code $(cat "$TMP/post.out")"
    wait_last noisy "$2" 10 || fail "cell noisy did not reach step $2"
}
counts() { # counts: "scored missed" of /metrics
    curl -s "$U/metrics" | awk '/^cellcast_interval_scored_total /{s=$2} /^cellcast_interval_missed_total /{m=$2} END{print s+0, m+0}'
}

post a.json $((P0 + 99))
read -r S1 M1 < <(counts)
post b.json $((P0 + 299))
read -r S2 M2 < <(counts)
# step p matures the forecasts of p-1..p-6, each for every KPI: 200 steps score 200·F·HZ
[ $((S2 - S1)) -eq $((200 * F * HZ)) ] && ok "200 steps scored $((S2 - S1)) forecasts (200 x $F KPIs x $HZ steps)" ||
    fail "200 steps scored $((S2 - S1)) forecasts, want $((200 * F * HZ))"
# by KPI: every KPI's share, the label values escaped, the whole page well formed
curl -s "$U/metrics" >"$TMP/metrics"
$PY - "$TMP/metrics" "$S2" "$M2" "$((200 * HZ))" <<'PYEOF' && ok "per-KPI interval counts sum to the totals; /metrics well formed with a quote, backslash and newline in a KPI and the model's name" || fail "per-KPI interval counts or /metrics format"
import re, sys
text, total_s, total_m, per_200 = open(sys.argv[1]).read(), *map(int, sys.argv[2:])
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{NAME}={VALUE},?)*)\}})? (\S+)$")
labels_of = lambda t: dict((k, re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v[1:-1]))
                           for k, v in re.findall(rf"({NAME})=({VALUE})", t or ""))
by = {}
for line in text.splitlines():
    if line.startswith("#"):
        continue
    m = SAMPLE.match(line)
    assert m, f"malformed /metrics line: {line!r}"
    float(m.group(3))
    if m.group(1).startswith("cellcast_interval_kpi_"):
        by[(m.group(1), labels_of(m.group(2))["kpi"])] = int(m.group(3))
    if m.group(1) == "cellcast_build_info":
        assert labels_of(m.group(2))["model"] == 'golden "tiny"\nx', line
kpis = ["prb", 'thr"q\\1', "users"]
sc = [by[("cellcast_interval_kpi_scored_total", k)] for k in kpis]
mi = [by[("cellcast_interval_kpi_missed_total", k)] for k in kpis]
print("  scored", sc, "missed", mi)
assert sum(sc) == total_s and sum(mi) == total_m, (sc, mi, total_s, total_m)
assert len(set(sc)) == 1 and sc[0] >= per_200, sc  # every KPI scored at every matured step
assert 0 < min(mi) and max(mi) < sc[0]
PYEOF
$PY - "$S1" "$M1" "$S2" "$M2" <<'PYEOF' && ok "miss share moves toward 0.2: $M1/$S1 then $((M2 - M1))/$((S2 - S1))" || fail "miss share: $M1/$S1 then $((M2 - M1))/$((S2 - S1))"
import sys
s1, m1, s2, m2 = map(int, sys.argv[1:])
early, late = m1 / s1, (m2 - m1) / (s2 - s1)
print(f"  early {early:.3f}, late {late:.3f}")
assert s1 > 0 and early > 0.3, "the model's own intervals should miss far more than 0.2 here"
assert abs(late - 0.2) < 0.08 and abs(late - 0.2) < abs(early - 0.2) / 2
PYEOF

T=$((P0 + 299))
curl -s "$U/v1/cells/noisy/forecast" >"$TMP/fc_on"
curl -s "$U/v1/cells/noisy/forecasts?fields=one_step&since=$(((T + 1) * 900))&until=$(((T + 1) * 900))" >"$TMP/past_on"
# the served band: mean ± z·sd·interval_scale, wider than the model's; /forecasts holds it
$PY - "$TMP" "$T" <<'PYEOF' && ok "served intervals are mean ± z·sd·interval_scale, wider (scales > 1), /forecasts has the served band" || fail "served intervals (on)"
import json, sys
tmp, t = sys.argv[1], int(sys.argv[2])
fc = json.load(open(f"{tmp}/fc_on"))
z, scales = fc["z"], []
for pt in fc["forecast"]:
    for kpi, v in pt["values"].items():
        s = v["interval_scale"]
        w = z * v["sd"] * s
        assert abs(v["lower"] - (v["mean"] - w)) <= 1e-4 * w + 1e-3, (kpi, v)
        assert abs(v["upper"] - (v["mean"] + w)) <= 1e-4 * w + 1e-3, (kpi, v)
        scales.append((kpi, s))
print(f"  scales {min(s for _, s in scales):.2f}..{max(s for _, s in scales):.2f}")
# prb, the noisiest for the model, widens everywhere; users' period of 7 it fits better
assert min(s for kpi, s in scales if kpi == "prb") > 1.2, scales
assert sum(s for _, s in scales) / len(scales) > 1.5, scales
past = json.load(open(f"{tmp}/past_on"))
step = [p for p in past["steps"] if p["step"] == t + 1][0]["one_step"]
for f, kpi in enumerate(fc["kpis"]):
    v = fc["forecast"][0]["values"][kpi]
    w = v["upper"] - v["lower"]  # the history keeps sd as a half: 1e-3 relative
    assert abs(step["lo80"][f] - v["lower"]) < 2e-3 * w, (kpi, step, v)
    assert abs(step["hi80"][f] - v["upper"]) < 2e-3 * w, (kpi, step, v)
PYEOF

reload() { # reload ON RATE WANT_STATUS
    local code
    config "$1" "$2"
    code=$(curl -s -o "$TMP/reload.out" -w '%{http_code}' -X POST -H 'Authorization: Bearer t0k' \
        "$U/v1/admin/reload")
    [ "$code" = "$3" ] && ok "reload on=$1 rate=$2: $code $(head -c 160 "$TMP/reload.out")" ||
        fail "reload on=$1 rate=$2: $code, want $3 ($(cat "$TMP/reload.out"))"
}
reload true 1.5 422
grep -q "forecast.interval_adapt_rate" "$TMP/reload.out" || fail "the refused reload does not name the key"
cmp -s "$TMP/fc_on" <(curl -s "$U/v1/cells/noisy/forecast") && ok "a refused reload changes nothing" ||
    fail "the reply changed after a refused reload"

reload false 0 200
curl -s "$U/v1/cells/noisy/forecast" >"$TMP/fc_off"
curl -s "$U/v1/config" >"$TMP/config_off"
post c.json $((P0 + 309))
read -r S3 M3 < <(counts)
[ "$S3 $M3" = "$S2 $M2" ] && ok "off: nothing more counted ($S3 $M3)" || fail "off: counts moved: $S2 $M2 -> $S3 $M3"
check_off() { # check_off FILE: no interval_scale, lo/hi = mean ± z·sd
    $PY - "$1" <<'PYEOF'
import json, sys
fc = json.load(open(sys.argv[1]))
z = fc["z"]
for pt in fc["forecast"]:
    for kpi, v in pt["values"].items():
        assert "interval_scale" not in v, v
        w = z * v["sd"]
        assert abs(v["lower"] - (v["mean"] - w)) <= 1e-4 * w + 1e-3, (kpi, v)
        assert abs(v["upper"] - (v["mean"] + w)) <= 1e-4 * w + 1e-3, (kpi, v)
PYEOF
}
check_off "$TMP/fc_off" && ok "off (reloaded, same step): no interval_scale, lo/hi = mean ± z·sd" ||
    fail "off (reloaded, same step): $(head -c 400 "$TMP/fc_off")"
curl -s "$U/v1/cells/noisy/forecast" >"$TMP/fc_off2"
check_off "$TMP/fc_off2" && ok "off (stepped): no interval_scale, lo/hi = mean ± z·sd" ||
    fail "off (stepped): $(head -c 400 "$TMP/fc_off2")"
$PY -c 'import json,sys; assert json.load(open(sys.argv[1]))["forecast"]["interval_adapt"] is False' \
    "$TMP/config_off" && ok "GET /v1/config shows forecast.interval_adapt false" ||
    fail "GET /v1/config: $(cat "$TMP/config_off")"

reload true 0.01 200
curl -s "$U/v1/cells/noisy/forecast" >"$TMP/fc_on2"
$PY - "$TMP/fc_on2" <<'PYEOF' && ok "on again: every scale starts at 1" || fail "on again: $(head -c 400 "$TMP/fc_on2")"
import json, sys
fc = json.load(open(sys.argv[1]))
assert all(v["interval_scale"] == 1 for pt in fc["forecast"] for v in pt["values"].values())
PYEOF

# another rate: the scales are kept and go on from where they were (turning the feature on
# starts them at 1 at the next step: a dropped calibration would show 1 after step 331)
post d.json $((P0 + 329))
curl -s "$U/v1/cells/noisy/forecast" >"$TMP/fc_before_rate"
reload true 0.2 200
# another level is rendered from what the cell published (the default reply is cached)
curl -s "$U/v1/cells/noisy/forecast?level=0.9" >"$TMP/fc_after_rate"
post e.json $((P0 + 331))
curl -s "$U/v1/cells/noisy/forecast" >"$TMP/fc_before_restart"
$PY - "$TMP/fc_before_rate" "$TMP/fc_after_rate" "$TMP/fc_before_restart" <<'PYEOF' && ok "a changed rate keeps the scales" || fail "a changed rate: $(head -c 400 "$TMP/fc_before_restart")"
import json, math, sys
a, k, b = (json.load(open(f)) for f in sys.argv[1:])
sa = [v["interval_scale"] for pt in a["forecast"] for v in pt["values"].values()]
sk = [v["interval_scale"] for pt in k["forecast"] for v in pt["values"].values()]
sb = [v["interval_scale"] for pt in b["forecast"] for v in pt["values"].values()]
assert sk == sa, ("the reload changed the published scales", sa, sk)
print(f"  scales before the reload {min(sa):.3f}..{max(sa):.3f}, two steps after {min(sb):.3f}..{max(sb):.3f}")
# kept: the scales of before go on (at 1 again, a dropped calibration would be below them);
# at the new rate two steps move a log-scale by up to 2 · 0.8 · 0.2 = 0.32, and by more
# than the old rate's 2 · 0.8 · 0.01 = 0.016 where they miss
moves = [math.log(y / x) for x, y in zip(sa, sb)]
assert min(sa) > 1.03 and max(moves) > 0.05 and all(abs(m) <= 0.33 for m in moves), (sa, sb)
PYEOF

# restart: the cell comes back from the snapshot with the scales it served (issue 31), and
# its calibration goes on: the next steps score the forecast restored (made at the last step
# before the restart) and every later one
read -r S5 M5 < <(counts)
stop_daemon >/dev/null
start_daemon "$TMP/log2" health -c "$TMP/c.yaml"
curl -s "$U/v1/cells/noisy/forecast" >"$TMP/fc_restored"
$PY - "$TMP/fc_before_restart" "$TMP/fc_restored" <<'PYEOF' && ok "restored from the snapshot: same forecast, same scales" || fail "restored: $(head -c 400 "$TMP/fc_restored")"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["observed_step"] == b["observed_step"], (a["observed_step"], b["observed_step"])
sa = [v["interval_scale"] for pt in a["forecast"] for v in pt["values"].values()]
sb = [v["interval_scale"] for pt in b["forecast"] for v in pt["values"].values()]
assert any(s != 1 for s in sa), sa
# the record holds the log-scales; exp() of them gives the scales back up to float32
# rounding: exp_offset is kept by products, resynced one horizon step a turn (≤ HZ=6
# products of ≤ 2 ulp each) and the reply prints ~6-7 digits: 1e-5 relative bounds both
assert all(abs(x - y) <= 1e-5 * x for x, y in zip(sa, sb)), ("scales changed", sa, sb)
for pa, pb in zip(a["forecast"], b["forecast"]):
    for kpi, va in pa["values"].items():
        vb = pb["values"][kpi]
        w = va["upper"] - va["lower"]
        assert abs(vb["upper"] - vb["lower"] - w) <= 1e-4 * w + 1e-3, (kpi, va, vb)
print(f"  scales {min(sb):.3f}..{max(sb):.3f} kept")
PYEOF
$PY - "$TMP" "$P0" <<'PYEOF'
import json, math, random, sys
tmp, p0 = sys.argv[1], int(sys.argv[2])
random.seed(13)
recs = []
for i in range(332, 342):
    v = 50 + 20 * math.sin(i / 3.0)
    recs.append({"cell": "noisy", "ts": (p0 + i) * 900,
                 "kpis": {"prb": v + random.gauss(0, 15), 'thr"q\\1': 3 * v + 200 + random.gauss(0, 45),
                          "users": 5 + i % 7 + random.gauss(0, 3)}})
json.dump(recs, open(f"{tmp}/f.json", "w"))
PYEOF
post f.json $((P0 + 341))
read -r S6 _ < <(counts)
# step 332+j scores the forecasts made at 331 (restored) .. 331+j, at most HZ of them, each
# for every KPI: steps 1..10 after the restart score F·(1+2+..+6 + 4·6) forecasts
WANT=$((F * (21 + 4 * HZ)))
[ "$S6" -eq "$WANT" ] && ok "after the restart: $S6 forecasts scored (the restored one's steps and the later ones)" ||
    fail "after the restart: $S6 forecasts scored, want $WANT (before the restart: $S5)"
[ "$FAILS" -eq 0 ] || exit 1
