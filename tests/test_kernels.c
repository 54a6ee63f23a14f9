/* test_kernels.c — each fast kernel against its reference twin or the closed formula. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "cc_kernels.h"
#include "testlib.h"

static uint64_t rng = 12345;
static float frand(void)
{
    return tl_rng_float(&rng);
}

static void test_linear_matches_reference(void **state)
{
    (void)state;
    enum { M = 37, N = 29, K = 23 };
    float A[M * K], B[N * K], bias[N], C[M * N], R[M * N];
    for (int i = 0; i < M * K; i++)
        A[i] = frand();
    for (int i = 0; i < N * K; i++)
        B[i] = frand();
    for (int i = 0; i < N; i++)
        bias[i] = frand();
    for (int acc = 0; acc < 2; acc++) {
        for (int i = 0; i < M * N; i++)
            C[i] = R[i] = acc ? frand() : 0;
        cc_linear(C, N, A, K, B, K, bias, M, N, K, acc);
        cc_linear_ref(R, N, A, K, B, K, bias, M, N, K, acc);
        double maxerr = 0;
        for (int i = 0; i < M * N; i++)
            maxerr = fmax(maxerr, fabs(C[i] - R[i]));
        printf("linear (accumulate=%d): max abs error %.3g\n", acc, maxerr);
        assert_true(maxerr < 1e-5);
    }
}

static void test_layernorm_matches_reference(void **state)
{
    (void)state;
    enum { ROWS = 5, D = 64 };
    float a[ROWS * D], b[ROWS * D], g[D], be[D], o1[ROWS * D], o2[ROWS * D];
    for (int i = 0; i < ROWS * D; i++) {
        a[i] = 100 * frand();
        b[i] = frand();
    }
    for (int i = 0; i < D; i++) {
        g[i] = 1 + frand() / 2;
        be[i] = frand();
    }
    cc_add_layernorm(o1, a, b, g, be, ROWS, D);
    cc_add_layernorm_ref(o2, a, b, g, be, ROWS, D);
    double maxerr = 0;
    for (int i = 0; i < ROWS * D; i++)
        maxerr = fmax(maxerr, fabs(o1[i] - o2[i]));
    printf("layernorm: max abs error %.3g\n", maxerr);
    assert_true(maxerr < 1e-5);
}

static void test_softmax_rows_sum_to_one(void **state)
{
    (void)state;
    for (int n = 1; n <= 40; n++) {
        float x[40], r[40];
        for (int i = 0; i < n; i++)
            x[i] = r[i] = 30 * frand();
        cc_softmax(x, n);
        cc_softmax_ref(r, n);
        double sum = 0, maxerr = 0;
        for (int i = 0; i < n; i++) {
            sum += x[i];
            maxerr = fmax(maxerr, fabs(x[i] - r[i]));
            assert_true(x[i] >= 0);
        }
        assert_true(fabs(sum - 1) < 1e-6);
        assert_true(maxerr < 1e-6);
    }
    float big[3] = {1e30f, -1e30f, 0};
    cc_softmax(big, 3);
    assert_true(fabs(big[0] - 1) < 1e-6 && big[1] < 1e-30f && isfinite(big[2]));
}

static void test_pos_encoding_large_positions(void **state)
{
    (void)state;
    enum { D = 64 };
    const double positions[] = {0, 1, 200000.0625, 199999.9375, 1.9e6 + 15.0 / 16, 3.5e7};
    double maxerr = 0;
    for (size_t k = 0; k < sizeof positions / sizeof *positions; k++) {
        float pe[D];
        cc_pos_encoding(pe, positions[k], D);
        for (int i = 0; i < D / 2; i++) {
            long double angle = (long double)positions[k] / powl(10000.0L, (2.0L * i) / D);
            maxerr = fmax(maxerr, fabs(pe[2 * i] - (double)sinl(angle)));
            maxerr = fmax(maxerr, fabs(pe[2 * i + 1] - (double)cosl(angle)));
        }
    }
    printf("positional encoding: max abs error vs long double formula %.3g\n", maxerr);
    assert_true(maxerr < 1e-6);
}

static void test_time_features(void **state)
{
    (void)state;
    float tau[4];
    /* 1970-01-05 00:00 UTC was a Monday: phase of week 0, phase of day 0 */
    cc_time_features(tau, 4 * 24, 3600, 0);
    assert_true(fabs(tau[0]) < 1e-6 && fabs(tau[1] - 1) < 1e-6);
    assert_true(fabs(tau[2]) < 1e-6 && fabs(tau[3] - 1) < 1e-6);
    /* 2024-01-01 was a Monday too; 06:00 → pd = 0.25 */
    int64_t step = (1704067200 + 6 * 3600) / 900;
    cc_time_features(tau, step, 900, 0);
    assert_true(fabs(tau[0] - 1) < 1e-6 && fabs(tau[1]) < 1e-6);
    double pw = 0.25 / 7;
    assert_true(fabs(tau[2] - sin(2 * M_PI * pw)) < 1e-6);
    /* tz_offset moves the local clock: 23:00 UTC with +1 h is local midnight */
    cc_time_features(tau, (1704067200 - 3600) / 60, 60, 3600);
    assert_true(fabs(tau[0]) < 1e-6 && fabs(tau[1] - 1) < 1e-6);
}

static void test_half_precision_conversions(void **state)
{
    (void)state;
    assert_int_equal(cc_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(cc_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(cc_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(cc_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(cc_f32_to_f16(5.9604645e-8f), 0x0001);
    assert_true(cc_f16_to_f32(0x0001) == 5.9604645e-8f);
    assert_true(isnan(cc_f16_to_f32(cc_f32_to_f16(NAN))));
    assert_int_equal(cc_f32_to_bf16(1.0f), 0x3f80);
    assert_true(cc_bf16_to_f32(0x4049) == 3.140625f);
    double maxrel16 = 0, maxrelbf = 0;
    for (int i = 0; i < 10000; i++) {
        float x = frand() * 100;
        if (fabsf(x) < 1e-3f)
            continue;
        maxrel16 = fmax(maxrel16, fabs(cc_f16_to_f32(cc_f32_to_f16(x)) - x) / fabs(x));
        maxrelbf = fmax(maxrelbf, fabs(cc_bf16_to_f32(cc_f32_to_bf16(x)) - x) / fabs(x));
    }
    printf("round trip max rel error: f16 %.3g, bf16 %.3g\n", maxrel16, maxrelbf);
    assert_true(maxrel16 <= 1.0 / 2048 + 1e-9);
    assert_true(maxrelbf <= 1.0 / 256 + 1e-9);
}

static void test_norm_stats_constant_series(void **state)
{
    (void)state;
    float x[50], mu, sigma;
    for (int i = 0; i < 50; i++)
        x[i] = 42.0f;
    cc_norm_stats(x, 50, &mu, &sigma);
    assert_true(mu == 42.0f);
    assert_true(fabs(sigma - 1e-5 * 43) < 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_matches_reference),
        cmocka_unit_test(test_layernorm_matches_reference),
        cmocka_unit_test(test_softmax_rows_sum_to_one),
        cmocka_unit_test(test_pos_encoding_large_positions),
        cmocka_unit_test(test_time_features),
        cmocka_unit_test(test_half_precision_conversions),
        cmocka_unit_test(test_norm_stats_constant_series),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
