/* anomaly_eval.c — offline alerting evaluation on data with injected anomalies (see
 * anomaly_eval.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anomaly_eval.h"
#include "cc_data.h"

/* "dir/X_test.csv" → "dir/X.csv"; "dir/test_X.csv" → "dir/train_X.csv"; else NULL. */
static char *guess_history(const char *path)
{
    size_t n = strlen(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *out = malloc(n + 8);
    if (!out)
        return NULL;
    if (n > 9 && !strcmp(path + n - 9, "_test.csv")) {
        memcpy(out, path, n - 9);
        strcpy(out + n - 9, ".csv");
    } else if (!strncmp(base, "test_", 5)) {
        size_t d = (size_t)(base - path);
        memcpy(out, path, d);
        sprintf(out + d, "train_%s", base + 5);
    } else {
        free(out);
        return NULL;
    }
    if (access(out, R_OK)) {
        free(out);
        return NULL;
    }
    return out;
}

static void cell_free(CctAeCell *c)
{
    free(c->ser.x);
    free(c->ser.mask);
    free(c->fm);
    free(c->fs);
    free(c->fsc);
    free(c->bm);
    free(c->bs);
    free(c->row);
    free(c->ser.lab);
}

void cct_ae_cells_free(CctAeCells *cells)
{
    for (int i = 0; i < cells->n; i++)
        cell_free(&cells->c[i]);
    free(cells->c);
    *cells = (CctAeCells){0};
}

/* ------------------------------------------------------------------ loading */

static int cell_alloc(CctAeCell *c, const CcSeries *s, int F, int H)
{
    size_t n = (size_t)s->T * (size_t)F;
    c->H = H;
    c->ser.T = s->T;
    c->ser.F = F;
    c->p0 = s->p0;
    snprintf(c->id, sizeof c->id, "%s", s->cell_id);
    c->ser.x = malloc(n * sizeof *c->ser.x);
    c->ser.mask = malloc(n);
    c->fm = malloc(n * (size_t)H * sizeof *c->fm);
    c->fs = malloc(n * (size_t)H * sizeof *c->fs);
    c->fsc = malloc(n * sizeof *c->fsc);
    c->bm = malloc(n * sizeof *c->bm);
    c->bs = malloc(n * sizeof *c->bs);
    c->row = calloc((size_t)s->T, 1);
    if (!c->ser.x || !c->ser.mask || !c->fm || !c->fs || !c->fsc || !c->bm || !c->bs || !c->row)
        return -ENOMEM;
    memcpy(c->ser.x, s->x, n * sizeof *c->ser.x);
    memcpy(c->ser.mask, s->mask, n);
    return 0;
}

/* A new zeroed cell at the end of cells. */
static CctAeCell *cells_add(CctAeCells *cells)
{
    if (cells->n == cells->cap) {
        int nc = cells->cap ? 2 * cells->cap : 16;
        CctAeCell *p = realloc(cells->c, (size_t)nc * sizeof *p);
        if (!p)
            return NULL;
        memset(p + cells->cap, 0, (size_t)(nc - cells->cap) * sizeof *p);
        cells->c = p;
        cells->cap = nc;
    }
    return &cells->c[cells->n++];
}

int cct_ae_load(CctAeCells *cells, const CctAeSource *src, const CcModel *m)
{
    const CcHparams *hp = &m->hp;
    char feats[CC_MAX_FEATURES * CC_FEATURE_NAME_MAX] = "";
    for (int f = 0; f < hp->n_features; f++) {
        if (f)
            strcat(feats, ",");
        strcat(feats, hp->features[f]);
    }
    CcDataSettings ds;
    if (src->csv)
        ds = *src->csv;
    else
        cc_data_default_settings(&ds);
    ds.features = feats;
    ds.step_seconds = hp->step_seconds;
    char err[512];
    CcDataset *test = NULL, *hist = NULL;
    int rc = 0, join = 0;
    const char *hpath = src->history;
    char *guessed = NULL;
    if (!hpath && !src->no_history && !(src->test_frac > 0))
        hpath = guessed = guess_history(src->data);
    if ((rc = cc_data_open_file(&test, src->data, &ds, NULL, err, sizeof err))) {
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
        goto done;
    }
    CcDataset *all = test;
    if (hpath) {
        if ((rc = cc_data_open_file(&hist, hpath, &ds, NULL, err, sizeof err)) ||
            (rc = cc_data_append(hist, test, ds.impute, &join, err, sizeof err))) {
            fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
            goto done;
        }
        all = hist;
    }
    if (hpath && all->n_series != 1) {
        fprintf(stderr,
                "cellcast anomaly-eval: %s: a history file needs a one-series (wide) file; "
                "use --test-frac for long files\n",
                src->data);
        rc = -EINVAL;
        goto done;
    }
    for (int si = 0; si < all->n_series; si++) {
        CctAeCell *c = cells_add(cells);
        if (!c) {
            rc = -ENOMEM;
            goto done;
        }
        const CcSeries *s = &all->series[si];
        if ((rc = cell_alloc(c, s, hp->n_features, hp->horizon)))
            goto done;
        if (hpath) {
            snprintf(c->id, sizeof c->id, "%s", test->series[0].cell_id);
            c->ser.test0 = join;
        } else {
            c->ser.test0 = src->test_frac > 0 ? (int)((1.0 - src->test_frac) * s->T) : 0;
        }
        fprintf(stderr, "  %s: %d rows (%d history + %d test) from %s%s%s\n", c->id, c->ser.T,
                c->ser.test0, c->ser.T - c->ser.test0, hpath ? hpath : "", hpath ? " + " : "",
                src->data);
    }
done:
    free(guessed);
    cc_data_close(&test);
    cc_data_close(&hist);
    return rc;
}

/* ------------------------------------------------------------------ expectations */

/* CC_ANOMALY_DUMP=file (analysis): appends per cell-run the header (T, F, H, first test
 * row, labels: int32), the rows (T·F float32), mask (T·F uint8), the forecasts of every
 * row (T·H·F float32 means, then sds), their scales (T·F float32) and the labels (type,
 * kpi, start, end: int32; magnitude: float64). */
static void dump_cell(const CctAeCell *c, int F)
{
    const char *path = getenv("CC_ANOMALY_DUMP");
    FILE *fp = path ? fopen(path, "ab") : NULL;
    if (!fp)
        return;
    int32_t hdr[5] = {c->ser.T, F, c->H, c->ser.test0, c->ser.n_lab};
    size_t n = (size_t)c->ser.T * F;
    fwrite(hdr, sizeof hdr, 1, fp);
    fwrite(c->ser.x, sizeof *c->ser.x, n, fp);
    fwrite(c->ser.mask, 1, n, fp);
    fwrite(c->fm, sizeof *c->fm, n * c->H, fp);
    fwrite(c->fs, sizeof *c->fs, n * c->H, fp);
    fwrite(c->fsc, sizeof *c->fsc, n, fp);
    for (int l = 0; l < c->ser.n_lab; l++) {
        int32_t v[4] = {c->ser.lab[l].type, c->ser.lab[l].kpi, c->ser.lab[l].start,
                        c->ser.lab[l].end};
        fwrite(v, sizeof v, 1, fp);
        fwrite(&c->ser.lab[l].mag, sizeof c->ser.lab[l].mag, 1, fp);
    }
    fclose(fp);
}

/* Marks c->row (CCT_AE_ROW_*) as cellcastd's ingest takes the rows (daemon/cells.c): a run
 * of rows without an observed KPI between two observed rows is imputed when at most
 * max_gap long, else skipped, and the row after it restarts the sequence; runs before the
 * first observed row or after the last are skipped (no record came to fill them);
 * max_gap < 0 keeps every row. */
static void mark_gaps(CctAeCell *c, int F, int max_gap)
{
    memset(c->row, CCT_AE_ROW_STEPPED, (size_t)c->ser.T);
    c->restarts = 0;
    if (max_gap < 0)
        return;
    for (int i = 0; i < c->ser.T;) {
        int j = i;
        while (j < c->ser.T && !memchr(c->ser.mask + (size_t)j * F, 1, (size_t)F))
            j++;
        int inside = i > 0 && j < c->ser.T;
        if (j > i && (!inside || j - i > max_gap)) {
            memset(c->row + i, CCT_AE_ROW_SKIPPED, (size_t)(j - i));
            if (inside) {
                c->row[j] = CCT_AE_ROW_RESTART;
                c->restarts++;
            }
        }
        i = j + 1;
    }
}

/* Runs the series through the engine and keeps the forecast made after every row (all
 * horizon steps), history rows included, as the daemon has them: forecasts of a sequence
 * shorter than warmup_steps are dropped, as cc_anomaly_set_forecast does; the steps of an
 * outage are held from the model as cellcastd holds them (cc_anomaly_outage_hold, judged by
 * a detector of p->alerts that sees every row, as the daemon's does). */
static int model_expectations(CcEngine *e, CctAeCell *c, int F, const CctAePrep *p)
{
    CcCell *cell = NULL;
    CcAnomaly *a = NULL;
    CcAnomalyCell *ac = NULL;
    char err[256];
    float fed[CC_MAX_FEATURES]; /* what the model was fed at the previous row */
    int rc = cc_cell_open(&cell, e);
    if (!rc && p->alerts && (rc = cc_anomaly_open(&a, p->alerts, err, sizeof err)))
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
    if (!rc && a)
        rc = cc_anomaly_cell_open(&ac, a, c->id);
    if (rc)
        goto done;
    const int H = c->H, warmup = p->warmup_steps;
    size_t n = (size_t)c->ser.T * F;
    for (size_t i = 0; i < n * H; i++)
        c->fm[i] = c->fs[i] = NAN;
    for (size_t i = 0; i < n; i++)
        c->fsc[i] = NAN;
    c->held = 0;
    mark_gaps(c, F, p->max_gap_steps);
    int stepped = 0; /* rows stepped so far */
    for (int i = 0; i < c->ser.T; i++) {
        const float *x = c->ser.x + (size_t)i * F;
        const uint8_t *mask = c->ser.mask + (size_t)i * F;
        if (c->row[i] == CCT_AE_ROW_SKIPPED)
            continue;
        int first = !stepped++ || c->row[i] == CCT_AE_ROW_RESTART; /* nothing before to hold */
        if (c->row[i] == CCT_AE_ROW_RESTART)
            cc_cell_reset(cell);
        if (ac && cc_anomaly_outage_hold(a, ac, x, mask, first ? 0 : p->outage_hold_steps))
            c->held++;
        else
            memcpy(fed, x, (size_t)F * sizeof *fed);
        CcStepInput in = {cell, c->p0 + i, fed};
        int st;
        if ((rc = cc_engine_step(e, &in, 1, &st)))
            break;
        if (st) {
            fprintf(stderr, "cellcast anomaly-eval: %s row %d: step refused (%d)\n", c->id, i, st);
            rc = st;
            break;
        }
        if (ac)
            cc_anomaly_observe(a, ac, c->p0 + i, x, mask, NULL);
        CcForecast fc;
        cc_cell_forecast(cell, &fc);
        if (!fc.valid || fc.horizon != H || (warmup > 0 && fc.step - fc.seq_start + 1 < warmup))
            continue;
        for (int f = 0; f < F; f++) {
            c->fsc[(size_t)i * F + f] = fc.sigma[f];
            for (int h = 0; h < H; h++) {
                double mean, sd;
                cc_forecast_point(&fc, f, h, &mean, &sd);
                c->fm[((size_t)i * H + h) * F + f] = (float)mean;
                c->fs[((size_t)i * H + h) * F + f] = (float)sd;
            }
        }
    }
done:
    cc_anomaly_cell_close(&ac);
    cc_anomaly_close(&a);
    cc_cell_close(&cell);
    if (!rc)
        dump_cell(c, F);
    return rc;
}

/* Rolling mean and population std of the W previous observed values of each KPI. */
static void baseline_expectations(CctAeCell *c, int F, int W)
{
    for (int f = 0; f < F; f++) {
        double s1 = 0, s2 = 0;
        int k = 0;
        for (int i = 0; i < c->ser.T; i++) {
            size_t ix = (size_t)i * F + f;
            if (k >= 2) {
                double mu = s1 / k;
                c->bm[ix] = (float)mu;
                c->bs[ix] = (float)sqrt(fmax(s2 / k - mu * mu, 0));
            } else {
                c->bm[ix] = c->bs[ix] = NAN;
            }
            if (c->ser.mask[ix]) {
                s1 += c->ser.x[ix];
                s2 += (double)c->ser.x[ix] * c->ser.x[ix];
                k++;
            }
            if (i >= W && c->ser.mask[(size_t)(i - W) * F + f]) {
                double v = c->ser.x[(size_t)(i - W) * F + f];
                s1 -= v;
                s2 -= v * v;
                k--;
            }
        }
    }
}

/* CC_DEBUG_ROWS (with --verbose): the rows around every label with both expectations. */
static void debug_rows(const CctAeCell *c, int F)
{
    for (int l = 0; l < c->ser.n_lab; l++)
        for (int i = c->ser.lab[l].start - 2; i < c->ser.lab[l].end + 2 && i < c->ser.T; i++) {
            int f = c->ser.lab[l].kpi >= 0 ? c->ser.lab[l].kpi : 0;
            size_t ix = (size_t)i * F + f;
            size_t jx = i > 0 ? ((size_t)(i - 1) * c->H) * F + f : 0;
            fprintf(stderr, "      row %d x %g model %g ± %g base %g ± %g\n", i, c->ser.x[ix],
                    i > 0 ? c->fm[jx] : NAN, i > 0 ? c->fs[jx] : NAN, c->bm[ix], c->bs[ix]);
        }
}

int cct_ae_prepare(CctAeCell *c, const CctAePrep *p, const CcModel *m, CcEngine *e, uint64_t *rng,
                   int rotation)
{
    const int F = m->hp.n_features;
    if (!p->no_inject && cct_inject(&p->inject, &c->ser, rng, rotation))
        return -1;
    if (model_expectations(e, c, F, p)) {
        fprintf(stderr, "cellcast anomaly-eval: engine failed on %s\n", c->id);
        return -1;
    }
    baseline_expectations(c, F, p->baseline_window);
    if (p->verbose && getenv("CC_DEBUG_ROWS"))
        debug_rows(c, F);
    if (p->verbose)
        for (int l = 0; l < c->ser.n_lab; l++)
            fprintf(stderr, "    label %-11s kpi %-12s rows %d-%d mag %+.2f sd\n",
                    cct_inject_type_name[c->ser.lab[l].type],
                    c->ser.lab[l].kpi >= 0 ? m->hp.features[c->ser.lab[l].kpi] : "*",
                    c->ser.lab[l].start, c->ser.lab[l].end, c->ser.lab[l].mag);
    return 0;
}

/* ------------------------------------------------------------------ detection */

typedef struct Alert {
    int64_t step;
    int kind, reason;
    int kpi; ///< top attributed KPI (-1 none)
    double z;
} Alert;

typedef struct Collect {
    Alert *a;
    int n, cap;
    char last_id[CC_ALERT_ID_MAX];
    int64_t from_step;
    int64_t longest;    ///< steps of the longest anomaly episode resolved from from_step on
    int64_t open_start; ///< onset of the anomaly episode firing at the end, NONE: none
    CctEpisodes *ep;    ///< resolved episodes checked here (NULL: not)
    int resolve_m;
} Collect;

#define NO_EPISODE INT64_MIN

static void collect(void *cookie, const CcAlertEvent *ev)
{
    Collect *c = cookie;
    if (ev->kind == CC_ALERT_ANOMALY && ev->step >= c->from_step) {
        /* episode lengths: onset to resolution (one that fires at the end counts to it) */
        if (ev->state == CC_ALERT_RESOLVED) {
            if (ev->step - ev->start_step > c->longest)
                c->longest = ev->step - ev->start_step;
            c->open_start = NO_EPISODE;
            if (c->ep)
                cct_episodes_add(c->ep, ev, c->resolve_m);
        } else {
            c->open_start = ev->start_step;
        }
    }
    if (ev->state != CC_ALERT_FIRING || ev->step < c->from_step)
        return;
    if (ev->kind == CC_ALERT_ANOMALY && !strcmp(ev->id, c->last_id))
        return; /* escalation of the same episode */
    if (ev->kind == CC_ALERT_ANOMALY)
        snprintf(c->last_id, sizeof c->last_id, "%s", ev->id);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        Alert *p = realloc(c->a, (size_t)cap * sizeof *p);
        if (!p)
            return;
        c->a = p;
        c->cap = cap;
    }
    c->a[c->n++] = (Alert){ev->step, ev->kind, ev->reason, ev->n_attr ? ev->attr[0].kpi : ev->kpi,
                           ev->n_attr ? ev->attr[0].z : NAN};
}

