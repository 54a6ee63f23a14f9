#!/usr/bin/python3
"""How large are the noise-aware protocol's events against the clean test weeks' own bursts?

The noise-aware protocol (tools/inject.c, `--protocol noise`) sizes an event of L steps at
U(3, 6) sigma_L, sigma_L = sd(m_L(t) - m_L(t-L)) / sqrt(2) on the history, m_L an L-step mean.
This script counts, on the clean test rows, the natural runs of a statistic past k of its own
history sd, for three predictors, and gives the recall a threshold on that statistic could at
best have at <= 1 false alert per cell-week (the issue-13 target). Model-free: no cellcast
code, numpy only (docs/results.md, "what the noise-aware target needs").

  noise_bound.py barcelona [DATA]   raw L-mean changes, then the residual of a predictor from
                                    the other KPIs at t and the KPI's own values 31-36 steps
                                    back (before any event of <= 30 steps began), then the
                                    change of L-step medians (a robust statistic)
  noise_bound.py hourly [DATA]      2-step events on the hourly cells against the residual of
                                    a robust weekly profile (median of the same hour of the
                                    previous 4 weeks)
DATA: the directory holding lte-barcelona/ and lte-hourly-3cells/ (default ../shared/data).
"""
import csv
import sys

import numpy as np


def load(path):
    with open(path) as f:
        r = csv.reader(f)
        names = next(r)[1:]
        rows = [[float(x) if x else np.nan for x in row[1:]] for row in r]
    return names, np.array(rows)


def fill(a):
    a = a.copy()
    for f in range(a.shape[1]):
        m = np.isnan(a[:, f])
        if m.any():
            a[m, f] = np.interp(np.flatnonzero(m), np.flatnonzero(~m), a[~m, f])
    return a


def mean_l(x, L):
    return np.convolve(x, np.ones(L) / L, mode='valid')


def change_l(x, L):  # m_L(t) - m_L(t - L)
    c = mean_l(x, L)
    return c[L:] - c[:-L]


def median_change_l(x, L):  # the same with L-step medians: blind to a burst of a step or two
    c = np.median(np.lib.stride_tricks.sliding_window_view(x, L), axis=1)
    return c[L:] - c[:-L]


def runs(over):
    over = np.asarray(over, dtype=bool)
    return int(np.sum(over[1:] & ~over[:-1]) + (over[0] if len(over) else 0))


def bound(counts, weeks, ratios, ks, per_week, seed=1):
    """Smallest k with <= per_week natural runs a cell-week; the share of U(3,6) events
    (times their KPI's sigma_L / the statistic's sd) past it."""
    rate = {k: counts[k] / weeks for k in ks}
    kstar = min([k for k in ks if rate[k] <= per_week], default=None)
    if kstar is None:
        return rate, None, 0.0
    rng = np.random.default_rng(seed)
    r = np.array(ratios)
    m = rng.uniform(3, 6, 100000)
    return rate, kstar, float(np.mean(m * r[rng.integers(0, len(r), 100000)] >= kstar))


