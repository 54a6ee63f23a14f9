/* test_gemm.c — the packed dense kernels (and their OpenBLAS fallback) against
 * the double-precision reference twins, over shapes that exercise every row
 * remainder, partial panels, strided operands and both epilogues.
 * `test_gemm --bench` times the packed kernels and the fallback against the twins
 * instead (figures only, never pass/fail on speed). */
#include <errno.h>
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

#include "cc_gemm.h"
#include "testlib.h"

static uint64_t rng = 777;
static float frand(void) { return tl_rng_float(&rng); }

static float *randv(size_t n)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = frand();
    return v;
}

/* (M, N, K): remainders of the 6-row block, N below/at/above/between 64-column
 * panels */
static const int shapes[][3] = {{1, 1, 1},     {5, 48, 64},   {6, 64, 64},  {7, 192, 64},
                                {13, 128, 64}, {12, 64, 128}, {29, 70, 20}, {37, 200, 33},
                                {4, 16, 5},    {11, 63, 17}};

static void check_gemm(int force_fallback)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        const int lda = K + 3, ldc = N + 5; /* strided rows, as the engine's qkv slices */
        float *A = randv((size_t)M * lda), *W = randv((size_t)N * K), *bias = randv((size_t)N);
        float *C = randv((size_t)M * ldc), *R = malloc((size_t)M * ldc * sizeof *R);
        memcpy(R, C, (size_t)M * ldc * sizeof *R);
        CcGemmW *g = NULL;
        assert_int_equal(cc_gemm_open(&g, W, N, K, force_fallback), 0);
        for (int epi = CC_GEMM_STORE; epi <= CC_GEMM_RELU; epi++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                const float *b = with_bias ? bias : NULL;
                cc_gemm(C, ldc, A, lda, g, b, M, (CcGemmEpilogue)epi, NULL);
                cc_gemm_ref(R, ldc, A, lda, W, N, K, b, M, (CcGemmEpilogue)epi);
                double err = 0;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < ldc; j++) /* padding columns must be untouched too */
                        err = fmax(err, fabs(C[(size_t)i * ldc + j] - R[(size_t)i * ldc + j]));
                if (err > 1e-5)
                    printf("gemm %s M%d N%d K%d epi %d bias %d: max abs error %.3g\n",
                           force_fallback ? "fallback" : (cc_gemm_is_packed(g) ? "packed" : "blas"),
                           M, N, K, epi, with_bias, err);
                assert_true(err <= 1e-5);
            }
        cc_gemm_close(&g);
        assert_null(g);
        free(A), free(W), free(bias), free(C), free(R);
    }
}

static void test_gemm_packed(void **state)
{
    (void)state;
    CcGemmW *g = NULL;
    float w = 1;
    assert_int_equal(cc_gemm_open(&g, &w, 1, 1, 0), 0);
    printf("packed AVX-512 kernel on this CPU: %s\n",
           cc_gemm_is_packed(g) ? "yes" : "no (OpenBLAS fallback)");
    cc_gemm_close(&g);
    check_gemm(0);
}

static void test_gemm_fallback(void **state)
{
    (void)state;
    check_gemm(1);
}

static void check_residual_ln(int force_fallback)
{
    static const int ln_shapes[][3] = {{1, 64, 64}, {7, 64, 128}, {13, 32, 64},
                                       {6, 48, 20}, {5, 96, 64},  {9, 200, 16}};
    for (size_t s = 0; s < sizeof ln_shapes / sizeof ln_shapes[0]; s++) {
        const int M = ln_shapes[s][0], N = ln_shapes[s][1], K = ln_shapes[s][2];
        const int lda = K + 1, ldz = N + 2;
        float *A = randv((size_t)M * lda), *W = randv((size_t)N * K), *bias = randv((size_t)N);
        float *g = randv((size_t)N), *b = randv((size_t)N), *Z = randv((size_t)M * ldz);
        float *R = malloc((size_t)M * ldz * sizeof *R);
        memcpy(R, Z, (size_t)M * ldz * sizeof *R);
        CcGemmW *w = NULL;
        assert_int_equal(cc_gemm_open(&w, W, N, K, force_fallback), 0);
        cc_gemm_residual_ln(Z, ldz, A, lda, w, bias, g, b, M, NULL);
        cc_gemm_residual_ln_ref(R, ldz, A, lda, W, N, K, bias, g, b, M);
        double err = 0;
        for (size_t i = 0; i < (size_t)M * ldz; i++)
            err = fmax(err, fabs(Z[i] - R[i]));
        printf("residual LN %s M%d N%d K%d: max abs error %.3g\n",
               force_fallback ? "fallback" : "packed", M, N, K, err);
        assert_true(err <= 2e-5);
        cc_gemm_close(&w);
        free(A), free(W), free(bias), free(g), free(b), free(Z), free(R);
    }
}

