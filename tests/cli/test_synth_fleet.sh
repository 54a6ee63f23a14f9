#!/bin/bash
# test_synth_fleet.sh — `cellcast synth`'s fleet events (issue 32): the ground-truth file
# (--events) against the data it describes, the neighbour shift (--neighbour-shift) and the
# cell events (--cell-event-rate) against the same fleet without them, and the outputs of
# the options left off unchanged. Checks:
#   - --events, --neighbour-shift 0 and --cell-event-rate 0 change no byte of the data or
#     the topology;
#   - every transport_loss leaves no row of its site's cells in [start, end); every
#     power_outage has every row of its cells there at prb_dl 0; every event's cells belong
#     to its site (topology file); events are sorted by start;
#   - with --neighbour-shift 0.5 the rows that differ from the fleet without it are exactly
#     rows inside a neighbour_shift event of their cell (prb_dl never lower), and each such
#     event changes some row; each neighbour_shift is its outage's span at the next site
#     of the region;
#   - with --cell-event-rate the rows that differ are inside a cell_spike (prb_dl never
#     lower) or cell_degradation (cqi never higher) event of their cell;
#   - --neighbour-shift without --sites, and a negative rate, are refused (exit 2).
#   usage: test_synth_fleet.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no python3"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
synth() { "$CLI" synth --cells 120 --days 14 --seed 5 --site-outage-rate 1 "$@" 2>"$TMP/err" ||
    fail "synth $*: $(cat "$TMP/err")"; }

synth --sites "$TMP/t0.csv" --out "$TMP/d0.csv"
synth --sites "$TMP/t1.csv" --out "$TMP/d1.csv" --events "$TMP/e1.csv" --neighbour-shift 0 \
    --cell-event-rate 0
cmp -s "$TMP/d0.csv" "$TMP/d1.csv" || fail "--events or the new options at 0 changed the data"
cmp -s "$TMP/t0.csv" "$TMP/t1.csv" || fail "--events changed the topology"
synth --sites "$TMP/t2.csv" --out "$TMP/d2.csv" --events "$TMP/e2.csv" --neighbour-shift 0.5
synth --sites "$TMP/t3.csv" --out "$TMP/d3.csv" --events "$TMP/e3.csv" --cell-event-rate 2

$PY - "$TMP" <<'PYEOF' || exit 1
import csv, sys
tmp = sys.argv[1]
S = 900

def load(name):
    rows = {}
    with open(f"{tmp}/{name}") as f:
        r = csv.reader(f)
        hdr = next(r)
        for row in r:
            rows[(int(row[0]), row[1])] = row[2:]
    return hdr, rows

def events(name):
    with open(f"{tmp}/{name}") as f:
        r = csv.DictReader(f)
        assert r.fieldnames == ["kind", "scope", "site", "cells", "start", "end"], r.fieldnames
        ev = list(r)
    for e in ev:
        e["cells"] = e["cells"].split(";")
        e["start"], e["end"] = int(e["start"]), int(e["end"])
    return ev

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

topo = {}
with open(f"{tmp}/t0.csv") as f:
    for row in csv.DictReader(f):
        topo[row["cell"]] = row
site_cells = {}
for c, row in topo.items():
    site_cells.setdefault(row["site"], []).append(c)
hdr, d0 = load("d0.csv")
prb, cqi = hdr.index("prb_dl") - 2, hdr.index("cqi") - 2
t_first = min(t for t, _ in d0)
t_last = max(t for t, _ in d0)

e1 = events("e1.csv")
kinds = {e["kind"] for e in e1}
for k in ("power_outage", "transport_loss", "cell_outage", "burst", "gap"):
    if k not in kinds:
        fail(f"no {k} in the events of a 120-cell fortnight: {sorted(kinds)}")
if kinds & {"neighbour_shift", "cell_spike", "cell_degradation"}:
    fail(f"events of options left off: {sorted(kinds)}")
