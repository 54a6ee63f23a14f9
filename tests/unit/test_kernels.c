/*
 * test_kernels.c — each fast kernel of cc_kernels and cc_half against its reference twin or
 * the closed formula. `test_kernels --bench` times each fast kernel against its twin
 * instead (figures only, never pass/fail on speed).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "cc_half.h"
#include "cc_kernels.h"
#include "testlib.h"

static uint64_t rng = 12345;
static float frand(void) { return tl_rng_float(&rng); }

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

static int f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

/* The row conversions this CPU uses equal the element-wise ones bit for bit (NaN payloads
 * aside: NaN stays NaN), at every length around the 8-lane blocks of the F16C versions. */
static void test_half_rows_match_elementwise(void **state)
{
    (void)state;
    CcHalfDsp dsp;
    cc_half_dsp_init(&dsp);
    enum { LEN = 41 };
    static const float special[] = {
        0.0f,     -0.0f,         1.0f,          65504.0f, 65520.0f,       1e6f,
        -1e6f,    5.9604645e-8f, 2.9802322e-8f, 6.1e-5f,  1.00048828125f, 1.00146484375f,
        INFINITY, -INFINITY,     NAN,           3.0e38f};
    float x[LEN], back[LEN], back_ref[LEN];
    uint16_t h[LEN], h_ref[LEN];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < LEN; i++)
            x[i] = round == 0 ? special[i % (sizeof special / sizeof *special)] : 1e3f * frand();
        for (int n = 0; n <= LEN; n++) {
            memset(h, 0xa5, sizeof h);
            memcpy(h_ref, h, sizeof h);
            dsp.f16_store(h, x, n);
            cc_f16_store_ref(h_ref, x, n);
            for (int i = 0; i < LEN; i++)
                if (!(f16_is_nan(h[i]) && f16_is_nan(h_ref[i])))
                    assert_int_equal(h[i], h_ref[i]); /* past n: untouched on both */
            dsp.f16_load(back, h_ref, n);
            cc_f16_load_ref(back_ref, h_ref, n);
            for (int i = 0; i < n; i++)
                assert_true(isnan(back[i]) ? isnan(back_ref[i])
                                           : memcmp(&back[i], &back_ref[i], sizeof(float)) == 0);
            cc_bf16_store(h, x, n);
            for (int i = 0; i < n; i++)
                assert_int_equal(h[i], cc_f32_to_bf16(x[i]));
            cc_bf16_load(back, h, n);
            for (int i = 0; i < n; i++)
                assert_true(isnan(back[i]) ? isnan(x[i]) : back[i] == cc_bf16_to_f32(h[i]));
        }
    }
    /* every half widens as the element-wise conversion does */
    static uint16_t all[65536];
    static float wide[65536], wide_ref[65536];
    for (int i = 0; i < 65536; i++)
        all[i] = (uint16_t)i;
    dsp.f16_load(wide, all, 65536);
    cc_f16_load_ref(wide_ref, all, 65536);
    for (int i = 0; i < 65536; i++)
        assert_true(f16_is_nan(all[i]) ? isnan(wide[i]) && isnan(wide_ref[i])
                                       : memcmp(&wide[i], &wide_ref[i], sizeof(float)) == 0);
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

/* ---- --bench ---------------------------------------------------------------------------- */

typedef struct BenchArgs {
    CcHalfDsp dsp;
    int M, N, K, n;
    float *A, *B, *bias, *C, *x, *g, *beta;
    uint16_t *h;
} BenchArgs;

static void run_linear(const void *arg)
{
    const BenchArgs *a = arg;
    cc_linear(a->C, a->N, a->A, a->K, a->B, a->K, a->bias, a->M, a->N, a->K, 0);
}

static void run_linear_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_linear_ref(a->C, a->N, a->A, a->K, a->B, a->K, a->bias, a->M, a->N, a->K, 0);
}