static void test_residual_ln_packed(void **state)
{
    (void)state;
    check_residual_ln(0);
}

static void test_residual_ln_fallback(void **state)
{
    (void)state;
    check_residual_ln(1);
}

/* A row's result must not depend on where it sits in the batch (6-row blocks vs
 * the remainder kernels): the engine's batch invariance is built on it. */
static void test_rows_independent_of_batch(void **state)
{
    (void)state;
    enum { M = 23, N = 192, K = 64 };
    float *A = randv((size_t)M * K), *W = randv((size_t)N * K), *bias = randv(N);
    float *all = malloc((size_t)M * N * sizeof *all), one[N];
    CcGemmW *g = NULL;
    assert_int_equal(cc_gemm_open(&g, W, N, K, 0), 0);
    cc_gemm(all, N, A, K, g, bias, M, CC_GEMM_STORE, NULL);
    for (int i = 0; i < M; i++) {
        cc_gemm(one, N, A + (size_t)i * K, K, g, bias, 1, CC_GEMM_STORE, NULL);
        assert_memory_equal(one, all + (size_t)i * N, sizeof one);
    }
    cc_gemm_close(&g);
    free(A), free(W), free(bias), free(all);
}

/* The prefetch stream: one line per inner iteration, stopping at its limit, across block
 * boundaries, and never changing the results. */
static void test_stream_advances_and_stops(void **state)
{
    (void)state;
    enum { M = 13, N = 70, K = 9, BLOCKS = 7, LINES = 3 };
    static char mem[BLOCKS][LINES * 64];
    const char *blocks[BLOCKS];
    for (int i = 0; i < BLOCKS; i++)
        blocks[i] = mem[i];
    float *A = randv((size_t)M * K), *W = randv((size_t)N * K), *C = randv((size_t)M * N);
    float *R = malloc((size_t)M * N * sizeof *R);
    CcGemmW *g = NULL;
    assert_int_equal(cc_gemm_open(&g, W, N, K, 0), 0);
    /* 3 row blocks (6, 6, 1 rows) x 2 panels x K iterations */
    const size_t iters = 3 * 2 * K;
    CcGemmStream st = {.blocks = blocks, .block_lines = LINES, .next = 2, .limit = 2 + 5};
    cc_gemm(C, N, A, K, g, NULL, M, CC_GEMM_STORE, &st);
    cc_gemm(R, N, A, K, g, NULL, M, CC_GEMM_STORE, NULL);
    assert_memory_equal(C, R, (size_t)M * N * sizeof *C);
    assert_int_equal(st.next, cc_gemm_is_packed(g) ? 7 : 2); /* stopped at the limit */
    st.limit = BLOCKS * LINES; /* 21 lines, fewer than the 54 iterations */
    cc_gemm(C, N, A, K, g, NULL, M, CC_GEMM_STORE, &st);
    size_t want =
        cc_gemm_is_packed(g) ? (7 + iters < BLOCKS * LINES ? 7 + iters : BLOCKS * LINES) : 2;
    assert_int_equal(st.next, want);
    /* two lines per iteration: 54 iterations reach the 21 lines from 2 too */
    st.next = 2;
    st.limit = 2 + 30 > BLOCKS * LINES ? BLOCKS * LINES : 2 + 30;
    st.per_iter = 2;
    cc_gemm(C, N, A, K, g, NULL, 2, CC_GEMM_STORE, &st); /* 1 row block x 2 panels x 9 = 18 */
    assert_int_equal(st.next, cc_gemm_is_packed(g) ? (2 + 36 < st.limit ? 2 + 36 : st.limit) : 2);
    cc_gemm_close(&g);
    free(A), free(W), free(C), free(R);
}

