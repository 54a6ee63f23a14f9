/* model_watch.c — live MASE of the model in service against one-day seasonal naive, each
 * cell's samples weighed by 1 / its own scale (CcdWatchScale), in windows of target steps (a
 * ring of CCD_WATCH_MAX_WINDOWS windows, one bucket per target step), and the rollback's
 * rule on them; see model_watch.h. */
#include "model_watch.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One target step's sums, each sample weighed by 1 / its cell's scale: [kind][f] (kind:
 * CcHistoryFc); n: the samples. */
typedef struct Bucket {
    int64_t p; ///< the target step it holds; -1: empty
    double *err, *naive;
    int32_t *n;
} Bucket;

struct CcdModelWatch {
    pthread_mutex_t lock;
    int W, F;
    int C;          ///< buckets (target steps kept): CCD_WATCH_MAX_WINDOWS x W
    int64_t day;    ///< steps in a day
    int64_t after;  ///< the swap: forecasts made at or before this origin step are not
                    ///< counted, and windows start after it (INT64_MIN: none since the start)
    int64_t newest; ///< newest target step seen; -1: none
    int64_t oldest; ///< oldest target step seen; -1: none (windows start no earlier)
    Bucket *b;
    double *mem;
    /* since the watch opened, [kind * F + f]: unweighted (ccd_watch_totals) and weighted
     * (ccd_watch_scaled_totals) */
    double *total_err, *total_naive, *scaled_err, *scaled_naive;
    int64_t *total_n, *scaled_n;
};

/* A cell's scale of KPI f: the running mean of |y(p) − y(p − day)| over its last
 * CCD_WATCH_SCALE_DAYS days of steps (exact mean over the first ones, exponential after). */
typedef struct ScaleKpi {
    float mean;
    int32_t n; ///< samples, capped at the running mean's length
} ScaleKpi;

struct CcdWatchScale {
    int F;
    ScaleKpi kpi[];
};

/* The running mean's length in days of steps: the default history.depth's week, so that a
 * weekday and a weekend weigh in it alike. */
#define CCD_WATCH_SCALE_DAYS 7

size_t ccd_watch_scale_bytes(int F)
{
    return sizeof(CcdWatchScale) + (F > 0 ? (size_t)F : 0) * sizeof(ScaleKpi);
}

int ccd_watch_scale_open(CcdWatchScale **out, int F)
{
    *out = NULL;
    if (F < 1 || F > CC_MAX_FEATURES)
        return -EINVAL;
    CcdWatchScale *s = calloc(1, ccd_watch_scale_bytes(F));
    if (!s)
        return -ENOMEM;
    s->F = F;
    *out = s;
    return 0;
}

void ccd_watch_scale_close(CcdWatchScale **s)
{
    free(*s);
    *s = NULL;
}

