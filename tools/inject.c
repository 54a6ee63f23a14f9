/* inject.c — labelled anomalies injected into a cell's test rows (see inject.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "cc_model.h"
#include "cc_rng.h"
#include "inject.h"

const char *const cct_inject_type_name[CCT_INJ_TYPES] = {"spike", "level_shift", "outage",  "drift",
                                                         "surge", "drop",        "labelled"};

static double unif(uint64_t *s, double lo, double hi) { return lo + (hi - lo) * cc_rng_uniform(s); }

static int irange(uint64_t *s, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(cc_rng_next(s) % (uint64_t)(hi - lo + 1));
}

int cct_inject_add_label(CctInjectSeries *c, CctLabel l)
{
    if (c->n_lab == c->cap_lab) {
        int cap = c->cap_lab ? 2 * c->cap_lab : 16;
        CctLabel *p = realloc(c->lab, (size_t)cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        c->lab = p;
        c->cap_lab = cap;
    }
    c->lab[c->n_lab++] = l;
    return 0;
}

/* Per KPI: std over the history rows (all rows without history; 1 when there is none) and
 * the clamp (0 when no history value is negative, else -inf). */
static void history_scale(const CctInjectSeries *c, double *sd, double *lo)
{
    const int F = c->F, h1 = c->test0 > 0 ? c->test0 : c->T;
    for (int f = 0; f < F; f++) {
        double s1 = 0, s2 = 0, mn = INFINITY;
        int k = 0;
        for (int i = 0; i < h1; i++)
            if (c->mask[(size_t)i * F + f]) {
                double v = c->x[(size_t)i * F + f];
                s1 += v;
                s2 += v * v;
                mn = v < mn ? v : mn;
                k++;
            }
        double mu = k ? s1 / k : 0;
        sd[f] = k > 1 ? sqrt(fmax(s2 / k - mu * mu, 0)) : 1;
        if (!(sd[f] > 0))
            sd[f] = 1;
        lo[f] = k && mn >= 0 ? 0 : -INFINITY;
    }
}

/* Places l (its type set) of len steps in the slot starting at row a: length capped at
 * half the slot, start, KPI (none for outages); returns the sign drawn (up with p = 0.7
 * for spikes, else 0.5). Both protocols draw in this order. */
static double place_label(const CctInjectSettings *s, CctLabel *l, int a, int len, uint64_t *rng)
{
    if (len > s->spacing / 2)
        len = s->spacing / 2 > 0 ? s->spacing / 2 : 1;
    l->start = a + irange(rng, 0, s->spacing / 4);
    l->end = l->start + len;
    if (l->type != CCT_INJ_OUTAGE)
        l->kpi = s->kpis[irange(rng, 0, s->n_kpis - 1)];
    return unif(rng, 0, 1) < (l->type == CCT_INJ_SPIKE ? 0.7 : 0.5) ? 1 : -1;
}

/* The label of the injection in the slot starting at row a (draws in a fixed order). */
static CctLabel draw_label(const CctInjectSettings *s, int type, int a, uint64_t *rng)
{
    CctLabel l = {type, -1, 0, 0, 0};
    int len;
    switch (type) {
    case CCT_INJ_SPIKE: len = irange(rng, 1, 3); break;
    case CCT_INJ_SHIFT: len = irange(rng, 20, 60); break;
    case CCT_INJ_OUTAGE: len = irange(rng, 10, 40); break;
    default: len = irange(rng, 30, 60); break;
    }
    double sign = place_label(s, &l, a, len, rng);
    switch (type) {
    case CCT_INJ_SPIKE: l.mag = sign * unif(rng, 3, 6); break;
    case CCT_INJ_SHIFT: l.mag = sign * unif(rng, 1.5, 3); break;
    case CCT_INJ_DRIFT: l.mag = sign * unif(rng, 2, 4); break;
    default: l.mag = 0;
    }
    l.mag *= s->mag_scale;
    return l;
}

static void apply_label(CctInjectSeries *c, const CctLabel *l, const double *sd, const double *lo)
{
    const int F = c->F, len = l->end - l->start;
    for (int i = l->start; i < l->end; i++) {
        if (l->type == CCT_INJ_OUTAGE) {
            for (int f = 0; f < F; f++) {
                c->x[(size_t)i * F + f] = 0;
                c->mask[(size_t)i * F + f] = 1;
            }
            continue;
        }
        size_t ix = (size_t)i * F + l->kpi;
        double d = l->mag * sd[l->kpi];
        if (l->type == CCT_INJ_DRIFT)
            d *= (double)(i - l->start + 1) / len;
        double v = c->x[ix] + d;
        c->x[ix] = (float)(v < lo[l->kpi] ? lo[l->kpi] : v);
        c->mask[ix] = 1;
    }
}

