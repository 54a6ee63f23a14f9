/*
 * test_linear_baseline.c — the `linear` method of `cellcast eval` (tools/linear_baseline.c
 * on lib/cc_ridge): it recovers a process that is exactly linear in its window, it is no
 * better than naive on a random walk (nor much worse), a constant KPI gets a finite
 * forecast, and short fit rows cut the window or skip the method with a message; through
 * tools/eval.c, the skip is a warning and the method's row is left out.
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

#include "cc_data.h"
#include "eval.h"
#include "linear_baseline.h"
#include "testlib.h"

#define TWO_PI 6.283185307179586

/* One value of KPI j of cell c at row t (NaN: an empty field). */
typedef double (*ValueFn)(int c, int t, int j, void *arg);

/* A long CSV "ts,cell_id,a,b" of n_cells hourly series of T rows; the caller frees it. */
static char *make_csv(int n_cells, int T, ValueFn fn, void *arg, size_t *len)
{
    size_t cap = 64 + (size_t)n_cells * T * 80, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    n += (size_t)snprintf(buf + n, cap - n, "ts,cell_id,a,b\n");
    for (int c = 0; c < n_cells; c++)
        for (int t = 0; t < T; t++) {
            n += (size_t)snprintf(buf + n, cap - n, "%d,cell%d", 1700000000 + 3600 * t, c);
            for (int j = 0; j < 2; j++) {
                double v = fn(c, t, j, arg);
                n += (size_t)(isnan(v) ? snprintf(buf + n, cap - n, ",")
                                       : snprintf(buf + n, cap - n, ",%.9g", v));
            }
            n += (size_t)snprintf(buf + n, cap - n, "\n");
        }
    *len = n;
    return buf;
}

static CcDataset *load(int n_cells, int T, ValueFn fn, void *arg)
{
    size_t len;
    char *csv = make_csv(n_cells, T, fn, arg, &len), err[256];
    CcDataSettings ds_set;
    cc_data_default_settings(&ds_set);
    CcDataset *ds = NULL;
    int rc = cc_data_open_buffer(&ds, csv, len, "test", &ds_set, NULL, err, sizeof err);
    if (rc)
        print_message("load: %s\n", err);
    assert_int_equal(rc, 0);
    free(csv);
    return ds;
}

/* a: two sines of periods 24 and 16 (both divide L = 48) around 10, phase per cell; b: 5 */
static double sines(int c, int t, int j, void *arg)
{
    (void)arg;
    return j ? 5.0 : 10 + sin(TWO_PI * t / 24 + c) + 0.5 * sin(TWO_PI * t / 16 + 2 * c);
}

static void test_recovers_linear_process(void **state)
{
    (void)state;
    enum { T = 600, FIT = 480, H = 24, L = 48 };
    CcDataset *ds = load(2, T, sines, NULL);
    const CcRange fit[2] = {{0, FIT}, {0, FIT}};
    const int kidx[2] = {0, 1};
    CctLinearSettings ls;
    cct_linear_default_settings(&ls);
    ls.window = L, ls.horizon = H, ls.lambda = 1e-9;
    CctLinear *lb = NULL;
    char msg[256];
    assert_int_equal(cct_linear_open(&lb, ds, fit, kidx, 2, &ls, msg, sizeof msg), 0);
    assert_string_equal(msg, "");
    assert_int_equal(cct_linear_window(lb), L);
    /* after the fit rows, every step of every origin: the error is the floats' rounding
     * (the CSV's 9 digits, the loader's float), naive's is the sines' swing */
    double worst[H] = {0}, naive[H] = {0}, out[H];
    int n = 0;
    for (int c = 0; c < 2; c++) {
        const CcSeries *se = &ds->series[c];
        for (int t = FIT - 1; t + H < T; t++, n += c == 0) {
            cct_linear_forecast(lb, se, 0, t, out);
            for (int k = 0; k < H; k++) {
                double y = se->x[(size_t)(t + 1 + k) * 2];
                worst[k] = fmax(worst[k], fabs(out[k] - y));
                naive[k] += fabs(se->x[(size_t)t * 2] - y);
            }
            cct_linear_forecast(lb, se, 1, t, out);
            for (int k = 0; k < H; k++)
                assert_true(fabs(out[k] - 5.0) < 1e-9); /* constant b: finite, exact */
        }
    }
    for (int k = 0; k < H; k++) {
        assert_true(worst[k] < 1e-4);
        assert_true(naive[k] / (2.0 * n) > 0.1);
    }
    cct_linear_close(&lb);
    cc_data_close(&ds);
}

