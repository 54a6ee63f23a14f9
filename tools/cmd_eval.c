/*
 * cmd_eval.c — `cellcast eval`: rolling-origin evaluation of a model on held-out steps,
 * against baselines computed by the same code on the same windows.
 *
 * The series are streamed through the real engine (cc_engine_step, one cell per series,
 * all series batched per step), and at every origin t of the test range the forecast the
 * daemon would serve (cc_cell_forecast / cc_forecast_point) is scored against the truth
 * at t+1..t+H. Origins are the stride-1 windows whose H targets all lie in the test range:
 * t = test_begin-1 … test_end-1-H. Targets that were missing in the file are excluded.
 *
 * Baselines at origin t for target step t+1+k (values as the model sees them, imputed):
 *   naive        x_t
 *   snaive_1d    x_{t+1+k-m·D}, D = steps per day, m = ⌈(k+1)/D⌉ (the last day repeated)
 *   snaive_1w    the same with a week
 *   mean_W       mean of x_{t-W+1..t}, W = the model's norm window M (or --window)
 * MASE scale: in-sample MAE of the one-day seasonal naive over the rows before the test
 * range, per series and KPI (one step when S does not divide a day).
 *
 * The engine's forecast at t depends only on the last max(N·P+P, M) steps (spec), so each
 * series is streamed from R + 2P steps before its first origin (--full-history: from its
 * first row); the result is the same.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cc_data.h"
#include "cc_engine.h"
#include "cc_metrics.h"
#include "cc_model.h"
#include "cli.h"

enum { M_MODEL, M_NAIVE, M_SDAY, M_SWEEK, M_MEAN, N_METHODS };

typedef struct EvalOpts {
    const char *model_path, *data_path, *test_path, *split, *from, *protocol, *kpis;
    const char *features, *time_column, *time_format, *json_path;
    enum CcDataFormat format;
    int json, horizon, window, threads, per_step, full_history;
    int64_t step;
} EvalOpts;

typedef struct SeriesRun {
    CcCell *cell;
    CcRange test;
    int first_origin, last_origin; /* rows; first > last: none */
    int start_row;                 /* first row streamed */
    double *scale;                 /* (K) MASE scale per scored KPI */
    double *csum;                  /* (T+1, K) prefix sums of the scored KPIs (window mean) */
} SeriesRun;

static const char *method_names[N_METHODS] = {"model", "naive", "snaive_1d", "snaive_1w",
                                              "mean"};

static const char *const barcelona_targets[] = {"rnti_count", "rb_down", "rb_up", "down", "up"};

static void eval_usage(FILE *out)
{
    fprintf(out,
            "usage: cellcast eval [--model M.safetensors] --data D.csv [options]\n"
            "Rolling-origin evaluation on held-out steps: the engine's forecasts and the\n"
            "naive, seasonal-naive (1 day, 1 week) and window-mean baselines, scored on the\n"
            "same windows (MAE, RMSE, MSE, NRMSE, MASE, P10-P90 coverage per KPI and step).\n\n"
            "  --model FILE       model (without: baselines only)\n"
            "  --data FILE        CSV history (long ts,cell_id,<kpis> or wide <time>,<kpis>)\n"
            "  --test FILE        CSV that continues --data in time; its rows are the test range\n"
            "  --split SPEC       train/val/test split of each series: \"a,b\" fractions\n"
            "                     (default 0.7,0.1) or rows:A-B,C-D,E-F; test = third range\n"
            "  --from TIME        test range starts at TIME (unix s or ISO-8601), ends at the end\n"
            "  --horizon K        steps scored per origin (default: model horizon; ett 96;\n"
            "                     barcelona 1)\n"
            "  --kpis LIST        KPIs to score (default all; barcelona the 5 targets)\n"
            "  --protocol P       ett: ETTh1 standard protocol (rows 0-8640 train, test\n"
            "                     11520-14400, train-slice z-scoring, MSE/MAE standardised);\n"
            "                     barcelona: --data SITE.csv, --test SITE_test.csv (default),\n"
            "                     NRMSE in raw units averaged over rnti_count,rb_down,rb_up,\n"
            "                     down,up\n"
            "  --window W         window-mean baseline length (default model M, else 336)\n"
            "  --features LIST    data columns to load (default: the model's features)\n"
            "  --format F         long|wide|auto (default auto)\n"
            "  --time-column C    --time-format STRPTIME   --step S (data parsing)\n"
            "  --threads N        engine threads over series (default 1)\n"
            "  --per-step         print every horizon step (default: a selection)\n"
            "  --full-history     stream each series from its first row\n"
            "  --json             JSON on stdout instead of the table\n"
            "  --json-out FILE    also write the JSON to FILE\n");
}

