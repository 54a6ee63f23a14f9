/* eval.c — rolling-origin evaluation against baselines (see eval.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cc_engine.h"
#include "cc_metrics.h"
#include "cc_model.h"
#include "cc_online_calib.h"
#include "eval.h"
#include "linear_baseline.h"

enum { M_MODEL, M_NAIVE, M_SDAY, M_SWEEK, M_MEAN, M_LINEAR, M_ADAPTIVE, N_METHODS };

static const char *method_names[N_METHODS] = {"model", "naive",  "snaive_1d",     "snaive_1w",
                                              "mean",  "linear", "model_adaptive"};

static const char *const barcelona_targets[] = {"rnti_count", "rb_down", "rb_up", "down", "up"};

typedef struct SeriesRun {
    CcCell *cell;
    CcRange test;
    int first_origin, last_origin; /* rows; first > last: none */
    int start_row;                 /* first row streamed */
    double *scale;                 /* (K) MASE scale per scored KPI */
    double *csum; /* (T+1, K) prefix sums of the scored KPIs (window mean): only its rows
                   * csum_lo .. last_origin + 1, the ones the origins' windows read */
    int csum_lo;
    CcOnlineCalib *adapt;           /* adapt_rate > 0: the series' online interval scales */
    float *fc_mean, *fc_sd, *truth; /* (F, HZ), (F, HZ), (F) its push/observe buffers */
} SeriesRun;

struct CctEval {
    CctEvalSettings s;
    CcModel *model;
    CcEngine *engine;
    CcDataset *ds, *dtest;
    CcDataReport rep;
    CcMetrics *met[N_METHODS];
    SeriesRun *runs;
    char testbuf[1024], warnings[1024];
    CctLinear *linear;    /* the linear method; NULL: off or skipped (linear_msg says why) */
    double *linear_fc;    /* (H) its forecast at one origin */
    char linear_msg[256]; /* its warning: skipped, or the window cut */
    double linear_fit_s;  /* wall time of its fit */
    int K, kidx[CC_DATA_MAX_FEATURES];
    char kname[CC_DATA_MAX_FEATURES][CC_FEATURE_NAME_MAX];
    int H, W, D, R, P; /* horizon, window, steps per day (0: none), streamed context, patch */
    double zmean[CC_DATA_MAX_FEATURES], zstd[CC_DATA_MAX_FEATURES]; /* ett: the train slice's */
    CcRange ett[3]; /* ett: train, validation, test rows (cc_data_ett_split) */
    int64_t t_start, engine_ns, n_origins, skipped_origins, n_engine_steps;
    double wall;
};