static void run_layernorm(const void *arg)
{
    const BenchArgs *a = arg;
    cc_add_layernorm(a->C, a->A, a->x, a->g, a->beta, a->M, a->K);
}

static void run_layernorm_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_add_layernorm_ref(a->C, a->A, a->x, a->g, a->beta, a->M, a->K);
}

/* softmax in place of the same input every call: a copy, then the kernel */
static void run_softmax(const void *arg)
{
    const BenchArgs *a = arg;
    memcpy(a->C, a->x, (size_t)a->n * sizeof(float));
    cc_softmax(a->C, a->n);
}

static void run_softmax_ref(const void *arg)
{
    const BenchArgs *a = arg;
    memcpy(a->C, a->x, (size_t)a->n * sizeof(float));
    cc_softmax_ref(a->C, a->n);
}

static void run_f16_store(const void *arg)
{
    const BenchArgs *a = arg;
    a->dsp.f16_store(a->h, a->x, a->n);
}
static void run_f16_store_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_f16_store_ref(a->h, a->x, a->n);
}
static void run_f16_load(const void *arg)
{
    const BenchArgs *a = arg;
    a->dsp.f16_load(a->C, a->h, a->n);
}
static void run_f16_load_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_f16_load_ref(a->C, a->h, a->n);
}
static void run_bf16_store(const void *arg)
{
    const BenchArgs *a = arg;
    cc_bf16_store(a->h, a->x, a->n);
}

static void run_bf16_store_elementwise(const void *arg)
{
    const BenchArgs *a = arg;
    for (int i = 0; i < a->n; i++)
        a->h[i] = cc_f32_to_bf16(a->x[i]);
}

static float *randv(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = frand();
    return v;
}

/* Shapes of the default model's step: 112 rows (a sub-batch of 14 cells × 8 KPIs), d = 64,
 * qkv 192 outputs; 22 scores per softmax; 21 tokens × 16 dims per KV row conversion. */
static int bench(void)
{
    BenchArgs a = {.M = 112, .N = 192, .K = 64, .n = 22};
    cc_half_dsp_init(&a.dsp);
    a.A = randv(112 * 64), a.B = randv(192 * 64), a.bias = randv(192), a.C = randv(112 * 192);
    a.x = randv(112 * 64), a.g = randv(64), a.beta = randv(64);
    a.h = calloc(512, sizeof *a.h);
    if (!a.A || !a.B || !a.bias || !a.C || !a.x || !a.g || !a.beta || !a.h)
        return 1;
    printf("%-44s %13s %13s %8s\n", "kernel", "fast", "reference", "ref/fast");
    tl_bench_pair("linear 112x192x64 (OpenBLAS)", run_linear, run_linear_ref, &a);
    tl_bench_pair("add_layernorm 112x64", run_layernorm, run_layernorm_ref, &a);
    tl_bench_pair("softmax 22", run_softmax, run_softmax_ref, &a);
    a.n = 21 * 16;
    tl_bench_pair("f16 row store 336 (table's choice)", run_f16_store, run_f16_store_ref, &a);
    tl_bench_pair("f16 row load 336 (table's choice)", run_f16_load, run_f16_load_ref, &a);
    tl_bench_pair("bf16 row store 336 (vs element-wise)", run_bf16_store,
                  run_bf16_store_elementwise, &a);
    free(a.A), free(a.B), free(a.bias), free(a.C), free(a.x), free(a.g), free(a.beta), free(a.h);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_matches_reference),
        cmocka_unit_test(test_layernorm_matches_reference),
        cmocka_unit_test(test_softmax_rows_sum_to_one),
        cmocka_unit_test(test_pos_encoding_large_positions),
        cmocka_unit_test(test_time_features),
        cmocka_unit_test(test_half_precision_conversions),
        cmocka_unit_test(test_half_rows_match_elementwise),
        cmocka_unit_test(test_norm_stats_constant_series),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
