/*
 * cc_anomaly.c — the anomaly scorer's contexts and cells, the expectations they are
 * scored against (one-step and lagged forecasts), and cc_anomaly_observe: one observation
 * through the rules in the order they apply (data quality, scoring of each KPI, the
 * lifecycle). cc_anomaly.h states the rules; cc_anomaly_cell.h holds the state and lists
 * the other files.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_anomaly_dq.h"
#include "cc_anomaly_lifecycle.h"
#include "cc_anomaly_profile.h"
#include "cc_anomaly_window.h"

/* The Gaussian quantile of |z| for probability q: Φ⁻¹((1 + q)/2). By bisection on erfc
 * (once per settings; 40 halvings: exact to 1e-11). */
static double gauss_abs_quantile(double q)
{
    double lo = 0, hi = 40, tail = 1 - q;
    for (int i = 0; i < 40; i++) {
        double mid = 0.5 * (lo + hi);
        if (erfc(mid / M_SQRT2) > tail)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* The settings and what is derived from them once, not at every step. */
static void settings_apply(CcAnomaly *a, const CcAnomalySettings *s)
{
    a->s = *s;
    a->zq = s->tail_q > 0 ? gauss_abs_quantile(s->tail_q) : 0;
    const int64_t n = (s->novelty_min_s + s->step_seconds - 1) / s->step_seconds;
    a->novelty_min_n = n < CC_NOVELTY_MAX_N ? (int32_t)n : CC_NOVELTY_MAX_N;
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
    settings_apply(a, s);
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
    settings_apply(a, s);
    return 0;
}

const CcAnomalySettings *cc_anomaly_settings(const CcAnomaly *a) { return &a->s; }

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
    c->lik = NAN;
    c->over_bits = c->crit_bits = 0;
    c->win_step = NONE_STEP;
    c->zero_run = 0;
    c->hold_run = c->hold_spent = 0;
    episode_init(&c->anom);
    episode_init(&c->zero);
    episode_init(&c->missing);
    c->live_last = NONE_STEP;
    memset(&c->trace, 0, sizeof c->trace);
    c->trace.fire_kpi = c->trace.hold_kpi = -1;
    c->n_peak = 0;
    c->quiet_until = NONE_STEP;
    memset(&c->st, 0, sizeof c->st);
    memset(c->echo, 0, sizeof c->echo);
    for (int i = 0; i < c->L; i++)
        c->lag_target[i] = NONE_STEP;
    for (int f = 0; f < c->F; f++) {
        KpiState *k = &c->k[f];
        memset(k, 0, sizeof *k);
        k->z = NAN;
        k->pr_exp = NAN;
        k->ll = NAN;
        k->att_mul = 1;
        k->change_rate = 1.0f;
        episode_init(&k->stuck);
        episode_init(&k->bounds);
        episode_init(&k->absent);
        k->absent_since = NONE_STEP;
        k->fb_mul = k->bar = 1;
    }
}

/* (Re)sizes the lag ring to L entries, emptied. 0 or -ENOMEM (ring unchanged). */
static int lag_alloc(CcAnomalyCell *c, int L)
{
    if (L == c->L)
        return 0;
    float *v = NULL;
    int64_t *t = L > 0 ? cc_lag_block(L, c->F, &v) : NULL;
    if (L > 0 && !t)
        return -ENOMEM;
    for (int i = 0; i < L; i++)
        t[i] = NONE_STEP;
    free(c->lag_target);
    c->lag_target = t, c->lag = v, c->L = L;
    return 0;
}

/* (Re)sizes shape novelty to the settings' w, ds and cats, every KPI's stage restarted
 * (none when shape_w is 0). 0 or -ENOMEM (the stage unchanged). */
static int shape_alloc(CcAnomalyCell *c, const CcAnomalySettings *s)
{
    const int w = s->shape_w, ds = w ? s->shape_ds : 0, cats = w ? s->shape_cats : 0;
    int64_t *used = NULL;
    float *box = NULL;
    CcShape *sh = w ? cc_shape_block(c->F, w, cats, &used, &box) : NULL;
    if (w && !sh)
        return -ENOMEM;
    free(c->shape);
    c->shape = sh, c->shape_used = used, c->shape_box = box;
    c->SW = w, c->SD = ds, c->SC = cats;
    return 0;
}

/* The ring entry of a target step. */
static int lag_index(const CcAnomalyCell *c, int64_t step)
{
    return (int)(((step % c->L) + c->L) % c->L);
}

/* The ring entry for target step `target`, claimed for it: its (F, 3) values to fill. */
static float *lag_claim(CcAnomalyCell *c, int64_t target)
{
    int i = lag_index(c, target);
    c->lag_target[i] = target;
    return c->lag + (size_t)i * c->F * 3;
}

int cc_anomaly_cell_open(CcAnomalyCell **out, const CcAnomaly *a, const char *cell_id)
{
    *out = NULL;
    if (!cell_id || strlen(cell_id) > CC_ANOMALY_CELL_ID_MAX)
        return -EINVAL;
    CcAnomalyCell *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->F = a->s.n_features;
    snprintf(c->id, sizeof c->id, "%s", cell_id);
    c->k = calloc((size_t)c->F, sizeof *c->k);
    if (!c->k || lag_alloc(c, a->s.lag_steps > 0 ? a->s.lag_steps : 0) ||
        cc_profile_alloc(c, cc_profile_bins(&a->s)) || shape_alloc(c, &a->s)) {
        cc_anomaly_cell_close(&c);
        return -ENOMEM;
    }
    cell_init(c);
    *out = c;
    return 0;
}

void cc_anomaly_cell_close(CcAnomalyCell **c)
{
    if (c && *c) {
        free((*c)->lag_target);
        free((*c)->prof);
        free((*c)->shape);
        free((*c)->k);
        free(*c);
        *c = NULL;
    }
}

const char *cc_anomaly_cell_id(const CcAnomalyCell *c) { return c->id; }

void cc_anomaly_cell_quiet_until(CcAnomalyCell *c, int64_t step) { c->quiet_until = step; }

void cc_anomaly_cell_freeze_learning(CcAnomalyCell *c, int on) { c->learn_frozen = on != 0; }

/* ------------------------------------------------------------------ expectations */

void cc_anomaly_set_expect(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const double *mean,
                           const double *sd, const double *scale)
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
    float *e = lag_claim(c, step);
    for (int f = 0; f < c->F; f++, e += 3) {
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
        float *e = lag_claim(c, fc->step + c->L);
        for (int f = 0; f < c->F; f++, e += 3) {
            double m, sd;
            cc_forecast_point(fc, f, c->L - 1, &m, &sd);
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

/* ------------------------------------------------------------------ scoring */

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

/* What scoring one step needs to know about the cell, found once per step. */
typedef struct StepCtx {
    int64_t step;
    int have_one;          ///< the one-step expectation is for this step
    const float *lag;      ///< the lagged expectation for this step, (F, 3); NULL if none
    int cell_blocked;      ///< a cell-wide DQ alert (all_zero, missing) holds every KPI
    int firing;            ///< the anomaly episode fires, or a maintenance window holds the
                           ///< cell: the calibrations are frozen
    const ProfPos *pp;     ///< where the step falls in the profile; NULL: no profile
    double zq;             ///< the Gaussian |z| quantile of tail_q (0 when off)
    int32_t novelty_min_n; ///< values a range must hold before novelty (CcAnomaly's)
} StepCtx;

/* Steps of the day before (see ECHO_BITS): the deviation marks of one step. */
static int echo_get(const CcAnomalyCell *c, int64_t t)
{
    int64_t i = ((t % ECHO_BITS) + ECHO_BITS) % ECHO_BITS;
    return (int)((c->echo[i / 64] >> (i % 64)) & 1u);
}

static void echo_put(CcAnomalyCell *c, int64_t t, int on)
{
    int64_t i = ((t % ECHO_BITS) + ECHO_BITS) % ECHO_BITS;
    uint64_t b = (uint64_t)1 << (i % 64);
    c->echo[i / 64] = on ? c->echo[i / 64] | b : c->echo[i / 64] & ~b;
}

/* The lagged forecast for `step` echoes a deviation of the day before (see ECHO_BITS):
 * the cell deviated within lag_echo steps of the same time one day earlier. */
static int lag_echo(const CcAnomalySettings *s, const CcAnomalyCell *c, int64_t step)
{
    int64_t day = 86400 / s->step_seconds, w = s->lag_echo < 0 ? c->L : s->lag_echo;
    w = w < day ? w : day - 1;
    if (w <= 0 || day + w >= ECHO_BITS)
        return 0;
    for (int64_t t = step - day - w; t <= step - day + w; t++)
        if (echo_get(c, t))
            return 1;
    return 0;
}

static void step_begin(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, StepCtx *x, ProfPos *pp)
{
    const CcAnomalySettings *s = &a->s;
    int lag_i = c->L > 0 ? lag_index(c, step) : 0;
    x->step = step;
    x->have_one = c->exp_step == step;
    x->lag = c->L > 0 && c->lag_target[lag_i] == step ? c->lag + (size_t)lag_i * c->F * 3 : NULL;
    x->cell_blocked = cc_dq_blocks(s, &c->zero, step) || cc_dq_blocks(s, &c->missing, step);
    x->firing = c->anom.start != NONE_STEP || c->learn_frozen;
    if (x->lag && lag_echo(s, c, step))
        x->lag = NULL;
    x->zq = a->zq;
    x->novelty_min_n = a->novelty_min_n;
    int nb = cc_profile_bins(s);
    if (c->NB != nb)
        cc_profile_alloc(c, nb); /* settings reloaded; on -ENOMEM the old one stays */
    if (c->SW != s->shape_w || (s->shape_w && (c->SD != s->shape_ds || c->SC != s->shape_cats)))
        shape_alloc(c, s); /* settings reloaded; on -ENOMEM the old one stays */
    x->pp = NULL;
    if (nb > 0 && c->NB == nb) {
        cc_profile_pos(s, step, c->NB, pp);
        x->pp = pp;
    }
}

/* z of KPI f: against the one-step expectation and the calibrated lagged one, the larger
 * (the attribution's expectation is set to the one it came from); *zc gets what the
 * CUSUM sees: the calibrated lagged z, NaN if none. The lag calibration learns here. */
static double kpi_z(const CcAnomalySettings *s, KpiState *k, const StepCtx *x, int f, double v,
                    double *zc)
{
    double z = x->have_one ? zscore(s, f, v, k->exp_mean, k->exp_sd, k->exp_scale) : NAN;
    *zc = NAN;
    k->att_mean = k->exp_mean;
    k->att_sd = k->exp_sd;
    k->att_scale = k->exp_scale;
    k->att_mul = 1;
    if (!x->lag)
        return z;
    const float *e = x->lag + (size_t)f * 3;
    double zl = zscore(s, f, v, e[0], e[1], e[2]);
    double g = lagcal_factor(k);
    if (!x->firing && isfinite(z) && isfinite(zl)) {
        absmean_update(&k->abs1, &k->n1, z);
        absmean_update(&k->absl, &k->nl, zl);
    }
    zl *= g;
    *zc = zl;
    if (isfinite(zl) && !(fabs(z) >= fabs(zl))) {
        z = zl;
        k->att_mean = e[0];
        k->att_sd = e[1];
        k->att_scale = e[2];
        k->att_mul = g;
    }
    return z;
}

/* The tail calibration of KPI f (see TAIL_RATE): the factor of this step's z, from the
 * quantile of z's sign tracked so far, then that quantile learns |z| (not while firing). */
static double tail_factor(const CcAnomalySettings *s, KpiState *k, int firing, double z, double zq)
{
    if (!(s->tail_q > 0))
        return 1;
    double *t = z < 0 ? &k->tail_lo : &k->tail, *o = z < 0 ? &k->tail : &k->tail_lo;
    int32_t *n = z < 0 ? &k->tail_lo_n : &k->tail_n, no = z < 0 ? k->tail_n : k->tail_lo_n;
    if (!(*t > 0))
        *t = zq;
    /* a sign with too few steps of its own is scored by the larger of the two quantiles
     * once both together have enough (the one tail of before: a KPI's first days, or a
     * sign that is rare, are not scored as the bare forecast says while the other sign
     * already shows the residuals' tail) */
    double q = *n >= TAIL_MIN_N ? *t : *n + no >= TAIL_MIN_N ? fmax(*t, *o > 0 ? *o : zq) : 0;
    double g = q > zq ? zq / q : 1;
    if (!firing && isfinite(z))
        cc_tail_learn_every(s, t, n, z, 2.0);
    return g;
}

/* The excess over u that a generalised Pareto tail with mean excess m and mean squared
 * excess m2 passes with probability 1/r of u's (see BAR_U): by the method of moments,
 * ξ = (1 − m²/v)/2 (v the variance; ξ kept in [0, BAR_XI_MAX]: a light tail is taken as
 * exponential) and σ = m·(1 − ξ); the excess is σ·(r^ξ − 1)/ξ, σ·ln r at ξ = 0. */
static double bar_excess(double m, double m2, double r)
{
    double v = m2 - m * m, xi = v > 0 ? 0.5 * (1 - m * m / v) : 0;
    xi = xi < 0 ? 0 : xi > BAR_XI_MAX ? BAR_XI_MAX : xi;
    double sigma = m * (1 - xi);
    return xi > 1e-6 ? sigma * (pow(r, xi) - 1) / xi : sigma * log(r);
}

/* The KPI's own bar (see BAR_U): k->own_bar gets the warning bar of this step from the tail
 * fitted so far (0: kpi_warn's), then the fit learns |z| (not while firing). */
static void bar_step(const CcAnomalySettings *s, KpiState *k, int f, int firing, double z)
{
    k->own_bar = 0;
    if (!(s->bar_p > 0) || s->kpi[f].warn_z > 0)
        return;
    const double u = BAR_U * k->bar_abs / GAUSS_MEAN_ABS, az = fabs(z);
    if (k->bar_n >= BAR_MIN_N && k->bar_exc_n >= BAR_MIN_EXC && k->bar_rate > s->bar_p) {
        double bar = u + bar_excess(k->bar_exc, k->bar_exc2, k->bar_rate / s->bar_p);
        k->own_bar = bar < s->bar_floor ? s->bar_floor : bar > s->warn_z ? s->warn_z : bar;
    }
    if (firing || !isfinite(z))
        return;
    if (k->bar_n > 0 && az > u) {
        double e = az - u;
        if (k->bar_exc_n > 0 && e > BAR_CLIP * k->bar_exc)
            e = BAR_CLIP * k->bar_exc;
        if (k->bar_exc_n < BAR_EXC_N)
            k->bar_exc_n++;
        k->bar_exc += (e - k->bar_exc) / k->bar_exc_n;
        k->bar_exc2 += (e * e - k->bar_exc2) / k->bar_exc_n;
    }
    if (k->bar_n < BAR_STEPS)
        k->bar_n++;
    k->bar_rate += ((k->bar_n > 1 && az > u ? 1.0 : 0.0) - k->bar_rate) / k->bar_n;
    /* the scale u follows faster than the rate (like the lag calibration's means) */
    double v = k->bar_n > 1 && az > LAGCAL_CLIP * k->bar_abs ? LAGCAL_CLIP * k->bar_abs : az;
    k->bar_abs += (v - k->bar_abs) / (k->bar_n < LAGCAL_STEPS ? k->bar_n : LAGCAL_STEPS);
}

/* The profile CUSUM's own threshold (PROFILE_CAL): k->pr_h gets this step's from the
 * excursions fitted so far (never under profile_h), then the fit learns the sums' ends. */
static void profile_cal_step(const CcAnomalySettings *s, KpiState *k, int firing)
{
    const double h = s->profile_h, u = PROFILE_CAL_U * h;
    const double weeks = s->profile_fa_weeks;
    const double p = (double)s->step_seconds / (weeks * 7 * 86400);
    const double steps = PROFILE_SPREAD_DAYS * s->profile_days * 86400 / (double)s->step_seconds;
    k->pr_h = h;
    if (!(weeks > 0))
        return;
    if (k->pc_n >= PROFILE_CAL_MIN_DAYS * 86400 / s->step_seconds && k->pc_exc_n >= BAR_MIN_EXC &&
        k->pc_rate > p) {
        double he = u + bar_excess(k->pc_exc, k->pc_exc2, k->pc_rate / p);
        if (he > h)
            k->pr_h = he;
    }
    const double sums[2] = {k->pr_pos, k->pr_neg};
    int ended = 0;
    for (int d = 0; d < 2; d++) {
        if (!firing && sums[d] > k->pc_peak[d])
            k->pc_peak[d] = sums[d];
        if (sums[d] > 0)
            continue;
        if (k->pc_peak[d] > u) {
            double e = k->pc_peak[d] - u;
            if (k->pc_exc_n > 0 && e > BAR_CLIP * k->pc_exc)
                e = BAR_CLIP * k->pc_exc;
            if (k->pc_exc_n < BAR_EXC_N)
                k->pc_exc_n++;
            k->pc_exc += (e - k->pc_exc) / k->pc_exc_n;
            k->pc_exc2 += (e * e - k->pc_exc2) / k->pc_exc_n;
            ended++;
        }
        k->pc_peak[d] = 0;
    }
    if (firing && !ended)
        return;
    if (k->pc_n < steps)
        k->pc_n++;
    k->pc_rate += (ended - k->pc_rate) / k->pc_n;
}

/* The KPI's sustained-deviation sums: the CUSUM of zc (else z) and the profile's of zp. */
static void kpi_sums(const CcAnomalySettings *s, KpiState *k, int firing, double z, double zc,
                     double zp)
{
    if (s->cusum_h > 0)
        cc_cusum_step(&k->cu_pos, &k->cu_neg, isfinite(zc) ? zc : z, s->cusum_k, 1);
    /* steps shorter than profile_unit_s count for that fraction of a step: a deviation
     * from the usual value persists over minutes, and 2-minute steps would otherwise
     * count one slow wobble many times over */
    if (isfinite(zp))
        cc_cusum_step(&k->pr_pos, &k->pr_neg, zp, s->profile_k,
                      fmin(1.0, (double)s->step_seconds / (double)s->profile_unit_s));
    if (isfinite(zp))
        profile_cal_step(s, k, firing);
}

/* The false-alarm bar factor of KPI k at data step `step` (cc_anomaly.h, Feedback): 1 +
 * (m₀ − 1)·2^(−Δt/half_life), Δt the data time since the last verdict (none before it). */
static double feedback_bar(const CcAnomalySettings *s, const KpiState *k, int64_t step)
{
    if (!(k->fb_mul > 1))
        return 1;
    double dt = (double)(step - k->fb_step) * (double)s->step_seconds;
    if (dt <= 0)
        return k->fb_mul;
    return 1 + (k->fb_mul - 1) * exp2(-dt / (double)s->feedback_half_life_s);
}

double cc_anomaly_cell_bar(const CcAnomaly *a, const CcAnomalyCell *c, int kpi, int64_t step)
{
    if (kpi < 0 || kpi >= c->F)
        return 1;
    return feedback_bar(&a->s, &c->k[kpi], step < 0 ? c->last_step : step);
}

double cc_anomaly_cell_feedback(const CcAnomaly *a, CcAnomalyCell *c, int kpi, int64_t step)
{
    if (kpi < 0 || kpi >= c->F)
        return -EINVAL;
    if (step < 0)
        step = c->last_step > 0 ? c->last_step : 0;
    KpiState *k = &c->k[kpi];
    double m = feedback_bar(&a->s, k, step) * CC_FEEDBACK_STEP;
    k->fb_mul = m < CC_FEEDBACK_MAX ? m : CC_FEEDBACK_MAX;
    k->fb_step = step;
    return k->fb_mul;
}

/* The window rule is live (CcEpisodeTrace): a window of steps like this one, z clipped as
 * its ring clips it, in the window's direction, would be over (unit: see cc_window_z). */
static int window_live(const CcAnomalySettings *s, double z, double zw, double unit, double thr)
{
    double zs = z > s->warn_z ? s->warn_z : z < -s->warn_z ? -s->warn_z : z;
    return zs * zw > 0 && fabs(zs) * unit >= thr;
}

/* Counts KPI f over (|z| over its threshold in its direction, else by a CUSUM: zc is what
 * its CUSUM saw, zp the profile z; the window rule, wunit its unit; the anomaly likelihood;
 * a novel value or shape in its direction, k->novel) and critical (by |z| only). Which
 * rules are over and whether one is live go to the verdict's trace fields only. */
static void kpi_verdict(const CcAnomalySettings *s, const KpiState *k, int f, double z, double zc,
                        double zp, double zw, double wunit, StepVerdict *v)
{
    double az = fabs(z);
    int dir = s->kpi[f].direction;
    int way = dir == 0 || (dir > 0 && z > 0) || (dir < 0 && z < 0);
    int wway = dir == 0 || (dir > 0 && zw > 0) || (dir < 0 && zw < 0);
    /* k->bar: an operator's false-alarm verdicts raise the z thresholds (feedback_bar) */
    double lo = kpi_lik_over(s, f),
           wthr = (s->window_z > 0 ? s->window_z : kpi_warn(s, f)) * k->bar;
    int over = 0, live = 0;
    if (way && az >= kpi_bar(s, k, f) * k->bar) {
        over |= CC_RULE_Z, live |= CC_RULE_Z;
        if (az >= kpi_bar_crit(s, k, f) * k->bar)
            v->n_crit++;
    }
    if (isfinite(zw) && wway && fabs(zw) >= wthr) {
        over |= CC_RULE_WINDOW;
        live |= window_live(s, z, zw, wunit, wthr) ? CC_RULE_WINDOW : 0;
    }
    if (cusum_over(s, k, f)) {
        over |= CC_RULE_CUSUM;
        live |=
            cc_cusum_live(k->cu_pos, k->cu_neg, s->cusum_h, s->cusum_k, dir, isfinite(zc) ? zc : z)
                ? CC_RULE_CUSUM
                : 0;
    }
    if (lo > 0 && way && k->ll >= lo) {
        over |= CC_RULE_LIKELIHOOD;
        live |= cc_lik_of(&k->lik, cc_lik_raw(z)) >= lo ? CC_RULE_LIKELIHOOD : 0;
    }
    if (novel_in_direction(s, k, f))
        over |= CC_RULE_NOVELTY, live |= CC_RULE_NOVELTY;
    if (isfinite(zp)) {
        /* the profile's sums hold the KPI over while over profile_h in its direction and,
         * with sustained_live, while the step's own zp is past profile_k in the direction
         * of a sum that is over (a sum that only decays does not hold it: under k it decays
         * by k − zp a step, which near k takes days) */
        const double ph = profile_h_of(s, k);
        int plive = cc_cusum_live(k->pr_pos, k->pr_neg, ph, s->profile_k, dir, zp);
        if (s->sustained_live ? plive : cc_cusum_over(k->pr_pos, k->pr_neg, ph, dir)) {
            over |= CC_RULE_PROFILE;
            live |= plive ? CC_RULE_PROFILE : 0;
        }
    }
    if (s->sustained_live >= 2) /* every rule, not only the profile's, holds while live */
        over &= live;
    if (!over)
        return;
    v->n_over++;
    v->rules |= over;
    if (!(v->over_az >= az))
        v->over_az = az, v->over_kpi = f;
    if (live) {
        v->n_live++;
    } else {
        v->hold_rules |= over;
        if (!(v->hold_az >= az))
            v->hold_az = az, v->hold_kpi = f;
    }
}

/* One KPI's scoring, in order: unobserved or disabled KPIs are skipped; the profile
 * learns (unless a DQ alert holds the KPI), with or without a forecast; held KPIs are
 * counted as suppressed; then its z, its sums, and whether it is over. */
static void score_kpi(const CcAnomalySettings *s, CcAnomalyCell *c, const StepCtx *x, int f,
                      const float *values, const uint8_t *mask, StepVerdict *v)
{
    KpiState *k = &c->k[f];
    k->z = NAN;
    k->pr_exp = NAN;
    k->ll = NAN;
    k->novel = 0;
    k->novel_kind = CC_NOVEL_NONE;
    if (!kpi_observed(values, mask, f) || !s->kpi[f].enabled)
        return;
    int blocked = x->cell_blocked || cc_dq_blocks(s, &k->stuck, x->step) ||
                  cc_dq_blocks(s, &k->bounds, x->step) || cc_dq_blocks(s, &k->absent, x->step);
    /* the DQ alert has taken over (the episode counts these steps clear): sums charged
     * before it restart, or scoring would resume with them still over and raise an episode
     * of their own, draining over a deviation long gone (issue 13: episodes of no live
     * deviation after an outage, tests/unit/test_episodes.c) */
    if (blocked)
        k->cu_pos = k->cu_neg = k->pr_pos = k->pr_neg = 0;
    double zp = NAN, pref = NAN;
    if (x->pp && !blocked)
        zp = cc_profile_step(s, c, x->pp, f, !c->learn_frozen, x->firing, values[f], &pref);
    if (!x->have_one && !x->lag)
        return;
    if (blocked) {
        v->n_supp++;
        return;
    }
    double zc, z = kpi_z(s, k, x, f, values[f], &zc);
    if (!isfinite(z))
        return;
    double g = tail_factor(s, k, x->firing, z, x->zq);
    z *= g;
    zc *= g;
    bar_step(s, k, f, x->firing, z);
    double wunit, zw = cc_window_z(s, k, x->firing, z, x->zq, &wunit);
    /* only where the rule can use it, like the window rule: off, the default path skips it */
    if (kpi_lik_over(s, f) > 0)
        k->ll = cc_lik_step(&k->lik, s->lik_short_n, s->lik_long_steps, cc_lik_raw(z), 1);
    CcNovelty range = k->nov; /* a maintenance window's values do not widen it */
    k->novel = cc_novelty_step(&k->nov, values[f], kpi_novelty_tol(s, f), x->novelty_min_n);
    if (c->learn_frozen)
        k->nov = range;
    k->novel_kind = k->novel ? CC_NOVEL_VALUE : CC_NOVEL_NONE;
    if (s->shape_w > 0 && c->SW == s->shape_w && s->kpi[f].shape == 0) {
        const CcShapeParams sp = {c->SW, c->SD, s->shape_rho, c->SC, s->shape_warm, s->shape_quiet};
        int sn = cc_shape_step(&c->shape[f], shape_box_of(c, f), shape_used_of(c, f), &sp,
                               values[f], k->nov.lo, k->nov.hi);
        if (sn && !k->novel) {
            k->novel = sn;
            k->novel_kind = CC_NOVEL_SHAPE;
        }
    }
    k->z = z;
    v->n_scored++;
    if (!(v->score >= fabs(z)))
        v->score = fabs(z);
    kpi_sums(s, k, x->firing, z, zc, zp);
    k->pr_exp = pref;
    if (isfinite(zw) && !(v->score >= fabs(zw)))
        v->score = fabs(zw);
    k->bar = feedback_bar(s, k, x->step);
    kpi_verdict(s, k, f, z, zc, zp, zw, wunit, v);
}

/* The rules of one observation in the order they apply: data quality first (what it
 * holds is not scored), then each KPI's scoring, then the cell step's lifecycle. */
int cc_anomaly_observe(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                       const uint8_t *mask, const CcAlertSink *sink)
{
    if (c->last_step >= 0 && step <= c->last_step)
        return -EALREADY;
    int64_t prev = c->last_step;
    c->last_step = step;
    cc_dq_observe(a, c, step, values, mask, sink);
    StepCtx x;
    ProfPos pp;
    step_begin(a, c, step, &x, &pp);
    StepVerdict v = {0, 0, 0, 0, NAN, 0, 0, 0, -1, -1, -1, -1};
    c->lik = NAN;
    for (int f = 0; f < c->F; f++) {
        score_kpi(&a->s, c, &x, f, values, mask, &v);
        if (!isnan(c->k[f].ll) && !(c->lik >= c->k[f].ll))
            c->lik = c->k[f].ll;
    }
    /* the deviation mark of this step (and none for the steps skipped since the last) */
    for (int64_t t = prev + 1 > step - ECHO_BITS ? prev + 1 : step - ECHO_BITS + 1; t < step; t++)
        echo_put(c, t, 0);
    int dev = x.cell_blocked || v.n_over > 0;
    for (int f = 0; f < c->F && !dev; f++)
        dev = isfinite(c->k[f].z) && fabs(c->k[f].z) >= a->s.cusum_k;
    echo_put(c, step, dev);
    cc_anomaly_lifecycle_step(a, c, step, values, &v, sink);
    return 0;
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

double cc_anomaly_cell_likelihood(const CcAnomalyCell *c, double *ll)
{
    for (int f = 0; ll && f < c->F; f++)
        ll[f] = c->k[f].ll;
    return c->lik;
}

void cc_anomaly_cell_cusum(const CcAnomalyCell *c, double *up, double *down)
{
    for (int f = 0; f < c->F; f++) {
        up[f] = c->k[f].cu_pos;
        down[f] = c->k[f].cu_neg;
    }
}
