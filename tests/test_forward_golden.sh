#!/bin/sh
# test_forward_golden.sh — `cellcast forward --all` (the engine's incremental path, as the
# daemon runs it) against the independent NumPy reference's fixture, row by row:
# same timestamps, y within 1e-4, mu/sigma within 1e-6 relative. Also: bad inputs exit
# non-zero with a message naming the problem.
set -eu
cellcast=$1
data=$2/tests/data/golden
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$cellcast" forward --model "$data/tiny.safetensors" --input "$data/series.csv" --all > "$out/fwd.jsonl"
/usr/bin/python3 - "$out/fwd.jsonl" "$data/series_forward.jsonl" <<'PY'
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [json.loads(l) for l in open(sys.argv[2])]
assert len(got) == len(want), f"{len(got)} rows, expected {len(want)}"
dy = dmu = dsig = 0.0
for g, w in zip(got, want):
    assert g["ts"] == w["ts"], (g["ts"], w["ts"])
    assert len(g["y"]) == len(w["y"])
    dy = max(dy, max(abs(a - b) for a, b in zip(g["y"], w["y"])))
    dmu = max(dmu, max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(g["mu"], w["mu"])))
    dsig = max(dsig, max(abs(a - b) / b for a, b in zip(g["sigma"], w["sigma"])))
print(f"forward vs reference: {len(got)} rows, max |dy| {dy:.3g}, mu rel {dmu:.3g}, sigma rel {dsig:.3g}")
assert dy <= 1e-4 and dmu <= 1e-6 and dsig <= 1e-6
PY
# the last row alone without --all
"$cellcast" forward --model "$data/tiny.safetensors" --input "$data/series.csv" > "$out/last.jsonl"
[ "$(cat "$out/last.jsonl")" = "$(tail -n 1 "$out/fwd.jsonl")" ]
# bad inputs: each must fail with a message naming the problem
check_bad() { # name, expected message fragment, csv text
    printf '%s' "$3" > "$out/bad.csv"
    if "$cellcast" forward --model "$data/tiny.safetensors" --input "$out/bad.csv" 2> "$out/err"; then
        echo "FAIL: $1 accepted"; exit 1
    fi
    grep -q "$2" "$out/err" || { echo "FAIL: $1: message '$(cat "$out/err")' lacks '$2'"; exit 1; }
    echo "ok: $1: $(cat "$out/err")"
}
check_bad "unknown column" "unknown column 'bytes'" "ts,prb,thr,bytes
900,1,2,3
"
check_bad "wrong count" "fields, expected 4" "ts,prb,thr,users
900,1,2
"
check_bad "non-numeric" "'abc' is not a finite number" "ts,prb,thr,users
900,1,abc,3
"
check_bad "not a multiple" "not a multiple" "ts,prb,thr,users
901,1,2,3
"
check_bad "not consecutive" "does not follow" "ts,prb,thr,users
900,1,2,3
2700,1,2,3
"
echo "forward golden: ok"
