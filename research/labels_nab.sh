#!/bin/sh
# labels_nab.sh — `cellcast anomaly-eval --labels` as an outside user runs it
# (docs/operations.md §4 "Operator's own labels"): NAB's realKnownCause, realAWSCloudwatch and
# realTraffic files, each split into history (first 45 % of rows) and test (the rest), one
# model per family and step (`cellcast train` takes one step: the 5-minute files of a family
# share a model trained on all their histories as one long CSV; the files at other steps —
# nyc_taxi 30 min, ambient_temperature 1 h, the TravelTime files 10 min — have their own),
# NAB's combined_windows.json as the labels file as it is, alert defaults, then --budget 1.
#
#   sh research/labels_nab.sh CELLCAST NAB_DIR WORK_DIR [SEEDS]
# writes WORK_DIR/<group>_s<seed>.txt (and _b1.txt for --budget 1; SEEDS default "1 2 3") and
# prints the table of docs/operations.md (labels_nab_table.py WORK_DIR [--groups]).
# AE_ARGS (environment): more anomaly-eval options for both runs (e.g. "--set $NAB"); models
# already in WORK_DIR are reused, so a second WORK_DIR with the first one's models copied
# compares settings on the same models. TRAIN_ARGS: more `cellcast train` options (e.g.
# "--fallback").
set -eu
CLI=$1 NAB=$2 W=$3 SEEDS=${4:-1 2 3} AE_ARGS=${AE_ARGS:-} TRAIN_ARGS=${TRAIN_ARGS:-}
mkdir -p "$W"
python3 - "$NAB" "$W" "$(dirname "$0")" <<'PY'
import os, sys
nab, w = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from nab_split import split, write
groups = {}
for fam in ("realKnownCause", "realAWSCloudwatch", "realTraffic"):
    for f in sorted(os.listdir(f"{nab}/data/{fam}")):
        head, hist, test, step = split(f"{nab}/data/{fam}/{f}")
        for part, rs in (("hist", hist), ("test", test)):
            os.makedirs(f"{w}/{part}/{fam}", exist_ok=True)
            write(f"{w}/{part}/{fam}/{f}", head, rs)
        groups.setdefault(f"{fam}_{step}", []).append((f, hist))
for g, files in groups.items():
    with open(f"{w}/{g}.files", "w") as o:
        o.write("\n".join(f"{g.rsplit('_', 1)[0]}/{f}" for f, _ in files) + "\n")
    with open(f"{w}/{g}_hist.csv", "w") as o:
        o.write("timestamp,cell_id,value\n")
        for f, rs in files:
            o.writelines(f"{r[0]},{f[:-4]},{r[1]}\n" for r in rs)
PY
for gf in "$W"/*.files; do
    g=$(basename "$gf" .files) args=
    while read -r f; do
        args="$args --data $W/test/$f --history $W/hist/$f"
    done <"$gf"
    for s in $SEEDS; do
        M=$W/${g}_s$s.safetensors
        # shellcheck disable=SC2086 # $TRAIN_ARGS is a list of options
        [ -f "$M" ] || "$CLI" train --data "$W/${g}_hist.csv" --out "$M" --split 0.85,0.15 \
            --horizon 12 --steps 1500 --threads 1 --seed "$s" $TRAIN_ARGS >"$W/${g}_s$s.train" 2>&1
        # shellcheck disable=SC2086 # $args is a list of options
        "$CLI" anomaly-eval --model "$M" $args --labels "$NAB/labels/combined_windows.json" \
            $AE_ARGS >"$W/${g}_s$s.txt" 2>"$W/${g}_s$s.err" || echo "$g seed $s: failed" >&2
        # shellcheck disable=SC2086
        "$CLI" anomaly-eval --model "$M" $args --labels "$NAB/labels/combined_windows.json" \
            $AE_ARGS --budget 1 >"$W/${g}_s${s}_b1.txt" 2>"$W/${g}_s${s}_b1.err" ||
            echo "$g seed $s --budget 1: failed" >&2
    done
done

python3 "$(dirname "$0")/labels_nab_table.py" "$W"