/* Replays one cell through a detector (the model's expectations, or the baseline's), the
 * firing transitions from step col->from_step on going to col. With `stats`, the cell's
 * scoring counts are returned there. */
static int replay(const CcAnomalySettings *s, CctAeCell *c, int F, int baseline, Collect *col,
                  CcAnomalyCellStats *stats)
{
    CcAnomaly *a = NULL;
    CcAnomalyCell *ac = NULL;
    char err[256];
    int rc = cc_anomaly_open(&a, s, err, sizeof err);
    if (rc) {
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
        return rc;
    }
    if ((rc = cc_anomaly_cell_open(&ac, a, c->id))) {
        cc_anomaly_close(&a);
        return rc;
    }
    CcAlertSink sink = {col, collect};
    double mean[CC_MAX_FEATURES], sd[CC_MAX_FEATURES];
    for (int i = 0; i < c->ser.T; i++) {
        int64_t step = c->p0 + i;
        if (c->row[i] == CCT_AE_ROW_SKIPPED) /* a step the daemon never saw */
            continue;
        if (baseline && i >= c->ser.test0) {
            /* the baseline scores the test rows only (as before) */
            int ok = 0;
            for (int f = 0; f < F; f++) {
                size_t ix = (size_t)i * F + f;
                mean[f] = c->bm[ix];
                sd[f] = c->bs[ix];
                ok |= isfinite(mean[f]) && sd[f] > 0;
            }
            if (ok)
                cc_anomaly_set_expect(a, ac, step, mean, sd, NULL);
        } else if (!baseline) {
            /* the model scores every row with a forecast, as the daemon does (history rows
             * warm up the calibration; alerts before the test rows are not counted) */
            cct_ae_set_expect(a, ac, s, c, i);
        }
        cc_anomaly_observe(a, ac, step, c->ser.x + (size_t)i * F, c->ser.mask + (size_t)i * F,
                           &sink);
    }
    if (stats)
        cc_anomaly_cell_stats(ac, stats);
    cc_anomaly_cell_close(&ac);
    cc_anomaly_close(&a);
    return 0;
}

