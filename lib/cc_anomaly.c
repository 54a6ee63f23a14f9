/*
 * cc_anomaly.c — per-cell anomaly scoring, data-quality checks and the alert lifecycle.
 * See cc_anomaly.h for the rules; this file implements them literally.
 */
#include "cc_anomaly.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NONE_STEP INT64_MIN
#define STATE_MAGIC 0x314D4E41u /* "ANM1" */
#define STATE_VERSION 4u /* 2: + the lag calibration per KPI; 3: + the CUSUM sums per KPI;
                            4: + the seasonal profile (per KPI sums and scale, bins);
                           * versions 1 and 2 are still read (sums start at 0) */

/* Lag calibration. The L-step-old forecast is less precise than the one-step forecast in
 * ways its sd may not say (a poor or untrained model, a bursty KPI): its residuals |z_L|
 * can be much larger than the one-step ones on normal data, and every such step would be
 * an alert. Each KPI keeps running means of |z_1| and |z_L| (a plain mean over the first
 * LAGCAL_STEPS scored steps, then exponential with that time constant; updates clipped at
 * LAGCAL_CLIP times the mean so that bursts move them by a bounded amount; not updated
 * while the cell's anomaly episode fires, so an anomaly does not calibrate itself away),
 * and z_L is multiplied by min(1, mean|z_1| / mean|z_L|): the lagged forecast is never
 * trusted more than the one-step forecast. Before both means have LAGCAL_MIN_N updates the
 * lagged z is not used at all (a new cell scores one-step only for its first ~48 steps). */
#define LAGCAL_STEPS 500
#define LAGCAL_CLIP 5.0
#define LAGCAL_MIN_N 48
#define GAUSS_MEAN_ABS 0.798 /* mean |x| of a standard Gaussian: sd = mean |x| / this */

/* One alert episode (anomaly of a cell, or one DQ condition). */
typedef struct Episode {
    int64_t start;        ///< onset step while firing, NONE_STEP otherwise
    int64_t resolved;     ///< step of the last resolution, NONE_STEP if never
    int32_t clear_run;    ///< consecutive clear steps while firing
    int32_t severity;     ///< CcAlertSeverity while firing
    double peak;          ///< anomaly: peak cell score of the episode
} Episode;

typedef struct KpiState {
    double exp_mean, exp_sd, exp_scale; ///< expectation for CcAnomalyCell.exp_step
    double z;             ///< z of the last scored step (NaN: not scored)
    double att_mean, att_sd, att_scale; ///< the expectation z was taken against
    double att_mul;       ///< factor the z was multiplied by (lag calibration; 1: none)
    double abs1, absl;    ///< running means of |z| one-step and lagged (lag calibration)
    int32_t n1, nl;       ///< their updates (saturate at LAGCAL_STEPS)
    double cu_pos, cu_neg; ///< CUSUM sums S⁺, S⁻ (cusum_k, cusum_h)
    double pr_pos, pr_neg; ///< profile CUSUM sums P⁺, P⁻ (profile_k, profile_h)
    double pr_abs;        ///< running mean |x − profile|, the profile z's scale
    int32_t pr_n;         ///< its updates (saturate at LAGCAL_STEPS)
    double pr_exp;        ///< the profile's value at the last scored step (NaN: none)
    float last_val;       ///< last observed value
    float change_rate;    ///< EWMA of "value changed"
    float run_max;        ///< longest recent run of equal values (decaying)
    int32_t run;          ///< consecutive observed steps equal to last_val
    int32_t has_last;
    Episode stuck, bounds;
} KpiState;

struct CcAnomaly {
    CcAnomalySettings s;
};

struct CcAnomalyCell {
    char id[CC_ANOMALY_CELL_ID_MAX];
    int F;
    int64_t last_step;    ///< last observed step, -1 none
    int64_t exp_step;     ///< step the expectation is for, NONE_STEP none
    int64_t score_step;   ///< last scored step, -1 none
    double score;         ///< cell score at score_step
    uint64_t over_bits, crit_bits; ///< bit i = step win_step - i
    int64_t win_step;     ///< step of bit 0, NONE_STEP before the first observation
    int32_t zero_run;
    Episode anom, zero, missing;
    int n_peak;
    CcAlertAttr peak[CC_ALERT_MAX_ATTR];
    int64_t quiet_until;
    CcAnomalyCellStats st;
    KpiState *k;          // (F)
    int L;                ///< lag ring length (settings.lag_steps when allocated)
    int64_t *lag_target;  // (L) step each ring entry is the expectation for
    float *lag;           // (L, F, 3) mean, sd, scale from the forecast made L steps earlier
    int NB;               ///< profile bins per day (86400 / profile_bin_s when allocated)
    float *prof;          // (2, NB, F) usual value per day type (weekday, weekend) and bin,
                          // followed in the same allocation by prof_n
    uint16_t *prof_n;     // (2, NB, F) samples averaged into each bin so far (saturating)
};

/* ------------------------------------------------------------------ settings */

void cc_anomaly_default_settings(CcAnomalySettings *s)
{
    memset(s, 0, sizeof *s);
    s->n_features = 8;
    s->step_seconds = 3600;
    s->warn_z = 4.5;
    s->crit_z = 6.75;
    s->warmup_steps = 64;
    s->min_kpis = 1;
    s->window_n = 3;
    s->warn_k = 2;
    s->crit_k = 1;
    s->resolve_m = 3;
    s->cooldown_steps = 6;
    s->sd_floor_rel = 0.01;
    s->sd_floor_scale = 0.05;
    s->interval_z = 1.2815516;
    s->stuck_steps = 12;
    s->stuck_min_change_rate = 0.5;
    s->stuck_run_factor = 2.0;
    s->stuck_memory_steps = 2000;
    s->change_rate_steps = 200;
    s->zero_steps = 6;
    s->missing_after_s = 0;
    s->dq_resolve_steps = 3;
    s->dq_grace_steps = 16;
    s->lag_steps = -1;
    s->cusum_k = 3.0;
    s->cusum_h = 6.0;
    s->profile_k = 1.0;
    s->profile_h = 20.0;
    s->profile_unit_s = 900;
    s->profile_bin_s = 3600;
    s->profile_days = 4.0;
    s->profile_min_days = 2;
    s->profile_utc_offset_s = 0;
    for (int f = 0; f < CC_MAX_FEATURES; f++)
        s->kpi[f].enabled = 1;
}

