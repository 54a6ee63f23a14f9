/*
 * test_attention.c — the attention kernels of cc_attention against their reference twins:
 * the AVX-512 register kernels (when this CPU has AVX-512) for every KV element type, the
 * portable ones, the key transposition into the blocked layout. Memory a kernel may read
 * but must not use (columns past n, the tail block's slack) holds NaN, so using it shows.
 *
 * `test_attention --bench` times each fast kernel against its twin instead (figures only,
 * never pass/fail on speed).
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

#include "cc_attention.h"
#include "cc_kernels.h"
#include "testlib.h"

static uint64_t rng = 4242;
static float frand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

/* not inlined: GCC's range analysis then takes the callers' int sizes for negative */
__attribute__((noinline)) static float *randv(size_t n)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = 2 * frand();
    return v;
}

__attribute__((noinline)) static float *nanv(size_t n)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
    return v;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, isnan(a[i]) || isnan(b[i]) ? INFINITY : fabs(a[i] - b[i]));
    return d;
}

/* Element i of a KV buffer of type t, written from f32. */
static void kv_put(enum CcKvType t, void *buf, size_t i, float x)
{
    if (t == CC_KV_F16)
        ((uint16_t *)buf)[i] = cc_f32_to_f16(x);
    else if (t == CC_KV_BF16)
        ((uint16_t *)buf)[i] = cc_f32_to_bf16(x);
    else
        ((float *)buf)[i] = x;
}

/* H heads of cap cached tokens as the engine lays them out, n of them valid: keys in the
 * blocked layout for cap tokens, then values (cap, 16), per head; every element past the
 * valid ones NaN, and one more head's worth of NaN behind the last. */
typedef struct Cache16 {
    enum CcKvType t;
    int H, cap, n;
    size_t hsh; /* elements per head, keys and values */
    void *mem;
} Cache16;

static void cache16_fill(Cache16 *c, enum CcKvType t, int H, int cap, int n)
{
    const size_t el = t == CC_KV_F32 ? 4 : 2;
    c->t = t, c->H = H, c->cap = cap, c->n = n;
    c->hsh = 2 * (size_t)cap * 16;
    c->mem = malloc(((size_t)H + 1) * c->hsh * el);
    assert_non_null(c->mem);
    for (size_t i = 0; i < ((size_t)H + 1) * c->hsh; i++)
        kv_put(t, c->mem, i, NAN);
    for (int h = 0; h < H; h++)
        for (int j = 0; j < n; j++)
            for (int d = 0; d < 16; d++) {
                int b = j / 16;
                size_t at = (size_t)b * 256 + (size_t)d * cc_kblock_width(cap, b) + j % 16;
                kv_put(t, c->mem, h * c->hsh + at, 2 * frand());
                kv_put(t, c->mem, h * c->hsh + (size_t)cap * 16 + (size_t)j * 16 + d, 2 * frand());
            }
}

static const void *cache16_keys(const Cache16 *c) { return c->mem; }

static const void *cache16_values(const Cache16 *c)
{
    return (const char *)c->mem + (size_t)c->cap * 16 * (c->t == CC_KV_F32 ? 4 : 2);
}

