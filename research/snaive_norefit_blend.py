#!/usr/bin/env python3
"""snaive_norefit_blend.py — the learner's served sequence with the candidate the gate
scored (no refit) in place of the refit it published, blended with the one-day seasonal
naive at weight a (blend_sim.py's tx/3 blend), scored on each serving day against the
seasonal naive (docs/results.md, "Every day below the seasonal naive?").

  snaive_norefit_blend.py CELLCAST RUNS SEEDS DAYS "A..."
RUNS: a learn_replay_next.sh WORKDIR run with KEEP_CSV=1 (the refit by default). The
publications are that run's; the model serving day d is the candidate of the kind published
by the last publishing round p <= d-1, from round p's files.
"""
import json
import os
import statistics as st
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "bench"))
import blend_sim  # noqa: E402


def main():
    cli, runs, seeds, nd = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3].split(), int(sys.argv[4])
    alphas = [float(x) for x in sys.argv[5].split()]
    tmp = tempfile.mkdtemp(prefix="snaive_norefit.")
    t0 = int(open(f"{runs}/s{seeds[0]}/day1/all.csv").readlines()[1].split(",")[0])
    for s in seeds:
        pub = {}
        cur = None
        for d in range(1, nd + 1):
            r = json.load(open(f"{runs}/s{s}/day{d}/round.json"))
            if r.get("published"):
                cur = (d, r["published"])
            pub[d] = cur
        for a in alphas:
            q = {}
            for d in range(2, nd + 1):
                p, kind = pub[d - 1]
                f = f"{runs}/s{s}/day{p}/candidate-{kind}.safetensors"
                if a < 1 and kind != "seasonal":
                    blend_sim.blend(f, f"{tmp}/b.safetensors", a)
                    f = f"{tmp}/b.safetensors"
                out = subprocess.run([cli, "eval", "--model", f, "--data", f"{runs}/s{s}/day{d}/all.csv",
                                      "--format", "long", "--step", "3600", "--from",
                                      str(t0 + (d - 1) * 86400), "--horizon", "6", "--json",
                                      "--linear-window", "0"], capture_output=True, text=True)
                m = json.loads(out.stdout)["methods"]
                q[d] = m["model"]["overall"]["mae"] / m["snaive_1d"]["overall"]["mae"]
            late = [v for d, v in q.items() if d >= 3]
            print(f"seed {s} a {a:g}: mean days 3-{nd} {st.mean(late):.3f}, days 8-{nd} "
                  f"{st.mean(v for d, v in q.items() if d >= 8):.3f}; days 3-{nd} at or above 1 "
                  f"{ {d: round(v, 3) for d, v in q.items() if d >= 3 and v >= 1} }", flush=True)


if __name__ == "__main__":
    main()