int cc_anomaly_validate(const CcAnomalySettings *s, char *err, size_t errlen)
{
    if (!s)
        return cc_errf(err, errlen, -EINVAL, "anomaly: no settings");
    if (s->n_features < 1 || s->n_features > CC_MAX_FEATURES)
        return cc_errf(err, errlen, -EINVAL, "anomaly: n_features %d not in 1..%d",
                       s->n_features, CC_MAX_FEATURES);
    if (s->step_seconds < 1)
        return cc_errf(err, errlen, -EINVAL, "anomaly: step_seconds must be ≥ 1");
    if (!(s->warn_z > 0) || !(s->crit_z >= s->warn_z) || !isfinite(s->crit_z))
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: need 0 < warn_z (%g) ≤ crit_z (%g), finite", s->warn_z,
                       s->crit_z);
    if (s->window_n < 1 || s->window_n > CC_ANOMALY_MAX_WINDOW)
        return cc_errf(err, errlen, -EINVAL, "anomaly: window_n %d not in 1..%d", s->window_n,
                       CC_ANOMALY_MAX_WINDOW);
    if (s->warn_k < 1 || s->warn_k > s->window_n || s->crit_k < 1 || s->crit_k > s->window_n)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: warn_k (%d) and crit_k (%d) must be in 1..window_n (%d)",
                       s->warn_k, s->crit_k, s->window_n);
    if (s->min_kpis < 1 || s->min_kpis > s->n_features)
        return cc_errf(err, errlen, -EINVAL, "anomaly: min_kpis %d not in 1..n_features",
                       s->min_kpis);
    if (s->resolve_m < 1 || s->cooldown_steps < 0 || s->dq_resolve_steps < 1 ||
        s->dq_grace_steps < 0)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: need resolve_m ≥ 1, dq_resolve_steps ≥ 1, cooldown_steps ≥ 0, "
                       "dq_grace_steps ≥ 0");
    if (!(s->sd_floor_rel >= 0) || !(s->sd_floor_scale >= 0) || !(s->interval_z > 0))
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: sd floors must be ≥ 0 and interval_z > 0");
    if (s->stuck_steps < 2 || s->zero_steps < 1 || s->change_rate_steps < 1 ||
        !(s->stuck_min_change_rate >= 0 && s->stuck_min_change_rate <= 1))
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: need stuck_steps ≥ 2, zero_steps ≥ 1, change_rate_steps ≥ 1, "
                       "stuck_min_change_rate in [0,1]");
    if (s->lag_steps < -1 || s->lag_steps > CC_ANOMALY_MAX_LAG)
        return cc_errf(err, errlen, -EINVAL, "anomaly: lag_steps %d not in -1..%d", s->lag_steps,
                       CC_ANOMALY_MAX_LAG);
    if (!(s->stuck_run_factor >= 0) || s->stuck_memory_steps < 1)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: need stuck_run_factor ≥ 0 and stuck_memory_steps ≥ 1");
    if (s->missing_after_s < 0)
        return cc_errf(err, errlen, -EINVAL, "anomaly: missing_after_s must be ≥ 0");
    if (!(s->cusum_k >= 0 && s->cusum_k <= 1e6) || !(s->cusum_h >= 0 && s->cusum_h <= 1e6))
        return cc_errf(err, errlen, -EINVAL, "anomaly: need cusum_k and cusum_h in [0, 1e6]");
    if (!(s->profile_k >= 0 && s->profile_k <= 1e6) || !(s->profile_h >= 0 && s->profile_h <= 1e6))
        return cc_errf(err, errlen, -EINVAL, "anomaly: need profile_k and profile_h in [0, 1e6]");
    if (s->profile_bin_s < 300 || s->profile_bin_s > 86400 || 86400 % s->profile_bin_s != 0)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: profile_bin_s %lld must divide 86400 and be ≥ 300",
                       (long long)s->profile_bin_s);
    if (!(s->profile_days >= 0.5 && s->profile_days <= 1000) || s->profile_min_days < 1 ||
        s->profile_min_days > 1000)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: need profile_days in [0.5, 1000] and profile_min_days in 1..1000");
    if (s->profile_unit_s < 1 || s->profile_unit_s > 86400)
        return cc_errf(err, errlen, -EINVAL, "anomaly: profile_unit_s must be in 1..86400");
    if (s->profile_utc_offset_s < -14 * 3600 || s->profile_utc_offset_s > 14 * 3600)
        return cc_errf(err, errlen, -EINVAL, "anomaly: profile_utc_offset_s beyond ±14 h");
    for (int f = 0; f < s->n_features; f++) {
        const CcAnomalyKpi *k = &s->kpi[f];
        double w = k->warn_z > 0 ? k->warn_z : s->warn_z;
        double c = k->crit_z > 0 ? k->crit_z : s->crit_z;
        if (k->warn_z < 0 || k->crit_z < 0 || c < w || !isfinite(c))
            return cc_errf(err, errlen, -EINVAL,
                           "anomaly: kpi %d: thresholds must be ≥ 0 and warn (%g) ≤ crit (%g)",
                           f, w, c);
        if (k->direction < -1 || k->direction > 1)
            return cc_errf(err, errlen, -EINVAL, "anomaly: kpi %d: direction must be -1, 0, 1",
                           f);
        if (!(k->sd_floor >= 0) || isnan(k->min) || isnan(k->max))
            return cc_errf(err, errlen, -EINVAL, "anomaly: kpi %d: bad sd_floor or bounds", f);
        if (k->stuck_steps < -1 || k->stuck_steps == 1)
            return cc_errf(err, errlen, -EINVAL,
                           "anomaly: kpi %d: stuck_steps must be -1, 0 or ≥ 2", f);
    }
    return 0;
}

int cc_anomaly_open(CcAnomaly **out, const CcAnomalySettings *s, char *err, size_t errlen)
{
    *out = NULL;
    int rc = cc_anomaly_validate(s, err, errlen);
    if (rc)
        return rc;
    CcAnomaly *a = calloc(1, sizeof *a);
    if (!a)
        return cc_errf(err, errlen, -ENOMEM, "anomaly: out of memory");
    a->s = *s;
    *out = a;
    return 0;
}

void cc_anomaly_close(CcAnomaly **a)
{
    if (a && *a) {
        free(*a);
        *a = NULL;
    }
}

int cc_anomaly_set_settings(CcAnomaly *a, const CcAnomalySettings *s, char *err, size_t errlen)
{
    int rc = cc_anomaly_validate(s, err, errlen);
    if (rc)
        return rc;
    if (s->n_features != a->s.n_features)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly: n_features cannot change on reload (%d → %d)", a->s.n_features,
                       s->n_features);
    a->s = *s;
    return 0;
}

const CcAnomalySettings *cc_anomaly_settings(const CcAnomaly *a)
{
    return &a->s;
}

/* ------------------------------------------------------------------ cells */

static void episode_init(Episode *e)
{
    e->start = NONE_STEP;
    e->resolved = NONE_STEP;
    e->clear_run = 0;
    e->severity = 0;
    e->peak = 0;
}

static void cell_init(CcAnomalyCell *c)
{
    c->last_step = -1;
    c->exp_step = NONE_STEP;
    c->score_step = -1;
    c->score = NAN;
    c->over_bits = c->crit_bits = 0;
    c->win_step = NONE_STEP;
    c->zero_run = 0;
    episode_init(&c->anom);
    episode_init(&c->zero);
    episode_init(&c->missing);
    c->n_peak = 0;
    c->quiet_until = NONE_STEP;
    memset(&c->st, 0, sizeof c->st);
    for (int i = 0; i < c->L; i++)
        c->lag_target[i] = NONE_STEP;
    for (int f = 0; f < c->F; f++) {
        KpiState *k = &c->k[f];
        memset(k, 0, sizeof *k);
        k->z = NAN;
        k->pr_exp = NAN;
        k->att_mul = 1;
        k->change_rate = 1.0f;
        episode_init(&k->stuck);
        episode_init(&k->bounds);
    }
}

/* (Re)sizes the lag ring to L entries, emptied. 0 or -ENOMEM (ring unchanged). */
static int lag_alloc(CcAnomalyCell *c, int L)
{
    if (L == c->L)
        return 0;
    int64_t *t = NULL;
    float *v = NULL;
    if (L > 0) {
        t = malloc((size_t)L * sizeof *t);
        v = calloc((size_t)L * (size_t)c->F * 3, sizeof *v);
        if (!t || !v) {
            free(t);
            free(v);
            return -ENOMEM;
        }
        for (int i = 0; i < L; i++)
            t[i] = NONE_STEP;
    }
    free(c->lag_target);
    free(c->lag);
    c->lag_target = t;
    c->lag = v;
    c->L = L;
    return 0;
}

/* One block for a profile of NB bins per day: the means, then the counts (prof_n). */
static float *profile_block(int NB, int F, uint16_t **counts)
{
    size_t cnt = (size_t)2 * NB * (size_t)F;
    float *v = malloc(cnt * (sizeof(float) + sizeof(uint16_t)));
    *counts = v ? (uint16_t *)(v + cnt) : NULL;
    return v;
}

/* Profile bins per day the settings want; 0 = no profile. */
static int profile_bins(const CcAnomalySettings *s)
{
    return s->profile_h > 0 ? (int)(86400 / s->profile_bin_s) : 0;
}

/* (Re)sizes the profile to NB bins per day, emptied, and restarts every KPI's profile
 * scale and sums (they belong to the old bins). 0 or -ENOMEM (profile unchanged). */
static int profile_alloc(CcAnomalyCell *c, int NB)
{
    if (NB == c->NB)
        return 0;
    float *v = NULL;
    uint16_t *n = NULL;
    if (NB > 0) {
        v = profile_block(NB, c->F, &n);
        if (!v)
            return -ENOMEM;
        memset(v, 0, (size_t)2 * NB * (size_t)c->F * (sizeof *v + sizeof *n));
    }
    free(c->prof);
    c->prof = v;
    c->prof_n = n;
    c->NB = NB;
    for (int f = 0; f < c->F; f++) {
        KpiState *k = &c->k[f];
        k->pr_pos = k->pr_neg = k->pr_abs = 0;
        k->pr_n = 0;
        k->pr_exp = NAN;
    }
    return 0;
}

int cc_anomaly_cell_open(CcAnomalyCell **out, const CcAnomaly *a, const char *cell_id)
{
    *out = NULL;
    if (!cell_id || strlen(cell_id) >= CC_ANOMALY_CELL_ID_MAX)
        return -EINVAL;
    CcAnomalyCell *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->F = a->s.n_features;
    c->k = calloc((size_t)c->F, sizeof *c->k);
    if (!c->k) {
        free(c);
        return -ENOMEM;
    }
    snprintf(c->id, sizeof c->id, "%s", cell_id);
    if (lag_alloc(c, a->s.lag_steps > 0 ? a->s.lag_steps : 0) ||
        profile_alloc(c, profile_bins(&a->s))) {
        free(c->lag);
        free(c->lag_target);
        free(c->k);
        free(c);
        return -ENOMEM;
    }
    cell_init(c);
    *out = c;
    return 0;
}

void cc_anomaly_cell_close(CcAnomalyCell **c)
{
    if (c && *c) {
        free((*c)->lag);
        free((*c)->lag_target);
        free((*c)->prof);
        free((*c)->k);
        free(*c);
        *c = NULL;
    }
}

const char *cc_anomaly_cell_id(const CcAnomalyCell *c)
{
    return c->id;
}

void cc_anomaly_cell_quiet_until(CcAnomalyCell *c, int64_t step)
{
    c->quiet_until = step;
}