static void test_attend16_matches_reference(void **state)
{
    (void)state;
    CcAttentionDsp dsp;
    cc_attention_dsp_init(&dsp, 0);
    if (!dsp.attend16[CC_KV_F32]) {
        printf("no AVX-512 on this CPU: the register kernels are not used, nothing to test\n");
        skip();
    }
    static const int shapes[][3] = {/* n, cap, H */
                                    {0, 5, 4},   {1, 1, 1},   {5, 21, 4},  {15, 16, 3},
                                    {16, 16, 4}, {17, 21, 5}, {21, 21, 4}, {31, 32, 8},
                                    {32, 40, 2}, {40, 63, 4}, {63, 63, 1}, {48, 63, 7}};
    for (int t = CC_KV_F32; t <= CC_KV_BF16; t++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            const int n = shapes[k][0], cap = shapes[k][1], H = shapes[k][2];
            const int ldw = cap + 1;
            Cache16 c;
            cache16_fill(&c, (enum CcKvType)t, H, cap, n);
            float *q = randv(16 * (size_t)H), *ks = randv(16 * (size_t)H);
            float *vs = randv(16 * (size_t)H);
            float *out = nanv(16 * (size_t)H), *ref = nanv(16 * (size_t)H);
            float *w = nanv((size_t)H * ldw), *wref = nanv((size_t)H * ldw);
            dsp.attend16[t](out, w, ldw, q, cache16_keys(&c), c.hsh, cap, cache16_values(&c), c.hsh,
                            16, ks, vs, n, H, 0.25f);
            cc_attend16_ref((enum CcKvType)t, ref, wref, ldw, q, cache16_keys(&c), c.hsh, cap,
                            cache16_values(&c), c.hsh, 16, ks, vs, n, H, 0.25f);
            double dout = max_diff(out, ref, 16 * (size_t)H), dw = 0;
            for (int h = 0; h < H; h++)
                dw = fmax(dw, max_diff(w + (size_t)h * ldw, wref + (size_t)h * ldw, n + 1));
            if (dout > 1e-5 || dw > 1e-6)
                printf("attend16 kv %d n %d cap %d H %d: max |dout| %.3g, |dw| %.3g\n", t, n, cap,
                       H, dout, dw);
            assert_true(dout <= 1e-5 && dw <= 1e-6);
            free(c.mem), free(q), free(ks), free(vs), free(out), free(ref), free(w), free(wref);
        }
}

static void test_dsp_portable_has_no_register_kernels(void **state)
{
    (void)state;
    CcAttentionDsp dsp;
    cc_attention_dsp_init(&dsp, 1);
    for (int t = CC_KV_F32; t <= CC_KV_BF16; t++)
        assert_null(dsp.attend16[t]);
    cc_attention_dsp_init(&dsp, 0);
    int avx512 = 0;
#if defined(__x86_64__)
    avx512 = !!__builtin_cpu_supports("avx512f");
#endif
    for (int t = CC_KV_F32; t <= CC_KV_BF16; t++)
        assert_int_equal(dsp.attend16[t] != NULL, avx512);
}

/* Plain keys (DK, ldk) with n valid columns, values (n, DK); NaN elsewhere and in the 16
 * floats of slack the DK = 16 kernel may read. */
static void check_cached(int DK, int n, int ldk)
{
    float *Kt = nanv((size_t)DK * ldk + 16), *V = randv((size_t)n * DK + 1);
    for (int d = 0; d < DK; d++)
        for (int j = 0; j < n; j++)
            Kt[(size_t)d * ldk + j] = 2 * frand();
    float *q = randv(DK), *ks = randv(DK), *vs = randv(DK);
    float *out = nanv(DK), *ref = nanv(DK), *w = nanv((size_t)n + 17), *wref = nanv((size_t)n + 1);
    cc_attend_cached_ref(ref, wref, q, Kt, ldk, V, ks, vs, n, DK, 0.3f);
    for (int sixteen = 0; sixteen < 1 + (DK == 16); sixteen++) {
        if (sixteen)
            cc_attend_cached16(out, w, q, Kt, ldk, V, ks, vs, n, 0.3f);
        else
            cc_attend_cached(out, w, q, Kt, ldk, V, ks, vs, n, DK, 0.3f);
        double dout = max_diff(out, ref, DK), dw = max_diff(w, wref, (size_t)n + 1);
        if (dout > 1e-5 || dw > 1e-6)
            printf("attend_cached%s DK %d n %d ldk %d: max |dout| %.3g, |dw| %.3g\n",
                   sixteen ? "16" : "", DK, n, ldk, dout, dw);
        assert_true(dout <= 1e-5 && dw <= 1e-6);
    }
    free(Kt), free(V), free(q), free(ks), free(vs), free(out), free(ref), free(w), free(wref);
}

