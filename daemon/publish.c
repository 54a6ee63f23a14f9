/* publish.c — a cell's published forecast; see publish.h. */
#include "publish.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cells.h"
#include "interval.h"
#include "model_watch.h"

int ccd_pub_init(CcdPub *p, int F, int HZ)
{
    const size_t f = (size_t)F, hz = (size_t)HZ;
    /* one block: y (F,HZ,2), mu, sigma, obs, exp_mean, exp_sd, next_mean, next_sd */
    memset(p, 0, sizeof *p);
    if (!(p->y = calloc(f * hz * 2 + 7 * f, sizeof(float))))
        return -ENOMEM;
    p->mu = p->y + f * hz * 2;
    p->sigma = p->mu + f;
    p->obs = p->sigma + f;
    p->exp_mean = p->obs + f;
    p->exp_sd = p->exp_mean + f;
    p->next_mean = p->exp_sd + f;
    p->next_sd = p->next_mean + f;
    return 0;
}

void ccd_pub_free(CcdPub *p)
{
    free(p->y);
    free(p->scale);
    p->y = NULL;
    p->scale = NULL;
}

/* Horizon step k of every KPI of a valid forecast as (mean, sd). */
static void points(const CcForecast *fc, int k, float *mean, float *sd)
{
    for (int f = 0; f < fc->n_features; f++) {
        double m, s;
        cc_forecast_point(fc, f, k, &m, &s);
        mean[f] = (float)m;
        sd[f] = (float)s;
    }
}

/* have_exp: the pub's own next_* (the forecast one step earlier) become the expectation of
 * `step`, before next_* take the new forecast's one-step point (next_mean, next_sd). scale:
 * the forecast's interval scales (interval.h), NULL none. */
static void write_pub(CcdCells *t, CcdCell *c, int64_t step, const float *values,
                      const CcForecast *fc, int have_exp, const float *next_mean,
                      const float *next_sd, const float *scale)
{
    const size_t F = (size_t)t->n_features, HZ = (size_t)t->horizon;
    CcdPub *p = &c->pub;
    pthread_mutex_lock(&t->pub_lock);
    p->valid = fc->valid;
    p->step = step;
    p->seq++;
    p->have_expected = have_exp;
    if (have_exp) {
        memcpy(p->exp_mean, p->next_mean, F * sizeof(float));
        memcpy(p->exp_sd, p->next_sd, F * sizeof(float));
    }
    if (fc->valid) {
        memcpy(p->y, fc->y, F * HZ * 2 * sizeof(float));
        memcpy(p->mu, fc->mu, F * sizeof(float));
        memcpy(p->sigma, fc->sigma, F * sizeof(float));
        memcpy(p->next_mean, next_mean, F * sizeof(float));
        memcpy(p->next_sd, next_sd, F * sizeof(float));
        if (scale && p->scale)
            memcpy(p->scale, scale, F * HZ * sizeof(float));
    }
    memcpy(p->obs, values, F * sizeof(float));
    pthread_mutex_unlock(&t->pub_lock);
}

/* The step and the forecast made at it into the cell's long history: the one-step point
 * (m1, s1: computed once by the caller) for step + 1, the horizon-end point for step + HZ,
 * with the sd of the band served (times the interval scale, when given: interval.h).
 * A history without memory misses the step (counted), nothing else does. */
static void record_history(CcdCells *t, CcdCell *c, int64_t step, const float *obs, int imputed,
                           const CcForecast *fc, const float *m1, const float *s1,
                           const float *scale)
{
    const int F = t->n_features, HZ = t->horizon;
    float m[CC_MAX_FEATURES], s[CC_MAX_FEATURES], s1_served[CC_MAX_FEATURES];
    if (!t->hist_depth)
        return;
    if (!c->hist && cc_history_open(&c->hist, F, t->hist_depth, HZ))
        goto fail;
    if (cc_history_observe(c->hist, step, obs, imputed))
        goto fail;
    /* the forecasts the history holds for this step, scored for the rollback watch, weighed
     * by the cell's own scale (created here; without memory the cell does not weigh until
     * a later step gets it) */
    CcdModelWatch *watch = __atomic_load_n(&t->watch, __ATOMIC_ACQUIRE);
    if (watch && !c->watch_scale)
        (void)ccd_watch_scale_open(&c->watch_scale, F);
    ccd_watch_step(watch, c->hist, c->watch_scale, step);
    if (!fc->valid)
        return;
    for (int f = 0; scale && f < F; f++)
        s1_served[f] = s1[f] * scale[(size_t)f * HZ];
    if (cc_history_forecast(c->hist, step + 1, CC_HISTORY_ONE_STEP, m1, scale ? s1_served : s1))
        goto fail;
    points(fc, HZ - 1, m, s);
    for (int f = 0; scale && f < F; f++)
        s[f] *= scale[(size_t)f * HZ + HZ - 1];
    if (cc_history_forecast(c->hist, step + HZ, CC_HISTORY_HORIZON_END, m, s))
        goto fail;
    return;
fail:
    __atomic_fetch_add(&t->hist_failed, 1, __ATOMIC_RELAXED);
}

void ccd_publish_stepped(CcdCells *t, CcdCell *c, int64_t step, const float *values, int imputed,
                         uint64_t present, int held, CcForecast *fc)
{
    const int F = t->n_features;
    float obs[CC_MAX_FEATURES], m1[CC_MAX_FEATURES], s1[CC_MAX_FEATURES];
    float truth[CC_MAX_FEATURES]; /* what the intervals are calibrated on */
    for (int f = 0; f < F; f++) {
        obs[f] = !imputed && present >> f & 1 ? values[f] : NAN;
        /* an outage's zeros were kept from the model: they are not a miss of its intervals
         * either (else every outage would widen the cell's intervals for a day after) */
        truth[f] = held ? NAN : obs[f];
    }
    /* The worker is the only writer of pub: reading it here needs no lock. */
    int have_exp = c->pub.valid && c->pub.step == step - 1;
    cc_cell_forecast(c->cell, fc);
    if (fc->valid)
        points(fc, 0, m1, s1);
    const float *scale = ccd_interval_step(t, c, step, truth, fc);
    record_history(t, c, step, obs, imputed, fc, m1, s1, scale);
    write_pub(t, c, step, obs, fc, have_exp, m1, s1, scale);
}

void ccd_publish(CcdCells *t, CcdCell *c, int64_t step, const float *values, const CcForecast *fc)
{
    float m1[CC_MAX_FEATURES], s1[CC_MAX_FEATURES];
    if (fc->valid) /* the expectation of the next step stepped */
        points(fc, 0, m1, s1);
    write_pub(t, c, step, values, fc, 0, m1, s1, NULL);
}
