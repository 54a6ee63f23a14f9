/*
 * test_lad.c — lib/cc_lad.c, least absolute deviations by IRLS (the linear path fitted by the
 * learner's own criterion):
 *  - on rows whose noise is heavy-tailed (a tenth of the targets 30 times noisier), IRLS from
 *    the ridge solution lowers the objective at every pass, ends with a mean absolute error
 *    below the ridge's, and lands nearer the true map than the ridge (which the outliers pull);
 *  - its passes equal the naive reference (cc_lad_fit_ref: rows in memory, plain loops,
 *    Gaussian elimination) step for step;
 *  - it is deterministic: the same rows give the same bits;
 *  - over-relaxed steps (x + beta·(the solve's point - x), beta in (0, 2): the step
 *    cc_trainer_fit_linear_scaled takes) never raise the objective either (the quadratic
 *    majorises it and falls at x + beta·d for any such beta) and reach a lower one in the
 *    same passes on these rows;
 *  - a sums-only pass (cc_lad_begin_sums) gives a full pass's residual sums, the same bits,
 *    and cannot be solved;
 *  - bad arguments are refused, and every allocation failure is -ENOMEM with nothing left.
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

#include <cmocka.h>

#include "cc_lad.h"
#include "cc_ridge.h"
#include "failalloc.h"
#include "testlib.h"

/* rows: KI inputs and a column of ones (the bias), NY outputs */
enum { N = 3000, KI = 4, K = KI + 1, NY = 2, PASSES = 30 };

static const double x_true[K][NY] = {
    {0.8, -0.3}, {-0.5, 0.6}, {0.3, 0.2}, {0.0, -0.7}, {0.1, -0.2}};

static double gauss(uint64_t *rng)
{
    double u = tl_rng_uniform(rng), v = tl_rng_uniform(rng);
    return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* a (N, K), y (N, NY): y = a x_true + noise, the noise N(0, 0.1²) but 30 times wider (and
 * shifted up, so that the outliers pull the ridge's bias) for one row in ten */
static void make_rows(double *a, double *y)
{
    uint64_t rng = 20261128;
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < KI; i++)
            a[(size_t)j * K + i] = gauss(&rng);
        a[(size_t)j * K + KI] = 1.0;
        for (int c = 0; c < NY; c++) {
            double v = 0;
            for (int i = 0; i < K; i++)
                v += a[(size_t)j * K + i] * x_true[i][c];
            int outlier = tl_rng_uniform(&rng) < 0.1;
            y[(size_t)j * NY + c] =
                v + 0.1 * gauss(&rng) * (outlier ? 30 : 1) + (outlier ? 1.0 : 0);
        }
    }
}

/* Σ |a x - y| over rows and outputs */
static double abs_error(const double *a, const double *y, const double *x)
{
    double s = 0;
    for (int j = 0; j < N; j++)
        for (int c = 0; c < NY; c++) {
            double r = -y[(size_t)j * NY + c];
            for (int i = 0; i < K; i++)
                r += a[(size_t)j * K + i] * x[(size_t)i * NY + c];
            s += fabs(r);
        }
    return s;
}

static double dist_true(const double *x)
{
    double w = 0;
    for (int i = 0; i < K; i++)
        for (int c = 0; c < NY; c++)
            w = fmax(w, fabs(x[(size_t)i * NY + c] - x_true[i][c]));
    return w;
}

static void ridge(const double *a, const double *y, double pen, double *x)
{
    CcRidge *rg = NULL;
    assert_int_equal(cc_ridge_open(&rg, K, NY), 0);
    for (int j = 0; j < N; j++) {
        double *yr, *ar = cc_ridge_row(rg, &yr);
        memcpy(ar, a + (size_t)j * K, K * sizeof *ar);
        memcpy(yr, y + (size_t)j * NY, NY * sizeof *yr);
        cc_ridge_push(rg);
    }
    assert_int_equal(cc_ridge_solve(rg, pen, KI, x), 0);
    cc_ridge_close(&rg);
}

/* passes IRLS steps from x (in place) through the streaming API; obj[p] (passes + 1 values,
 * may be NULL) the objective Σ huber + pen/2 |x[0..KI)|² at each pass's x. */
