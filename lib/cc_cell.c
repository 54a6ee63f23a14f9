/*
 * cc_cell.c — a cell's memory: a small block (normalisation, forecast), the ring of raw
 * values, grown by doubling up to R rows as the history grows, and the KV caches and (if
 * kept) attention weights, allocated at the first complete patch: a cell that got one
 * record costs ~1 KB of engine state instead of ~100 KB (default model, f32 KV); its
 * history, restore and rebind; the readers of its forecast (see cc_cell.h).
 */
#include "cc_cell_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cc_cell_shape_init(CcCellShape *cs, const CcModel *m, enum CcKvType kv, int keep_attention)
{
    const CcHparams *hp = &m->hp;
    /* Spec: max(N·P + P, M, RL). An off-boundary rebuild (restore, model swap, no-cache)
     * needs the M values up to e while t may be P-1 steps past e, hence M + P - 1; the tx/3
     * linear path reads the RL values up to t. */
    int a = hp->n_patches * hp->patch_len + hp->patch_len, b = hp->norm_window + hp->patch_len - 1;
    cs->F = hp->n_features;
    cs->R = a > b ? a : b;
    if (hp->linear_window > cs->R)
        cs->R = hp->linear_window;
    cs->N = hp->n_patches;
    cs->L = hp->n_layers;
    cs->H = hp->n_heads;
    cs->DK = hp->d_model / hp->n_heads;
    cs->HZ = hp->horizon;
    cs->kv_elem = kv == CC_KV_F32 ? 4 : 2;
    cs->keep_attention = keep_attention;
    cs->m = m;
}

static size_t small_bytes(const CcCellShape *cs);
static size_t cache_bytes(const CcCellShape *cs);

size_t cc_cell_mem_bytes(const CcCellShape *cs)
{
    return small_bytes(cs) + (size_t)cs->R * cs->F * sizeof(float) + 64 + cache_bytes(cs);
}

static void *carve(char **p, size_t bytes)
{
    void *r = *p;
    *p += (bytes + 63) & ~(size_t)63;
    return r;
}

/* A new cell starts with one patch's worth of ring (or all of it when R is smaller). */
#define RING_MIN_ROWS 16

static size_t small_bytes(const CcCellShape *cs)
{
    return 2 * (size_t)cs->F * sizeof(float) + (size_t)cs->F * 2 * cs->HZ * sizeof(float) + 64 * 2;
}

static size_t cache_bytes(const CcCellShape *cs)
{
    size_t F = cs->F, D = (size_t)cs->H * cs->DK;
    size_t b = F * cs->L * 2 * (size_t)cs->N * D * cs->kv_elem;
    if (cs->keep_attention)
        b += F * cs->L * cs->H * ((size_t)cs->N + 1) * sizeof(float);
    return b + 64 * 2;
}

static void *aligned_zero(size_t bytes)
{
    void *m = NULL;
    if (posix_memalign(&m, 64, bytes))
        return NULL;
    memset(m, 0, bytes); /* the attention kernels read whole 16-lane blocks */
    return m;
}

/* Lays c out for cs: the small block and a minimal ring; the caches come with the first
 * complete patch (cc_cell_prepare). */
static int cell_layout(CcCell *c, const CcCellShape *cs)
{
    int rc = cs->R < RING_MIN_ROWS ? cs->R : RING_MIN_ROWS;
    void *mem = aligned_zero(small_bytes(cs));
    float *ring = aligned_zero((size_t)rc * cs->F * sizeof(float));
    if (!mem || !ring) {
        free(mem);
        free(ring);
        return -ENOMEM;
    }
    char *p = mem;
    c->cs = cs;
    c->F = cs->F;
    c->R = cs->R;
    c->N = cs->N;
    c->L = cs->L;
    c->H = cs->H;
    c->DK = cs->DK;
    c->HZ = cs->HZ;
    c->mem = mem;
    c->mu = carve(&p, (size_t)cs->F * sizeof(float));
    c->sigma = carve(&p, (size_t)cs->F * sizeof(float));
    c->y = carve(&p, (size_t)cs->F * 2 * cs->HZ * sizeof(float));
    c->RC = rc;
    c->ring = ring;
    c->kvmem = c->kv = NULL;
    c->att = NULL;
    return 0;
}

/* Grows the ring to hold `rows` steps (≤ R), keeping the steps it holds at their new
 * rows (p % RC). */
static int ring_grow(CcCell *c, int64_t rows)
{
    int nrc = c->RC;
    while (nrc < rows && nrc < c->R)
        nrc = 2 * nrc < c->R ? 2 * nrc : c->R;
    if (nrc == c->RC)
        return 0;
    float *nr = aligned_zero((size_t)nrc * c->F * sizeof(float));
    if (!nr)
        return -ENOMEM;
    int64_t first = c->last - c->RC + 1 > c->p0 ? c->last - c->RC + 1 : c->p0;
    for (int64_t p = first; c->last >= 0 && p <= c->last; p++)
        memcpy(&nr[(size_t)(p % nrc) * c->F], &c->ring[(size_t)(p % c->RC) * c->F],
               (size_t)c->F * sizeof(float));
    free(c->ring);
    c->ring = nr;
    c->RC = nrc;
    return 0;
}