/* The first alert of col that detects label lb (see anomaly_eval.h), -1: none. */
static int64_t first_detection(const CctAeCell *c, const Collect *col, const CctLabel *lb,
                               int window_n)
{
    int64_t s0 = c->p0 + lb->start, s1 = c->p0 + lb->end + window_n, first = -1;
    for (int k = 0; k < col->n; k++) {
        const Alert *al = &col->a[k];
        int counts =
            al->kind == CC_ALERT_ANOMALY || al->reason == CC_DQ_ALL_ZERO ||
            ((al->reason == CC_DQ_STUCK || al->reason == CC_DQ_BOUNDS) && al->kpi == lb->kpi);
        if (counts && al->step >= s0 && al->step < s1 && (first < 0 || al->step < first))
            first = al->step;
    }
    return first;
}

static void score_labels(const CctAeCell *c, const Collect *col, int window_n, CctAeScore *sc,
                         const CcHparams *verbose)
{
    for (int l = 0; l < c->ser.n_lab; l++) {
        const CctLabel *lb = &c->ser.lab[l];
        int64_t first = first_detection(c, col, lb, window_n), s0 = c->p0 + lb->start;
        sc->labels++;
        sc->by_type_n[lb->type]++;
        if (verbose && first < 0)
            fprintf(stderr, "    %s missed %-11s kpi %-12s rows %d-%d mag %+.2f sd\n", c->id,
                    cct_inject_type_name[lb->type], lb->kpi >= 0 ? verbose->features[lb->kpi] : "*",
                    lb->start, lb->end, lb->mag);
        if (first >= 0) {
            sc->detected++;
            sc->by_type_det[lb->type]++;
            sc->delay_sum += (double)(first - s0);
            sc->by_type_delay[lb->type] += (double)(first - s0);
        }
    }
}