void cc_anomaly_set_expect(const CcAnomaly *a, CcAnomalyCell *c, int64_t step,
                           const double *mean, const double *sd, const double *scale)
{
    (void)a;
    c->exp_step = step;
    for (int f = 0; f < c->F; f++) {
        c->k[f].exp_mean = mean[f];
        c->k[f].exp_sd = sd[f];
        c->k[f].exp_scale = scale ? scale[f] : 0;
    }
}

void cc_anomaly_set_expect_lagged(const CcAnomaly *a, CcAnomalyCell *c, int64_t step,
                                  const double *mean, const double *sd, const double *scale)
{
    /* lag_steps -1 (the forecasts' horizon): the ring as the last forecast sized it */
    if (a->s.lag_steps >= 0 && c->L != a->s.lag_steps && lag_alloc(c, a->s.lag_steps))
        return;
    if (c->L <= 0)
        return;
    int i = (int)(((step % c->L) + c->L) % c->L);
    c->lag_target[i] = step;
    for (int f = 0; f < c->F; f++) {
        float *e = c->lag + ((size_t)i * c->F + f) * 3;
        e[0] = (float)mean[f];
        e[1] = (float)sd[f];
        e[2] = scale ? (float)scale[f] : 0.0f;
    }
}

/* The lag in steps for forecasts of horizon hz: lag_steps, or hz when it is -1. */
static int lag_of(const CcAnomalySettings *s, int hz)
{
    if (s->lag_steps >= 0)
        return s->lag_steps;
    return hz < CC_ANOMALY_MAX_LAG ? hz : CC_ANOMALY_MAX_LAG;
}

void cc_anomaly_set_forecast(const CcAnomaly *a, CcAnomalyCell *c, const CcForecast *fc)
{
    if (!fc || !fc->valid || fc->n_features != c->F || fc->horizon < 1 ||
        (a->s.warmup_steps > 0 && fc->step - fc->seq_start + 1 < a->s.warmup_steps)) {
        c->exp_step = NONE_STEP;
        return;
    }
    if (c->L != lag_of(&a->s, fc->horizon))
        lag_alloc(c, lag_of(&a->s, fc->horizon)); /* settings reloaded or another model;
                                                    on -ENOMEM the old ring stays */
    if (c->L > 0 && fc->horizon >= c->L) {
        int64_t target = fc->step + c->L;
        int i = (int)(((target % c->L) + c->L) % c->L);
        c->lag_target[i] = target;
        for (int f = 0; f < c->F; f++) {
            double m, sd;
            cc_forecast_point(fc, f, c->L - 1, &m, &sd);
            float *e = c->lag + ((size_t)i * c->F + f) * 3;
            e[0] = (float)m;
            e[1] = (float)sd;
            e[2] = fc->sigma ? fc->sigma[f] : 0.0f;
        }
    }
    c->exp_step = fc->step + 1;
    for (int f = 0; f < c->F; f++) {
        double m, sd;
        cc_forecast_point(fc, f, 0, &m, &sd);
        c->k[f].exp_mean = m;
        c->k[f].exp_sd = sd;
        c->k[f].exp_scale = fc->sigma ? fc->sigma[f] : 0;
    }
}

/* ------------------------------------------------------------------ events */

static double kpi_warn(const CcAnomalySettings *s, int f)
{
    return s->kpi[f].warn_z > 0 ? s->kpi[f].warn_z : s->warn_z;
}

static double kpi_crit(const CcAnomalySettings *s, int f)
{
    return s->kpi[f].crit_z > 0 ? s->kpi[f].crit_z : s->crit_z;
}

static int kpi_stuck_steps(const CcAnomalySettings *s, int f)
{
    int n = s->kpi[f].stuck_steps;
    return n == 0 ? s->stuck_steps : n;
}

static double sd_eff(const CcAnomalySettings *s, int f, double mean, double sd, double scale)
{
    double fl = s->kpi[f].sd_floor;
    if (s->sd_floor_rel * fabs(mean) > fl)
        fl = s->sd_floor_rel * fabs(mean);
    if (s->sd_floor_scale * scale > fl)
        fl = s->sd_floor_scale * scale;
    return sd > fl ? sd : fl;
}

/* z of x against (mean, sd, scale), NaN when the expectation is unusable. */
static double zscore(const CcAnomalySettings *s, int f, double x, double mean, double sd,
                     double scale)
{
    if (!(sd > 0) || !isfinite(sd) || !isfinite(mean))
        return NAN;
    double z = (x - mean) / sd_eff(s, f, mean, sd, scale);
    return isfinite(z) ? z : NAN;
}

/* Multiplier of the lagged z (see LAGCAL_STEPS): min(1, mean|z_1| / mean|z_L|) once warm,
 * NaN (the lagged z is not used) before. */
static double lagcal_factor(const KpiState *k)
{
    if (k->n1 < LAGCAL_MIN_N || k->nl < LAGCAL_MIN_N)
        return NAN;
    return k->absl > k->abs1 ? k->abs1 / k->absl : 1.0;
}

/* One update of a running mean |z| (see LAGCAL_STEPS). */
static void absmean_update(double *m, int32_t *n, double z)
{
    double v = fabs(z);
    if (*n > 0 && v > LAGCAL_CLIP * *m)
        v = LAGCAL_CLIP * *m;
    if (*n < LAGCAL_STEPS)
        (*n)++;
    *m += (v - *m) / (double)*n;
}

static void make_id(CcAlertEvent *ev, const char *cell, enum CcDqReason r, int kpi, int64_t start)
{
    if (r == CC_DQ_NONE)
        snprintf(ev->id, sizeof ev->id, "%s:anomaly:%lld", cell, (long long)start);
    else if (kpi >= 0)
        snprintf(ev->id, sizeof ev->id, "%s:%s:%d:%lld", cell, cc_dq_reason_name(r), kpi,
                 (long long)start);
    else
        snprintf(ev->id, sizeof ev->id, "%s:%s:%lld", cell, cc_dq_reason_name(r),
                 (long long)start);
}

static void event_init(const CcAnomaly *a, const CcAnomalyCell *c, CcAlertEvent *ev,
                       enum CcAlertState st, enum CcDqReason r, int kpi, int64_t start,
                       int64_t step, int severity)
{
    memset(ev, 0, sizeof *ev);
    make_id(ev, c->id, r, kpi, start);
    ev->state = st;
    ev->kind = r == CC_DQ_NONE ? CC_ALERT_ANOMALY : CC_ALERT_DATA_QUALITY;
    ev->reason = r;
    ev->severity = (enum CcAlertSeverity)severity;
    ev->cell_id = c->id;
    ev->kpi = kpi;
    ev->start_step = start;
    ev->step = step;
    ev->ts = step * a->s.step_seconds;
    ev->start_ts = start * a->s.step_seconds;
    ev->score = NAN;
}

static void emit(CcAnomalyCell *c, const CcAlertSink *sink, const CcAlertEvent *ev,
                 int64_t quiet_step)
{
    if (quiet_step <= c->quiet_until) {
        c->st.quiet++;
        return;
    }
    if (ev->state == CC_ALERT_FIRING)
        c->st.firing++;
    else
        c->st.resolved++;
    if (sink && sink->emit)
        sink->emit(sink->cookie, ev);
}

/* One step of a two-sided CUSUM with reference k, the input clipped to ±(k + 1) and the
 * increments weighted by w. */
static void cusum_step(double *pos, double *neg, double z, double k, double w)
{
    double clip = k + 1;
    z = z > clip ? clip : z < -clip ? -clip : z;
    *pos = fmax(0, *pos + w * (z - k));
    *neg = fmax(0, *neg + w * (-z - k));
}

/* Sums at or over threshold h (> 0: else off) in direction dir (0 both, +1 up, -1 down). */
static int sums_over(double pos, double neg, double h, int dir)
{
    return h > 0 && ((dir >= 0 && pos >= h) || (dir <= 0 && neg >= h));
}

/* The larger sum, signed by its direction. */
static double signed_sum(double pos, double neg)
{
    return pos >= neg ? pos : -neg;
}

/* The KPI counts as over by its CUSUM (sums of its last scored step, in its direction). */
static int cusum_over(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return sums_over(k->cu_pos, k->cu_neg, s->cusum_h, s->kpi[f].direction);
}

/* The KPI counts as over by its seasonal profile's CUSUM, in its direction. */
static int profile_over(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return sums_over(k->pr_pos, k->pr_neg, s->profile_h, s->kpi[f].direction);
}

/* Attribution of one KPI from the expectation and value of the current step. */
static void attr_of(const CcAnomalySettings *s, const KpiState *k, int f, double x,
                    CcAlertAttr *out)
{
    double sd = sd_eff(s, f, k->att_mean, k->att_sd, k->att_scale) / k->att_mul;
    out->kpi = f;
    out->observed = x;
    out->expected = k->att_mean;
    out->lo = k->att_mean - s->interval_z * sd;
    out->hi = k->att_mean + s->interval_z * sd;
    out->z = k->z;
    out->cusum = cusum_over(s, k, f) ? signed_sum(k->cu_pos, k->cu_neg) : 0;
    out->profile = profile_over(s, k, f) ? signed_sum(k->pr_pos, k->pr_neg) : 0;
    out->profile_expected = k->pr_exp;
}