void cct_eval_default_settings(CctEvalSettings *s)
{
    memset(s, 0, sizeof *s);
    cc_data_default_settings(&s->data);
    s->protocol = CCT_EVAL_ROLLING;
    s->threads = 1;
    s->linear_window = 336;
    s->linear_lambda = -1;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int parse_list(const char *s, char names[][CC_FEATURE_NAME_MAX], int max)
{
    int n = 0;
    while (s && *s) {
        const char *q = strchr(s, ',');
        size_t l = q ? (size_t)(q - s) : strlen(s);
        if (n == max || l == 0 || l >= CC_FEATURE_NAME_MAX)
            return -1;
        memcpy(names[n], s, l);
        names[n][l] = 0;
        n++;
        if (!q)
            break;
        s = q + 1;
    }
    return n;
}

/* ---------------------------------------------------------------------------- loading */

/* The model, the data (with the model's features and step unless given) and the test file
 * appended to it (barcelona: SITE_test.csv by default). */
/* settings.series: the one series kept (moved to index 0), the others freed. */
static int keep_series(CcDataset *ds, const char *id, char *err, size_t errlen)
{
    int k = -1;
    for (int i = 0; i < ds->n_series && k < 0; i++)
        if (!strcmp(ds->series[i].cell_id, id))
            k = i;
    if (k < 0) {
        snprintf(err, errlen, "no series '%s' in the data (%d series)", id, ds->n_series);
        return -ENOENT;
    }
    for (int i = 0; i < ds->n_series; i++)
        if (i != k) {
            free(ds->series[i].x);
            free(ds->series[i].mask);
        }
    ds->series[0] = ds->series[k];
    ds->n_series = 1;
    return 0;
}

static int load(CctEval *e, char *err, size_t errlen)
{
    CctEvalSettings *o = &e->s;
    CcDataReport rep2;
    int join_row = -1;
    if (o->model_path && cc_model_open_file(&e->model, o->model_path, err, errlen))
        return -EINVAL;
    CcDataSettings dset = o->data;
    dset.step_seconds = o->step;
    char featlist[CC_MAX_FEATURES * CC_FEATURE_NAME_MAX];
    if (o->features) {
        dset.features = o->features;
    } else if (e->model) {
        size_t len = 0;
        featlist[0] = 0;
        for (int f = 0; f < e->model->hp.n_features; f++)
            len += (size_t)snprintf(featlist + len, sizeof featlist - len, "%s%s", f ? "," : "",
                                    e->model->hp.features[f]);
        dset.features = featlist;
    }
    if (!dset.step_seconds && e->model)
        dset.step_seconds = e->model->hp.step_seconds;
    if (cc_data_open_file(&e->ds, o->data_path, &dset, &e->rep, err, errlen))
        return -EINVAL;
    if (o->protocol == CCT_EVAL_BARCELONA && !o->test_path) {
        size_t l = strlen(o->data_path);
        if (l > 4 && !strcmp(o->data_path + l - 4, ".csv"))
            snprintf(e->testbuf, sizeof e->testbuf, "%.*s_test.csv", (int)(l - 4), o->data_path);
        else
            snprintf(e->testbuf, sizeof e->testbuf, "%s_test", o->data_path);
        if (!file_exists(e->testbuf)) {
            snprintf(err, errlen, "barcelona protocol: no test file %s (give --test)", e->testbuf);
            return -EINVAL;
        }
        o->test_path = e->testbuf;
    }
    if (o->test_path && (cc_data_open_file(&e->dtest, o->test_path, &dset, &rep2, err, errlen) ||
                         cc_data_append(e->ds, e->dtest, dset.impute, &join_row, err, errlen)))
        return -EINVAL;
    if (o->series && keep_series(e->ds, o->series, err, errlen))
        return -EINVAL;
    if (e->model && e->ds->step_seconds != e->model->hp.step_seconds) {
        snprintf(err, errlen, "data step %lld s differs from the model's %lld s",
                 (long long)e->ds->step_seconds, (long long)e->model->hp.step_seconds);
        return -EINVAL;
    }
    /* the engine reads a row as the model's F values in its order */
    for (int f = 0; e->model && f < e->model->hp.n_features; f++)
        if (e->ds->n_features != e->model->hp.n_features ||
            strcmp(e->ds->features[f], e->model->hp.features[f])) {
            snprintf(err, errlen, "--features must be the model's %d features in its order",
                     e->model->hp.n_features);
            return -EINVAL;
        }
    return 0;
}

/* The KPIs scored: --kpis, the barcelona targets, or every feature. */
static int pick_kpis(CctEval *e, char *err, size_t errlen)
{
    const CcDataset *ds = e->ds;
    if (e->s.kpis) {
        e->K = parse_list(e->s.kpis, e->kname, CC_DATA_MAX_FEATURES);
    } else if (e->s.protocol == CCT_EVAL_BARCELONA) {
        e->K = 5;
        for (int i = 0; i < 5; i++)
            snprintf(e->kname[i], CC_FEATURE_NAME_MAX, "%s", barcelona_targets[i]);
    } else {
        e->K = ds->n_features;
        for (int f = 0; f < ds->n_features; f++)
            memcpy(e->kname[f], ds->features[f], CC_FEATURE_NAME_MAX);
    }
    if (e->K <= 0) {
        snprintf(err, errlen, "bad --kpis list");
        return -EINVAL;
    }
    for (int i = 0; i < e->K; i++) {
        e->kidx[i] = cc_data_feature_index(ds, e->kname[i]);
        if (e->kidx[i] < 0) {
            snprintf(err, errlen, "KPI '%s' is not among the %s features", e->kname[i],
                     e->model ? "model's" : "data's");
            return -EINVAL;
        }
    }
    return 0;
}

/* Horizon, window, steps per day and the context streamed before the first origin. */
static int pick_sizes(CctEval *e, char *err, size_t errlen)
{
    const CcModel *model = e->model;
    const int64_t S = e->ds->step_seconds;
    const int ett = e->s.protocol == CCT_EVAL_ETT, barca = e->s.protocol == CCT_EVAL_BARCELONA;
    e->H = e->s.horizon ? e->s.horizon : ett ? 96 : barca ? 1 : model ? model->hp.horizon : 24;
    if (model && e->H > model->hp.horizon) {
        snprintf(err, errlen, "--horizon %d exceeds the model's horizon %d", e->H,
                 model->hp.horizon);
        return -EINVAL;
    }
    e->W = e->s.window ? e->s.window : model ? model->hp.norm_window : 336;
    e->D = (86400 % S == 0) ? (int)(86400 / S) : 0;
    if (model) {
        e->P = model->hp.patch_len;
        e->R = model->hp.n_patches * e->P + e->P;
        if (model->hp.norm_window > e->R)
            e->R = model->hp.norm_window;
    }
    return 0;
}

/* The test range of series s. */
static int test_range(CctEval *e, int s, double from_ts, CcRange *out, char *err, size_t errlen)
{
    const CcSeries *se = &e->ds->series[s];
    CcRange sp[3];
    if (e->s.protocol == CCT_EVAL_ETT) {
        *out = e->ett[2];
    } else if (e->s.test_path) {
        /* rows after the join of this cell; other cells have no test range */
        const CcDataset *dtest = e->dtest;
        int jr = -1;
        for (int j = 0; j < dtest->n_series; j++)
            if (!strcmp(dtest->series[j].cell_id, se->cell_id) ||
                (dtest->n_series == 1 && e->ds->n_series == 1))
                jr = (int)(dtest->series[j].p0 - se->p0);
        *out = jr >= 0 ? (CcRange){jr, se->T} : (CcRange){se->T, se->T};
    } else if (e->s.from) {
        int64_t p = (int64_t)ceil(from_ts / (double)e->ds->step_seconds);
        int64_t b = p - se->p0;
        b = b < 0 ? 0 : b > se->T ? se->T : b;
        *out = (CcRange){(int)b, se->T};
    } else {
        if (cc_data_split(e->s.split, se->T, sp, err, errlen))
            return -EINVAL;
        *out = sp[2];
    }
    return 0;
}

/* Per series: test range, origins, first streamed row, MASE scales, prefix sums. */
static int prepare_runs(CctEval *e, char *err, size_t errlen)
{
    CcDataset *ds = e->ds;
    const int F = ds->n_features, K = e->K, D = e->D;
    int rc;
    if (!(e->runs = calloc((size_t)ds->n_series, sizeof *e->runs)))
        return -ENOMEM;
    if (e->s.protocol == CCT_EVAL_ETT) {
        if (cc_data_ett_split(ds->step_seconds, e->ett)) {
            snprintf(err, errlen,
                     "ett protocol needs hourly (ETTh) or 15-minute (ETTm) steps, not %lld s",
                     (long long)ds->step_seconds);
            return -EINVAL;
        }
        if (ds->n_series != 1 || ds->series[0].T < e->ett[2].end) {
            snprintf(err, errlen, "ett protocol needs one series of ≥ %d rows (ETTh1.csv)",
                     e->ett[2].end);
            return -EINVAL;
        }
        cc_data_stats(ds, 0, e->ett[0], e->zmean, e->zstd);
        cc_data_standardize(ds, e->zmean, e->zstd);
    }
    double from_ts = 0;
    if (e->s.from && cc_data_parse_time(e->s.from, strlen(e->s.from), NULL, &from_ts)) {
        snprintf(err, errlen, "cannot parse --from '%s'", e->s.from);
        return -EINVAL;
    }
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        SeriesRun *r = &e->runs[s];
        if ((rc = test_range(e, s, from_ts, &r->test, err, errlen)))
            return rc;
        r->first_origin = r->test.begin - 1 > 0 ? r->test.begin - 1 : 0;
        r->last_origin = r->test.end - 1 - e->H;
        r->start_row = 0;
        if (e->model && !e->s.full_history) {
            int st = r->first_origin - e->R - 2 * e->P;
            r->start_row = st > 0 ? st : 0;
        }
        /* only the rows the origins' windows read are kept (10k cells of 8 days: 0.5 GB
         * for every row), each summed from row 0 as before */
        int lo = r->first_origin - e->W + 1, hi = r->last_origin + 1;
        r->csum_lo = lo > 0 ? lo : 0;
        int rows = hi >= r->csum_lo ? hi - r->csum_lo + 1 : 0;
        r->scale = calloc((size_t)K, sizeof *r->scale);
        r->csum = calloc(((size_t)rows + 1) * K, sizeof *r->csum);
        if (!r->scale || !r->csum)
            return -ENOMEM;
        for (int i = 0; i < K; i++)
            r->scale[i] = cc_mase_scale(se->x, se->mask, F, e->kidx[i], 0, r->test.begin,
                                        D > 0 && D < r->test.begin ? D : 1);
        double sum[CC_DATA_MAX_FEATURES] = {0};
        for (int i = 0; i <= hi && i <= se->T; i++)
            for (int q = 0; q < K; q++) {
                if (i >= r->csum_lo)
                    r->csum[(size_t)(i - r->csum_lo) * K + q] = sum[q];
                if (i < se->T)
                    sum[q] += se->x[(size_t)i * F + e->kidx[q]];
            }
    }
    return 0;
}

