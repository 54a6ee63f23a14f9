/*
 * cc_online_calib.c — adaptive conformal scale of the served sd (cc_online_calib.h).
 */
#include "cc_online_calib.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_metrics.h"

#define MISS_TARGET 0.2 /* 1 - 0.8: outside P10–P90 */

struct CcOnlineCalib {
    CcOnlineCalibSettings s;
    int F, HZ;
    int64_t last_t;  /* newest pushed origin; INT64_MIN: none */
    int64_t *origin; /* (HZ) the last origin t pushed into slot t mod HZ; INT64_MIN: none */
    /* (HZ, HZ, F, 2) by target step: [p mod HZ][k][f] = the mean and served sd for step p
     * of the forecast made at p-1-k, valid while origin[(p-1-k) mod HZ] == p-1-k (a later
     * origin that overwrites it overwrites that slot too). Laid out by target so that a
     * step reads one contiguous block: a host steps thousands of cells, each cold in cache. */
    float *held;
    float *log_scale;         /* (F, HZ) */
    float *scale;             /* (F, HZ) exp(log_scale), what push multiplies by */
    int *scored_f, *missed_f; /* (F) one observe's counts */
    int64_t scored, missed;
};

void cc_online_calib_default_settings(CcOnlineCalibSettings *s)
{
    *s = (CcOnlineCalibSettings){.rate = 0, .max_log = log(8.0), .per_step = 0};
}

double cc_online_calib_auto_rate(int HZ) { return HZ > 0 ? fmin(0.05, 4.0 / HZ) : 0.05; }

size_t cc_online_calib_bytes(int F, int HZ)
{
    return sizeof(CcOnlineCalib) + (size_t)HZ * sizeof(int64_t) +
           (2 * (size_t)HZ + 2) * (size_t)F * (size_t)HZ * sizeof(float) +
           2 * (size_t)F * sizeof(int);
}

int cc_online_calib_open(CcOnlineCalib **out, const CcOnlineCalibSettings *s, int F, int HZ)
{
    *out = NULL;
    if (F < 1 || HZ < 1 || !(s->rate >= 0 && s->rate <= 1) || !(s->max_log > 0) ||
        !isfinite(s->max_log))
        return -EINVAL;
    CcOnlineCalib *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->s = *s;
    c->s.rate = s->rate == 0 ? cc_online_calib_auto_rate(HZ) : s->rate;
    c->F = F;
    c->HZ = HZ;
    c->last_t = INT64_MIN;
    size_t fk = (size_t)F * (size_t)HZ;
    c->origin = malloc((size_t)HZ * sizeof *c->origin);
    c->held = malloc(2 * (size_t)HZ * fk * sizeof *c->held);
    c->log_scale = calloc(fk, sizeof *c->log_scale);
    c->scale = malloc(fk * sizeof *c->scale);
    c->scored_f = malloc((size_t)F * sizeof *c->scored_f);
    c->missed_f = malloc((size_t)F * sizeof *c->missed_f);
    if (!c->origin || !c->held || !c->log_scale || !c->scale || !c->scored_f || !c->missed_f) {
        cc_online_calib_close(&c);
        return -ENOMEM;
    }
    for (int i = 0; i < HZ; i++)
        c->origin[i] = INT64_MIN;
    for (size_t i = 0; i < fk; i++)
        c->scale[i] = 1;
    *out = c;
    return 0;
}

void cc_online_calib_close(CcOnlineCalib **pc)
{
    CcOnlineCalib *c = *pc;
    if (!c)
        return;
    free(c->origin);
    free(c->held);
    free(c->log_scale);
    free(c->scale);
    free(c->scored_f);
    free(c->missed_f);
    free(c);
    *pc = NULL;
}

static size_t slot_of(const CcOnlineCalib *c, int64_t t)
{
    int64_t m = t % c->HZ;
    return (size_t)(m < 0 ? m + c->HZ : m);
}

/* Moves the log-scale of entry i (f·HZ + k) by the miss share of its update. */
static void move(CcOnlineCalib *c, size_t i, double miss_share)
{
    double next = c->log_scale[i] + c->s.rate * (miss_share - MISS_TARGET);
    c->log_scale[i] = (float)fmax(-c->s.max_log, fmin(c->s.max_log, next));
    c->scale[i] = expf(c->log_scale[i]);
}

int cc_online_calib_observe(CcOnlineCalib *c, int64_t p, const float *values)
{
    const int F = c->F, HZ = c->HZ;
    const float *block = c->held + slot_of(c, p) * (size_t)HZ * F * 2;
    int n = 0;
    for (int f = 0; f < F; f++)
        c->scored_f[f] = c->missed_f[f] = 0;
    for (int k = 0; k < HZ; k++) {
        int64_t t = p - 1 - k; /* the origin whose step k is p */
        if (c->origin[slot_of(c, t)] != t)
            continue;
        const float *ms = block + (size_t)k * F * 2;
        for (int f = 0; f < F; f++) {
            const float y = values[f], m = ms[2 * f], s = ms[2 * f + 1];
            if (!isfinite(y) || !isfinite(m) || !(s > 0) || !isfinite(s))
                continue;
            int miss = fabsf(y - m) > (float)CC_Z80 * s;
            if (c->s.per_step)
                move(c, (size_t)f * HZ + k, miss);
            c->scored_f[f]++;
            c->missed_f[f] += miss;
        }
    }
    for (int f = 0; f < F; f++) {
        if (!c->s.per_step && c->scored_f[f]) {
            size_t i0 = (size_t)f * HZ;
            move(c, i0, (double)c->missed_f[f] / c->scored_f[f]);
            for (int k = 1; k < HZ; k++)
                c->log_scale[i0 + k] = c->log_scale[i0], c->scale[i0 + k] = c->scale[i0];
        }
        c->scored += c->scored_f[f];
        c->missed += c->missed_f[f];
        n += c->scored_f[f];
    }
    return n;
}

int cc_online_calib_push(CcOnlineCalib *c, int64_t t, const float *mean, const float *sd)
{
    if (c->last_t != INT64_MIN && t <= c->last_t)
        return -ERANGE;
    const int F = c->F, HZ = c->HZ;
    c->origin[slot_of(c, t)] = t;
    for (int k = 0; k < HZ; k++) {
        float *ms = c->held + (slot_of(c, t + 1 + k) * HZ + (size_t)k) * F * 2;
        for (int f = 0; f < F; f++) {
            size_t i = (size_t)f * HZ + (size_t)k;
            ms[2 * f] = mean[i];
            ms[2 * f + 1] = sd[i] * c->scale[i]; /* as served */
        }
    }
    c->last_t = t;
    return 0;
}

int cc_online_calib_set_rate(CcOnlineCalib *c, double rate)
{
    if (!(rate >= 0 && rate <= 1))
        return -EINVAL;
    c->s.rate = rate == 0 ? cc_online_calib_auto_rate(c->HZ) : rate;
    return 0;
}

void cc_online_calib_scales(const CcOnlineCalib *c, float *out)
{
    memcpy(out, c->scale, (size_t)c->F * (size_t)c->HZ * sizeof *out);
}

double cc_online_calib_scale(const CcOnlineCalib *c, int f, int k)
{
    if (f < 0 || f >= c->F || k < 0 || k >= c->HZ)
        return 1.0;
    return c->scale[(size_t)f * c->HZ + (size_t)k];
}

void cc_online_calib_counts(const CcOnlineCalib *c, int64_t *scored, int64_t *missed)
{
    *scored = c->scored;
    *missed = c->missed;
}
