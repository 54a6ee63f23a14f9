/* publish.c — a cell's published forecast; see publish.h. */
#include "publish.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cells.h"

int ccd_pub_init(CcdPub *p, int F, int HZ)
{
    const size_t f = (size_t)F, hz = (size_t)HZ;
    /* one block: y (F,HZ,2), mu, sigma, obs, exp_mean, exp_sd */
    memset(p, 0, sizeof *p);
    if (!(p->y = calloc(f * hz * 2 + 5 * f, sizeof(float))))
        return -ENOMEM;
    p->mu = p->y + f * hz * 2;
    p->sigma = p->mu + f;
    p->obs = p->sigma + f;
    p->exp_mean = p->obs + f;
    p->exp_sd = p->exp_mean + f;
    return 0;
}

void ccd_pub_free(CcdPub *p)
{
    free(p->y);
    p->y = NULL;
}

static void write_pub(CcdCells *t, CcdCell *c, int64_t step, const float *values,
                      const CcForecast *fc, const float *exp_mean, const float *exp_sd)
{
    const size_t F = (size_t)t->n_features, HZ = (size_t)t->horizon;
    CcdPub *p = &c->pub;
    pthread_mutex_lock(&t->pub_lock);
    p->valid = fc->valid;
    p->step = step;
    p->seq++;
    if (fc->valid) {
        memcpy(p->y, fc->y, F * HZ * 2 * sizeof(float));
        memcpy(p->mu, fc->mu, F * sizeof(float));
        memcpy(p->sigma, fc->sigma, F * sizeof(float));
    }
    memcpy(p->obs, values, F * sizeof(float));
    p->have_expected = exp_mean != NULL;
    if (exp_mean) {
        memcpy(p->exp_mean, exp_mean, F * sizeof(float));
        memcpy(p->exp_sd, exp_sd, F * sizeof(float));
    }
    pthread_mutex_unlock(&t->pub_lock);
}

/* The step and the forecast made at it into the cell's long history: the one-step point
 * for step + 1, the horizon-end point for step + HZ. A history without memory misses the
 * step (counted), nothing else does. */
static void record_history(CcdCells *t, CcdCell *c, int64_t step, const float *obs, int imputed,
                           const CcForecast *fc)
{
    const int F = t->n_features, HZ = t->horizon;
    if (!t->hist_depth)
        return;
    if (!c->hist && cc_history_open(&c->hist, F, t->hist_depth, HZ))
        goto fail;
    if (cc_history_observe(c->hist, step, obs, imputed))
        goto fail;
    if (!fc->valid)
        return;
    for (int kind = 0; kind < 2; kind++) {
        float m[CC_MAX_FEATURES], s[CC_MAX_FEATURES];
        int k = kind ? HZ - 1 : 0;
        for (int f = 0; f < F; f++) {
            double mean, sd;
            cc_forecast_point(fc, f, k, &mean, &sd);
            m[f] = (float)mean;
            s[f] = (float)sd;
        }
        if (cc_history_forecast(c->hist, step + 1 + k, (enum CcHistoryFc)kind, m, s))
            goto fail;
    }
    return;
fail:
    __atomic_fetch_add(&t->hist_failed, 1, __ATOMIC_RELAXED);
}

void ccd_publish_stepped(CcdCells *t, CcdCell *c, int64_t step, const float *values, int imputed,
                         uint64_t present, CcForecast *fc)
{
    const int F = t->n_features, HZ = t->horizon;
    const CcdPub *p = &c->pub;
    float obs[CC_MAX_FEATURES];
    for (int f = 0; f < F; f++)
        obs[f] = !imputed && present >> f & 1 ? values[f] : NAN;
    float em[CC_MAX_FEATURES], es[CC_MAX_FEATURES];
    int have_exp = 0;
    /* The worker is the only writer of pub: reading it here needs no lock. */
    if (p->valid && p->step == step - 1) {
        CcForecast prev = {.valid = 1,
                           .step = p->step,
                           .n_features = F,
                           .horizon = HZ,
                           .y = p->y,
                           .mu = p->mu,
                           .sigma = p->sigma,
                           .sd_scale = cc_model_sd_scale(cc_engine_model(t->engine))};
        for (int f = 0; f < F; f++) {
            double m, sd;
            cc_forecast_point(&prev, f, 0, &m, &sd);
            em[f] = (float)m;
            es[f] = (float)sd;
        }
        have_exp = 1;
    }
    cc_cell_forecast(c->cell, fc);
    record_history(t, c, step, obs, imputed, fc);
    write_pub(t, c, step, obs, fc, have_exp ? em : NULL, es);
}

void ccd_publish(CcdCells *t, CcdCell *c, int64_t step, const float *values, const CcForecast *fc)
{
    write_pub(t, c, step, values, fc, NULL, NULL);
}