/* The linear method's maps, fitted on the rows before each series' test range (ett: the
 * train months). Too few rows skip it with a warning rather than fail the evaluation. */
static int fit_linear(CctEval *e, char *err, size_t errlen)
{
    const CcDataset *ds = e->ds;
    if (e->s.linear_window == 0)
        return 0;
    CcRange *fit = calloc((size_t)ds->n_series, sizeof *fit);
    e->linear_fc = malloc((size_t)e->H * sizeof *e->linear_fc);
    if (!fit || !e->linear_fc) {
        free(fit);
        return -ENOMEM;
    }
    for (int s = 0; s < ds->n_series; s++)
        fit[s] = e->s.protocol == CCT_EVAL_ETT ? e->ett[0] : (CcRange){0, e->runs[s].test.begin};
    CctLinearSettings ls;
    cct_linear_default_settings(&ls);
    ls.window = e->s.linear_window;
    ls.lambda = e->s.linear_lambda;
    ls.horizon = e->H;
    int64_t t0 = cc_now_ns();
    int rc = cct_linear_open(&e->linear, ds, fit, e->kidx, e->K, &ls, e->linear_msg,
                             sizeof e->linear_msg);
    e->linear_fit_s = (double)(cc_now_ns() - t0) / 1e9;
    free(fit);
    if (rc == -EAGAIN || rc == -EDOM || rc == 0) /* skipped or singular: said in the warning */
        return 0;
    if (rc == -EINVAL)
        snprintf(err, errlen, "--linear-window must be ≥ 0 and --linear-lambda ≥ 0 (or -1)");
    return rc;
}

static int open_engine(CctEval *e, char *err, size_t errlen)
{
    for (int m = 0; m < N_METHODS; m++)
        if (cc_metrics_open(&e->met[m], e->K, e->H))
            return -ENOMEM;
    if (!e->model)
        return 0;
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    es.n_threads = e->s.threads;
    char eerr[256];
    if (cc_engine_open(&e->engine, e->model, &es, eerr, sizeof eerr)) {
        snprintf(err, errlen, "cannot open the engine: %s", eerr);
        return -EINVAL;
    }
    for (int s = 0; s < e->ds->n_series; s++)
        if (cc_cell_open(&e->runs[s].cell, e->engine))
            return -ENOMEM;
    if (e->s.adapt) {
        CcOnlineCalibSettings os;
        cc_online_calib_default_settings(&os);
        os.rate = e->s.adapt_rate;
        os.per_step = e->s.adapt_per_step;
        const int F = e->model->hp.n_features, HZ = e->model->hp.horizon;
        for (int s = 0; s < e->ds->n_series; s++) {
            SeriesRun *r = &e->runs[s];
            int rc = cc_online_calib_open(&r->adapt, &os, F, HZ);
            if (rc == -EINVAL) {
                snprintf(err, errlen, "--adapt-rate must be in [0, 1]");
                return rc;
            }
            r->fc_mean = malloc((size_t)F * HZ * sizeof *r->fc_mean);
            r->fc_sd = malloc((size_t)F * HZ * sizeof *r->fc_sd);
            r->truth = malloc((size_t)F * sizeof *r->truth);
            if (rc || !r->fc_mean || !r->fc_sd || !r->truth)
                return -ENOMEM;
        }
    }
    return 0;
}

/* Online calibration of series s at origin row i (forecast fc): the truths of row i score
 * the forecasts made for it, then fc is held until its steps mature. */
static void adapt_origin(CctEval *e, int s, int i, const CcForecast *fc)
{
    const CcSeries *se = &e->ds->series[s];
    SeriesRun *r = &e->runs[s];
    const int F = e->ds->n_features;
    for (int f = 0; f < F; f++) {
        size_t ti = (size_t)i * F + f;
        r->truth[f] = se->mask[ti] ? se->x[ti] : NAN;
    }
    cc_online_calib_observe(r->adapt, i, r->truth);
    cc_forecast_points(fc, r->fc_mean, r->fc_sd); /* as the daemon does (daemon/interval.c) */
    cc_online_calib_push(r->adapt, i, r->fc_mean, r->fc_sd);
}