if [e["start"] for e in e1] != sorted(e["start"] for e in e1):
    fail("events not sorted by start")
for e in e1:
    if not (t_first <= e["start"] < e["end"] <= t_last + S):
        fail(f"event outside the window: {e}")
    for c in e["cells"]:
        if topo[c]["site"] != e["site"]:
            fail(f"{c} is not of site {e['site']}: {e}")
    if e["scope"] == "site" and sorted(e["cells"]) != sorted(site_cells[e["site"]]):
        fail(f"site event without every cell of its site: {e}")
    for t in range(e["start"], e["end"], S):
        for c in e["cells"]:
            row = d0.get((t, c))
            if e["kind"] == "transport_loss" and row is not None:
                fail(f"row of {c} at {t} inside a transport loss")
            if e["kind"] == "power_outage" and row is not None and float(row[prb]) != 0:
                fail(f"{c} at {t} carries traffic inside a power outage")

def check_diff(name, evname, kinds_ok, check):
    _, d = load(name)
    ev = [e for e in events(evname) if e["kind"] in kinds_ok]
    if not ev:
        fail(f"{evname}: no {kinds_ok} event")
    inside = {}
    for e in ev:
        for t in range(e["start"], e["end"], S):
            for c in e["cells"]:
                inside.setdefault((t, c), []).append(e)
    if set(d) != set(d0):
        fail(f"{name}: other rows than without the option")
    changed = set()
    for key, row in d.items():
        if row == d0[key]:
            continue
        if key not in inside:
            fail(f"{name}: row {key} changed outside every {kinds_ok} event")
        check(key, row, d0[key], inside[key])
        for e in inside[key]:
            changed.add(id(e))
    return ev, changed

def shift_ok(key, row, base, evs):
    if row[prb] and float(row[prb]) < float(base[prb]):
        fail(f"neighbour shift lowered prb_dl at {key}: {row[prb]} < {base[prb]}")

ev2, changed = check_diff("d2.csv", "e2.csv", {"neighbour_shift"}, shift_ok)
outages = {(e["start"], e["end"], e["site"]) for e in events("e2.csv")
           if e["kind"] in ("power_outage", "transport_loss")}
for e in ev2:
    if id(e) not in changed:
        fail(f"a neighbour shift that changed no row: {e}")
    src = [s for (a, b, s) in outages if a == e["start"] and b == e["end"]]
    region = topo[e["cells"][0]]["region"]
    if not any(topo[site_cells[s][0]]["region"] == region and abs(int(s[4:]) - int(e["site"][4:])) == 1
               for s in src):
        fail(f"neighbour shift without an outage at a neighbouring site of its region: {e}")

def cell_ok(key, row, base, evs):
    k = {e["kind"] for e in evs}
    up = row[prb] and float(row[prb]) >= float(base[prb])
    down = row[cqi] and float(row[cqi]) <= float(base[cqi])
    if not (("cell_spike" in k and up) or ("cell_degradation" in k and down)):
        fail(f"cell event at {key} ({sorted(k)}): prb_dl {base[prb]} -> {row[prb]}, "
             f"cqi {base[cqi]} -> {row[cqi]}")

ev3, changed = check_diff("d3.csv", "e3.csv", {"cell_spike", "cell_degradation"}, cell_ok)
kinds3 = {e["kind"] for e in ev3}
if kinds3 != {"cell_spike", "cell_degradation"}:
    fail(f"cell events of one kind only: {kinds3}")
print(f"ok: {len(e1)} events; {len(ev2)} neighbour shifts; {len(ev3)} cell events, "
      f"{len(changed)} changing rows")
PYEOF

"$CLI" synth --cells 10 --days 1 --neighbour-shift 0.5 >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "--neighbour-shift without --sites not refused"
grep -q "needs --sites" "$TMP/err" || fail "no clear error: $(cat "$TMP/err")"
"$CLI" synth --cells 10 --days 1 --cell-event-rate -1 >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "a negative --cell-event-rate not refused"
echo "PASS"
