#!/bin/bash
# attn_recipe.sh — one Transformer recipe on one learner round's rows (issue 31, "where
# attention earns its place"): `cellcast train` with the learner's Transformer argv
# (tools/cmd_learn.c transformer_candidate: --linear-init ridge-kpi --eval-start --select mase
# --split 0.85,0.15 --mae-weight 1 --nll-mean 0 --mae-units mase, 1000 steps) plus EXTRA
# options, on ROUND/train.csv, scored by `cellcast eval` on ROUND/all.csv from the round's
# holdout_from (the learner's criterion: mean over KPIs of the per-KPI MASE of steps 1..24).
#
#   usage: attn_recipe.sh CELLCAST ROUND OUTNAME SEED [EXTRA...]
#     ROUND: a `cellcast learn --once` out dir (train.csv, all.csv, rounds.jsonl)
#   Prints one JSON line: {"round", "name", "seed", "mase", "per_kpi", "extra"}; leaves
#   ROUND/OUTNAME-sSEED.{safetensors,log,json}.
set -eu
CLI=$(realpath "${1:?cellcast binary}")
ROUND=${2:?round dir}
NAME=${3:?name}
SEED=${4:?seed}
shift 4
read -r from step hz < <(tail -n 1 "$ROUND/rounds.jsonl" | python3 -c '
import json, sys, calendar, time
r = json.loads(sys.stdin.read())
print(calendar.timegm(time.strptime(r["holdout_from"], "%Y-%m-%dT%H:%M:%SZ")),
      r["step_seconds"], r["horizon"])')
out="$ROUND/$NAME-s$SEED"
patch=8
[ "$step" -ge 3600 ] && patch=16
nice -n 5 "$CLI" train --data "$ROUND/train.csv" --format long --step "$step" --out "$out.safetensors" \
    --horizon "$hz" --patch-len $patch --linear-init ridge-kpi --eval-start --select mase \
    --split 0.85,0.15 --mae-weight 1 --nll-mean 0 --mae-units mase --steps 1000 --threads 1 \
    --seed "$SEED" --quiet "$@" 2>"$out.log"
nice -n 5 "$CLI" eval --model "$out.safetensors" --data "$ROUND/all.csv" --format long \
    --step "$step" --from "$from" --horizon "$hz" --json >"$out.json" 2>>"$out.log"
python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["methods"]["model"]["per_kpi"]
v = {k: x["mase"] for k, x in m.items() if isinstance(x.get("mase"), (int, float))}
print(json.dumps({"round": sys.argv[2], "name": sys.argv[3], "seed": int(sys.argv[4]),
    "mase": sum(v.values()) / len(v), "per_kpi": v, "extra": sys.argv[5:]}))' \
    "$out.json" "$ROUND" "$NAME" "$SEED" "$@"
