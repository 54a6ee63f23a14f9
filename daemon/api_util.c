/* api_util.c — the reply builders every handler uses (api_util.h): number and time
 * formatting, the growable reply string, the common query parameters, the cell lookup and
 * the versions the reply cache keys on. Loop thread only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_util.h"
#include "cc_json.h"
#include "cc_time.h"
#include "cells.h"
#include "cluster.h"
#include "config.h"
#include "query.h"

/* Inverse standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9 after
 * one Newton step on erfc). */
double ccd_probit(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00,  2.938163982698783e+00};
    static const double dd[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                3.754408661907416e+00};
    double q, r, x;
    if (p < 0.02425) {
        q = sqrt(-2 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((dd[0] * q + dd[1]) * q + dd[2]) * q + dd[3]) * q + 1);
    } else if (p <= 1 - 0.02425) {
        q = p - 0.5;
        r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    } else {
        q = sqrt(-2 * log(1 - p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((dd[0] * q + dd[1]) * q + dd[2]) * q + dd[3]) * q + 1);
    }
    double e = 0.5 * erfc(-x / sqrt(2)) - p;
    double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

/* RFC 3339 UTC of unix seconds (cc_time); outside years 0..9999 the number itself. buf
 * holds at least CC_RFC3339_LEN bytes. */
void ccd_rfc3339(int64_t unix_s, char *buf, size_t n)
{
    if (cc_time_format_rfc3339(unix_s, buf, n))
        snprintf(buf, n, "%lld", (long long)unix_s);
}

/* The quoted, escaped JSON string of s[0..n) into o, which has room for
 * CC_JSON_ESCAPED_MAX(n) + 2 bytes (cc_json_escape). Returns its length. */
static size_t jstr(char *o, const char *s, size_t n)
{
    o[0] = '"';
    size_t k = 1 + cc_json_escape(o + 1, s, n);
    o[k] = '"';
    return k + 1;
}

/* A finite number with 7 significant digits (like %.7g, without printf's cost: the
 * forecast route formats ~800 of them per reply), or null. */
int ccd_fmt_num(char *buf, size_t n, double v)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9, 1e10,
                                 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20};
    if (!isfinite(v))
        return snprintf(buf, n, "null");
    double a = fabs(v);
    if (n < 32 || a >= 1e14 || (a < 1e-6 && a != 0))
        return snprintf(buf, n, "%.7g", v);
    if (a == 0)
        return snprintf(buf, n, "0");
    int e = 0; /* decimal exponent: 10^e <= a < 10^(e+1) */
    if (a >= 1)
        while (e < 14 && a >= p10[e + 1])
            e++;
    else
        while (e > -7 && a < 1 / p10[-e])
            e--;
    long long m = e <= 6 ? llround(a * p10[6 - e]) : llround(a / p10[e - 6]);
    if (m >= 10000000) { /* rounding carried into a new digit */
        m /= 10;
        e++;
    }
    char dig[8], *o = buf;
    for (int i = 6; i >= 0; i--, m /= 10)
        dig[i] = (char)('0' + m % 10);
    if (v < 0)
        *o++ = '-';
    if (e >= 6) { /* integer: 7 digits then zeros */
        memcpy(o, dig, 7);
        o += 7;
        for (int i = 6; i < e; i++)
            *o++ = '0';
    } else if (e >= 0) {
        memcpy(o, dig, (size_t)e + 1);
        o += e + 1;
        *o++ = '.';
        memcpy(o, dig + e + 1, (size_t)(6 - e));
        o += 6 - e;
    } else {
        *o++ = '0';
        *o++ = '.';
        for (int i = -1; i > e; i--)
            *o++ = '0';
        memcpy(o, dig, 7);
        o += 7;
    }
    if (e < 6) { /* strip trailing zeros of the fraction, and a bare point */
        while (o[-1] == '0')
            o--;
        if (o[-1] == '.')
            o--;
    }
    *o = 0;
    return (int)(o - buf);
}

char *ccd_sb_room(CcdSb *b, size_t need)
{
    if (b->n + need + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096) + need;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    return b->p + b->n;
}

