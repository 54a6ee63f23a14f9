/*
 * cc_anomaly_settings.c — the anomaly settings: defaults, validation, and setting them by
 * name from text (the table of deployment-wide keys and the per-KPI keys), for config
 * files and the CLI's --set.
 */
#include "cc_anomaly.h"
#include "cc_anomaly_likelihood.h"
#include "cc_anomaly_shape.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void cc_anomaly_default_settings(CcAnomalySettings *s)
{
    memset(s, 0, sizeof *s);
    s->n_features = 8;
    s->step_seconds = 3600;
    s->warn_z = 10.0;
    s->crit_z = 15.0;
    s->warmup_steps = 64;
    s->min_kpis = 1;
    s->window_n = 3;
    s->warn_k = 1;
    s->crit_k = 1;
    s->resolve_m = 6;
    s->cooldown_steps = 20;
    s->cooldown_crit = 1;
    s->sd_floor_rel = 0.01;
    s->sd_floor_scale = 0.05;
    s->interval_z = 1.2815516;
    s->stuck_steps = 12;
    s->stuck_min_change_rate = 0.5;
    s->stuck_run_factor = 2.0;
    s->stuck_memory_steps = 2000;
    s->change_rate_steps = 200;
    s->zero_steps = 0;
    s->zero_normal_rate = 0.1;
    s->missing_after_s = 0;
    s->kpi_missing_steps = 96;
    s->dq_resolve_steps = 3;
    s->dq_grace_steps = 16;
    s->lag_steps = 0;
    s->cusum_k = 3.0;
    s->cusum_h = 6.0;
    s->tail_q = 0.999;
    s->tail_steps = 2000;
    s->bar_p = 0;
    s->bar_floor = 4.0;
    s->lag_echo = -1;
    s->sustained_live = 2;
    s->window_s = 0;
    s->lik_over = 0;
    s->lik_short_n = 10;
    s->lik_long_steps = 2000;
    s->novelty_tol = 0.05;
    s->novelty_min_s = 172800;
    s->shape_w = 0;
    s->shape_ds = 3;
    s->shape_rho = 0.75;
    s->shape_cats = 32;
    s->shape_warm = 100;
    s->shape_quiet = 256;
    s->profile_k = 1.75;
    s->profile_h = 10.0;
    s->profile_fa_weeks = 4;
    s->profile_unit_s = 300;
    s->profile_bin_s = 3600;
    s->profile_days = 4.0;
    s->profile_min_days = 2;
    s->profile_utc_offset_s = 0;
    s->feedback_half_life_s = 7 * 86400;
    for (int f = 0; f < CC_MAX_FEATURES; f++)
        s->kpi[f].enabled = 1;
}

/* The per-KPI overrides of KPI f. 0 or -EINVAL with a message. */
static int validate_kpi(const CcAnomalySettings *s, int f, char *err, size_t errlen)
{
    const CcAnomalyKpi *k = &s->kpi[f];
    double w = k->warn_z > 0 ? k->warn_z : s->warn_z;
    double c = k->crit_z > 0 ? k->crit_z : s->crit_z;
    if (k->warn_z < 0 || k->crit_z < 0 || c < w || !isfinite(c))
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: kpi %d: thresholds must be ≥ 0 and warn (%g) ≤ crit (%g)", f, w,
                       c);
    if (k->direction < -1 || k->direction > 1)
        return cc_errf(err, errlen, -EINVAL, "anomaly: kpi %d: direction must be -1, 0, 1", f);
    if (!(k->sd_floor >= 0) || isnan(k->min) || isnan(k->max))
        return cc_errf(err, errlen, -EINVAL, "anomaly: kpi %d: bad sd_floor or bounds", f);
    if (!(k->lik_over >= 0 && k->lik_over <= 1) ||
        !(k->novelty_tol >= 0 && isfinite(k->novelty_tol)))
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: kpi %d: lik_over must be in [0, 1] and novelty_tol ≥ 0", f);
    if (k->shape < -1 || k->shape > 0)
        return cc_errf(err, errlen, -EINVAL, "anomaly: kpi %d: shape must be 0 (auto) or -1", f);
    if (k->zero_normal < -1 || k->zero_normal > 1)
        return cc_errf(err, errlen, -EINVAL, "anomaly: kpi %d: zero_normal must be -1, 0, 1", f);
    if (k->stuck_steps < -1 || k->stuck_steps == 1)
        return cc_errf(err, errlen, -EINVAL, "anomaly: kpi %d: stuck_steps must be -1, 0 or ≥ 2",
                       f);
    return 0;
}

