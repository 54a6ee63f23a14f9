#!/bin/bash
# learn_replay.sh — `cellcast learn` replayed in data time on a real set, and the table of
# docs/results.md "Learning from the stream": for each data day D (a --once round on the
# first D days; the model in service carried from the previous day's round), the held-out
# mean per-KPI MASE (steps 1..H, every KPI weighing alike) of the model served after the
# round's champion/challenger, of each candidate, of `cellcast eval`'s seasonal naive and
# pooled `linear`, and of `cellcast train` run offline on the same training rows with the
# documented recipe (docs/training.md: --mae-weight 1 --nll-mean 0; --patch-len 8 at 2
# minutes; 1000 steps, the learner's --tx-steps), scored by `cellcast eval` on the same
# held-out rows. Seeds: the Transformer's and the offline training's.
#
#   usage: learn_replay.sh CELLCAST SET WORKDIR [SEEDS] [DAYS]
#     SET: barcelona (ElBorn, LesCorts, PobleSec train files, each shifted by whole weeks to
#          start within a week of the first: a replay of three sites starting together) or
#          hourly (the three train_Cell*.csv)
#     SEEDS default "1 2 3"; DAYS default "1 2 3 5 7 10 14"
#   Prints the table (mean ± sd over seeds where trained) and leaves WORKDIR/results.jsonl.
set -eu
CLI=$(realpath "${1:?cellcast binary}")
SET=${2:?set}
W=${3:?workdir}
SEEDS=${4:-1 2 3}
DAYS=${5:-1 2 3 5 7 10 14}
SHARED=$(cd "$(dirname "$0")/../../.." && pwd)/shared/data
TX_STEPS=1000
mkdir -p "$W/data"
W=$(realpath "$W")
case $SET in
barcelona) EXTRA=(--patch-len 8) ;;
hourly) EXTRA=() ;;
*)
    echo "learn_replay.sh: SET must be barcelona or hourly" >&2
    exit 2
    ;;
esac
python3 "$(dirname "$0")/replay_sets.py" csv "$SET" "$SHARED" "$W/data"
: >"$W/results.jsonl"
for seed in $SEEDS; do
    out="$W/s$seed"
    rm -rf "$out"
    mkdir -p "$out"
    for d in $DAYS; do
        t0=$(date +%s.%N)
        nice -n 5 "$CLI" learn --data-dir "$W/data" --out "$out/m.safetensors" --once \
            --data-days "$d" --tx-steps $TX_STEPS --seed "$seed" --quiet "${EXTRA[@]}" \
            2>>"$out/learn.log"
        t1=$(date +%s.%N)
        # the offline run on the learner's own training rows, scored on its held-out rows
        read -r from step hz < <(tail -n 1 "$out/rounds.jsonl" | python3 -c '
import json, sys, calendar, time
r = json.loads(sys.stdin.read())
print(calendar.timegm(time.strptime(r["holdout_from"], "%Y-%m-%dT%H:%M:%SZ")),
      r["step_seconds"], r["horizon"])')
        offline=null
        if nice -n 5 "$CLI" train --data "$out/train.csv" --format long --step "$step" \
            --out "$out/offline.safetensors" --horizon "$hz" --mae-weight 1 --nll-mean 0 \
            --steps $TX_STEPS --threads 1 --seed "$seed" --quiet "${EXTRA[@]}" \
            2>>"$out/offline.log" &&
            nice -n 5 "$CLI" eval --model "$out/offline.safetensors" --data "$out/all.csv" \
                --format long --step "$step" --from "$from" --horizon "$hz" --json \
                >"$out/offline.json" 2>>"$out/offline.log"; then
            offline=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["methods"]["model"]["per_kpi"]
v = [x["mase"] for x in m.values() if isinstance(x.get("mase"), (int, float))]
print(sum(v) / len(v) if v else "null")' "$out/offline.json")
        fi
        tail -n 1 "$out/rounds.jsonl" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
c = {x["kind"]: x.get("mase") for x in r["candidates"]}
served = c[r["published"]] if "published" in r else r["champion_before"].get("mase")
print(json.dumps({"seed": int(sys.argv[1]), "day": float(sys.argv[2]),
    "served": served, "published": r.get("published"), "candidates": c,
    "snaive": r["baselines"]["snaive_1d_mase"], "linear": r["baselines"]["linear_mase"],
    "offline": json.loads(sys.argv[3]), "learn_wall_s": float(sys.argv[4]),
    "cells": r["cells"], "horizon": r["horizon"], "decision": r["decision"]}))' \
            "$seed" "$d" "$offline" "$(echo "$t1 - $t0" | bc)" >>"$W/results.jsonl"
    done
done
python3 - "$W/results.jsonl" "$SET" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
days = sorted({r["day"] for r in rows})
def ms(v):
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    if len(v) == 1 or max(v) - min(v) < 5e-5:
        return f"{v[0]:.3f}"
    return f"{st.mean(v):.3f} ± {st.stdev(v):.3f}"
print(f"| {sys.argv[2]} day | cells | served (published) | linear-only | seasonal | Transformer | "
      "Transformer's gain over linear-only | `cellcast train` offline | seasonal naive | eval `linear` |")
print("|---|---|---|---|---|---|---|---|---|---|")
for d in days:
    rs = [r for r in rows if r["day"] == d]
    pub = ",".join(sorted({str(r["published"] or "kept") for r in rs}))
    lin = [r["candidates"].get("linear") for r in rs]
    tx = [r["candidates"].get("transformer") for r in rs]
    gain = [(l - t) / l * 100 for l, t in zip(lin, tx) if l is not None and t is not None]
    g = f"{st.mean(gain):+.1f} %" if gain else "-"
    print(f"| {d:g} | {rs[0]['cells']} | {ms([r['served'] for r in rs])} ({pub}) | {ms(lin)} | "
          f"{ms([r['candidates'].get('seasonal') for r in rs])} | {ms(tx)} | {g} | "
          f"{ms([r['offline'] for r in rs])} | {ms([r['snaive'] for r in rs])} | "
          f"{ms([r['linear'] for r in rs])} |")
PY
