/* api_series.c — the dashboard's reads (issue 15): a cell's long history and its past
 * forecasts against what happened, over since/until ranges with down-sampling, and batch
 * reads of several cells' forecasts and histories. Documented in proto/openapi.yaml; the
 * long history itself is lib/cc_history.c, recorded by publish.c. Loop thread only; a cell
 * the worker is stepping defers the request (CCD_DEFER) like GET /v1/cells/{id}/history
 * always did. What a reply costs the daemon is the bytes it writes (the replies are cached
 * per published step, http_cache.h): kpis=, fields= and digits= let a client ask only for
 * what it draws. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alerts.h"
#include "api_forecast.h"
#include "api_series.h"
#include "api_util.h"
#include "cc_history.h"
#include "cells.h"
#include "config.h"
#include "http_cache.h"

/* Ids per batch read. */
#define BATCH_MAX 100

/* The members of a step a reply may carry (fields=); "step" is always there. */
enum {
    FLD_TS = 1 << 0,
    FLD_IMPUTED = 1 << 1,
    FLD_VALUES = 1 << 2,
    FLD_MEAN = 1 << 3, /* FLD_MEAN..FLD_HI95: a band's members, in band()'s order */
    FLD_LO80 = 1 << 4,
    FLD_HI80 = 1 << 5,
    FLD_LO95 = 1 << 6,
    FLD_HI95 = 1 << 7,
    FLD_ACTUAL = 1 << 8,
    FLD_SCORES = 1 << 9,
    FLD_ONE_STEP = 1 << 10, /* the forecast kinds (CcHistoryFc order) */
    FLD_HORIZON_END = 1 << 11,
};
static const char *const field_names[] = {"ts",     "imputed", "values",   "mean",
                                          "lo80",   "hi80",    "lo95",     "hi95",
                                          "actual", "scores",  "one_step", "horizon_end"};
#define HISTORY_FIELDS (FLD_TS | FLD_IMPUTED | FLD_VALUES)
#define BAND_FIELDS (FLD_MEAN | FLD_LO80 | FLD_HI80 | FLD_LO95 | FLD_HI95)
#define KIND_FIELDS (FLD_ONE_STEP | FLD_HORIZON_END)
#define FORECASTS_FIELDS (FLD_TS | BAND_FIELDS | FLD_ACTUAL | FLD_SCORES | KIND_FIELDS)

/* A request's span of time, its down-sampling and what each step shows. */
typedef struct Range {
    int64_t since, until; /* unix seconds, inclusive; INT64_MIN / INT64_MAX: open */
    long long max_points; /* 0: every step */
    uint64_t kpis;        /* the KPIs shown (kpis=, default all) */
    unsigned fields;      /* FLD_* (fields=, default all the route has) */
    int digits;           /* significant digits of the numbers (digits=, default 7) */
} Range;

/* fields=a,b of the route's `allowed` into g->fields; 0 or a problem status. */
static int parse_fields(CcdReq *r, unsigned allowed, Range *g)
{
    const int n = (int)(sizeof field_names / sizeof *field_names);
    const char *s = ccd_query(r, "fields");
    g->fields = s ? 0 : allowed;
    for (const char *p = s; p; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int i = 0;
        while (i < n && (!(allowed >> i & 1) || strlen(field_names[i]) != len ||
                         strncmp(field_names[i], p, len)))
            i++;
        if (i == n) {
            char names[128] = ""; /* the route's, for the message */
            for (int j = 0; j < n; j++)
                if (allowed >> j & 1)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             names[0] ? ", " : "", field_names[j]);
            return ccd_problem(r, 422, "bad-parameter", "fields: no field '%.*s' here (%s)",
                               (int)(len < 64 ? len : 64), p, names);
        }
        g->fields |= 1u << i;
        if (!comma)
            break;
        p = comma;
    }
    /* no kind named: both; a kind named without a band member: its whole band */
    if (!(g->fields & KIND_FIELDS))
        g->fields |= allowed & KIND_FIELDS;
    else if (!(g->fields & BAND_FIELDS))
        g->fields |= allowed & BAND_FIELDS;
    return 0;
}