void ccd_sb_add(CcdSb *b, const char *s, size_t len)
{
    char *o = ccd_sb_room(b, len);
    if (o) {
        memcpy(o, s, len);
        b->n += len;
    }
}

void ccd_sb_str(CcdSb *b, const char *s) { ccd_sb_add(b, s, strlen(s)); }

void ccd_sb_num(CcdSb *b, double v)
{
    char *o = ccd_sb_room(b, 40);
    if (o)
        b->n += (size_t)ccd_fmt_num(o, 40, v);
}

void ccd_sb_int(CcdSb *b, long long v)
{
    char tmp[24];
    int i = 23;
    unsigned long long u = v < 0 ? -(unsigned long long)v : (unsigned long long)v;
    tmp[i] = 0;
    do
        tmp[--i] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        tmp[--i] = '-';
    ccd_sb_add(b, tmp + i, (size_t)(23 - i));
}

void ccd_sb_ts(CcdSb *b, int64_t unix_s)
{
    char ts[32];
    ccd_rfc3339(unix_s, ts, sizeof ts);
    ccd_sb_add(b, "\"", 1);
    ccd_sb_str(b, ts);
    ccd_sb_add(b, "\"", 1);
}

/* A JSON string (escaped). */
void ccd_sb_jstr(CcdSb *b, const char *s)
{
    size_t n = strlen(s);
    char *o = ccd_sb_room(b, CC_JSON_ESCAPED_MAX(n) + 2);
    if (o)
        b->n += jstr(o, s, n);
}

CcdSb *ccd_reply_sb(void)
{
    static CcdSb sb;
    sb.n = 0;
    sb.oom = 0;
    return &sb;
}

int ccd_sb_reply(CcdReq *r, CcdSb *b)
{
    if (b->oom)
        return ccd_problem(r, 500, "internal", "out of memory");
    ccd_sb_add(b, "\n", 1);
    evbuffer_add(r->out, b->p, b->n);
    return ccd_text(r, 200, "application/json");
}

/* Parses an integer parameter; 0 ok, -1 absent, -2 malformed. */
int ccd_query_int(CcdReq *r, const char *name, long long *out)
{
    const char *s = ccd_query(r, name);
    char *end;
    if (!s)
        return -1;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return (!*s || *end || errno) ? -2 : 0;
}

int ccd_find_cell(CcdReq *r, CcdCell **out)
{
    if (!cc_kpi_valid_cell_id(r->id, strlen(r->id)))
        return -ccd_problem(r, 400, "bad-cell-id",
                            "'%s' is not a valid cell id (1..%d of [A-Za-z0-9._:/-])", r->id,
                            CC_KPI_CELL_ID_MAX);
    *out = ccd_cells_get(r->d->cells, r->id);
    if (!*out) {
        int st = ccd_cluster_redirect(r); /* another member's cell: 307 to it */
        if (st)
            return -st;
        return -ccd_problem(r, 404, "cell-not-found", "no cell '%s' on this daemon", r->id);
    }
    return 1;
}

/* Loop-thread scratch for copies of published forecasts. */
float *ccd_scratch_floats(size_t n)
{
    static float *buf;
    static size_t cap;
    if (n > cap) {
        float *p = realloc(buf, n * sizeof *p);
        if (!p)
            return NULL;
        buf = p;
        cap = n;
    }
    return buf;
}

/* Parses kpis=a,b (query.h) into a feature mask; 0 or a problem status. */
int ccd_query_kpis(CcdReq *r, uint64_t *mask)
{
    const CcHparams *hp = &r->d->model->hp;
    const char *s = ccd_query(r, "kpis");
    if (!s) {
        s = ccd_query(r, "kpi");
        if (!s) {
            *mask = hp->n_features >= 64 ? ~0ULL : (1ULL << hp->n_features) - 1;
            return 0;
        }
    }
    char bad[CC_FEATURE_NAME_MAX];
    int rc = ccd_parse_kpis(s, hp, mask, bad, sizeof bad);
    if (rc == -ENAMETOOLONG)
        return ccd_problem(r, 422, "unknown-kpi", "KPI name too long");
    if (rc && bad[0])
        return ccd_problem(r, 422, "unknown-kpi", "the model has no KPI '%s' (GET /v1/model)", bad);
    if (rc)
        return ccd_problem(r, 422, "unknown-kpi", "kpis is empty");
    return 0;
}