/* ---------------------------------------------------------------------------- scoring */

/* Scores the model's forecast fc (NULL: no model) and the baselines at origin row i of
 * series s. */
static void score_origin(CctEval *e, int s, int i, const CcForecast *fc)
{
    const CcSeries *se = &e->ds->series[s];
    const SeriesRun *r = &e->runs[s];
    const int F = e->ds->n_features, W = e->W, D = e->D, H = e->H;
    int w0 = i - W + 1 > 0 ? i - W + 1 : 0;
    for (int q = 0; q < e->K; q++) {
        int f = e->kidx[q];
        if (e->linear)
            cct_linear_forecast(e->linear, se, q, i, e->linear_fc);
        double mean = (r->csum[(size_t)(i + 1 - r->csum_lo) * e->K + q] -
                       r->csum[(size_t)(w0 - r->csum_lo) * e->K + q]) /
                      (double)(i + 1 - w0);
        double last = se->x[(size_t)i * F + f];
        for (int k = 0; k < H; k++) {
            int tj = i + 1 + k;
            size_t ti = (size_t)tj * F + f;
            double y = se->mask[ti] ? se->x[ti] : NAN;
            double sc = r->scale[q];
            if (fc) {
                double mu, sd;
                cc_forecast_point(fc, f, k, &mu, &sd);
                cc_metrics_add(e->met[M_MODEL], q, k, y, mu, sd, sc);
                if (r->adapt)
                    cc_metrics_add(e->met[M_ADAPTIVE], q, k, y, mu,
                                   sd * cc_online_calib_scale(r->adapt, f, k), sc);
            }
            cc_metrics_add(e->met[M_NAIVE], q, k, y, last, NAN, sc);
            if (D > 0) {
                int mday = (k + 1 + D - 1) / D, mwk = (k + 1 + 7 * D - 1) / (7 * D);
                int a = tj - mday * D, b = tj - mwk * 7 * D;
                cc_metrics_add(e->met[M_SDAY], q, k, y, a >= 0 ? se->x[(size_t)a * F + f] : NAN,
                               NAN, sc);
                cc_metrics_add(e->met[M_SWEEK], q, k, y, b >= 0 ? se->x[(size_t)b * F + f] : NAN,
                               NAN, sc);
            }
            cc_metrics_add(e->met[M_MEAN], q, k, y, mean, NAN, sc);
            if (e->linear)
                cc_metrics_add(e->met[M_LINEAR], q, k, y, e->linear_fc[k], NAN, sc);
        }
    }
}

/* One absolute step p: the series that have it step the engine together, then every
 * origin among them is scored. */
static int stream_step(CctEval *e, int64_t p, CcStepInput *inputs, int *status, int *input_series,
                       char *err, size_t errlen)
{
    const CcDataset *ds = e->ds;
    int n = 0;
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        const SeriesRun *r = &e->runs[s];
        int64_t i = p - se->p0;
        if (r->first_origin > r->last_origin || i < r->start_row || i > r->last_origin)
            continue;
        input_series[n] = s;
        inputs[n] = (CcStepInput){r->cell, p, se->x + (size_t)i * ds->n_features};
        n++;
    }
    if (n == 0)
        return 0;
    if (e->engine) {
        int64_t t0 = cc_now_ns();
        int rc = cc_engine_step(e->engine, inputs, n, status);
        e->engine_ns += cc_now_ns() - t0;
        e->n_engine_steps += n;
        if (rc) {
            snprintf(err, errlen, "engine step failed (%d)", rc);
            return -EINVAL;
        }
    }
    for (int j = 0; j < n; j++) {
        int s = input_series[j];
        const CcSeries *se = &ds->series[s];
        const SeriesRun *r = &e->runs[s];
        int i = (int)(p - se->p0);
        if (e->engine && status[j]) {
            snprintf(err, errlen, "%s step %lld refused (%d)", se->cell_id, (long long)p,
                     status[j]);
            return -EINVAL;
        }
        if (i < r->first_origin)
            continue;
        CcForecast fc;
        if (e->engine) {
            cc_cell_forecast(r->cell, &fc);
            if (!fc.valid) {
                e->skipped_origins++;
                continue;
            }
        }
        e->n_origins++;
        if (e->runs[s].adapt)
            adapt_origin(e, s, i, &fc);
        score_origin(e, s, i, e->engine ? &fc : NULL);
    }
    return 0;
}

static int stream(CctEval *e, char *err, size_t errlen)
{
    const CcDataset *ds = e->ds;
    int rc = -ENOMEM;
    CcStepInput *inputs = calloc((size_t)ds->n_series, sizeof *inputs);
    int *status = calloc((size_t)ds->n_series, sizeof *status);
    int *input_series = calloc((size_t)ds->n_series, sizeof *input_series);
    if (!inputs || !status || !input_series)
        goto end;
    int64_t pmin = INT64_MAX, pmax = INT64_MIN;
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        if (e->runs[s].first_origin > e->runs[s].last_origin)
            continue;
        int64_t a = se->p0 + e->runs[s].start_row, b = se->p0 + e->runs[s].last_origin;
        pmin = a < pmin ? a : pmin;
        pmax = b > pmax ? b : pmax;
    }
    rc = 0;
    for (int64_t p = pmin; p <= pmax && pmin <= pmax && !rc; p++)
        rc = stream_step(e, p, inputs, status, input_series, err, errlen);
end:
    free(inputs);
    free(status);
    free(input_series);
    return rc;
}

/* A seasonal baseline that got no value at all is named in e->warnings: its empty row would
 * otherwise pass for a baseline that was never asked for (a row index read as unix
 * seconds gives a step of 1 s and a day of 86400 rows). */