/* a: a Gaussian random walk (Box-Muller on the tests' LCG); b: constant 3 */
static double walk(int c, int t, int j, void *arg)
{
    double *w = arg;
    (void)c;
    return j ? 3.0 : w[t];
}

static void test_random_walk_is_naive(void **state)
{
    (void)state;
    enum { T = 4000, FIT = 3000, H = 8 };
    static double w[T];
    uint64_t rng = 12;
    w[0] = 100;
    for (int t = 1; t < T; t++) {
        double u1 = tl_rng_uniform(&rng), u2 = tl_rng_uniform(&rng);
        w[t] = w[t - 1] + sqrt(-2 * log(1 - u1)) * cos(TWO_PI * u2);
    }
    CcDataset *ds = load(1, T, walk, w);
    const CcRange fit = {0, FIT};
    const int kidx[2] = {0, 1};
    CctLinearSettings ls;
    cct_linear_default_settings(&ls); /* lambda 1e-3, eval's default */
    ls.horizon = H, ls.window = 48;
    CctLinear *lb = NULL;
    char msg[256];
    assert_int_equal(cct_linear_open(&lb, ds, &fit, kidx, 2, &ls, msg, sizeof msg), 0);
    assert_int_equal(cct_linear_window(lb), 48);
    double lam = cct_linear_lambda(lb, 0); /* chosen on the tail, from the grid */
    assert_true(lam >= 1e-4 && lam <= 1);
    double se_lin = 0, se_naive = 0, out[H];
    const CcSeries *se = &ds->series[0];
    for (int t = FIT - 1; t + H < T; t++) {
        cct_linear_forecast(lb, se, 0, t, out);
        for (int k = 0; k < H; k++) {
            double y = se->x[(size_t)(t + 1 + k) * 2], e = out[k] - y, en = se->x[t * 2] - y;
            se_lin += e * e, se_naive += en * en;
        }
        cct_linear_forecast(lb, se, 1, t, out);
        for (int k = 0; k < H; k++)
            assert_true(isfinite(out[k]) && fabs(out[k] - 3.0) < 1e-9);
    }
    /* the best linear forecast of a random walk is its last value: the fit's noise costs
     * about weights / origins (47 / 2950), it cannot gain */
    double ratio = se_lin / se_naive;
    print_message("random walk: linear MSE / naive MSE = %.4f\n", ratio);
    assert_true(ratio > 0.98 && ratio < 1.05);
    cct_linear_close(&lb);
    cc_data_close(&ds);
}

/* a: sines; b: missing (empty) in rows < 150 */
static double late_b(int c, int t, int j, void *arg)
{
    (void)arg;
    return j && t < 150 ? NAN : sines(c, t, j, NULL);
}

