/*
 * cc_anomaly_profile.c — the seasonal profile of each KPI: its usual value per bin of the
 * day, weekdays and weekends apart, which a forecaster that follows a slow drift or a long
 * shift no longer shows (cc_anomaly.h, "Seasonal profile"). Where a step falls in it, its
 * z against it, and how it learns.
 */
#include <errno.h>
#include <stdlib.h>

#include "cc_anomaly_profile.h"

float *cc_profile_block(int NB, int F, float **spread, uint16_t **counts)
{
    size_t cnt = (size_t)2 * NB * (size_t)F, nsc = (size_t)NB * (size_t)F;
    float *v = calloc(1, (cnt + nsc) * sizeof(float) + cnt * sizeof(uint16_t));
    *spread = v ? v + cnt : NULL;
    *counts = v ? (uint16_t *)(v + cnt + nsc) : NULL;
    return v;
}

int cc_profile_bins(const CcAnomalySettings *s)
{
    return s->profile_h > 0 ? (int)(86400 / s->profile_bin_s) : 0;
}

int cc_profile_alloc(CcAnomalyCell *c, int NB)
{
    if (NB == c->NB)
        return 0;
    uint16_t *n = NULL;
    float *sc = NULL;
    float *v = NB > 0 ? cc_profile_block(NB, c->F, &sc, &n) : NULL;
    if (NB > 0 && !v)
        return -ENOMEM;
    free(c->prof);
    c->prof = v, c->prof_sc = sc, c->prof_n = n, c->NB = NB;
    for (int f = 0; f < c->F; f++) {
        KpiState *k = &c->k[f];
        k->pr_pos = k->pr_neg = k->pr_abs = 0;
        k->pr_n = 0;
        k->pr_exp = NAN;
        k->pr_h = k->pc_rate = k->pc_exc = k->pc_exc2 = 0;
        k->pc_peak[0] = k->pc_peak[1] = 0;
        k->pc_n = k->pc_exc_n = 0;
    }
    return 0;
}

void cc_profile_pos(const CcAnomalySettings *s, int64_t step, int NB, ProfPos *p)
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

/* The bin's samples of both day types (PROFILE_SPREAD: its spread learns from both). */
static double spread_n(const CcAnomalyCell *c, int b, int f)
{
    size_t i = (size_t)b * c->F + f, type_stride = (size_t)c->NB * c->F;
    return (double)c->prof_n[i] + (double)c->prof_n[type_stride + i];
}

/* The scale bin b stands for (PROFILE_SPREAD): its usual |x − profile| less its noise, at
 * least the KPI's one scale. */
static double spread_of(const CcAnomalySettings *s, const CcAnomalyCell *c, const KpiState *k,
                        const ProfPos *p, int b, int f)
{
    double v = c->prof_sc[(size_t)b * c->F + f];
    if (!(v > k->pr_abs))
        return k->pr_abs;
    double days = fmin(spread_n(c, b, f) / p->per_day, PROFILE_SPREAD_DAYS * s->profile_days);
    double lo = days >= 1 ? v * (1 - PROFILE_SPREAD_REL_SD / sqrt(days)) : 0;
    return lo > k->pr_abs ? lo : k->pr_abs;
}

/* The step's bin learns |res| (PROFILE_SPREAD). */
static void spread_learn(const CcAnomalySettings *s, CcAnomalyCell *c, const KpiState *k,
                         const ProfPos *p, int f, double res)
{
    float *v = c->prof_sc + (size_t)p->bin * c->F + f;
    double cur = *v > 0 ? *v : k->pr_abs, a = fabs(res), n = spread_n(c, p->bin, f);
    if (a > LAGCAL_CLIP * cur)
        a = LAGCAL_CLIP * cur;
    double cap = PROFILE_SPREAD_DAYS * s->profile_days * p->per_day;
    cur += (a - cur) / fmax(1.0, n < cap ? n : cap);
    if (cur > 0)
        *v = (float)cur;
}

double cc_profile_step(const CcAnomalySettings *s, CcAnomalyCell *c, const ProfPos *p, int f,
                       int learn, int firing, double x, double *ref)
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
            /* PROFILE_SPREAD: the hour's own usual |x − profile| */
            double sp0 = spread_of(s, c, k, p, p->b0, f), sp1 = spread_of(s, c, k, p, p->b1, f);
            double spread = sp0 + p->w1 * (sp1 - sp0);
            /* the forecast's floors: a KPI that is usually exactly flat at some hour (0
             * drops at night) must not alert on a tiny change there */
            double sc = fmax(fmax(spread / GAUSS_MEAN_ABS, s->kpi[f].sd_floor),
                             fmax(s->sd_floor_rel * fabs(*ref), s->sd_floor_scale * k->exp_scale));
            if (sc > 0)
                z = res / sc;
        }
        if (learn) {
            if (k->pr_n >= LAGCAL_MIN_N && !firing)
                spread_learn(s, c, k, p, f, res);
            absmean_update(&k->pr_abs, &k->pr_n, res);
        }
    }
    if (!learn) /* a maintenance window (cc_anomaly_cell_freeze_learning) */
        return isfinite(z) ? z : NAN;
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
