/*
 * cc_calib.c — fit of calib.sigma_scale (see cc_calib.h for the method and why).
 */
#include "cc_calib.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_metrics.h" /* CC_Z80 */

#define SCALE_MIN 1e-3

typedef struct Sample {
    int64_t t;
    int32_t series;
    uint16_t f, k;
    float az;
    float u; /* position in its series' rows, [0, 1) by time; set by the fit */
} Sample;

struct CcCalib {
    CcCalibSettings s;
    int F, HZ;
    Sample *v;
    size_t n, cap;
    /* scratch of a fit: bucket b = f·HZ + k holds idx[off[b] .. off[b+1]) */
    size_t *off, *idx;
    float *tmp;
};

void cc_calib_defaults(CcCalibSettings *s)
{
    *s = (CcCalibSettings){
        .fit = CC_CALIB_SHRUNK, .step_radius = -1, .pool_n = 50, .recent = 1, .shrink = 1};
}

int cc_calib_open(CcCalib **out, int n_features, int horizon, const CcCalibSettings *s)
{
    *out = NULL;
    if (n_features < 1 || horizon < 1 || n_features > 65535 || horizon > 65535)
        return -EINVAL;
    CcCalib *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    if (s)
        c->s = *s;
    else
        cc_calib_defaults(&c->s);
    c->F = n_features, c->HZ = horizon;
    c->off = calloc((size_t)n_features * horizon + 1, sizeof *c->off);
    if (!c->off) {
        free(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

void cc_calib_close(CcCalib **c)
{
    if (!*c)
        return;
    free((*c)->v);
    free((*c)->off);
    free((*c)->idx);
    free((*c)->tmp);
    free(*c);
    *c = NULL;
}

int cc_calib_add(CcCalib *c, int series, int64_t t, int f, int k, float absz)
{
    if (!isfinite(absz) || absz < 0 || f < 0 || f >= c->F || k < 0 || k >= c->HZ || series < 0)
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4096;
        Sample *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        c->v = v, c->cap = cap;
    }
    c->v[c->n++] =
        (Sample){.t = t, .series = series, .f = (uint16_t)f, .k = (uint16_t)k, .az = absz};
    return 0;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

float cc_calib_scale(float *absz, size_t n)
{
    if (n == 0)
        return 1.0f;
    qsort(absz, n, sizeof *absz, cmp_float);
    /* the 0.8 quantile, linear between order statistics */
    double pos = 0.8 * (double)(n - 1), lo = floor(pos);
    size_t i = (size_t)lo;
    double q = absz[i] + (i + 1 < n ? (pos - lo) * (absz[i + 1] - absz[i]) : 0.0);
    double sc = q / CC_Z80;
    return (float)(sc > SCALE_MIN ? sc : SCALE_MIN);
}

/* The m-th smallest of a[0..n) (0-based; a is reordered): quickselect with a three-way
 * partition (many equal |z| when a KPI is often predicted exactly). */
static float select_nth(float *a, size_t n, size_t m)
{
    size_t lo = 0, hi = n; /* m is in [lo, hi) */
    while (hi - lo > 1) {
        float p = a[lo + (hi - lo) / 2], x;
        size_t lt = lo, i = lo, gt = hi; /* [lo, lt) < p, [lt, i) == p, [gt, hi) > p */
        while (i < gt) {
            if (a[i] < p)
                x = a[lt], a[lt++] = a[i], a[i++] = x;
            else if (a[i] > p)
                x = a[--gt], a[gt] = a[i], a[i] = x;
            else
                i++;
        }
        if (m < lt)
            hi = lt;
        else if (m >= gt)
            lo = gt;
        else
            return p;
    }
    return a[m];
}

/* log(s) of the conformal 80 % quantile of n values: order statistic ceil((n+1)·0.8). */
static double log_conformal(float *a, size_t n)
{
    size_t m = (size_t)ceil(0.8 * (double)(n + 1));
    m = m < 1 ? 0 : m - 1;
    if (m >= n)
        m = n - 1;
    double s = select_nth(a, n, m) / CC_Z80;
    return log(s > SCALE_MIN ? s : SCALE_MIN);
}

/* Bucket the samples whose u lies in [u0, u1) by (f, k) into off/idx. */
static void bucket(CcCalib *c, double u0, double u1)
{
    size_t nb = (size_t)c->F * c->HZ;
    memset(c->off, 0, (nb + 1) * sizeof *c->off);
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].u >= u0 && c->v[i].u < u1)
            c->off[(size_t)c->v[i].f * c->HZ + c->v[i].k + 1]++;
    for (size_t b = 0; b < nb; b++)
        c->off[b + 1] += c->off[b];
    size_t *fill = c->off; /* filled from the bucket starts, restored after */
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].u >= u0 && c->v[i].u < u1)
            c->idx[fill[(size_t)c->v[i].f * c->HZ + c->v[i].k]++] = i;
    for (size_t b = nb; b > 0; b--)
        c->off[b] = c->off[b - 1];
    c->off[0] = 0;
}