static void test_attend_cached_matches_reference(void **state)
{
    (void)state;
    static const int shapes[][3] = {/* DK, n, ldk */
                                    {16, 0, 5},   {16, 1, 1},   {16, 15, 21}, {16, 16, 16},
                                    {16, 21, 21}, {16, 33, 40}, {8, 5, 5},    {8, 21, 30},
                                    {24, 7, 9},   {32, 40, 63}, {4, 1, 3}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_cached(shapes[k][0], shapes[k][1], shapes[k][2]);
}

/* q, k, v rows of (3·DK + 5) floats as in the engine's qkv matrix; out rows strided by
 * DK + 3, whose padding must stay untouched. */
static void check_causal(int DK, int n)
{
    const int ld = 3 * DK + 5, ldo = DK + 3;
    float *qkv = randv((size_t)n * ld), *Kt = nanv((size_t)DK * n + 16), *s = nanv((size_t)n + 16);
    float *out = nanv((size_t)n * ldo), *ref = nanv((size_t)n * ldo);
    cc_attend_causal_ref(ref, ldo, qkv, qkv + DK, qkv + 2 * DK, ld, n, DK, 0.3f);
    for (int sixteen = 0; sixteen < 1 + (DK == 16); sixteen++) {
        for (size_t i = 0; i < (size_t)n * ldo; i++)
            out[i] = NAN;
        if (sixteen)
            cc_attend_causal16(out, ldo, qkv, qkv + DK, qkv + 2 * DK, ld, n, 0.3f, Kt, s);
        else
            cc_attend_causal(out, ldo, qkv, qkv + DK, qkv + 2 * DK, ld, n, DK, 0.3f, Kt, s);
        double d = 0;
        for (int i = 0; i < n; i++) {
            d = fmax(d, max_diff(out + (size_t)i * ldo, ref + (size_t)i * ldo, DK));
            for (int c = DK; c < ldo; c++)
                assert_true(isnan(out[(size_t)i * ldo + c]));
        }
        if (d > 1e-5)
            printf("attend_causal%s DK %d n %d: max |dout| %.3g\n", sixteen ? "16" : "", DK, n, d);
        assert_true(d <= 1e-5);
    }
    free(qkv), free(Kt), free(s), free(out), free(ref);
}

static void test_attend_causal_matches_reference(void **state)
{
    (void)state;
    static const int shapes[][2] = {{16, 1},  {16, 5}, {16, 16}, {16, 17}, {16, 21},
                                    {16, 40}, {8, 1},  {8, 21},  {24, 9},  {32, 33}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_causal(shapes[k][0], shapes[k][1]);
}

/* Every key lands where the layout's definition puts it, blocked and plain. */
static void test_keys_transposed_layouts(void **state)
{
    (void)state;
    static const int ncs[] = {1, 5, 15, 16, 17, 21, 32, 40, 63};
    for (size_t k = 0; k < sizeof ncs / sizeof ncs[0]; k++)
        for (int blocked = 0; blocked < 2; blocked++) {
            const int nc = ncs[k], DK = 16, ld = 3 * DK + 1;
            float *rows = randv((size_t)nc * ld), *kt = nanv((size_t)DK * nc);
            cc_attention_keys_t(kt, rows + DK, (size_t)ld, nc, DK, blocked);
            for (int j = 0; j < nc; j++)
                for (int c = 0; c < DK; c++) {
                    int b = j / 16;
                    size_t at = (size_t)c * nc + j;
                    if (blocked)
                        at = (size_t)b * 256 + (size_t)c * cc_kblock_width(nc, b) + j % 16;
                    assert_true(kt[at] == rows[(size_t)j * ld + DK + c]);
                }
            free(rows), free(kt);
        }
    /* plain, another DK */
    float rows[7 * 8], kt[8 * 7];
    for (int i = 0; i < 7 * 8; i++)
        rows[i] = (float)i;
    cc_attention_keys_t(kt, rows, 8, 7, 8, 0);
    for (int j = 0; j < 7; j++)
        for (int c = 0; c < 8; c++)
            assert_true(kt[c * 7 + j] == rows[j * 8 + c]);
}

/* ---- --bench ---------------------------------------------------------------------------- */

typedef struct BenchArgs {
    int DK, n, H, cap;
    enum CcKvType t;
    CcAttend16 fast16;
    Cache16 c;
    float *q, *ks, *vs, *out, *w, *Kt, *V, *qkv, *s;
} BenchArgs;

static void run_attend16(const void *arg)
{
    const BenchArgs *a = arg;
    a->fast16(a->out, a->w, a->cap + 1, a->q, cache16_keys(&a->c), a->c.hsh, a->cap,
              cache16_values(&a->c), a->c.hsh, 16, a->ks, a->vs, a->n, a->H, 0.25f);
}

static void run_attend16_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_attend16_ref(a->t, a->out, a->w, a->cap + 1, a->q, cache16_keys(&a->c), a->c.hsh, a->cap,
                    cache16_values(&a->c), a->c.hsh, 16, a->ks, a->vs, a->n, a->H, 0.25f);
}

static void run_cached16(const void *arg)
{
    const BenchArgs *a = arg;
    cc_attend_cached16(a->out, a->w, a->q, a->Kt, a->n, a->V, a->ks, a->vs, a->n, 0.25f);
}

static void run_cached(const void *arg)
{
    const BenchArgs *a = arg;
    cc_attend_cached(a->out, a->w, a->q, a->Kt, a->n, a->V, a->ks, a->vs, a->n, a->DK, 0.25f);
}

static void run_cached_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_attend_cached_ref(a->out, a->w, a->q, a->Kt, a->n, a->V, a->ks, a->vs, a->n, a->DK, 0.25f);
}