/* ---------------------------------------------------------------------------------- */

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

static void fmt_num(char *buf, size_t n, double x)
{
    if (!isfinite(x))
        snprintf(buf, n, "%10s", "-");
    else if (fabs(x) >= 1e5 || (fabs(x) < 1e-3 && x != 0))
        snprintf(buf, n, "%10.3e", x);
    else
        snprintf(buf, n, "%10.4f", x);
}

static void print_row(const char *label, const char *method, const CcMetricValues *v)
{
    char a[6][32];
    fmt_num(a[0], sizeof a[0], v->mae);
    fmt_num(a[1], sizeof a[1], v->mse);
    fmt_num(a[2], sizeof a[2], v->rmse);
    fmt_num(a[3], sizeof a[3], v->nrmse);
    fmt_num(a[4], sizeof a[4], v->mase);
    fmt_num(a[5], sizeof a[5], v->coverage);
    printf("  %-14s %-10s %s %s %s %s %s %s %9lld\n", label, method, a[0], a[1], a[2], a[3],
           a[4], a[5], (long long)v->n);
}

static void print_header(const char *first)
{
    printf("  %-14s %-10s %10s %10s %10s %10s %10s %10s %9s\n", first, "method", "MAE", "MSE",
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

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---------------------------------------------------------------------------------- */

int cmd_eval(int argc, char **argv)
{
    enum { O_MODEL = 1, O_DATA, O_TEST, O_SPLIT, O_FROM, O_HORIZON, O_KPIS, O_PROTOCOL,
           O_WINDOW, O_FEATURES, O_FORMAT, O_TCOL, O_TFMT, O_STEP, O_THREADS, O_PERSTEP,
           O_FULL, O_JSON, O_JSON_OUT, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},
        {"data", required_argument, 0, O_DATA},
        {"test", required_argument, 0, O_TEST},
        {"split", required_argument, 0, O_SPLIT},
        {"from", required_argument, 0, O_FROM},
        {"horizon", required_argument, 0, O_HORIZON},
        {"kpis", required_argument, 0, O_KPIS},
        {"protocol", required_argument, 0, O_PROTOCOL},
        {"window", required_argument, 0, O_WINDOW},
        {"features", required_argument, 0, O_FEATURES},
        {"format", required_argument, 0, O_FORMAT},
        {"time-column", required_argument, 0, O_TCOL},
        {"time-format", required_argument, 0, O_TFMT},
        {"step", required_argument, 0, O_STEP},
        {"threads", required_argument, 0, O_THREADS},
        {"per-step", no_argument, 0, O_PERSTEP},
        {"full-history", no_argument, 0, O_FULL},
        {"json", no_argument, 0, O_JSON},
        {"json-out", required_argument, 0, O_JSON_OUT},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    EvalOpts o;
    memset(&o, 0, sizeof o);
    o.format = CC_DATA_AUTO;
    o.threads = 1;
    int c;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *e = NULL;
        long v = 0;
        if (c == O_HORIZON || c == O_WINDOW || c == O_THREADS || c == O_STEP) {
            errno = 0;
            v = strtol(optarg, &e, 10);
            if (e == optarg || *e || errno || v <= 0 || v > 100000000) {
                fprintf(stderr, "cellcast eval: bad positive integer '%s'\n", optarg);
                return 2;
            }
        }
        switch (c) {
        case O_MODEL: o.model_path = optarg; break;
        case O_DATA: o.data_path = optarg; break;
        case O_TEST: o.test_path = optarg; break;
        case O_SPLIT: o.split = optarg; break;
        case O_FROM: o.from = optarg; break;
        case O_HORIZON: o.horizon = (int)v; break;
        case O_KPIS: o.kpis = optarg; break;
        case O_PROTOCOL: o.protocol = optarg; break;
        case O_WINDOW: o.window = (int)v; break;
        case O_FEATURES: o.features = optarg; break;
        case O_FORMAT:
            if (!strcmp(optarg, "long"))
                o.format = CC_DATA_LONG;
            else if (!strcmp(optarg, "wide"))
                o.format = CC_DATA_WIDE;
            else if (!strcmp(optarg, "auto"))
                o.format = CC_DATA_AUTO;
            else {
                fprintf(stderr, "cellcast eval: --format must be long, wide or auto\n");
                return 2;
            }
            break;
        case O_TCOL: o.time_column = optarg; break;
        case O_TFMT: o.time_format = optarg; break;
        case O_STEP: o.step = v; break;
        case O_THREADS: o.threads = (int)v; break;
        case O_PERSTEP: o.per_step = 1; break;
        case O_FULL: o.full_history = 1; break;
        case O_JSON: o.json = 1; break;
        case O_JSON_OUT: o.json_path = optarg; break;
        case O_HELP: eval_usage(stdout); return 0;
        default: eval_usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cellcast eval: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!o.data_path) {
        fprintf(stderr, "cellcast eval: --data is required (see cellcast eval --help)\n");
        return 2;
    }
    int ett = 0, barca = 0;
    if (o.protocol) {
        if (!strcmp(o.protocol, "ett"))
            ett = 1;
        else if (!strcmp(o.protocol, "barcelona"))
            barca = 1;
        else {
            fprintf(stderr, "cellcast eval: --protocol must be ett or barcelona\n");
            return 2;
        }
    }
    if ((ett || barca) && (o.split || o.from)) {
        fprintf(stderr, "cellcast eval: --protocol fixes the split; drop --split/--from\n");
        return 2;
    }
    if (o.split && o.from) {
        fprintf(stderr, "cellcast eval: give --split or --from, not both\n");
        return 2;
    }

    int ret = 1;
    char err[1024];
    CcModel *model = NULL;
    CcEngine *engine = NULL;
    CcDataset *ds = NULL, *dtest = NULL;
    CcMetrics *met[N_METHODS] = {0};
    SeriesRun *runs = NULL;
    CcStepInput *inputs = NULL;
    int *status = NULL, *input_series = NULL;
    json_t *root = NULL;
    char testbuf[1024];
    int K = 0, kidx[CC_MAX_FEATURES];
    char kname[CC_MAX_FEATURES][CC_FEATURE_NAME_MAX];
    int64_t t_start = cc_now_ns(), engine_ns = 0;
    int64_t n_origins = 0, skipped_origins = 0, n_engine_steps = 0;
    double zmean[CC_MAX_FEATURES], zstd[CC_MAX_FEATURES];

    if (o.model_path) {
        if (cc_model_open_file(&model, o.model_path, err, sizeof err)) {
            fprintf(stderr, "cellcast eval: %s\n", err);
            goto done;
        }
    }

    /* ---- data ---- */
    CcDataSettings dset;
    cc_data_default_settings(&dset);
    dset.format = o.format;
    dset.time_column = o.time_column;
    dset.time_format = o.time_format;
    dset.step_seconds = o.step;
    char featlist[CC_MAX_FEATURES * CC_FEATURE_NAME_MAX];
    if (o.features) {
        dset.features = o.features;
    } else if (model) {
        size_t len = 0;
        featlist[0] = 0;
        for (int f = 0; f < model->hp.n_features; f++)
            len += (size_t)snprintf(featlist + len, sizeof featlist - len, "%s%s", f ? "," : "",
                                    model->hp.features[f]);
        dset.features = featlist;
    }
    if (!dset.step_seconds && model)
        dset.step_seconds = model->hp.step_seconds;
    CcDataReport rep, rep2;
    if (cc_data_open_file(&ds, o.data_path, &dset, &rep, err, sizeof err)) {
        fprintf(stderr, "cellcast eval: %s\n", err);
        goto done;
    }
    if (barca && !o.test_path) {
        size_t l = strlen(o.data_path);
        if (l > 4 && !strcmp(o.data_path + l - 4, ".csv"))
            snprintf(testbuf, sizeof testbuf, "%.*s_test.csv", (int)(l - 4), o.data_path);
        else
            snprintf(testbuf, sizeof testbuf, "%s_test", o.data_path);
        if (!file_exists(testbuf)) {
            fprintf(stderr, "cellcast eval: barcelona protocol: no test file %s (give --test)\n",
                    testbuf);
            goto done;
        }
        o.test_path = testbuf;
    }
    int join_row = -1;
    if (o.test_path) {
        if (cc_data_open_file(&dtest, o.test_path, &dset, &rep2, err, sizeof err)) {
            fprintf(stderr, "cellcast eval: %s\n", err);
            goto done;
        }
        if (cc_data_append(ds, dtest, dset.impute, &join_row, err, sizeof err)) {
            fprintf(stderr, "cellcast eval: %s\n", err);
            goto done;
        }
    }
    const int F = ds->n_features;
    const int64_t S = ds->step_seconds;
    if (model && S != model->hp.step_seconds) {
        fprintf(stderr, "cellcast eval: data step %lld s differs from the model's %lld s\n",
                (long long)S, (long long)model->hp.step_seconds);
        goto done;
    }

    /* ---- KPIs scored ---- */
    if (o.kpis) {
        K = parse_list(o.kpis, kname, CC_MAX_FEATURES);
    } else if (barca) {
        K = 5;
        for (int i = 0; i < 5; i++)
            snprintf(kname[i], CC_FEATURE_NAME_MAX, "%s", barcelona_targets[i]);
    } else {
        K = F;
        for (int f = 0; f < F; f++)
            memcpy(kname[f], ds->features[f], CC_FEATURE_NAME_MAX);
    }
    if (K <= 0) {
        fprintf(stderr, "cellcast eval: bad --kpis list\n");
        goto done;
    }
    for (int i = 0; i < K; i++) {
        kidx[i] = cc_data_feature_index(ds, kname[i]);
        if (kidx[i] < 0) {
            fprintf(stderr, "cellcast eval: KPI '%s' is not among the %s features\n", kname[i],
                    model ? "model's" : "data's");
            goto done;
        }
    }

    /* ---- horizon, window, split ---- */
    int H = o.horizon ? o.horizon : ett ? 96 : barca ? 1 : model ? model->hp.horizon : 24;
    if (model && H > model->hp.horizon) {
        fprintf(stderr, "cellcast eval: --horizon %d exceeds the model's horizon %d\n", H,
                model->hp.horizon);
        goto done;
    }
    int W = o.window ? o.window : model ? model->hp.norm_window : 336;
    int D = (86400 % S == 0) ? (int)(86400 / S) : 0;
    int R = 0, P = 0;
    if (model) {
        P = model->hp.patch_len;
        R = model->hp.n_patches * P + P;
        if (model->hp.norm_window > R)
            R = model->hp.norm_window;
    }
    runs = calloc((size_t)ds->n_series, sizeof *runs);
    if (!runs)
        goto oom;
    if (ett) {
        if (ds->n_series != 1 || ds->series[0].T < 14400) {
            fprintf(stderr, "cellcast eval: ett protocol needs one series of ≥ 14400 rows "
                            "(ETTh1.csv)\n");
            goto done;
        }
        CcRange tr = {0, 8640};
        cc_data_stats(ds, 0, tr, zmean, zstd);
        cc_data_standardize(ds, zmean, zstd);
    }
    double from_ts = 0;
    if (o.from && cc_data_parse_time(o.from, strlen(o.from), NULL, &from_ts)) {
        fprintf(stderr, "cellcast eval: cannot parse --from '%s'\n", o.from);
        goto done;
    }
    for (int s = 0; s < ds->n_series; s++) {
        CcSeries *se = &ds->series[s];
        SeriesRun *r = &runs[s];
        CcRange sp[3];
        if (ett) {
            r->test = (CcRange){11520, 14400};
        } else if (o.test_path) {
            /* rows after the join of this cell; other cells have no test range */
            int jr = -1;
            for (int j = 0; j < dtest->n_series; j++)
                if (!strcmp(dtest->series[j].cell_id, se->cell_id) ||
                    (dtest->n_series == 1 && ds->n_series == 1))
                    jr = (int)(dtest->series[j].p0 - se->p0);
            r->test = jr >= 0 ? (CcRange){jr, se->T} : (CcRange){se->T, se->T};
        } else if (o.from) {
            int64_t p = (int64_t)ceil(from_ts / (double)S);
            int64_t b = p - se->p0;
            b = b < 0 ? 0 : b > se->T ? se->T : b;
            r->test = (CcRange){(int)b, se->T};
        } else {
            if (cc_data_split(o.split, se->T, sp, err, sizeof err)) {
                fprintf(stderr, "cellcast eval: %s\n", err);
                goto done;
            }
            r->test = sp[2];
        }
        r->first_origin = r->test.begin - 1 > 0 ? r->test.begin - 1 : 0;
        r->last_origin = r->test.end - 1 - H;
        r->start_row = 0;
        if (model && !o.full_history) {
            int st = r->first_origin - R - 2 * P;
            r->start_row = st > 0 ? st : 0;
        }
        r->scale = calloc((size_t)K, sizeof *r->scale);
        r->csum = calloc(((size_t)se->T + 1) * K, sizeof *r->csum);
        if (!r->scale || !r->csum)
            goto oom;
        for (int i = 0; i < K; i++)
            r->scale[i] = cc_mase_scale(se->x, se->mask, F, kidx[i], 0, r->test.begin,
                                        D > 0 && D < r->test.begin ? D : 1);
        for (int i = 0; i < se->T; i++)
            for (int q = 0; q < K; q++)
                r->csum[(size_t)(i + 1) * K + q] =
                    r->csum[(size_t)i * K + q] + se->x[(size_t)i * F + kidx[q]];
    }

    for (int m = 0; m < N_METHODS; m++)
        if (cc_metrics_open(&met[m], K, H))
            goto oom;

    /* ---- engine ---- */
    if (model) {
        CcEngineSettings es;
        cc_engine_default_settings(&es);
        es.n_threads = o.threads;
        char eerr[256];
        if (cc_engine_open(&engine, model, &es, eerr, sizeof eerr)) {
            fprintf(stderr, "cellcast eval: cannot open the engine: %s\n", eerr);
            goto done;
        }
        for (int s = 0; s < ds->n_series; s++)
            if (cc_cell_open(&runs[s].cell, engine))
                goto oom;
    }
    inputs = calloc((size_t)ds->n_series, sizeof *inputs);
    status = calloc((size_t)ds->n_series, sizeof *status);
    input_series = calloc((size_t)ds->n_series, sizeof *input_series);
    if (!inputs || !status || !input_series)
        goto oom;

    /* ---- stream ---- */
    int64_t pmin = INT64_MAX, pmax = INT64_MIN;
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        if (runs[s].first_origin > runs[s].last_origin)
            continue;
        int64_t a = se->p0 + runs[s].start_row, b = se->p0 + runs[s].last_origin;
        pmin = a < pmin ? a : pmin;
        pmax = b > pmax ? b : pmax;
    }
    for (int64_t p = pmin; p <= pmax && pmin <= pmax; p++) {
        int n = 0;
        for (int s = 0; s < ds->n_series; s++) {
            const CcSeries *se = &ds->series[s];
            const SeriesRun *r = &runs[s];
            int64_t i = p - se->p0;
            if (r->first_origin > r->last_origin || i < r->start_row || i > r->last_origin)
                continue;
            input_series[n] = s;
            inputs[n].cell = r->cell;
            inputs[n].step = p;
            inputs[n].values = se->x + (size_t)i * F;
            n++;
        }
        if (n == 0)
            continue;
        if (engine) {
            int64_t t0 = cc_now_ns();
            int rc = cc_engine_step(engine, inputs, n, status);
            engine_ns += cc_now_ns() - t0;
            n_engine_steps += n;
            if (rc) {
                fprintf(stderr, "cellcast eval: engine step failed (%d)\n", rc);
                goto done;
            }
        }
        for (int j = 0; j < n; j++) {
            int s = input_series[j];
            const CcSeries *se = &ds->series[s];
            const SeriesRun *r = &runs[s];
            int i = (int)(p - se->p0);
            if (engine && status[j]) {
                fprintf(stderr, "cellcast eval: %s step %lld refused (%d)\n", se->cell_id,
                        (long long)p, status[j]);
                goto done;
            }
            if (i < r->first_origin)
                continue;
            CcForecast fc;
            if (engine) {
                cc_cell_forecast(r->cell, &fc);
                if (!fc.valid) {
                    skipped_origins++;
                    continue;
                }
            }
            n_origins++;
            int w0 = i - W + 1 > 0 ? i - W + 1 : 0;
            for (int q = 0; q < K; q++) {
                int f = kidx[q];
                double mean = (r->csum[(size_t)(i + 1) * K + q] - r->csum[(size_t)w0 * K + q]) /
                              (double)(i + 1 - w0);
                double last = se->x[(size_t)i * F + f];
                for (int k = 0; k < H; k++) {
                    int tj = i + 1 + k;
                    size_t ti = (size_t)tj * F + f;
                    double y = se->mask[ti] ? se->x[ti] : NAN;
                    double sc = r->scale[q];
                    if (engine) {
                        double mu, sd;
                        cc_forecast_point(&fc, f, k, &mu, &sd);
                        cc_metrics_add(met[M_MODEL], q, k, y, mu, sd, sc);
                    }
                    cc_metrics_add(met[M_NAIVE], q, k, y, last, NAN, sc);
                    if (D > 0) {
                        int mday = (k + 1 + D - 1) / D, mwk = (k + 1 + 7 * D - 1) / (7 * D);
                        int a = tj - mday * D, b = tj - mwk * 7 * D;
                        cc_metrics_add(met[M_SDAY], q, k, y,
                                       a >= 0 ? se->x[(size_t)a * F + f] : NAN, NAN, sc);
                        cc_metrics_add(met[M_SWEEK], q, k, y,
                                       b >= 0 ? se->x[(size_t)b * F + f] : NAN, NAN, sc);
                    }
                    cc_metrics_add(met[M_MEAN], q, k, y, mean, NAN, sc);
                }
            }
        }
    }
    double wall = (double)(cc_now_ns() - t_start) / 1e9;

    /* ---- report ---- */
    int m0 = engine ? M_MODEL : M_NAIVE;
    char mean_label[32];
    snprintf(mean_label, sizeof mean_label, "mean_%d", W);
    const char *mlabel[N_METHODS];
    for (int m = 0; m < N_METHODS; m++)
        mlabel[m] = m == M_MEAN ? mean_label : method_names[m];
    int64_t test_rows = 0;
    for (int s = 0; s < ds->n_series; s++)
        test_rows += runs[s].test.end - runs[s].test.begin;

    /* Barcelona summary: NRMSE averaged over the targets, per horizon step */
    double bar_nrmse[N_METHODS];
    for (int m = 0; m < N_METHODS; m++) {
        double acc = 0;
        int n = 0;
        for (int q = 0; q < K; q++) {
            CcMetricValues v;
            cc_metrics_get(met[m], q, 0, &v);
            if (isfinite(v.nrmse)) {
                acc += v.nrmse;
                n++;
            }
        }
        bar_nrmse[m] = n == K ? acc / n : NAN;
    }

    root = json_object();
    json_object_set_new(root, "model", o.model_path ? json_string(o.model_path) : json_null());
    if (model) {
        const CcHparams *hp = &model->hp;
        json_object_set_new(root, "model_hparams",
                            json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:s}", "patch_len",
                                      hp->patch_len, "n_patches", hp->n_patches, "norm_window",
                                      hp->norm_window, "d_model", hp->d_model, "n_layers",
                                      hp->n_layers, "d_ff", hp->d_ff, "horizon", hp->horizon,
                                      "n_features", hp->n_features, "trained_on",
                                      hp->trained_on, "created_at", hp->created_at));
    }
    json_object_set_new(root, "data", json_string(ds->source));
    json_object_set_new(root, "protocol", json_string(ett ? "ett" : barca ? "barcelona" : "rolling"));
    json_object_set_new(root, "step_seconds", json_integer(S));
    json_object_set_new(root, "horizon", json_integer(H));
    json_object_set_new(root, "window_mean", json_integer(W));
    json_object_set_new(root, "series", json_integer(ds->n_series));
    json_object_set_new(root, "test_rows", json_integer(test_rows));
    json_object_set_new(root, "origins", json_integer(n_origins));
    json_object_set_new(root, "skipped_origins", json_integer(skipped_origins));
    json_object_set_new(root, "rows_read", json_integer(rep.rows_read));
    json_object_set_new(root, "missing_steps_inserted", json_integer(rep.missing_steps));
    json_object_set_new(root, "wall_s", json_real(wall));
    json_object_set_new(root, "engine_s", json_real((double)engine_ns / 1e9));
    json_object_set_new(root, "engine_cell_steps", json_integer(n_engine_steps));
    json_t *kp = json_array();
    for (int q = 0; q < K; q++)
        json_array_append_new(kp, json_string(kname[q]));
    json_object_set_new(root, "kpis", kp);
    if (ds->n_series == 1) {
        json_object_set_new(root, "test_begin_row", json_integer(runs[0].test.begin));
        json_object_set_new(root, "test_end_row", json_integer(runs[0].test.end));
    }
    json_t *methods = json_object();
    for (int m = m0; m < N_METHODS; m++) {
        if ((m == M_SDAY || m == M_SWEEK) && D == 0)
            continue;
        json_t *jm = json_object();
        CcMetricValues v;
        cc_metrics_get(met[m], -1, -1, &v);
        json_object_set_new(jm, "overall", values_json(&v));
        json_t *pk = json_object(), *ps = json_array(), *pks = json_object();
        for (int q = 0; q < K; q++) {
            cc_metrics_get(met[m], q, -1, &v);
            json_object_set_new(pk, kname[q], values_json(&v));
            json_t *arr = json_array();
            for (int k = 0; k < H; k++) {
                cc_metrics_get(met[m], q, k, &v);
                json_array_append_new(arr, values_json(&v));
            }
            json_object_set_new(pks, kname[q], arr);
        }
        for (int k = 0; k < H; k++) {
            cc_metrics_get(met[m], -1, k, &v);
            json_array_append_new(ps, values_json(&v));
        }
        json_object_set_new(jm, "per_kpi", pk);
        json_object_set_new(jm, "per_step", ps);
        json_object_set_new(jm, "per_kpi_step", pks);
        if (barca)
            json_object_set_new(jm, "barcelona_nrmse_step1",
                                isfinite(bar_nrmse[m]) ? json_real(bar_nrmse[m]) : json_null());
        if (barca) {
            json_t *arr = json_array();
            for (int k = 0; k < H; k++) {
                double acc = 0;
                for (int q = 0; q < K; q++) {
                    cc_metrics_get(met[m], q, k, &v);
                    acc += v.nrmse;
                }
                json_array_append_new(arr, isfinite(acc) ? json_real(acc / K) : json_null());
            }
            json_object_set_new(jm, "barcelona_nrmse_per_step", arr);
        }
        json_object_set_new(methods, mlabel[m], jm);
    }
    json_object_set_new(root, "methods", methods);
    if (ett) {
        json_t *z = json_array();
        for (int f = 0; f < F; f++) {
            json_t *e = json_object();
            json_object_set_new(e, "feature", json_string(ds->features[f]));
            json_object_set_new(e, "mean", json_real(zmean[f]));
            json_object_set_new(e, "std", json_real(zstd[f]));
            json_array_append_new(z, e);
        }
        json_object_set_new(root, "zscore_train_rows_0_8640", z);
    }

    if (o.json_path && json_dump_file(root, o.json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(8))) {
        fprintf(stderr, "cellcast eval: cannot write %s\n", o.json_path);
        goto done;
    }
    if (o.json) {
        json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
        fputc('\n', stdout);
    } else {
        char buf[2048];
        cc_data_report_format(&rep, ds, buf, sizeof buf);
        printf("cellcast eval — %s%s\n", ett ? "ETTh1 standard protocol, " :
                                         barca ? "Barcelona protocol, " : "",
               model ? o.model_path : "baselines only (no --model)");
        printf("data: %s\n", buf);
        printf("series %d, test steps %lld, origins %lld (skipped, no forecast yet: %lld), "
               "horizon %d × %llds, window mean %d%s\n",
               ds->n_series, (long long)test_rows, (long long)n_origins,
               (long long)skipped_origins, H, (long long)S, W,
               ett ? ", values z-scored with the train slice" : "");
        if (ds->n_series == 1)
            printf("test rows [%d, %d), origins rows %d..%d\n", runs[0].test.begin,
                   runs[0].test.end, runs[0].first_origin, runs[0].last_origin);
        printf("wall %.2f s (engine %.2f s for %lld cell-steps)\n\n", wall,
               (double)engine_ns / 1e9, (long long)n_engine_steps);
        CcMetricValues v;
        printf("Overall (all KPIs, steps 1..%d)\n", H);
        print_header("");
        for (int m = m0; m < N_METHODS; m++) {
            if ((m == M_SDAY || m == M_SWEEK) && D == 0)
                continue;
            cc_metrics_get(met[m], -1, -1, &v);
            print_row("all", mlabel[m], &v);
        }
        if (barca) {
            printf("\nBarcelona: NRMSE averaged over %d targets, step 1 (2 min)\n", K);
            for (int m = m0; m < N_METHODS; m++)
                if (!((m == M_SDAY || m == M_SWEEK) && D == 0))
                    printf("  %-10s %.4f\n", mlabel[m], bar_nrmse[m]);
        }
        printf("\nPer KPI (steps 1..%d pooled)\n", H);
        print_header("kpi");
        for (int q = 0; q < K; q++) {
            for (int m = m0; m < N_METHODS; m++) {
                if ((m == M_SDAY || m == M_SWEEK) && D == 0)
                    continue;
                cc_metrics_get(met[m], q, -1, &v);
                print_row(kname[q], mlabel[m], &v);
            }
        }
        if (H > 1) {
            printf("\nPer horizon step (all KPIs pooled%s)\n",
                   barca ? "; last column group: mean NRMSE over targets" : "");
            print_header("step");
            for (int k = 0; k < H; k++) {
                if (!shown_step(k, H, o.per_step))
                    continue;
                char lab[64];
                int64_t secs = (int64_t)(k + 1) * S;
                if (secs < 3600)
                    snprintf(lab, sizeof lab, "%d (%lldm)", k + 1, (long long)(secs / 60));
                else if (secs % 3600 == 0)
                    snprintf(lab, sizeof lab, "%d (%lldh)", k + 1, (long long)(secs / 3600));
                else
                    snprintf(lab, sizeof lab, "%d (%.1fh)", k + 1, (double)secs / 3600.0);
                for (int m = m0; m < N_METHODS; m++) {
                    if ((m == M_SDAY || m == M_SWEEK) && D == 0)
                        continue;
                    cc_metrics_get(met[m], -1, k, &v);
                    if (barca) {
                        double acc = 0;
                        for (int q = 0; q < K; q++) {
                            CcMetricValues w;
                            cc_metrics_get(met[m], q, k, &w);
                            acc += w.nrmse;
                        }
                        v.nrmse = acc / K;
                    }
                    print_row(lab, mlabel[m], &v);
                }
            }
        }
        printf("\nMASE scale: in-sample %s seasonal naive MAE before the test range. "
               "cover80: share of truths inside the model's P10-P90 interval.\n",
               D ? "one-day" : "one-step");
    }
    ret = 0;
    goto done;
oom:
    fprintf(stderr, "cellcast eval: out of memory\n");
done:
    json_decref(root);
    if (runs) {
        for (int s = 0; ds && s < ds->n_series; s++) {
            cc_cell_close(&runs[s].cell);
            free(runs[s].scale);
            free(runs[s].csum);
        }
    }
    free(runs);
    free(inputs);
    free(status);
    free(input_series);
    for (int m = 0; m < N_METHODS; m++)
        cc_metrics_close(&met[m]);
    cc_engine_close(&engine);
    cc_model_close(&model);
    cc_data_close(&ds);
    cc_data_close(&dtest);
    return ret;
}
