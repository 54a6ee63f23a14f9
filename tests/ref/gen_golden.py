#!/usr/bin/python3
"""gen_golden.py — writes the golden fixtures of tests/unit/test_golden.c with reference.py.

Deterministic (fixed seed, fixed formatting): running it twice gives identical files.
Usage: /usr/bin/python3 tests/ref/gen_golden.py [outdir]   (default tests/data/golden)

Files written (all small, committed so CI needs no Python): the cellcast-tx/2 set below, and
two cellcast-tx/3 sets (tx3_r12.*, tx3_r40.*: see TX3 further down) in the same formats.
  tiny.safetensors     random model, F32, non-default hparams (see HP below); weights
                       N(0, 0.3^2), LayerNorm gains 1 + N(0, 0.3^2), all biases random, so a
                       wrong index or a dropped term shows up as an O(0.1) error.
  golden.json          the raw series and, for each fixture step t and every feature f, the
                       reference's trace (format below).
  series.csv           the same series in `cellcast forward --input` format:
                       header `ts,prb,thr,users`, ts = p*S unix seconds, one row per step.
  series_forward.jsonl what `cellcast forward --all` must print for series.csv: one JSON
                       line per row with a forecast, {"ts", "y" [F][Hz][2] flat, "mu" [F],
                       "sigma" [F]}.

golden.json (format "cellcast-golden/1"):
  {"format", "model": "tiny.safetensors", "hparams": {F,P,N,M,d,H,L,dff,horizon,
   step_seconds, tz_offset_s, features}, "p0": first absolute step, "n_steps": T,
   "series": [F][T] raw values (float32-exact, x[f][p - p0]),
   "cases": [ {"t", "f", "valid": bool, "what": why this step was chosen,
               and when valid: "e", "n_tokens" (= n+1),
               "token_end" [n+1] (cached oldest first, current last),
               "tokens_in" flat (n+1, P+4), "z" flat (L+1, n+1, d) layer inputs with z[L]
               the last layer's output, "att" flat (L, H, n+1, n+1) rows = query token,
               masked entries 0, "mu", "sigma", "y" flat (Hz, 2)} ]}
  Numbers are float64 results printed with 12 significant digits.

Series values are rounded to float32 first (the engine stores floats) and the reference
runs in float64 on those exact values. The CSV prints each value as the shortest decimal
that parses back (strtod, then (float)) to the same float32.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402

SEED = 20261121
HP = dict(F=3, P=4, N=5, M=22, d=16, H=2, L=2, dff=32, horizon=6, step_seconds=900,
          tz_offset_s=3600, features=["prb", "thr", "users"])
P0 = 1900002          # absolute first step (unix 1710001800 / 900); P0 % P = 2: p0 mid-patch
T = 200               # steps in the series
WSCALE = 0.3


# cellcast-tx/3 fixtures: the same hparams plus R = linear_window, a linear window inside
# the tx/2 ring (12 < max(N·P+P, M+P-1) = 25) and one past it (40: the ring grows to 40,
# and every fixture step before p0 + 39 is a linear cold start with fewer than R values).
# Weights as above plus linear.weight/bias N(0, 0.3^2), per-KPI floors of the KPIs' own
# magnitudes (prb 0.02, thr 1e6, users 1) and calib.sigma_scale U(0.5, 2). The series
# (make_series_tx3) has a prb constant for its first 40 steps (sigma is the floor alone)
# and KPIs eight orders of magnitude apart.
TX3 = [dict(name="tx3_r12", R=12, seed=20261123), dict(name="tx3_r40", R=40, seed=20261124)]
TX3_FLOOR = [0.02, 1.0e6, 1.0]
TX3_CONST = 40  # prb constant for the first 40 steps


def make_weights(rng, R=0):
    d, dff, P, F, Hz, L = HP["d"], HP["dff"], HP["P"], HP["F"], HP["horizon"], HP["L"]
    tmp = ref.Model.__new__(ref.Model)
    tmp.d, tmp.dff, tmp.P, tmp.F, tmp.Hz, tmp.L, tmp.R = d, dff, P, F, Hz, L, R
    w = {}
    for name, shape in sorted(tmp.expected_shapes().items()):
        if name == "norm.floor":
            a = np.array(TX3_FLOOR)
        elif name == "calib.sigma_scale":
            a = rng.uniform(0.5, 2.0, shape)
        elif ".norm" in name and name.endswith(".weight"):
            a = 1.0 + WSCALE * rng.standard_normal(shape)
        else:
            a = WSCALE * rng.standard_normal(shape)
        w[name] = a.astype(np.float32)
    return w


def make_series(rng):
    p = np.arange(P0, P0 + T)
    day = 2 * np.pi * (p * HP["step_seconds"] + HP["tz_offset_s"]) / 86400.0
    prb = np.clip(0.5 + 0.2 * np.sin(day) + 0.04 * rng.standard_normal(T), 0.0, 1.0)
    thr = 1.0e8 * (1.0 + 0.4 * np.sin(day + 0.7) + 0.08 * rng.standard_normal(T))
    users = np.round(30.0 + 9.0 * np.sin(day - 0.4) + 2.0 * rng.standard_normal(T))
    users[120:126] = users[119]  # a short flat stretch inside one norm window
    return np.stack([prb, thr, users]).astype(np.float32)


def make_series_tx3(rng):
    s = make_series(rng)
    s[0, :TX3_CONST] = s[0, 0]
    return s


def fixture_steps_tx3(R):
    """tx/2's steps plus those the linear path and the floor make interesting."""
    steps = fixture_steps()
    steps += [(P0 + 21, "inside prb's constant stretch: sigma is the floor alone"),
              (P0 + R - 2, "linear window one step short of full (cold start)"),
              (P0 + R - 1, "first step whose linear window is all real values"),
              (P0 + TX3_CONST + 3, "first steps after prb's constant stretch")]
    first = {}
    for t, why in steps:  # one reason per step
        first.setdefault(t, why)
    return sorted(first.items())