/* DQ episode step: cond holds at `step` (onset `onset` when it starts firing). */
static void dq_update(const CcAnomaly *a, CcAnomalyCell *c, Episode *e, int cond,
                      enum CcDqReason r, int kpi, int64_t step, int64_t onset, int severity,
                      const CcAlertAttr *attr, const CcAlertSink *sink)
{
    CcAlertEvent ev;
    if (e->start == NONE_STEP) {
        if (!cond)
            return;
        e->start = onset;
        e->clear_run = 0;
        e->severity = severity;
        event_init(a, c, &ev, CC_ALERT_FIRING, r, kpi, onset, step, severity);
        if (attr) {
            ev.attr[0] = *attr;
            ev.n_attr = 1;
        }
        emit(c, sink, &ev, step);
        return;
    }
    if (cond) {
        e->clear_run = 0;
        return;
    }
    if (++e->clear_run < a->s.dq_resolve_steps)
        return;
    event_init(a, c, &ev, CC_ALERT_RESOLVED, r, kpi, e->start, step, e->severity);
    if (attr) {
        ev.attr[0] = *attr;
        ev.n_attr = 1;
    }
    e->start = NONE_STEP;
    e->resolved = step;
    e->clear_run = 0;
    emit(c, sink, &ev, step);
}

/* Within an episode's firing time or its grace period after resolving. */
static int dq_blocks(const CcAnomalySettings *s, const Episode *e, int64_t step)
{
    if (e->start != NONE_STEP)
        return 1;
    return e->resolved != NONE_STEP && step - e->resolved <= s->dq_grace_steps;
}

/* A KPI to attribute an anomaly step to: |z| over its warning threshold, or the CUSUM. */
static int kpi_is_over(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return isfinite(k->z) &&
           (fabs(k->z) >= kpi_warn(s, f) || cusum_over(s, k, f) || profile_over(s, k, f));
}

static int cmp_attr(const void *pa, const void *pb)
{
    double a = fabs(((const CcAlertAttr *)pa)->z), b = fabs(((const CcAlertAttr *)pb)->z);
    return a < b ? 1 : a > b ? -1 : ((const CcAlertAttr *)pa)->kpi - ((const CcAlertAttr *)pb)->kpi;
}

static int popcount_n(uint64_t bits, int n)
{
    uint64_t m = n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
    return __builtin_popcountll(bits & m);
}

/* ------------------------------------------------------------------ seasonal profile */

/* Where a step falls in the profile: day type, the bin it updates, and the two bins whose
 * centres surround it with the weight of the second. */
typedef struct ProfPos {
    int type;      ///< 0 weekday, 1 weekend (local time)
    int bin;       ///< bin of the step
    int b0, b1;    ///< bins interpolated between
    double w1;     ///< weight of b1
    double per_day; ///< samples per bin per day: profile_bin_s / step_seconds, ≥ 1
} ProfPos;

static void profile_pos(const CcAnomalySettings *s, int64_t step, int NB, ProfPos *p)
{
    /* a step stands for [start, start + S): place it at its middle, where a bin's mean of
     * such steps sits too (with S = the bin width, exactly on the bin's centre) */
    int64_t t = step * s->step_seconds + s->step_seconds / 2 + s->profile_utc_offset_s;
    int64_t day = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    int64_t sec = t - day * 86400;
    int dow = (int)(((day + 3) % 7 + 7) % 7); /* 1970-01-01 was a Thursday; 0 = Monday */
    p->type = dow >= 5;
    double pos = (double)sec / (double)s->profile_bin_s; /* in bins, [0, NB) */
    p->bin = (int)pos;
    if (p->bin >= NB)
        p->bin = NB - 1;
    double c = pos - 0.5, fl = floor(c);
    p->b0 = (int)fl < 0 ? NB - 1 : (int)fl;
    p->b1 = p->b0 + 1 >= NB ? 0 : p->b0 + 1;
    p->w1 = c - fl;
    p->per_day = (double)s->profile_bin_s / (double)s->step_seconds;
    if (p->per_day <= 1) { /* steps as long as a bin or longer: their bins, as they are */
        p->per_day = 1;
        p->b0 = p->b1 = p->bin;
        p->w1 = 0;
    }
}

/* The profile z of x for KPI f before learning x: (x − usual value) / scale, NaN while
 * the bins or the scale are not warm; *ref gets the usual value (NaN: none). Then x is
 * learnt: the scale from the residual, the step's bin from x. */
static double profile_step(const CcAnomalySettings *s, CcAnomalyCell *c, const ProfPos *p, int f,
                           double x, double *ref)
{
    KpiState *k = &c->k[f];
    size_t o = (size_t)p->type * c->NB * c->F; /* this day type's bins */
    const uint16_t *n = c->prof_n + o;
    float *m = c->prof + o;
    double need = s->profile_min_days * p->per_day;
    double z = NAN;
    *ref = NAN;
    if (n[(size_t)p->b0 * c->F + f] >= need && n[(size_t)p->b1 * c->F + f] >= need) {
        double r0 = m[(size_t)p->b0 * c->F + f], r1 = m[(size_t)p->b1 * c->F + f];
        *ref = r0 + p->w1 * (r1 - r0);
        double res = x - *ref;
        if (k->pr_n >= LAGCAL_MIN_N) {
            /* the forecast's floors: a KPI that is usually exactly flat at some hour (0
             * drops at night) must not alert on a tiny change there */
            double sc = fmax(fmax(k->pr_abs / GAUSS_MEAN_ABS, s->kpi[f].sd_floor),
                             fmax(s->sd_floor_rel * fabs(*ref), s->sd_floor_scale * k->exp_scale));
            if (sc > 0)
                z = res / sc;
        }
        absmean_update(&k->pr_abs, &k->pr_n, res);
    }
    float *mb = m + (size_t)p->bin * c->F + f;
    uint16_t *nb = c->prof_n + o + (size_t)p->bin * c->F + f;
    if (*nb == 0) {
        *mb = (float)x;
    } else {
        double cap = s->profile_days * p->per_day;
        double w = 1.0 / ((*nb < cap ? *nb : cap) + 1.0);
        double d = x - *mb;
        if (k->pr_n >= LAGCAL_MIN_N) {
            double lim = 3 * k->pr_abs / GAUSS_MEAN_ABS;
            d = d > lim ? lim : d < -lim ? -lim : d;
        }
        *mb += (float)(w * d);
    }
    if (*nb < UINT16_MAX)
        (*nb)++;
    return isfinite(z) ? z : NAN;
}

/* ------------------------------------------------------------------ observe */

