/* model_watch.c — live MASE of the model in service against one-day seasonal naive, pooled
 * over cells, in a window of target steps; see model_watch.h. */
#include "model_watch.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One target step's sums: [kind][f] (kind: CcHistoryFc). */
typedef struct Bucket {
    int64_t p; ///< the target step it holds; -1: empty
    double *err, *naive;
    int32_t *n;
} Bucket;

struct CcdModelWatch {
    pthread_mutex_t lock;
    int W, F;
    int64_t day;    ///< steps in a day
    int64_t after;  ///< forecasts made at or before this origin step are not counted
    int64_t newest; ///< newest target step seen; -1: none
    Bucket *b;
    double *mem;
    /* since the watch opened, [kind * F + f] (ccd_watch_totals) */
    double *total_err, *total_naive;
    int64_t *total_n;
};

int ccd_watch_open(CcdModelWatch **out, int window_steps, int64_t step_s, int F)
{
    *out = NULL;
    if (window_steps < 1 || step_s < 1 || F < 1 || F > CC_MAX_FEATURES)
        return -EINVAL;
    CcdModelWatch *w = calloc(1, sizeof *w);
    const size_t per = 2 * (size_t)F;
    if (!w || !(w->b = calloc((size_t)window_steps, sizeof *w->b)) ||
        !(w->mem = calloc((size_t)window_steps * per * 3, sizeof(double))) ||
        !(w->total_err = calloc(per * 2, sizeof(double))) ||
        !(w->total_n = calloc(per, sizeof(int64_t)))) {
        if (w) {
            free(w->b);
            free(w->mem);
            free(w->total_err);
        }
        free(w);
        return -ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->W = window_steps, w->F = F;
    w->day = 86400 / step_s > 0 ? 86400 / step_s : 1;
    w->after = INT64_MIN;
    w->newest = -1;
    w->total_naive = w->total_err + per;
    for (int i = 0; i < window_steps; i++) {
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

void ccd_watch_step(CcdModelWatch *w, const CcHistory *h, int64_t p)
{
    CcHistoryRow now, back;
    int F, depth, HZ;
    if (!w || !h || p < w->day)
        return;
    cc_history_shape(h, &F, &depth, &HZ);
    if (F != w->F || !cc_history_get(h, p, &now) || !now.observed ||
        !(now.have_fc[0] || now.have_fc[1]) || !cc_history_get(h, p - w->day, &back) ||
        !back.observed)
        return;
    const int64_t origin[2] = {p - 1, p - HZ};
    pthread_mutex_lock(&w->lock);
    if (p > w->newest)
        w->newest = p;
    for (int k = 0; k < 2; k++) /* what was served, whichever model made it */
        for (int f = 0; f < F && now.have_fc[k]; f++) {
            const float y = now.values[f], m = now.mean[k][f], y0 = back.values[f];
            if (!isfinite(y) || !isfinite(m) || !isfinite(y0))
                continue;
            w->total_err[k * F + f] += fabs((double)y - m);
            w->total_naive[k * F + f] += fabs((double)y - y0);
            w->total_n[k * F + f]++;
        }
    if (p > w->newest - w->W) { /* inside the window: a late cell's older steps are not */
        Bucket *b = &w->b[p % w->W];
        if (b->p != p)
            clear_bucket(w, b, p);
        for (int k = 0; k < 2; k++) {
            if (!now.have_fc[k] || origin[k] <= w->after)
                continue;
            for (int f = 0; f < F; f++) {
                const float y = now.values[f], m = now.mean[k][f], y0 = back.values[f];
                if (!isfinite(y) || !isfinite(m) || !isfinite(y0))
                    continue;
                b->err[k * F + f] += fabs((double)y - m);
                b->naive[k * F + f] += fabs((double)y - y0);
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

void ccd_watch_score(CcdModelWatch *w, CcdWatchScore *s)
{
    const int F = w->F;
    double err[2][CC_MAX_FEATURES] = {{0}}, naive[2][CC_MAX_FEATURES] = {{0}};
    int64_t n[2][CC_MAX_FEATURES] = {{0}};
    memset(s, 0, sizeof *s);
    s->F = F;
    s->first_step = s->last_step = -1;
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < w->W; i++) {
        const Bucket *b = &w->b[i];
        if (b->p < 0 || b->p <= w->newest - w->W)
            continue;
        int any = 0;
        for (int k = 0; k < 2; k++)
            for (int f = 0; f < F; f++) {
                err[k][f] += b->err[k * F + f];
                naive[k][f] += b->naive[k * F + f];
                n[k][f] += b->n[k * F + f];
                any |= b->n[k * F + f] > 0;
            }
        if (any) {
            s->first_step = s->first_step < 0 || b->p < s->first_step ? b->p : s->first_step;
            s->last_step = b->p > s->last_step ? b->p : s->last_step;
        }
    }
    pthread_mutex_unlock(&w->lock);
    double sum = 0;
    int kpis = 0;
    for (int f = 0; f < F; f++) {
        double m = 0;
        int kinds = 0;
        for (int k = 0; k < 2; k++) {
            s->forecasts += n[k][f];
            /* a KPI that did not move in a day has no scale: no MASE (the learner's rule) */
            if (n[k][f] > 0 && naive[k][f] > 0) {
                m += err[k][f] / naive[k][f];
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

void ccd_watch_totals(CcdModelWatch *w, double *err, double *naive, int64_t *n)
{
    const size_t per = 2 * (size_t)w->F;
    pthread_mutex_lock(&w->lock);
    memcpy(err, w->total_err, per * sizeof(double));
    memcpy(naive, w->total_naive, per * sizeof(double));
    memcpy(n, w->total_n, per * sizeof(int64_t));
    pthread_mutex_unlock(&w->lock);
}

void ccd_watch_restart(CcdModelWatch *w, int64_t after)
{
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < w->W; i++)
        w->b[i].p = -1;
    w->after = after;
    pthread_mutex_unlock(&w->lock);
}