/* Row i inside some label's [start, end + post). */
static int in_label(const CctAeCell *c, int64_t i, int post)
{
    for (int l = 0; l < c->ser.n_lab; l++)
        if (i >= c->ser.lab[l].start && i < c->ser.lab[l].end + post)
            return 1;
    return 0;
}

static void score_alerts(const CctAeCell *c, const Collect *col, int post, CctAeScore *sc,
                         const CcHparams *verbose)
{
    for (int k = 0; k < col->n; k++) {
        const Alert *al = &col->a[k];
        int inside = in_label(c, al->step - c->p0, post);
        if (al->kind == CC_ALERT_DATA_QUALITY) {
            sc->dq_alerts++;
            sc->dq_outside += !inside;
            if (verbose && !inside)
                fprintf(stderr, "    %s data-quality alert outside labels at row %lld: %s %s\n",
                        c->id, (long long)(al->step - c->p0), cc_dq_reason_name(al->reason),
                        al->kpi >= 0 ? verbose->features[al->kpi] : "");
            continue;
        }
        sc->alerts++;
        sc->true_alerts += inside;
        if (verbose && !inside)
            fprintf(stderr, "    %s false alert at row %lld: %s z %+.1f\n", c->id,
                    (long long)(al->step - c->p0), al->kpi >= 0 ? verbose->features[al->kpi] : "?",
                    al->z);
    }
    for (int i = c->ser.test0; i < c->ser.T; i++)
        sc->clean_steps += !in_label(c, i, post);
}

