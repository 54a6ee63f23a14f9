/*
 * cc_online_calib.c — adaptive conformal scale of the served sd (cc_online_calib.h).
 */
#include "cc_online_calib.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_common.h"
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
    float *log_scale;         /* (F, HZ) per_step 1: the log-scales; 0: the step offsets */
    float *scale;             /* (F, HZ) exp(log_scale), what push multiplies by */
    int *scored_f, *missed_f; /* (F) one observe's counts */
    float *level;             /* per_step 0: (F) the KPI's level (its log-scale) */
    float *exp_offset;        /* per_step 0: (F, HZ) exp(the step offset) */
    signed char *miss_fk;     /* (F, HZ) one observe's misses (-1: not scored) */
    int64_t scored, missed;
};

void cc_online_calib_default_settings(CcOnlineCalibSettings *s)
{
    *s = (CcOnlineCalibSettings){.rate = 0, .max_log = log(64.0), .per_step = 0, .profile = 0.5};
}

double cc_online_calib_auto_rate(int HZ) { return HZ > 0 ? fmin(0.05, 4.0 / HZ) : 0.05; }

size_t cc_online_calib_bytes(int F, int HZ)
{
    return sizeof(CcOnlineCalib) + (size_t)HZ * sizeof(int64_t) +
           (2 * (size_t)HZ + 3) * (size_t)F * (size_t)HZ * sizeof(float) + (size_t)F * (size_t)HZ +
           (size_t)F * (2 * sizeof(int) + sizeof(float));
}

