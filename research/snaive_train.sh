#!/bin/bash
# snaive_train.sh — `cellcast train` offline (docs/training.md's hourly recipe at horizon 6)
# on the rows up to the end of day d-1 of a learn_replay_next.sh KEEP_CSV=1 run, scored by
# `cellcast eval` on day d against the one-day seasonal naive (docs/results.md, "Every day
# below the seasonal naive?").
#   usage: snaive_train.sh CELLCAST RUNS OUTDIR "DAYS" "STEPS" "SEEDS"
# Prints: day steps split seed ratio(model MAE / seasonal naive MAE on day d).
set -eu
CLI=$(realpath "$1"); R=$2; O=$3; DAYS=$4; STEPS=$5; SEEDS=$6
mkdir -p "$O"
t0=$(head -2 "$R/s1/day1/all.csv" | tail -1 | cut -d, -f1)
for d in $DAYS; do
    p=$((d - 1)); frm=$((t0 + (d - 1) * 86400))
    for n in $STEPS; do
        for split in 0.85,0.15 1,0; do
            for s in $SEEDS; do
                m="$O/d${d}-n${n}-sp${split/,/_}-s${s}.safetensors"
                ev=200; [ "$n" -lt 400 ] && ev=100
                nice -n 10 "$CLI" train --data "$R/s1/day$p/all.csv" --format long --horizon 6 \
                    --mae-weight 1 --nll-mean 0 --split "$split" --schedule cosine --steps "$n" \
                    --eval-every "$ev" --patience 8 --seed "$s" --threads 1 --out "$m" \
                    >"$m.log" 2>&1 || { echo "$d $n $split $s train-failed"; continue; }
                nice -n 10 "$CLI" eval --model "$m" --data "$R/s1/day$d/all.csv" --format long \
                    --step 3600 --from "$frm" --horizon 6 --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)["methods"]
print(sys.argv[1], round(j["model"]["overall"]["mae"] / j["snaive_1d"]["overall"]["mae"], 4))' "$d $n $split $s"
            done
        done
    done
done