int cc_anomaly_observe(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                       const uint8_t *mask, const CcAlertSink *sink)
{
    const CcAnomalySettings *s = &a->s;
    const int F = c->F;
    if (c->last_step >= 0 && step <= c->last_step)
        return -EALREADY;
    c->last_step = step;

    /* Missing data ends with any observation. */
    if (c->missing.start != NONE_STEP) {
        CcAlertEvent ev;
        event_init(a, c, &ev, CC_ALERT_RESOLVED, CC_DQ_MISSING, -1, c->missing.start, step,
                   c->missing.severity);
        c->missing.start = NONE_STEP;
        c->missing.resolved = step;
        emit(c, sink, &ev, step);
    }

    /* --- data quality --- */
    int n_obs = 0, n_zero = 0;
    for (int f = 0; f < F; f++) {
        int obs = (!mask || mask[f]) && isfinite(values[f]);
        if (!obs)
            continue;
        n_obs++;
        n_zero += values[f] == 0.0f;
    }
    int all_zero_now = n_obs > 0 && n_zero == n_obs;
    c->zero_run = all_zero_now ? c->zero_run + 1 : 0;
    dq_update(a, c, &c->zero, c->zero_run >= s->zero_steps, CC_DQ_ALL_ZERO, -1, step,
              step - c->zero_run + 1, CC_SEV_CRITICAL, NULL, sink);

    for (int f = 0; f < F; f++) {
        KpiState *k = &c->k[f];
        int obs = (!mask || mask[f]) && isfinite(values[f]);
        if (!obs)
            continue; /* imputed values neither advance nor break runs */
        float v = values[f];
        int nst = kpi_stuck_steps(s, f);
        if (k->has_last) {
            int changed = v != k->last_val;
            k->run_max *= 1.0f - 1.0f / (float)s->stuck_memory_steps;
            if (changed && (float)k->run > k->run_max)
                k->run_max = (float)k->run; /* a run ended: remember its length */
            k->run = changed ? 1 : k->run + 1;
            if (nst < 0 || k->run < nst)
                k->change_rate += ((float)changed - k->change_rate) / (float)s->change_rate_steps;
        } else {
            k->run = 1;
            k->has_last = 1;
        }
        k->last_val = v;
        int stuck = nst > 0 && k->run >= nst && k->change_rate >= s->stuck_min_change_rate &&
                    (double)k->run >= s->stuck_run_factor * k->run_max && !all_zero_now;
        CcAlertAttr at = {f, v, NAN, NAN, NAN, NAN, 0, 0, NAN};
        if (c->exp_step == step)
            at.expected = k->exp_mean;
        /* A firing stuck alert stays firing while the run goes on (even if the change rate
         * or the all-zero state says otherwise now): only a change clears it. */
        if (k->stuck.start != NONE_STEP && nst > 0 && k->run >= nst)
            stuck = 1;
        dq_update(a, c, &k->stuck, stuck, CC_DQ_STUCK, f, step, step - k->run + 1, CC_SEV_WARNING,
                  &at, sink);
        const CcAnomalyKpi *kp = &s->kpi[f];
        int oob = kp->min < kp->max && (v < kp->min || v > kp->max);
        CcAlertAttr ab = {f, v, at.expected, kp->min, kp->max, NAN, 0, 0, NAN};
        dq_update(a, c, &k->bounds, oob, CC_DQ_BOUNDS, f, step, step, CC_SEV_WARNING, &ab, sink);
    }

    /* --- anomaly scoring --- */
    int lag_i = c->L > 0 ? (int)(((step % c->L) + c->L) % c->L) : 0;
    int have_lag = c->L > 0 && c->lag_target[lag_i] == step;
    int have_exp = c->exp_step == step || have_lag;
    int n_scored = 0, n_over = 0, n_crit = 0, n_supp = 0;
    double score = NAN;
    int cell_blocked = dq_blocks(s, &c->zero, step) || dq_blocks(s, &c->missing, step);
    int firing = c->anom.start != NONE_STEP;
    int nb = profile_bins(s);
    if (c->NB != nb)
        profile_alloc(c, nb); /* settings reloaded; on -ENOMEM the old one stays */
    int have_prof = nb > 0 && c->NB == nb;
    ProfPos pp = {0};
    if (have_prof)
        profile_pos(s, step, c->NB, &pp);
    for (int f = 0; f < F; f++) {
        KpiState *k = &c->k[f];
        k->z = NAN;
        k->pr_exp = NAN;
        int obs = (!mask || mask[f]) && isfinite(values[f]);
        if (!obs || !s->kpi[f].enabled)
            continue;
        int blocked =
            cell_blocked || dq_blocks(s, &k->stuck, step) || dq_blocks(s, &k->bounds, step);
        double zp = NAN, pref = NAN; /* the profile learns whether or not there is a forecast */
        if (have_prof && !blocked)
            zp = profile_step(s, c, &pp, f, values[f], &pref);
        if (!have_exp)
            continue;
        if (blocked) {
            n_supp++;
            continue;
        }
        double z = c->exp_step == step
                       ? zscore(s, f, values[f], k->exp_mean, k->exp_sd, k->exp_scale)
                       : NAN;
        double zc = NAN; /* what the CUSUM sees: the calibrated lagged z, else z */
        k->att_mean = k->exp_mean;
        k->att_sd = k->exp_sd;
        k->att_scale = k->exp_scale;
        k->att_mul = 1;
        if (have_lag) {
            const float *e = c->lag + ((size_t)lag_i * F + f) * 3;
            double zl = zscore(s, f, values[f], e[0], e[1], e[2]);
            double g = lagcal_factor(k);
            if (!firing && isfinite(z) && isfinite(zl)) {
                absmean_update(&k->abs1, &k->n1, z);
                absmean_update(&k->absl, &k->nl, zl);
            }
            zl *= g;
            zc = zl;
            if (isfinite(zl) && !(fabs(z) >= fabs(zl))) {
                z = zl;
                k->att_mean = e[0];
                k->att_sd = e[1];
                k->att_scale = e[2];
                k->att_mul = g;
            }
        }
        if (!isfinite(z))
            continue;
        k->z = z;
        n_scored++;
        double az = fabs(z);
        if (!(score >= az))
            score = az;
        int dir = s->kpi[f].direction;
        int way = dir == 0 || (dir > 0 && z > 0) || (dir < 0 && z < 0);
        if (s->cusum_h > 0) {
            cusum_step(&k->cu_pos, &k->cu_neg, isfinite(zc) ? zc : z, s->cusum_k, 1);
        }
        k->pr_exp = pref;
        /* steps shorter than profile_unit_s count for that fraction of a step: a deviation
         * from the usual value persists over minutes, and 2-minute steps would otherwise
         * count one slow wobble many times over */
        if (isfinite(zp))
            cusum_step(&k->pr_pos, &k->pr_neg, zp, s->profile_k,
                       fmin(1.0, (double)s->step_seconds / (double)s->profile_unit_s));
        if (way && az >= kpi_warn(s, f)) {
            n_over++;
            if (az >= kpi_crit(s, f))
                n_crit++;
        } else if (cusum_over(s, k, f) || profile_over(s, k, f)) {
            n_over++;
        }
    }
    int over = n_scored > 0 && n_over >= s->min_kpis;
    int crit = over && n_crit > 0;

    /* Window: shift to this step (missed steps count as not over). */
    int64_t sh = c->win_step == NONE_STEP ? 64 : step - c->win_step;
    if (sh >= 64) {
        c->over_bits = c->crit_bits = 0;
    } else {
        c->over_bits <<= sh;
        c->crit_bits <<= sh;
    }
    c->win_step = step;
    c->over_bits |= (uint64_t)over;
    c->crit_bits |= (uint64_t)crit;

    if (n_scored) {
        c->st.scored++;
        c->st.over += over;
        c->score_step = step;
        c->score = score;
    }

    int n_w = popcount_n(c->over_bits, s->window_n);
    int n_c = popcount_n(c->crit_bits, s->window_n);
    Episode *e = &c->anom;
    CcAlertEvent ev;
    if (e->start == NONE_STEP) {
        int cool = e->resolved == NONE_STEP || step > e->resolved + s->cooldown_steps;
        if (over && cool && (n_w >= s->warn_k || n_c >= s->crit_k)) {
            int oldest = 63 - __builtin_clzll(c->over_bits &
                                              (s->window_n >= 64 ? ~(uint64_t)0
                                                                 : (((uint64_t)1 << s->window_n) - 1)));
            e->start = step - oldest;
            if (e->resolved != NONE_STEP && e->start <= e->resolved)
                e->start = e->resolved + 1; /* ids of episodes never collide */
            e->clear_run = 0;
            e->severity = n_c >= s->crit_k ? CC_SEV_CRITICAL : CC_SEV_WARNING;
            e->peak = score;
            event_init(a, c, &ev, CC_ALERT_FIRING, CC_DQ_NONE, -1, e->start, step, e->severity);
            ev.score = score;
            CcAlertAttr all[CC_MAX_FEATURES];
            int n = 0;
            for (int f = 0; f < F; f++)
                if (kpi_is_over(s, &c->k[f], f))
                    attr_of(s, &c->k[f], f, values[f], &all[n++]);
            qsort(all, (size_t)n, sizeof *all, cmp_attr);
            ev.n_attr = n < CC_ALERT_MAX_ATTR ? n : CC_ALERT_MAX_ATTR;
            memcpy(ev.attr, all, (size_t)ev.n_attr * sizeof *all);
            c->n_peak = ev.n_attr;
            memcpy(c->peak, ev.attr, (size_t)ev.n_attr * sizeof *all);
            emit(c, sink, &ev, step);
        }
    } else if (over) {
        e->clear_run = 0;
        int escalate = e->severity == CC_SEV_WARNING && n_c >= s->crit_k;
        CcAlertAttr all[CC_MAX_FEATURES];
        int n = 0;
        if (escalate || score > e->peak) {
            for (int f = 0; f < F; f++)
                if (kpi_is_over(s, &c->k[f], f))
                    attr_of(s, &c->k[f], f, values[f], &all[n++]);
            qsort(all, (size_t)n, sizeof *all, cmp_attr);
            if (n > CC_ALERT_MAX_ATTR)
                n = CC_ALERT_MAX_ATTR;
        }
        if (score > e->peak) {
            e->peak = score;
            c->n_peak = n;
            memcpy(c->peak, all, (size_t)n * sizeof *all);
        }
        if (escalate) {
            e->severity = CC_SEV_CRITICAL;
            event_init(a, c, &ev, CC_ALERT_FIRING, CC_DQ_NONE, -1, e->start, step, e->severity);
            ev.score = score;
            ev.n_attr = n;
            memcpy(ev.attr, all, (size_t)n * sizeof *all);
            emit(c, sink, &ev, step);
        }
    } else if ((n_scored || n_supp) && ++e->clear_run >= s->resolve_m) {
        /* A step whose KPIs are all held by DQ alerts counts as clear: the DQ alert has
         * taken over, the anomaly episode must not stay open forever. */
        event_init(a, c, &ev, CC_ALERT_RESOLVED, CC_DQ_NONE, -1, e->start, step, e->severity);
        ev.score = e->peak;
        ev.n_attr = c->n_peak;
        memcpy(ev.attr, c->peak, (size_t)c->n_peak * sizeof *c->peak);
        e->start = NONE_STEP;
        e->resolved = step;
        e->clear_run = 0;
        emit(c, sink, &ev, step);
    }
    return 0;
}

