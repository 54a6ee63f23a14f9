#!/usr/bin/python3
"""random_model.py — writes a random model of the default shape (F=8, P=16, N=21, M=336,
d=64, H=4, L=2, dff=128, Hz=24, S=3600) for `cellcast bench --model`, so the step can be
timed on a cellcast-tx/3 model before a trained one exists.

Usage: /usr/bin/python3 tests/bench/random_model.py OUT.safetensors [R]
  R = linear_window (default 336); 0 writes a cellcast-tx/2 file.
Weights N(0, 0.05^2), LayerNorm gains 1, floor 0.01, sigma_scale 1: numbers of a sane size,
not a forecaster.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import reference as ref  # noqa: E402


def main():
    out = sys.argv[1]
    R = int(sys.argv[2]) if len(sys.argv) > 2 else 336
    hp = dict(d=64, H=4, L=2, dff=128, P=16, N=21, M=336, Hz=24, F=8)
    m = ref.Model.__new__(ref.Model)
    m.d, m.dff, m.P, m.F, m.Hz, m.L = (hp[k] for k in ("d", "dff", "P", "F", "Hz", "L"))
    m.R = R
    rng = np.random.default_rng(1)
    w = {}
    for name, shape in sorted(m.expected_shapes().items()):
        if name.endswith("norm1.weight") or name.endswith("norm2.weight"):
            a = np.ones(shape)
        elif name == "norm.floor":
            a = np.full(shape, 0.01)
        elif name == "calib.sigma_scale":
            a = np.ones(shape)
        else:
            a = 0.05 * rng.standard_normal(shape)
        w[name] = a.astype(np.float32)
    meta = {"format": ref.FORMAT_TX3 if R else ref.FORMAT_TX2, "d_model": hp["d"],
            "n_heads": hp["H"], "n_layers": hp["L"], "d_ff": hp["dff"], "patch_len": hp["P"],
            "n_patches": hp["N"], "norm_window": hp["M"], "horizon": hp["Hz"],
            "step_seconds": 3600, "tz_offset_s": 0,
            "features": ",".join("kpi%d" % f for f in range(hp["F"])), "name": "bench-random"}
    if R:
        meta["linear_window"] = R
    ref.write_safetensors(out, w, meta)


if __name__ == "__main__":
    main()