static void check_seasonal(CctEval *e)
{
    const int64_t S = e->ds->step_seconds;
    const char *hint = S < 60 ? "; if the time column is a row index, give --time-index yes "
                                "--step S (seconds per row)"
                              : "";
    CcMetricValues v;
    size_t len = 0;
    cc_metrics_get(e->met[M_NAIVE], -1, -1, &v);
    if (v.n == 0)
        return; /* nothing scored at all: the counts say so */
    if (e->D == 0) {
        snprintf(e->warnings, sizeof e->warnings,
                 "the step %llds does not divide a day: no seasonal-naive baselines%s",
                 (long long)S, hint);
        return;
    }
    for (int m = M_SDAY; m <= M_SWEEK; m++) {
        cc_metrics_get(e->met[m], -1, -1, &v);
        if (v.n > 0 || len >= sizeof e->warnings)
            continue;
        long long period = m == M_SDAY ? e->D : 7LL * e->D;
        int w = snprintf(e->warnings + len, sizeof e->warnings - len,
                         "%s%s is empty: a %s is %lld steps of %llds, more than the rows before "
                         "every test target",
                         len ? "; " : "", method_names[m], m == M_SDAY ? "day" : "week", period,
                         (long long)S);
        len += w > 0 ? (size_t)w : 0;
    }
    if (len && len < sizeof e->warnings)
        snprintf(e->warnings + len, sizeof e->warnings - len, "%s", hint);
}

const char *cct_eval_warnings(const CctEval *e) { return e->warnings; }

const CcDataset *cct_eval_dataset(const CctEval *e) { return e->ds; }

int cct_eval_open(CctEval **out, const CctEvalSettings *s, char *err, size_t errlen)
{
    int rc;
    CctEval *e = calloc(1, sizeof *e);
    *out = NULL;
    if (!e)
        return -ENOMEM;
    e->s = *s;
    e->t_start = cc_now_ns();
    if (!s->data_path) {
        snprintf(err, errlen, "no data file");
        free(e);
        return -EINVAL;
    }
    if ((rc = load(e, err, errlen)) || (rc = pick_kpis(e, err, errlen)) ||
        (rc = pick_sizes(e, err, errlen)) || (rc = prepare_runs(e, err, errlen)) ||
        (rc = fit_linear(e, err, errlen)) || (rc = open_engine(e, err, errlen)) ||
        (rc = stream(e, err, errlen))) {
        if (rc == -ENOMEM)
            snprintf(err, errlen, "out of memory");
        cct_eval_close(&e);
        return rc;
    }
    check_seasonal(e);
    if (e->linear_msg[0]) {
        size_t len = strlen(e->warnings);
        snprintf(e->warnings + len, sizeof e->warnings - len, "%s%s", len ? "; " : "",
                 e->linear_msg);
    }
    e->wall = (double)(cc_now_ns() - e->t_start) / 1e9;
    *out = e;
    return 0;
}

void cct_eval_close(CctEval **pe)
{
    CctEval *e = *pe;
    if (!e)
        return;
    for (int s = 0; e->runs && s < e->ds->n_series; s++) {
        cc_cell_close(&e->runs[s].cell);
        free(e->runs[s].scale);
        free(e->runs[s].csum);
        cc_online_calib_close(&e->runs[s].adapt);
        free(e->runs[s].fc_mean);
        free(e->runs[s].fc_sd);
        free(e->runs[s].truth);
    }
    free(e->runs);
    cct_linear_close(&e->linear);
    free(e->linear_fc);
    for (int m = 0; m < N_METHODS; m++)
        cc_metrics_close(&e->met[m]);
    cc_engine_close(&e->engine);
    cc_model_close(&e->model);
    cc_data_close(&e->ds);
    cc_data_close(&e->dtest);
    free(e);
    *pe = NULL;
}

/* ---------------------------------------------------------------------------- report */

/* Methods reported: the model's only with a model, the seasonal ones only with a day. */
static int shown_method(const CctEval *e, int m)
{
    return (m != M_MODEL || e->engine) && (m != M_ADAPTIVE || e->s.adapt) &&
           (m != M_LINEAR || e->linear) && !((m == M_SDAY || m == M_SWEEK) && e->D == 0);
}

static const char *method_label(const CctEval *e, int m, char *buf, size_t n)
{
    if (m != M_MEAN)
        return method_names[m];
    snprintf(buf, n, "mean_%d", e->W);
    return buf;
}

static int64_t test_rows(const CctEval *e)
{
    int64_t n = 0;
    for (int s = 0; s < e->ds->n_series; s++)
        n += e->runs[s].test.end - e->runs[s].test.begin;
    return n;
}

/* Barcelona summary of method m: NRMSE averaged over the targets at horizon step k. */
static double barcelona_nrmse(const CctEval *e, int m, int k)
{
    double acc = 0;
    for (int q = 0; q < e->K; q++) {
        CcMetricValues v;
        cc_metrics_get(e->met[m], q, k, &v);
        acc += v.nrmse;
    }
    return acc / e->K;
}

/* Step 1 of it, NaN unless every target has a finite NRMSE. */
static double barcelona_nrmse_step1(const CctEval *e, int m)
{
    double acc = 0;
    int n = 0;
    for (int q = 0; q < e->K; q++) {
        CcMetricValues v;
        cc_metrics_get(e->met[m], q, 0, &v);
        if (isfinite(v.nrmse)) {
            acc += v.nrmse;
            n++;
        }
    }
    return n == e->K ? acc / n : NAN;
}

static json_t *values_json(const CcMetricValues *v)
{
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer(v->n));
#define NUM(k, x) json_object_set_new(o, k, isfinite(x) ? json_real(x) : json_null())
    NUM("mae", v->mae);
    NUM("mse", v->mse);
    NUM("rmse", v->rmse);
    NUM("nrmse", v->nrmse);
    NUM("mase", v->mase);
    NUM("coverage80", v->coverage);
