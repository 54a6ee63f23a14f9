#!/usr/bin/env python3
"""snaive_oracle.py — can any causal learner beat the one-day seasonal naive on EVERY hourly
day after the first Transformer (issue 31)? The limit analysis of docs/results.md, "Every
day below the seasonal naive?".

For each serving day d (2..DAYS) it scores on day d's held-out origins (the learner's
criterion: MAE pooled over the 3 cells, origins whose 6 steps fall in day d, steps 1..6;
with one KPI the MASE ratio is this MAE ratio) every model one could have built from the
data up to the end of day d-1:
  - fixed linear maps of the last raw steps (each one a linear-only tx/3 file, the linear
    path of shared/spec/model.md): naive, weekly naive, the mean / median of the same hour
    over the last k days, the one-day seasonal naive shifted by the last hour's day-on-day
    change, blends of the one- and seven-day seasonal naives;
  - with CELLCAST and RUNS (a learn_replay_next.sh WORKDIR run with KEEP_CSV=1): the
    learner's candidates (linear-only, seasonal, Transformer) and served models of every
    round r <= d-1 of every seed, and their blends with the seasonal naive
    (blend_sim.py's tx/3 blend), scored by `cellcast eval` on day d; eval's `linear` pooled
    and per series.
Then causal selection rules over that library (at the end of day d-1, the member with the
lowest error over the last N days serves day d) and the bootstrap of the per-day noise.

  snaive_oracle.py collect CELLCAST RUNS OUT.json [SEEDS] [DAYS]   the eval-based scores
  snaive_oracle.py origins CELLCAST RUNS OUT.json [SEEDS] [DAYS]   the served model's
                                                                   per-(cell, origin) errors
  snaive_oracle.py report RUNS COLLECT.json ORIGINS.json           tables on stdout
"""
import csv
import json
import math
import os
import random
import statistics as st
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "bench"))
import blend_sim  # noqa: E402  (the tx/3 blend writer)

H, DAY, ORIGINS = 6, 24, 19  # horizon, steps a day, origins a cell-day (24 - 6 + 1)
LOSING = (5, 9, 10, 16, 27)
ALPHAS = (0.25, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9)


