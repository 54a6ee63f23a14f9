#!/usr/bin/python3
"""train.py — train cellcast-tx/3 in PyTorch on a CSV history and export it for cellcast.

    /usr/bin/python3 tools/torch/train.py --data history.csv --step 3600 --horizon 96 \
        --out model.safetensors [--protocol ett] [--steps 4000] [--seed 1]

The CSV has a time column (`ts` in unix seconds, `date` as "YYYY-MM-DD HH:MM:SS" UTC, or
`DateTime` as "MM/DD/YYYY HH:MM") and one column per KPI (all numeric; every column but the
time and cell ones is a KPI unless --features names them); every KPI is a channel. A wide
file is one series (one cell); a long file (a `cell_id` column, --cell-column) is one series
per cell, all trained as one model. Missing steps and values are carried forward as the C
loader does and never used as targets.

Splits: `--protocol ett` is the standard ETT split (12/4/4 months of hourly rows); else
--split TRAIN,VAL fractions of each series (default 0.7,0.1; the rest is test, unused here:
evaluate the exported file with `cellcast eval`, which applies the same protocol).

What the trainer chooses (the spec leaves it open; see tools/torch/README.md):
- norm.floor[f] = 0.01 x the KPI's standard deviation over the training rows;
- calib.sigma_scale[f][k] = the scale that makes the validation P10-P90 coverage 0.80
  (the 0.8-quantile of |error| / (z_0.8 sd));
- the checkpoint kept is the one with the lowest validation MSE (--select mae: MAE) of the
  mean.
"""
import argparse
import csv
import datetime as dt
import math
import sys
import time

import numpy as np
import torch

import cellcast_tx as tx


TIME_COLUMNS = ("ts", "date", "time", "timestamp", "DateTime")
# the time formats of the data sets in ../shared/data besides unix seconds and ISO 8601
TIME_FORMATS = ("%m/%d/%Y %H:%M", "%m/%d/%Y %H:%M:%S")


def parse_time(s):
    if s.lstrip("-").isdigit():
        return int(s)
    for fmt in (None,) + TIME_FORMATS:
        try:
            t = dt.datetime.fromisoformat(s.replace("Z", "")) if fmt is None else dt.datetime.strptime(s, fmt)
            return int(t.replace(tzinfo=dt.timezone.utc).timestamp())
        except ValueError:
            pass
    sys.exit("unreadable time %r (unix seconds, ISO 8601 or %s)" % (s, " or ".join(TIME_FORMATS)))


def read_csv(path, features, step, cell_column):
    """The history as a list of series, one per cell (a wide file is one series):
    (cell, names, ts, x, observed). Steps absent from the file are inserted and every
    missing value is carried forward (the C loader's default policy, lib/cc_data.h); the
    `observed` mask (False there) keeps them out of the targets."""
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    head, body = rows[0], rows[1:]
    tcol = next((i for i, h in enumerate(head) if h in TIME_COLUMNS), None)
    if tcol is None:
        sys.exit("%s: no time column (%s)" % (path, ", ".join(TIME_COLUMNS)))
    ccol = head.index(cell_column) if cell_column in head else None
    names = features or [h for i, h in enumerate(head) if i not in (tcol, ccol)]
    missing = [n for n in names if n not in head]
    if missing:
        sys.exit("%s: no column %s" % (path, ", ".join(missing)))
    cols = [head.index(n) for n in names]

    def value(s):
        try:
            return float(s) if s not in ("", "-") else math.nan
        except ValueError:
            sys.exit("%s: %r is not a number" % (path, s))

    by_cell = {}
    for r in body:
        by_cell.setdefault(r[ccol] if ccol is not None else "", []).append(r)
    series = []
    for cell, rs in by_cell.items():
        t = np.array([parse_time(r[tcol]) for r in rs], dtype=np.int64) // step
        v = np.array([[value(r[c]) for c in cols] for r in rs], dtype=np.float64)
        order = np.argsort(t, kind="stable")        # the later row of a duplicate step wins
        t, v = t[order], v[order]
        full = np.full((t[-1] - t[0] + 1, len(cols)), np.nan)
        full[t - t[0]] = v
        observed = np.isfinite(full)
        for i in range(len(full)):                  # carry forward; the start takes the first
            bad = ~observed[i]
            full[i, bad] = full[i - 1, bad] if i else np.nan
        first = np.array([full[np.argmax(observed[:, f]), f] if observed[:, f].any() else 0.0
                          for f in range(len(cols))])
        full = np.where(np.isnan(full), first, full)
        series.append((cell, names, (t[0] + np.arange(len(full))) * step, full, observed))
    return series


