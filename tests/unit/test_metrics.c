/*
 * test_metrics.c — lib/cc_metrics against hand-computed values, and the evaluation of
 * `cellcast eval` (tools/eval.c, from the cctools library) end to end on small CSVs: the baselines'
 * numbers by hand, the origin/window rule, the ETT z-scoring, and the model's numbers against an
 * independent computation with the direct-evaluation oracle cc_ref_forward.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cc_metrics.h"
#include "cc_model.h"
#include "cc_online_calib.h"
#include "cc_ref.h"
#include "eval.h"

#define NEAR(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol))

static void test_basic_values(void **state)
{
    (void)state;
    CcMetrics *m = NULL;
    assert_int_equal(cc_metrics_open(&m, 1, 1), 0);
    const double y[4] = {1, 2, 3, 4}, yh[4] = {1.5, 2, 2, 5};
    for (int i = 0; i < 4; i++)
        cc_metrics_add(m, 0, 0, y[i], yh[i], 0.5, 0.5);
    CcMetricValues v;
    cc_metrics_get(m, 0, 0, &v);
    /* errors 0.5, 0, 1, 1 */
    assert_int_equal(v.n, 4);
    NEAR(v.mae, 0.625, 1e-12);
    NEAR(v.mse, 0.5625, 1e-12);
    NEAR(v.rmse, 0.75, 1e-12);
    NEAR(v.mean_true, 2.5, 1e-12);
    NEAR(v.nrmse, 0.3, 1e-12);
    NEAR(v.mase, 1.25, 1e-12);    /* 0.625 / 0.5 */
    NEAR(v.coverage, 0.5, 1e-12); /* |e| ≤ 1.2815516·0.5 = 0.64: 0.5 and 0 inside */
    assert_int_equal(v.n_cov, 4);
    cc_metrics_close(&m);
    assert_null(m);
}

static void test_nan_and_missing_parts(void **state)
{
    (void)state;
    CcMetrics *m = NULL;
    assert_int_equal(cc_metrics_open(&m, 2, 3), 0);
    cc_metrics_add(m, 0, 0, NAN, 1.0, NAN, 1.0);      /* missing truth: skipped */
    cc_metrics_add(m, 0, 0, 2.0, INFINITY, NAN, 1.0); /* broken forecast: skipped */
    cc_metrics_add(m, 0, 0, 2.0, 1.0, NAN, NAN);      /* no sd, no scale */
    cc_metrics_add(m, 5, 0, 2.0, 1.0, NAN, 1.0);      /* out of range: ignored */
    cc_metrics_add(m, 0, 3, 2.0, 1.0, NAN, 1.0);
    CcMetricValues v;
    cc_metrics_get(m, 0, 0, &v);
    assert_int_equal(v.n, 1);
    assert_int_equal(v.skipped, 2);
    NEAR(v.mae, 1.0, 0);
    assert_true(isnan(v.mase));
    assert_true(isnan(v.coverage));
    cc_metrics_get(m, 1, 2, &v); /* empty */
    assert_int_equal(v.n, 0);
    assert_true(isnan(v.mae) && isnan(v.rmse) && isnan(v.nrmse));
    /* zero mean → NRMSE undefined */
    cc_metrics_add(m, 1, 1, 1.0, 0.0, NAN, NAN);
    cc_metrics_add(m, 1, 1, -1.0, 0.0, NAN, NAN);
    cc_metrics_get(m, 1, 1, &v);
    NEAR(v.rmse, 1.0, 1e-12);
    assert_true(isnan(v.nrmse));
    cc_metrics_close(&m);
    assert_int_equal(cc_metrics_open(&m, 0, 1), -EINVAL);
}