int ccd_watch_open(CcdModelWatch **out, int window_steps, int64_t step_s, int F)
{
    *out = NULL;
    if (window_steps < 1 || window_steps > INT_MAX / CCD_WATCH_MAX_WINDOWS || step_s < 1 || F < 1 ||
        F > CC_MAX_FEATURES)
        return -EINVAL;
    const int C = window_steps * CCD_WATCH_MAX_WINDOWS;
    CcdModelWatch *w = calloc(1, sizeof *w);
    const size_t per = 2 * (size_t)F;
    if (!w || !(w->b = calloc((size_t)C, sizeof *w->b)) ||
        !(w->mem = calloc((size_t)C * per * 3, sizeof(double))) ||
        !(w->total_err = calloc(per * 4, sizeof(double))) ||
        !(w->total_n = calloc(per * 2, sizeof(int64_t)))) {
        if (w) {
            free(w->b);
            free(w->mem);
            free(w->total_err);
        }
        free(w);
        return -ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->W = window_steps, w->F = F, w->C = C;
    w->day = 86400 / step_s > 0 ? 86400 / step_s : 1;
    w->after = INT64_MIN;
    w->newest = w->oldest = -1;
    w->total_naive = w->total_err + per;
    w->scaled_err = w->total_err + 2 * per;
    w->scaled_naive = w->total_err + 3 * per;
    w->scaled_n = w->total_n + per;
    for (int i = 0; i < C; i++) {
        double *m = w->mem + (size_t)i * per * 3;
        w->b[i].p = -1;
        w->b[i].err = m;
        w->b[i].naive = m + per;
        w->b[i].n = (int32_t *)(m + 2 * per); /* per int32 in per doubles' room */
    }
    *out = w;
    return 0;
}

void ccd_watch_close(CcdModelWatch **pw)
{
    CcdModelWatch *w = *pw;
    if (!w)
        return;
    pthread_mutex_destroy(&w->lock);
    free(w->mem);
    free(w->b);
    free(w->total_err);
    free(w->total_n);
    free(w);
    *pw = NULL;
}

static void clear_bucket(CcdModelWatch *w, Bucket *b, int64_t p)
{
    const size_t per = 2 * (size_t)w->F;
    b->p = p;
    memset(b->err, 0, per * sizeof(double));
    memset(b->naive, 0, per * sizeof(double));
    memset(b->n, 0, per * sizeof(int32_t));
}

/* The weight of the cell's samples of each KPI at this step, from its scale as it was
 * before it (0: no scale yet, it does not weigh), then the scale learns this step's naive
 * error. Worker; the cell's own state: no lock. */
static void weigh_and_learn(const CcdModelWatch *w, CcdWatchScale *scale, const float *y,
                            const float *y0, int F, double *weight)
{
    const int32_t len = (int32_t)(w->day * CCD_WATCH_SCALE_DAYS);
    for (int f = 0; f < F; f++) {
        weight[f] = 0;
        if (!scale || scale->F != F)
            continue;
        ScaleKpi *k = &scale->kpi[f];
        /* learnt from a day of steps (a whole daily cycle) and the KPI moved in it */
        if (k->n >= w->day && k->mean > 0)
            weight[f] = 1.0 / k->mean;
        if (!isfinite(y[f]) || !isfinite(y0[f]))
            continue;
        if (k->n < len)
            k->n++;
        k->mean += (float)(fabs((double)y[f] - y0[f]) - k->mean) / (float)k->n;
    }
}

void ccd_watch_step(CcdModelWatch *w, const CcHistory *h, CcdWatchScale *scale, int64_t p)
{
    CcHistoryRow now, back;
    int F, depth, HZ;
    double weight[CC_MAX_FEATURES];
    if (!w || !h || p < w->day)
        return;
    cc_history_shape(h, &F, &depth, &HZ);
    if (F != w->F || !cc_history_get(h, p, &now) || !now.observed ||
        !cc_history_get(h, p - w->day, &back) || !back.observed)
        return;
    weigh_and_learn(w, scale, now.values, back.values, F, weight); /* with forecasts or not */
    if (!(now.have_fc[0] || now.have_fc[1]))
        return;
    const int64_t origin[2] = {p - 1, p - HZ};
    pthread_mutex_lock(&w->lock);
    if (p > w->newest)
        w->newest = p;
    if (w->oldest < 0 || p < w->oldest)
        w->oldest = p;
    for (int k = 0; k < 2; k++) /* what was served, whichever model made it */
        for (int f = 0; f < F && now.have_fc[k]; f++) {
            const float y = now.values[f], m = now.mean[k][f], y0 = back.values[f];
            if (!isfinite(y) || !isfinite(m) || !isfinite(y0))
                continue;
            const int i = k * F + f;
            w->total_err[i] += fabs((double)y - m);
            w->total_naive[i] += fabs((double)y - y0);
            w->total_n[i]++;
            if (weight[f] > 0) {
                w->scaled_err[i] += weight[f] * fabs((double)y - m);
                w->scaled_naive[i] += weight[f] * fabs((double)y - y0);
                w->scaled_n[i]++;
            }
        }
    if (p > w->newest - w->C) { /* a step the ring keeps: a late cell's older ones are not */
        Bucket *b = &w->b[p % w->C];
        if (b->p != p)
            clear_bucket(w, b, p);
        for (int k = 0; k < 2; k++) {
            if (!now.have_fc[k] || origin[k] <= w->after)
                continue;
            for (int f = 0; f < F; f++) {
                const float y = now.values[f], m = now.mean[k][f], y0 = back.values[f];
                if (weight[f] <= 0 || !isfinite(y) || !isfinite(m) || !isfinite(y0))
                    continue;
                b->err[k * F + f] += weight[f] * fabs((double)y - m);
                b->naive[k * F + f] += weight[f] * fabs((double)y - y0);
                b->n[k * F + f]++;
            }
        }
    }
    pthread_mutex_unlock(&w->lock);
}

int64_t ccd_watch_newest(CcdModelWatch *w)
{
    pthread_mutex_lock(&w->lock);
    int64_t n = w->newest;
    pthread_mutex_unlock(&w->lock);
    return n;
}

int ccd_watch_window(const CcdModelWatch *w) { return w->W; }

/* A window's sums over its buckets, [kind * F + f]. */
typedef struct Sums {
    double err[2 * CC_MAX_FEATURES], naive[2 * CC_MAX_FEATURES];
    int64_t n[2 * CC_MAX_FEATURES];
    int64_t forecasts, first, last;
} Sums;

/* Under the lock: adds target steps newest, newest - 1, ... down to lo + 1 (never one the
 * ring no longer keeps), and stops early once it has taken at least min_steps steps holding
 * at least min_forecasts matured forecasts (min_forecasts 0: no early stop). Returns the
 * steps taken. */
static int64_t add_steps(const CcdModelWatch *w, int64_t lo, int64_t min_steps,
                         int64_t min_forecasts, Sums *s)
{
    const int per = 2 * w->F;
    const int64_t hi = w->newest;
    if (hi < 0) /* nothing scored yet: no bucket to read (p % C would be negative) */
        return 0;
    if (lo < hi - w->C)
        lo = hi - w->C;
    if (lo < w->oldest - 1) /* steps before the first scored: none held, none counted */
        lo = w->oldest - 1;
    int64_t p = hi;
    for (; p > lo; p--) {
        if (min_forecasts > 0 && hi - p >= min_steps && s->forecasts >= min_forecasts)
            break;
        const Bucket *b = &w->b[p % w->C];
        if (b->p != p)
            continue;
        int64_t here = 0;
        for (int i = 0; i < per; i++) {
            s->err[i] += b->err[i];
            s->naive[i] += b->naive[i];
            s->n[i] += b->n[i];
            here += b->n[i];
        }
        if (here) {
            s->forecasts += here;
            s->first = p;
            if (s->last < 0)
                s->last = p;
        }
    }
    return hi - p;
}

/* The MASE of the sums: per KPI the mean of its kinds, then the mean over KPIs. */
static void score_sums(int F, const Sums *sums, int64_t steps, CcdWatchScore *s)
{
    memset(s, 0, sizeof *s);
    s->F = F;
    s->forecasts = sums->forecasts;
    s->steps = steps;
    s->first_step = sums->first;
    s->last_step = sums->last;
    double sum = 0;
    int kpis = 0;
    for (int f = 0; f < F; f++) {
        double m = 0;
        int kinds = 0;
        for (int k = 0; k < 2; k++) {
            const int i = k * F + f;
            /* a KPI that did not move in a day has no scale: no MASE (the learner's rule) */
            if (sums->n[i] > 0 && sums->naive[i] > 0) {
                m += sums->err[i] / sums->naive[i];
                kinds++;
            }
        }
        s->mase_kpi[f] = kinds ? m / kinds : NAN;
        if (kinds) {
            sum += s->mase_kpi[f];
            kpis++;
        }
    }
    s->mase = kpis ? sum / kpis : NAN;
}

static void sums_init(Sums *s)
{
    memset(s, 0, sizeof *s);
    s->first = s->last = -1;
}

/* The target steps since the swap, or since the first step scored when that came later
 * (a swap before any: the first learned model after a re-exec). */
static int64_t since_swap(const CcdModelWatch *w)
{
    if (w->newest < 0)
        return 0;
    return w->newest - (w->after > w->oldest - 1 ? w->after : w->oldest - 1);
}

void ccd_watch_score(CcdModelWatch *w, CcdWatchScore *s)
{
    Sums sums;
    sums_init(&sums);
    pthread_mutex_lock(&w->lock);
    const int64_t lo = w->after > w->newest - w->W ? w->after : w->newest - w->W;
    const int64_t steps = add_steps(w, lo, 0, 0, &sums);
    pthread_mutex_unlock(&w->lock);
    score_sums(w->F, &sums, steps, s);
}

void ccd_watch_baseline(CcdModelWatch *w, int64_t min_forecasts, CcdWatchScore *s)
{
    Sums sums;
    sums_init(&sums);
    pthread_mutex_lock(&w->lock);
    const int64_t steps =
        add_steps(w, w->after, w->W, min_forecasts > 0 ? min_forecasts : 1, &sums);
    pthread_mutex_unlock(&w->lock);
    score_sums(w->F, &sums, steps, s);
}

CcdWatchVerdict ccd_watch_judge(CcdModelWatch *w, double baseline_mase, int64_t min_forecasts,
                                double margin, CcdWatchScore *s)
{
    Sums sums;
    sums_init(&sums);
    pthread_mutex_lock(&w->lock);
    const int64_t since = since_swap(w);
    const int64_t steps = add_steps(w, w->after, 0, 0, &sums); /* all since the swap */
    pthread_mutex_unlock(&w->lock);
    score_sums(w->F, &sums, steps, s);
    if (since < w->W)
        return CCD_WATCH_WAIT;
    if (s->forecasts >= min_forecasts && !isnan(s->mase))
        return s->mase > baseline_mase * (1 + margin) ? CCD_WATCH_ROLL_BACK : CCD_WATCH_KEEP;
    return since >= w->C ? CCD_WATCH_NOT_JUDGED : CCD_WATCH_WAIT;
}

void ccd_watch_totals(CcdModelWatch *w, double *err, double *naive, int64_t *n)
{
    const size_t per = 2 * (size_t)w->F;
    pthread_mutex_lock(&w->lock);
    memcpy(err, w->total_err, per * sizeof(double));
    memcpy(naive, w->total_naive, per * sizeof(double));
    memcpy(n, w->total_n, per * sizeof(int64_t));
    pthread_mutex_unlock(&w->lock);
}

void ccd_watch_scaled_totals(CcdModelWatch *w, double *err, double *naive, int64_t *n)
{
    const size_t per = 2 * (size_t)w->F;
    pthread_mutex_lock(&w->lock);
    memcpy(err, w->scaled_err, per * sizeof(double));
    memcpy(naive, w->scaled_naive, per * sizeof(double));
    memcpy(n, w->scaled_n, per * sizeof(int64_t));
    pthread_mutex_unlock(&w->lock);
}

void ccd_watch_restart(CcdModelWatch *w, int64_t after)
{
    pthread_mutex_lock(&w->lock);
    w->after = after;
    /* the buckets up to `after` stay, no longer read (the windows start after it); any
     * after it the worker filled meanwhile held forecasts made before the swap */
    for (int i = 0; i < w->C; i++)
        if (w->b[i].p > after)
            w->b[i].p = -1;
    pthread_mutex_unlock(&w->lock);
}
