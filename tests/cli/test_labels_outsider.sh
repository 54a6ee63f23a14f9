#!/bin/bash
# test_labels_outsider.sh — `cellcast anomaly-eval --labels` as an outside checker runs it
# (issue 13; docs/operations.md section 5 "Operator's own labels"): a one-cell file stored as
# NAB stores its files, NAB's corpus-wide windows file (fractional seconds, keys of files not
# in --data) as it is, and the same windows as a spreadsheet writes them (BOM, CRLF, ';',
# quotes, a capitalised header); duplicate and overlapping windows are one event; keys that
# select no cell are one line, not one per window; a file whose windows all miss, an unknown
# KPI under any key and a JSON list are refused with the reason.
#   usage: test_labels_outsider.sh CELLCAST SOURCE_ROOT
set -u
CLI=${1:?cellcast binary}
ROOT=${2:?source root}
MODEL="$ROOT/models/default.safetensors" # F=8, S=900, HZ=24
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_files "$MODEL"
test_workdir labels-outsider

"$CLI" synth --cells 2 --days 8 --seed 3 --burst-rate 0 --outage-rate 0 --gap-rate 0 \
    --missing-rate 0 >"$TMP/s.csv" 2>/dev/null || { echo "FAIL: cellcast synth"; exit 1; }
# cell0000 as a wide file at data/fam/one.csv, an outage in its test rows (08:00-09:30 on the
# last day; the test rows are the last 20 %, from 2024-01-07 09:30)
mkdir -p "$TMP/data/fam"
awk -F, -v OFS=, 'NR == 1 || $2 == "cell0000" { if (NR > 1 && $1 >= 1704700800 &&
    $1 <= 1704706200) for (i = 3; i <= NF; i++) $i = 0; $2 = ""; sub(/,,/, ","); print }' \
    "$TMP/s.csv" >"$TMP/data/fam/one.csv"
sed -i '1s/^ts,/timestamp,/' "$TMP/data/fam/one.csv"
run() { # LABELS: anomaly-eval of one.csv against it, stdout in out, stderr in err
    "$CLI" anomaly-eval --model "$MODEL" --data "$TMP/data/fam/one.csv" --test-frac 0.2 \
        --labels "$1" >"$TMP/out" 2>"$TMP/err"
}

# NAB's layout: the whole corpus's keys, windows with .000000
python3 - "$TMP/nab.json" <<'PY'
import json, sys
w = {f"other/file{i}.csv": [["2015-01-01 00:00:00.000000", "2015-01-02 00:00:00.000000"]]
     for i in range(30)}
w["fam/one.csv"] = [["2024-01-08 07:30:00.000000", "2024-01-08 10:00:00.000000"]]
json.dump(w, open(sys.argv[1], "w"), indent=4)
PY
run "$TMP/nab.json" || fail "NAB-shaped labels: exit: $(tail -2 "$TMP/err")"
grep -q 'labelled *recall 1.000 (1/1)' "$TMP/out" || fail "NAB-shaped labels: $(cat "$TMP/out")"
grep -q '30 window(s) under 30 key(s) name no cell or --data file ("other/file0.csv", ' \
    "$TMP/err" || fail "keys of other files not summed up: $(cat "$TMP/err")"
[ "$(grep -c -- '--labels' "$TMP/err")" -le 2 ] ||
    fail "one line per unused key: $(grep -c -- '--labels' "$TMP/err") lines"

# the same window as a spreadsheet exports it, twice, and an overlapping one: one event
printf '\xef\xbb\xbf"Start";"End";"Cell_ID"\r\n"2024-01-08T07:30:00Z";"2024-01-08T10:00:00Z";"fam/one.csv"\r\n"2024-01-08 08:30:00+01:00";"2024-01-08 11:00:00+01:00";"one.csv"\r\n1704702600000;1704708000000;one\r\n' \
    >"$TMP/sheet.csv"
run "$TMP/sheet.csv" || fail "spreadsheet labels: exit: $(tail -2 "$TMP/err")"
grep -q 'labelled *recall 1.000 (1/1)' "$TMP/out" ||
    fail "spreadsheet labels, duplicates not one event: $(grep labelled "$TMP/out")"
[ "$(grep -c 'scored as one event' "$TMP/err")" = 2 ] || fail "merges not reported: $(cat "$TMP/err")"

# a window partly before the test rows is cut there and said so
printf 'start,end\n2024-01-07 00:00:00,2024-01-07 10:00:00\n2024-01-08 07:30:00,2024-01-08 10:00:00\n' \
    >"$TMP/cut.csv"
run "$TMP/cut.csv" || fail "cut window: exit: $(tail -2 "$TMP/err")"
grep -q 'line 2 (2024-01-07T00:00:00Z to 2024-01-07T10:00:00Z): cut to the test rows' "$TMP/err" ||
    fail "cut window not reported: $(cat "$TMP/err")"

# a long file: each cell's windows by its id, a day given as a date alone covers the day
# (96 steps of 15 minutes), a window for every cell lands on both (a detector that never
# fires, so that --verbose lists every window as missed, with its rows)
printf 'cell_id,start,end\ncell0000,2024-01-08,2024-01-08\ncell0001,2024-01-08 07:30:00,2024-01-08 10:00:00\n,2024-01-07 12:00:00,2024-01-07 13:00:00\n' \
    >"$TMP/long.csv"
"$CLI" anomaly-eval --model "$MODEL" --data "$TMP/s.csv" --test-frac 0.2 --labels "$TMP/long.csv" \
    --set warn_z=1e6,crit_z=1e6,cusum_h=0,profile_h=0,novelty_tol=0 \
    --verbose >"$TMP/out" 2>"$TMP/err" || fail "long file: exit: $(tail -2 "$TMP/err")"
{ grep -q '^  cell0000: 2 labelled window(s) in its test rows' "$TMP/err" &&
    grep -q '^  cell0001: 2 labelled window(s) in its test rows' "$TMP/err"; } ||
    fail "long file: windows per cell: $(grep labelled "$TMP/err")"
grep -q 'cell0000 .*labelled .*rows 672-768 ' "$TMP/err" || fail "a date as the end is not its whole day"

# refused, with the reason: nothing lands; a KPI that is not the model's (under a key of
# no cell too); a JSON list
printf '{"fam/two.csv": [["2024-01-08 07:30:00", "2024-01-08 10:00:00"]]}' >"$TMP/none.json"
run "$TMP/none.json" && fail "labels that select no cell accepted"
grep -q 'no window lands on a test row of --data: nothing to score' "$TMP/err" ||
    fail "no window lands: $(cat "$TMP/err")"
printf 'start,end,cell_id,kpi\n2024-01-08 07:30:00,2024-01-08 10:00:00,elsewhere,prb_down\n' \
    >"$TMP/kpi.csv"
run "$TMP/kpi.csv" && fail "an unknown KPI accepted"
grep -q "line 2: 'prb_down' is not a model KPI (the model's: prb_dl," "$TMP/err" ||
    fail "unknown KPI: $(cat "$TMP/err")"
printf '[["2024-01-08 07:30:00", "2024-01-08 10:00:00"]]' >"$TMP/list.json"
run "$TMP/list.json" && fail "a JSON list accepted"
grep -q 'the top level is a list, not an object' "$TMP/err" || fail "JSON list: $(cat "$TMP/err")"

[ "$FAILS" = 0 ] && echo "labels-outsider: all checks passed"
exit $((FAILS > 0))