static void test_pooling_and_merge(void **state)
{
    (void)state;
    CcMetrics *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(cc_metrics_open(&a, 2, 2), 0);
    assert_int_equal(cc_metrics_open(&b, 2, 2), 0);
    assert_int_equal(cc_metrics_open(&c, 3, 2), 0);
    /* f0 k0: error 1 (y 10); f0 k1: error 2 (y 10); f1 k0: error 3 (y 20); f1 k1: 4, 4 */
    cc_metrics_add(a, 0, 0, 10, 9, NAN, 2);
    cc_metrics_add(a, 0, 1, 10, 12, NAN, 2);
    cc_metrics_add(b, 1, 0, 20, 17, NAN, 1);
    cc_metrics_add(b, 1, 1, 20, 24, NAN, 1);
    cc_metrics_add(b, 1, 1, 20, 16, NAN, 1);
    assert_int_equal(cc_metrics_merge(a, b), 0);
    assert_int_equal(cc_metrics_merge(a, c), -EINVAL);
    CcMetricValues v;
    cc_metrics_get(a, -1, -1, &v);
    assert_int_equal(v.n, 5);
    NEAR(v.mae, (1 + 2 + 3 + 4 + 4) / 5.0, 1e-12);
    NEAR(v.mse, (1 + 4 + 9 + 16 + 16) / 5.0, 1e-12);
    NEAR(v.mean_true, 80 / 5.0, 1e-12);
    NEAR(v.nrmse, sqrt(46 / 5.0) / 16.0, 1e-12);
    NEAR(v.mase, (0.5 + 1 + 3 + 4 + 4) / 5.0, 1e-12);
    cc_metrics_get(a, 0, -1, &v); /* KPI 0, all steps */
    assert_int_equal(v.n, 2);
    NEAR(v.mae, 1.5, 1e-12);
    cc_metrics_get(a, -1, 1, &v); /* step 1, all KPIs */
    assert_int_equal(v.n, 3);
    NEAR(v.mse, (4 + 16 + 16) / 3.0, 1e-12);
    cc_metrics_reset(a);
    cc_metrics_get(a, -1, -1, &v);
    assert_int_equal(v.n, 0);
    cc_metrics_close(&a);
    cc_metrics_close(&b);
    cc_metrics_close(&c);
}

static void test_mase_scale(void **state)
{
    (void)state;
    const float x[5] = {1, 3, 2, 5, 4};
    NEAR(cc_mase_scale(x, NULL, 1, 0, 0, 5, 1), 7.0 / 4, 1e-12);
    NEAR(cc_mase_scale(x, NULL, 1, 0, 0, 5, 2), 5.0 / 3, 1e-12);
    NEAR(cc_mase_scale(x, NULL, 1, 0, 1, 4, 1), 4.0 / 2, 1e-12); /* rows 1..3 */
    const uint8_t mask[5] = {1, 1, 1, 0, 1};
    NEAR(cc_mase_scale(x, mask, 1, 0, 0, 5, 1), 3.0 / 2, 1e-12);
    assert_true(isnan(cc_mase_scale(x, NULL, 1, 0, 0, 5, 5)));
    /* strided column */
    const float x2[6] = {0, 1, 0, 4, 0, 9};
    NEAR(cc_mase_scale(x2, NULL, 2, 1, 0, 3, 1), (3 + 5) / 2.0, 1e-12);
}

/* ---------------------------------------------------------------------------------- */
/* cellcast eval end to end                                                            */

static char tmpdir[256];

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cc_test_metrics_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs the evaluation; its JSON (NULL when it failed: *rc is its error). */
static json_t *run_eval(const CctEvalSettings *s, int *rc)
{
    CctEval *e = NULL;
    char err[1024];
    *rc = cct_eval_open(&e, s, err, sizeof err);
    if (*rc) {
        print_message("eval: %s\n", err);
        return NULL;
    }
    json_t *root = cct_eval_json(e);
    cct_eval_close(&e);
    assert_non_null(root);
    return root;
}

static double jnum(json_t *root, const char *method, const char *kpi, int step, const char *key)
{
    json_t *m = json_object_get(json_object_get(root, "methods"), method);
    json_t *o;
    if (!kpi)
        o = json_object_get(m, "overall");
    else if (step < 0)
        o = json_object_get(json_object_get(m, "per_kpi"), kpi);
    else
        o = json_array_get(json_object_get(json_object_get(m, "per_kpi_step"), kpi), (size_t)step);
    json_t *v = json_object_get(o, key);
    assert_non_null(v);
    return json_is_null(v) ? NAN : json_number_value(v);
}

/* Series of 2 features, hourly, 60 rows: a = i, b = 100 + (i % 24) (exactly daily). The
 * test range is the last 10 rows; horizon 2. By hand:
 *   origins t = 49 … 57 (9 windows), targets t+1, t+2;
 *   naive on a: errors 1 (step 1) and 2 (step 2); on b: |b_{t+k+1} - b_t|;
 *   snaive_1d on b: exact (0); on a: 24; window mean of a over 4 rows: t - 1.5 → error
 *   2.5 (step 1), 3.5 (step 2). */