/* level=: 0 ok (absent: forecast.level), or a problem status. */
int ccd_query_level(CcdReq *r, double *level)
{
    const char *ls = ccd_query(r, "level");
    *level = r->d->cfg.forecast_level;
    if (ls) {
        char *end;
        *level = strtod(ls, &end);
        if (!*ls || *end || !isfinite(*level))
            return ccd_problem(r, 400, "bad-parameter", "level must be a number");
        if (!(*level > 0 && *level < 1))
            return ccd_problem(r, 422, "bad-parameter", "level must be in (0, 1), got %g", *level);
    }
    return 0;
}

int ccd_query_time(CcdReq *r, const char *name, int64_t absent, int64_t *out)
{
    const char *s = ccd_query(r, name);
    *out = absent;
    if (!s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno) {
        *out = v;
        return 0;
    }
    int64_t u;
    if (cc_time_parse_rfc3339(s, strlen(s), &u))
        return ccd_problem(r, 400, "bad-parameter", "%s must be unix seconds or RFC 3339, got '%s'",
                           name, s);
    *out = u;
    return 0;
}

int ccd_query_since(CcdReq *r, int64_t *since)
{
    return ccd_query_time(r, "since", INT64_MIN, since);
}

double ccd_level_z(double level)
{
    /* from the tail probability: 0.5 + level / 2 rounds to 1 (z = inf) for a level within
     * 2^-53 of 1, (1 - level) / 2 stays exact */
    return -ccd_probit((1 - level) / 2);
}

void ccd_kpi_bounds(const Ccd *d, double *lo, double *hi)
{
    const CcHparams *hp = &d->model->hp;
    const CcdStrMap *m = &d->cfg.alerts_kpis;
    int given[CC_MAX_FEATURES] = {0};
    for (int f = 0; f < hp->n_features; f++) {
        lo[f] = -INFINITY;
        hi[f] = INFINITY;
    }
    for (int i = 0; i < m->n; i++) {
        const char *key = m->items[i].key, *dot = strrchr(key, '.');
        char name[CC_FEATURE_NAME_MAX], *end;
        if (!dot || (size_t)(dot - key) >= sizeof name ||
            (strcmp(dot, ".min") && strcmp(dot, ".max")))
            continue;
        memcpy(name, key, (size_t)(dot - key));
        name[dot - key] = 0;
        int f = cc_hparams_feature_index(hp, name);
        double v = strtod(m->items[i].value, &end);
        if (f < 0 || end == m->items[i].value || *end || !isfinite(v))
            continue; /* the alerts' settings refuse such a file: not reached */
        if (dot[2] == 'i')
            lo[f] = v;
        else
            hi[f] = v;
        given[f] |= dot[2] == 'i' ? 1 : 2;
    }
    for (int f = 0; f < hp->n_features; f++)
        if (given[f] == 3 && !(lo[f] < hi[f])) { /* as the alerts: both only when min < max */
            lo[f] = -INFINITY;
            hi[f] = INFINITY;
        }
}

uint64_t ccd_version_seed(const Ccd *d) { return ccd_fold(CC_FNV1A_SEED, d->reloads_ok); }

uint64_t ccd_cell_version(Ccd *d, const CcdCell *c, uint64_t h)
{
    pthread_mutex_lock(&d->cells->pub_lock);
    uint64_t seq = c->pub.seq; /* bumped by every publish, which also records the history */
    pthread_mutex_unlock(&d->cells->pub_lock);
    return ccd_fold(ccd_fold(h, c->serial), seq);
}

/* A JSON string into an evbuffer (names: short). */
void ccd_evbuffer_jstr(struct evbuffer *b, const char *s)
{
    char tmp[CC_JSON_ESCAPED_MAX(CC_FEATURE_NAME_MAX) + 2];
    size_t n = strlen(s);
    if (n > CC_FEATURE_NAME_MAX)
        n = CC_FEATURE_NAME_MAX;
    evbuffer_add(b, tmp, jstr(tmp, s, n));
}
