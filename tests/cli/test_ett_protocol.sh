#!/bin/bash
# test_ett_protocol.sh — `--protocol ett` of `cellcast train` and `cellcast eval` takes the
# benchmark's standard split by the data's step: ETTh's rows 0-8640 / 8640-11520 /
# 11520-14400 for hourly data, four times as many for ETTm's 15-minute data (it took the
# hourly rows whatever the step: a test period of the wrong months on ETTm); any other step
# is refused with a message. Synthetic two-KPI wide files; about 3 s.
#   usage: test_ett_protocol.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
PY=/usr/bin/python3
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir ett-protocol
need_tools "$PY"

# wide STEP ROWS: a wide file (unix-second times) of two smooth KPIs
wide() {
    awk -v s="$1" -v n="$2" 'BEGIN { print "date,a,b"
        for (i = 0; i < n; i++) printf "%d,%.3f,%.3f\n", 1467331200 + s * i, sin(i / 96 * 6.283) + (i % 7) * 0.1, cos(i / 13.0) }'
}
wide 3600 14500 >"$TMP/h.csv"
wide 900 57700 >"$TMP/m.csv"
wide 1800 30000 >"$TMP/x.csv"

# split FILE TRAIN_END TEST_BEGIN TEST_END: eval's test rows, origins and z-scoring slice
split() {
    "$CLI" eval --data "$1" --protocol ett --json 2>"$TMP/err" >"$TMP/ev.json" ||
        { fail "eval --protocol ett $1: $(tail -1 "$TMP/err")"; return; }
    $PY - "$TMP/ev.json" "$2" "$3" "$4" <<'PY' && ok "eval --protocol ett $1: rows 0-$2 train, $3-$4 test" || fail "eval --protocol ett $1: $(head -c 300 "$TMP/ev.json")"
import json, sys
d = json.load(open(sys.argv[1]))
tr, b, e = map(int, sys.argv[2:])
assert (d["test_begin_row"], d["test_end_row"]) == (b, e), d
assert d["origins"] == e - b - 96 + 1, d["origins"]
assert "zscore_train_rows_0_%d" % tr in d, list(d)
PY
}
split "$TMP/h.csv" 8640 11520 14400
split "$TMP/m.csv" 34560 46080 57600

"$CLI" eval --data "$TMP/x.csv" --protocol ett >/dev/null 2>"$TMP/err" && fail "eval: a 30-minute file taken" ||
    { grep -q "hourly (ETTh) or 15-minute (ETTm) steps, not 1800 s" "$TMP/err" && ok "eval: a 30-minute file refused" ||
        fail "eval: $(tail -1 "$TMP/err")"; }

# train: the split it took, as the model's metadata records it
"$CLI" train --data "$TMP/m.csv" --out "$TMP/m.safetensors" --protocol ett --steps 1 --threads 1 \
    >/dev/null 2>"$TMP/train.err" || fail "train --protocol ett 15-minute: $(tail -2 "$TMP/train.err")"
"$CLI" info --model "$TMP/m.safetensors" 2>/dev/null | grep -q '"split": "rows:0-34560,34560-46080,46080-57600"' &&
    ok "train --protocol ett on 15-minute data: ETTm's split" ||
    fail "train --protocol ett 15-minute: split $("$CLI" info --model "$TMP/m.safetensors" 2>&1 | grep split)"
"$CLI" train --data "$TMP/x.csv" --out "$TMP/x.safetensors" --protocol ett --steps 1 \
    >/dev/null 2>"$TMP/err" && fail "train: a 30-minute file taken" ||
    { grep -q "wants hourly (ETTh) or 15-minute (ETTm) steps, the data has 1800 s" "$TMP/err" &&
        ok "train: a 30-minute file refused" || fail "train: $(tail -1 "$TMP/err")"; }
[ "$FAILS" = 0 ] && echo "test_ett_protocol: all ok"
exit $((FAILS > 0))