static void write_series(const char *path, int with_nan)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "time,a,b\r\n");
    for (int i = 0; i < 60; i++) {
        if (with_nan && i == 55)
            fprintf(f, "%d,,%d\r\n", 3600 * (1000 + i), 100 + i % 24);
        else
            fprintf(f, "%d,%d,%d\r\n", 3600 * (1000 + i), i, 100 + i % 24);
    }
    fclose(f);
}

/* Settings scoring rows 50-60 of csv, horizon 2. */
static void rows_50_60(CctEvalSettings *s, const char *csv)
{
    cct_eval_default_settings(s);
    s->data_path = csv;
    s->split = "rows:0-40,40-50,50-60";
    s->horizon = 2;
}

static void test_eval_baselines(void **state)
{
    (void)state;
    char csv[512];
    int rc;
    snprintf(csv, sizeof csv, "%s/s.csv", tmpdir);
    write_series(csv, 0);
    CctEvalSettings s;
    rows_50_60(&s, csv);
    s.window = 4;
    json_t *root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(json_integer_value(json_object_get(root, "origins")), 9);
    NEAR(jnum(root, "naive", "a", 0, "mae"), 1.0, 1e-9);
    NEAR(jnum(root, "naive", "a", 1, "mae"), 2.0, 1e-9);
    NEAR(jnum(root, "naive", "a", 1, "mse"), 4.0, 1e-9);
    NEAR(jnum(root, "snaive_1d", "b", -1, "mae"), 0.0, 1e-9);
    NEAR(jnum(root, "snaive_1d", "a", -1, "mae"), 24.0, 1e-9);
    NEAR(jnum(root, "mean_4", "a", 0, "mae"), 2.5, 1e-9);
    NEAR(jnum(root, "mean_4", "a", 1, "mae"), 3.5, 1e-9);
    /* naive on b, by hand over the same windows */
    double sum = 0;
    for (int t = 49; t <= 57; t++)
        sum += fabs((double)((t + 1) % 24) - (double)(t % 24));
    NEAR(jnum(root, "naive", "b", 0, "mae"), sum / 9, 1e-9);
    /* NRMSE of naive on a at step 1: RMSE 1 / mean of a over targets 50..58 = 54 */
    NEAR(jnum(root, "naive", "a", 0, "nrmse"), 1.0 / 54.0, 1e-9);
    /* MASE: in-sample one-day seasonal naive MAE of a before row 50 is 24 → naive step 2: 2/24 */
    NEAR(jnum(root, "naive", "a", 1, "mase"), 2.0 / 24.0, 1e-9);
    /* week seasonal naive has no history this short: nothing scored */
    NEAR(jnum(root, "snaive_1w", NULL, -1, "n"), 0, 0);
    json_decref(root);

    /* a missing truth (row 55 of a) is excluded: step-1 pairs lose one */
    write_series(csv, 1);
    root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    NEAR(jnum(root, "naive", "a", 0, "n"), 8, 0);
    NEAR(jnum(root, "naive", "b", 0, "n"), 9, 0);
    json_decref(root);

    /* bad settings */
    s.kpis = "zz";
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
    s.kpis = ",a";
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
    s.kpis = NULL;
    s.data_path = NULL;
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
}

/* A `;` file of 256 KPIs (more than a model takes; decimal commas) and a row-indexed file:
 * the baselines work on every column, and an empty seasonal baseline is named. Values:
 * k_j at row i = i + j/4 (naive error 1 per step, one-day seasonal naive 24). */
