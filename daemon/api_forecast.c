/* api_forecast.c — GET /v1/cells/{id}/forecast and the forecast object of a cell that the
 * batch read (GET /v1/forecast, api_series.c) composes: validation of horizon, level and
 * kpis, and the rendering of the forecast with its interval band clamped to the KPI bounds.
 * The replies are cached whole by the chokepoint's reply cache (http_cache.h), like every
 * cached route's. Loop thread only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_forecast.h"
#include "api_util.h"
#include "cells.h"
#include "config.h"

/* The forecast object of cell c into out, after sep, with a newline after it when sep is
 * NULL. 0, 1 when the cell has no forecast yet (nothing written), or -ENOMEM. Rendered at
 * each call: the replies it goes into are cached whole (http_cache.h), per request and
 * published step. */
int ccd_forecast_into(CcdReq *r, CcdCell *c, long long horizon, double level, uint64_t mask,
                      const char *sep, struct evbuffer *out)
{
    Ccd *d = r->d;
    const CcHparams *hp = &d->model->hp;
    const int F = hp->n_features, HZ = hp->horizon;
    double blo[CC_MAX_FEATURES], bhi[CC_MAX_FEATURES];
    ccd_kpi_bounds(d, blo, bhi);
    const int adapt = d->cfg.forecast_interval_adapt;
    float *y = ccd_scratch_floats((size_t)F * (size_t)HZ * 3 + 2 * (size_t)F);
    if (!y)
        return -ENOMEM;
    float *mu = y + (size_t)F * HZ * 2, *sigma = mu + F, *scale = sigma + F;
    int valid, have_scale = 0;
    int64_t t;
    pthread_mutex_lock(&d->cells->pub_lock);
    valid = c->pub.valid;
    t = c->pub.step;
    if (valid) {
        memcpy(y, c->pub.y, (size_t)F * HZ * 2 * sizeof(float));
        memcpy(mu, c->pub.mu, (size_t)F * sizeof(float));
        memcpy(sigma, c->pub.sigma, (size_t)F * sizeof(float));
        if ((have_scale = adapt && c->pub.scale))
            memcpy(scale, c->pub.scale, (size_t)F * HZ * sizeof(float));
    }
    pthread_mutex_unlock(&d->cells->pub_lock);
    if (!valid)
        return 1;
    CcForecast fc = {.valid = 1,
                     .step = t,
                     .n_features = F,
                     .horizon = HZ,
                     .y = y,
                     .mu = mu,
                     .sigma = sigma,
                     .sd_scale =
                         cc_model_sd_scale(d->model)}; /* tx/3 calibration of the served sd */
    const double z = ccd_level_z(level);
    const int64_t S = hp->step_seconds;
    /* built by hand: this is the hot route (dashboards poll it), so no jansson tree */
    static CcdSb sb;
    sb.n = 0;
    sb.oom = 0;
    ccd_sb_str(&sb, "{\"cell\":");
    ccd_sb_jstr(&sb, c->id);
    ccd_sb_str(&sb, ",\"model\":");
    ccd_sb_jstr(&sb, d->model_name);
    ccd_sb_str(&sb, ",\"step_seconds\":");
    ccd_sb_int(&sb, S);
    ccd_sb_str(&sb, ",\"observed_step\":");
    ccd_sb_int(&sb, t);
    ccd_sb_str(&sb, ",\"observed_ts\":");
    ccd_sb_ts(&sb, t * S);
    ccd_sb_str(&sb, ",\"level\":");
    ccd_sb_num(&sb, level);
    ccd_sb_str(&sb, ",\"z\":");
    ccd_sb_num(&sb, z);
    ccd_sb_str(&sb, ",\"horizon\":");
    ccd_sb_int(&sb, horizon);
    ccd_sb_str(&sb, ",\"kpis\":[");
    int first = 1;
    for (int f = 0; f < F; f++)
        if (mask >> f & 1) {
            if (!first)
                ccd_sb_add(&sb, ",", 1);
            ccd_sb_jstr(&sb, hp->features[f]);
            first = 0;
        }
    ccd_sb_str(&sb, "],\"forecast\":[");
    for (int k = 0; k < horizon; k++) {
        ccd_sb_str(&sb, k ? ",{\"step\":" : "{\"step\":");
        ccd_sb_int(&sb, t + 1 + k);
        ccd_sb_str(&sb, ",\"ts\":");
        ccd_sb_ts(&sb, (t + 1 + k) * S);
        ccd_sb_str(&sb, ",\"values\":{");
        first = 1;
        for (int f = 0; f < F; f++) {
            if (!(mask >> f & 1))
                continue;
            double mean, sd;
            cc_forecast_point(&fc, f, k, &mean, &sd);
            /* sd stays the model's (cellcast forward compares with it); the band is the
             * served one (interval.h) */
            const double w = z * sd * (have_scale ? scale[(size_t)f * HZ + k] : 1.0);
            if (!first)
                ccd_sb_add(&sb, ",", 1);
            ccd_sb_jstr(&sb, hp->features[f]);
            ccd_sb_str(&sb, ":{\"mean\":");
            ccd_sb_num(&sb, fmin(fmax(mean, blo[f]), bhi[f]));
            ccd_sb_str(&sb, ",\"lower\":");
            ccd_sb_num(&sb, fmin(fmax(mean - w, blo[f]), bhi[f]));
            ccd_sb_str(&sb, ",\"upper\":");
            ccd_sb_num(&sb, fmin(fmax(mean + w, blo[f]), bhi[f]));
            ccd_sb_str(&sb, ",\"sd\":");
            ccd_sb_num(&sb, sd);
            if (adapt) {
                ccd_sb_str(&sb, ",\"interval_scale\":");
                ccd_sb_num(&sb, have_scale ? scale[(size_t)f * HZ + k] : 1.0);
            }
            ccd_sb_add(&sb, "}", 1);
            first = 0;
        }
        ccd_sb_add(&sb, "}}", 2);
    }
    ccd_sb_add(&sb, sep ? "]}" : "]}\n", sep ? 2 : 3);
    if (sb.oom)
        return -ENOMEM;
    if (sep)
        evbuffer_add(out, sep, strlen(sep));
    evbuffer_add(out, sb.p, sb.n);
    return 0;
}