int cc_cell_prepare(CcCell *c, int64_t p0, int64_t last)
{
    const CcCellShape *cs = c->cs;
    int P = cs->m->hp.patch_len;
    if (last - p0 + 1 > c->RC && c->RC < c->R && ring_grow(c, last - p0 + 1))
        return -ENOMEM;
    /* a complete patch: the step will forecast, with the caches */
    if (!c->kvmem && ((last + 1) / P) * P - 1 - P + 1 >= p0) {
        size_t F = cs->F, D = (size_t)cs->H * cs->DK;
        char *q = aligned_zero(cache_bytes(cs));
        if (!q)
            return -ENOMEM;
        c->kvmem = q;
        c->kv = carve(&q, F * cs->L * 2 * (size_t)cs->N * D * cs->kv_elem);
        c->att = cs->keep_attention
                     ? carve(&q, F * cs->L * cs->H * ((size_t)cs->N + 1) * sizeof(float))
                     : NULL;
    }
    return 0;
}

int cc_cell_open_shape(CcCell **out, const CcCellShape *cs)
{
    CcCell *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    if (cell_layout(c, cs) < 0) {
        free(c);
        return -ENOMEM;
    }
    cc_cell_reset(c);
    *out = c;
    return 0;
}

static void cell_free_mem(CcCell *c)
{
    free(c->mem);
    free(c->ring);
    free(c->kvmem);
}

void cc_cell_close(CcCell **pc)
{
    if (!pc || !*pc)
        return;
    cell_free_mem(*pc);
    free(*pc);
    *pc = NULL;
}

void cc_cell_reset(CcCell *c)
{
    c->p0 = c->last = c->cache_e = -1;
    c->n_cached = 0;
    c->fc_valid = 0;
    c->fc_step = -1;
}

int cc_cell_rebind_shape(CcCell *c, const CcCellShape *cs)
{
    if (c->F != cs->F)
        return -EINVAL;
    CcCell tmp = *c;
    int ret = cell_layout(c, cs);
    if (ret < 0)
        return ret;
    /* keep the newest min(R_old, R_new) steps */
    int64_t first = tmp.last < 0 ? 0 : tmp.last - tmp.R + 1;
    if (first < tmp.p0)
        first = tmp.p0;
    if (tmp.last >= 0 && tmp.last - first + 1 > c->R)
        first = tmp.last - c->R + 1;
    c->p0 = first; /* for ring_grow: nothing to move yet */
    c->last = -1;
    if (tmp.last >= 0 && ring_grow(c, tmp.last - first + 1)) {
        cell_free_mem(c);
        *c = tmp;
        return -ENOMEM;
    }
    for (int64_t p = first; tmp.last >= 0 && p <= tmp.last; p++)
        memcpy(&c->ring[(size_t)(p % c->RC) * c->F], &tmp.ring[(size_t)(p % tmp.RC) * tmp.F],
               (size_t)c->F * sizeof(float));
    c->p0 = tmp.p0;
    c->last = tmp.last;
    /* a sequence start older than what is kept is fine only if the window is full */
    if (c->last >= 0 && first > c->p0 && c->last - first + 1 < c->R)
        c->p0 = first;
    c->cache_e = -1;
    c->fc_valid = 0;
    cell_free_mem(&tmp);
    return 0;
}

void cc_cell_span(const CcCell *c, int64_t *first, int64_t *last)
{
    if (c->last < 0) {
        *first = *last = -1;
        return;
    }
    int64_t f = c->last - c->R + 1;
    *first = f > c->p0 ? f : c->p0;
    *last = c->last;
}

int64_t cc_cell_seq_start(const CcCell *c) { return c->p0; }

int cc_cell_history(const CcCell *c, int64_t from, int count, float *out)
{
    int64_t first, last;
    cc_cell_span(c, &first, &last);
    if (count < 0 || last < 0 || from < first || from + count - 1 > last)
        return -ERANGE;
    for (int i = 0; i < count; i++)
        memcpy(out + (size_t)i * c->F, &c->ring[(size_t)((from + i) % c->RC) * c->F],
               (size_t)c->F * sizeof(float));
    return 0;
}