void cc_anomaly_tick(const CcAnomaly *a, CcAnomalyCell *c, int64_t now_s, const CcAlertSink *sink)
{
    const CcAnomalySettings *s = &a->s;
    if (c->last_step < 0 || c->missing.start != NONE_STEP)
        return;
    int64_t after = s->missing_after_s > 0 ? s->missing_after_s : 3 * s->step_seconds;
    int64_t end = (c->last_step + 1) * s->step_seconds; /* end of the last step */
    if (now_s - end <= after)
        return;
    CcAlertEvent ev;
    c->missing.start = c->last_step + 1;
    c->missing.severity = CC_SEV_CRITICAL;
    c->missing.clear_run = 0;
    event_init(a, c, &ev, CC_ALERT_FIRING, CC_DQ_MISSING, -1, c->missing.start,
               now_s / s->step_seconds, CC_SEV_CRITICAL);
    emit(c, sink, &ev, c->missing.start);
}

/* ------------------------------------------------------------------ readers */

int64_t cc_anomaly_cell_scores(const CcAnomalyCell *c, double *z, double *score)
{
    int fresh = c->score_step >= 0 && c->score_step == c->last_step;
    if (z)
        for (int f = 0; f < c->F; f++)
            z[f] = fresh ? c->k[f].z : NAN;
    if (score)
        *score = c->score_step >= 0 ? c->score : NAN;
    return c->score_step;
}

void cc_anomaly_cell_profile(const CcAnomalyCell *c, double *expected, double *up, double *down)
{
    int fresh = c->score_step >= 0 && c->score_step == c->last_step;
    for (int f = 0; f < c->F; f++) {
        expected[f] = fresh ? c->k[f].pr_exp : NAN;
        up[f] = c->k[f].pr_pos;
        down[f] = c->k[f].pr_neg;
    }
}

void cc_anomaly_cell_cusum(const CcAnomalyCell *c, double *up, double *down)
{
    for (int f = 0; f < c->F; f++) {
        up[f] = c->k[f].cu_pos;
        down[f] = c->k[f].cu_neg;
    }
}

int cc_anomaly_cell_active(const CcAnomaly *a, const CcAnomalyCell *c, CcAlertEvent *out, int max)
{
    int n = 0;
#define ACTIVE(ep, r, kpi)                                                                       \
    do {                                                                                         \
        if ((ep)->start != NONE_STEP) {                                                          \
            if (n < max) {                                                                       \
                event_init(a, c, &out[n], CC_ALERT_FIRING, r, kpi, (ep)->start, c->last_step,    \
                           (ep)->severity);                                                      \
                if ((r) == CC_DQ_NONE) {                                                         \
                    out[n].score = (ep)->peak;                                                   \
                    out[n].n_attr = c->n_peak;                                                   \
                    memcpy(out[n].attr, c->peak, (size_t)c->n_peak * sizeof *c->peak);           \
                }                                                                                \
            }                                                                                    \
            n++;                                                                                 \
        }                                                                                        \
    } while (0)
    ACTIVE(&c->anom, CC_DQ_NONE, -1);
    ACTIVE(&c->zero, CC_DQ_ALL_ZERO, -1);
    ACTIVE(&c->missing, CC_DQ_MISSING, -1);
    for (int f = 0; f < c->F; f++) {
        ACTIVE(&c->k[f].stuck, CC_DQ_STUCK, f);
        ACTIVE(&c->k[f].bounds, CC_DQ_BOUNDS, f);
    }
#undef ACTIVE
    return n;
}

void cc_anomaly_cell_stats(const CcAnomalyCell *c, CcAnomalyCellStats *out)
{
    *out = c->st;
    out->anomaly_firing = c->anom.start != NONE_STEP;
    int dq = (c->zero.start != NONE_STEP) + (c->missing.start != NONE_STEP);
    for (int f = 0; f < c->F; f++)
        dq += (c->k[f].stuck.start != NONE_STEP) + (c->k[f].bounds.start != NONE_STEP);
    out->dq_firing = dq;
}

const char *cc_alert_kind_name(enum CcAlertKind k)
{
    return k == CC_ALERT_DATA_QUALITY ? "data_quality" : "anomaly";
}

const char *cc_alert_state_name(enum CcAlertState s)
{
    return s == CC_ALERT_RESOLVED ? "resolved" : "firing";
}

const char *cc_alert_severity_name(enum CcAlertSeverity s)
{
    return s == CC_SEV_CRITICAL ? "critical" : "warning";
}

const char *cc_dq_reason_name(enum CcDqReason r)
{
    switch (r) {
    case CC_DQ_STUCK: return "stuck";
    case CC_DQ_ALL_ZERO: return "all_zero";
    case CC_DQ_BOUNDS: return "bounds";
    case CC_DQ_MISSING: return "missing";
    default: return "none";
    }
}

/* ------------------------------------------------------------------ settings by name */

#define AK(field, type, lo, hi, doc) {#field, type, offsetof(CcAnomalySettings, field), lo, hi, doc}
static const CcAnomalyKey anomaly_keys[] = {
    AK(warn_z, CC_AKEY_DOUBLE, 0.1, 1e6, "warning threshold on |z| (default 4.5)"),
    AK(crit_z, CC_AKEY_DOUBLE, 0.1, 1e6, "critical threshold on |z| (default 6.75)"),
    AK(min_kpis, CC_AKEY_INT, 1, CC_MAX_FEATURES, "KPIs over threshold for a step to be over (default 1)"),
    AK(window_n, CC_AKEY_INT, 1, CC_ANOMALY_MAX_WINDOW, "n of k-of-n: steps in the window (default 3)"),
    AK(warn_k, CC_AKEY_INT, 1, CC_ANOMALY_MAX_WINDOW, "over steps in the window to fire (default 2)"),
    AK(crit_k, CC_AKEY_INT, 1, CC_ANOMALY_MAX_WINDOW, "critical steps in the window to fire critical (default 1)"),
    AK(resolve_m, CC_AKEY_INT, 1, 1000000, "consecutive clear steps to resolve (default 3)"),
    AK(cooldown_steps, CC_AKEY_INT, 0, 1000000, "steps after a resolution before a new anomaly alert (default 6)"),
    AK(sd_floor_rel, CC_AKEY_DOUBLE, 0, 1e6, "sd floor relative to |forecast mean| (default 0.01)"),
    AK(sd_floor_scale, CC_AKEY_DOUBLE, 0, 1e6, "sd floor relative to the KPI's normalisation scale (default 0.05)"),
    AK(interval_z, CC_AKEY_DOUBLE, 0.01, 100, "half-width in sd of the interval in alerts (default 1.2815516 = 80%)"),
    AK(warmup_steps, CC_AKEY_INT, 0, 100000000, "steps of a cell's sequence before its forecasts are scored (default 64)"),
    AK(lag_steps, CC_AKEY_INT, -1, CC_ANOMALY_MAX_LAG, "also score against the forecast made this many steps earlier; -1 = the model's horizon, 0 = off (default -1)"),
    AK(cusum_k, CC_AKEY_DOUBLE, 0, 1e6, "CUSUM reference value in |z| for sustained deviations (default 3)"),
    AK(cusum_h, CC_AKEY_DOUBLE, 0, 1e6, "CUSUM threshold: a KPI is over while its sum is at least this; 0 = off (default 6)"),
    AK(profile_k, CC_AKEY_DOUBLE, 0, 1e6, "seasonal-profile CUSUM reference value in |z| (default 1)"),
    AK(profile_h, CC_AKEY_DOUBLE, 0, 1e6, "seasonal-profile CUSUM threshold; 0 = no profile (default 20)"),
    AK(profile_unit_s, CC_AKEY_INT64, 1, 86400, "steps shorter than this count for that fraction of a step in the profile CUSUM (default 900)"),
    AK(profile_bin_s, CC_AKEY_INT64, 300, 86400, "seasonal-profile bin width in seconds, divides 86400 (default 3600)"),
    AK(profile_days, CC_AKEY_DOUBLE, 0.5, 1000, "time constant of each profile bin in days of its type (default 4)"),
    AK(profile_min_days, CC_AKEY_INT, 1, 1000, "days of data a profile bin needs before it is scored (default 2)"),
    AK(profile_utc_offset_s, CC_AKEY_INT64, -50400, 50400, "cells' local time minus UTC in seconds, for the profile's time of day and weekends (default 0)"),
    AK(stuck_steps, CC_AKEY_INT, 2, 1000000, "equal consecutive values of a varying KPI for a stuck alert (default 12)"),
    AK(stuck_min_change_rate, CC_AKEY_DOUBLE, 0, 1, "change rate a KPI needs to count as varying (default 0.5)"),
    AK(change_rate_steps, CC_AKEY_INT, 1, 1000000, "time constant of the change rate in steps (default 200)"),
    AK(stuck_run_factor, CC_AKEY_DOUBLE, 0, 1000, "a stuck run must also be this many times the longest recent normal run (default 2)"),
    AK(stuck_memory_steps, CC_AKEY_INT, 1, 100000000, "time constant of the longest recent run, steps (default 2000)"),
    AK(zero_steps, CC_AKEY_INT, 1, 1000000, "steps of all KPIs exactly 0 for an all_zero alert (default 6)"),
    AK(missing_after_s, CC_AKEY_INT64, 0, 1e12, "seconds without a step for a missing alert; 0 = 3 steps (default 0)"),
    AK(dq_resolve_steps, CC_AKEY_INT, 1, 1000000, "clear steps to resolve a data-quality alert (default 3)"),
    AK(dq_grace_steps, CC_AKEY_INT, 0, 1000000, "steps a KPI stays unscored after its data-quality alert (default 16)"),
};
#undef AK

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