static void lad_stream(const double *a, const double *y, const double *pen, double eps, int passes,
                       double *x, double *obj)
{
    CcLad *l = NULL;
    assert_int_equal(cc_lad_open(&l, K, NY), 0);
    for (int p = 0; p <= passes; p++) {
        assert_int_equal(cc_lad_begin(l, x, eps), 0);
        for (int j = 0; j < N; j++) {
            double *yr, *ar = cc_lad_row(l, &yr);
            memcpy(ar, a + (size_t)j * K, K * sizeof *ar);
            memcpy(yr, y + (size_t)j * NY, NY * sizeof *yr);
            cc_lad_push(l);
        }
        assert_int_equal(cc_lad_rows(l), N);
        double abs_sum[NY], hub[NY];
        cc_lad_residuals(l, abs_sum, hub);
        if (obj) {
            obj[p] = 0;
            for (int c = 0; c < NY; c++) {
                obj[p] += hub[c];
                for (int i = 0; i < KI; i++)
                    obj[p] += 0.5 * pen[c] * x[(size_t)i * NY + c] * x[(size_t)i * NY + c];
            }
        }
        if (p < passes)
            assert_int_equal(cc_lad_solve(l, pen, KI, x), 0);
    }
    cc_lad_close(&l);
}

static void test_lad_beats_ridge_on_outliers(void **state)
{
    (void)state;
    double *a = malloc((size_t)N * K * sizeof *a), *y = malloc((size_t)N * NY * sizeof *y);
    assert_non_null(a);
    assert_non_null(y);
    make_rows(a, y);
    double xr[K * NY], x[K * NY], obj[PASSES + 1];
    const double pen[NY] = {1.0, 1.0}, eps = 1e-6;
    ridge(a, y, 1.0, xr);
    memcpy(x, xr, sizeof x);
    lad_stream(a, y, pen, eps, PASSES, x, obj);
    /* majorise-minimise: never up; the slack is the objective's rounding (N·NY terms of
     * double precision, 2.2e-16 each relative) */
    for (int p = 1; p <= PASSES; p++)
        assert_true(obj[p] <= obj[p - 1] * (1 + 1e-12));
    double mae_ridge = abs_error(a, y, xr) / (N * NY), mae_lad = abs_error(a, y, x) / (N * NY);
    printf("mean |error|: ridge %.5f, IRLS %.5f; largest |x - x_true|: ridge %.4f, IRLS %.4f; "
           "objective %.3f -> %.3f\n",
           mae_ridge, mae_lad, dist_true(xr), dist_true(x), obj[0], obj[PASSES]);
    /* the outliers' mean |noise| is ~2.4 against ~0.08: the ridge's bias is pulled by ~0.1,
     * the median's not; a 5 % lower mean absolute error is far outside the rounding */
    assert_true(mae_lad < 0.95 * mae_ridge);
    assert_true(dist_true(x) < 0.5 * dist_true(xr));
    free(a);
    free(y);
}

static void test_lad_matches_reference(void **state)
{
    (void)state;
    double *a = malloc((size_t)N * K * sizeof *a), *y = malloc((size_t)N * NY * sizeof *y);
    assert_non_null(a);
    assert_non_null(y);
    make_rows(a, y);
    double xr[K * NY], xs[K * NY], xref[K * NY];
    const double pen[NY] = {5.0, 0.5}, eps = 1e-3;
    ridge(a, y, 1.0, xr);
    for (int passes = 1; passes <= 4; passes++) {
        memcpy(xs, xr, sizeof xs);
        memcpy(xref, xr, sizeof xref);
        lad_stream(a, y, pen, eps, passes, xs, NULL);
        assert_int_equal(cc_lad_fit_ref(a, y, N, K, NY, pen, KI, eps, passes, xref), 0);
        double worst = 0, mag = 0;
        for (int i = 0; i < K * NY; i++) {
            worst = fmax(worst, fabs(xs[i] - xref[i]));
            mag = fmax(mag, fabs(xref[i]));
        }
        printf("passes %d: largest |stream - reference| %.3g (largest |x| %.3g)\n", passes, worst,
               mag);
        /* both in double; the sums of N weighted products in another order (BLAS blocks) and
         * another solver (Cholesky / Gaussian elimination): N · 2.2e-16 relative, times the
         * weights' spread (1/eps against 1/|r| ~ 10, i.e. 1e2) and the system's condition
         * (~10), so 1e-9 of the map's size leaves a margin over ~7e-10 */
        assert_true(worst <= 1e-9 * mag + 1e-12);
    }
    free(a);
    free(y);
}

static void test_lad_deterministic(void **state)
{
    (void)state;
    double *a = malloc((size_t)N * K * sizeof *a), *y = malloc((size_t)N * NY * sizeof *y);
    assert_non_null(a);
    assert_non_null(y);
    make_rows(a, y);
    double x1[K * NY], x2[K * NY];
    const double pen[NY] = {1.0, 1.0};
    ridge(a, y, 1.0, x1);
    memcpy(x2, x1, sizeof x2);
    lad_stream(a, y, pen, 1e-4, 10, x1, NULL);
    lad_stream(a, y, pen, 1e-4, 10, x2, NULL);
    assert_memory_equal(x1, x2, sizeof x1);
    free(a);
    free(y);
}

/* passes IRLS steps from x over all rows, each moving beta times the way to the solve's
 * point; obj[p] the objective at each pass's x (as lad_stream). */