int cc_cell_restore(CcCell *c, int64_t seq_start, int64_t first, int count, const float *values)
{
    /* a step past 2^40 is corruption (steps count ≥ 1 s periods of unix time); the bound
     * keeps first + count and the forecast steps after it far from overflow */
    if (count <= 0 || first < 0 || seq_start < 0 || seq_start > first ||
        first > ((int64_t)1 << 40) - count)
        return -EINVAL;
    for (size_t i = 0; i < (size_t)count * c->F; i++)
        if (!isfinite(values[i]))
            return -ERANGE;
    /* values before `first` are unknown: only acceptable when the ring is full anyway */
    if (seq_start < first && count < c->R)
        return -EINVAL;
    int64_t last = first + count - 1, rows = last - seq_start + 1;
    if (ring_grow(c, rows < c->R ? rows : c->R))
        return -ENOMEM;
    cc_cell_reset(c);
    int skip = count > c->R ? count - c->R : 0;
    for (int i = skip; i < count; i++)
        memcpy(&c->ring[(size_t)((first + i) % c->RC) * c->F], values + (size_t)i * c->F,
               (size_t)c->F * sizeof(float));
    c->p0 = seq_start;
    c->last = first + count - 1;
    return 0;
}

/* Mean and population sd (double) of every channel in one pass over the ring's rows per
 * moment (the ring is (R, F): one channel alone would stride through it). Each channel's
 * sums run in step order, as a per-channel loop would. */
void cc_cell_ring_stats(const CcCell *c, int64_t lo, int64_t hi, float *mu, float *sigma,
                        const float *floor)
{
    const int n = (int)(hi - lo + 1), r0 = (int)(lo % c->RC), F = c->F;
    double s[CC_MAX_FEATURES] = {0}, ss[CC_MAX_FEATURES] = {0}, m[CC_MAX_FEATURES];
    for (int j = 0, r = r0; j < n; j++) {
        const float *row = &c->ring[(size_t)r * F];
        for (int f = 0; f < F; f++)
            s[f] += row[f];
        if (++r == c->RC)
            r = 0;
    }
    for (int f = 0; f < F; f++)
        m[f] = s[f] / n;
    for (int j = 0, r = r0; j < n; j++) {
        const float *row = &c->ring[(size_t)r * F];
        for (int f = 0; f < F; f++) {
            double d = row[f] - m[f];
            ss[f] += d * d;
        }
        if (++r == c->RC)
            r = 0;
    }
    for (int f = 0; f < F; f++) {
        mu[f] = (float)m[f];
        double fl = floor ? floor[f] : 0.0;
        double sd = floor ? sqrt(ss[f] / n + fl * fl) : sqrt(ss[f] / n);
        sigma[f] = (float)(sd + 1e-5 * (1.0 + fabs(m[f])));
    }
}

void cc_cell_forecast(const CcCell *c, CcForecast *out)
{
    out->valid = c->fc_valid && c->fc_step == c->last;
    out->step = c->last;
    out->n_features = c->F;
    out->horizon = c->HZ;
    out->y = c->y;
    out->mu = c->mu;
    out->sigma = c->sigma;
    out->sd_scale = cc_model_sd_scale(c->cs->m);
    out->seq_start = c->p0;
}

void cc_forecast_point(const CcForecast *fc, int f, int k, double *mean, double *sd)
{
    const float *y = &fc->y[((size_t)f * fc->horizon + k) * 2];
    *mean = (double)y[0] * fc->sigma[f] + fc->mu[f];
    *sd = exp((double)y[1]) * fc->sigma[f];
    if (fc->sd_scale) /* tx/3 calibration */
        *sd *= fc->sd_scale[(size_t)f * fc->horizon + k];
}

void cc_forecast_points(const CcForecast *fc, float *mean, float *sd)
{
    const int F = fc->n_features, HZ = fc->horizon;
    for (int f = 0; f < F; f++) {
        const float *y = &fc->y[(size_t)f * HZ * 2];
        const float mu = fc->mu[f], sigma = fc->sigma[f];
        const float *s = fc->sd_scale ? fc->sd_scale + (size_t)f * HZ : NULL;
        for (int k = 0; k < HZ; k++) {
            mean[(size_t)f * HZ + k] = y[2 * k] * sigma + mu;
            sd[(size_t)f * HZ + k] = expf(y[2 * k + 1]) * sigma * (s ? s[k] : 1.0f);
        }
    }
}

int cc_cell_attention(const CcCell *c, int f, float *weights, int64_t *token_end, int *n_tokens)
{
    if (!c->cs->keep_attention)
        return -EINVAL;
    if (!c->att) /* no complete patch yet */
        return -EAGAIN;
    if (!c->fc_valid || f < 0 || f >= c->F)
        return c->fc_valid ? -EINVAL : -EAGAIN;
    int n = c->n_cached, T = n + 1, P = c->cs->m->hp.patch_len;
    for (int l = 0; l < c->L; l++)
        for (int h = 0; h < c->H; h++)
            memcpy(&weights[((size_t)l * c->H + h) * T],
                   &c->att[(((size_t)f * c->L + l) * c->H + h) * (c->N + 1)],
                   (size_t)T * sizeof(float));
    for (int i = 0; i < n; i++)
        token_end[i] = c->cache_e - (int64_t)(n - 1 - i) * P;
    token_end[n] = c->fc_step;
    *n_tokens = T;
    return 0;
}
