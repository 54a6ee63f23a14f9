/*
 * cmd_anomaly.c — `cellcast anomaly-eval`: offline evaluation of the alerting of
 * lib/cc_anomaly on real held-out data with injected, labelled anomalies, next to a
 * rolling 3-sigma baseline run through the same lifecycle.
 *
 * Per data file (one cell): history (the train file) + held-out test file are loaded with
 * lib/cc_data, anomalies are injected into the test rows only, and the series is run step
 * by step through the real engine (cc_engine_step, one step per row, as the daemon does).
 * The forecast made at row i-1 for row i (horizon step 0) is the expectation of row i.
 * Both detectors then replay the whole series through cc_anomaly_observe (DQ state warms
 * up on the history; expectations are set for test rows only).
 *
 * Injections (one per slot of --spacing test steps, start drawn in the slot's first
 * quarter, type rotating spike → level shift → outage → drift, one random KPI of
 * --inject-kpis unless outage; σ = the KPI's std over the history rows):
 *   spike        1–3 steps,   x += ±U(3,6)·σ   (up with p = 0.7)
 *   level shift  20–60 steps, x += ±U(1.5,3)·σ
 *   outage       10–40 steps, every KPI = 0
 *   drift        30–60 steps, x += ±U(2,4)·σ·(j+1)/len (linear ramp)
 * Values are clamped at 0 for KPIs whose history has no negative value. All draws come
 * from --seed (splitmix64), so a run is reproducible.
 *
 * Scoring rules:
 *   - a label is detected when an alert of the cell fires in [start, end + window_n):
 *     an anomaly alert, or a DQ alert that points at the injection (all_zero for any
 *     label: an outage, or a drop clamped at 0 on a one-KPI series; stuck or bounds on
 *     the label's KPI: a drop held at 0, or a value pushed out of its bounds). Such a DQ
 *     alert holds the KPI's anomaly scoring (by design, section 4 of docs/operations.md),
 *     so it is the alert the operator gets. Delay = firing step - start. DQ alerts outside
 *     every label's window are reported (dq/outside);
 *   - an anomaly alert (a firing transition with a new id; escalations are not counted)
 *     is a true alert when it fires in [start, end + post) of some label, else false;
 *   - precision = true alerts / anomaly alerts, recall = detected / labels, F1;
 *   - false alerts per cell-week = false alerts / (test steps outside the labels'
 *     [start, end + post) windows · S / 604800), summed over cells.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc_anomaly.h"
#include "cc_data.h"
#include "cc_engine.h"
#include "cli.h"

enum { INJ_SPIKE = 0, INJ_SHIFT = 1, INJ_OUTAGE = 2, INJ_DRIFT = 3, N_INJ = 4 };
static const char *inj_name[N_INJ] = {"spike", "level_shift", "outage", "drift"};

#define MAX_FILES 32
#define MAX_SWEEP 16

typedef struct Label {
    int type, kpi;
    int start, end;        ///< rows [start, end) of the series
    double mag;            ///< in σ of the KPI (0 for outages)
} Label;

typedef struct Cell {
    char id[CC_CELL_ID_MAX];
    int T, test0;          ///< rows; first test row
    int64_t p0;            ///< absolute step of row 0
    float *x;              // (T, F) values with injections
    uint8_t *mask;         // (T, F)
    int H;                 ///< the model's horizon
    float *fm, *fs;        // (T, H, F) forecast made after row i for rows i+1..i+H (NaN: none)
    float *fsc;            // (T, F) its normalisation scale
    float *bm, *bs;        // (T, F) baseline expectation
    Label *lab;
    int n_lab, cap_lab;
} Cell;

typedef struct Opts {
    const char *model;
    const char *data[MAX_FILES];
    const char *history[MAX_FILES];
    int n_data;
    int no_history;
    const char *inject_kpis;
    const char *alert_kpis;
    double mag_scale;
    double test_frac;
    uint64_t seed;
    int trials;
    int spacing, margin, post;
    int baseline_window;   ///< steps; 0 = one day
    double baseline_z;
    int no_inject;
    double sweep[MAX_SWEEP];
    int n_sweep;
    double budget; ///< false alerts per cell-week on the history; < 0 = no calibration
    int verbose;
    CcAnomalySettings as;
} Opts;

/* ------------------------------------------------------------------ helpers */