/* The model's expectations of row i: the forecast made after row i-1 (horizon step 0) and,
 * with lag L, the one made after row i-L (horizon step L-1). */
void cct_ae_set_expect(const CcAnomaly *a, CcAnomalyCell *ac, const CcAnomalySettings *s,
                       const CctAeCell *c, int i)
{
    const int F = c->ser.F;
    double mean[CC_MAX_FEATURES], sd[CC_MAX_FEATURES], scale[CC_MAX_FEATURES];
    for (int lag = 1; lag <= (s->lag_steps > 1 ? 2 : 1); lag++) {
        int L = lag == 1 ? 1 : s->lag_steps;
        if (i - L < 0)
            continue;
        int ok = 0;
        for (int f = 0; f < F; f++) {
            size_t ix = ((size_t)(i - L) * c->H + (L - 1)) * F + f;
            mean[f] = c->fm[ix];
            sd[f] = c->fs[ix];
            scale[f] = c->fsc[(size_t)(i - L) * F + f];
            ok |= isfinite(mean[f]) && sd[f] > 0;
        }
        if (!ok)
            continue;
        if (lag == 1)
            cc_anomaly_set_expect(a, ac, c->p0 + i, mean, sd, scale);
        if (s->lag_steps > 0 && L == s->lag_steps)
            cc_anomaly_set_expect_lagged(a, ac, c->p0 + i, mean, sd, scale);
    }
}