static void lad_relaxed(const double *a, const double *y, const double *pen, double eps,
                        double beta, int passes, double *x, double *obj)
{
    CcLad *l = NULL;
    assert_int_equal(cc_lad_open(&l, K, NY), 0);
    double next[K * NY];
    for (int p = 0; p <= passes; p++) {
        assert_int_equal(cc_lad_begin(l, x, eps), 0);
        for (int j = 0; j < N; j++) {
            double *yr, *ar = cc_lad_row(l, &yr);
            memcpy(ar, a + (size_t)j * K, K * sizeof *ar);
            memcpy(yr, y + (size_t)j * NY, NY * sizeof *yr);
            cc_lad_push(l);
        }
        double abs_sum[NY], hub[NY];
        cc_lad_residuals(l, abs_sum, hub);
        obj[p] = 0;
        for (int c = 0; c < NY; c++) {
            obj[p] += hub[c];
            for (int i = 0; i < KI; i++)
                obj[p] += 0.5 * pen[c] * x[(size_t)i * NY + c] * x[(size_t)i * NY + c];
        }
        if (p == passes)
            break;
        assert_int_equal(cc_lad_solve(l, pen, KI, next), 0);
        for (int i = 0; i < K * NY; i++)
            x[i] += beta * (next[i] - x[i]);
    }
    cc_lad_close(&l);
}

static void test_lad_over_relaxed(void **state)
{
    (void)state;
    double *a = malloc((size_t)N * K * sizeof *a), *y = malloc((size_t)N * NY * sizeof *y);
    assert_non_null(a);
    assert_non_null(y);
    make_rows(a, y);
    enum { P = 8 };
    double xr[K * NY], x[K * NY], plain[P + 1], obj[P + 1];
    const double pen[NY] = {1.0, 1.0}, eps = 1e-3;
    ridge(a, y, 1.0, xr);
    memcpy(x, xr, sizeof x);
    lad_relaxed(a, y, pen, eps, 1.0, P, x, plain);
    const double betas[] = {0.5, 1.5, 1.8, 1.95};
    for (size_t b = 0; b < sizeof betas / sizeof *betas; b++) {
        memcpy(x, xr, sizeof x);
        lad_relaxed(a, y, pen, eps, betas[b], P, x, obj);
        printf("beta %.2f: objective %.4f -> %.4f in %d passes (plain %.4f)\n", betas[b], obj[0],
               obj[P], P, plain[P]);
        /* never up: the slack is the objective's rounding, as test_lad_beats_ridge_on_outliers */
        for (int p = 1; p <= P; p++)
            assert_true(obj[p] <= obj[p - 1] * (1 + 1e-12));
        if (betas[b] > 1) /* these rows: the plain steps creep, the relaxed go further */
            assert_true(obj[P] < plain[P]);
    }
    free(a);
    free(y);
}

/* The rows pushed into l (a pass begun), from row j0 on every stride-th. */
static void push_rows(CcLad *l, const double *a, const double *y, int j0, int stride)
{
    for (int j = j0; j < N; j += stride) {
        double *yr, *ar = cc_lad_row(l, &yr);
        memcpy(ar, a + (size_t)j * K, K * sizeof *ar);
        memcpy(yr, y + (size_t)j * NY, NY * sizeof *yr);
        cc_lad_push(l);
    }
}

/* A sums-only pass measures the point as a full pass does (the same residuals, summed in the
 * same order: the same bits), and its sums are those of plain loops over the rows within
 * the summation's rounding; cc_lad_solve refuses it and the next full pass solves as one
 * that never followed it. */
