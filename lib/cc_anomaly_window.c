/*
 * cc_anomaly_window.c — the multi-scale window rule (window_s > 0): events of 10–60
 * minutes whose every step stays under warn_z, but whose mean over the event's length is
 * far outside what that length's mean normally does.
 *
 * Each KPI keeps its last CC_WIN_RING calibrated z, clipped to ±warn_z (a single step past
 * it is the z rule's: it must not charge every window that holds it). For each scale W
 * (window_s, window_s/2 and window_s/6 in steps, distinct, ≥ 2 steps) the mean of the last
 * W clipped z is scored against its OWN tracked tail_q quantile (the stochastic
 * approximation of the tail calibration, TAIL_RATE), scaled to zq: forecast residuals are
 * autocorrelated and heavy-tailed, so a W-step mean spreads far more than the 1/√W of white
 * noise, and by a different factor at every W. The earlier EWMA rule compared one
 * smoothed z with one tail; here every scale is judged on its own rarity, and the largest
 * of them is the KPI's window z. The quantiles do not learn while the cell fires.
 */
#include "cc_anomaly_window.h"

int cc_window_scales(const CcAnomalySettings *s, int *w)
{
    static const int div[CC_WIN_SCALES] = {1, 2, 6};
    int n = 0;
    if (!(s->window_s > 0) || !(s->tail_q > 0))
        return 0;
    for (int j = 0; j < CC_WIN_SCALES; j++) {
        int64_t st = (s->window_s / div[j] + s->step_seconds / 2) / s->step_seconds;
        int ws = st > CC_WIN_RING ? CC_WIN_RING : (int)st;
        if (ws >= 2 && (n == 0 || ws != w[n - 1]))
            w[n++] = ws;
    }
    return n;
}

double cc_window_z(const CcAnomalySettings *s, KpiState *k, int firing, double z, double zq,
                   double *unit)
{
    int w[CC_WIN_SCALES], n = cc_window_scales(s, w);
    *unit = NAN;
    if (!n || !isfinite(z))
        return NAN;
    WinState *ws = &k->win;
    double lim = s->warn_z;
    ws->ring[ws->pos] = (float)(z > lim ? lim : z < -lim ? -lim : z);
    ws->pos = (ws->pos + 1) % CC_WIN_RING;
    if (ws->count < CC_WIN_RING)
        ws->count++;
    double best = NAN;
    for (int j = 0; j < n; j++) {
        if (ws->count < w[j])
            continue;
        if (ws->w[j] != w[j]) { /* a new scale (settings reloaded): its tail starts again */
            ws->w[j] = (int16_t)w[j];
            ws->tail[j] = 0;
            ws->tail_n[j] = 0;
        }
        double sum = 0;
        for (int i = 1; i <= w[j]; i++)
            sum += ws->ring[(ws->pos - i + CC_WIN_RING) % CC_WIN_RING];
        double m = sum / w[j];
        if (!(ws->tail[j] > 0))
            ws->tail[j] = zq / sqrt((double)w[j]); /* the mean of W white N(0, 1) */
        double zw = ws->tail_n[j] >= TAIL_MIN_N ? m * zq / ws->tail[j] : NAN;
        if (!firing)
            cc_tail_learn(s, &ws->tail[j], &ws->tail_n[j], m);
        if (isfinite(zw) && !(fabs(best) >= fabs(zw))) {
            best = zw;
            *unit = zq / ws->tail[j]; /* before learning: the unit zw was taken in */
        }
    }
    return best;
}