static void test_eval_wide_and_index(void **state)
{
    (void)state;
    char csv[512], idx[512];
    int rc;
    snprintf(csv, sizeof csv, "%s/wide.csv", tmpdir);
    FILE *f = fopen(csv, "w");
    assert_non_null(f);
    fprintf(f, "time");
    for (int j = 0; j < 256; j++)
        fprintf(f, ";k%d", j);
    for (int i = 0; i < 60; i++) {
        fprintf(f, "\n%d", 3600 * (1000 + i));
        for (int j = 0; j < 256; j++)
            fprintf(f, ";%d,%02d", i + j / 4, 25 * (j % 4));
    }
    fprintf(f, "\n");
    fclose(f);
    CctEvalSettings s;
    rows_50_60(&s, csv);
    json_t *root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(json_array_size(json_object_get(root, "kpis")), 256);
    NEAR(jnum(root, "naive", "k255", 0, "mae"), 1.0, 1e-6);
    NEAR(jnum(root, "naive", "k0", 1, "mae"), 2.0, 1e-6);
    NEAR(jnum(root, "snaive_1d", "k129", -1, "mae"), 24.0, 1e-6);
    NEAR(jnum(root, "naive", NULL, -1, "n"), 9 * 2 * 256, 0);
    /* the week has no history this short: said so, the day not */
    const char *w = json_string_value(json_object_get(root, "warnings"));
    assert_non_null(w);
    assert_non_null(strstr(w, "snaive_1w is empty: a week is 168 steps of 3600s"));
    assert_null(strstr(w, "snaive_1d"));
    assert_null(strstr(w, "row index")); /* an hourly step is plausible */
    json_decref(root);

    /* the same 60 rows of a row-indexed file: needs the step, then scores as hourly */
    snprintf(idx, sizeof idx, "%s/idx.csv", tmpdir);
    f = fopen(idx, "w");
    assert_non_null(f);
    fprintf(f, "t,a\n");
    for (int i = 0; i < 60; i++)
        fprintf(f, "%d,%d\n", i, i);
    fclose(f);
    s.data_path = idx;
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
    s.step = 3600;
    root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    NEAR(jnum(root, "snaive_1d", "a", -1, "mae"), 24.0, 1e-9);
    assert_int_equal(json_integer_value(json_object_get(root, "step_seconds")), 3600);
    json_decref(root);
    /* read as unix seconds (the old rule): the seasonal baselines are empty, and said so */
    s.step = 0;
    s.data.time_index = CC_TIME_INDEX_NO;
    root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    NEAR(jnum(root, "snaive_1d", NULL, -1, "n"), 0, 0);
    w = json_string_value(json_object_get(root, "warnings"));
    assert_non_null(w);
    assert_non_null(strstr(w, "snaive_1d is empty: a day is 86400 steps of 1s"));
    assert_non_null(strstr(w, "--time-index yes --step S"));
    json_decref(root);
    /* the CSV options reach the loader: a forced wrong delimiter is refused */
    s.data.time_index = CC_TIME_INDEX_AUTO;
    s.data_path = csv;
    s.data.delimiter = ',';
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
}