int cct_ae_score(const CcAnomalySettings *s, CctAeCell *c, int baseline, int post, CctAeScore *sc,
                 const CcHparams *verbose)
{
    Collect col = {0};
    col.from_step = c->p0 + c->ser.test0;
    col.open_start = NO_EPISODE;
    col.ep = &sc->episodes;
    col.resolve_m = s->resolve_m;
    CcAnomalyCellStats st;
    int rc = replay(s, c, c->ser.F, baseline, &col, &st);
    if (rc)
        return rc;
    sc->episodes.open += col.open_start != NO_EPISODE;
    if (col.open_start != NO_EPISODE && c->p0 + c->ser.T - 1 - col.open_start > col.longest)
        col.longest = c->p0 + c->ser.T - 1 - col.open_start;
    if (col.longest > sc->longest_episode)
        sc->longest_episode = col.longest;
    if (verbose)
        fprintf(stderr,
                "    %s: %llu steps scored, %llu over, %d alert transitions kept, %d restart(s) "
                "after a gap\n",
                c->id, (unsigned long long)st.scored, (unsigned long long)st.over, col.n,
                c->restarts);
    score_labels(c, &col, s->window_n, sc, verbose);
    score_alerts(c, &col, post, sc, verbose);
    sc->step_seconds = (double)s->step_seconds;
    free(col.a);
    return 0;
}