/* |z| of features [f0, f1) at steps [k0, k1] of the current buckets into tmp; the count. */
static size_t gather(CcCalib *c, int f0, int f1, int k0, int k1)
{
    size_t n = 0;
    for (int f = f0; f < f1; f++)
        for (int k = k0; k <= k1; k++) {
            size_t b = (size_t)f * c->HZ + k;
            for (size_t j = c->off[b]; j < c->off[b + 1]; j++)
                c->tmp[n++] = c->v[c->idx[j]].az;
        }
    return n;
}

/* The pooled, conformal, KPI-pooled log-scales l (F × HZ) of the samples in [u0, u1);
 * 0 where there is none. */
static void fit_log(CcCalib *c, double u0, double u1, double *l)
{
    const int F = c->F, HZ = c->HZ;
    int rmax = c->s.step_radius;
    if (rmax < 0) {
        rmax = (HZ + 8) / 16;
        rmax = rmax > 8 ? 8 : rmax;
    }
    bucket(c, u0, u1);
    for (int k = 0; k < HZ; k++) {
        /* the scale moves fast over the first steps and slowly later: k/4 steps each side */
        int r = k / 4 < rmax ? k / 4 : rmax;
        r = r < HZ - 1 - k ? r : HZ - 1 - k; /* symmetric at the last steps: no bias there */
        int k0 = k - r < 0 ? 0 : k - r, k1 = k + r >= HZ ? HZ - 1 : k + r;
        size_t na = gather(c, 0, F, k0, k1);
        double la = na ? log_conformal(c->tmp, na) : 0.0;
        for (int f = 0; f < F; f++) {
            size_t n = gather(c, f, f + 1, k0, k1);
            double lf = n ? log_conformal(c->tmp, n) : la, w = n / (n + c->s.pool_n);
            l[(size_t)f * HZ + k] = w * lf + (1 - w) * la;
        }
    }
}

/* The per-(f, k) quantile fit of the samples in [u0, u1) as log-scales. */
static void fit_log_quantile(CcCalib *c, double u0, double u1, double *l)
{
    size_t nb = (size_t)c->F * c->HZ;
    bucket(c, u0, u1);
    for (size_t b = 0; b < nb; b++) {
        size_t n =
            gather(c, (int)(b / c->HZ), (int)(b / c->HZ) + 1, (int)(b % c->HZ), (int)(b % c->HZ));
        l[b] = log(cc_calib_scale(c->tmp, n));
    }
}

/* The configured fit on [u0, u1) into l; w (F, may be NULL) gets the shrinkage weights.
 * scratch: 2·F·HZ doubles. */
static void fit_range(CcCalib *c, double u0, double u1, double *l, double *w, double *scratch)
{
    const int F = c->F, HZ = c->HZ;
    for (int f = 0; f < F && w; f++)
        w[f] = 1;
    if (c->s.fit == CC_CALIB_NONE) {
        memset(l, 0, (size_t)F * HZ * sizeof *l);
        return;
    }
    if (c->s.fit == CC_CALIB_QUANTILE) {
        fit_log_quantile(c, u0, u1, l);
        return;
    }
    if (c->s.recent < 1)
        u0 = u1 - c->s.recent * (u1 - u0);
    fit_log(c, u0, u1, l);
    if (!c->s.shrink)
        return;
    double *a = scratch, *b = scratch + (size_t)F * HZ, mid = 0.5 * (u0 + u1);
    fit_log(c, u0, mid, a);
    fit_log(c, mid, u1, b);
    for (int f = 0; f < F; f++) {
        double ll = 0, dd = 0;
        for (int k = 0; k < HZ; k++) {
            size_t i = (size_t)f * HZ + k;
            ll += l[i] * l[i];
            dd += (a[i] - b[i]) * (a[i] - b[i]);
        }
        double wf = ll + dd > 0 ? ll / (ll + dd) : 1.0;
        for (int k = 0; k < HZ; k++)
            l[(size_t)f * HZ + k] *= wf;
        if (w)
            w[f] = wf;
    }
}

