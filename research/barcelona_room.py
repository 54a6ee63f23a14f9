#!/usr/bin/python3
"""How much room does Barcelona leave a nonlinear model over the MAE-fitted linear map? (issue 31)

The learner's linear-only candidate is one map for every KPI: the forecast of step k is
x_t + scale * (W r + b s)[k], r = the last R = 336 values minus x_t over the KPI's MASE scale
(the one-day seasonal naive's in-sample MAE of that series and KPI), s = the window's sd over
the scale. Fitted by the MAE (IRLS) it scores 0.415 / 0.403 / 0.571 on the held-out days 7 /
10 / 14 and the Transformer candidate does not beat it. This script asks, model-free and
outside cellcast, whether anything fitted on the same training rows does:

  ridge      the same map by least squares (the learner's `--linear-loss mse`), penalty
             chosen on the last day of the training rows
  lad        the same map by the MAE (IRLS from the ridge map, on at most --lad-rows samples)
  lad_kpi    one MAE map per KPI (what a channel embedding could add to a linear path)
  gbm_own    lad + gradient-boosted trees (absolute error) on lad's residual, from the
             channel's own past only (the Transformer's information: the last 36 changes,
             24 coarser ones, the window's sd, the KPI, the time of day, lad's forecast)
  gbm_cross  gbm_own + every other KPI's last 12 changes of the same cell (information the
             channel-independent model family never sees)

Every score is the learner's criterion: per KPI the mean absolute error over steps 1..24 in
MASE units, pooled over the held-out origins of every cell, then the mean over the KPIs. The
trees are fitted for a few horizon steps only (--gbm-steps); their columns report the gain
over lad on exactly those steps, and lad's score on them.

  usage: barcelona_room.py ROUND_DIR [...]   each a `cellcast learn --once` out dir holding
         all.csv and rounds.jsonl (e.g. `--linear-loss mse --transformer-days 1000`)
Needs numpy and scikit-learn (Debian's python3-numpy, python3-sklearn).
"""
import argparse
import calendar
import csv
import json
import os
import sys
import time

import numpy as np

R = 336  # the learner's linear window
H = 24  # the learner's horizon at 2-minute steps
DAY = 720  # steps a day: the MASE scale's season
LAMBDAS = [100, 10, 1, 0.1, 0.01, 1e-3, 1e-4]