#define AK(field, type, lo, hi, doc)                                                               \
    {                                                                                              \
#field, type, offsetof(CcAnomalySettings, field), lo, hi, doc                              \
    }
static const CcAnomalyKey anomaly_keys[] = {
    AK(warn_z, CC_AKEY_DOUBLE, 0.1, 1e6, "warning threshold on |z| (default 10)"),
    AK(crit_z, CC_AKEY_DOUBLE, 0.1, 1e6, "critical threshold on |z| (default 15)"),
    AK(min_kpis, CC_AKEY_INT, 1, CC_MAX_FEATURES,
       "KPIs over threshold for a step to be over (default 1)"),
    AK(window_n, CC_AKEY_INT, 1, CC_ANOMALY_MAX_WINDOW,
       "n of k-of-n: steps in the window (default 3)"),
    AK(warn_k, CC_AKEY_INT, 1, CC_ANOMALY_MAX_WINDOW,
       "over steps in the window to fire (default 1)"),
    AK(crit_k, CC_AKEY_INT, 1, CC_ANOMALY_MAX_WINDOW,
       "critical steps in the window to fire critical (default 1)"),
    AK(resolve_m, CC_AKEY_INT, 1, 1000000, "consecutive clear steps to resolve (default 6)"),
    AK(cooldown_steps, CC_AKEY_INT, 0, 1000000,
       "steps after a resolution before a new anomaly alert (default 20)"),
    AK(cooldown_crit, CC_AKEY_INT, 0, 1,
       "1: a critical window fires through the cooldown, which holds back warnings only "
       "(default 1)"),
    AK(sd_floor_rel, CC_AKEY_DOUBLE, 0, 1e6, "sd floor relative to |forecast mean| (default 0.01)"),
    AK(sd_floor_scale, CC_AKEY_DOUBLE, 0, 1e6,
       "sd floor relative to the KPI's normalisation scale (default 0.05)"),
    AK(interval_z, CC_AKEY_DOUBLE, 0.01, 100,
       "half-width in sd of the interval in alerts (default 1.2815516 = 80%)"),
    AK(warmup_steps, CC_AKEY_INT, 0, 100000000,
       "steps of a cell's sequence before its forecasts are scored (default 64)"),
    AK(lag_steps, CC_AKEY_INT, -1, CC_ANOMALY_MAX_LAG,
       "also score against the forecast made this many steps earlier; -1 = the model's horizon, 0 "
       "= off (default 0)"),
    AK(cusum_k, CC_AKEY_DOUBLE, 0, 1e6,
       "CUSUM reference value in |z| for sustained deviations (default 3)"),
    AK(cusum_h, CC_AKEY_DOUBLE, 0, 1e6,
       "CUSUM threshold: a KPI is over while its sum is at least this; 0 = off (default 6)"),
    AK(tail_q, CC_AKEY_DOUBLE, 0, 0.9999,
       "tail calibration: each KPI's own tail_q quantile of |z| is scaled to the Gaussian one "
       "(never more sensitive); 0 = off (default 0.999)"),
    AK(tail_steps, CC_AKEY_INT, 10, 100000000,
       "adaptation time of the tail calibration in steps (default 2000)"),
    AK(bar_p, CC_AKEY_DOUBLE, 0, 0.01,
       "each KPI's own bar: the |z| its calibrated residuals pass with this probability per "
       "step (a Pareto tail fitted to its own), within [bar_floor, warn_z]: warn_z is then the "
       "bar of the most bursty KPIs; a KPI's own warn_z fixes its bar; 0 = warn_z for every "
       "KPI (default 0)"),
    AK(bar_floor, CC_AKEY_DOUBLE, 0.1, 1e6, "the lowest bar bar_p may set (default 4)"),
    AK(lag_echo, CC_AKEY_INT, -1, 256,
       "the lagged forecast is not used for a step whose time one day earlier deviated within "
       "this many steps (the model's echo of yesterday); -1 = the lag; 0 = off (default -1)"),
    AK(window_s, CC_AKEY_INT64, 0, 604800,
       "window rule: its longest scale in seconds (also /2 and /6): the mean of each KPI's z "
       "over each, scored against its own tail (needs tail_q); 0 = off (default 0)"),
    AK(window_z, CC_AKEY_DOUBLE, 0, 1e6, "window rule's threshold; 0 = warn_z (default 0)"),
    AK(lik_over, CC_AKEY_DOUBLE, 0, 1,
       "anomaly likelihood: a KPI is over while the log-scale likelihood of its recent "
       "residuals is at least this (0.5: tail 1e-5; NAB: 0.7); 0 = off (default 0)"),
    AK(lik_short_n, CC_AKEY_INT, 1, CC_LIK_SHORT_MAX,
       "anomaly likelihood: steps of the short average of ln(1 + |z|) (default 10)"),
    AK(lik_long_steps, CC_AKEY_INT, 1, 100000000,
       "anomaly likelihood: time constant in steps of the short average's long-run mean and "
       "variance (default 2000)"),
    AK(novelty_tol, CC_AKEY_DOUBLE, 0, 1e6,
       "novelty: a KPI is over at a value beyond the range of the values seen by more than this "
       "times the range (a false-alert budget raises it with warn_z); 0 = off (default 0.05)"),
    AK(novelty_min_s, CC_AKEY_INT64, 0, 31536000,
       "novelty: seconds of values a KPI's range must hold before a value past it is novel, and "
       "at least 100 values: a new cell learns two daily cycles first (NAB: 0) (default "
       "172800)"),
    AK(shape_w, CC_AKEY_INT, 0, CC_SHAPE_MAX_W,
       "shape novelty: a KPI is over when its last shape_w points form a window unlike every "
       "earlier one (a shape change inside the usual range; NAB: 8); 0 = off (default 0)"),
    AK(shape_ds, CC_AKEY_INT, 1, 100000,
       "shape novelty: observed steps averaged into a point (default 3)"),
    AK(shape_rho, CC_AKEY_DOUBLE, 0.01, 0.999,
       "shape novelty: vigilance: a window joins a shape whose box grown to include it spans "
       "at most (1 - shape_rho) x shape_w ranges (default 0.75)"),
    AK(shape_cats, CC_AKEY_INT, 1, CC_SHAPE_MAX_CATS,
       "shape novelty: shapes kept per KPI, the least recently seen makes room (default 32)"),
    AK(shape_warm, CC_AKEY_INT, 0, 100000000,
       "shape novelty: windows seen before a new shape is reported (default 100)"),
    AK(shape_quiet, CC_AKEY_INT, 0, 100000000,
       "shape novelty: windows since the KPI's previous new shape for one to be reported: a KPI "
       "that keeps making new ones is noisy (default 256)"),
    AK(sustained_live, CC_AKEY_INT, 0, 2,
       "1: the seasonal-profile rule holds a KPI over only while the step's own profile "
       "deviation is past profile_k in the direction of its sum; 2: every rule (CUSUM, "
       "likelihood, window) only while the step itself deviates; 0: while a sum is over "
       "(default 2)"),
    AK(profile_k, CC_AKEY_DOUBLE, 0, 1e6,
       "seasonal-profile CUSUM reference value in |z| (default 1.75)"),
    AK(profile_h, CC_AKEY_DOUBLE, 0, 1e6,
       "seasonal-profile CUSUM threshold; 0 = no profile (default 10)"),
    AK(profile_fa_weeks, CC_AKEY_DOUBLE, 0, 10000,
       "each KPI's profile CUSUM threshold rises from profile_h to where its own excursions "
       "cross once per this many weeks; 0 = off (default 4)"),
    AK(profile_unit_s, CC_AKEY_INT64, 1, 86400,
       "steps shorter than this count for that fraction of a step in the profile CUSUM (default "
       "300)"),
    AK(profile_bin_s, CC_AKEY_INT64, 300, 86400,
       "seasonal-profile bin width in seconds, divides 86400 (default 3600)"),
    AK(profile_days, CC_AKEY_DOUBLE, 0.5, 1000,
       "time constant of each profile bin in days of its type (default 4)"),
    AK(profile_min_days, CC_AKEY_INT, 1, 1000,
       "days of data a profile bin needs before it is scored (default 2)"),
    AK(profile_utc_offset_s, CC_AKEY_INT64, -50400, 50400,
       "cells' local time minus UTC in seconds, for the profile's time of day and weekends "
       "(default 0)"),
    AK(stuck_steps, CC_AKEY_INT, 2, 1000000,
       "equal consecutive values of a varying KPI for a stuck alert (default 12)"),
    AK(stuck_min_change_rate, CC_AKEY_DOUBLE, 0, 1,
       "change rate a KPI needs to count as varying (default 0.5)"),
    AK(change_rate_steps, CC_AKEY_INT, 1, 1000000,
       "time constant of the change rate in steps (default 200)"),
    AK(stuck_run_factor, CC_AKEY_DOUBLE, 0, 1000,
       "a stuck run must also be this many times the longest recent normal run (default 2)"),
    AK(stuck_memory_steps, CC_AKEY_INT, 1, 100000000,
       "time constant of the longest recent run, steps (default 2000)"),
    AK(zero_steps, CC_AKEY_INT, 0, 1000000,
       "steps of all KPIs exactly 0 for an all_zero alert; 0 = the steps of 12 minutes, at "
       "least 2 (default 0)"),
    AK(zero_normal_rate, CC_AKEY_DOUBLE, 0, 1,
       "a KPI exactly 0 in at least this share of its recent steps is one where zero is normal "
       "(no all_zero alert for it); 0 = never learnt (default 0.1)"),
    AK(missing_after_s, CC_AKEY_INT64, 0, 1e12,
       "seconds without a step for a missing alert; 0 = 3 steps (default 0)"),
    AK(kpi_missing_steps, CC_AKEY_INT, 0, 1000000,
       "steps in a row a KPI is absent (left out or null) from records that give other KPIs "
       "for a missing alert naming that KPI; 0 = off (default 96)"),
    AK(dq_resolve_steps, CC_AKEY_INT, 1, 1000000,
       "clear steps to resolve a data-quality alert (default 3)"),
    AK(dq_grace_steps, CC_AKEY_INT, 0, 1000000,
       "steps a KPI stays unscored after its data-quality alert (default 16)"),
    AK(feedback_half_life_s, CC_AKEY_INT64, 1, 1e10,
       "half-life in data time of a false-alarm verdict's raise of a KPI's z thresholds (x1.25 "
       "a verdict, at most x2; POST /v1/alerts/{id}/feedback) (default 604800: 7 days)"),
};
#undef AK

