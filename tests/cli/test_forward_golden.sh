#!/bin/sh
# test_forward_golden.sh — `cellcast forward --all` (the engine's incremental path, as the
# daemon runs it) against the independent NumPy reference's fixtures, row by row: the
# cellcast-tx/2 set (series.csv) and the two cellcast-tx/3 sets (tx3_r12, tx3_r40): same
# timestamps, y within 1e-4, mu/sigma within 1e-6 relative, and the served mean/sd (tx/3
# fixtures: with the linear path and the calibration) within 1e-4 (mean in units of sigma,
# sd relative); for tx/2, mean/sd must be y/mu/sigma's (no calibration). And the model
# trained and exported by tools/torch (tests/data/torch), against what PyTorch computed.
# Also: bad inputs exit non-zero with a message naming the problem.
set -eu
cellcast=$1
data=$2/tests/data/golden
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
compare() { # model, input csv, expected jsonl [subset: the expected rows are some of them]
    "$cellcast" forward --model "$data/$1" --input "$data/$2" --all > "$out/fwd.jsonl"
    /usr/bin/python3 - "$out/fwd.jsonl" "$data/$3" "$1" "${4:-all}" <<'PY'
import json, math, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [json.loads(l) for l in open(sys.argv[2])]
if sys.argv[4] == "subset":  # PyTorch computes only the steps with a full window
    by_ts = {g["ts"]: g for g in got}
    assert all(w["ts"] in by_ts for w in want), "an expected step is missing from forward"
    got = [by_ts[w["ts"]] for w in want]
assert len(got) == len(want) > 0, f"{len(got)} rows, expected {len(want)}"
dy = dmu = dsig = dmean = dsd = 0.0
for g, w in zip(got, want):
    assert g["ts"] == w["ts"], (g["ts"], w["ts"])
    assert len(g["y"]) == len(w["y"])
    F = len(w["mu"]); Hz = len(w["y"]) // (2 * F)
    assert len(g["mean"]) == len(g["sd"]) == F * Hz
    dy = max(dy, max(abs(a - b) for a, b in zip(g["y"], w["y"])))
    dmu = max(dmu, max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(g["mu"], w["mu"])))
    dsig = max(dsig, max(abs(a - b) / b for a, b in zip(g["sigma"], w["sigma"])))
    # tx/2 fixtures carry no mean/sd: the spec's step 7 with unit calibration
    wm = w.get("mean") or [w["y"][2 * i] * w["sigma"][i // Hz] + w["mu"][i // Hz] for i in range(F * Hz)]
    ws = w.get("sd") or [math.exp(w["y"][2 * i + 1]) * w["sigma"][i // Hz] for i in range(F * Hz)]
    for i in range(F * Hz):
        dmean = max(dmean, abs(g["mean"][i] - wm[i]) / w["sigma"][i // Hz])
        dsd = max(dsd, abs(g["sd"][i] - ws[i]) / ws[i])
print(f"forward vs reference, {sys.argv[3]}: {len(got)} rows, max |dy| {dy:.3g}, mu rel {dmu:.3g}, "
      f"sigma rel {dsig:.3g}, mean/sigma {dmean:.3g}, sd rel {dsd:.3g}")
assert dy <= 1e-4 and dmu <= 1e-6 and dsig <= 1e-6 and dmean <= 1e-4 and dsd <= 1e-4
PY
}
compare tx3_r12.safetensors tx3_r12.csv tx3_r12_forward.jsonl
compare tx3_r40.safetensors tx3_r40.csv tx3_r40_forward.jsonl
compare tiny.safetensors series.csv series_forward.jsonl
# the last row alone without --all
"$cellcast" forward --model "$data/tiny.safetensors" --input "$data/series.csv" > "$out/last.jsonl"
[ "$(cat "$out/last.jsonl")" = "$(tail -n 1 "$out/fwd.jsonl")" ]
# a model trained and exported by the PyTorch module (tools/torch/make_fixture.py)
compare ../torch/tx3_torch.safetensors ../torch/tx3_torch.csv ../torch/tx3_torch_expected.jsonl subset
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