/* Cell-weeks of history rows with a one-step expectation: the rows before the test part
 * whose previous row has a forecast. */
static double history_weeks(const CctAeCell *cells, int n_cells, int F, int64_t step_seconds)
{
    double steps = 0;
    for (int ci = 0; ci < n_cells; ci++) {
        const CctAeCell *c = &cells[ci];
        for (int i = 1; i < c->ser.test0; i++)
            for (int f = 0; f < F; f++)
                if (isfinite(c->fm[((size_t)(i - 1) * c->H) * F + f])) {
                    steps++;
                    break;
                }
    }
    return steps * (double)step_seconds / 604800.0;
}

/* Anomaly alerts of the model's detector on the history rows (no injection there): every
 * one counts as false, the history being the operator's "normal". */
static int history_alerts(const CcAnomalySettings *s, CctAeCell *cells, int n_cells, int F,
                          double *alerts)
{
    *alerts = 0;
    for (int ci = 0; ci < n_cells; ci++) {
        CctAeCell *c = &cells[ci];
        Collect col = {0};
        col.from_step = c->p0;
        int rc = replay(s, c, F, 0, &col, NULL);
        if (rc)
            return rc;
        for (int k = 0; k < col.n; k++)
            *alerts += col.a[k].kind == CC_ALERT_ANOMALY && col.a[k].step < c->p0 + c->ser.test0;
        free(col.a);
    }
    return 0;
}

void cct_ae_scale_thresholds(CcAnomalySettings *t, const CcAnomalySettings *s, double k)
{
    *t = *s;
    t->warn_z = s->warn_z * k;
    t->crit_z = s->crit_z * k;
    t->bar_floor = s->bar_floor * k;
    t->cusum_k = s->cusum_k * k;
    t->profile_k = s->profile_k * k;
    /* novelty fires on the value alone, whatever its z, so raising the z thresholds left it
     * as it was; its margin is raised with them (the range a value is judged against does
     * not depend on the margin, so a step novel at factor k is novel at any smaller k) */
    t->novelty_tol = s->novelty_tol * k;
    for (int f = 0; f < CC_MAX_FEATURES; f++)
        t->kpi[f].novelty_tol = s->kpi[f].novelty_tol * k;
}