/* Every key of the table in its [lo, hi] (NaN is not): one check for the bounds the keys
 * already state, so that setting by name and validation cannot disagree. 0 or -EINVAL. */
static int validate_ranges(const CcAnomalySettings *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof anomaly_keys / sizeof anomaly_keys[0]; i++) {
        const CcAnomalyKey *k = &anomaly_keys[i];
        const char *p = (const char *)s + k->offset;
        double v = k->type == CC_AKEY_DOUBLE  ? *(const double *)p
                   : k->type == CC_AKEY_INT64 ? (double)*(const int64_t *)p
                                              : (double)*(const int *)p;
        if (!(v >= k->lo && v <= k->hi))
            return cc_errf(err, errlen, -EINVAL, "anomaly: %s %g not in [%g, %g]", k->name, v,
                           k->lo, k->hi);
    }
    return 0;
}

int cc_anomaly_validate(const CcAnomalySettings *s, char *err, size_t errlen)
{
    if (!s)
        return cc_errf(err, errlen, -EINVAL, "anomaly: no settings");
    if (s->n_features < 1 || s->n_features > CC_MAX_FEATURES)
        return cc_errf(err, errlen, -EINVAL, "anomaly: n_features %d not in 1..%d", s->n_features,
                       CC_MAX_FEATURES);
    if (s->step_seconds < 1)
        return cc_errf(err, errlen, -EINVAL, "anomaly: step_seconds must be ≥ 1");
    int rc = validate_ranges(s, err, errlen);
    if (rc)
        return rc;
    if (!(s->crit_z >= s->warn_z))
        return cc_errf(err, errlen, -EINVAL, "anomaly: need warn_z (%g) ≤ crit_z (%g)", s->warn_z,
                       s->crit_z);
    if (s->bar_p > 0 && s->bar_floor > s->warn_z)
        return cc_errf(err, errlen, -EINVAL, "anomaly: need bar_floor (%g) ≤ warn_z (%g)",
                       s->bar_floor, s->warn_z);
    if (s->warn_k > s->window_n || s->crit_k > s->window_n)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: warn_k (%d) and crit_k (%d) must be in 1..window_n (%d)",
                       s->warn_k, s->crit_k, s->window_n);
    if (s->min_kpis > s->n_features)
        return cc_errf(err, errlen, -EINVAL, "anomaly: min_kpis %d not in 1..n_features",
                       s->min_kpis);
    if (s->shape_w == 1)
        return cc_errf(err, errlen, -EINVAL, "anomaly: shape_w must be 0 (off) or 2..%d",
                       CC_SHAPE_MAX_W);
    if (86400 % s->profile_bin_s != 0)
        return cc_errf(err, errlen, -EINVAL, "anomaly: profile_bin_s %lld must divide 86400",
                       (long long)s->profile_bin_s);
    for (int f = 0; f < s->n_features; f++) {
        rc = validate_kpi(s, f, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

const CcAnomalyKey *cc_anomaly_keys(int *n)
{
    *n = (int)(sizeof anomaly_keys / sizeof anomaly_keys[0]);
    return anomaly_keys;
}

static int parse_double(const char *v, double *out)
{
    char *e;
    errno = 0;
    *out = strtod(v, &e);
    return e != v && !*e && !errno && isfinite(*out) ? 0 : -EINVAL;
}

/* "true"/"1"/"yes" → 1, "false"/"0"/"no" → 0, else -1. */
static int parse_bool(const char *v)
{
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
        return 1;
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
        return 0;
    return -1;
}

/* "both"/"up"/"down" → 0/+1/-1, else -2. */
static int parse_direction(const char *v)
{
    return !strcmp(v, "both") ? 0 : !strcmp(v, "up") ? 1 : !strcmp(v, "down") ? -1 : -2;
}

/* field (the key's last part) of KPI k from text; key is the whole key, for messages. */
static int kpi_field_set(CcAnomalyKpi *k, const char *key, const char *field, const char *value,
                         char *err, size_t errlen)
{
    double v;
    if (!strcmp(field, "enabled")) {
        int b = parse_bool(value);
        if (b < 0)
            return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not true or false", key,
                           value);
        k->enabled = b;
        return 0;
    }
    if (!strcmp(field, "zero_normal")) {
        int b = !strcmp(value, "auto") ? 2 : parse_bool(value);
        if (b < 0)
            return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not auto, true or false", key,
                           value);
        k->zero_normal = b == 2 ? 0 : b ? 1 : -1;
        return 0;
    }
    if (!strcmp(field, "shape")) {
        if (strcmp(value, "auto") && parse_bool(value) != 0)
            return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not auto or false", key,
                           value);
        k->shape = strcmp(value, "auto") ? -1 : 0;
        return 0;
    }
    if (!strcmp(field, "direction")) {
        int d = parse_direction(value);
        if (d < -1)
            return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not both, up or down", key,
                           value);
        k->direction = d;
        return 0;
    }
    double *dst = !strcmp(field, "warn_z")        ? &k->warn_z
                  : !strcmp(field, "crit_z")      ? &k->crit_z
                  : !strcmp(field, "sd_floor")    ? &k->sd_floor
                  : !strcmp(field, "min")         ? &k->min
                  : !strcmp(field, "max")         ? &k->max
                  : !strcmp(field, "lik_over")    ? &k->lik_over
                  : !strcmp(field, "novelty_tol") ? &k->novelty_tol
                                                  : NULL;
    if (!dst && strcmp(field, "stuck_steps"))
        return cc_errf(err, errlen, -ENOENT,
                       "alerts.%s: unknown field '%s' (enabled, direction, warn_z, crit_z, "
                       "sd_floor, min, max, stuck_steps, zero_normal, lik_over, novelty_tol, "
                       "shape)",
                       key, field);
    if (parse_double(value, &v))
        return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not a number", key, value);
    if (!dst) {
        if (v != floor(v) || v < -1 || v > 1000000 || v == 1)
            return cc_errf(err, errlen, -EINVAL,
                           "alerts.%s: %s is not -1 (never), 0 (default) or ≥ 2", key, value);
        k->stuck_steps = (int)v;
        return 0;
    }
    if (dst != &k->min && dst != &k->max && v < 0)
        return cc_errf(err, errlen, -EINVAL, "alerts.%s: must be ≥ 0", key);
    *dst = v;
    return 0;
}

