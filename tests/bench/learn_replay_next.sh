#!/bin/bash
# learn_replay_next.sh — what `cellcast learn` serves, scored on the day it serves: a
# --once round at the end of every data day 1..DAYS (the model in service carried from the
# previous day's round, as learn_replay.sh), and each round's published-or-kept model and
# candidates scored by `cellcast eval` on the NEXT day's held-out rows (the next round's
# all.csv, holdout_from and horizon: the learner's own criterion, the mean over KPIs of the
# per-KPI MASE of steps 1..H). learn_replay.sh scores a round's model on that round's own
# held-out day, which the gate has seen; this is the day after (docs/results.md, "The gate
# on one held-out day" and "The refit").
#
#   usage: learn_replay_next.sh CELLCAST SET WORKDIR [SEEDS] [DAYS] [LEARN ARGS...]
#     SET barcelona | hourly (replay_sets.py); SEEDS default "1 2 3"; DAYS default 30
#     (barcelona: up to 14); LEARN ARGS are passed to every round (e.g. --no-refit).
#   Prints per seed: the mean over serving days 2..DAYS and 3..DAYS of served / seasonal
#   naive on the serving day, the mean served MASE, the publications, the days served worse
#   than the seasonal naive; then the per-day ratios. WORKDIR/sS/dayD keeps each round's
#   files, record (round.json) and next-day scores (next-*.json); with KEEP_CSV=1 in the
#   environment also each day's rows (all.csv), which blend_sim.py scores blends on.
set -eu
CLI=$(realpath "${1:?cellcast binary}")
SET=${2:?set}
W=${3:?workdir}
SEEDS=${4:-1 2 3}
DAYS=${5:-30}
shift $(($# < 5 ? $# : 5))
EXTRA=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
case $SET in
barcelona) EXTRA+=(--patch-len 8) ;;
hourly | ett | ett3 | nab-traffic | nab-machine) ;;
*)
    echo "learn_replay_next.sh: SET must be barcelona, hourly, ett, ett3, nab-traffic or nab-machine" >&2
    exit 2
    ;;
esac
mkdir -p "$W/data"
W=$(realpath "$W")
python3 "$HERE/replay_sets.py" csv "$SET" "$HERE/../../../shared/data" "$W/data" >/dev/null
for seed in $SEEDS; do
    out="$W/s$seed"
    rm -rf "$out"
    mkdir -p "$out"
    for d in $(seq 1 "$DAYS"); do
        nice -n 5 "$CLI" learn --data-dir "$W/data" --out "$out/m.safetensors" --once \
            --data-days "$d" --tx-steps 1000 --seed "$seed" --quiet "${EXTRA[@]}" \
            2>>"$out/learn.log" || true
        mkdir -p "$out/day$d"
        for f in candidate-linear candidate-seasonal candidate-transformer m; do
            [ -f "$out/$f.safetensors" ] && cp "$out/$f.safetensors" "$out/day$d/"
        done
        cp "$out/all.csv" "$out/day$d/all.csv"
        tail -n 1 "$out/rounds.jsonl" >"$out/day$d/round.json"
    done
    for d in $(seq 1 $((DAYS - 1))); do
        n=$((d + 1))
        read -r from step hz < <(python3 -c '
import calendar, json, sys, time
r = json.load(open(sys.argv[1]))
print(calendar.timegm(time.strptime(r["holdout_from"], "%Y-%m-%dT%H:%M:%SZ")),
      r["step_seconds"], r["horizon"])' "$out/day$n/round.json")
        for f in candidate-linear candidate-seasonal candidate-transformer m; do
            [ -f "$out/day$d/$f.safetensors" ] || continue
            nice -n 5 "$CLI" eval --model "$out/day$d/$f.safetensors" --data "$out/day$n/all.csv" \
                --format long --step "$step" --from "$from" --horizon "$hz" --json \
                >"$out/day$d/next-$f.json" 2>/dev/null || rm -f "$out/day$d/next-$f.json"
        done
        [ "${KEEP_CSV:-0}" = 1 ] || rm -f "$out/day$d/all.csv"
    done
done
python3 - "$W" "$SEEDS" "$DAYS" <<'PY'
import json, os, statistics as st, sys
W, seeds, nd = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def mean_mase(j, method):
    pk = j["methods"][method]["per_kpi"]
    v = [x["mase"] for x in pk.values() if isinstance(x.get("mase"), (int, float))]
    return sum(v) / len(v) if v else None
table = {}
for s in seeds:
    pubs, q, mase = 0, {}, {}
    for d in range(1, nd + 1):
        r = json.load(open(f"{W}/s{s}/day{d}/round.json"))
        pubs += 1 if r.get("published") else 0
        p = f"{W}/s{s}/day{d}/next-m.json"
        if d < nd and os.path.exists(p):
            j = json.load(open(p))
            m, n = mean_mase(j, "model"), mean_mase(j, "snaive_1d")
            if m is not None and n:
                q[d + 1], mase[d + 1] = m / n, m
    lost = [d for d in sorted(q) if q[d] > 1]
    late = [d for d in q if d >= 3]
    print(f"seed {s}: served / seasonal naive on the serving day, days 2-{nd} "
          f"{st.mean(q.values()):.3f}, days 3-{nd} {st.mean(q[d] for d in late):.3f}; served MASE "
          f"days 3-{nd} {st.mean(mase[d] for d in late):.3f}; publications {pubs} in {nd} "
          f"rounds; days worse than the seasonal naive: {lost}")
    table[s] = q
days = sorted(set().union(*table.values()))
print("| seed | " + " | ".join(str(d) for d in days) + " |")
print("|---|" + "---|" * len(days))
for s in seeds:
    print(f"| {s} | " + " | ".join(f"{table[s][d]:.2f}" if d in table[s] else "-" for d in days) + " |")
PY