def load_grid(path):
    """{cell: [value or None per hour from the first row]} of a long all.csv."""
    rows = {}
    for r in csv.DictReader(open(path)):
        rows.setdefault(r["cell_id"], []).append((int(r["ts"]), float(r["Traffic"])))
    t0 = min(v[0][0] for v in rows.values())
    grid = {}
    for c, v in rows.items():
        n = (v[-1][0] - t0) // 3600 + 1
        g = [None] * n
        for t, x in v:
            g[(t - t0) // 3600] = x
        # inputs at a missing hour: the last value (targets there are not scored)
        grid[c] = g
    return t0, grid


def filled(g):
    out, last = [], 0.0
    for x in g:
        last = x if x is not None else last
        out.append(last)
    return out


def families():
    """name -> f(y, o, k): the forecast of hour o + k from the hours before o (fixed linear maps)."""
    fam = {
        "naive": lambda y, o, k: y[o - 1],
        "snaive_1d": lambda y, o, k: y[o + k - DAY],
        "snaive_1w": lambda y, o, k: y[o + k - 7 * DAY] if o + k >= 7 * DAY else None,
        "0.5·(1d + 1w)": lambda y, o, k: 0.5 * (y[o + k - DAY] + y[o + k - 7 * DAY]) if o + k >= 7 * DAY else None,
    }
    for m in (2, 3, 4, 5, 7):
        fam[f"mean {m}d"] = (lambda m: lambda y, o, k: st.mean(y[o + k - j * DAY] for j in range(1, m + 1))
                             if o + k >= m * DAY else None)(m)
    for m in (3, 5, 7):
        fam[f"median {m}d"] = (lambda m: lambda y, o, k: st.median(y[o + k - j * DAY] for j in range(1, m + 1))
                               if o + k >= m * DAY else None)(m)
    fam["0.7·1d + 0.3·2d"] = lambda y, o, k: 0.7 * y[o + k - DAY] + 0.3 * y[o + k - 2 * DAY] if o + k >= 2 * DAY else None
    for b in (0.25, 0.5):
        fam[f"1d + {b}·(last − its 1d)"] = (lambda b: lambda y, o, k: y[o + k - DAY] + b * (y[o - 1] - y[o - 1 - DAY])
                                           if o - 1 >= DAY else None)(b)
    return fam


def day_errors(grid, d, f):
    """[(cell, origin, sum |err| over the scored steps, steps)] on day d (1-based), or None."""
    out = []
    for c, g in grid.items():
        y = filled(g)
        for i in range(ORIGINS):
            o = (d - 1) * DAY + i
            s = n = 0
            for k in range(H):
                if o + k >= len(g) or g[o + k] is None:
                    continue
                p = f(y, o, k)
                if p is None:
                    return None
                s += abs(g[o + k] - p)
                n += 1
            out.append((c, i, s, n))
    return out


def ratio(e, s):
    return sum(x[2] for x in e) / sum(x[2] for x in s)


def eval_json(cli, model, data, frm, extra=()):
    args = [cli, "eval", "--data", data, "--format", "long", "--step", "3600", "--from", str(frm),
            "--horizon", str(H), "--json"] + list(extra)
    if model:
        args += ["--model", model]
    p = subprocess.run(args, capture_output=True, text=True)
    return json.loads(p.stdout) if p.returncode == 0 else None


def mae(j, method="model"):
    m = j["methods"].get(method)
    return m["overall"]["mae"] if m else None


def day_from(t0, d):
    return t0 + (d - 1) * 86400


def collect(cli, runs, out, seeds, nd):
    """Every candidate / served model of rounds r < d (and their blends) on day d."""
    t0, _ = load_grid(f"{runs}/s{seeds[0]}/day{nd}/all.csv")
    tmp = tempfile.mkdtemp(prefix="snaive_oracle.", dir="/tmp/snaive")
    res = {"scores": {}, "linear": {}}
    kinds = ("linear", "seasonal", "transformer", "m")
    for d in range(2, nd + 1):
        frm = day_from(t0, d)
        data = f"{runs}/s{seeds[0]}/day{d}/all.csv"
        base = eval_json(cli, None, data, frm)
        lin = mae(base, "linear")
        res["linear"][d] = {"pooled": lin / mae(base, "snaive_1d") if lin is not None else None,
                            "snaive_mae": mae(base, "snaive_1d")}
        ps = eval_json(cli, None, data, frm, ["--per-series"])
        num = den = 0.0
        for sj in ps["per_series"]:
            m = sj["methods"]
            if "linear" not in m or m["linear"]["overall"]["mae"] is None:
                continue
            num += m["linear"]["overall"]["mae"] * m["linear"]["overall"]["n"]
            den += m["snaive_1d"]["overall"]["mae"] * m["snaive_1d"]["overall"]["n"]
        res["linear"][d]["per_series"] = num / den if den else None
        rounds = range(1, d) if d in LOSING else (d - 1,)
        for s in seeds:
            for r in rounds:
                for kind in kinds:
                    f = f"{runs}/s{s}/day{r}/{'m' if kind == 'm' else 'candidate-' + kind}.safetensors"
                    if not os.path.exists(f):
                        continue
                    j = eval_json(cli, f, data, frm)
                    if not j:
                        continue
                    sn = mae(j, "snaive_1d")
                    res["scores"][f"{d}/{s}/{r}/{kind}/1"] = mae(j) / sn
                    if kind == "seasonal":
                        continue
                    for a in ALPHAS:
                        try:
                            blend_sim.blend(f, f"{tmp}/b.safetensors", a)
                        except SystemExit:
                            break
                        j = eval_json(cli, f"{tmp}/b.safetensors", data, frm)
                        if j:
                            res["scores"][f"{d}/{s}/{r}/{kind}/{a:g}"] = mae(j) / sn
        print(f"day {d} done", file=sys.stderr)
    json.dump(res, open(out, "w"))


def origins(cli, runs, out, seeds, nd):
    """The served model's (m of round d-1) error per (cell, origin) on each day d: one
    `cellcast eval --per-series` per origin on the rows cut at the origin's last step."""
    t0, grid = load_grid(f"{runs}/s{seeds[0]}/day{nd}/all.csv")
    tmp = tempfile.mkdtemp(prefix="snaive_origins.", dir="/tmp/snaive")
    rows = list(csv.DictReader(open(f"{runs}/s{seeds[0]}/day{nd}/all.csv")))
    res = {}
    for d in range(2, nd + 1):
        for i in range(ORIGINS):
            frm = day_from(t0, d) + i * 3600
            cut = f"{tmp}/cut.csv"
            with open(cut, "w") as fh:
                fh.write("ts,cell_id,Traffic\n")
                for r in rows:
                    if int(r["ts"]) < frm + H * 3600:
                        fh.write(f"{r['ts']},{r['cell_id']},{r['Traffic']}\n")
            for s in seeds:
                m = f"{runs}/s{s}/day{d - 1}/m.safetensors"
                if not os.path.exists(m):
                    continue
                j = eval_json(cli, m, cut, frm, ["--per-series", "--linear-window", "0"])
                if not j:
                    continue
                for sj in j["per_series"]:
                    cell, o = sj["series_id"], sj["methods"]["model"]["overall"]
                    if not o["n"]:
                        continue
                    res[f"{s}/{d}/{cell}/{i}"] = [o["mae"] * o["n"], o["n"]]
        print(f"day {d} done", file=sys.stderr)
    json.dump(res, open(out, "w"))


def report(runs, coll, orig, seeds=("1", "2", "3"), nd=30):
    t0, grid = load_grid(f"{runs}/s{seeds[0]}/day{nd}/all.csv")
    fam = families()
    sn = {d: day_errors(grid, d, fam["snaive_1d"]) for d in range(2, nd + 1)}
    C = json.load(open(coll))
    # the library: name -> {day: ratio to the seasonal naive}
    lib = {}
    for name, f in fam.items():
        lib[name] = {}
        for d in range(2, nd + 1):
            e = day_errors(grid, d, f)
            if e is not None:
                lib[name][d] = ratio(e, sn[d])
    print("check: eval's seasonal-naive MAE against this script's (max relative difference):",
          f"{max(abs(sum(x[2] for x in sn[d]) / sum(x[3] for x in sn[d]) / C['linear'][str(d)]['snaive_mae'] - 1) for d in range(2, nd + 1)):.2e}")
    lib["eval linear (pooled)"] = {int(d): v["pooled"] for d, v in C["linear"].items() if v["pooled"]}
    lib["eval linear (per series)"] = {int(d): v["per_series"] for d, v in C["linear"].items() if v["per_series"]}
    S = {}
    for key, v in C["scores"].items():
        d, s, r, kind, a = key.split("/")
        S[int(d), s, int(r), kind, float(a)] = v
    for s in seeds:
        for kind in ("linear", "seasonal", "transformer", "m"):
            for a in (1.0,) + ALPHAS:
                name = f"round d-1 {kind if kind != 'm' else 'served'} a={a:g} s{s}"
                v = {d: S[d, s, d - 1, kind, a] for d in range(2, nd + 1) if (d, s, d - 1, kind, a) in S}
                if v:
                    lib[name] = v

    print("\n## 1. Day d, every model buildable from the data up to day d-1 (ratio to the seasonal naive)\n")
    print("| day | served (s1/s2/s3) | best learner candidate or blend of rounds <= d-1 (which) | same, a = 1 only | "
          "best fixed linear map (which) | weekly naive | eval linear pooled / per series |")
    print("|---|---|---|---|---|---|---|")
    for d in LOSING:
        served = "/".join(f"{S.get((d, s, d - 1, 'm', 1.0), float('nan')):.3f}" for s in seeds)
        cand = {k: v for k, v in S.items() if k[0] == d}
        best = min(cand, key=cand.get)
        best1 = min((k for k in cand if k[4] == 1.0), key=cand.get)
        fx = {n: lib[n][d] for n in fam if d in lib[n] and n != "snaive_1d"}
        bf = min(fx, key=fx.get)
        print(f"| {d} | {served} | {cand[best]:.3f} (seed {best[1]} round {best[2]} {best[3]} a={best[4]:g}) | "
              f"{cand[best1]:.3f} (seed {best1[1]} round {best1[2]} {best1[3]}) | {fx[bf]:.3f} ({bf}) | "
              f"{lib['snaive_1w'].get(d, float('nan')):.3f} | {lib['eval linear (pooled)'].get(d, float('nan')):.3f} / "
              f"{lib['eval linear (per series)'].get(d, float('nan')):.3f} |")
    # how many of all the models below 1 on each losing day, and how they did the week before
    print("\n## 2. The models below the seasonal naive on a losing day, and their record on the 7 days before\n")
    for d in LOSING:
        cand = {k: v for k, v in S.items() if k[0] == d and v < 1}
        fx = {n: lib[n][d] for n in lib if d in lib[n] and lib[n][d] < 1 and not n.startswith("round")}
        tot = sum(1 for k in S if k[0] == d)
        print(f"day {d}: {len(cand)} of {tot} learner models/blends below 1; fixed maps / eval linear below 1: "
              + (", ".join(f"{n} {v:.3f}" for n, v in sorted(fx.items(), key=lambda x: x[1])) or "none"))
        # the candidate kinds of round d-1 below 1, with their mean over days d-7..d-1
        for n in sorted(lib, key=lambda n: lib[n].get(d, 9)):
            if lib[n].get(d, 9) >= 1:
                continue
            prev = [lib[n][x] for x in range(max(2, d - 7), d) if x in lib[n]]
            worse_prev = sum(1 for x in prev if x > 1)
            print(f"    {n:40s} day {d} {lib[n][d]:.3f}; days {max(2, d - 7)}-{d - 1}: mean "
                  f"{(st.mean(prev) if prev else float('nan')):.3f}, {worse_prev} of {len(prev)} above 1")
    print("\n## 2b. Ranked by what was known at the end of day d-1 (every member with a score on d-1: "
          "fixed maps; seed-1 learner models of every round r <= d-2 and their blends)\n")
    print("| day | members | N | the member best over d-N..d-1: its day-d ratio (which) | "
          "members of the best 10 below 1 on day d | best rank of a member below 1 on day d (which, its record) |")
    print("|---|---|---|---|---|---|")
    for d in LOSING:
        rec = {n: lib[n] for n in fam if n != "snaive_1d"}
        rec.update({n: lib[n] for n in ("eval linear (pooled)", "eval linear (per series)")})
        mods = {}
        for (dd, s, r, kind, a), v in S.items():
            if s == "1":
                mods.setdefault(f"round {r} {kind} a={a:g}", {})[dd] = v
        rec.update(mods)
        for N in (1, 3):
            cand = {}
            for n, v in rec.items():
                if d in v and d - 1 in v:
                    prev = [v[x] for x in range(d - N, d) if x in v]
                    cand[n] = st.mean(prev)
            order = sorted(cand, key=cand.get)
            below = [i for i, n in enumerate(order) if rec[n][d] < 1]
            top = order[0]
            b = order[below[0]] if below else None
            print(f"| {d} | {len(order)} | {N} | {rec[top][d]:.3f} ({top}, record {cand[top]:.3f}) | "
                  f"{sum(1 for n in order[:10] if rec[n][d] < 1)} | "
                  + (f"{below[0] + 1} ({b}: {rec[b][d]:.3f}, record {cand[b]:.3f}) |" if b else "none |"))

    print("\n## 3. Causal selection over the library (served on day d: the member with the lowest mean "
          "ratio over days d-N..d-1; days 3-30)\n")
    pools = {
        "fixed maps + eval linear": [n for n in lib if not n.startswith("round")],
        "+ learner round d-1 (a = 1)": [n for n in lib if not n.startswith("round") or " a=1 " in n],
        "+ blends": list(lib),
    }
    print("| library | N (wX: weights X^age over all earlier days) | mean days 3-30 | mean days 8-30 | days above 1 (seed 1 names) |")
    print("|---|---|---|---|---|")
    for pname, names in pools.items():
        for N in (1, 2, 3, 7, 14, 99, "w0.5", "w0.8"):
            served = {}
            for d in range(3, nd + 1):
                best, bv = None, None
                for n in names:
                    if "s2" in n or "s3" in n:
                        continue
                    if d not in lib[n]:
                        continue
                    if isinstance(N, str):  # every earlier day, weight w^(d-1-x): recent days first
                        w = float(N[1:])
                        prev = [(w ** (d - 1 - x), lib[n][x]) for x in range(2, d) if x in lib[n]]
                        if len(prev) < min(d - 2, 3):
                            continue
                        v = sum(a * b for a, b in prev) / sum(a for a, _ in prev)
                        if bv is None or v < bv:
                            best, bv = n, v
                        continue
                    prev = [lib[n][x] for x in range(max(2, d - N), d) if x in lib[n]]
                    if len(prev) < min(N, d - 2, 3):
                        continue
                    v = st.mean(prev)
                    if bv is None or v < bv:
                        best, bv = n, v
                served[d] = (lib[best][d], best) if best else (1.0, "snaive_1d")
            lost = [d for d in served if served[d][0] > 1]
            lab = N if isinstance(N, str) or N < 99 else "all"
            print(f"| {pname} | {lab} | {st.mean(v for v, _ in served.values()):.3f} | "
                  f"{st.mean(v for d, (v, _) in served.items() if d >= 8):.3f} | "
                  f"{', '.join(f'{d} ({served[d][0]:.2f} {served[d][1]})' for d in lost)} |")
    print("\n## 3b. The learner's own models only (round d-1's linear-only, seasonal and Transformer "
          "candidates and its served model, unblended or blended), each seed: days 8-30\n")
    print("| seed | kinds | rules (N) losing no day 8-30 | rules losing day 10 | fewest days above 1 (rule: days) | "
          "mean days 8-30 of that rule |")
    print("|---|---|---|---|---|---|")
    for s in seeds:
        for label, alphas in (("a = 1", (1.0,)), ("a = 1, 0.7", (1.0, 0.7)), ("every a", (1.0,) + ALPHAS)):
            names = [f"round d-1 {k} a={a:g} s{s}" for k in ("linear", "seasonal", "transformer", "served")
                     for a in alphas if f"round d-1 {k} a={a:g} s{s}" in lib]
            best = None
            clean, lost10 = [], 0
            for N in (1, 2, 3, 7, 14, 99, "w0.5", "w0.8"):
                served = {}
                for d in range(8, nd + 1):
                    bn, bv = None, None
                    for n in names:
                        if d not in lib[n]:
                            continue
                        prev = [(float(N[1:]) ** (d - 1 - x) if isinstance(N, str) else 1.0, lib[n][x])
                                for x in range(2 if isinstance(N, str) else max(2, d - N), d) if x in lib[n]]
                        if not prev:
                            continue
                        v = sum(a * b for a, b in prev) / sum(a for a, _ in prev)
                        if bv is None or v < bv:
                            bn, bv = n, v
                    served[d] = lib[bn][d] if bn else 1.0
                lost = [d for d in served if served[d] > 1]
                lab = N if isinstance(N, str) or N < 99 else "all"
                if not lost:
                    clean.append(str(lab))
                lost10 += 10 in lost
                if best is None or len(lost) < len(best[1]):
                    best = (lab, lost, st.mean(served.values()))
            print(f"| {s} | {label} | {', '.join(clean) or 'none'} | {lost10} of 8 | {best[0]}: {best[1]} | "
                  f"{best[2]:.3f} |")

    oracle = {d: min(lib[n][d] for n in lib if d in lib[n] and "s2" not in n and "s3" not in n) for d in range(3, nd + 1)}
    print(f"\nthe oracle (best member each day, seed 1): mean {st.mean(oracle.values()):.3f}, "
          f"above 1 on {[d for d in oracle if oracle[d] >= 1]}")

    if orig and os.path.exists(orig):
        noise(json.load(open(orig)), grid, sn, seeds, nd)


def noise(O, grid, sn, seeds, nd, target=0.83, trials=20000):
    print("\n## 4. Noise: a model whose expected ratio is 0.83, scored on 28 days of 57 origins\n")
    rnd = random.Random(1)
    snd = {d: {(c, i): e for c, i, e, _ in sn[d]} for d in sn}
    for s in seeds:
        pairs = {}
        for key, (err, n) in O.items():
            ss, d, cell, i = key.split("/")
            if ss != s or int(d) < 3:
                continue
            pairs.setdefault(int(d), []).append((err, snd[int(d)][cell, int(i)]))
        days = sorted(pairs)
        obs = {d: sum(a for a, _ in pairs[d]) / sum(b for _, b in pairs[d]) for d in days}
        mean_obs = st.mean(obs.values())
        scale = target / mean_obs
        # (a) every day: the day's own origins resampled, model errors scaled so the mean of the
        #     days' ratios is 0.83 (keeps each day's difficulty)
        any_a = 0
        per_day_above = {d: 0 for d in days}
        for _ in range(trials // 10):
            hit = False
            for d in days:
                p = pairs[d]
                smp = [p[rnd.randrange(len(p))] for _ in p]
                r = scale * sum(a for a, _ in smp) / sum(b for _, b in smp)
                if r > 1:
                    per_day_above[d] += 1
                    hit = True
            any_a += hit
        # (b) no day effect: origins drawn from all days pooled (ratio scaled to 0.83 pooled)
        allp = [x for d in days for x in pairs[d]]
        sc2 = target * sum(b for _, b in allp) / sum(a for a, _ in allp)
        any_b, above_b = 0, 0
        for _ in range(trials // 10):
            hit = False
            for _d in days:
                smp = [allp[rnd.randrange(len(allp))] for _ in range(57)]
                r = sc2 * sum(a for a, _ in smp) / sum(b for _, b in smp)
                above_b += r > 1
                hit |= r > 1
            any_b += hit
        # (b2) days made of 3 cell-days (19 origins each) drawn from all the cell-days pooled:
        #      the day effect of each cell kept, the cells' days mixed
        celldays = {}
        for key, (err, n) in O.items():
            ss, d, cell, i = key.split("/")
            if ss == s and int(d) >= 3:
                celldays.setdefault((int(d), cell), []).append((err, snd[int(d)][cell, int(i)]))
        cds = [(sum(a for a, _ in v), sum(b for _, b in v)) for v in celldays.values()]
        sc3 = target * sum(b for _, b in cds) / sum(a for a, _ in cds)
        any_c, above_c = 0, 0
        for _ in range(trials // 10):
            hit = False
            for _d in days:
                smp = [cds[rnd.randrange(len(cds))] for _ in range(3)]
                r = sc3 * sum(a for a, _ in smp) / sum(b for _, b in smp)
                above_c += r > 1
                hit |= r > 1
            any_c += hit
        # (c) day-level: the observed day ratios' spread (log scale) around a mean of 0.83
        lg = [math.log(obs[d] * scale) for d in days]
        mu, sd = st.mean(lg), st.stdev(lg)
        pday = 0.5 * math.erfc(-mu / sd / math.sqrt(2))
        print(f"seed {s}: served mean ratio days 3-30 {mean_obs:.3f} (x {scale:.3f} to 0.83); "
              f"(a) each day's origins resampled: P(>=1 of {len(days)} days above 1) "
              f"{any_a / (trials // 10):.3f}, days above 1 in > 5 % of draws: "
              f"{[(d, round(per_day_above[d] / (trials // 10), 3)) for d in days if per_day_above[d] / (trials // 10) > 0.05]}; "
              f"(b) origins of all days pooled (no day effect): P(a day above 1) "
              f"{above_b / (trials // 10) / len(days):.4f}, P(>=1 of {len(days)}) {any_b / (trials // 10):.3f}; "
              f"(b2) days of 3 cell-days drawn from all: P(a day above 1) "
              f"{above_c / (trials // 10) / len(days):.3f}, P(>=1 of {len(days)}) {any_c / (trials // 10):.3f}; "
              f"(c) log-normal days, sd {sd:.3f}: P(a day above 1) {pday:.3f}, "
              f"P(>=1 of {len(days)}) {1 - (1 - pday) ** len(days):.3f}")


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] in ("collect", "origins"):
        seeds = (a[4] if len(a) > 4 else "1 2 3").split()
        nd = int(a[5]) if len(a) > 5 else 30
        os.makedirs("/tmp/snaive", exist_ok=True)
        (collect if a[0] == "collect" else origins)(os.path.realpath(a[1]), a[2], a[3], seeds, nd)
    elif len(a) in (3, 4) and a[0] == "report":
        report(a[1], a[2], a[3] if len(a) == 4 else None)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