static int parse_range(CcdReq *r, unsigned fields, Range *g)
{
    int rc;
    long long digits = 7;
    if ((rc = ccd_query_time(r, "since", INT64_MIN, &g->since)) ||
        (rc = ccd_query_time(r, "until", INT64_MAX, &g->until)))
        return rc;
    g->max_points = 0;
    rc = ccd_query_int(r, "max_points", &g->max_points);
    if (rc == -2)
        return ccd_problem(r, 400, "bad-parameter", "max_points must be an integer");
    if (!rc && (g->max_points < 1 || g->max_points > 1000000))
        return ccd_problem(r, 422, "bad-parameter", "max_points must be in [1, 1000000], got %lld",
                           g->max_points);
    if ((rc = ccd_query_int(r, "digits", &digits)) == -2)
        return ccd_problem(r, 400, "bad-parameter", "digits must be an integer");
    if (digits < 1 || digits > 7)
        return ccd_problem(r, 422, "bad-parameter", "digits must be in [1, 7], got %lld", digits);
    g->digits = (int)digits;
    if ((rc = ccd_query_kpis(r, &g->kpis)) || (rc = parse_fields(r, fields, g)))
        return rc;
    return 0;
}

/* v with `digits` significant digits: rounded here, ccd_sb_num prints it without the zeros
 * that follow (a plot needs ~4 digits; 7 cost the bytes that make a reply's cost). */
static void num(CcdSb *sb, double v, int digits)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (digits < 7 && isfinite(v) && v != 0) {
        int k = digits - 1 - (int)floor(log10(fabs(v))); /* decimals to keep */
        if (k >= 0 && k <= 22)
            v = round(v * p10[k]) / p10[k];
        else if (k < 0 && k >= -22)
            v = round(v / p10[-k]) * p10[-k];
    }
    ccd_sb_num(sb, v);
}

/* The steps [*from, *to] the range covers at S seconds per step, clipped to [lo, hi]:
 * since rounds up and until down to a step, without overflow at the ends of int64 (since
 * = INT64_MAX once wrapped to a negative step and served everything). */
static void range_steps(const Range *g, int64_t S, int64_t lo, int64_t hi, int64_t *from,
                        int64_t *to)
{
    int64_t a = g->since > 0 ? g->since / S + (g->since % S != 0) : g->since / S;
    int64_t b = g->until >= 0 ? g->until / S : g->until / S - (g->until % S != 0);
    *from = a > lo ? a : lo;
    *to = b < hi ? b : hi;
}

/* The first step served of [from, to] with at most max_points, stepping by *stride and
 * keeping `to` (the newest). */
static int64_t range_start(const Range *g, int64_t from, int64_t to, int64_t *stride)
{
    int64_t n = to - from + 1;
    *stride = !g->max_points || n <= g->max_points ? 1 : (n + g->max_points - 1) / g->max_points;
    return to - (to - from) / *stride * *stride;
}

static void kpi_names(CcdSb *sb, const CcHparams *hp, uint64_t kpis)
{
    const char *sep = "";
    ccd_sb_str(sb, "\"kpis\":[");
    for (int f = 0; f < hp->n_features; f++)
        if (kpis >> f & 1) {
            ccd_sb_str(sb, sep);
            ccd_sb_jstr(sb, hp->features[f]);
            sep = ",";
        }
    ccd_sb_add(sb, "]", 1);
}

/* The KPIs of g->kpis of v + z sd (F; sd NULL: v), clamped to [lo, hi] when given, as a
 * JSON array. */
static void num_array(CcdSb *sb, const float *v, const float *sd, double z, int F, const Range *g,
                      const double *lo, const double *hi)
{
    const char *sep = "";
    ccd_sb_add(sb, "[", 1);
    for (int f = 0; f < F; f++)
        if (g->kpis >> f & 1) {
            double x = sd ? v[f] + z * sd[f] : v[f];
            ccd_sb_str(sb, sep);
            num(sb, lo ? fmin(fmax(x, lo[f]), hi[f]) : x, g->digits);
            sep = ",";
        }
    ccd_sb_add(sb, "]", 1);
}

static void step_head(CcdSb *sb, int64_t p, int64_t S, const Range *g, int first)
{
    ccd_sb_str(sb, first ? "{\"step\":" : ",{\"step\":");
    ccd_sb_int(sb, p);
    if (g->fields & FLD_TS) {
        ccd_sb_str(sb, ",\"ts\":");
        ccd_sb_ts(sb, p * S);
    }
}