#undef NUM
    if (v->skipped)
        json_object_set_new(o, "skipped", json_integer(v->skipped));
    return o;
}

static json_t *method_json(const CctEval *e, int m)
{
    const CcMetrics *met = e->met[m];
    json_t *jm = json_object();
    CcMetricValues v;
    cc_metrics_get(met, -1, -1, &v);
    json_object_set_new(jm, "overall", values_json(&v));
    json_t *pk = json_object(), *ps = json_array(), *pks = json_object();
    for (int q = 0; q < e->K; q++) {
        cc_metrics_get(met, q, -1, &v);
        json_object_set_new(pk, e->kname[q], values_json(&v));
        json_t *arr = json_array();
        for (int k = 0; k < e->H; k++) {
            cc_metrics_get(met, q, k, &v);
            json_array_append_new(arr, values_json(&v));
        }
        json_object_set_new(pks, e->kname[q], arr);
    }
    for (int k = 0; k < e->H; k++) {
        cc_metrics_get(met, -1, k, &v);
        json_array_append_new(ps, values_json(&v));
    }
    json_object_set_new(jm, "per_kpi", pk);
    json_object_set_new(jm, "per_step", ps);
    json_object_set_new(jm, "per_kpi_step", pks);
    if (e->s.protocol == CCT_EVAL_BARCELONA) {
        double b1 = barcelona_nrmse_step1(e, m);
        json_object_set_new(jm, "barcelona_nrmse_step1",
                            isfinite(b1) ? json_real(b1) : json_null());
        json_t *arr = json_array();
        for (int k = 0; k < e->H; k++) {
            double b = barcelona_nrmse(e, m, k);
            json_array_append_new(arr, isfinite(b) ? json_real(b) : json_null());
        }
        json_object_set_new(jm, "barcelona_nrmse_per_step", arr);
    }
    return jm;
}

/* The rate the online calibration ran at (0 in the settings: the library's for the model's
 * horizon). */
static double adapt_rate(const CctEval *e)
{
    return e->s.adapt_rate > 0 ? e->s.adapt_rate : cc_online_calib_auto_rate(e->model->hp.horizon);
}

/* The model per horizon step (all KPIs pooled): the worst ratio of its MSE to naive's and
 * that step (1-based), how many steps it loses to naive, and its coverage range. The
 * ratio is NAN when the model or naive has no value at any step. */
typedef struct StepSummary {
    double worst, cover_min, cover_max;
    int worst_step, losing;
} StepSummary;

static StepSummary step_summary_kpi(const CctEval *e, int m, int q)
{
    StepSummary r = {NAN, NAN, NAN, 0, 0};
    for (int k = 0; k < e->H; k++) {
        CcMetricValues vm, vn;
        cc_metrics_get(e->met[m], q, k, &vm);
        cc_metrics_get(e->met[M_NAIVE], q, k, &vn);
        double q = vn.mse > 0 ? vm.mse / vn.mse : NAN;
        if (isfinite(q) && !(q <= r.worst))
            r.worst = q, r.worst_step = k + 1;
        r.losing += isfinite(q) && q > 1;
        if (isfinite(vm.coverage)) {
            r.cover_min = !(vm.coverage >= r.cover_min) ? vm.coverage : r.cover_min;
            r.cover_max = !(vm.coverage <= r.cover_max) ? vm.coverage : r.cover_max;
        }
    }
    return r;
}

/* All KPIs pooled (step_summary_kpi of one KPI q: the same on its values only). */
static StepSummary step_summary(const CctEval *e, int m) { return step_summary_kpi(e, m, -1); }

static json_t *step_summary_json(const CctEval *e, int m)
{
    StepSummary r = step_summary(e, m);
#define NUM(x) (isfinite(x) ? json_real(x) : json_null())
    json_t *j =
        json_pack("{s:o,s:i,s:i,s:o,s:o}", "worst_naive_mse_ratio", NUM(r.worst), "worst_step",
                  r.worst_step, "steps_losing_to_naive", r.losing, "cover80_step_min",
                  NUM(r.cover_min), "cover80_step_max", NUM(r.cover_max));
#undef NUM
    /* issue 31: per KPI, how many horizon steps lose to naive (MSE), one pooled count
     * hides a KPI that loses on every step */
    json_t *per = json_object();
    for (int q = 0; q < e->K; q++)
        json_object_set_new(per, e->kname[q], json_integer(step_summary_kpi(e, m, q).losing));
    json_object_set_new(j, "steps_losing_to_naive_per_kpi", per);
    return j;
}

static json_t *hparams_json(const CcHparams *hp)
{
    return json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:s}", "patch_len", hp->patch_len,
                     "n_patches", hp->n_patches, "norm_window", hp->norm_window, "d_model",
                     hp->d_model, "n_layers", hp->n_layers, "d_ff", hp->d_ff, "horizon",
                     hp->horizon, "n_features", hp->n_features, "trained_on", hp->trained_on,
                     "created_at", hp->created_at);
}

static const char *protocol_name(enum CctEvalProtocol p)
{
    return p == CCT_EVAL_ETT ? "ett" : p == CCT_EVAL_BARCELONA ? "barcelona" : "rolling";
}

