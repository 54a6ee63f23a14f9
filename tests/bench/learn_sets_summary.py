#!/usr/bin/env python3
"""learn_sets_summary.py WORKDIR SEEDS — the figures of docs/results.md "Sets the learner was
not tuned on" from a tests/bench/learn_replay_next.sh WORKDIR (its sS/dayD/round.json,
next-*.json, m.safetensors copies and learn.log), per seed:

  - the first model: the data days of the first round that published;
  - served / seasonal naive on the serving day (the next round's held-out rows; mean over
    KPIs of per-KPI MASE), mean over days 2..D, and the days above 1;
  - served against eval's `linear` (fitted by `cellcast eval` on the serving day's rows
    before them): days the served model scores below it, and the mean of served / linear;
  - the Transformer candidate's gain over the linear-only candidate, (linear - Transformer)
    / linear of the criterion, on each round's own held-out rows (the round record) and on
    the next day (next-candidate-*.json), mean over the rounds that have both;
  - the served P10-P90 coverage (eval's model_adaptive: the online scale cellcastd applies)
    per KPI on serving days that are a model's second or later (the file in service the
    day before the same), pooled over those days, with the file's static scale beside it;
  - the trainer's warnings in learn.log (loss diverged, kept the start) counted over the
    rounds (learn_replay_next.sh runs --quiet, so the largest batch loss is not in its log).
"""
import hashlib
import json
import os
import re
import statistics as st
import sys

W, seeds = sys.argv[1], sys.argv[2].split()


def mean_mase(j, method):
    pk = j["methods"].get(method, {}).get("per_kpi", {})  # eval skips `linear` on few windows
    v = [x["mase"] for x in pk.values() if isinstance(x.get("mase"), (int, float))]
    return sum(v) / len(v) if v else None


def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None


def digest(p):
    try:
        return hashlib.sha256(open(p, "rb").read()).hexdigest()
    except OSError:
        return None


def f(x, p=3):
    return "-" if x is None else f"{x:.{p}f}"


pooled_cov = {}
for s in seeds:
    base = f"{W}/s{s}"
    days = sorted(int(d[3:]) for d in os.listdir(base) if re.fullmatch(r"day\d+", d))
    first, q, lin_ratio, lin_wins, gain_held, gain_next = None, {}, [], 0, [], []
    lin_skipped = 0
    cov, cov_static, served_by, kinds = {}, {}, {}, {}
    for d in days:
        r = load(f"{base}/day{d}/round.json") or {}
        if first is None and r.get("published"):
            first = (d, r.get("data_days"), r.get("published"))
        kinds[d] = r.get("published")
        served_by[d] = digest(f"{base}/day{d}/m.safetensors")
        c = {x["kind"]: x.get("mase") for x in r.get("candidates", []) if "mase" in x}
        if isinstance(c.get("linear"), float) and isinstance(c.get("transformer"), float):
            gain_held.append((c["linear"] - c["transformer"]) / c["linear"])
        jm = load(f"{base}/day{d}/next-m.json")
        if jm is None:
            continue
        m, n, li = mean_mase(jm, "model"), mean_mase(jm, "snaive_1d"), mean_mase(jm, "linear")
        if m is not None and n:
            q[d + 1] = m / n
        if m is not None and li:
            lin_ratio.append(m / li)
            lin_wins += m < li
        elif m is not None:
            lin_skipped += 1
        jl, jt = (load(f"{base}/day{d}/next-candidate-{k}.json") for k in ("linear", "transformer"))
        if jl and jt:
            a, b = mean_mase(jl, "model"), mean_mase(jt, "model")
            if a and b is not None:
                gain_next.append((a - b) / a)
        # the serving day d + 1 is this file's second day or later when day d - 1's round
        # left the same file in service
        if d - 1 in served_by and served_by[d - 1] == served_by[d]:
            for meth, acc in (("model_adaptive", cov), ("model", cov_static)):
                for kpi, v in jm["methods"][meth]["per_kpi"].items():
                    if isinstance(v.get("coverage80"), (int, float)) and v.get("n"):
                        a = acc.setdefault(kpi, [0.0, 0])
                        a[0] += v["coverage80"] * v["n"]
                        a[1] += v["n"]
    log = open(f"{base}/learn.log").read() if os.path.exists(f"{base}/learn.log") else ""
    div = len(re.findall(r"the training loss diverged", log))
    start = len(re.findall(r"kept the start", log))
    worse = [d for d in sorted(q) if q[d] > 1]
    print(f"seed {s}: first model at round {first[0] if first else '-'} "
          f"({f(first[1], 2) if first else '-'} days of data, {first[2] if first else '-'}); "
          f"publications {sum(1 for k in kinds.values() if k)} in {len(days)} rounds "
          f"({', '.join(f'{d}:{k}' for d, k in kinds.items() if k)})")
    print(f"  served / seasonal naive, days {min(q)}-{max(q)}: mean {f(st.mean(q.values()))}; "
          f"days worse than the seasonal naive: {worse}")
    print(f"  served below eval's linear on {lin_wins} of {len(lin_ratio)} days, served / "
          f"linear mean {f(st.mean(lin_ratio) if lin_ratio else None)}; eval's linear skipped on "
          f"{lin_skipped} days")
    print(f"  Transformer's gain over the linear-only candidate: held-out "
          f"{f(100 * st.mean(gain_held) if gain_held else None, 1)} % ({len(gain_held)} rounds), "
          f"next day {f(100 * st.mean(gain_next) if gain_next else None, 1)} % "
          f"({len(gain_next)} rounds)")
    print("  P10-P90 coverage per KPI from a model's second day, served (static): " +
          ", ".join(f"{k} {f(v[0] / v[1])} ({f(cov_static[k][0] / cov_static[k][1])}, n {v[1]})"
                    for k, v in sorted(cov.items())))
    print(f"  trainer warnings: loss diverged {div}, kept the start {start}")
    print("  per day: " + " ".join(f"{d}:{q[d]:.2f}" for d in sorted(q)))