/* A history step's members after its head. */
static void history_step(CcdSb *sb, const float *v, int imputed, int F, const Range *g)
{
    if (g->fields & FLD_IMPUTED)
        ccd_sb_str(sb, imputed ? ",\"imputed\":true" : ",\"imputed\":false");
    if (g->fields & FLD_VALUES) {
        ccd_sb_str(sb, ",\"values\":");
        num_array(sb, v, NULL, 0, F, g, NULL, NULL);
    }
    ccd_sb_add(sb, "}", 1);
}

/* The history object of c (not busy): its long history, or the engine's window when
 * history.depth is 0. */
static void history_obj(Ccd *d, CcdCell *c, const Range *g, CcdSb *sb)
{
    const CcHparams *hp = &d->model->hp;
    const int F = hp->n_features;
    const int64_t S = hp->step_seconds;
    int64_t first, last, last_obs, from, to, stride;
    ccd_sb_str(sb, "{\"cell\":");
    ccd_sb_jstr(sb, c->id);
    ccd_sb_str(sb, ",\"step_seconds\":");
    ccd_sb_int(sb, S);
    ccd_sb_add(sb, ",", 1);
    kpi_names(sb, hp, g->kpis);
    ccd_sb_str(sb, ",\"steps\":[");
    int n = 0;
    if (d->cells->hist_depth) {
        if (c->hist) {
            CcHistoryRow row;
            cc_history_span(c->hist, &first, &last, &last_obs);
            range_steps(g, S, first, last_obs, &from, &to);
            for (int64_t p = range_start(g, from, to, &stride); from <= to && p <= to; p += stride)
                if (cc_history_get(c->hist, p, &row) && row.observed) {
                    step_head(sb, p, S, g, !n++);
                    history_step(sb, row.values, row.imputed, F, g);
                }
        }
    } else {
        float v[CC_MAX_FEATURES];
        cc_cell_span(c->cell, &first, &last);
        range_steps(g, S, first, last, &from, &to);
        for (int64_t p = range_start(g, from, to, &stride); first >= 0 && from <= to && p <= to;
             p += stride)
            if (!cc_cell_history(c->cell, p, 1, v)) {
                step_head(sb, p, S, g, !n++);
                history_step(sb, v, ccd_cells_imputed(d->cells, c, p), F, g);
            }
    }
    ccd_sb_add(sb, "]}", 2);
}

/* Scores of one forecast kind over a span: per KPI, |actual - mean| summed and the
 * actuals inside the 80 % band, over the steps with both. */
typedef struct Score {
    double abs_err[CC_MAX_FEATURES];
    int64_t inside[CC_MAX_FEATURES], n[CC_MAX_FEATURES];
} Score;

/* z of the 80 % and 95 % bands */
static double z80, z95;

/* A forecast's band: the members of g->fields among mean, lo80, hi80, lo95, hi95 (one at
 * least). */
static void band(CcdSb *sb, const float *mean, const float *sd, const double *lo, const double *hi,
                 int F, const Range *g)
{
    static const char *const keys[] = {
        "\"mean\":", "\"lo80\":", "\"hi80\":", "\"lo95\":", "\"hi95\":"};
    const double zs[] = {0, -z80, z80, -z95, z95};
    const char *sep = "{";
    for (int k = 0; k < 5; k++)
        if (g->fields & (unsigned)FLD_MEAN << k) {
            ccd_sb_str(sb, sep);
            ccd_sb_str(sb, keys[k]);
            num_array(sb, mean, k ? sd : NULL, zs[k], F, g, lo, hi);
            sep = ",";
        }
    ccd_sb_add(sb, "}", 1);
}

static void score_add(Score *s, const CcHistoryRow *row, int kind, const double *lo,
                      const double *hi, int F)
{
    for (int f = 0; f < F; f++) {
        double a = row->values[f], m = row->mean[kind][f], sd = row->sd[kind][f];
        if (!isfinite(a) || !isfinite(m))
            continue;
        double mc = fmin(fmax(m, lo[f]), hi[f]);
        double l = fmin(fmax(m - z80 * sd, lo[f]), hi[f]),
               h = fmin(fmax(m + z80 * sd, lo[f]), hi[f]);
        s->abs_err[f] += fabs(a - mc);
        s->inside[f] += a >= l && a <= h;
        s->n[f]++;
    }
}