def windows(x, steps, t_idx, f_idx, W, Hz):
    """Inputs (B, W) ending at rows t_idx, targets (B, Hz) after them, channels f_idx."""
    rows = t_idx[:, None] + np.arange(-W + 1, 1)[None, :]
    fut = t_idx[:, None] + np.arange(1, Hz + 1)[None, :]
    return x[rows, f_idx[:, None]], x[fut, f_idx[:, None]], steps[t_idx]


def channel_batches(model, x, steps, t_idx, W, Hz, F, batch):
    """Every channel at every row of t_idx, in batches: (channels, targets, prepare())."""
    for f in range(F):
        for b in range(0, len(t_idx), batch):
            ti = t_idx[b:b + batch]
            fi = np.full(len(ti), f)
            xin, yt, tt = windows(x, steps, ti, fi, W, Hz)
            yield fi, yt, model.prepare(xin, tt, fi)


def evaluate(model, x, steps, t_idx, W, Hz, F, batch=256):
    """Mean and sd (KPI units) and targets for every channel at rows t_idx."""
    model.eval()
    means, sds, ys, fs = [], [], [], []
    with torch.no_grad():
        for fi, yt, prep in channel_batches(model, x, steps, t_idx, W, Hz, F, batch):
            m, s = model.served(prep, model(prep))
            means.append(m), sds.append(s), ys.append(yt), fs.append(fi)
    model.train()
    return np.concatenate(means), np.concatenate(sds), np.concatenate(ys), np.concatenate(fs)


def fit_calibration(model, mean, sd, y, f):
    """sigma_scale[f][k]: the scale that makes the P10-P90 interval cover 80 % of the
    validation targets, per KPI and horizon step."""
    F, Hz = model.calib.sigma_scale.shape
    ratio = np.abs(y - mean) / (tx.Z80 * sd / model.calib.sigma_scale.numpy()[f])
    s = np.ones((F, Hz))
    for ch in range(F):
        r = ratio[f == ch]
        if len(r):
            s[ch] = np.maximum(np.quantile(r, 0.8, axis=0), 1e-3)
    model.calib.sigma_scale.copy_(torch.from_numpy(s))


def ridge_init(model, x, steps, t_idx, W, Hz, F, lam, batch=1024):
    """Sets linear.weight/bias to the ridge regression of the targets' change from the last
    value, (xn_{t+1+k} - xn_t), on the linear path's input r = xn_{t-R+1..t} - xn_t, over
    every channel at every training step t, normalised exactly as served (prepare()).
    The transformer head then starts near zero and learns the residual of a linear
    forecaster that is already as good as a closed form makes it (Toner & Darlow 2024: OLS
    matches gradient-trained DLinear/NLinear on ETT). lam penalises the weights, not the
    bias, per sample (the penalty is lam x the number of samples, so lam does not depend
    on the split's length)."""
    R = model.hp.linear_window
    ata, aty = np.zeros((R + 1, R + 1)), np.zeros((R + 1, Hz))
    for fi, yt, prep in channel_batches(model, x, steps, t_idx, W, Hz, F, batch):
        xt = prep["xn_t"].double().numpy()
        a = np.hstack([prep["xn_lin"].double().numpy() - xt[:, None], np.ones((len(fi), 1))])
        y = (yt - prep["mu"][:, None]) / prep["sigma"][:, None] - xt[:, None]
        ata += a.T @ a
        aty += a.T @ y
    reg = lam * F * len(t_idx) * np.eye(R + 1)
    reg[R, R] = 0.0
    # R + 1 <= 721 unknowns: a dense solve of the normal equations is instant
    wb = np.linalg.solve(ata + reg, aty)
    with torch.no_grad():
        model.linear.weight.copy_(torch.from_numpy(wb[:R].T.copy()))
        model.linear.bias.copy_(torch.from_numpy(wb[R].copy()))


def within_bound(prep, target, P, bound):
    """The samples of a batch whose normalised values (the tokens' inputs, the linear path's
    r and xn_t, the targets) are all within +-bound, and how many were not: cellcast
    train's --xn-bound (lib/cc_train.h, cc_train_work_set_xn_bound)."""
    big = prep["tokens"][:, :, :P].abs().amax(dim=(1, 2))
    big = torch.maximum(big, target.abs().amax(dim=1))
    if prep["xn_lin"].shape[1]:
        r = prep["xn_lin"] - prep["xn_t"][:, None]
        big = torch.maximum(big, r.abs().amax(dim=1))
        big = torch.maximum(big, prep["xn_t"].abs())
    keep = big <= bound
    if bool(keep.all()):
        return prep, target, 0
    kn = keep.numpy()
    return ({k: v[keep] if torch.is_tensor(v) else v[kn] for k, v in prep.items()},
            target[keep], int((~keep).sum()))


