/*
 * cc_anomaly_state.c — a cell's anomaly state as bytes, for snapshots: a versioned
 * little-endian string written by cc_anomaly_cell_save and read back, older versions
 * included, by cc_anomaly_cell_load.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_anomaly_internal.h"

#define STATE_MAGIC 0x314D4E41u /* "ANM1" */
/* Each version appends what a new rule needs to its record; older ones are still read and
 * the new rule then starts from its initial state:
 *   2: + the lag calibration per KPI (its means, then warming up again);
 *   3: + the CUSUM sums per KPI and of the peak's attribution (0);
 *   4: + the seasonal profile: per KPI sums and scale, the bins (empty). */
#define STATE_VERSION 4u

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

/* The cell-wide fields of version 1 (the header excepted). */
static void put_cell(Buf *b, const CcAnomalyCell *c)
{
    put(b, c->id, sizeof c->id);
    PUT(b, c->last_step);
    PUT(b, c->exp_step);
    PUT(b, c->score_step);
    PUT(b, c->score);
    PUT(b, c->over_bits);
    PUT(b, c->crit_bits);
    PUT(b, c->win_step);
    PUT(b, c->zero_run);
    put_ep(b, &c->anom);
    put_ep(b, &c->zero);
    put_ep(b, &c->missing);
    int32_t np = c->n_peak;
    PUT(b, np);
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        int32_t kpi = c->peak[i].kpi;
        PUT(b, kpi);
        PUT(b, c->peak[i].observed);
        PUT(b, c->peak[i].expected);
        PUT(b, c->peak[i].lo);
        PUT(b, c->peak[i].hi);
        PUT(b, c->peak[i].z);
    }
    PUT(b, c->quiet_until);
    PUT(b, c->st.scored);
    PUT(b, c->st.over);
    PUT(b, c->st.firing);
    PUT(b, c->st.resolved);
    PUT(b, c->st.quiet);
}

/* A KPI's record: version 1, then the lag calibration (2) and the CUSUM sums (3). */
static void put_kpi(Buf *b, const KpiState *k)
{
    PUT(b, k->exp_mean);
    PUT(b, k->exp_sd);
    PUT(b, k->exp_scale);
    PUT(b, k->z);
    PUT(b, k->last_val);
    PUT(b, k->change_rate);
    PUT(b, k->run_max);
    PUT(b, k->run);
    PUT(b, k->has_last);
    PUT(b, k->abs1);
    PUT(b, k->absl);
    PUT(b, k->n1);
    PUT(b, k->nl);
    PUT(b, k->cu_pos);
    PUT(b, k->cu_neg);
    put_ep(b, &k->stuck);
    put_ep(b, &k->bounds);
}

/* After the lag ring: the peak's CUSUM sums (3), its profile fields and the profile (4). */
static void put_tail(Buf *b, const CcAnomalyCell *c)
{
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++)
        PUT(b, c->peak[i].cusum);
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        PUT(b, c->peak[i].profile);
        PUT(b, c->peak[i].profile_expected);
    }
    for (int f = 0; f < c->F; f++) {
        const KpiState *k = &c->k[f];
        PUT(b, k->pr_pos);
        PUT(b, k->pr_neg);
        PUT(b, k->pr_abs);
        PUT(b, k->pr_n);
    }
    int32_t NB = c->NB;
    PUT(b, NB);
    if (NB > 0) {
        put(b, c->prof, (size_t)2 * NB * (size_t)c->F * sizeof *c->prof);
        put(b, c->prof_n, (size_t)2 * NB * (size_t)c->F * sizeof *c->prof_n);
    }
}

long cc_anomaly_cell_save(const CcAnomalyCell *c, uint8_t *buf, size_t cap)
{
    Buf b = {buf, cap, 0};
    uint32_t magic = STATE_MAGIC, ver = STATE_VERSION, F = (uint32_t)c->F;
    PUT(&b, magic);
    PUT(&b, ver);
    PUT(&b, F);
    put_cell(&b, c);
    for (int f = 0; f < c->F; f++)
        put_kpi(&b, &c->k[f]);
    int32_t L = c->L;
    PUT(&b, L);
    if (L > 0) {
        put(&b, c->lag_target, (size_t)L * sizeof *c->lag_target);
        put(&b, c->lag, (size_t)L * (size_t)c->F * 3 * sizeof *c->lag);
    }
    put_tail(&b, c);
    if (buf && b.len > cap)
        return -ENOSPC;
    return (long)b.len;
}

/* The cell-wide fields of version 1 into t; *np gets the peak's length (checked later). */
static void get_cell(Rd *r, CcAnomalyCell *t, int32_t *np)
{
    get(r, t->id, sizeof t->id);
    t->id[sizeof t->id - 1] = 0;
    GET(r, t->last_step);
    GET(r, t->exp_step);
    GET(r, t->score_step);
    GET(r, t->score);
    GET(r, t->over_bits);
    GET(r, t->crit_bits);
    GET(r, t->win_step);
    GET(r, t->zero_run);
    get_ep(r, &t->anom);
    get_ep(r, &t->zero);
    get_ep(r, &t->missing);
    GET(r, *np);
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        int32_t kpi;
        GET(r, kpi);
        t->peak[i].kpi = kpi;
        GET(r, t->peak[i].observed);
        GET(r, t->peak[i].expected);
        GET(r, t->peak[i].lo);
        GET(r, t->peak[i].hi);
        GET(r, t->peak[i].z);
    }
    GET(r, t->quiet_until);
    GET(r, t->st.scored);
    GET(r, t->st.over);
    GET(r, t->st.firing);
    GET(r, t->st.resolved);
    GET(r, t->st.quiet);
}