/* The model column of eval equals forecasts computed independently by cc_ref_forward. */
static void test_eval_model_vs_oracle(void **state)
{
    (void)state;
    CcHparams hp;
    cc_hparams_default(&hp);
    hp.n_features = 2;
    snprintf(hp.features[0], CC_FEATURE_NAME_MAX, "a");
    snprintf(hp.features[1], CC_FEATURE_NAME_MAX, "b");
    hp.patch_len = 4;
    hp.n_patches = 3;
    hp.norm_window = 12;
    hp.d_model = 16;
    hp.n_heads = 2;
    hp.n_layers = 1;
    hp.d_ff = 32;
    hp.horizon = 3;
    hp.step_seconds = 3600;
    CcModel *m = NULL;
    char err[256];
    assert_int_equal(cc_model_open(&m, &hp, err, sizeof err), 0);
    cc_model_init_random(m, 11);
    char mpath[512], csv[512];
    snprintf(mpath, sizeof mpath, "%s/m.safetensors", tmpdir);
    snprintf(csv, sizeof csv, "%s/o.csv", tmpdir);
    assert_int_equal(cc_model_save(m, mpath, err, sizeof err), 0);

    enum { T = 120 };
    float x[2][T];
    FILE *f = fopen(csv, "w");
    assert_non_null(f);
    fprintf(f, "ts,a,b\n");
    for (int i = 0; i < T; i++) {
        x[0][i] = (float)(10 + 5 * sin(i * 0.3) + 0.01 * i * i);
        x[1][i] = (float)(3 * cos(i * 0.11) + (i % 7));
        fprintf(f, "%lld,%.9g,%.9g\n", (long long)(3600LL * (500000 + i)), x[0][i], x[1][i]);
    }
    fclose(f);
    /* read back as floats the loader will see */
    CctEvalSettings s;
    cct_eval_default_settings(&s);
    s.model_path = mpath;
    s.data_path = csv;
    s.split = "0.75,0.0";
    int rc;
    json_t *root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    /* independent: test rows [90, 120), origins 89..116, horizon 3 */
    const int64_t p0 = 500000;
    double sae[2] = {0, 0}, ssq = 0, msq[3] = {0}, nsq[3] = {0}; /* per step: model, naive */
    int n = 0, cov_in = 0, cov_k[3] = {0};
    float y[6], mu, sg;
    for (int t = 89; t <= 116; t++)
        for (int fi = 0; fi < 2; fi++) {
            int rc = cc_ref_forward(m, fi, x[fi], p0, p0 + t, y, &mu, &sg, NULL);
            assert_int_equal(rc, 0);
            for (int k = 0; k < 3; k++) {
                double mean = (double)y[2 * k] * sg + mu, sd = exp((double)y[2 * k + 1]) * sg;
                double e = x[fi][t + 1 + k] - mean;
                sae[fi] += fabs(e);
                ssq += e * e;
                cov_in += fabs(e) <= 1.2815516 * sd;
                n++;
                msq[k] += e * e, cov_k[k] += fabs(e) <= 1.2815516 * sd;
                nsq[k] += (double)(x[fi][t + 1 + k] - x[fi][t]) * (x[fi][t + 1 + k] - x[fi][t]);
            }
        }
    assert_int_equal(json_integer_value(json_object_get(root, "origins")), 28);
    double mae_a = jnum(root, "model", "a", -1, "mae"), mae_b = jnum(root, "model", "b", -1, "mae");
    print_message("model MAE a %.6f (oracle %.6f), b %.6f (oracle %.6f)\n", mae_a, sae[0] / (n / 2),
                  mae_b, sae[1] / (n / 2));
    NEAR(mae_a, sae[0] / (n / 2), 1e-4 * (1 + fabs(mae_a)));
    NEAR(mae_b, sae[1] / (n / 2), 1e-4 * (1 + fabs(mae_b)));
    NEAR(jnum(root, "model", NULL, -1, "mse"), ssq / n, 1e-4 * (1 + ssq / n));
    NEAR(jnum(root, "model", NULL, -1, "coverage80"), (double)cov_in / n, 1.5 / n);
    /* the per-step summary: the worst model/naive MSE ratio, its step, the coverage range */
    double worst = -1, cmin = 1, cmax = 0;
    int wk = 0, losing = 0;
    for (int k = 0; k < 3; k++) {
        double q = msq[k] / nsq[k], c = cov_k[k] / (n / 3.0);
        worst = q > worst ? (wk = k + 1, q) : worst;
        losing += q > 1;
        cmin = fmin(cmin, c), cmax = fmax(cmax, c);
    }
    json_t *ps = json_object_get(root, "model_per_step");
    print_message("worst step %d: model/naive MSE %.4f (eval %.4f); cover80 %.3f-%.3f\n", wk, worst,
                  json_number_value(json_object_get(ps, "worst_naive_mse_ratio")), cmin, cmax);
    NEAR(json_number_value(json_object_get(ps, "worst_naive_mse_ratio")), worst, 1e-3 * worst);
    assert_int_equal(json_integer_value(json_object_get(ps, "worst_step")), wk);
    assert_int_equal(json_integer_value(json_object_get(ps, "steps_losing_to_naive")), losing);
    NEAR(json_number_value(json_object_get(ps, "cover80_step_min")), cmin, 1.5 / n);
    NEAR(json_number_value(json_object_get(ps, "cover80_step_max")), cmax, 1.5 / n);
    json_decref(root);

    /* --full-history streams from row 0: same numbers */
    s.full_history = 1;
    root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    NEAR(jnum(root, "model", "a", -1, "mae"), mae_a, 1e-6 * (1 + mae_a));
    json_decref(root);

    /* --adapt: the same forecasts with the interval of online calibration, replayed here
     * from the oracle's forecasts: at each origin t the truths of row t are observed, the
     * forecast of t pushed, and its interval served at the scale that follows */
    s.full_history = 0;
    s.adapt = 1;
    s.adapt_rate = 0.3; /* fast, so that 28 origins move the scale */
    root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    CcOnlineCalibSettings os;
    cc_online_calib_default_settings(&os);
    os.rate = s.adapt_rate;
    CcOnlineCalib *oc;
    assert_int_equal(cc_online_calib_open(&oc, &os, 2, 3), 0);
    int adapt_in = 0;
    for (int t = 89; t <= 116; t++) {
        float truth[2] = {x[0][t], x[1][t]}, mean[6], sd[6];
        cc_online_calib_observe(oc, t, truth);
        for (int fi = 0; fi < 2; fi++) {
            assert_int_equal(cc_ref_forward(m, fi, x[fi], p0, p0 + t, y, &mu, &sg, NULL), 0);
            for (int k = 0; k < 3; k++) {
                mean[fi * 3 + k] = (float)((double)y[2 * k] * sg + mu);
                sd[fi * 3 + k] = (float)(exp((double)y[2 * k + 1]) * sg);
            }
        }
        assert_int_equal(cc_online_calib_push(oc, t, mean, sd), 0);
        for (int fi = 0; fi < 2; fi++)
            for (int k = 0; k < 3; k++)
                adapt_in += fabs(x[fi][t + 1 + k] - mean[fi * 3 + k]) <=
                            CC_Z80 * sd[fi * 3 + k] * cc_online_calib_scale(oc, fi, k);
    }
    cc_online_calib_close(&oc);
    print_message("cover80 static %d/%d, online %d/%d\n", cov_in, n, adapt_in, n);
    assert_true(adapt_in != cov_in); /* the scale moved something the static count has */
    NEAR(jnum(root, "model_adaptive", NULL, -1, "coverage80"), (double)adapt_in / n, 1.5 / n);
    NEAR(jnum(root, "model_adaptive", NULL, -1, "mse"), ssq / n, 1e-4 * (1 + ssq / n));
    NEAR(json_number_value(json_object_get(root, "adapt_rate")), 0.3, 1e-12);
    json_decref(root);
    s.adapt = 0;

    /* a horizon beyond the model's is refused */
    s.horizon = 4;
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
    /* so are features other than the model's (the engine reads rows in its order) */
    s.horizon = 0;
    s.features = "b,a";
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
    s.features = "a";
    assert_null(run_eval(&s, &rc));
    assert_int_equal(rc, -EINVAL);
    cc_model_close(&m);
}