def load_round(d):
    rec = [json.loads(x) for x in open(os.path.join(d, "rounds.jsonl"))][-1]
    hf = calendar.timegm(time.strptime(rec["holdout_from"], "%Y-%m-%dT%H:%M:%SZ"))
    step = rec["step_seconds"]
    cells = {}
    with open(os.path.join(d, "all.csv")) as f:
        r = csv.reader(f)
        head = next(r)
        kpis = head[2:]
        for row in r:
            cells.setdefault(row[1], []).append(
                [float(row[0])] + [float(x) if x else np.nan for x in row[2:]])
    series = {}
    for c, rows in cells.items():
        a = np.array(sorted(rows))
        ts = a[:, 0].astype(np.int64)
        n = int((ts[-1] - ts[0]) // step) + 1
        x = np.full((n, len(kpis)), np.nan)
        x[(ts - ts[0]) // step] = a[:, 1:]
        # a cell that ends before the held-out day: every row is a training row
        first_test = int(min(n, max(0, -(-(hf - ts[0]) // step))))
        tod = ((ts[0] + np.arange(n) * step) % 86400) / 86400.0
        series[c] = (x, first_test, tod)
    return rec, kpis, series


def ffill(x):
    x = x.copy()
    for f in range(x.shape[1]):
        v = x[:, f]
        ok = ~np.isnan(v)
        if not ok.any():
            continue
        idx = np.where(ok, np.arange(len(v)), 0)
        np.maximum.accumulate(idx, out=idx)
        v[:] = v[idx]
        v[: np.argmax(ok)] = v[np.argmax(ok)]
    return x


def samples(series, kpis):
    """Rows of every (cell, KPI, origin t) whose 24 targets are observed: the linear inputs,
    the targets (both in MASE units), the tree features, and which split they belong to."""
    out = {k: [] for k in ("X", "Y", "F", "kpi", "split", "cell")}
    for ci, (c, (x, ft, tod)) in enumerate(sorted(series.items())):
        n, nf = x.shape
        if ft < DAY + 1:
            continue  # no day before the held-out rows: no MASE scale (eval skips it too)
        xf = ffill(x)
        pad = np.vstack([np.repeat(xf[:1], R - 1, axis=0), xf])
        for f in range(nf):
            tr = x[:ft, f]
            sc = np.nanmean(np.abs(tr[DAY:] - tr[:-DAY]))
            if not np.isfinite(sc) or sc <= 0:
                continue
            # origins t: targets t+1..t+H observed; training targets before ft, held out after
            t = np.arange(0, n - H)
            tgt = np.stack([x[t + 1 + k, f] for k in range(H)], axis=1)
            ok = ~np.isnan(tgt).any(axis=1) & ~np.isnan(x[t, f])
            split = np.where(t + H < ft, 0, np.where(t >= ft - 1, 2, -1))
            keep = ok & (split >= 0)
            t, tgt, split = t[keep], tgt[keep], split[keep]
            win = np.stack([pad[t + i, f] for i in range(R)], axis=1)  # x_{t-R+1..t}
            xt = x[t, f][:, None]
            r = (win - xt) / sc
            sd = win.std(axis=1, keepdims=True) / sc
            X = np.hstack([r, sd]).astype(np.float32)
            Y = ((tgt - xt) / sc).astype(np.float32)
            coarse = r[:, R - 1 - np.arange(48, R, 12)]
            cross = []
            for g in range(nf):
                if g == f:
                    continue
                wg = np.stack([pad[t + R - 1 - i, g] for i in range(1, 13)], axis=1)
                sg = np.nanmean(np.abs(x[DAY:ft, g] - x[: ft - DAY, g])) or 1.0
                cross.append((wg - pad[t + R - 1, g][:, None]) / sg)
            F = np.hstack([r[:, R - 36:], coarse, sd, np.full((len(t), 1), f),
                           np.sin(2 * np.pi * tod[t])[:, None], np.cos(2 * np.pi * tod[t])[:, None]]
                          + cross).astype(np.float32)
            out["X"].append(X), out["Y"].append(Y), out["F"].append(F)
            out["kpi"].append(np.full(len(t), f)), out["split"].append(split)
            out["cell"].append(np.full(len(t), ci))
    return {k: np.concatenate(v) for k, v in out.items()}


def ridge(X, Y, lam):
    A = X.T.astype(np.float64) @ X
    pen = lam * np.trace(A[:-1, :-1]) / (A.shape[0] - 1)  # relative to the inputs' mean square
    A[np.arange(R), np.arange(R)] += pen
    return np.linalg.solve(A, X.T.astype(np.float64) @ Y), pen


def lad(X, Y, W0, pen, rows, passes):
    """IRLS for the absolute error, one weighted solve per horizon step (lib/cc_lad.c's)."""
    rng = np.random.default_rng(0)
    if len(X) > rows:
        i = rng.choice(len(X), rows, replace=False)
        X, Y = X[i], Y[i]
    W = W0.copy()
    Xd = X.astype(np.float64)
    for _ in range(passes):
        res = Y - Xd @ W
        mae0 = np.abs(res).mean()
        for k in range(Y.shape[1]):
            w = 1.0 / np.maximum(np.abs(res[:, k]), 1e-3)
            A = (Xd * w[:, None]).T @ Xd
            p = pen / max(np.abs(res[:, k]).mean(), 1e-9)
            A[np.arange(R), np.arange(R)] += p
            W[:, k] = np.linalg.solve(A, (Xd * w[:, None]).T @ Y[:, k])
        if mae0 - np.abs(Y - Xd @ W).mean() < 2e-4 * mae0:
            break
    return W


def criterion(err, kpi, cols=slice(None)):
    per = [np.abs(err[kpi == f][:, cols]).mean() for f in np.unique(kpi)]
    return float(np.mean(per)), per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="+")
    ap.add_argument("--lad-rows", type=int, default=60000)
    ap.add_argument("--lad-passes", type=int, default=10)
    ap.add_argument("--gbm-steps", default="1,6,12,24")
    ap.add_argument("--gbm-iter", type=int, default=300)
    ap.add_argument("--gbm-rows", type=int, default=150000)
    ap.add_argument("--no-tod", action="store_true",
                    help="the trees without the time of day (which feature carries the gain)")
    ap.add_argument("--own-only", action="store_true", help="no lad_kpi, no gbm_cross")
    a = ap.parse_args()
    from sklearn.ensemble import HistGradientBoostingRegressor

    for d in a.rounds:
        t0 = time.time()
        rec, kpis, series = load_round(d)
        S = samples(series, kpis)
        tr, te = S["split"] == 0, S["split"] == 2
        X, Y, kp = S["X"], S["Y"], S["kpi"]
        # the penalty chosen on the training rows' last day (origins in order per cell/KPI:
        # hold out each (cell, KPI)'s last DAY training origins)
        va = np.zeros(len(X), bool)
        for key in np.unique(S["cell"] * 100 + kp):
            idx = np.flatnonzero(tr & (S["cell"] * 100 + kp == key))
            va[idx[-DAY:]] = True
        fit = tr & ~va
        best = None
        for lam in LAMBDAS:
            W, pen = ridge(X[fit], Y[fit], lam)
            v, _ = criterion(Y[va] - X[va] @ W, kp[va])
            if best is None or v < best[0]:
                best = (v, lam)
        W_r, pen = ridge(X[tr], Y[tr], best[1])
        res = {"round": d, "data_days": rec["data_days"], "lambda": best[1],
               "train_samples": int(tr.sum()), "test_samples": int(te.sum())}
        learner = {c["kind"]: c.get("mase") for c in rec["candidates"]}
        res["learner_linear"] = learner.get("linear")
        res["ridge"], _ = criterion(Y[te] - X[te] @ W_r, kp[te])
        W_l = lad(X[tr], Y[tr], W_r, pen, a.lad_rows, a.lad_passes)
        lad_te = X[te] @ W_l
        res["lad"], res["lad_per_kpi"] = criterion(Y[te] - lad_te, kp[te])
        # one map per KPI
        err_k = np.zeros_like(Y[te])
        for f in np.unique(kp) if not a.own_only else []:
            m, mt = tr & (kp == f), kp[te] == f
            Wf, pf = ridge(X[m], Y[m], best[1])
            Wf = lad(X[m], Y[m], Wf, pf, a.lad_rows // 4, a.lad_passes)
            err_k[mt] = Y[te][mt] - X[te][mt] @ Wf
        res["lad_kpi"], _ = criterion(err_k, kp[te]) if not a.own_only else (None, 0)
        # trees on lad's residual, a few horizon steps
        steps = [int(s) - 1 for s in a.gbm_steps.split(",")]
        lad_tr = X[tr] @ W_l
        nown = 36 + len(range(48, R, 12)) + 4
        rng = np.random.default_rng(1)
        itr = np.flatnonzero(tr & ~va)
        if len(itr) > a.gbm_rows:
            itr = np.sort(rng.choice(itr, a.gbm_rows, replace=False))
        ival = np.flatnonzero(va)
        pos = np.cumsum(tr) - 1  # index into the tr-rows arrays
        if a.no_tod:  # the two time-of-day columns held at 0
            S["F"][:, nown - 2:nown] = 0
        variants = [("gbm_own", nown)] + ([] if a.own_only else [("gbm_cross", S["F"].shape[1])])
        res["no_tod"] = a.no_tod
        for name, ncol in variants:
            errs = np.zeros((te.sum(), len(steps)), np.float32)
            for j, k in enumerate(steps):
                def feats(idx, lin):
                    return np.hstack([S["F"][idx, :ncol], lin[:, None]])
                g = HistGradientBoostingRegressor(
                    loss="absolute_error", max_iter=a.gbm_iter, learning_rate=0.05,
                    max_leaf_nodes=31, min_samples_leaf=100, early_stopping=False)
                g.fit(feats(itr, lad_tr[pos[itr], k]), Y[itr, k] - lad_tr[pos[itr], k])
                # the validation day picks the number of trees
                vbest, nbest = np.inf, 0
                for n_, pv in enumerate(g.staged_predict(feats(ival, lad_tr[pos[ival], k]))):
                    if (n_ + 1) % 10 == 0 or n_ == 0:
                        v, _ = criterion((Y[ival, k] - lad_tr[pos[ival], k] - pv)[:, None], kp[ival])
                        if v < vbest:
                            vbest, nbest = v, n_
                v0, _ = criterion((Y[ival, k] - lad_tr[pos[ival], k])[:, None], kp[ival])
                pt = None
                for n_, p in enumerate(g.staged_predict(feats(np.flatnonzero(te), lad_te[:, k]))):
                    if n_ == nbest:
                        pt = p
                        break
                if vbest >= v0:  # no tree beats lad on validation: lad stays
                    pt = np.zeros(te.sum())
                errs[:, j] = Y[te][:, k] - lad_te[:, k] - pt
            res[name], _ = criterion(errs, kp[te])
        res["lad_on_gbm_steps"], _ = criterion(Y[te][:, steps] - lad_te[:, steps], kp[te])
        res["gbm_steps"] = [s + 1 for s in steps]
        res["wall_s"] = round(time.time() - t0, 1)
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    sys.exit(main())
