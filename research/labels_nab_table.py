#!/usr/bin/env python3
"""labels_nab_table.py WORK_DIR [--groups] -- the table of docs/operations.md section 4
("Operator's own labels", the NAB families) from the outputs of labels_nab.sh: per family
(or per family and step with --groups) and detector, the mean +- sample sd over the seeds
of recall, precision, false alerts per cell-week, mean delay (hours, from the window's
start) and the longest anomaly episode. Families with files at several steps (several
models) are summed over them: windows, alerts and clean cell-weeks (each run's false
alerts over its false alerts per cell-week)."""
import glob, os, re, statistics as st, sys

W = sys.argv[1]
by_group = "--groups" in sys.argv[2:]
NAMES = {"model": "model, defaults", "budget": "model, `--budget 1`", "base": "3-sigma baseline"}


def rows(path):
    """The model row (defaults), the --budget row and the baseline's of one output."""
    out, cur, budget = {}, None, False
    row = re.compile(r"^(model|3sigma-roll) \S+\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)\s+"
                     r"(\d+)/(\d+)\s+(\d+)\s+(\d+)")
    for line in open(path):
        budget |= line.startswith("budget 1:")
        m = row.match(line)
        if m:
            cur = ("budget" if budget else "model") if m.group(1) == "model" else "base"
            out[cur] = dict(delay=float(m.group(4)), fa=float(m.group(5)), det=int(m.group(6)),
                            n=int(m.group(7)), alerts=int(m.group(8)), false=int(m.group(9)))
        m = re.match(r"^\s+longest episode\s+\d+ steps \(([\d.]+) h\)", line)
        if m and cur:
            out[cur]["longest_h"] = float(m.group(1))
    return out


def fmt(v, d=2):
    v = [x for x in v if x == x]
    if not v:
        return "-"
    if len(v) == 1 or st.stdev(v) < 0.5 * 10**-d:
        return f"{v[0]:.{d}f}"
    return f"{st.mean(v):.{d}f} ± {st.stdev(v):.{d}f}"


groups = sorted(os.path.basename(p)[:-6] for p in glob.glob(f"{W}/*.files"))
SEEDS = sorted({int(m.group(1)) for p in glob.glob(f"{W}/{groups[0]}_s*_b1.txt")
                if (m := re.search(r"_s(\d+)_b1\.txt$", p))})
sets = {}
for g in groups:
    sets.setdefault(g if by_group else g.rsplit("_", 1)[0], []).append(g)
print("| family (files, windows in test) | detector | recall | precision | false alerts / "
      "cell-week | mean delay (h) | longest episode (h) |")
print("|---|---|---|---|---|---|---|")
for name, gs in sets.items():
    files = sum(len(open(f"{W}/{g}.files").read().split()) for g in gs)
    for det in ("model", "budget", "base"):
        rec, prec, fa, delay, longest = [], [], [], [], []
        for s in SEEDS:
            D = N = A = F = 0
            weeks = dh = L = 0.0
            for g in gs:
                S = int(g.rsplit("_", 1)[1])
                r = rows(f"{W}/{g}_s{s}_b1.txt")
                x = r[det]
                # the run's clean cell-weeks (the same for every row): false alerts over false
                # alerts per cell-week, of the row with most (least rounding)
                most = max(r.values(), key=lambda y: y["false"])
                weeks += most["false"] / most["fa"]
                D, N, A, F = D + x["det"], N + x["n"], A + x["alerts"], F + x["false"]
                dh += x["det"] * x["delay"] * S / 3600 if x["det"] else 0
                L = max(L, x["longest_h"])
            rec.append(D / N)
            prec.append((A - F) / A if A else float("nan"))
            fa.append(F / weeks)
            delay.append(dh / D if D else float("nan"))
            longest.append(L)
        print(f"| {name} ({files}, {N}) | {NAMES[det]} | {fmt(rec)} | {fmt(prec)} | {fmt(fa)} | "
              f"{fmt(delay, 1)} | {fmt(longest, 1)} |")