def barcelona(data):
    D = f'{data}/lte-barcelona'
    Ls, ks, lags = (5, 15, 30), (3, 4.5, 6, 8, 10, 12, 15, 20), range(31, 37)
    G = max(lags)
    raw, res, med, weeks = {}, {}, {}, 0.0
    ratio, mratio = {L: [] for L in Ls}, {L: [] for L in Ls}
    for cell in ('ElBorn', 'LesCorts', 'PobleSec'):
        _, h = load(f'{D}/{cell}.csv')
        _, t = load(f'{D}/{cell}_test.csv')
        h, t = fill(h), fill(t)
        weeks += len(t) * 120 / (7 * 86400)
        for f in range(h.shape[1]):
            def design(A):
                lagged = np.column_stack([A[G - l:len(A) - l, f] for l in lags])
                others = np.delete(A, f, axis=1)[G:]
                return np.column_stack([np.ones(len(A) - G), others, lagged]), A[G:, f]
            X, y = design(h)
            lam = 1e-3 * np.trace(X.T @ X) / X.shape[1]
            beta = np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y)
            Xt, yt = design(t)
            rh, rt = y - X @ beta, yt - Xt @ beta
            for L in Ls:
                sig = np.sqrt(change_l(h[:, f], L).var() / 2)  # the protocol's sigma_L
                dt = change_l(t[:, f], L)
                s = np.sqrt(change_l(rh, L).var() / 2)
                drt = change_l(rt, L)
                ratio[L].append(sig / s)
                # a shift or drop moves the median by its size (the ratio used), a surge by
                # 1.11 times its mean rise (sin over (0, pi): median 0.707, mean 0.637)
                sm = np.sqrt(median_change_l(h[:, f], L).var() / 2)
                dmt = median_change_l(t[:, f], L)
                mratio[L].append(sig / sm)
                for k in ks:
                    raw[L, k] = raw.get((L, k), 0) + runs(np.abs(dt) >= k * sig)
                    res[L, k] = res.get((L, k), 0) + runs(np.abs(drt) >= k * s)
                    med[L, k] = med.get((L, k), 0) + runs(np.abs(dmt) >= k * sm)
    print(f'Barcelona, {weeks:.2f} clean cell-weeks, 11 KPIs; runs a cell-week past k sd, and the')
    print('recall bound at <= 1/3 false alert a cell-week per scale (1 over the three scales):')
    for L in Ls:
        rate, kstar, rec = bound({k: raw[L, k] for k in ks}, weeks, [1.0], ks, 1 / 3)
        print(f'  L {L:2d} raw change:       ' + ' '.join(f'{k}:{v:.1f}' for k, v in rate.items())
              + f'  k* {kstar}  recall bound {rec:.2f}')
        rate, kstar, rec = bound({k: res[L, k] for k in ks}, weeks, ratio[L], ks, 1 / 3)
        r = np.array(ratio[L])
        print(f'  L {L:2d} cross-KPI residual: ' + ' '.join(f'{k}:{v:.1f}' for k, v in rate.items())
              + f'  k* {kstar}  recall bound {rec:.2f}  (sigma_L / sd: median {np.median(r):.2f},'
              f' {r.min():.2f}-{r.max():.2f})')
        rate, kstar, rec = bound({k: med[L, k] for k in ks}, weeks, mratio[L], ks, 1 / 3)
        r = np.array(mratio[L])
        print(f'  L {L:2d} median change:    ' + ' '.join(f'{k}:{v:.1f}' for k, v in rate.items())
              + f'  k* {kstar}  recall bound {rec:.2f}  (sigma_L / sd: median {np.median(r):.2f},'
              f' {r.min():.2f}-{r.max():.2f})')


def hourly(data):
    H = f'{data}/lte-hourly-3cells'
    L, ks, weeks, counts, ratios = 2, (2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 8), 0.0, {}, []
    hweeks, hcounts = 0.0, {}  # the same count on the history (the profile is not fitted)
    for c in ('Cell000113', 'Cell000231', 'Cell000233'):
        h = load(f'{H}/train_{c}.csv')[1][:, 0]
        t = load(f'{H}/test_{c}.csv')[1][:, 0]
        x, n0, wk = np.concatenate([h, t]), len(h), 168
        sig = np.sqrt(np.nanvar(change_l(h, L)) / 2)
        prof = np.full(len(x), np.nan)
        for i in range(4 * wk, len(x)):
            prof[i] = np.nanmedian(x[i - wk * np.arange(1, 5)])
        r = x - prof
        s = np.nanstd(mean_l(r[4 * wk:n0], L))
        # upward runs only: a surge goes up, so a one-sided threshold is the generous bound
        mt = np.nan_to_num(mean_l(r[n0:], L), nan=0.0)
        mh = np.nan_to_num(mean_l(r[4 * wk:n0], L), nan=0.0)
        weeks += len(t) / wk
        hweeks += (n0 - 4 * wk) / wk
        # a 2-step surge of m sigma_2 shaped sin(pi(j+1/2)/2)·pi/2 has a 2-step mean of 1.11 m sigma_2
        ratios.append(1.11 * sig / s)
        print(f'  {c}: mean level {np.nanmean(h):.0f}, sigma_2 {sig:.0f}, sd of the profile '
              f'residual\'s 2-step mean {s:.0f}: an event of 1 sigma_2 is {1.11 * sig / s:.2f} sd')
        for k in ks:
            counts[k] = counts.get(k, 0) + runs(mt >= k * s)
            hcounts[k] = hcounts.get(k, 0) + runs(mh >= k * s)
    for name, c, w in (('test', counts, weeks), ('history', hcounts, hweeks)):
        rate, kstar, rec = bound(c, w, ratios, ks, 1.0)
        print(f'hourly {name}, {w:.0f} cell-weeks: upward runs a cell-week past k sd '
              + ' '.join(f'{k}:{v:.1f}' for k, v in rate.items())
              + f'; k* {kstar}; recall bound for surges {rec:.2f}')


if __name__ == '__main__':
    if len(sys.argv) < 2 or sys.argv[1] not in ('barcelona', 'hourly'):
        sys.exit(__doc__)
    data = sys.argv[2] if len(sys.argv) > 2 else '../shared/data'
    (barcelona if sys.argv[1] == 'barcelona' else hourly)(data)
