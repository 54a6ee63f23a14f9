#!/usr/bin/env python3
"""blend_sim.py — forecast combination with the seasonal naive, simulated from a
learn_replay_next.sh run (docs/results.md, "Blending with the seasonal naive").

A convex blend y = a·model + (1 − a)·snaive of a tx/3 model with the one-day seasonal naive
is itself a tx/3 file (shared/spec/model.md steps 6–7: both forecasts share the model's mu
and sigma, and x_{t+1+k-D} = (r_i + xn_t)·sigma + mu with i = R − D + k): the head's mean
rows and linear.bias scaled by a, linear.weight scaled by a plus (1 − a) on the input a day
before each target step, the linear window widened to a day when shorter. This script
writes such files in pure Python (no numpy) and scores them with `cellcast eval`.

  blend_sim.py blend IN OUT A            write the blend of IN with weight A on the model
  blend_sim.py sim CELLCAST W SEEDS DAYS the per-day table below, from W (a
                                         learn_replay_next.sh WORKDIR run with KEEP_CSV=1)

sim: for every seed and round d, the model served after round d (m.safetensors) blended
with a fixed a (BLEND_FIXED, default 0.5 and 0.7) and with a chosen by the gate's criterion — the served kind's
candidates of the rounds in the round's gate pool (gate_pool.rounds), each blended and
scored on its own round's held-out day (out of sample: a candidate is trained before its
held-out day), origin-weighted, the a of the lowest pooled criterion in BLEND_GRID
(default {0, .25, .5, .75, 1}; ties to the larger) — scored on the next day's held-out rows as learn_replay_next.sh scores the model, over
that day's seasonal naive.
"""
import array
import calendar
import json
import os
import statistics as st
import struct
import subprocess
import sys
import tempfile
import time

# the weights a round chooses from on its pool (BLEND_GRID, default "0 0.25 0.5 0.75 1")
GRID = tuple(float(x) for x in os.environ.get("BLEND_GRID", "0 0.25 0.5 0.75 1").split())
# the fixed weights simulated (BLEND_FIXED="0.5 0.7" by default)
FIXED = tuple(float(x) for x in os.environ.get("BLEND_FIXED", "0.5 0.7").split())


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in hdr.items():
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {t['dtype']}, only F32 handled")
        lo, hi = t["data_offsets"]
        a = array.array("f")
        a.frombytes(b[base + lo:base + hi])
        if sys.byteorder != "little":
            a.byteswap()
        tensors[name] = (t["shape"], a)
    return meta, tensors


def write_st(path, meta, tensors):
    hdr, blobs, off = {"__metadata__": meta}, [], 0
    for name, (shape, a) in tensors.items():
        if sys.byteorder != "little":
            a = array.array("f", a)
            a.byteswap()
        raw = a.tobytes()
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def blend(src, dst, a):
    meta, t = read_st(src)
    hz, R = int(meta["horizon"]), int(meta.get("linear_window", "0"))
    day = 86400 // int(meta["step_seconds"])
    if R < 1 or 86400 % int(meta["step_seconds"]) or day < hz:
        raise SystemExit(f"{src}: no linear path, or the step does not divide a day into >= horizon steps")
    d = t["head.weight"][0][1]
    hw, hb = t["head.weight"][1], t["head.bias"][1]
    for k in range(hz):  # row 2k: the mean of step k; 2k+1 (log-sigma) unchanged
        for j in range(d):
            hw[2 * k * d + j] *= a
        hb[2 * k] *= a
    R2 = max(R, day)
    lw, lb = t["linear.weight"][1], t["linear.bias"][1]
    nw = array.array("f", bytes(4 * hz * R2))
    for k in range(hz):
        for i in range(R):
            nw[k * R2 + R2 - R + i] = a * lw[k * R + i]
        nw[k * R2 + R2 - day + k] += 1.0 - a
        lb[k] *= a
    t["linear.weight"] = ([hz, R2], nw)
    meta["linear_window"] = str(R2)
    write_st(dst, meta, t)


def mean_mase(j, method="model"):
    pk = j["methods"][method]["per_kpi"]
    v = [x["mase"] for x in pk.values() if isinstance(x.get("mase"), (int, float))]
    return sum(v) / len(v) if v else None