/* ETT protocol on a fake ETTh1-shaped file: windows and z-scoring. */
static void test_eval_ett_protocol(void **state)
{
    (void)state;
    char csv[512];
    snprintf(csv, sizeof csv, "%s/ett.csv", tmpdir);
    FILE *f = fopen(csv, "w");
    assert_non_null(f);
    /* A: i (train mean 4319.5, population std sqrt((8640²-1)/12)); B: 0,2,0,2… (mean 1, std 1) */
    fprintf(f, "date,A,B\n");
    for (int i = 0; i < 14500; i++)
        fprintf(f, "%lld,%d,%d\n", 1467331200LL + 3600LL * i, i, (i % 2) * 2);
    fclose(f);
    CctEvalSettings s;
    cct_eval_default_settings(&s);
    s.data_path = csv;
    s.protocol = CCT_EVAL_ETT;
    s.horizon = 4;
    int rc;
    json_t *root = run_eval(&s, &rc);
    assert_int_equal(rc, 0);
    /* windows: origins 11519 … 14399-4 */
    assert_int_equal(json_integer_value(json_object_get(root, "origins")), 2880 - 4 + 1);
    double sd = sqrt((8640.0 * 8640.0 - 1) / 12.0);
    /* naive on standardised A at step k: (k+1)/sd; on B: |alternation| = 2 at odd steps */
    NEAR(jnum(root, "naive", "A", 0, "mae"), 1.0 / sd, 1e-6);
    NEAR(jnum(root, "naive", "A", 3, "mae"), 4.0 / sd, 1e-6);
    NEAR(jnum(root, "naive", "B", 0, "mae"), 2.0, 1e-6);
    NEAR(jnum(root, "naive", "B", 1, "mae"), 0.0, 1e-6);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_values),      cmocka_unit_test(test_nan_and_missing_parts),
        cmocka_unit_test(test_pooling_and_merge), cmocka_unit_test(test_mase_scale),
        cmocka_unit_test(test_eval_baselines),    cmocka_unit_test(test_eval_model_vs_oracle),
        cmocka_unit_test(test_eval_ett_protocol), cmocka_unit_test(test_eval_wide_and_index),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