int cc_online_calib_open(CcOnlineCalib **out, const CcOnlineCalibSettings *s, int F, int HZ)
{
    *out = NULL;
    if (F < 1 || HZ < 1 || !(s->rate >= 0 && s->rate <= 1) || !(s->max_log > 0) ||
        !(s->profile >= 0 && s->profile <= 1) || !isfinite(s->max_log))
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
    c->level = calloc((size_t)F, sizeof *c->level);
    c->exp_offset = malloc(fk * sizeof *c->exp_offset);
    c->miss_fk = malloc(fk);
    c->scale = malloc(fk * sizeof *c->scale);
    c->scored_f = calloc((size_t)F, sizeof *c->scored_f);
    c->missed_f = calloc((size_t)F, sizeof *c->missed_f);
    if (!c->origin || !c->held || !c->log_scale || !c->scale || !c->scored_f || !c->missed_f ||
        !c->level || !c->exp_offset || !c->miss_fk) {
        cc_online_calib_close(&c);
        return -ENOMEM;
    }
    for (int i = 0; i < HZ; i++)
        c->origin[i] = INT64_MIN;
    for (size_t i = 0; i < fk; i++)
        c->scale[i] = c->exp_offset[i] = 1;
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
    free(c->level);
    free(c->exp_offset);
    free(c->miss_fk);
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

/* x within [lo, hi] (finite here: fmin/fmax would be library calls for NaN's sake) */
static inline float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Moves the log-scale of entry i (f·HZ + k) by the miss share of its update. */
static void move(CcOnlineCalib *c, size_t i, double miss_share)
{
    const float L = (float)c->s.max_log;
    c->log_scale[i] =
        clampf(c->log_scale[i] + (float)(c->s.rate * (miss_share - MISS_TARGET)), -L, L);
    c->scale[i] = expf(c->log_scale[i]);
}

/* per_step 0: KPI f's level moves by its miss share; with a profile, each scored step's
 * offset by its own miss against that share (the offsets of one update sum to 0, so the
 * level alone carries the correction of the KPI's overall coverage). An offset moves by one
 * of two amounts a step, so exp(offset) is kept by multiplying by one of two factors (two
 * expf a KPI, not one a step) and recomputed exactly for one step in turn (rounding stays
 * bounded) and wherever the clamp cut. The offsets live in log_scale (not otherwise used in
 * this mode). */
static void move_kpi(CcOnlineCalib *c, int f, double share, int64_t p)
{
    const int HZ = c->HZ;
    const double L = c->s.max_log, prate = c->s.profile * c->s.rate;
    float *offset = c->log_scale;
    c->level[f] = (float)fmax(-L, fmin(L, c->level[f] + c->s.rate * (share - MISS_TARGET)));
    const float el = expf(c->level[f]), lo = expf((float)-L), hi = expf((float)L);
    const float d[2] = {(float)(-prate * share), (float)(prate * (1 - share))};
    const float e[2] = {expf(d[0]), expf(d[1])};
    const int resync = (int)(p % HZ < 0 ? p % HZ + HZ : p % HZ);
    for (int k = 0; k < HZ; k++) {
        size_t i = (size_t)f * HZ + (size_t)k;
        if (prate > 0 && c->miss_fk[i] >= 0) {
            const int m = c->miss_fk[i];
            const float o = offset[i] + d[m];
            offset[i] = clampf(o, (float)-L, (float)L);
            c->exp_offset[i] =
                o != offset[i] || k == resync ? expf(offset[i]) : c->exp_offset[i] * e[m];
        }
        c->scale[i] = clampf(el * c->exp_offset[i], lo, hi);
    }
}

int cc_online_calib_observe(CcOnlineCalib *c, int64_t p, const float *values)
{
    const int F = c->F, HZ = c->HZ;
    const float *block = c->held + slot_of(c, p) * (size_t)HZ * F * 2;
    int n = 0;
    for (int f = 0; f < F; f++)
        c->scored_f[f] = c->missed_f[f] = 0;
    memset(c->miss_fk, -1, (size_t)F * HZ);
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
            c->miss_fk[(size_t)f * HZ + k] = (signed char)miss;
        }
    }
    for (int f = 0; f < F; f++) {
        if (!c->s.per_step && c->scored_f[f])
            move_kpi(c, f, (double)c->missed_f[f] / c->scored_f[f], p);
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

void cc_online_calib_last_counts(const CcOnlineCalib *c, int f, int *scored, int *missed)
{
    const int in = f >= 0 && f < c->F;
    *scored = in ? c->scored_f[f] : 0;
    *missed = in ? c->missed_f[f] : 0;
}

/* Saved form (host byte order, as the rest of a cell record): magic, F, HZ, per_step (u32),
 * then the level per KPI (F floats) and log_scale (F × HZ floats), the state the scales are
 * computed from. The ring of pending forecasts is not saved (8·F·HZ² bytes, most of what the
 * calibration holds): a loaded one scores from the next forecast pushed. */
#define SAVE_MAGIC 0x314f4343u /* "CCO1" */
#define SAVE_HEAD 16
#define SAVE_MAX_DIM (1u << 20) /* F, HZ: the size below cannot overflow */

size_t cc_online_calib_save_size(int F, int HZ)
{
    return SAVE_HEAD + 4 * (size_t)F * ((size_t)HZ + 1);
}

size_t cc_online_calib_save(const CcOnlineCalib *c, uint8_t *buf, size_t n)
{
    const size_t fk = (size_t)c->F * (size_t)c->HZ, need = cc_online_calib_save_size(c->F, c->HZ);
    if (n < need)
        return 0;
    const uint32_t hd[4] = {SAVE_MAGIC, (uint32_t)c->F, (uint32_t)c->HZ, (uint32_t)c->s.per_step};
    memcpy(buf, hd, sizeof hd);
    memcpy(buf + SAVE_HEAD, c->level, (size_t)c->F * sizeof(float));
    memcpy(buf + SAVE_HEAD + (size_t)c->F * sizeof(float), c->log_scale, fk * sizeof(float));
    return need;
}

size_t cc_online_calib_saved_size(const uint8_t *buf, size_t n)
{
    uint32_t hd[4];
    if (n < SAVE_HEAD)
        return 0;
    memcpy(hd, buf, sizeof hd);
    if (hd[0] != SAVE_MAGIC || hd[1] < 1 || hd[2] < 1 || hd[1] > SAVE_MAX_DIM ||
        hd[2] > SAVE_MAX_DIM)
        return 0;
    size_t len = cc_online_calib_save_size((int)hd[1], (int)hd[2]);
    return len <= n ? len : 0;
}

/* The first entry of v (n floats) not finite or out of [-L, L], or -1. */
static long bad_log(const float *v, size_t n, float L)
{
    for (size_t i = 0; i < n; i++)
        if (!(v[i] >= -L && v[i] <= L)) /* NaN fails both */
            return (long)i;
    return -1;
}

int cc_online_calib_load(CcOnlineCalib *c, const uint8_t *buf, size_t n, char *err, size_t errlen)
{
    const int F = c->F, HZ = c->HZ;
    const size_t fk = (size_t)F * (size_t)HZ, need = cc_online_calib_save_size(F, HZ);
    uint32_t hd[4];
    if (n < SAVE_HEAD)
        return cc_errf(err, errlen, -EINVAL, "interval scales: %zu bytes, shorter than a header",
                       n);
    memcpy(hd, buf, sizeof hd);
    if (hd[0] != SAVE_MAGIC)
        return cc_errf(err, errlen, -EINVAL, "interval scales: not a saved calibration (magic)");
    if (hd[1] != (uint32_t)F || hd[2] != (uint32_t)HZ)
        return cc_errf(err, errlen, -EINVAL,
                       "interval scales: saved for %u KPIs x %u steps, this model has %d x %d",
                       hd[1], hd[2], F, HZ);
    if (hd[3] != (uint32_t)c->s.per_step)
        return cc_errf(err, errlen, -EINVAL,
                       "interval scales: saved with per_step %u, this calibration has %d", hd[3],
                       c->s.per_step);
    if (n != need)
        return cc_errf(err, errlen, -EINVAL, "interval scales: %zu bytes, want %zu", n, need);
    float *level = malloc((size_t)F * sizeof *level), *log_scale = malloc(fk * sizeof *log_scale);
    if (!level || !log_scale) {
        free(level);
        free(log_scale);
        return cc_errf(err, errlen, -ENOMEM, "interval scales: out of memory");
    }
    memcpy(level, buf + SAVE_HEAD, (size_t)F * sizeof *level);
    memcpy(log_scale, buf + SAVE_HEAD + (size_t)F * sizeof *level, fk * sizeof *log_scale);
    /* what move / move_kpi can leave: within the clamp, in float as they compare */
    const float L = (float)c->s.max_log;
    long bl = bad_log(level, (size_t)F, L), bs = bad_log(log_scale, fk, L);
    if (bl >= 0 || bs >= 0 || (c->s.per_step && bad_log(level, (size_t)F, 0) >= 0)) {
        int rc =
            bl >= 0 || bs >= 0
                ? cc_errf(err, errlen, -EINVAL,
                          "interval scales: log-scale %g at %s %ld is not finite or outside the "
                          "clamp ±%g (scales within [%g, %g])",
                          bl >= 0 ? (double)level[bl] : (double)log_scale[bs],
                          bl >= 0 ? "KPI" : "entry", bl >= 0 ? bl : bs, (double)L, exp(-(double)L),
                          exp((double)L))
                : cc_errf(err, errlen, -EINVAL, "interval scales: per-step with a KPI level");
        free(level);
        free(log_scale);
        return rc;
    }
    memcpy(c->level, level, (size_t)F * sizeof *level);
    memcpy(c->log_scale, log_scale, fk * sizeof *log_scale);
    free(level);
    free(log_scale);
    const float lo = expf(-L), hi = expf(L);
    for (int f = 0; f < F; f++) {
        const float el = expf(c->level[f]);
        for (int k = 0; k < HZ; k++) {
            size_t i = (size_t)f * HZ + (size_t)k;
            if (c->s.per_step) {
                c->exp_offset[i] = 1;
                c->scale[i] = expf(c->log_scale[i]);
            } else {
                c->exp_offset[i] = expf(c->log_scale[i]);
                c->scale[i] = clampf(el * c->exp_offset[i], lo, hi);
            }
        }
    }
    /* the pending forecasts were not saved: none is held (a later push starts the ring) */
    for (int k = 0; k < HZ; k++)
        c->origin[k] = INT64_MIN;
    c->last_t = INT64_MIN;
    return 0;
}