/* Share of the samples in [u0, u1) inside mean ± CC_Z80·exp(l)·sd; l NULL: scale 1. */
static double coverage(const CcCalib *c, double u0, double u1, const double *l)
{
    size_t in = 0, n = 0;
    for (size_t i = 0; i < c->n; i++) {
        const Sample *s = &c->v[i];
        if (s->u < u0 || s->u >= u1)
            continue;
        double sc = l ? exp(l[(size_t)s->f * c->HZ + s->k]) : 1.0;
        in += s->az <= CC_Z80 * sc;
        n++;
    }
    return n ? (double)in / (double)n : NAN;
}

/* u of every sample: its origin's place among the origins of its channel (series, KPI),
 * in [0, 1) by time. Per channel, not per series: a trainer may keep an evenly spaced subset
 * of the validation windows, and one KPI's may then sit later than another's. 0 or -ENOMEM. */
static int place(CcCalib *c)
{
    size_t S = 0;
    for (size_t i = 0; i < c->n; i++)
        S = (size_t)c->v[i].series + 1 > S ? (size_t)c->v[i].series + 1 : S;
    size_t NC = (S ? S : 1) * (size_t)c->F;
    int64_t *lo = malloc(NC * 2 * sizeof *lo);
    if (!lo)
        return -ENOMEM;
    int64_t *hi = lo + NC;
    for (size_t ch = 0; ch < NC; ch++)
        lo[ch] = INT64_MAX, hi[ch] = INT64_MIN;
    for (size_t i = 0; i < c->n; i++) {
        const Sample *v = &c->v[i];
        size_t ch = (size_t)v->series * c->F + v->f;
        lo[ch] = v->t < lo[ch] ? v->t : lo[ch];
        hi[ch] = v->t > hi[ch] ? v->t : hi[ch];
    }
    for (size_t i = 0; i < c->n; i++) {
        Sample *v = &c->v[i];
        size_t ch = (size_t)v->series * c->F + v->f;
        v->u = (float)((double)(v->t - lo[ch]) / ((double)(hi[ch] - lo[ch]) + 1.0));
        if (v->u >= 1.0f) /* float rounding of the last origin */
            v->u = nextafterf(1.0f, 0.0f);
    }
    free(lo);
    return 0;
}

/* RMS(z) per (f, k) as log-scales (the NLL-optimal scale; for the report only). */
static void fit_log_rms(CcCalib *c, double *l)
{
    size_t nb = (size_t)c->F * c->HZ;
    bucket(c, 0, 1);
    for (size_t b = 0; b < nb; b++) {
        double ss = 0;
        size_t n = c->off[b + 1] - c->off[b];
        for (size_t j = c->off[b]; j < c->off[b + 1]; j++)
            ss += (double)c->v[c->idx[j]].az * c->v[c->idx[j]].az;
        l[b] = n && ss > 0 ? 0.5 * log(ss / (double)n) : 0.0;
    }
}

int cc_calib_fit(CcCalib *c, float *scale, CcCalibReport *rep)
{
    const size_t nb = (size_t)c->F * c->HZ;
    int ret = -ENOMEM;
    double *l = malloc(4 * nb * sizeof *l), *w = malloc((size_t)c->F * sizeof *w);
    free(c->idx);
    free(c->tmp);
    c->idx = malloc((c->n ? c->n : 1) * sizeof *c->idx);
    c->tmp = malloc((c->n ? c->n : 1) * sizeof *c->tmp);
    if (!l || !w || !c->idx || !c->tmp || place(c) < 0)
        goto done;
    double *scratch = l + nb, *other = l + 3 * nb;
    fit_range(c, 0, 1, l, w, scratch);
    for (size_t b = 0; b < nb; b++) {
        double s = exp(l[b]);
        scale[b] = (float)(s > SCALE_MIN ? s : SCALE_MIN);
    }
    if (rep) {
        *rep = (CcCalibReport){.n = c->n, .shrink_min = 1, .shrink_max = 1};
        for (int f = 0; f < c->F; f++) {
            rep->shrink_min = w[f] < rep->shrink_min ? w[f] : rep->shrink_min;
            rep->shrink_max = w[f] > rep->shrink_max ? w[f] : rep->shrink_max;
        }
        rep->cover_raw = coverage(c, 0, 1, NULL);
        rep->cover = coverage(c, 0, 1, l);
        fit_log_rms(c, other);
        rep->cover_rms = coverage(c, 0, 1, other);
        /* the backtest: earlier two thirds -> later third */
        const double cut = 2.0 / 3.0;
        fit_range(c, 0, cut, other, NULL, scratch);
        rep->late_cover = coverage(c, cut, 1, other);
        fit_log_quantile(c, 0, cut, other);
        rep->late_cover_quantile = coverage(c, cut, 1, other);
        rep->late_cover_raw = coverage(c, cut, 1, NULL);
    }
    ret = 0;
done:
    free(l);
    free(w);
    return ret;
}
