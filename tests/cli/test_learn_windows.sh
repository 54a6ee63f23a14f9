#!/bin/bash
# test_learn_windows.sh — `cellcast learn --silences --topology` (issue 32): a maintenance
# window's records are kept out of the training rows. Four hourly cells in two sites, two
# days: a maintenance silence of site S1 from 10:00 to 14:00 on the first day (8 records),
# a recurring one of cell0002 every day 02:00-03:00 (2 records), and a plain silence of S2
# (alerts only: nothing kept out). The learner's CSVs (all.csv, train.csv) hold those 10
# rows with every value missing and every other row whole; a bad silences file stops the
# round with its error.
#   usage: test_learn_windows.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir learn-windows

mkdir -p "$TMP/data" "$TMP/out"
"$CLI" synth --cells 4 --days 3 --step 3600 --features prb_dl,prb_ul --missing-rate 0 \
    --gap-rate 0 --outage-rate 0 --out "$TMP/data/fleet.csv" 2>/dev/null || { fail "synth"; exit 1; }
printf '%s\n' cell,site,region cell0000,S1,R1 cell0001,S1,R1 cell0002,S2,R1 cell0003,S2,R1 >"$TMP/topo.csv"
# the synthetic data start on Monday 2024-01-01 00:00 UTC
cat >"$TMP/silences.json" <<'JSON'
{"silences": [
  {"id": "s1-works", "maintenance": true, "matchers": [{"name": "site", "value": "S1"}],
   "startsAt": "2024-01-01T10:00:00Z", "endsAt": "2024-01-01T14:00:00Z"},
  {"id": "nightly", "maintenance": true, "matchers": [{"name": "cell", "value": "cell000[2]", "isRegex": true}],
   "recurrence": {"weekly": [{"start": "02:00", "end": "03:00"}]}},
  {"id": "s2-quiet", "matchers": [{"name": "site", "value": "S2"}], "endsAt": "2030-01-01T00:00:00Z"}
]}
JSON
ARGS=(--data-dir "$TMP/data" --out "$TMP/out/model.safetensors" --patch-len 4 --d-model 8
    --n-heads 2 --d-ff 8 --tx-steps 50 --once --data-days 2)
"$CLI" learn "${ARGS[@]}" --silences "$TMP/silences.json" --topology "$TMP/topo.csv" 2>"$TMP/log" ||
    fail "learn with --silences: $(tail -3 "$TMP/log")"
grep -q '10 record(s) in maintenance windows kept out of the training rows' "$TMP/log" ||
    fail "the count: $(grep -i maintenance "$TMP/log")"
python3 - "$TMP/out/all.csv" "$TMP/out/train.csv" <<'PY' || fail "the rows kept out"
import csv, sys
T0 = 1704067200
def out(cell, ts):
    h = (ts - T0) // 3600
    return (cell in ("cell0000", "cell0001") and 10 <= h < 14) or (cell == "cell0002" and h % 24 == 2)
for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    assert rows, path
    n_out = 0
    for r in rows:
        empty = r["prb_dl"] == "" and r["prb_ul"] == ""
        want = out(r["cell_id"], int(r["ts"]))
        assert empty == want, (path, r)
        n_out += want
    print(path, len(rows), "rows,", n_out, "kept out")
    if path.endswith("all.csv"):
        assert n_out == 10, n_out
PY
ok "maintenance windows kept out of the training rows (site from the topology, a recurring window); a plain silence kept nothing out"

echo '{"silences": [{"id": "x", "maintenance": true, "matchers": [{"name": "site", "value": "S1"}], "recurrence": {"weekly": [{"start": "02:00", "end": "03:00"}], "timezone": "Europe/Paris"}}]}' >"$TMP/bad.json"
if "$CLI" learn "${ARGS[@]}" --silences "$TMP/bad.json" 2>"$TMP/log2"; then
    fail "a bad silences file was accepted"
else
    grep -q -- "--silences: silences.file $TMP/bad.json: silences\[0\]: recurrence.timezone" "$TMP/log2" ||
        fail "a bad silences file: $(tail -2 "$TMP/log2")"
fi
ok "a bad silences file stops the round with its error"
[ "$FAILS" = 0 ]