def fixture_steps():
    """(t, why) for every golden step; asserted below to cover the interesting cases."""
    P, N = HP["P"], HP["N"]
    first_e = -(-P0 // P) * P + P - 1         # end of the first complete patch
    full_e = first_e + (N - 1) * P                       # first boundary with n = N
    steps = [
        (first_e - 1, "cold start: one step before the first complete patch (no forecast)"),
        (first_e, "first complete patch, t = e, n = 1"),
        (first_e + 2, "t unaligned inside a patch, n = 1"),
        (first_e + P + 1, "t unaligned, n = 2"),
        (full_e - 1, "last step before n = N, t = e - 1 + P, n = N-1"),
        (full_e, "first t = e with n = N"),
        (full_e + 1, "first step after a boundary, n = N"),
        (P0 + 130, "late, unaligned, window over the flat stretch"),
        (P0 + 171, "late, t = e on a boundary"),
        (P0 + T - 1, "last step of the series"),
    ]
    return steps


def r12(v):
    return float("%.12g" % v)


def flat(a):
    return [r12(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def write_set(outdir, prefix, w32, series, steps, name, trained_on, R=0):
    """Writes one fixture set: model, golden json, csv, forward jsonl (names as the tx/2 set
    when prefix is None, else prefix + .safetensors/.json/.csv/_forward.jsonl)."""
    files = (("tiny.safetensors", "golden.json", "series.csv", "series_forward.jsonl")
             if prefix is None else
             (prefix + ".safetensors", prefix + ".json", prefix + ".csv", prefix + "_forward.jsonl"))
    meta = {"format": ref.FORMAT_TX3 if R else ref.FORMAT_TX2, "d_model": HP["d"],
            "n_heads": HP["H"],
            "n_layers": HP["L"], "d_ff": HP["dff"], "patch_len": HP["P"],
            "n_patches": HP["N"], "norm_window": HP["M"], "horizon": HP["horizon"],
            "step_seconds": HP["step_seconds"], "tz_offset_s": HP["tz_offset_s"],
            "features": ",".join(HP["features"]), "name": name,
            "version": "1", "trained_on": trained_on}
    if R:
        meta["linear_window"] = R
    mpath = os.path.join(outdir, files[0])
    ref.write_safetensors(mpath, w32, meta)
    model = ref.Model.load(mpath)  # round trip through our own reader
    for k in w32:
        assert np.array_equal(model.w[k], w32[k].astype(np.float64)), k

    P, N, S = HP["P"], HP["N"], HP["step_seconds"]
    xs = series.astype(np.float64)
    cases = []
    seen = set()
    for t, why in steps:
        for f in range(HP["F"]):
            res = ref.forward(model, f, xs[f], P0, t)
            c = {"t": t, "f": f, "what": why, "valid": res is not None}
            if res is not None:
                n1 = len(res["token_end"])
                seen.add(("n", n1 - 1))
                seen.add(("aligned", t == res["e"]))
                c.update(e=int(res["e"]), n_tokens=n1,
                         token_end=[int(q) for q in res["token_end"]],
                         tokens_in=flat(res["tokens_in"]), z=flat(res["z"]),
                         att=flat(res["att"]), mu=r12(res["mu"]), sigma=r12(res["sigma"]),
                         y=flat(res["y"]))
                if R:
                    c["lin_in"] = flat(res["lin_in"])
                    seen.add(("linear cold", t - R + 1 < P0))
            else:
                seen.add("cold")
            cases.append(c)
    assert {"cold", ("n", 1), ("n", N), ("aligned", True), ("aligned", False)} <= seen, seen
    if R:
        assert {("linear cold", True), ("linear cold", False)} <= seen, seen
    hp = dict(HP, R=R) if R else HP
    gold = {"format": "cellcast-golden/1", "model": files[0],
            "hparams": hp, "p0": P0, "n_steps": T,
            "series": [[float(v) for v in row] for row in series], "cases": cases}
    with open(os.path.join(outdir, files[1]), "w") as fh:
        json.dump(gold, fh, separators=(",", ":"))
        fh.write("\n")

    # The CLI fixture: the csv and the expected `forward --all` lines.
    with open(os.path.join(outdir, files[2]), "w") as fh:
        fh.write("ts," + ",".join(HP["features"]) + "\n")
        for i in range(T):
            fh.write("%d,%s\n" % ((P0 + i) * S, ",".join(repr(float(v)) for v in series[:, i])))
    rows = 0
    with open(os.path.join(outdir, files[3]), "w") as fh:
        for i in range(T):
            t = P0 + i
            res = [ref.forward(model, f, xs[f], P0, t, want_trace=False)
                   for f in range(HP["F"])]
            if res[0] is None:
                assert all(r is None for r in res)
                continue
            line = {"ts": t * S,
                    "y": [float("%.9g" % v) for r in res for v in r["y"].ravel()],
                    "mu": [float("%.9g" % r["mu"]) for r in res],
                    "sigma": [float("%.9g" % r["sigma"]) for r in res]}
            if R:  # the served numbers (step 7), [F][Hz] flat
                units = [ref.forecast_units(model, f, r) for f, r in enumerate(res)]
                line["mean"] = [float("%.9g" % v) for u in units for v in u[0]]
                line["sd"] = [float("%.9g" % v) for u in units for v in u[1]]
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
            rows += 1
    return len(cases), rows


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden")
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    w32 = make_weights(rng)
    series = make_series(rng)
    nc, rows = write_set(outdir, None, w32, series, fixture_steps(), "golden-tiny",
                         "random weights, tests/ref/gen_golden.py seed %d" % SEED)
    for tx in TX3:
        rng = np.random.default_rng(tx["seed"])
        w = make_weights(rng, tx["R"])
        x = make_series_tx3(rng)
        c3, r3 = write_set(outdir, tx["name"], w, x, fixture_steps_tx3(tx["R"]),
                           "golden-tiny-" + tx["name"],
                           "random weights, tests/ref/gen_golden.py seed %d" % tx["seed"],
                           tx["R"])
        nc, rows = nc + c3, rows + r3
    total = sum(os.path.getsize(os.path.join(outdir, n)) for n in os.listdir(outdir))
    print("wrote %s: %d cases, %d forward rows, %d bytes in all" % (outdir, nc, rows, total))


if __name__ == "__main__":
    main()