static void score_out(CcdSb *sb, const Score *s, int F, const Range *g)
{
    static const char *const keys[] = {"{\"mae\":[", "],\"coverage80\":[", "],\"n\":["};
    for (int k = 0; k < 3; k++) {
        const char *sep = "";
        ccd_sb_str(sb, keys[k]);
        for (int f = 0; f < F; f++) {
            if (!(g->kpis >> f & 1))
                continue;
            double n = (double)s->n[f];
            ccd_sb_str(sb, sep);
            if (k == 2)
                ccd_sb_int(sb, s->n[f]);
            else
                num(sb,
                    !s->n[f] ? NAN
                    : k      ? (double)s->inside[f] / n
                             : s->abs_err[f] / n,
                    g->digits);
            sep = ",";
        }
    }
    ccd_sb_str(sb, "]}");
}

/* The past-forecasts object of c (not busy; history.depth > 0). */
static void forecasts_obj(Ccd *d, CcdCell *c, const Range *g, CcdSb *sb)
{
    static const char *const kinds[] = {",\"one_step\":", ",\"horizon_end\":"};
    const CcHparams *hp = &d->model->hp;
    const int F = hp->n_features;
    const int64_t S = hp->step_seconds;
    double lo[CC_MAX_FEATURES], hi[CC_MAX_FEATURES];
    Score sc[2];
    CcHistoryRow row;
    int64_t first = -1, last = -1, last_obs, from = 0, to = -1, stride = 1;
    z80 = ccd_level_z(0.8);
    z95 = ccd_level_z(0.95);
    ccd_kpi_bounds(d, lo, hi);
    memset(sc, 0, sizeof sc);
    ccd_sb_str(sb, "{\"cell\":");
    ccd_sb_jstr(sb, c->id);
    ccd_sb_str(sb, ",\"step_seconds\":");
    ccd_sb_int(sb, S);
    ccd_sb_str(sb, ",\"horizon\":");
    ccd_sb_int(sb, hp->horizon);
    ccd_sb_add(sb, ",", 1);
    kpi_names(sb, hp, g->kpis);
    ccd_sb_str(sb, ",\"steps\":[");
    if (c->hist) {
        cc_history_span(c->hist, &first, &last, &last_obs);
        range_steps(g, S, first, last, &from, &to);
    }
    /* the scores cover every step of the span, the points only the down-sampled ones */
    for (int64_t p = from; c->hist && (g->fields & FLD_SCORES) && p <= to; p++)
        if (cc_history_get(c->hist, p, &row) && row.observed)
            for (int k = 0; k < 2; k++)
                if (row.have_fc[k] && (g->fields & (unsigned)FLD_ONE_STEP << k))
                    score_add(&sc[k], &row, k, lo, hi, F);
    int n = 0;
    for (int64_t p = range_start(g, from, to, &stride); c->hist && from <= to && p <= to;
         p += stride) {
        if (!cc_history_get(c->hist, p, &row))
            continue;
        step_head(sb, p, S, g, !n++);
        for (int k = 0; k < 2 && (g->fields & BAND_FIELDS); k++) {
            if (!(g->fields & (unsigned)FLD_ONE_STEP << k))
                continue;
            ccd_sb_str(sb, kinds[k]);
            if (row.have_fc[k])
                band(sb, row.mean[k], row.sd[k], lo, hi, F, g);
            else
                ccd_sb_str(sb, "null");
        }
        if (g->fields & FLD_ACTUAL) {
            ccd_sb_str(sb, ",\"actual\":");
            num_array(sb, row.values, NULL, 0, F, g, NULL, NULL);
        }
        ccd_sb_add(sb, "}", 1);
    }
    ccd_sb_add(sb, "]", 1);
    if (g->fields & FLD_SCORES) {
        const char *sep = ",\"scores\":{";
        for (int k = 0; k < 2; k++)
            if (g->fields & (unsigned)FLD_ONE_STEP << k) {
                ccd_sb_str(sb, sep);
                ccd_sb_str(sb, kinds[k] + 1);
                score_out(sb, &sc[k], F, g);
                sep = ",";
            }
        ccd_sb_add(sb, "}", 1);
    }
    ccd_sb_add(sb, "}", 1);
}

/* The values (steps served x KPIs) c's history (forecasts 0) or past forecasts (1) over g
 * would send: what http.max_read_values bounds. c not busy. */
