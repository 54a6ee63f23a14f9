#!/usr/bin/env python3
"""snaive_blendk.py — the served model blended with the mean of the same hour over the last
k days, a·model + (1 − a)·mean_k (a tx/3 file as blend_sim.py's blend, the seasonal weight
spread over the k day-lagged inputs; the linear window widened to k days), scored on the
next day against the one-day seasonal naive (docs/results.md, "Every day below the seasonal
naive?").

  snaive_blendk.py CELLCAST RUNS SEEDS DAYS "K..." "A..."
RUNS: a learn_replay_next.sh WORKDIR run with KEEP_CSV=1. Prints per seed, k and a the mean
over days 8..DAYS and the days above 1.
"""
import array
import json
import os
import statistics as st
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "bench"))
import blend_sim  # noqa: E402


def blend_k(src, dst, a, k):
    meta, t = blend_sim.read_st(src)
    hz, R = int(meta["horizon"]), int(meta.get("linear_window", "0"))
    day = 86400 // int(meta["step_seconds"])
    d = t["head.weight"][0][1]
    hw, hb = t["head.weight"][1], t["head.bias"][1]
    for s in range(hz):
        for j in range(d):
            hw[2 * s * d + j] *= a
        hb[2 * s] *= a
    R2 = max(R, k * day)
    lw, lb = t["linear.weight"][1], t["linear.bias"][1]
    nw = array.array("f", bytes(4 * hz * R2))
    for s in range(hz):
        for i in range(R):
            nw[s * R2 + R2 - R + i] = a * lw[s * R + i]
        for j in range(1, k + 1):  # the input j days before target step s
            nw[s * R2 + R2 - j * day + s] += (1.0 - a) / k
        lb[s] *= a
    t["linear.weight"] = ([hz, R2], nw)
    meta["linear_window"] = str(R2)
    blend_sim.write_st(dst, meta, t)


def main():
    cli, runs, seeds, nd = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3].split(), int(sys.argv[4])
    ks = [int(x) for x in sys.argv[5].split()]
    alphas = [float(x) for x in sys.argv[6].split()]
    tmp = tempfile.mkdtemp(prefix="snaive_blendk.")
    t0 = int(open(f"{runs}/s{seeds[0]}/day1/all.csv").readlines()[1].split(",")[0])
    for s in seeds:
        for k in ks:
            for a in alphas:
                q = {}
                for d in range(max(8, k + 1), nd + 1):
                    blend_k(f"{runs}/s{s}/day{d - 1}/m.safetensors", f"{tmp}/b.safetensors", a, k)
                    p = subprocess.run([cli, "eval", "--model", f"{tmp}/b.safetensors", "--data",
                                        f"{runs}/s{s}/day{d}/all.csv", "--format", "long", "--step", "3600",
                                        "--from", str(t0 + (d - 1) * 86400), "--horizon", "6", "--json",
                                        "--linear-window", "0"], capture_output=True, text=True)
                    m = json.loads(p.stdout)["methods"]
                    q[d] = m["model"]["overall"]["mae"] / m["snaive_1d"]["overall"]["mae"]
                lost = {d: round(v, 3) for d, v in q.items() if v > 1}
                print(f"seed {s} k {k} a {a:g}: mean days {min(q)}-{nd} {st.mean(q.values()):.3f}, "
                      f"days above 1 {lost}, day 9 {q.get(9, float('nan')):.3f} day 10 {q.get(10, float('nan')):.3f}",
                      flush=True)


if __name__ == "__main__":
    main()