static void test_lad_sums_only(void **state)
{
    (void)state;
    double *a = malloc((size_t)N * K * sizeof *a), *y = malloc((size_t)N * NY * sizeof *y);
    assert_non_null(a);
    assert_non_null(y);
    make_rows(a, y);
    double x[K * NY], x_full[K * NY], x_after[K * NY];
    const double pen[NY] = {1.0, 1.0}, eps = 1e-2;
    ridge(a, y, 1.0, x);
    CcLad *l = NULL, *m = NULL;
    assert_int_equal(cc_lad_open(&l, K, NY), 0);
    assert_int_equal(cc_lad_open(&m, K, NY), 0);
    double abs_full[NY], hub_full[NY], abs_sums[NY], hub_sums[NY];
    assert_int_equal(cc_lad_begin(l, x, eps), 0);
    push_rows(l, a, y, 0, 1);
    cc_lad_residuals(l, abs_full, hub_full);
    assert_int_equal(cc_lad_solve(l, pen, KI, x_full), 0);
    assert_int_equal(cc_lad_begin_sums(m, x, eps), 0);
    assert_int_equal(cc_lad_begin_sums(m, x, 0), -EINVAL);
    assert_int_equal(cc_lad_begin_sums(m, x, eps), 0);
    push_rows(m, a, y, 0, 1);
    assert_int_equal(cc_lad_rows(m), N);
    cc_lad_residuals(m, abs_sums, hub_sums);
    assert_memory_equal(abs_full, abs_sums, sizeof abs_full);
    assert_memory_equal(hub_full, hub_sums, sizeof hub_full);
    assert_int_equal(cc_lad_solve(m, pen, KI, x_after), -EINVAL);
    /* plain loops: N terms of up to ~3 each, 2.2e-16 relative per addition */
    for (int c = 0; c < NY; c++) {
        double s = 0;
        for (int j = 0; j < N; j++) {
            double r = -y[(size_t)j * NY + c];
            for (int i = 0; i < K; i++)
                r += a[(size_t)j * K + i] * x[(size_t)i * NY + c];
            s += fabs(r);
        }
        assert_true(fabs(s - abs_sums[c]) <= N * 2.2e-16 * s * 4);
    }
    /* a full pass after the sums-only one: its solve is the first pass's */
    assert_int_equal(cc_lad_begin(m, x, eps), 0);
    push_rows(m, a, y, 0, 1);
    assert_int_equal(cc_lad_solve(m, pen, KI, x_after), 0);
    assert_memory_equal(x_full, x_after, sizeof x_full);
    /* a subsample (every third row): the sums of its rows only */
    assert_int_equal(cc_lad_begin_sums(m, x, eps), 0);
    push_rows(m, a, y, 0, 3);
    assert_int_equal(cc_lad_rows(m), (N + 2) / 3);
    cc_lad_residuals(m, abs_sums, NULL);
    assert_true(abs_sums[0] < 0.5 * abs_full[0] && abs_sums[0] > 0.2 * abs_full[0]);
    cc_lad_close(&l);
    cc_lad_close(&m);
    free(a);
    free(y);
}

static void test_lad_arguments(void **state)
{
    (void)state;
    CcLad *l = NULL;
    assert_int_equal(cc_lad_open(&l, 0, 1), -EINVAL);
    assert_null(l);
    assert_int_equal(cc_lad_open(&l, 2, 0), -EINVAL);
    assert_int_equal(cc_lad_open(&l, 2, 1), 0);
    double x[2] = {0, 0}, pen[1] = {0};
    assert_int_equal(cc_lad_begin(l, x, 0), -EINVAL);
    assert_int_equal(cc_lad_begin(l, x, NAN), -EINVAL);
    assert_int_equal(cc_lad_begin(l, x, 1e-3), 0);
    assert_int_equal(cc_lad_solve(l, pen, 1, x), -EAGAIN); /* no row */
    double *yr, *ar = cc_lad_row(l, &yr);
    ar[0] = 1, ar[1] = 1, yr[0] = 2;
    cc_lad_push(l);
    pen[0] = -1;
    assert_int_equal(cc_lad_solve(l, pen, 1, x), -EINVAL);
    pen[0] = 0;
    assert_int_equal(cc_lad_solve(l, pen, 3, x), -EINVAL);
    assert_int_equal(cc_lad_solve(l, pen, 0, x), -EDOM); /* one row, two inputs, no penalty */
    cc_lad_close(&l);
    assert_null(l);
    cc_lad_close(&l); /* a second close is harmless */
}

/* Every allocation of cc_lad_open and cc_lad_fit_ref failed in turn: -ENOMEM, no leak (the
 * sanitizer builds see one), then success. */
static void test_lad_out_of_memory(void **state)
{
    (void)state;
    const double a[4] = {1, 0, 0, 1}, y[2] = {1, 2}, pen[1] = {0};
    for (long k = 0;; k++) {
        CcLad *l = NULL;
        failalloc_arm(k);
        int r = cc_lad_open(&l, 2, 1);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(r, 0);
            cc_lad_close(&l);
            printf("cc_lad_open: %ld allocations, each failed in turn\n", k);
            assert_true(k > 0); /* the wrappers are in: some allocation was failed */
            break;
        }
        assert_int_equal(r, -ENOMEM);
        assert_null(l);
    }
    for (long k = 0;; k++) {
        double x[2] = {0, 0};
        failalloc_arm(k);
        int r = cc_lad_fit_ref(a, y, 2, 2, 1, pen, 0, 1e-3, 2, x);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(r, 0);
            assert_true(k > 0);
            break;
        }
        assert_int_equal(r, -ENOMEM);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lad_beats_ridge_on_outliers),
        cmocka_unit_test(test_lad_matches_reference),
        cmocka_unit_test(test_lad_deterministic),
        cmocka_unit_test(test_lad_sums_only),
        cmocka_unit_test(test_lad_over_relaxed),
        cmocka_unit_test(test_lad_arguments),
        cmocka_unit_test(test_lad_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