def objective(y, target, nll_mean, mae_weight):
    """The spec's Gaussian NLL, with an MAE term on the mean if asked; nll_mean scales the
    NLL's gradient on the mean (its value is unchanged), so that with 0 the mean follows
    the MAE term alone (the hourly cells' metric is an MAE) and the sd still the NLL."""
    mean = y[:, :, 0]
    if nll_mean != 1.0:
        mean = nll_mean * mean + (1 - nll_mean) * mean.detach()
    loss = tx.nll(torch.stack([mean, y[:, :, 1]], dim=-1), target)
    if mae_weight > 0:
        loss = loss + mae_weight * (target - y[:, :, 0]).abs().mean()
    return loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--step", type=int, required=True, help="seconds per row")
    ap.add_argument("--horizon", type=int, default=96)
    ap.add_argument("--features", help="comma-separated KPI columns (default: all)")
    ap.add_argument("--protocol", choices=["ett", "split"], default="split")
    ap.add_argument("--split", default="0.7,0.1")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--d-ff", type=int, default=128)
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--patches", type=int, default=21)
    ap.add_argument("--norm-window", type=int, default=336)
    ap.add_argument("--linear-window", type=int, default=336)
    ap.add_argument("--linear-init", choices=["zero", "ridge"], default="zero",
                    help="linear path at step 0: zero (last value) or the ridge fit")
    ap.add_argument("--ridge-lambda", type=float, default=0.2,
                    help="ridge penalty per training sample (default chosen on validation)")
    ap.add_argument("--linear-freeze", type=int, default=0,
                    help="steps during which the linear path is not trained")
    ap.add_argument("--eval-start", action="store_true",
                    help="validate before the first step too (the start may be kept)")
    ap.add_argument("--ema", type=float, default=0.0,
                    help="validate and keep an exponential moving average of the weights "
                         "with this decay (0: off)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--select", choices=["mse", "mae"], default="mse",
                    help="the validation error (KPI units) that chooses the checkpoint")
    ap.add_argument("--mae-weight", type=float, default=0.0,
                    help="add this times the mean absolute error of the normalised mean "
                         "to the loss")
    ap.add_argument("--nll-mean", type=float, default=1.0,
                    help="weight of the NLL's gradient on the mean (0: the mean is trained "
                         "by the MAE term alone, the sd by the NLL)")
    ap.add_argument("--cell-column", default="cell_id",
                    help="a long file's cell column: one series per cell (default cell_id)")
    ap.add_argument("--xn-bound", type=float, default=1000.0,
                    help="leave out of the loss the samples with a normalised input or target "
                         "beyond +-X (a flat window, then a move of thousands of its sigmas), "
                         "as cellcast train; 0 = none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    score = {"mse": lambda m, y: float(((m - y) ** 2).mean()),
             "mae": lambda m, y: float(np.abs(m - y).mean())}[a.select]
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    torch.set_num_threads(a.threads)

    series = read_csv(a.data, a.features.split(",") if a.features else None, a.step,
                      a.cell_column)
    names = series[0][1]
    hp = tx.Hparams(names, a.step, horizon=a.horizon, d_model=a.d_model, d_ff=a.d_ff,
                    patch_len=a.patch, n_patches=a.patches, norm_window=a.norm_window,
                    linear_window=a.linear_window, dropout=a.dropout)
    W, Hz, F = tx.window_len(hp), hp.horizon, hp.n_features
    # the cells' series one after the other; a forecast step t reads and predicts rows of
    # its own series only. Per series: train rows [0, n_train), validation [n_train,
    # n_train + n_val); a validation window may read the end of the training rows (the ETT
    # convention, and the C trainer's split of each series)
    x = np.concatenate([sr[3] for sr in series])
    observed = np.concatenate([sr[4] for sr in series]).all(axis=1)
    steps = np.concatenate([sr[2] for sr in series]) // a.step
    train_t, val_t, train_rows, off = [], [], [], 0
    for sr in series:
        n = len(sr[3])
        if a.protocol == "ett":
            n_train, n_val = 12 * 30 * 24 * 3600 // a.step, 4 * 30 * 24 * 3600 // a.step
        else:
            ft, fv = (float(v) for v in a.split.split(","))
            n_train, n_val = int(n * ft), int(n * fv)
        train_t.append(off + np.arange(W - 1, n_train - Hz))
        val_t.append(off + np.arange(max(W - 1, n_train - 1), min(n, n_train + n_val) - Hz))
        train_rows.append(x[off:off + n_train])
        off += n
    # a target that was not in the file (an inserted step or an empty value) is not scored
    # or learned: forecast steps whose next Hz rows are all observed
    fut_ok = np.array([observed[t + 1:t + 1 + Hz].all() for t in range(len(x) - Hz)] + [False] * Hz)
    train_t = np.concatenate(train_t)
    val_t = np.concatenate(val_t)
    train_t, val_t = train_t[fut_ok[train_t]], val_t[fut_ok[val_t]]
    if len(train_t) < 1 or len(val_t) < 1:
        sys.exit("too few rows: %d for a window of %d and a horizon of %d" % (len(x), W, Hz))
    model = tx.CellcastTx(hp)
    model.norm.floor.copy_(torch.from_numpy(0.01 * np.concatenate(train_rows).std(axis=0)))
    print("%d series, %d training and %d validation forecast steps" % (len(series), len(train_t),
                                                                        len(val_t)), flush=True)
    if a.linear_init == "ridge":
        ridge_init(model, x, steps, train_t, W, Hz, F, a.ridge_lambda)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98),
                            weight_decay=a.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1, (s + 1) / a.warmup) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, s / a.steps))))
    best, best_state, worst_loss, t0, excluded = math.inf, None, 0.0, time.time(), 0
    ema = {k: v.clone() for k, v in model.state_dict().items()} if a.ema > 0 else None
    if a.eval_start:  # the start (e.g. the ridge path) is a checkpoint candidate too
        m, _, y, _ = evaluate(model, x, steps, val_t[::4], W, Hz, F)
        best = score(m, y)
        best_state = {k: v.clone() for k, v in model.state_dict().items()}
        print("step 0 val_%s %.6g" % (a.select, best), flush=True)
    for step in range(a.steps):
        model.linear.requires_grad_(step >= a.linear_freeze)
        ti = rng.choice(train_t, a.batch)
        fi = rng.integers(0, F, a.batch)
        xin, yt, tt = windows(x, steps, ti, fi, W, Hz)
        prep = model.prepare(xin, tt, fi, pos_shift=rng.integers(0, 1 << 20, a.batch))
        target = torch.from_numpy(((yt - prep["mu"][:, None]) / prep["sigma"][:, None]).astype(np.float32))
        if a.xn_bound > 0:
            prep, target, n_out = within_bound(prep, target, hp.patch_len, a.xn_bound)
            excluded += n_out
            if not len(target):
                continue
        loss = objective(model(prep), target, a.nll_mean, a.mae_weight)
        worst_loss = max(worst_loss, loss.item())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if a.ema > 0:
            with torch.no_grad():  # a shorter average over the first steps (warm start)
                dec = min(a.ema, (1 + step) / (10 + step))
                for k, v in model.state_dict().items():
                    ema[k].mul_(dec).add_(v, alpha=1 - dec)
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            live = None
            if a.ema > 0:  # score (and keep) the average
                live = {k: v.clone() for k, v in model.state_dict().items()}
                model.load_state_dict(ema)
            m, _, y, _ = evaluate(model, x, steps, val_t[::4], W, Hz, F)
            val = score(m, y)
            print("step %d loss %.4f val_%s %.6g (%.0f s)" % (step + 1, loss.item(), a.select, val,
                                                             time.time() - t0), flush=True)
            if val < best:
                best = val
                best_state = {k: v.clone() for k, v in model.state_dict().items()}
            if live is not None:
                model.load_state_dict(live)
    model.load_state_dict(best_state)
    m, s, y, f = evaluate(model, x, steps, val_t, W, Hz, F)
    fit_calibration(model, m, s, y, f)
    m, s, y, f = evaluate(model, x, steps, val_t, W, Hz, F)
    cover = float((np.abs(y - m) <= tx.Z80 * s).mean())
    print("best val_%s %.6g, largest batch loss %.4g, val P10-P90 coverage after "
          "calibration %.3f" % (a.select, best, worst_loss, cover))
    if excluded:
        print("%d of %d training samples had a normalised value beyond +-%g and were left out "
              "of the loss" % (excluded, a.steps * a.batch, a.xn_bound))
    tx.export(model, a.out, {"name": "torch-" + a.data.rsplit("/", 1)[-1],
                             "trained_on": a.data.rsplit("/", 1)[-1],
                             "created_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
    print("wrote", a.out)


if __name__ == "__main__":
    main()