/* key "kpis.<kpi name>.<field>": the KPI's name resolved with hp. */
static int kpi_setting_set(CcAnomalySettings *s, const CcHparams *hp, const char *key,
                           const char *value, char *err, size_t errlen)
{
    const char *name = key + 5, *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return cc_errf(err, errlen, -ENOENT, "alerts.%s: expected kpis.<kpi>.<field>", key);
    char kpi[CC_FEATURE_NAME_MAX];
    size_t nl = (size_t)(dot - name);
    if (nl >= sizeof kpi)
        return cc_errf(err, errlen, -ENOENT, "alerts.%s: KPI name too long", key);
    memcpy(kpi, name, nl);
    kpi[nl] = 0;
    int f = hp ? cc_hparams_feature_index(hp, kpi) : -1;
    if (f < 0)
        return cc_errf(err, errlen, -ENOENT, "alerts.%s: '%s' is not a KPI of the model", key, kpi);
    return kpi_field_set(&s->kpi[f], key, dot + 1, value, err, errlen);
}

int cc_anomaly_settings_set(CcAnomalySettings *s, const CcHparams *hp, const char *key,
                            const char *value, char *err, size_t errlen)
{
    double v;
    if (!key || !value)
        return cc_errf(err, errlen, -EINVAL, "alerts: missing key or value");
    if (!strncmp(key, "kpis.", 5))
        return kpi_setting_set(s, hp, key, value, err, errlen);
    for (size_t i = 0; i < sizeof anomaly_keys / sizeof anomaly_keys[0]; i++) {
        const CcAnomalyKey *k = &anomaly_keys[i];
        if (strcmp(k->name, key))
            continue;
        if (parse_double(value, &v) || v < k->lo || v > k->hi ||
            (k->type != CC_AKEY_DOUBLE && v != floor(v)))
            return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not %s in [%g, %g]", key,
                           value, k->type == CC_AKEY_DOUBLE ? "a number" : "an integer", k->lo,
                           k->hi);
        char *p = (char *)s + k->offset;
        if (k->type == CC_AKEY_DOUBLE)
            *(double *)p = v;
        else if (k->type == CC_AKEY_INT64)
            *(int64_t *)p = (int64_t)v;
        else
            *(int *)p = (int)v;
        return 0;
    }
    return cc_errf(err, errlen, -ENOENT, "alerts.%s: unknown setting", key);
}

int cc_anomaly_settings_set_list(CcAnomalySettings *s, const CcHparams *hp, const char *list,
                                 char *err, size_t errlen)
{
    char *dup = list ? strdup(list) : NULL, *save = NULL;
    if (!dup)
        return cc_errf(err, errlen, list ? -ENOMEM : -EINVAL, "alerts: no settings list");
    int rc = 0;
    for (char *t = strtok_r(dup, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            rc = cc_errf(err, errlen, -EINVAL, "'%s' is not key=value", t);
            break;
        }
        *eq = 0;
        rc = cc_anomaly_settings_set(s, hp, t, eq + 1, err, errlen);
    }
    free(dup);
    return rc;
}