static uint64_t sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unif(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * (double)(sm64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static int irange(uint64_t *s, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(sm64(s) % (uint64_t)(hi - lo + 1));
}

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

static void cell_free(Cell *c)
{
    free(c->x);
    free(c->mask);
    free(c->fm);
    free(c->fs);
    free(c->fsc);
    free(c->bm);
    free(c->bs);
    free(c->lab);
}

static int add_label(Cell *c, Label l)
{
    if (c->n_lab == c->cap_lab) {
        int cap = c->cap_lab ? 2 * c->cap_lab : 16;
        Label *p = realloc(c->lab, (size_t)cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        c->lab = p;
        c->cap_lab = cap;
    }
    c->lab[c->n_lab++] = l;
    return 0;
}

/* ------------------------------------------------------------------ loading */

static int cell_alloc(Cell *c, const CcSeries *s, int F, int H)
{
    size_t n = (size_t)s->T * (size_t)F;
    c->H = H;
    c->T = s->T;
    c->p0 = s->p0;
    snprintf(c->id, sizeof c->id, "%s", s->cell_id);
    c->x = malloc(n * sizeof *c->x);
    c->mask = malloc(n);
    c->fm = malloc(n * (size_t)H * sizeof *c->fm);
    c->fs = malloc(n * (size_t)H * sizeof *c->fs);
    c->fsc = malloc(n * sizeof *c->fsc);
    c->bm = malloc(n * sizeof *c->bm);
    c->bs = malloc(n * sizeof *c->bs);
    if (!c->x || !c->mask || !c->fm || !c->fs || !c->fsc || !c->bm || !c->bs)
        return -ENOMEM;
    memcpy(c->x, s->x, n * sizeof *c->x);
    memcpy(c->mask, s->mask, n);
    return 0;
}

/* Loads --data i into cells (one per series), growing the array. */
static int load_file(const Opts *o, int i, const CcModel *m, Cell **cells, int *n_cells,
                     int *cap)
{
    const CcHparams *hp = &m->hp;
    char feats[CC_MAX_FEATURES * CC_FEATURE_NAME_MAX] = "";
    for (int f = 0; f < hp->n_features; f++) {
        if (f)
            strcat(feats, ",");
        strcat(feats, hp->features[f]);
    }
    CcDataSettings ds;
    cc_data_default_settings(&ds);
    ds.features = feats;
    ds.step_seconds = hp->step_seconds;
    char err[512];
    CcDataset *test = NULL, *hist = NULL;
    int rc = 0, join = 0;
    const char *hpath = o->history[i];
    char *guessed = NULL;
    if (!hpath && !o->no_history && !(o->test_frac > 0))
        hpath = guessed = guess_history(o->data[i]);
    if ((rc = cc_data_open_file(&test, o->data[i], &ds, NULL, err, sizeof err))) {
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
        fprintf(stderr, "cellcast anomaly-eval: %s: a history file needs a one-series (wide) file; "
                        "use --test-frac for long files\n", o->data[i]);
        rc = -EINVAL;
        goto done;
    }
    for (int si = 0; si < all->n_series; si++) {
        if (*n_cells == *cap) {
            int nc = *cap ? 2 * *cap : 16;
            Cell *p = realloc(*cells, (size_t)nc * sizeof *p);
            if (!p) {
                rc = -ENOMEM;
                goto done;
            }
            memset(p + *cap, 0, (size_t)(nc - *cap) * sizeof *p);
            *cells = p;
            *cap = nc;
        }
        Cell *c = &(*cells)[(*n_cells)++];
        const CcSeries *s = &all->series[si];
        if ((rc = cell_alloc(c, s, hp->n_features, hp->horizon)))
            goto done;
        if (hpath) {
            snprintf(c->id, sizeof c->id, "%s", test->series[0].cell_id);
            c->test0 = join;
        } else {
            c->test0 = o->test_frac > 0 ? (int)((1.0 - o->test_frac) * s->T) : 0;
        }
        fprintf(stderr, "  %s: %d rows (%d history + %d test) from %s%s%s\n", c->id, c->T,
                c->test0, c->T - c->test0, hpath ? hpath : "", hpath ? " + " : "", o->data[i]);
    }
done:
    free(guessed);
    cc_data_close(&test);
    cc_data_close(&hist);
    return rc;
}

/* ------------------------------------------------------------------ injection */

static void inject(const Opts *o, Cell *c, int F, const int *kpis, int n_kpis, uint64_t *rng,
                   int trial, int cell_index)
{
    double sd[CC_MAX_FEATURES], lo[CC_MAX_FEATURES];
    int h0 = c->test0 > 0 ? 0 : 0, h1 = c->test0 > 0 ? c->test0 : c->T;
    for (int f = 0; f < F; f++) {
        double s1 = 0, s2 = 0, mn = INFINITY;
        int k = 0;
        for (int i = h0; i < h1; i++)
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
    int slot = 0;
    for (int a = c->test0 + o->margin; a + o->spacing <= c->T; a += o->spacing, slot++) {
        int type = (slot + cell_index + trial) % N_INJ;
        Label l = {type, -1, 0, 0, 0};
        int len;
        switch (type) {
        case INJ_SPIKE: len = irange(rng, 1, 3); break;
        case INJ_SHIFT: len = irange(rng, 20, 60); break;
        case INJ_OUTAGE: len = irange(rng, 10, 40); break;
        default: len = irange(rng, 30, 60); break;
        }
        if (len > o->spacing / 2)
            len = o->spacing / 2 > 0 ? o->spacing / 2 : 1;
        l.start = a + irange(rng, 0, o->spacing / 4);
        l.end = l.start + len;
        if (type != INJ_OUTAGE)
            l.kpi = kpis[irange(rng, 0, n_kpis - 1)];
        double sign = unif(rng, 0, 1) < (type == INJ_SPIKE ? 0.7 : 0.5) ? 1 : -1;
        switch (type) {
        case INJ_SPIKE: l.mag = sign * unif(rng, 3, 6); break;
        case INJ_SHIFT: l.mag = sign * unif(rng, 1.5, 3); break;
        case INJ_DRIFT: l.mag = sign * unif(rng, 2, 4); break;
        default: l.mag = 0;
        }
        l.mag *= o->mag_scale;
        for (int i = l.start; i < l.end; i++) {
            if (type == INJ_OUTAGE) {
                for (int f = 0; f < F; f++) {
                    c->x[(size_t)i * F + f] = 0;
                    c->mask[(size_t)i * F + f] = 1;
                }
                continue;
            }
            size_t ix = (size_t)i * F + l.kpi;
            double d = l.mag * sd[l.kpi];
            if (type == INJ_DRIFT)
                d *= (double)(i - l.start + 1) / len;
            double v = c->x[ix] + d;
            c->x[ix] = (float)(v < lo[l.kpi] ? lo[l.kpi] : v);
            c->mask[ix] = 1;
        }
        add_label(c, l);
    }
}

/* ------------------------------------------------------------------ expectations */

/* CC_ANOMALY_DUMP=file (analysis): appends per cell-run the header (T, F, H, first test
 * row, labels: int32), the rows (T·F float32), mask (T·F uint8), the forecasts of every
 * row (T·H·F float32 means, then sds), their scales (T·F float32) and the labels (type,
 * kpi, start, end: int32; magnitude: float64). */
static void dump_cell(const Cell *c, int F)
{
    const char *path = getenv("CC_ANOMALY_DUMP");
    FILE *fp = path ? fopen(path, "ab") : NULL;
    if (!fp)
        return;
    int32_t hdr[5] = {c->T, F, c->H, c->test0, c->n_lab};
    size_t n = (size_t)c->T * F;
    fwrite(hdr, sizeof hdr, 1, fp);
    fwrite(c->x, sizeof *c->x, n, fp);
    fwrite(c->mask, 1, n, fp);
    fwrite(c->fm, sizeof *c->fm, n * c->H, fp);
    fwrite(c->fs, sizeof *c->fs, n * c->H, fp);
    fwrite(c->fsc, sizeof *c->fsc, n, fp);
    for (int l = 0; l < c->n_lab; l++) {
        int32_t v[4] = {c->lab[l].type, c->lab[l].kpi, c->lab[l].start, c->lab[l].end};
        fwrite(v, sizeof v, 1, fp);
        fwrite(&c->lab[l].mag, sizeof c->lab[l].mag, 1, fp);
    }
    fclose(fp);
}

/* Runs the series through the engine and keeps the forecast made after every row (all
 * horizon steps), history rows included, as the daemon has them: forecasts of a sequence
 * shorter than warmup_steps are dropped, as cc_anomaly_set_forecast does. */
static int model_expectations(CcEngine *e, Cell *c, int F, int warmup)
{
    CcCell *cell = NULL;
    int rc = cc_cell_open(&cell, e);
    if (rc)
        return rc;
    const int H = c->H;
    size_t n = (size_t)c->T * F;
    for (size_t i = 0; i < n * H; i++)
        c->fm[i] = c->fs[i] = NAN;
    for (size_t i = 0; i < n; i++)
        c->fsc[i] = NAN;
    for (int i = 0; i < c->T; i++) {
        CcStepInput in = {cell, c->p0 + i, c->x + (size_t)i * F};
        int st;
        if ((rc = cc_engine_step(e, &in, 1, &st)))
            break;
        if (st) {
            fprintf(stderr, "cellcast anomaly-eval: %s row %d: step refused (%d)\n", c->id, i, st);
            rc = st;
            break;
        }
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
    cc_cell_close(&cell);
    if (!rc)
        dump_cell(c, F);
    return rc;
}

/* Rolling mean and population std of the W previous observed values of each KPI. */
static void baseline_expectations(Cell *c, int F, int W)
{
    for (int f = 0; f < F; f++) {
        double s1 = 0, s2 = 0;
        int k = 0;
        for (int i = 0; i < c->T; i++) {
            size_t ix = (size_t)i * F + f;
            if (k >= 2) {
                double mu = s1 / k;
                c->bm[ix] = (float)mu;
                c->bs[ix] = (float)sqrt(fmax(s2 / k - mu * mu, 0));
            } else {
                c->bm[ix] = c->bs[ix] = NAN;
            }
            if (c->mask[ix]) {
                s1 += c->x[ix];
                s2 += (double)c->x[ix] * c->x[ix];
                k++;
            }
            if (i >= W && c->mask[(size_t)(i - W) * F + f]) {
                double v = c->x[(size_t)(i - W) * F + f];
                s1 -= v;
                s2 -= v * v;
                k--;
            }
        }
    }
}

/* Injects anomalies into one loaded cell and computes its model and baseline expectations. */
static int prepare_cell(const Opts *o, Cell *c, const CcModel *m, CcEngine *e, const int *kpis,
                        int n_kpis, uint64_t *rng, int trial, int index, int W)
{
    const int F = m->hp.n_features;
    if (!o->no_inject)
        inject(o, c, F, kpis, n_kpis, rng, trial, index);
    if (model_expectations(e, c, F, o->as.warmup_steps)) {
        fprintf(stderr, "cellcast anomaly-eval: engine failed on %s\n", c->id);
        return -1;
    }
    baseline_expectations(c, F, W);
    if (o->verbose && getenv("CC_DEBUG_ROWS"))
        for (int l = 0; l < c->n_lab; l++)
            for (int i = c->lab[l].start - 2; i < c->lab[l].end + 2 && i < c->T; i++) {
                int f = c->lab[l].kpi >= 0 ? c->lab[l].kpi : 0;
                size_t ix = (size_t)i * F + f;
                size_t jx = i > 0 ? ((size_t)(i - 1) * c->H) * F + f : 0;
                fprintf(stderr, "      row %d x %g model %g ± %g base %g ± %g\n", i, c->x[ix],
                        i > 0 ? c->fm[jx] : NAN, i > 0 ? c->fs[jx] : NAN, c->bm[ix], c->bs[ix]);
            }
    if (o->verbose)
        for (int l = 0; l < c->n_lab; l++)
            fprintf(stderr, "    label %-11s kpi %-12s rows %d-%d mag %+.2f sd\n",
                    inj_name[c->lab[l].type],
                    c->lab[l].kpi >= 0 ? m->hp.features[c->lab[l].kpi] : "*", c->lab[l].start,
                    c->lab[l].end, c->lab[l].mag);
    return 0;
}

/* ------------------------------------------------------------------ detection */

typedef struct Alert {
    int64_t step;
    int kind, reason;
    int kpi;          ///< top attributed KPI (-1 none)
    double z;
} Alert;

typedef struct Collect {
    Alert *a;
    int n, cap;
    char last_id[CC_ALERT_ID_MAX];
    int64_t from_step;
} Collect;

static void collect(void *cookie, const CcAlertEvent *ev)
{
    Collect *c = cookie;
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

typedef struct Score {
    int labels, detected, alerts, true_alerts, dq_alerts, dq_outside;
    double clean_steps, step_seconds;
    int by_type_n[N_INJ], by_type_det[N_INJ];
    double by_type_delay[N_INJ];
    double delay_sum;
} Score;

/* Replays one cell through a detector (the model's expectations, or the baseline's), the
 * firing transitions from step col->from_step on going to col. With `stats`, the cell's
 * scoring counts are returned there. */
static int replay(const CcAnomalySettings *s, Cell *c, int F, int baseline, Collect *col,
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
    double mean[CC_MAX_FEATURES], sd[CC_MAX_FEATURES], scale[CC_MAX_FEATURES];
    for (int i = 0; i < c->T; i++) {
        int64_t step = c->p0 + i;
        if (baseline && i >= c->test0) {
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
             * warm up the calibration; alerts before the test rows are not counted): the
             * forecast made after row i-1 (horizon step 0) and, with lag L, the one made
             * after row i-L (horizon step L-1) */
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
                    cc_anomaly_set_expect(a, ac, step, mean, sd, scale);
                if (s->lag_steps > 0 && L == s->lag_steps)
                    cc_anomaly_set_expect_lagged(a, ac, step, mean, sd, scale);
            }
        }
        cc_anomaly_observe(a, ac, step, c->x + (size_t)i * F, c->mask + (size_t)i * F, &sink);
    }
    if (stats)
        cc_anomaly_cell_stats(ac, stats);
    cc_anomaly_cell_close(&ac);
    cc_anomaly_close(&a);
    return 0;
}

static int run_detector(const CcAnomalySettings *s, Cell *c, int F, int baseline, int post,
                        Score *sc, const CcHparams *verbose)
{
    Collect col = {0};
    col.from_step = c->p0 + c->test0;
    CcAnomalyCellStats st;
    int rc = replay(s, c, F, baseline, &col, &st);
    if (rc)
        return rc;
    if (verbose)
        fprintf(stderr, "    %s: %llu steps scored, %llu over, %d alert transitions kept\n", c->id,
                (unsigned long long)st.scored, (unsigned long long)st.over, col.n);
    /* labels */
    for (int l = 0; l < c->n_lab; l++) {
        const Label *lb = &c->lab[l];
        int64_t s0 = c->p0 + lb->start, s1 = c->p0 + lb->end + s->window_n;
        int64_t first = -1;
        for (int k = 0; k < col.n; k++) {
            const Alert *al = &col.a[k];
            int counts = al->kind == CC_ALERT_ANOMALY || al->reason == CC_DQ_ALL_ZERO ||
                         ((al->reason == CC_DQ_STUCK || al->reason == CC_DQ_BOUNDS) &&
                          al->kpi == lb->kpi);
            if (counts && al->step >= s0 && al->step < s1 && (first < 0 || al->step < first))
                first = al->step;
        }
        sc->labels++;
        sc->by_type_n[lb->type]++;
        if (verbose && first < 0)
            fprintf(stderr, "    %s missed %-11s kpi %-12s rows %d-%d mag %+.2f sd\n", c->id,
                    inj_name[lb->type], lb->kpi >= 0 ? verbose->features[lb->kpi] : "*",
                    lb->start, lb->end, lb->mag);
        if (first >= 0) {
            sc->detected++;
            sc->by_type_det[lb->type]++;
            sc->delay_sum += (double)(first - s0);
            sc->by_type_delay[lb->type] += (double)(first - s0);
        }
    }
    /* alerts */
    for (int k = 0; k < col.n; k++) {
        const Alert *al = &col.a[k];
        int inside = 0;
        for (int l = 0; l < c->n_lab && !inside; l++)
            inside = al->step >= c->p0 + c->lab[l].start && al->step < c->p0 + c->lab[l].end + post;
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
                    (long long)(al->step - c->p0),
                    al->kpi >= 0 ? verbose->features[al->kpi] : "?", al->z);
    }
    for (int i = c->test0; i < c->T; i++) {
        int inside = 0;
        for (int l = 0; l < c->n_lab && !inside; l++)
            inside = i >= c->lab[l].start && i < c->lab[l].end + post;
        sc->clean_steps += !inside;
    }
    sc->step_seconds = (double)s->step_seconds;
    free(col.a);
    return 0;
}

/* Cell-weeks of history rows with a one-step expectation: the rows before the test part
 * whose previous row has a forecast. */
static double history_weeks(const Cell *cells, int n_cells, int F, int64_t step_seconds)
{
    double steps = 0;
    for (int ci = 0; ci < n_cells; ci++) {
        const Cell *c = &cells[ci];
        for (int i = 1; i < c->test0; i++)
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
static int history_alerts(const CcAnomalySettings *s, Cell *cells, int n_cells, int F,
                          double *alerts)
{
    *alerts = 0;
    for (int ci = 0; ci < n_cells; ci++) {
        Cell *c = &cells[ci];
        Collect col = {0};
        col.from_step = c->p0;
        int rc = replay(s, c, F, 0, &col, NULL);
        if (rc)
            return rc;
        for (int k = 0; k < col.n; k++)
            *alerts += col.a[k].kind == CC_ALERT_ANOMALY && col.a[k].step < c->p0 + c->test0;
        free(col.a);
    }
    return 0;
}

/* The deployment's thresholds (warn_z, crit_z, cusum_k, profile_k) scaled by one factor, the lowest
 * on a 5 % geometric grid of warn_z from 2 to 1000 whose false alerts per cell-week on the
 * history rows are ≤ budget; *s gets them. -1 when there is no history, 1 when even
 * warn_z 1000 is over the budget. */
static int calibrate_budget(CcAnomalySettings *s, Cell *cells, int n_cells, int F,
                            double budget, double *rate, double *weeks)
{
    *weeks = history_weeks(cells, n_cells, F, s->step_seconds);
    if (!(*weeks > 0))
        return -1;
    for (double z = 2.0; z <= 1000.0; z *= 1.05) {
        CcAnomalySettings t = *s;
        double k = round(z * 100) / 100 / s->warn_z;
        t.warn_z = s->warn_z * k;
        t.crit_z = s->crit_z * k;
        t.cusum_k = s->cusum_k * k;
        t.profile_k = s->profile_k * k;
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

static void print_score(const char *name, const Score *sc, int with_types)
{
    double rec = sc->labels ? (double)sc->detected / sc->labels : NAN;
    double prec = sc->alerts ? (double)sc->true_alerts / sc->alerts : NAN;
    double f1 = rec + prec > 0 ? 2 * rec * prec / (rec + prec) : NAN;
    double weeks = sc->clean_steps * sc->step_seconds / 604800.0;
    double fa = weeks > 0 ? (sc->alerts - sc->true_alerts) / weeks : NAN;
    printf("%-22s %6.3f %6.3f %6.3f %7.1f %8.2f %6d/%-4d %6d %5d %5d/%-4d\n", name, prec, rec, f1,
           sc->detected ? sc->delay_sum / sc->detected : NAN, fa, sc->detected, sc->labels,
           sc->alerts, sc->alerts - sc->true_alerts, sc->dq_alerts, sc->dq_outside);
    if (!with_types)
        return;
    for (int t = 0; t < N_INJ; t++)
        if (sc->by_type_n[t])
            printf("    %-18s recall %5.3f (%d/%d)  mean delay %5.1f steps\n", inj_name[t],
                   (double)sc->by_type_det[t] / sc->by_type_n[t], sc->by_type_det[t],
                   sc->by_type_n[t],
                   sc->by_type_det[t] ? sc->by_type_delay[t] / sc->by_type_det[t] : NAN);
}

/* ------------------------------------------------------------------ CLI */

static void usage(FILE *out)
{
    CcAnomalySettings s;
    cc_anomaly_default_settings(&s);
    fprintf(out,
        "usage: cellcast anomaly-eval --model M.safetensors --data TEST.csv [--data ...] [options]\n"
        "Injects labelled anomalies (spikes, level shifts, outages, drifts) into held-out data,\n"
        "runs the daemon's scoring and alert lifecycle offline through the engine, and reports\n"
        "precision, recall, F1, detection delay and false alerts per cell-week, next to a\n"
        "rolling 3-sigma baseline. See docs/operations.md (Alerts).\n\n"
        "Data:\n"
        "  --data FILE           held-out CSV of one cell (repeatable); its history (train file)\n"
        "                        is found as X_test.csv → X.csv, test_X.csv → train_X.csv\n"
        "  --history FILE        history of the preceding --data (overrides the guess)\n"
        "  --no-history          score from the first row\n"
        "  --test-frac X         no history file: the last X of every series is the test part\n"
        "                        (long files `ts,cell_id,<kpis>` give one cell per series)\n"
        "Injection:\n"
        "  --seed N              (default 1)     --trials N   runs with new draws (default 1)\n"
        "  --spacing N           test steps per injected anomaly (default 120)\n"
        "  --margin N            clean test steps before the first (default 20)\n"
        "  --post N              steps after an anomaly whose alerts are attributed to it\n"
        "                        (default 10)\n"
        "  --inject-kpis a,b     KPIs that get spikes/shifts/drifts (default: all)\n"
        "  --no-inject           no injections: false alerts of the clean data only\n"
        "  --mag-scale X         multiply every injected magnitude by X (default 1)\n"
        "Alerting (the daemon's alerts.* settings):\n"
        "  --warn-z X (default %g)  --crit-z X (default %g)  --min-kpis N (default %d)\n"
        "  --window-n N (default %d)  --warn-k N (default %d)  --crit-k N (default %d)\n"
        "  --resolve-m N (default %d)  --cooldown N (default %d)\n"
        "  --sd-floor-rel X (default %g)  --sd-floor-scale X (default %g)\n"
        "  --alert-kpis a,b      KPIs scored for anomalies (alerts.kpis.<name>.enabled;\n"
        "                        default: all)\n"
        "  --lag L               also score against the forecast made L steps earlier\n"
        "                        (L ≤ the model's horizon; -1 = the horizon; 0 = off;\n"
        "                        default %d)\n"
        "  --set k=v,k=v         any alerts.* settings (repeatable), e.g. --set window_n=5\n"
        "  --variant k=v,k=v     evaluate one more detector: the settings above with these\n"
        "                        changed (repeatable; the engine runs once for all)\n"
        "  --sweep z1,z2,...     evaluate several --warn-z (crit-z = max(crit-z, 1.5·warn-z))\n"
        "  --budget B            also evaluate thresholds calibrated on the history: warn-z,\n"
        "                        crit-z, cusum_k and profile_k scaled by the lowest factor whose\n"
        "                        false alerts per cell-week on the history rows are ≤ B\n"
        "                        (needs history)\n"
        "Baseline:\n"
        "  --baseline-window N   rolling window in steps (default: one day)\n"
        "  --baseline-z X        its warn threshold (default 3)\n",
        s.warn_z, s.crit_z, s.min_kpis, s.window_n, s.warn_k, s.crit_k, s.resolve_m,
        s.cooldown_steps, s.sd_floor_rel, s.sd_floor_scale, s.lag_steps);
}

/* "k=v,k=v": alerts.* settings by name (cc_anomaly_settings_set). 0 or -1 (reported). */
static int apply_sets(CcAnomalySettings *s, const CcHparams *hp, const char *spec)
{
    char *dup = strdup(spec), *save = NULL, err[256];
    int rc = dup ? 0 : -1;
    for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && !rc;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            fprintf(stderr, "cellcast anomaly-eval: '%s' is not key=value\n", t);
            rc = -1;
            break;
        }
        *eq = 0;
        if (cc_anomaly_settings_set(s, hp, t, eq + 1, err, sizeof err)) {
            fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
            rc = -1;
        }
    }
    free(dup);
    return rc;
}

static int num(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *e;
    errno = 0;
    *out = strtod(v, &e);
    if (e == v || *e || errno || !(*out >= lo && *out <= hi)) {
        fprintf(stderr, "cellcast anomaly-eval: --%s: '%s' is not a number in [%g, %g]\n", opt, v,
                lo, hi);
        return -1;
    }
    return 0;
}

int cmd_anomaly(int argc, char **argv)
{
    Opts o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    o.trials = 1;
    o.spacing = 120;
    o.margin = 20;
    o.post = 10;
    o.baseline_z = 3;
    o.mag_scale = 1;
    o.budget = -1;
    cc_anomaly_default_settings(&o.as);
    enum {
        O_MODEL = 1, O_DATA, O_HIST, O_NOHIST, O_SEED, O_TRIALS, O_SPACING, O_MARGIN, O_POST,
        O_IKPIS, O_NOINJ, O_WZ, O_CZ, O_MINK, O_WN, O_WK, O_CK, O_RM, O_CD, O_FREL, O_FSC,
        O_SWEEP, O_BW, O_BZ, O_VERB, O_LAG, O_AKPIS, O_MAG, O_TFRAC, O_SET,
        O_VARIANT, O_BUDGET, O_HELP
    };
    static const struct option lo[] = {
        {"model", 1, 0, O_MODEL}, {"data", 1, 0, O_DATA}, {"history", 1, 0, O_HIST},
        {"no-history", 0, 0, O_NOHIST}, {"seed", 1, 0, O_SEED}, {"trials", 1, 0, O_TRIALS},
        {"spacing", 1, 0, O_SPACING}, {"margin", 1, 0, O_MARGIN}, {"post", 1, 0, O_POST},
        {"inject-kpis", 1, 0, O_IKPIS}, {"no-inject", 0, 0, O_NOINJ}, {"warn-z", 1, 0, O_WZ},
        {"crit-z", 1, 0, O_CZ}, {"min-kpis", 1, 0, O_MINK}, {"window-n", 1, 0, O_WN},
        {"warn-k", 1, 0, O_WK}, {"crit-k", 1, 0, O_CK}, {"resolve-m", 1, 0, O_RM},
        {"cooldown", 1, 0, O_CD}, {"sd-floor-rel", 1, 0, O_FREL},
        {"sd-floor-scale", 1, 0, O_FSC}, {"sweep", 1, 0, O_SWEEP},
        {"baseline-window", 1, 0, O_BW}, {"baseline-z", 1, 0, O_BZ}, {"verbose", 0, 0, O_VERB},
        {"lag", 1, 0, O_LAG}, {"alert-kpis", 1, 0, O_AKPIS},
        {"mag-scale", 1, 0, O_MAG}, {"test-frac", 1, 0, O_TFRAC},
        {"set", 1, 0, O_SET},
        {"variant", 1, 0, O_VARIANT}, {"budget", 1, 0, O_BUDGET},
        {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};
    const char *sets[MAX_SWEEP], *variants[MAX_SWEEP];
    int n_sets = 0, n_variants = 0;
    int ch;
    double v;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        const char *name = ch > 0 && ch <= O_HELP ? lo[ch - 1].name : "?";
        switch (ch) {
        case O_MODEL: o.model = optarg; break;
        case O_DATA:
            if (o.n_data == MAX_FILES) {
                fprintf(stderr, "cellcast anomaly-eval: at most %d --data\n", MAX_FILES);
                return 2;
            }
            o.data[o.n_data++] = optarg;
            break;
        case O_HIST:
            if (!o.n_data) {
                fprintf(stderr, "cellcast anomaly-eval: --history follows its --data\n");
                return 2;
            }
            o.history[o.n_data - 1] = optarg;
            break;
        case O_NOHIST: o.no_history = 1; break;
        case O_IKPIS: o.inject_kpis = optarg; break;
        case O_AKPIS: o.alert_kpis = optarg; break;
        case O_NOINJ: o.no_inject = 1; break;
        case O_VERB: o.verbose = 1; break;
        case O_SWEEP: {
            char *dup = strdup(optarg), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t && o.n_sweep < MAX_SWEEP;
                 t = strtok_r(NULL, ",", &save)) {
                if (num(name, t, 0.5, 100, &v)) {
                    free(dup);
                    return 2;
                }
                o.sweep[o.n_sweep++] = v;
            }
            free(dup);
            break;
        }
        case O_SET:
        case O_VARIANT:
            if ((ch == O_SET ? n_sets : n_variants) == MAX_SWEEP) {
                fprintf(stderr, "cellcast anomaly-eval: at most %d --%s\n", MAX_SWEEP, name);
                return 2;
            }
            if (ch == O_SET)
                sets[n_sets++] = optarg;
            else
                variants[n_variants++] = optarg;
            break;
        case O_HELP: usage(stdout); return 0;
        case '?': usage(stderr); return 2;
        default:
            if (num(name, optarg, ch == O_LAG ? -1 : 0, 1e9, &v))
                return 2;
            switch (ch) {
            case O_SEED: o.seed = (uint64_t)v; break;
            case O_TRIALS: o.trials = (int)v; break;
            case O_SPACING: o.spacing = (int)v; break;
            case O_MARGIN: o.margin = (int)v; break;
            case O_POST: o.post = (int)v; break;
            case O_WZ: o.as.warn_z = v; break;
            case O_CZ: o.as.crit_z = v; break;
            case O_MINK: o.as.min_kpis = (int)v; break;
            case O_WN: o.as.window_n = (int)v; break;
            case O_WK: o.as.warn_k = (int)v; break;
            case O_CK: o.as.crit_k = (int)v; break;
            case O_RM: o.as.resolve_m = (int)v; break;
            case O_CD: o.as.cooldown_steps = (int)v; break;
            case O_FREL: o.as.sd_floor_rel = v; break;
            case O_FSC: o.as.sd_floor_scale = v; break;
            case O_BW: o.baseline_window = (int)v; break;
            case O_BZ: o.baseline_z = v; break;
            case O_LAG: o.as.lag_steps = (int)v; break;
            case O_MAG: o.mag_scale = v; break;
            case O_BUDGET: o.budget = v; break;
            case O_TFRAC:
                if (v >= 1) {
                    fprintf(stderr, "cellcast anomaly-eval: --test-frac must be < 1\n");
                    return 2;
                }
                o.test_frac = v;
                break;
            }
        }
    }
    if (!o.model || !o.n_data || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (o.spacing < 8 || o.trials < 1) {
        fprintf(stderr, "cellcast anomaly-eval: need --spacing ≥ 8 and --trials ≥ 1\n");
        return 2;
    }

    int ret = 1;
    CcModel *m = NULL;
    CcEngine *e = NULL;
    Cell *cells = NULL;
    int n_cells = 0;
    char err[512];
    if (cc_model_open_file(&m, o.model, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
        goto done;
    }
    const int F = m->hp.n_features;
    for (int i = 0; i < n_sets; i++)
        if (apply_sets(&o.as, &m->hp, sets[i]))
            goto done;
    o.as.n_features = F;
    o.as.step_seconds = m->hp.step_seconds;
    if (o.as.min_kpis > F)
        o.as.min_kpis = F;
    if (o.as.lag_steps < 0) /* -1: the model's horizon, as cc_anomaly_set_forecast does */
        o.as.lag_steps = m->hp.horizon < CC_ANOMALY_MAX_LAG ? m->hp.horizon : CC_ANOMALY_MAX_LAG;
    if (o.as.lag_steps > m->hp.horizon) {
        fprintf(stderr, "cellcast anomaly-eval: --lag %d exceeds the model's horizon %d\n",
                o.as.lag_steps, m->hp.horizon);
        goto done;
    }
    if (cc_anomaly_validate(&o.as, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
        goto done;
    }
    int kpis[CC_MAX_FEATURES], n_kpis = 0;
    if (o.inject_kpis) {
        char *dup = strdup(o.inject_kpis), *save = NULL;
        for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int f = cc_hparams_feature_index(&m->hp, t);
            if (f < 0) {
                fprintf(stderr, "cellcast anomaly-eval: --inject-kpis: '%s' is not a model KPI\n",
                        t);
                free(dup);
                goto done;
            }
            kpis[n_kpis++] = f;
        }
        free(dup);
    } else {
        for (int f = 0; f < F; f++)
            kpis[n_kpis++] = f;
    }
    if (o.alert_kpis) {
        for (int f = 0; f < F; f++)
            o.as.kpi[f].enabled = 0;
        char *dup = strdup(o.alert_kpis), *save = NULL;
        for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int f = cc_hparams_feature_index(&m->hp, t);
            if (f < 0) {
                fprintf(stderr, "cellcast anomaly-eval: --alert-kpis: '%s' is not a model KPI\n",
                        t);
                free(dup);
                goto done;
            }
            o.as.kpi[f].enabled = 1;
        }
        free(dup);
    }
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    char eerr[256];
    if (cc_engine_open(&e, m, &es, eerr, sizeof eerr)) {
        fprintf(stderr, "cellcast anomaly-eval: cannot open the engine: %s\n", eerr);
        goto done;
    }
    int W = o.baseline_window ? o.baseline_window : (int)(86400 / m->hp.step_seconds);
    if (W < 20)
        W = 20;

    int cap_cells = 0;
    fprintf(stderr, "anomaly-eval: model %s (F=%d, S=%llds, P=%d, N=%d, M=%d)\n", o.model, F,
            (long long)m->hp.step_seconds, m->hp.patch_len, m->hp.n_patches, m->hp.norm_window);
    uint64_t rng = o.seed;
    int64_t t0 = cc_now_ns();
    for (int tr = 0; tr < o.trials; tr++) {
        int trial_base = n_cells; /* injection types rotate by slot, cell and trial */
        for (int i = 0; i < o.n_data; i++) {
            int first_new = n_cells;
            if (load_file(&o, i, m, &cells, &n_cells, &cap_cells))
                goto done;
            for (int ci = first_new; ci < n_cells; ci++)
                if (prepare_cell(&o, &cells[ci], m, e, kpis, n_kpis, &rng, tr, ci - trial_base,
                                 W))
                    goto done;
        }
    }
    fprintf(stderr, "anomaly-eval: engine pass %.1f s\n", (double)(cc_now_ns() - t0) * 1e-9);

    /* detectors: the settings, then each --variant on top of them */
    CcAnomalySettings det[MAX_SWEEP + 1];
    int n_det = 0;
    det[n_det++] = o.as;
    for (int i = 0; i < n_variants; i++) {
        det[n_det] = o.as;
        if (apply_sets(&det[n_det], &m->hp, variants[i]))
            goto done;
        if (det[n_det].lag_steps < 0)
            det[n_det].lag_steps =
                m->hp.horizon < CC_ANOMALY_MAX_LAG ? m->hp.horizon : CC_ANOMALY_MAX_LAG;
        if (det[n_det].lag_steps > m->hp.horizon ||
            cc_anomaly_validate(&det[n_det], err, sizeof err)) {
            fprintf(stderr, "cellcast anomaly-eval: --variant %s: %s\n", variants[i],
                    det[n_det].lag_steps > m->hp.horizon ? "lag exceeds the horizon" : err);
            goto done;
        }
        n_det++;
    }
    /* --budget: one more detector, the settings with thresholds calibrated on the history */
    int budget_det = -1;
    if (o.budget >= 0) {
        if (n_det > MAX_SWEEP) {
            fprintf(stderr, "cellcast anomaly-eval: too many detectors for --budget\n");
            goto done;
        }
        CcAnomalySettings t = o.as;
        double rate = NAN, weeks = 0;
        /* the history is the same in every trial: calibrate on the first trial's cells */
        int rc = calibrate_budget(&t, cells, n_cells / o.trials, F, o.budget, &rate, &weeks);
        if (rc < 0) {
            fprintf(stderr, "cellcast anomaly-eval: --budget needs history rows with forecasts "
                            "(a history file or --test-frac)\n");
            goto done;
        }
        if (rc > 0) {
            fprintf(stderr, "cellcast anomaly-eval: --budget %g: the history has %.2f false "
                            "alerts per cell-week even at warn_z 1000\n", o.budget, rate);
            goto done;
        }
        printf("budget %g false alerts per cell-week on %.1f cell-weeks of history: warn_z %.3g, "
               "crit_z %.3g, cusum_k %.3g, profile_k %.3g (history rate %.2f)\n", o.budget, weeks,
               t.warn_z, t.crit_z, t.cusum_k, t.profile_k, rate);
        budget_det = n_det;
        det[n_det++] = t;
    }
    double zs[MAX_SWEEP + 1];
    int nz = o.n_sweep;
    if (nz)
        memcpy(zs, o.sweep, (size_t)nz * sizeof *zs);
    else
        zs[nz++] = o.as.warn_z;
    printf("anomaly-eval: %d cell-runs, %d trial(s), seed %llu, spacing %d, window k-of-n %d/%d "
           "(crit %d/%d), resolve %d, cooldown %d, min_kpis %d, baseline window %d steps\n",
           n_cells, o.trials, (unsigned long long)o.seed, o.spacing, o.as.warn_k, o.as.window_n,
           o.as.crit_k, o.as.window_n, o.as.resolve_m, o.as.cooldown_steps, o.as.min_kpis, W);
    printf("%-22s %6s %6s %6s %7s %8s %11s %6s %5s %10s\n", "detector", "prec", "recall", "F1",
           "delay", "FA/cw", "detected", "alerts", "false", "dq/outside");
    for (int di = 0; di < n_det; di++)
    for (int zi = 0; zi < nz; zi++) {
        CcAnomalySettings s = det[di];
        if (o.n_sweep && di != budget_det) {
            s.warn_z = zs[zi];
            s.crit_z = fmax(det[di].crit_z, 1.5 * zs[zi]);
        }
        if (s.crit_z < s.warn_z)
            s.crit_z = s.warn_z;
        Score sm = {0}, sb = {0};
        CcAnomalySettings sbs = o.as;
        sbs.warn_z = s.warn_z;
        sbs.crit_z = s.crit_z;
        sbs.warn_z = o.baseline_z;
        sbs.crit_z = fmax(s.crit_z, o.baseline_z);
        sbs.sd_floor_scale = 0;
        sbs.lag_steps = 0;
        sbs.cusum_h = 0; /* the baseline stays a plain 3-sigma rule */
        sbs.profile_h = 0;
        for (int c = 0; c < n_cells; c++) {
            if (run_detector(&s, &cells[c], F, 0, o.post, &sm, o.verbose ? &m->hp : NULL) ||
                (di == 0 && run_detector(&sbs, &cells[c], F, 1, o.post, &sb, NULL)))
                goto done;
        }
        char name[64];
        if (di == budget_det)
            printf("budget %g:\n", o.budget);
        else if (di)
            printf("variant %s:\n", variants[di - 1]);
        snprintf(name, sizeof name, "model z>=%g/%g", s.warn_z, s.crit_z);
        print_score(name, &sm, nz == 1);
        if (di == 0 && (zi == 0 || o.n_sweep == 0)) {
            snprintf(name, sizeof name, "3sigma-roll z>=%g/%g", sbs.warn_z, sbs.crit_z);
            print_score(name, &sb, nz == 1);
        }
    }
    printf("(prec = true alerts / anomaly alerts; FA/cw = false anomaly alerts per cell-week of "
           "clean test time; delay in steps; dq = data-quality alerts, outside labels)\n");
    ret = 0;
done:
    for (int i = 0; i < n_cells; i++)
        cell_free(&cells[i]);
    free(cells);
    cc_engine_close(&e);
    cc_model_close(&m);
    return ret;
}
