/* interval.c — online-calibrated intervals per cell (forecast.interval_adapt); see
 * interval.h. */
#include "interval.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cc_common.h"
#include "cc_online_calib.h"
#include "cells.h"

size_t ccd_interval_cell_bytes(int F, int HZ)
{
    return cc_online_calib_bytes(F, HZ) + (size_t)F * (size_t)HZ * sizeof(float);
}

/* The cell's calibration at scale 1, and its published scales (all 1 until published). */
static int open_cell(CcdCells *t, CcdCell *c)
{
    const size_t n = (size_t)t->n_features * (size_t)t->horizon;
    CcOnlineCalibSettings s;
    cc_online_calib_default_settings(&s);
    s.rate = t->s.interval_adapt_rate;
    float *scale = malloc(n * sizeof *scale);
    int rc = scale ? cc_online_calib_open(&c->calib, &s, t->n_features, t->horizon) : -ENOMEM;
    if (rc) {
        free(scale);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        scale[i] = 1;
    pthread_mutex_lock(&t->pub_lock);
    c->pub.scale = scale;
    pthread_mutex_unlock(&t->pub_lock);
    return 0;
}

/* The last observe's scored and missed forecasts, in total and by KPI. */
static void count_scored(CcdCells *t, const CcOnlineCalib *calib)
{
    uint64_t scored = 0, missed = 0;
    for (int f = 0; f < t->n_features && f < CC_MAX_FEATURES; f++) {
        int s, m;
        cc_online_calib_last_counts(calib, f, &s, &m);
        if (!s)
            continue;
        __atomic_fetch_add(&t->interval_kpi_scored[f], (uint64_t)s, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->interval_kpi_missed[f], (uint64_t)m, __ATOMIC_RELAXED);
        scored += (uint64_t)s;
        missed += (uint64_t)m;
    }
    __atomic_fetch_add(&t->interval_scored, scored, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->interval_missed, missed, __ATOMIC_RELAXED);
}

const float *ccd_interval_step(CcdCells *t, CcdCell *c, int64_t step, const float *obs,
                               const CcForecast *fc)
{
    const int F = t->n_features, HZ = t->horizon;
    const size_t n = (size_t)F * (size_t)HZ;
    if (!t->s.interval_adapt)
        return NULL;
    /* out of memory: the cell serves scale 1 and tries again at its next forecast */
    if (!c->calib && (!fc->valid || open_cell(t, c)))
        return NULL;
    if (!t->interval_buf && !(t->interval_buf = malloc(3 * n * sizeof(float))))
        return NULL;
    float *mean = t->interval_buf, *sd = mean + n, *scale = sd + n;
    if (cc_online_calib_observe(c->calib, step, obs) > 0) /* the worker adds, /metrics reads */
        count_scored(t, c->calib);
    if (fc->valid) {
        cc_forecast_points(fc, mean, sd);
        /* -ERANGE (a step not after the last) cannot happen: a cell's steps only grow */
        cc_online_calib_push(c->calib, step, mean, sd);
    }
    cc_online_calib_scales(c->calib, scale);
    return scale;
}

void ccd_interval_drop(CcdCells *t, CcdCell *c)
{
    cc_online_calib_close(&c->calib);
    pthread_mutex_lock(&t->pub_lock);
    free(c->pub.scale);
    c->pub.scale = NULL;
    pthread_mutex_unlock(&t->pub_lock);
}

void ccd_interval_apply(CcdCells *t, const CcdCellsSettings *old)
{
    for (CcdCell *c = t->lru_head; c; c = c->lru_next)
        if (!t->s.interval_adapt)
            ccd_interval_drop(t, c);
        else if (c->calib && t->s.interval_adapt_rate != old->interval_adapt_rate)
            cc_online_calib_set_rate(c->calib, t->s.interval_adapt_rate); /* in [0, 1]: config */
}

size_t ccd_interval_save_size(const CcdCells *t, const CcdCell *c)
{
    return c->calib ? cc_online_calib_save_size(t->n_features, t->horizon) : 0;
}

size_t ccd_interval_save(const CcdCells *t, const CcdCell *c, uint8_t *buf, size_t n)
{
    (void)t;
    return c->calib ? cc_online_calib_save(c->calib, buf, n) : 0;
}

int ccd_interval_restore(CcdCells *t, CcdCell *c, const uint8_t *buf, size_t n, char *err,
                         size_t errlen)
{
    if (!t->s.interval_adapt)
        return 0;
    ccd_interval_drop(t, c);
    int rc = open_cell(t, c);
    if (rc)
        return cc_errf(err, errlen, rc, "interval scales: out of memory");
    if ((rc = cc_online_calib_load(c->calib, buf, n, err, errlen))) {
        ccd_interval_drop(t, c);
        return rc;
    }
    pthread_mutex_lock(&t->pub_lock);
    cc_online_calib_scales(c->calib, c->pub.scale);
    pthread_mutex_unlock(&t->pub_lock);
    return 0;
}

void ccd_interval_restored(CcdCells *t, CcdCell *c, int64_t step, const CcForecast *fc)
{
    const size_t n = (size_t)t->n_features * (size_t)t->horizon;
    if (!t->s.interval_adapt || !fc->valid || (!c->calib && open_cell(t, c)))
        return;
    if (!t->interval_buf && !(t->interval_buf = malloc(3 * n * sizeof(float))))
        return;
    float *mean = t->interval_buf, *sd = mean + n;
    cc_forecast_points(fc, mean, sd);
    cc_online_calib_push(c->calib, step, mean, sd); /* the ring is empty: cannot be -ERANGE */
}