static void run_causal16(const void *arg)
{
    const BenchArgs *a = arg;
    cc_attend_causal16(a->out, a->DK, a->qkv, a->qkv + a->DK, a->qkv + 2 * a->DK, 3 * a->DK, a->n,
                       0.25f, a->Kt, a->s);
}

static void run_causal(const void *arg)
{
    const BenchArgs *a = arg;
    cc_attend_causal(a->out, a->DK, a->qkv, a->qkv + a->DK, a->qkv + 2 * a->DK, 3 * a->DK, a->n,
                     a->DK, 0.25f, a->Kt, a->s);
}

static void run_causal_ref(const void *arg)
{
    const BenchArgs *a = arg;
    cc_attend_causal_ref(a->out, a->DK, a->qkv, a->qkv + a->DK, a->qkv + 2 * a->DK, 3 * a->DK, a->n,
                         a->DK, 0.25f);
}

/* The default model's shapes: N = 21 cached tokens, H = 4 heads of DK = 16. */
static int bench(void)
{
    BenchArgs a = {.DK = 16, .n = 21, .H = 4, .cap = 21};
    const size_t D = 16 * 4;
    a.q = randv(D), a.ks = randv(D), a.vs = randv(D), a.out = randv(D * 32);
    a.w = randv(64 * 8), a.Kt = randv(D * 64 + 16), a.V = randv(D * 64), a.s = randv(64 + 16);
    a.qkv = randv(3 * D * 64);
    printf("%-44s %13s %13s %8s\n", "kernel (n = 21 tokens)", "fast", "reference", "ref/fast");
    CcAttentionDsp dsp;
    cc_attention_dsp_init(&dsp, 0);
    static const char *const tname[] = {"f32", "f16", "bf16"};
    for (int t = CC_KV_F32; t <= CC_KV_BF16; t++) {
        char name[64];
        if (!dsp.attend16[t]) {
            printf("attend16 %s: no AVX-512 on this CPU\n", tname[t]);
            continue;
        }
        a.t = (enum CcKvType)t;
        a.fast16 = dsp.attend16[t];
        cache16_fill(&a.c, a.t, a.H, a.cap, a.n);
        snprintf(name, sizeof name, "attend16 %s, 4 heads (AVX-512 registers)", tname[t]);
        tl_bench_pair(name, run_attend16, run_attend16_ref, &a);
        free(a.c.mem);
    }
    tl_bench_pair("attend_cached16, 1 head", run_cached16, run_cached_ref, &a);
    tl_bench_pair("attend_cached DK 16, 1 head", run_cached, run_cached_ref, &a);
    tl_bench_pair("attend_causal16, 1 head", run_causal16, run_causal_ref, &a);
    tl_bench_pair("attend_causal DK 16, 1 head", run_causal, run_causal_ref, &a);
    a.DK = 32;
    tl_bench_pair("attend_cached DK 32, 1 head", run_cached, run_cached_ref, &a);
    tl_bench_pair("attend_causal DK 32, 1 head", run_causal, run_causal_ref, &a);
    free(a.q), free(a.ks), free(a.vs), free(a.out), free(a.w), free(a.Kt), free(a.V), free(a.s);
    free(a.qkv);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attend16_matches_reference),
        cmocka_unit_test(test_dsp_portable_has_no_register_kernels),
        cmocka_unit_test(test_attend_cached_matches_reference),
        cmocka_unit_test(test_attend_causal_matches_reference),
        cmocka_unit_test(test_keys_transposed_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
