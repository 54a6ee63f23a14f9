#!/usr/bin/python3
"""make_fixture.py — the committed PyTorch fixture that tests/cli/test_forward_golden.sh serves.

    /usr/bin/python3 tools/torch/make_fixture.py tests/data/torch

Trains a small cellcast-tx/3 model in PyTorch (a few hundred steps on a synthetic series
with a KPI flat for its first steps and KPIs of very different magnitudes), fits its
calibration, exports it with tools/torch/cellcast_tx.export, and records what the PyTorch
module computes at every step that has a full window: tx3_torch.safetensors,
tx3_torch.csv, tx3_torch_expected.jsonl (ts, y, mu, sigma, mean, sd, as `cellcast forward`
prints them). Deterministic for a given torch build; re-run only when the spec changes.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cellcast_tx as tx  # noqa: E402
from train import fit_calibration, evaluate, windows  # noqa: E402


def main():
    out = sys.argv[1]
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    S, n = 900, 320
    p0 = 1710001800 // S
    p = p0 + np.arange(n)
    day = 2 * np.pi * (p * S % 86400) / 86400
    prb = np.clip(0.4 + 0.25 * np.sin(day) + 0.05 * rng.standard_normal(n), 0, 1)
    prb[:40] = prb[40]                                   # flat first stretch
    thr = 6e7 + 2e7 * np.sin(day + 0.5) + 3e6 * rng.standard_normal(n)
    users = np.round(20 + 8 * np.sin(day - 0.3) + 2 * rng.standard_normal(n))
    x = np.stack([prb, thr, users], axis=1).astype(np.float32).astype(np.float64)
    hp = tx.Hparams(["prb", "thr", "users"], S, horizon=6, d_model=16, n_heads=2, n_layers=2,
                    d_ff=32, patch_len=4, n_patches=5, norm_window=22, linear_window=12,
                    tz_offset_s=3600, dropout=0.1)
    W, Hz, F = tx.window_len(hp), hp.horizon, hp.n_features
    model = tx.CellcastTx(hp)
    model.norm.floor.copy_(torch.from_numpy(0.01 * x[:200].std(axis=0)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    train_t = np.arange(W - 1, 200 - Hz)
    for _ in range(300):
        ti, fi = rng.choice(train_t, 32), rng.integers(0, F, 32)
        xin, yt, tt = windows(x, p, ti, fi, W, Hz)
        prep = model.prepare(xin, tt, fi, pos_shift=rng.integers(0, 1 << 20, 32))
        target = torch.from_numpy(((yt - prep["mu"][:, None]) / prep["sigma"][:, None]).astype(np.float32))
        loss = tx.nll(model(prep), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    m, s, y, f = evaluate(model, x, p, np.arange(200, n - Hz), W, Hz, F)
    fit_calibration(model, m, s, y, f)
    model.eval()
    tx.export(model, os.path.join(out, "tx3_torch.safetensors"), {"name": "torch-fixture"})
    with open(os.path.join(out, "tx3_torch.csv"), "w") as fh:
        fh.write("ts,prb,thr,users\n")
        for i in range(n):
            fh.write("%d,%s,%s,%s\n" % (p[i] * S, *(repr(float(v)) for v in x[i])))
    with open(os.path.join(out, "tx3_torch_expected.jsonl"), "w") as fh, torch.no_grad():
        for i in range(W - 1, n):
            fi = np.arange(F)
            prep = model.prepare(x[i - W + 1:i + 1].T.copy(), np.full(F, p[i]), fi)
            yy = model(prep)
            mean, sd = model.served(prep, yy)
            g = lambda a: "[" + ",".join("%.9g" % v for v in np.ravel(a)) + "]"
            fh.write('{"ts":%d,"y":%s,"mu":%s,"sigma":%s,"mean":%s,"sd":%s}\n' % (
                p[i] * S, g(yy.numpy()), g(prep["mu"]), g(prep["sigma"]), g(mean), g(sd)))
    print("loss %.4f, %d expected rows, window %d" % (loss.item(), n - W + 1, W))


if __name__ == "__main__":
    main()