int cct_ae_calibrate(CcAnomalySettings *s, CctAeCells *all, int n_cells, double budget,
                     double *rate, double *weeks)
{
    CctAeCell *cells = all->c;
    const int F = s->n_features;
    *weeks = history_weeks(cells, n_cells, F, s->step_seconds);
    if (!(*weeks > 0))
        return -1;
    for (double z = 2.0; z <= 1000.0; z *= 1.05) {
        CcAnomalySettings t;
        cct_ae_scale_thresholds(&t, s, round(z * 100) / 100 / s->warn_z);
        double alerts;
        int rc = history_alerts(&t, cells, n_cells, F, &alerts);
        if (rc)
            return rc;
        *rate = alerts / *weeks;
        if (*rate <= budget) {
            *s = t;
            return 0;
        }
    }
    return 1;
}

/* A row's rates: recall, precision, F1, mean delay and false alerts per cell-week (NaN where
 * there is nothing to divide by). */
typedef struct Rates {
    double rec, prec, f1, delay, fa;
} Rates;

static Rates score_rates(const CctAeScore *sc)
{
    Rates r;
    r.rec = sc->labels ? (double)sc->detected / sc->labels : NAN;
    r.prec = sc->alerts ? (double)sc->true_alerts / sc->alerts : NAN;
    r.f1 = r.rec + r.prec > 0 ? 2 * r.rec * r.prec / (r.rec + r.prec) : NAN;
    r.delay = sc->detected ? sc->delay_sum / sc->detected : NAN;
    double weeks = sc->clean_steps * sc->step_seconds / 604800.0;
    r.fa = weeks > 0 ? (sc->alerts - sc->true_alerts) / weeks : NAN;
    return r;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *cct_ae_score_json(const CctAeScore *sc, const CcHparams *hp)
{
    Rates r = score_rates(sc);
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:o*}",
                     "precision", num(r.prec), "recall", num(r.rec), "f1", num(r.f1), "delay",
                     num(r.delay), "false_per_cell_week", num(r.fa), "detected", sc->detected,
                     "labels", sc->labels, "alerts", sc->alerts, "false",
                     sc->alerts - sc->true_alerts, "dq_alerts", sc->dq_alerts, "dq_outside",
                     sc->dq_outside, "longest_episode", (json_int_t)sc->longest_episode, "episodes",
                     cct_episodes_json(&sc->episodes, hp));
}

void cct_ae_print_score(const char *name, const CctAeScore *sc, int with_types, const CcHparams *hp,
                        FILE *out)
{
    Rates r = score_rates(sc);
    fprintf(out, "%-22s %6.3f %6.3f %6.3f %7.1f %8.2f %6d/%-4d %6d %5d %5d/%-4d\n", name, r.prec,
            r.rec, r.f1, r.delay, r.fa, sc->detected, sc->labels, sc->alerts,
            sc->alerts - sc->true_alerts, sc->dq_alerts, sc->dq_outside);
    if (!with_types)
        return;
    for (int t = 0; t < CCT_INJ_TYPES; t++)
        if (sc->by_type_n[t])
            fprintf(out, "    %-18s recall %5.3f (%d/%d)  mean delay %5.1f steps\n",
                    cct_inject_type_name[t], (double)sc->by_type_det[t] / sc->by_type_n[t],
                    sc->by_type_det[t], sc->by_type_n[t],
                    sc->by_type_det[t] ? sc->by_type_delay[t] / sc->by_type_det[t] : NAN);
    fprintf(out, "    %-18s %lld steps (%.1f h)\n", "longest episode",
            (long long)sc->longest_episode, (double)sc->longest_episode * sc->step_seconds / 3600);
    cct_episodes_print(&sc->episodes, hp, out);
    /* one-step spikes are their own row: the events' recall without them */
    int ns = sc->by_type_n[CCT_INJ_SPIKE], ds = sc->by_type_det[CCT_INJ_SPIKE];
    if (ns && sc->labels > ns)
        fprintf(out, "    %-18s recall %5.3f (%d/%d)\n", "events (no spikes)",
                (double)(sc->detected - ds) / (sc->labels - ns), sc->detected - ds,
                sc->labels - ns);
}
