#!/usr/bin/python3
"""gen_golden.py — writes the golden fixtures of tests/test_golden.c with reference.py.

Deterministic (fixed seed, fixed formatting): running it twice gives identical files.
Usage: /usr/bin/python3 tests/ref/gen_golden.py [outdir]   (default tests/data/golden)

Files written (all small, committed so CI needs no Python):
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


def make_weights(rng):
    d, dff, P, F, Hz, L = HP["d"], HP["dff"], HP["P"], HP["F"], HP["horizon"], HP["L"]
    tmp = ref.Model.__new__(ref.Model)
    tmp.d, tmp.dff, tmp.P, tmp.F, tmp.Hz, tmp.L = d, dff, P, F, Hz, L
    w = {}
    for name, shape in sorted(tmp.expected_shapes().items()):
        if ".norm" in name and name.endswith(".weight"):
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


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden")
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    w32 = make_weights(rng)
    series = make_series(rng)

    meta = {"format": ref.FORMAT, "d_model": HP["d"], "n_heads": HP["H"],
            "n_layers": HP["L"], "d_ff": HP["dff"], "patch_len": HP["P"],
            "n_patches": HP["N"], "norm_window": HP["M"], "horizon": HP["horizon"],
            "step_seconds": HP["step_seconds"], "tz_offset_s": HP["tz_offset_s"],
            "features": ",".join(HP["features"]), "name": "golden-tiny",
            "version": "1", "trained_on": "random weights, tests/ref/gen_golden.py seed %d" % SEED}
    mpath = os.path.join(outdir, "tiny.safetensors")
    ref.write_safetensors(mpath, w32, meta)
    model = ref.Model.load(mpath)  # round trip through our own reader
    for k in w32:
        assert np.array_equal(model.w[k], w32[k].astype(np.float64)), k

    P, N, S = HP["P"], HP["N"], HP["step_seconds"]
    xs = series.astype(np.float64)
    cases = []
    seen = set()
    for t, why in fixture_steps():
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
            else:
                seen.add("cold")
            cases.append(c)
    assert {"cold", ("n", 1), ("n", N), ("aligned", True), ("aligned", False)} <= seen, seen
    gold = {"format": "cellcast-golden/1", "model": "tiny.safetensors",
            "hparams": HP, "p0": P0, "n_steps": T,
            "series": [[float(v) for v in row] for row in series], "cases": cases}
    with open(os.path.join(outdir, "golden.json"), "w") as fh:
        json.dump(gold, fh, separators=(",", ":"))
        fh.write("\n")

    # The CLI fixture: series.csv and the expected `forward --all` lines.
    with open(os.path.join(outdir, "series.csv"), "w") as fh:
        fh.write("ts," + ",".join(HP["features"]) + "\n")
        for i in range(T):
            fh.write("%d,%s\n" % ((P0 + i) * S, ",".join(repr(float(v)) for v in series[:, i])))
    rows = 0
    with open(os.path.join(outdir, "series_forward.jsonl"), "w") as fh:
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
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
            rows += 1
    total = sum(os.path.getsize(os.path.join(outdir, n)) for n in os.listdir(outdir))
    print("wrote %s: %d cases, %d forward rows, %d bytes in all" % (outdir, len(cases), rows,
                                                                     total))


if __name__ == "__main__":
    main()