static int64_t range_values(Ccd *d, CcdCell *c, const Range *g, int forecasts)
{
    const int64_t S = d->model->hp.step_seconds;
    int64_t first = -1, last = -1, last_obs = -1, from, to, stride;
    if (d->cells->hist_depth) {
        if (!c->hist)
            return 0;
        cc_history_span(c->hist, &first, &last, &last_obs);
        if (!forecasts)
            last = last_obs;
    } else {
        cc_cell_span(c->cell, &first, &last);
        if (first < 0)
            return 0;
    }
    range_steps(g, S, first, last, &from, &to);
    if (from > to)
        return 0;
    /* the start first: an operand beside the call would be read unsequenced with it */
    int64_t start = range_start(g, from, to, &stride);
    int64_t steps = (to - start) / stride + 1;
    return steps * __builtin_popcountll(g->kpis);
}

/* 413 when a read asks for more than http.max_read_values values (counted), else 0. */
static int over_read_limit(CcdReq *r, int64_t values, int n_cells)
{
    int64_t max = r->d->cfg.http_max_read_values;
    if (values <= max)
        return 0;
    ccd_http_count_refused_read(r->d, CCD_READ_MAX_VALUES);
    return ccd_problem(r, 413, "read-too-large",
                       "this read asks for %lld values (%d cell(s) x steps x KPIs); "
                       "http.max_read_values is %lld: narrow since/until, lower max_points, or "
                       "ask for fewer cells or kpis",
                       (long long)values, n_cells, (long long)max);
}

/* One cell's history (forecasts 0) or past forecasts (1). */
static int series_reply(CcdReq *r, int forecasts)
{
    CcdCell *c;
    Range g;
    int rc = ccd_find_cell(r, &c);
    if (rc < 0)
        return -rc;
    if ((rc = parse_range(r, forecasts ? FORECASTS_FIELDS : HISTORY_FIELDS, &g)))
        return rc;
    if (forecasts && !r->d->cells->hist_depth)
        return ccd_problem(r, 404, "history-not-kept",
                           "past forecasts are not kept (history.depth: 0)");
    if (c->busy)
        return CCD_DEFER; /* the worker is stepping it: answer after the batch */
    if ((rc = over_read_limit(r, range_values(r->d, c, &g, forecasts), 1)))
        return rc;
    if ((rc = ccd_reply_cached(r, ccd_cell_version(r->d, c, ccd_version_seed(r->d)))))
        return rc; /* dashboards poll: rendered once per step */
    CcdSb *sb = ccd_reply_sb();
    if (forecasts)
        forecasts_obj(r->d, c, &g, sb);
    else
        history_obj(r->d, c, &g, sb);
    return ccd_sb_reply(r, sb);
}

int ccd_h_history(CcdReq *r) { return series_reply(r, 0); }

int ccd_h_forecasts(CcdReq *r) { return series_reply(r, 1); }

/* The cells of cells=a,b,c: the known ones in found (n_found), the others (ids that are
 * not valid or not on this daemon) as a JSON array in unknown. 0 or a problem status. */
static int parse_cells(CcdReq *r, CcdCell **found, int *n_found, CcdSb *unknown)
{
    const char *s = ccd_query(r, "cells");
    int n = 0;
    *n_found = 0;
    if (!s || !*s)
        return ccd_problem(r, 422, "bad-parameter", "cells must list 1 to %d cell ids: cells=a,b",
                           BATCH_MAX);
    ccd_sb_add(unknown, "[", 1);
    for (const char *p = s;; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char id[CC_KPI_CELL_ID_MAX + 1];
        if (++n > BATCH_MAX)
            return ccd_problem(r, 422, "too-many-cells", "at most %d cell ids per request",
                               BATCH_MAX);
        if (!cc_kpi_valid_cell_id(p, len)) { /* as the single-cell routes: 400 */
            char shown[3 * 16 + 1];          /* its first bytes, printable */
            size_t k = 0;
            for (size_t j = 0; j < len && j < 16; j++)
                k += (size_t)snprintf(
                    shown + k, sizeof shown - k,
                    p[j] > 0x20 && p[j] < 0x7f && p[j] != '"' && p[j] != '\\' ? "%c" : "%%%02X",
                    (unsigned char)p[j]);
            ccd_http_count_refused_read(r->d, CCD_READ_BAD_CELL_ID);
            return ccd_problem(r, 400, "bad-cell-id",
                               "cells: id %d '%s%s' is not a valid cell id (1..%d of "
                               "[A-Za-z0-9._:/-])",
                               n, shown, len > 16 ? "..." : "", CC_KPI_CELL_ID_MAX);
        }
        memcpy(id, p, len);
        id[len] = 0;
        CcdCell *c = ccd_cells_get(r->d->cells, id);
        if (c) {
            found[(*n_found)++] = c;
        } else {
            if (unknown->n > 1)
                ccd_sb_add(unknown, ",", 1);
            ccd_sb_jstr(unknown, id);
        }
        if (!comma)
            break;
        p = comma;
    }
    ccd_sb_add(unknown, "]", 1);
    return 0;
}