int cc_anomaly_settings_set(CcAnomalySettings *s, const CcHparams *hp, const char *key,
                            const char *value, char *err, size_t errlen)
{
    double v;
    if (!key || !value)
        return cc_errf(err, errlen, -EINVAL, "alerts: missing key or value");
    if (!strncmp(key, "kpis.", 5)) {
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
            return cc_errf(err, errlen, -ENOENT, "alerts.%s: '%s' is not a KPI of the model", key,
                           kpi);
        CcAnomalyKpi *k = &s->kpi[f];
        const char *field = dot + 1;
        if (!strcmp(field, "enabled")) {
            if (!strcmp(value, "true") || !strcmp(value, "1") || !strcmp(value, "yes"))
                k->enabled = 1;
            else if (!strcmp(value, "false") || !strcmp(value, "0") || !strcmp(value, "no"))
                k->enabled = 0;
            else
                return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not true or false", key,
                               value);
            return 0;
        }
        if (!strcmp(field, "direction")) {
            if (!strcmp(value, "both"))
                k->direction = 0;
            else if (!strcmp(value, "up"))
                k->direction = 1;
            else if (!strcmp(value, "down"))
                k->direction = -1;
            else
                return cc_errf(err, errlen, -EINVAL, "alerts.%s: '%s' is not both, up or down",
                               key, value);
            return 0;
        }
        double *dst = !strcmp(field, "warn_z")     ? &k->warn_z
                      : !strcmp(field, "crit_z")   ? &k->crit_z
                      : !strcmp(field, "sd_floor") ? &k->sd_floor
                      : !strcmp(field, "min")      ? &k->min
                      : !strcmp(field, "max")      ? &k->max
                                                   : NULL;
        if (!dst && strcmp(field, "stuck_steps"))
            return cc_errf(err, errlen, -ENOENT,
                           "alerts.%s: unknown field '%s' (enabled, direction, warn_z, crit_z, "
                           "sd_floor, min, max, stuck_steps)",
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

/* ------------------------------------------------------------------ JSON */

typedef struct Js {
    char *p;
    size_t cap, len;
} Js;

static void js(Js *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void js(Js *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->p ? j->p + (j->len < j->cap ? j->len : j->cap) : NULL,
                      j->len < j->cap ? j->cap - j->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        j->len += (size_t)n;
}

static void js_str(Js *j, const char *s)
{
    js(j, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            js(j, "\\%c", c);
        else if (c < 0x20)
            js(j, "\\u%04x", c);
        else
            js(j, "%c", c);
    }
    js(j, "\"");
}

static void js_num(Js *j, double v)
{
    if (isfinite(v))
        js(j, "%.9g", v);
    else
        js(j, "null");
}

static void js_time(Js *j, int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    char b[32];
    if (gmtime_r(&tt, &tm) && strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm))
        js_str(j, b);
    else
        js(j, "null");
}

static void js_kpi(Js *j, const CcHparams *hp, int f)
{
    if (f < 0)
        js(j, "null");
    else if (hp && f < hp->n_features)
        js_str(j, hp->features[f]);
    else
        js(j, "\"kpi%d\"", f);
}

int cc_alert_event_json(const CcAlertEvent *ev, const CcHparams *hp, char *buf, size_t cap)
{
    Js j = {buf, cap, 0};
    js(&j, "{\"schema\":\"cellcast.alert/1\",\"id\":");
    js_str(&j, ev->id);
    js(&j, ",\"state\":\"%s\",\"kind\":\"%s\",\"reason\":\"%s\",\"severity\":\"%s\",\"cell_id\":",
       cc_alert_state_name(ev->state), cc_alert_kind_name(ev->kind), cc_dq_reason_name(ev->reason),
       cc_alert_severity_name(ev->severity));
    js_str(&j, ev->cell_id ? ev->cell_id : "");
    js(&j, ",\"kpi\":");
    js_kpi(&j, hp, ev->kpi);
    js(&j, ",\"start_step\":%lld,\"step\":%lld,\"start_time\":", (long long)ev->start_step,
       (long long)ev->step);
    js_time(&j, ev->start_ts);
    js(&j, ",\"time\":");
    js_time(&j, ev->ts);
    js(&j, ",\"score\":");
    js_num(&j, ev->score);
    js(&j, ",\"attribution\":[");
    for (int i = 0; i < ev->n_attr && i < CC_ALERT_MAX_ATTR; i++) {
        const CcAlertAttr *a = &ev->attr[i];
        js(&j, i ? ",{\"kpi\":" : "{\"kpi\":");
        js_kpi(&j, hp, a->kpi);
        js(&j, ",\"observed\":");
        js_num(&j, a->observed);
        js(&j, ",\"expected\":");
        js_num(&j, a->expected);
        js(&j, ",\"lo\":");
        js_num(&j, a->lo);
        js(&j, ",\"hi\":");
        js_num(&j, a->hi);
        js(&j, ",\"z\":");
        js_num(&j, a->z);
        if (a->cusum != 0) {
            js(&j, ",\"cusum\":");
            js_num(&j, a->cusum);
        }
        if (a->profile != 0) {
            js(&j, ",\"profile\":");
            js_num(&j, a->profile);
            js(&j, ",\"profile_expected\":");
            js_num(&j, a->profile_expected);
        }
        js(&j, "}");
    }
    js(&j, "]}");
    if (!buf || j.len >= cap)
        return -ENOSPC;
    return (int)j.len;
}

/* ------------------------------------------------------------------ serialisation */

typedef struct Buf {
    uint8_t *p;
    size_t cap, len;
} Buf;

static void put(Buf *b, const void *v, size_t n)
{
    if (b->p && b->len + n <= b->cap)
        memcpy(b->p + b->len, v, n); /* little-endian hosts only (checked at compile time) */
    b->len += n;
}
#define PUT(b, v) put(b, &(v), sizeof(v))

typedef struct Rd {
    const uint8_t *p;
    size_t len, off;
    int bad;
} Rd;

static void get(Rd *r, void *v, size_t n)
{
    if (r->off + n > r->len) {
        r->bad = 1;
        memset(v, 0, n);
        return;
    }
    memcpy(v, r->p + r->off, n);
    r->off += n;
}
#define GET(r, v) get(r, &(v), sizeof(v))

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "state format is little-endian");

static void put_ep(Buf *b, const Episode *e)
{
    PUT(b, e->start);
    PUT(b, e->resolved);
    PUT(b, e->clear_run);
    PUT(b, e->severity);
    PUT(b, e->peak);
}

static void get_ep(Rd *r, Episode *e)
{
    GET(r, e->start);
    GET(r, e->resolved);
    GET(r, e->clear_run);
    GET(r, e->severity);
    GET(r, e->peak);
}

long cc_anomaly_cell_save(const CcAnomalyCell *c, uint8_t *buf, size_t cap)
{
    Buf b = {buf, cap, 0};
    uint32_t magic = STATE_MAGIC, ver = STATE_VERSION, F = (uint32_t)c->F;
    PUT(&b, magic);
    PUT(&b, ver);
    PUT(&b, F);
    put(&b, c->id, sizeof c->id);
    PUT(&b, c->last_step);
    PUT(&b, c->exp_step);
    PUT(&b, c->score_step);
    PUT(&b, c->score);
    PUT(&b, c->over_bits);
    PUT(&b, c->crit_bits);
    PUT(&b, c->win_step);
    PUT(&b, c->zero_run);
    put_ep(&b, &c->anom);
    put_ep(&b, &c->zero);
    put_ep(&b, &c->missing);
    int32_t np = c->n_peak;
    PUT(&b, np);
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        int32_t kpi = c->peak[i].kpi;
        PUT(&b, kpi);
        PUT(&b, c->peak[i].observed);
        PUT(&b, c->peak[i].expected);
        PUT(&b, c->peak[i].lo);
        PUT(&b, c->peak[i].hi);
        PUT(&b, c->peak[i].z);
    }
    PUT(&b, c->quiet_until);
    PUT(&b, c->st.scored);
    PUT(&b, c->st.over);
    PUT(&b, c->st.firing);
    PUT(&b, c->st.resolved);
    PUT(&b, c->st.quiet);
    for (int f = 0; f < c->F; f++) {
        const KpiState *k = &c->k[f];
        PUT(&b, k->exp_mean);
        PUT(&b, k->exp_sd);
        PUT(&b, k->exp_scale);
        PUT(&b, k->z);
        PUT(&b, k->last_val);
        PUT(&b, k->change_rate);
        PUT(&b, k->run_max);
        PUT(&b, k->run);
        PUT(&b, k->has_last);
        PUT(&b, k->abs1);
        PUT(&b, k->absl);
        PUT(&b, k->n1);
        PUT(&b, k->nl);
        PUT(&b, k->cu_pos);
        PUT(&b, k->cu_neg);
        put_ep(&b, &k->stuck);
        put_ep(&b, &k->bounds);
    }
    int32_t L = c->L;
    PUT(&b, L);
    if (L > 0) {
        put(&b, c->lag_target, (size_t)L * sizeof *c->lag_target);
        put(&b, c->lag, (size_t)L * (size_t)c->F * 3 * sizeof *c->lag);
    }
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) /* version 3 */
        PUT(&b, c->peak[i].cusum);
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) { /* version 4 */
        PUT(&b, c->peak[i].profile);
        PUT(&b, c->peak[i].profile_expected);
    }
    for (int f = 0; f < c->F; f++) {
        const KpiState *k = &c->k[f];
        PUT(&b, k->pr_pos);
        PUT(&b, k->pr_neg);
        PUT(&b, k->pr_abs);
        PUT(&b, k->pr_n);
    }
    int32_t NB = c->NB;
    PUT(&b, NB);
    if (NB > 0) {
        put(&b, c->prof, (size_t)2 * NB * (size_t)c->F * sizeof *c->prof);
        put(&b, c->prof_n, (size_t)2 * NB * (size_t)c->F * sizeof *c->prof_n);
    }
    if (buf && b.len > cap)
        return -ENOSPC;
    return (long)b.len;
}