static void test_short_rows_cut_or_skip(void **state)
{
    (void)state;
    CcDataset *ds = load(1, 200, late_b, NULL);
    const int kidx[2] = {0, 1};
    CctLinearSettings ls;
    cct_linear_default_settings(&ls);
    ls.horizon = 8;
    CctLinear *lb = NULL;
    char msg[256];
    /* 20 rows, H 8: L origins 13 − L ≥ 2·L up to L = 4 */
    CcRange fit = {0, 20};
    assert_int_equal(cct_linear_open(&lb, ds, &fit, kidx, 1, &ls, msg, sizeof msg), 0);
    assert_int_equal(cct_linear_window(lb), 4);
    assert_non_null(strstr(msg, "window cut from 336 to 4 steps"));
    /* 6 origins end before the tail (rows 17-19), fewer than 2·L: the fallback penalty */
    assert_true(cct_linear_lambda(lb, 0) == CCT_LINEAR_LAMBDA_FALLBACK);
    cct_linear_close(&lb);
    /* 12 rows: 3 origins even at L = 2 */
    fit.end = 12;
    assert_int_equal(cct_linear_open(&lb, ds, &fit, kidx, 1, &ls, msg, sizeof msg), -EAGAIN);
    assert_null(lb);
    assert_non_null(strstr(msg, "linear skipped: the 12 rows before the test range"));
    /* b has no observed target in the fit rows: skipped, named */
    fit.end = 140;
    ls.window = 24;
    assert_int_equal(cct_linear_open(&lb, ds, &fit, kidx, 2, &ls, msg, sizeof msg), -EAGAIN);
    assert_non_null(strstr(msg, "KPI b has 0 origins"));
    /* bad settings */
    ls.lambda = -2;
    assert_int_equal(cct_linear_open(&lb, ds, &fit, kidx, 1, &ls, msg, sizeof msg), -EINVAL);
    cc_data_close(&ds);
}

/* Through cellcast eval's module: rows before the test range too short → a warning and no
 * `linear` row; long enough → finite numbers in the same windows as naive. */
static void test_eval_linear_method(void **state)
{
    (void)state;
    char path[] = "/tmp/cc_test_linear_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len;
    char *csv = make_csv(1, 200, sines, NULL, &len);
    assert_int_equal(write(fd, csv, len), (ssize_t)len);
    close(fd);
    free(csv);
    CctEvalSettings s;
    cct_eval_default_settings(&s);
    s.data_path = path;
    s.horizon = 8;
    s.split = "rows:0-8,8-12,12-200";
    CctEval *e = NULL;
    char err[512];
    assert_int_equal(cct_eval_open(&e, &s, err, sizeof err), 0);
    assert_non_null(strstr(cct_eval_warnings(e), "linear skipped"));
    json_t *root = cct_eval_json(e), *m = json_object_get(root, "methods");
    assert_null(json_object_get(m, "linear"));
    assert_non_null(json_object_get(m, "naive"));
    json_decref(root);
    cct_eval_close(&e);

    s.split = "rows:0-110,110-160,160-200"; /* 160 rows: 105 origins of L = 48 */
    s.linear_window = 48;
    assert_int_equal(cct_eval_open(&e, &s, err, sizeof err), 0);
    root = cct_eval_json(e);
    m = json_object_get(root, "methods");
    json_t *lin = json_object_get(json_object_get(m, "linear"), "overall");
    json_t *nv = json_object_get(json_object_get(m, "naive"), "overall");
    assert_non_null(lin);
    assert_int_equal(json_integer_value(json_object_get(lin, "n")),
                     json_integer_value(json_object_get(nv, "n")));
    double mse = json_number_value(json_object_get(lin, "mse"));
    assert_true(mse < 1e-6 && mse < 1e-3 * json_number_value(json_object_get(nv, "mse")));
    assert_int_equal(json_integer_value(json_object_get(root, "linear_window")), 48);
    json_decref(root);
    cct_eval_close(&e);

    s.linear_window = 0; /* off */
    assert_int_equal(cct_eval_open(&e, &s, err, sizeof err), 0);
    root = cct_eval_json(e);
    assert_null(json_object_get(json_object_get(root, "methods"), "linear"));
    assert_string_equal(cct_eval_warnings(e), "");
    json_decref(root);
    cct_eval_close(&e);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recovers_linear_process),
        cmocka_unit_test(test_random_walk_is_naive),
        cmocka_unit_test(test_short_rows_cut_or_skip),
        cmocka_unit_test(test_eval_linear_method),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
