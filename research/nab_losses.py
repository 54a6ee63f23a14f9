"""nab_losses.py — where a detector's NAB standard-profile points go: for each window,
missed (a loss of 1 + the 0.987 an earliest detection earns) or found late (the 0.987 less
the scaled sigmoid of its first detection's relative position), and each false positive's
cost (0.11 times its weight); summed per file and per family, then in score points (100 /
232 per raw point on the full corpus: 116 windows).

    cellcast anomaly-eval --nab NAB --model M --results RES
    python3 research/nab_losses.py NAB RES [THRESHOLD]

RES is anomaly-eval's --results directory (cellcast/<family>/cellcast_<file>.csv); the
threshold defaults to 0.5 (cellcast's rows where an anomaly episode fires score above it).
An approximation of NAB's scorer for reading the losses (the scorer of record is
anomaly-eval's): its losses add up to the raw score within about 1 point here.
"""
import csv
import json
import math
import os
import sys


def sigmoid(x):
    return -1.0 if x >= 3 else 2 / (1 + math.exp(5 * x)) - 1


def rows_of(res, name):
    f = os.path.join(res, "cellcast", os.path.dirname(name), "cellcast_" + os.path.basename(name))
    r = list(csv.reader(open(f)))[1:]
    return [x[0] for x in r], [float(x[2]) for x in r]


def main():
    nab, res = sys.argv[1], sys.argv[2]
    thr = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
    windows = json.load(open(os.path.join(nab, "labels", "combined_windows.json")))
    fam = {}
    best = sigmoid(-1.0)
    for name, wins in sorted(windows.items()):
        ts, sc = rows_of(res, name)
        n = len(ts)
        prob = min(int(math.floor(0.15 * n)), 750)
        idx = []
        for a, b in wins:
            a, b = a.split(".")[0], b.split(".")[0]
            idx.append((next(i for i, t in enumerate(ts) if t >= a),
                        max(i for i, t in enumerate(ts) if t <= b)))
        inside = set(i for a, b in idx for i in range(a, b + 1))
        miss = late = fp = 0.0
        n_fp, found = 0, []
        for a, b in idx:
            if b < prob:
                continue
            hits = [i for i in range(max(a, prob), b + 1) if sc[i] > thr]
            if not hits:
                miss += 1 + best
                found.append("MISS")
            else:
                w = b - a + 1
                late += best - sigmoid(-(b - hits[0] + 1) / w)
                found.append("%.2f" % ((hits[0] - a) / w))
        prev_end = prev_w = None
        wi = 0
        for i in range(prob, n):
            while wi < len(idx) and idx[wi][1] < i:
                prev_end, prev_w = idx[wi][1], idx[wi][1] - idx[wi][0] + 1
                wi += 1
            if i in inside or sc[i] <= thr:
                continue
            weight = -1.0 if prev_end is None else sigmoid((i - prev_end) / prev_w)
            fp += -weight * 0.11
            n_fp += 1
        print("%-58s miss %.2f late %.2f fp %.2f (%d)  %s" % (name[:58], miss, late, fp, n_fp,
                                                             " ".join(found)))
        d = fam.setdefault(name.split("/")[0], [0, 0, 0, 0])
        for j, v in enumerate((miss, late, fp, n_fp)):
            d[j] += v
    tot = [0, 0, 0, 0]
    for k, v in fam.items():
        print("%-25s miss %.2f late %.2f fp %.2f (%d false positives)" % (k, *v))
        tot = [a + b for a, b in zip(tot, v)]
    print("lost: missed %.2f, late %.2f, false positives %.2f (%d) raw = %.1f / %.1f / %.1f "
          "score points" % (*tot, *(x * 100 / 232 for x in tot[:3])))


if __name__ == "__main__":
    main()