void cct_inject_spread(const CctInjectSeries *c, int h1, int L, double *sd)
{
    const int F = c->F;
    for (int f = 0; f < F; f++) {
        /* m_L(t) over complete windows only: a running sum and count of observed rows */
        double s1 = 0, s2 = 0, win = 0;
        int k = 0, obs = 0;
        sd[f] = 1;
        double *m = malloc((size_t)(h1 > 0 ? h1 : 1) * sizeof *m);
        if (!m)
            continue;
        for (int t = 0; t < h1; t++) {
            size_t ix = (size_t)t * F + f;
            if (c->mask[ix]) {
                win += c->x[ix];
                obs++;
            }
            if (t >= L && c->mask[(size_t)(t - L) * F + f]) {
                win -= c->x[(size_t)(t - L) * F + f];
                obs--;
            }
            m[t] = t >= L - 1 && obs == L ? win / L : NAN;
            if (t >= 2 * L - 1 && !isnan(m[t]) && !isnan(m[t - L])) {
                double d = m[t] - m[t - L];
                s1 += d;
                s2 += d * d;
                k++;
            }
        }
        free(m);
        double mu = k ? s1 / k : 0, v = k ? s2 / k - mu * mu : 0;
        if (k >= 4 && v > 0)
            sd[f] = sqrt(v / 2);
    }
}

/* The noise-aware protocol's label in the slot starting at row a (draws in a fixed order). */
static CctLabel draw_noise_label(const CctInjectSettings *s, int type, int a, uint64_t *rng)
{
    CctLabel l = {type, -1, 0, 0, 0};
    const double S = s->step_seconds > 0 ? (double)s->step_seconds : 120.0;
    int len = (int)lround(unif(rng, 10, 60) * 60.0 / S);
    if (type == CCT_INJ_SPIKE)
        len = 1;
    else if (len < 2)
        len = 2;
    double sign = place_label(s, &l, a, len, rng);
    if (type == CCT_INJ_SURGE)
        sign = 1;
    else if (type == CCT_INJ_DROP)
        sign = -1;
    l.mag = type == CCT_INJ_OUTAGE ? 0 : sign * unif(rng, 3, 6) * s->mag_scale;
    return l;
}

/* The noise-aware protocol's injection of l, σ = σ_L of its KPI on the clean rows. */
static void apply_noise_label(CctInjectSeries *c, const CctLabel *l, double sigma, const double *lo)
{
    const int F = c->F, L = l->end - l->start;
    if (l->type == CCT_INJ_OUTAGE) {
        apply_label(c, l, lo, lo); /* σ not used */
        return;
    }
    for (int i = l->start; i < l->end; i++) {
        size_t ix = (size_t)i * F + l->kpi;
        double d = l->mag * sigma;
        if (l->type == CCT_INJ_SURGE) /* sin(π(j+½)/L) averages ≈ 2/π over the event */
            d *= sin(M_PI * (i - l->start + 0.5) / L) * M_PI / 2;
        double v = c->x[ix] + d;
        c->x[ix] = (float)(v < lo[l->kpi] ? lo[l->kpi] : v);
        c->mask[ix] = 1;
    }
}

/* The noise-aware protocol: every label drawn and its σ_L measured on the clean rows (the
 * history, else the whole series before any injection), then injected. */
static int inject_noise(const CctInjectSettings *s, CctInjectSeries *c, uint64_t *rng, int rotation)
{
    static const int order[] = {CCT_INJ_SURGE, CCT_INJ_DROP, CCT_INJ_OUTAGE, CCT_INJ_SHIFT,
                                CCT_INJ_SPIKE};
    const int n_order = (int)(sizeof order / sizeof *order), first = c->n_lab;
    const int h1 = c->test0 > 0 ? c->test0 : c->T;
    double sd[CC_MAX_FEATURES], lo[CC_MAX_FEATURES];
    history_scale(c, sd, lo);
    int slot = 0;
    for (int a = c->test0 + s->margin; a + s->spacing <= c->T; a += s->spacing, slot++)
        if (cct_inject_add_label(c,
                                 draw_noise_label(s, order[(slot + rotation) % n_order], a, rng)))
            return -ENOMEM;
    int n = c->n_lab - first;
    double *sig = malloc((size_t)(n > 0 ? n : 1) * sizeof *sig);
    if (!sig)
        return -ENOMEM;
    for (int k = 0; k < n; k++) {
        const CctLabel *l = &c->lab[first + k];
        sig[k] = 0;
        if (l->kpi >= 0) {
            cct_inject_spread(c, h1, l->end - l->start, sd);
            sig[k] = sd[l->kpi];
        }
    }
    for (int k = 0; k < n; k++)
        apply_noise_label(c, &c->lab[first + k], sig[k], lo);
    free(sig);
    return 0;
}

int cct_inject(const CctInjectSettings *s, CctInjectSeries *c, uint64_t *rng, int rotation)
{
    if (s->protocol == CCT_INJ_PROTO_NOISE)
        return inject_noise(s, c, rng, rotation);
    double sd[CC_MAX_FEATURES], lo[CC_MAX_FEATURES];
    history_scale(c, sd, lo);
    int slot = 0;
    for (int a = c->test0 + s->margin; a + s->spacing <= c->T; a += s->spacing, slot++) {
        CctLabel l = draw_label(s, (slot + rotation) % CCT_INJ_CLASSIC, a, rng);
        apply_label(c, &l, sd, lo);
        if (cct_inject_add_label(c, l))
            return -ENOMEM;
    }
    return 0;
}