int ccd_h_forecast(CcdReq *r)
{
    Ccd *d = r->d;
    const CcHparams *hp = &d->model->hp;
    const int HZ = hp->horizon;
    CcdCell *c;
    int rc = ccd_find_cell(r, &c);
    if (rc < 0)
        return -rc;
    long long horizon = HZ;
    if ((rc = ccd_query_int(r, "horizon", &horizon)) == -2)
        return ccd_problem(r, 400, "bad-parameter", "horizon must be an integer");
    if (horizon < 1 || horizon > HZ)
        return ccd_problem(r, 422, "bad-parameter", "horizon must be in [1, %d], got %lld", HZ,
                           horizon);
    double level;
    if ((rc = ccd_query_level(r, &level)))
        return rc;
    uint64_t mask;
    if ((rc = ccd_query_kpis(r, &mask)))
        return rc;
    /* dashboards poll it much more often than a cell steps, and rendering the full reply
     * (~16 KB, ~800 numbers) costs ~10x serving it (gzip ~8x more): the reply is cached
     * whole, per request and published forecast (a reload moves the seed: the level, the
     * model, the KPI bounds and forecast.interval_adapt may have changed) */
    if ((rc = ccd_reply_cached(r, ccd_cell_version(d, c, ccd_version_seed(d)))))
        return rc;
    rc = ccd_forecast_into(r, c, horizon, level, mask, NULL, r->out);
    if (rc < 0)
        return ccd_problem(r, 500, "internal", "out of memory");
    if (rc == 1) {
        r->retry_after = 5;
        return ccd_problem(r, 503, "no-forecast-yet",
                           "cell '%s' has no forecast yet: it needs %d consecutive steps (it has "
                           "%llu)",
                           c->id, hp->patch_len, (unsigned long long)c->n_steps);
    }
    return ccd_text(r, 200, "application/json");
}