json_t *cct_eval_json(const CctEval *e)
{
    const CcDataset *ds = e->ds;
    json_t *root = json_object();
    if (!root)
        return NULL;
    json_object_set_new(root, "model",
                        e->s.model_path ? json_string(e->s.model_path) : json_null());
    if (e->model)
        json_object_set_new(root, "model_hparams", hparams_json(&e->model->hp));
    json_object_set_new(root, "data", json_string(ds->source));
    json_object_set_new(root, "protocol", json_string(protocol_name(e->s.protocol)));
    json_object_set_new(root, "step_seconds", json_integer(ds->step_seconds));
    json_object_set_new(root, "horizon", json_integer(e->H));
    json_object_set_new(root, "window_mean", json_integer(e->W));
    if (e->linear) {
        json_object_set_new(root, "linear_window", json_integer(cct_linear_window(e->linear)));
        json_t *lam = json_object();
        for (int q = 0; q < e->K; q++)
            json_object_set_new(lam, e->kname[q], json_real(cct_linear_lambda(e->linear, q)));
        json_object_set_new(root, "linear_lambda", lam);
        json_object_set_new(root, "linear_lambda_chosen", json_boolean(e->s.linear_lambda < 0));
        json_object_set_new(root, "linear_fit_s", json_real(e->linear_fit_s));
    }
    json_object_set_new(root, "series", json_integer(ds->n_series));
    json_object_set_new(root, "test_rows", json_integer(test_rows(e)));
    json_object_set_new(root, "origins", json_integer(e->n_origins));
    json_object_set_new(root, "skipped_origins", json_integer(e->skipped_origins));
    json_object_set_new(root, "rows_read", json_integer(e->rep.rows_read));
    json_object_set_new(root, "missing_steps_inserted", json_integer(e->rep.missing_steps));
    json_object_set_new(root, "wall_s", json_real(e->wall));
    json_object_set_new(root, "engine_s", json_real((double)e->engine_ns / 1e9));
    json_object_set_new(root, "engine_cell_steps", json_integer(e->n_engine_steps));
    json_t *kp = json_array();
    for (int q = 0; q < e->K; q++)
        json_array_append_new(kp, json_string(e->kname[q]));
    json_object_set_new(root, "kpis", kp);
    if (e->warnings[0])
        json_object_set_new(root, "warnings", json_string(e->warnings));
    if (ds->n_series == 1) {
        json_object_set_new(root, "test_begin_row", json_integer(e->runs[0].test.begin));
        json_object_set_new(root, "test_end_row", json_integer(e->runs[0].test.end));
    }
    json_t *methods = json_object();
    char buf[32];
    for (int m = 0; m < N_METHODS; m++)
        if (shown_method(e, m))
            json_object_set_new(methods, method_label(e, m, buf, sizeof buf), method_json(e, m));
    json_object_set_new(root, "methods", methods);
    if (shown_method(e, M_MODEL))
        json_object_set_new(root, "model_per_step", step_summary_json(e, M_MODEL));
    if (shown_method(e, M_ADAPTIVE)) {
        json_object_set_new(root, "model_adaptive_per_step", step_summary_json(e, M_ADAPTIVE));
        json_object_set_new(root, "adapt_rate", json_real(adapt_rate(e)));
        json_object_set_new(root, "adapt_per_step", json_boolean(e->s.adapt_per_step));
    }
    if (e->s.protocol == CCT_EVAL_ETT) {
        json_t *z = json_array();
        for (int f = 0; f < ds->n_features; f++)
            json_array_append_new(z, json_pack("{s:s,s:f,s:f}", "feature", ds->features[f], "mean",
                                               e->zmean[f], "std", e->zstd[f]));
        char key[64]; /* ETTh: zscore_train_rows_0_8640, as before ETTm */
        snprintf(key, sizeof key, "zscore_train_rows_%d_%d", e->ett[0].begin, e->ett[0].end);
        json_object_set_new(root, key, z);
    }
    return root;
}

/* ---------------------------------------------------------------------------- table */

static void fmt_num(char *buf, size_t n, double x)
{
    if (!isfinite(x))
        snprintf(buf, n, "%10s", "-");
    else if (fabs(x) >= 1e5 || (fabs(x) < 1e-3 && x != 0))
        snprintf(buf, n, "%10.3e", x);
    else
        snprintf(buf, n, "%10.4f", x);
}

static void print_row(FILE *out, const char *label, const char *method, const CcMetricValues *v)
{
    char a[6][32];
    fmt_num(a[0], sizeof a[0], v->mae);
    fmt_num(a[1], sizeof a[1], v->mse);
    fmt_num(a[2], sizeof a[2], v->rmse);
    fmt_num(a[3], sizeof a[3], v->nrmse);
    fmt_num(a[4], sizeof a[4], v->mase);
    fmt_num(a[5], sizeof a[5], v->coverage);
    fprintf(out, "  %-14s %-14s %s %s %s %s %s %s %9lld\n", label, method, a[0], a[1], a[2], a[3],
            a[4], a[5], (long long)v->n);
}

static void print_header(FILE *out, const char *first)
{
    fprintf(out, "  %-14s %-14s %10s %10s %10s %10s %10s %10s %9s\n", first, "method", "MAE", "MSE",
            "RMSE", "NRMSE", "MASE", "cover80", "n");
}

/* Horizon steps shown in the table: 1,2,3,4,6,8,12,16,24,… up to H, and H. */
static int shown_step(int k, int H, int all)
{
    if (all || H <= 8)
        return 1;
    int s = k + 1;
    if (s == H || s <= 4)
        return 1;
    for (int p = 4; p <= s; p *= 2)
        if (s == p || s == p + p / 2)
            return 1;
    return 0;
}