int cc_anomaly_cell_load(CcAnomalyCell *c, const uint8_t *buf, size_t len, char *err,
                         size_t errlen)
{
    Rd r = {buf, len, 0, 0};
    uint32_t magic, ver, F;
    GET(&r, magic);
    GET(&r, ver);
    GET(&r, F);
    if (r.bad || magic != STATE_MAGIC)
        return cc_errf(err, errlen, -EINVAL, "anomaly state: bad magic");
    if (ver < 1 || ver > STATE_VERSION)
        return cc_errf(err, errlen, -EINVAL,
                       "anomaly state: version %u, this build reads 1 to %u", ver,
                       STATE_VERSION);
    if ((int)F != c->F)
        return cc_errf(err, errlen, -EINVAL, "anomaly state: %u KPIs, the cell has %d", F, c->F);
    CcAnomalyCell t = *c; /* decode into a copy; commit only when complete */
    int bad_val = 0;      /* a decoded value out of its range */
    KpiState *ks = malloc((size_t)c->F * sizeof *ks);
    if (!ks)
        return cc_errf(err, errlen, -ENOMEM, "anomaly state: out of memory");
    get(&r, t.id, sizeof t.id);
    t.id[sizeof t.id - 1] = 0;
    GET(&r, t.last_step);
    GET(&r, t.exp_step);
    GET(&r, t.score_step);
    GET(&r, t.score);
    GET(&r, t.over_bits);
    GET(&r, t.crit_bits);
    GET(&r, t.win_step);
    GET(&r, t.zero_run);
    get_ep(&r, &t.anom);
    get_ep(&r, &t.zero);
    get_ep(&r, &t.missing);
    int32_t np;
    GET(&r, np);
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        int32_t kpi;
        GET(&r, kpi);
        t.peak[i].kpi = kpi;
        GET(&r, t.peak[i].observed);
        GET(&r, t.peak[i].expected);
        GET(&r, t.peak[i].lo);
        GET(&r, t.peak[i].hi);
        GET(&r, t.peak[i].z);
    }
    GET(&r, t.quiet_until);
    GET(&r, t.st.scored);
    GET(&r, t.st.over);
    GET(&r, t.st.firing);
    GET(&r, t.st.resolved);
    GET(&r, t.st.quiet);
    for (int f = 0; f < c->F; f++) {
        KpiState *k = &ks[f];
        GET(&r, k->exp_mean);
        GET(&r, k->exp_sd);
        GET(&r, k->exp_scale);
        GET(&r, k->z);
        GET(&r, k->last_val);
        GET(&r, k->change_rate);
        GET(&r, k->run_max);
        GET(&r, k->run);
        GET(&r, k->has_last);
        k->abs1 = k->absl = 0;
        k->n1 = k->nl = 0;
        if (ver >= 2) {
            GET(&r, k->abs1);
            GET(&r, k->absl);
            GET(&r, k->n1);
            GET(&r, k->nl);
            if (!(k->abs1 >= 0 && k->absl >= 0 && isfinite(k->abs1) && isfinite(k->absl)) ||
                k->n1 < 0 || k->nl < 0)
                bad_val = 1;
        }
        k->cu_pos = k->cu_neg = 0;
        if (ver >= 3) {
            GET(&r, k->cu_pos);
            GET(&r, k->cu_neg);
            if (!(k->cu_pos >= 0 && k->cu_neg >= 0 && isfinite(k->cu_pos) &&
                  isfinite(k->cu_neg)))
                bad_val = 1;
        }
        k->att_mul = 1;
        get_ep(&r, &k->stuck);
        get_ep(&r, &k->bounds);
    }
    int32_t L = 0;
    GET(&r, L);
    int64_t *lt = NULL;
    float *lv = NULL;
    if (!r.bad && L > 0 && L <= CC_ANOMALY_MAX_LAG) {
        lt = malloc((size_t)L * sizeof *lt);
        lv = malloc((size_t)L * (size_t)c->F * 3 * sizeof *lv);
        if (!lt || !lv) {
            free(lt);
            free(lv);
            free(ks);
            return cc_errf(err, errlen, -ENOMEM, "anomaly state: out of memory");
        }
        get(&r, lt, (size_t)L * sizeof *lt);
        get(&r, lv, (size_t)L * (size_t)c->F * 3 * sizeof *lv);
    }
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        t.peak[i].cusum = 0;
        if (ver >= 3) {
            GET(&r, t.peak[i].cusum);
            bad_val |= !isfinite(t.peak[i].cusum);
        }
    }
    /* version 4: the seasonal profile (older states start it empty) */
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        t.peak[i].profile = 0;
        t.peak[i].profile_expected = NAN;
        if (ver >= 4) {
            GET(&r, t.peak[i].profile);
            GET(&r, t.peak[i].profile_expected);
            bad_val |= !isfinite(t.peak[i].profile);
        }
    }
    for (int f = 0; f < c->F; f++) {
        KpiState *k = &ks[f];
        k->pr_pos = k->pr_neg = k->pr_abs = 0;
        k->pr_n = 0;
        k->pr_exp = NAN;
        if (ver >= 4) {
            GET(&r, k->pr_pos);
            GET(&r, k->pr_neg);
            GET(&r, k->pr_abs);
            GET(&r, k->pr_n);
            if (!(k->pr_pos >= 0 && k->pr_neg >= 0 && k->pr_abs >= 0 && isfinite(k->pr_pos) &&
                  isfinite(k->pr_neg) && isfinite(k->pr_abs)) ||
                k->pr_n < 0)
                bad_val = 1;
        }
    }
    int32_t NB = 0;
    float *pv = NULL;
    uint16_t *pn = NULL;
    if (ver >= 4)
        GET(&r, NB);
    if (!r.bad && NB > 0 && NB <= 288 && 86400 % NB == 0) {
        size_t cnt = (size_t)2 * NB * (size_t)c->F;
        pv = profile_block(NB, c->F, &pn);
        if (!pv) {
            free(lt);
            free(lv);
            free(ks);
            return cc_errf(err, errlen, -ENOMEM, "anomaly state: out of memory");
        }
        get(&r, pv, cnt * sizeof *pv);
        get(&r, pn, cnt * sizeof *pn);
        for (size_t i = 0; i < cnt && !r.bad; i++)
            bad_val |= !isfinite(pv[i]);
    }
    if (r.bad || bad_val || r.off != len || np < 0 || np > CC_ALERT_MAX_ATTR || L < 0 ||
        L > CC_ANOMALY_MAX_LAG || NB < 0 || NB > 288 || (NB > 0 && 86400 % NB != 0)) {
        free(pv);
        free(lt);
        free(lv);
        free(ks);
        return cc_errf(err, errlen, -EINVAL, "anomaly state: %s (%zu bytes)",
                       r.bad ? "truncated" : "malformed", len);
    }
    t.n_peak = np;
    memcpy(c->k, ks, (size_t)c->F * sizeof *ks);
    free(ks);
    free(c->lag);
    free(c->lag_target);
    t.k = c->k;
    t.L = L;
    t.lag = lv;
    t.lag_target = lt;
    free(c->prof);
    t.NB = NB;
    t.prof = pv;
    t.prof_n = pn;
    *c = t;
    return 0;
}