static void test_pack_rejects_bad_shapes(void **state)
{
    (void)state;
    CcGemmW *g = (CcGemmW *)&g;
    float w = 0;
    assert_int_equal(cc_gemm_open(&g, &w, 0, 4, 0), -EINVAL);
    assert_null(g);
    assert_int_equal(cc_gemm_open(&g, &w, 4, -1, 0), -EINVAL);
    assert_int_equal(cc_gemm_open(&g, NULL, 4, 4, 0), -EINVAL);
    cc_gemm_close(&g); /* NULL-safe */
    cc_gemm_close(NULL);
}

/* ---- --bench ---------------------------------------------------------------------------- */

typedef struct BenchArgs {
    int M, N, K;
    CcGemmW *w;
    CcGemmEpilogue epi;
    float *A, *W, *bias, *C, *g, *b;
} BenchArgs;

static void run_gemm(const void *arg)
{
    const BenchArgs *a = arg;
    cc_gemm(a->C, a->N, a->A, a->K, a->w, a->bias, a->M, a->epi, NULL);
}

static void run_gemm_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_gemm_ref(a->C, a->N, a->A, a->K, a->W, a->N, a->K, a->bias, a->M, a->epi);
}

static void run_residual_ln(const void *arg)
{
    const BenchArgs *a = arg;
    cc_gemm_residual_ln(a->C, a->N, a->A, a->K, a->w, a->bias, a->g, a->b, a->M, NULL);
}

static void run_residual_ln_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_gemm_residual_ln_ref(a->C, a->N, a->A, a->K, a->W, a->N, a->K, a->bias, a->g, a->b, a->M);
}

/* The dense layers of the default model's step on a sub-batch of 112 rows (14 cells × 8
 * KPIs), d = 64, d_ff = 128: each on the packed kernel (where this CPU has AVX-512) and on
 * the OpenBLAS fallback, against the reference twin. */
static int bench(void)
{
    static const struct {
        const char *name;
        int N, K, ln;
        CcGemmEpilogue epi;
    } layers[] = {{"qkv 112x192x64", 192, 64, 0, CC_GEMM_STORE},
                  {"up + ReLU 112x128x64", 128, 64, 0, CC_GEMM_RELU},
                  {"down + residual LN 112x64x128", 64, 128, 1, CC_GEMM_STORE},
                  {"o + residual LN 112x64x64", 64, 64, 1, CC_GEMM_STORE}};
    printf("%-32s %13s %13s %13s %8s\n", "layer", "packed", "OpenBLAS", "reference", "ref/fast");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        BenchArgs a = {.M = 112, .N = layers[i].N, .K = layers[i].K, .epi = layers[i].epi};
        a.A = randv((size_t)a.M * a.K), a.W = randv((size_t)a.N * a.K), a.bias = randv(a.N);
        a.C = randv((size_t)a.M * a.N), a.g = randv(a.N), a.b = randv(a.N);
        void (*fast)(const void *) = layers[i].ln ? run_residual_ln : run_gemm;
        void (*ref)(const void *) = layers[i].ln ? run_residual_ln_ref : run_gemm_ref;
        double ns[2] = {NAN, NAN};
        for (int fallback = 0; fallback < 2; fallback++) {
            if (cc_gemm_open(&a.w, a.W, a.N, a.K, fallback) < 0)
                return 1;
            if (fallback || cc_gemm_is_packed(a.w))
                ns[fallback] = tl_ns_per_call(fast, &a);
            cc_gemm_close(&a.w);
        }
        double r = tl_ns_per_call(ref, &a), best = isnan(ns[0]) ? ns[1] : ns[0];
        printf("%-32s %10.1f ns %10.1f ns %10.1f ns %7.1fx\n", layers[i].name, ns[0], ns[1], r,
               r / best);
        free(a.A), free(a.W), free(a.bias), free(a.C), free(a.g), free(a.b);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_packed),
        cmocka_unit_test(test_gemm_fallback),
        cmocka_unit_test(test_residual_ln_packed),
        cmocka_unit_test(test_residual_ln_fallback),
        cmocka_unit_test(test_rows_independent_of_batch),
        cmocka_unit_test(test_stream_advances_and_stops),
        cmocka_unit_test(test_pack_rejects_bad_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