static void print_summary(const CctEval *e, FILE *out)
{
    const CcDataset *ds = e->ds;
    const int ett = e->s.protocol == CCT_EVAL_ETT, barca = e->s.protocol == CCT_EVAL_BARCELONA;
    char buf[2048];
    cc_data_report_format(&e->rep, ds, buf, sizeof buf);
    const char *base = strrchr(e->s.data_path, '/');
    base = base ? base + 1 : e->s.data_path;
    fprintf(out, "cellcast eval — %s%s%s\n", ett || barca ? base : "",
            ett     ? ", ETT standard protocol, "
            : barca ? ", Barcelona protocol, "
                    : "",
            e->model ? e->s.model_path : "baselines only (no --model)");
    fprintf(out, "data: %s\n", buf);
    fprintf(out,
            "series %d, test steps %lld, origins %lld (skipped, no forecast yet: %lld), "
            "horizon %d × %llds, window mean %d%s\n",
            ds->n_series, (long long)test_rows(e), (long long)e->n_origins,
            (long long)e->skipped_origins, e->H, (long long)ds->step_seconds, e->W,
            ett ? ", values z-scored with the train slice" : "");
    if (ds->n_series == 1)
        fprintf(out, "test rows [%d, %d), origins rows %d..%d\n", e->runs[0].test.begin,
                e->runs[0].test.end, e->runs[0].first_origin, e->runs[0].last_origin);
    fprintf(out, "wall %.2f s (engine %.2f s for %lld cell-steps)\n", e->wall,
            (double)e->engine_ns / 1e9, (long long)e->n_engine_steps);
    if (e->linear) {
        fprintf(out, "linear: NLinear window %d, fitted in %.2f s, ridge lambda%s",
                cct_linear_window(e->linear), e->linear_fit_s,
                e->s.linear_lambda < 0 ? " (chosen on the last 15 % before the test)" : "");
        for (int q = 0; q < e->K && q < 16; q++)
            fprintf(out, " %s%g", q ? "/ " : "", cct_linear_lambda(e->linear, q));
        fprintf(out, "%s\n", e->K > 16 ? " …" : "");
    }
    if (e->warnings[0])
        fprintf(out, "warning: %s\n", e->warnings);
    fputc('\n', out);
}

static void print_per_step(const CctEval *e, int per_step, FILE *out)
{
    const int barca = e->s.protocol == CCT_EVAL_BARCELONA;
    const int64_t S = e->ds->step_seconds;
    char mbuf[32];
    fprintf(out, "\nPer horizon step (all KPIs pooled%s)\n",
            barca ? "; last column group: mean NRMSE over targets" : "");
    print_header(out, "step");
    for (int k = 0; k < e->H; k++) {
        if (!shown_step(k, e->H, per_step))
            continue;
        char lab[64];
        int64_t secs = (int64_t)(k + 1) * S;
        if (secs < 3600)
            snprintf(lab, sizeof lab, "%d (%lldm)", k + 1, (long long)(secs / 60));
        else if (secs >= 2 * 86400 && secs % 86400 == 0) /* daily data: "4 (4d)", not "96h" */
            snprintf(lab, sizeof lab, "%d (%lldd)", k + 1, (long long)(secs / 86400));
        else if (secs % 3600 == 0)
            snprintf(lab, sizeof lab, "%d (%lldh)", k + 1, (long long)(secs / 3600));
        else
            snprintf(lab, sizeof lab, "%d (%.1fh)", k + 1, (double)secs / 3600.0);
        for (int m = 0; m < N_METHODS; m++) {
            if (!shown_method(e, m))
                continue;
            CcMetricValues v;
            cc_metrics_get(e->met[m], -1, k, &v);
            if (barca)
                v.nrmse = barcelona_nrmse(e, m, k);
            print_row(out, lab, method_label(e, m, mbuf, sizeof mbuf), &v);
        }
    }
}

void cct_eval_print(const CctEval *e, int per_step, FILE *out)
{
    char mbuf[32];
    CcMetricValues v;
    print_summary(e, out);
    fprintf(out, "Overall (all KPIs, steps 1..%d)\n", e->H);
    print_header(out, "");
    for (int m = 0; m < N_METHODS; m++) {
        if (!shown_method(e, m))
            continue;
        cc_metrics_get(e->met[m], -1, -1, &v);
        print_row(out, "all", method_label(e, m, mbuf, sizeof mbuf), &v);
    }
    if (e->s.protocol == CCT_EVAL_BARCELONA) {
        fprintf(out, "\nBarcelona: NRMSE averaged over %d targets, step 1 (2 min)\n", e->K);
        for (int m = 0; m < N_METHODS; m++)
            if (shown_method(e, m))
                fprintf(out, "  %-14s %.4f\n", method_label(e, m, mbuf, sizeof mbuf),
                        barcelona_nrmse_step1(e, m));
    }
    fprintf(out, "\nPer KPI (steps 1..%d pooled)\n", e->H);
    print_header(out, "kpi");
    for (int q = 0; q < e->K; q++) {
        for (int m = 0; m < N_METHODS; m++) {
            if (!shown_method(e, m))
                continue;
            cc_metrics_get(e->met[m], q, -1, &v);
            print_row(out, e->kname[q], method_label(e, m, mbuf, sizeof mbuf), &v);
        }
    }
    if (e->H > 1)
        print_per_step(e, per_step, out);
    if (shown_method(e, M_MODEL)) {
        StepSummary r = step_summary(e, M_MODEL);
        fprintf(out,
                "\nModel per horizon step (all KPIs pooled): MSE / naive's MSE at most %.3f "
                "(step %d), %d of %d steps above 1; cover80 %.3f-%.3f\n",
                r.worst, r.worst_step, r.losing, e->H, r.cover_min, r.cover_max);
        fprintf(out, "Steps losing to naive (MSE) per KPI:");
        for (int q = 0; q < e->K; q++)
            fprintf(out, "%s %s %d/%d", q ? "," : "", e->kname[q],
                    step_summary_kpi(e, M_MODEL, q).losing, e->H);
        fprintf(out, "\n");
    }
    if (shown_method(e, M_ADAPTIVE)) {
        StepSummary r = step_summary(e, M_ADAPTIVE);
        fprintf(out,
                "model_adaptive: the model's forecasts with online-calibrated intervals (rate "
                "%g); cover80 per step %.3f-%.3f\n",
                adapt_rate(e), r.cover_min, r.cover_max);
    }
    fprintf(out,
            "\nMASE scale: in-sample %s seasonal naive MAE before the test range. "
            "cover80: share of truths inside the model's P10-P90 interval.\n",
            e->D ? "one-day" : "one-step");
}