int ccd_h_batch_history(CcdReq *r)
{
    CcdCell *cells[BATCH_MAX];
    static CcdSb unknown;
    Range g;
    int n, rc;
    unknown.n = 0;
    unknown.oom = 0;
    if ((rc = parse_cells(r, cells, &n, &unknown)) || (rc = parse_range(r, HISTORY_FIELDS, &g)))
        return rc;
    uint64_t version = ccd_version_seed(r->d);
    int64_t values = 0;
    for (int i = 0; i < n; i++) {
        if (cells[i]->busy)
            return CCD_DEFER;
        version = ccd_cell_version(r->d, cells[i], version);
        values += range_values(r->d, cells[i], &g, 0);
    }
    if ((rc = over_read_limit(r, values, n)))
        return rc;
    if ((rc = ccd_reply_cached(r, version)))
        return rc;
    CcdSb *sb = ccd_reply_sb();
    ccd_sb_str(sb, "{\"cells\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            ccd_sb_add(sb, ",", 1);
        history_obj(r->d, cells[i], &g, sb);
    }
    ccd_sb_str(sb, "],\"unknown\":");
    ccd_sb_add(sb, unknown.p, unknown.n);
    ccd_sb_add(sb, "}", 1);
    if (unknown.oom)
        sb->oom = 1;
    return ccd_sb_reply(r, sb);
}

int ccd_h_batch_forecast(CcdReq *r)
{
    const CcHparams *hp = &r->d->model->hp;
    CcdCell *cells[BATCH_MAX];
    static CcdSb unknown, pending;
    double level;
    long long horizon = hp->horizon;
    uint64_t mask;
    int n, rc;
    unknown.n = pending.n = 0;
    unknown.oom = pending.oom = 0;
    if ((rc = parse_cells(r, cells, &n, &unknown)))
        return rc;
    if ((rc = ccd_query_int(r, "horizon", &horizon)) == -2)
        return ccd_problem(r, 400, "bad-parameter", "horizon must be an integer");
    if (horizon < 1 || horizon > hp->horizon)
        return ccd_problem(r, 422, "bad-parameter", "horizon must be in [1, %d], got %lld",
                           hp->horizon, horizon);
    if ((rc = ccd_query_level(r, &level)) || (rc = ccd_query_kpis(r, &mask)))
        return rc;
    uint64_t version = ccd_version_seed(r->d);
    for (int i = 0; i < n; i++)
        version = ccd_cell_version(r->d, cells[i], version);
    if ((rc = ccd_reply_cached(r, version)))
        return rc;
    evbuffer_add(r->out, "{\"cells\":[", 10);
    ccd_sb_add(&pending, "[", 1);
    int shown = 0;
    for (int i = 0; i < n; i++) {
        rc = ccd_forecast_into(r, cells[i], horizon, level, mask, shown ? "," : "", r->out);
        if (rc < 0)
            return ccd_problem(r, 500, "internal", "out of memory");
        if (rc == 1) { /* no forecast yet: named in "pending" */
            if (pending.n > 1)
                ccd_sb_add(&pending, ",", 1);
            ccd_sb_jstr(&pending, cells[i]->id);
            continue;
        }
        shown++;
    }
    ccd_sb_add(&pending, "]", 1);
    if (unknown.oom || pending.oom)
        return ccd_problem(r, 500, "internal", "out of memory");
    evbuffer_add(r->out, "],\"unknown\":", 12);
    evbuffer_add(r->out, unknown.p, unknown.n);
    evbuffer_add(r->out, ",\"pending\":", 11);
    evbuffer_add(r->out, pending.p, pending.n);
    evbuffer_add(r->out, "}\n", 2);
    return ccd_text(r, 200, "application/json");
}