/* A KPI's record of version ver; what it lacks starts from its initial state. Returns 1
 * when a value is out of its range. */
static int get_kpi(Rd *r, uint32_t ver, KpiState *k)
{
    int bad = 0;
    GET(r, k->exp_mean);
    GET(r, k->exp_sd);
    GET(r, k->exp_scale);
    GET(r, k->z);
    GET(r, k->last_val);
    GET(r, k->change_rate);
    GET(r, k->run_max);
    GET(r, k->run);
    GET(r, k->has_last);
    k->abs1 = k->absl = 0;
    k->n1 = k->nl = 0;
    if (ver >= 2) {
        GET(r, k->abs1);
        GET(r, k->absl);
        GET(r, k->n1);
        GET(r, k->nl);
        if (!(k->abs1 >= 0 && k->absl >= 0 && isfinite(k->abs1) && isfinite(k->absl)) ||
            k->n1 < 0 || k->nl < 0)
            bad = 1;
    }
    k->cu_pos = k->cu_neg = 0;
    if (ver >= 3) {
        GET(r, k->cu_pos);
        GET(r, k->cu_neg);
        if (!(k->cu_pos >= 0 && k->cu_neg >= 0 && isfinite(k->cu_pos) && isfinite(k->cu_neg)))
            bad = 1;
    }
    k->att_mul = 1;
    get_ep(r, &k->stuck);
    get_ep(r, &k->bounds);
    return bad;
}

/* The peak's CUSUM sums (version 3) and profile fields (4). 1 when a value is bad. */
static int get_peak_sums(Rd *r, uint32_t ver, CcAnomalyCell *t)
{
    int bad = 0;
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        t->peak[i].cusum = 0;
        if (ver >= 3) {
            GET(r, t->peak[i].cusum);
            bad |= !isfinite(t->peak[i].cusum);
        }
    }
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        t->peak[i].profile = 0;
        t->peak[i].profile_expected = NAN;
        if (ver >= 4) {
            GET(r, t->peak[i].profile);
            GET(r, t->peak[i].profile_expected);
            bad |= !isfinite(t->peak[i].profile);
        }
    }
    return bad;
}

/* A KPI's profile sums and scale (version 4; older: an empty profile). 1 when bad. */
static int get_kpi_profile(Rd *r, uint32_t ver, KpiState *k)
{
    k->pr_pos = k->pr_neg = k->pr_abs = 0;
    k->pr_n = 0;
    k->pr_exp = NAN;
    if (ver < 4)
        return 0;
    GET(r, k->pr_pos);
    GET(r, k->pr_neg);
    GET(r, k->pr_abs);
    GET(r, k->pr_n);
    return !(k->pr_pos >= 0 && k->pr_neg >= 0 && k->pr_abs >= 0 && isfinite(k->pr_pos) &&
             isfinite(k->pr_neg) && isfinite(k->pr_abs)) ||
           k->pr_n < 0;
}

static int profile_bins_valid(int32_t NB)
{
    return NB > 0 && NB <= 288 && 86400 % NB == 0;
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
    t.lag_target = NULL, t.lag = NULL, t.prof = NULL, t.prof_n = NULL;
    int rc = -ENOMEM, bad_val = 0; /* bad_val: a decoded value out of its range */
    int32_t np = 0, L = 0, NB = 0;
    t.k = malloc((size_t)c->F * sizeof *t.k);
    if (!t.k)
        goto fail;
    get_cell(&r, &t, &np);
    for (int f = 0; f < c->F; f++)
        bad_val |= get_kpi(&r, ver, &t.k[f]);
    GET(&r, L);
    if (!r.bad && L > 0 && L <= CC_ANOMALY_MAX_LAG) {
        if (!(t.lag_target = cc_lag_block(L, c->F, &t.lag)))
            goto fail;
        get(&r, t.lag_target, (size_t)L * sizeof *t.lag_target);
        get(&r, t.lag, (size_t)L * (size_t)c->F * 3 * sizeof *t.lag);
    }
    bad_val |= get_peak_sums(&r, ver, &t);
    for (int f = 0; f < c->F; f++)
        bad_val |= get_kpi_profile(&r, ver, &t.k[f]);
    if (ver >= 4)
        GET(&r, NB);
    if (!r.bad && profile_bins_valid(NB)) {
        size_t cnt = (size_t)2 * NB * (size_t)c->F;
        if (!(t.prof = cc_profile_block(NB, c->F, &t.prof_n)))
            goto fail;
        get(&r, t.prof, cnt * sizeof *t.prof);
        get(&r, t.prof_n, cnt * sizeof *t.prof_n);
        for (size_t i = 0; i < cnt && !r.bad; i++)
            bad_val |= !isfinite(t.prof[i]);
    }
    rc = -EINVAL;
    if (r.bad || bad_val || r.off != len || np < 0 || np > CC_ALERT_MAX_ATTR || L < 0 ||
        L > CC_ANOMALY_MAX_LAG || NB < 0 || (NB > 0 && !profile_bins_valid(NB)))
        goto fail;
    t.n_peak = np;
    t.L = L;
    t.NB = NB;
    memcpy(c->k, t.k, (size_t)c->F * sizeof *t.k);
    free(t.k);
    t.k = c->k;
    free(c->lag_target);
    free(c->prof);
    *c = t;
    return 0;
fail:
    free(t.prof);
    free(t.lag_target);
    free(t.k);
    if (rc == -ENOMEM)
        return cc_errf(err, errlen, rc, "anomaly state: out of memory");
    return cc_errf(err, errlen, rc, "anomaly state: %s (%zu bytes)",
                   r.bad ? "truncated" : "malformed", len);
}