def evaluate(cli, model, csv, rec):
    """`cellcast eval` of model on csv from rec's holdout_from: (mean MASE, snaive's, origins)."""
    frm = calendar.timegm(time.strptime(rec["holdout_from"], "%Y-%m-%dT%H:%M:%SZ"))
    p = subprocess.run([cli, "eval", "--model", model, "--data", csv, "--format", "long",
                        "--step", str(rec["step_seconds"]), "--from", str(frm), "--horizon",
                        str(rec["horizon"]), "--json"], capture_output=True, text=True)
    if p.returncode:
        return None
    j = json.loads(p.stdout)
    return mean_mase(j), mean_mase(j, "snaive_1d"), j["origins"]


def served_kinds(W, s, nd):
    """The kind of the model in service after each round (a kept model keeps its kind)."""
    kinds, cur = {}, None
    for d in range(1, nd + 1):
        r = json.load(open(f"{W}/s{s}/day{d}/round.json"))
        cur = r.get("published") or cur
        kinds[d] = cur
    return kinds


def sim(cli, W, seeds, nd):
    tmp = tempfile.mkdtemp(prefix="blend_sim.")
    fixed = FIXED
    out = {}
    for s in seeds:
        base = f"{W}/s{s}"
        rec = {d: json.load(open(f"{base}/day{d}/round.json")) for d in range(1, nd + 1)}
        kinds = served_kinds(W, s, nd)
        # each round's candidate of each kind blended, scored on its own held-out day
        own = {}
        for d in range(1, nd + 1):
            for kind in ("linear", "transformer"):
                f = f"{base}/day{d}/candidate-{kind}.safetensors"
                if not os.path.exists(f) or not any(c["kind"] == kind for c in rec[d]["candidates"]):
                    continue
                for a in GRID:
                    blend(f, f"{tmp}/b.safetensors", a)
                    own[d, kind, a] = evaluate(cli, f"{tmp}/b.safetensors", f"{base}/day{d}/all.csv", rec[d])
        rows = {}
        for d in range(1, nd):
            m = f"{base}/day{d}/m.safetensors"
            if not os.path.exists(m):
                continue
            nxt = f"{base}/day{d + 1}/all.csv"
            pool = rec[d].get("gate_pool", {}).get("rounds", 1)
            kind = kinds[d]
            crit = {}
            for a in GRID:
                num = den = 0.0
                for r in range(d - pool + 1, d + 1):
                    v = own.get((r, kind, a))
                    if v and v[0] is not None:
                        num += v[0] * v[2]
                        den += v[2]
                if den:
                    crit[a] = num / den
            chosen = min(crit, key=lambda a: (crit[a], -a)) if crit else 1.0
            row = {"kind": kind, "chosen": chosen}
            for a in sorted(set(fixed + (1.0, chosen))):
                if a == 1.0:
                    v = evaluate(cli, m, nxt, rec[d + 1])
                else:
                    blend(m, f"{tmp}/b.safetensors", a)
                    v = evaluate(cli, f"{tmp}/b.safetensors", nxt, rec[d + 1])
                if v and v[0] is not None and v[1]:
                    row[a] = v[0] / v[1]
            row["pick"] = row.get(chosen)
            rows[d + 1] = row
        out[s] = rows
    return out


def report(out, nd, first):
    cols = (("served", 1.0),) + tuple((f"a={a:g}", a) for a in FIXED) + (("a chosen", "pick"),)
    for s, rows in out.items():
        days = [d for d in sorted(rows) if d >= first and all(rows[d].get(k) is not None for _, k in cols)]
        print(f"seed {s}, serving days {days[0]}-{days[-1]}:")
        for name, k in cols:
            v = [rows[d][k] for d in days]
            lost = [d for d in days if rows[d][k] > 1]
            print(f"  {name:9s} mean {st.mean(v):.3f}  days worse than the seasonal naive {lost}")
        print("  | day | kind | " + " | ".join(n for n, _ in cols) + " (a) |")
        print("  |---|---|" + "---|" * len(cols))
        for d in days:
            r = rows[d]
            print(f"  | {d} | {r['kind']} | " + " | ".join(f"{r[k]:.3f}" for _, k in cols) + f" ({r['chosen']:g}) |")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "blend":
        blend(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "sim":
        cli, W, seeds, nd = os.path.realpath(sys.argv[2]), sys.argv[3], sys.argv[4].split(), int(sys.argv[5])
        first = int(sys.argv[6]) if len(sys.argv) == 7 else 3
        out = sim(cli, W, seeds, nd)
        json.dump({s: {str(d): r for d, r in rows.items()} for s, rows in out.items()},
                  open(f"{W}/blend_sim-{'-'.join(f'{a:g}' for a in FIXED)}-grid{'-'.join(f'{a:g}' for a in GRID)}.json", "w"), indent=1, default=str)
        report(out, nd, first)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
