#!/usr/bin/env python3
"""learn_e2e_table.py RESULTS.jsonl SET — the tables of tests/bench/learn_e2e.sh from its
results (one line per seed x data day), per seed:

  data day | model serving the day (its day in service) | published at the day's end |
  served MAE / seasonal naive's, mean of one-step and horizon-end (each) | forecasts scored |
  P10-P90 coverage (truths scored) | load

The model serving day d is the one in service at the end of day d - 1 (the learner's round
at the end of a data day publishes as the next day starts). Then the pooled figures: the
coverage over a model's first day and from its second day on (the target: 0.80 +- 0.03),
the mean of the days' served ratios, and (results with `kpi_coverage`) the coverage per KPI
from a model's second day.
"""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
name = sys.argv[2] if len(sys.argv) > 2 else ""


def f(x, p=3):
    return "-" if x is None else f"{x:.{p}f}"


for seed in sorted({r["seed"] for r in rows}):
    rs = [r for r in rows if r["seed"] == seed]
    kinds = {r["hash"]: r["kind"] for r in rs if r["hash"]}
    print(f"\n{name}, seed {seed}:\n")
    print("| data day | model serving the day (its day) | published at the day's end | "
          "served MAE / seasonal naive's (one-step, horizon-end) | forecasts scored | "
          "P10–P90 coverage (truths scored) | load |")
    print("|---|---|---|---|---|---|---|")
    serving, age, last = None, 0, None
    pooled = {"first": [0.0, 0], "later": [0.0, 0]}
    ratios = []
    kpi_later = {}  # per KPI, from a model's second day: [covered, truths]
    for r in rs:
        age = age + 1 if serving is not None and serving == last else 1
        last = serving
        mdl = f"{kinds.get(serving) or '?'} {serving[:6]} ({age})" if serving else "none (learning)"
        new = r["hash"] if r["hash"] != serving and r["kind"] else None
        pub = f"{r['kind']} {new[:6]}" if new else "-"
        if serving and r["interval_scored"] > 0:
            p = pooled["first" if age == 1 else "later"]
            p[0] += r["coverage"] * r["interval_scored"]
            p[1] += r["interval_scored"]
        if serving and age > 1:
            for kpi, (cov, n) in (r.get("kpi_coverage") or {}).items():
                a = kpi_later.setdefault(kpi, [0.0, 0])
                a[0] += cov * n
                a[1] += n
        if serving and r["served_rel_mae"] is not None:
            ratios.append(r["served_rel_mae"])
        restart = ", restart" if r["restarted"] else ""
        print(f"| {r['day']} | {mdl} | {pub} | {f(r['served_rel_mae'])} "
              f"({f(r['one_step'])}, {f(r['horizon_end'])}) | {r['watch_samples']:.0f} | "
              f"{f(r['coverage'])} ({r['interval_scored']:.0f}) | {r['load'].split()[0]} |")
        serving = r["hash"] if r["kind"] else serving
    cov = {k: (v[0] / v[1] if v[1] else None, v[1]) for k, v in pooled.items()}
    print(f"\npooled P10–P90 coverage: a model's first day {f(cov['first'][0])} "
          f"({cov['first'][1]:.0f} truths), from its second day {f(cov['later'][0])} "
          f"({cov['later'][1]:.0f} truths); served MAE / seasonal naive's, mean over "
          f"{len(ratios)} days: {f(sum(ratios) / len(ratios) if ratios else None)}")
    if kpi_later:
        print("\nper KPI, P10–P90 coverage from a model's second day (one-step and horizon-end "
              "forecasts, GET /v1/cells/{id}/forecasts): " + ", ".join(
                  f"{k} {v[0] / v[1]:.3f} ({v[1]})" for k, v in sorted(kpi_later.items())))
