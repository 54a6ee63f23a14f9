/*
 * test_engine.c — the incremental engine against the direct-evaluation oracle (cc_ref):
 * streaming over many patches from every alignment, batch invariance, threads, 16-bit KV,
 * cold start, ring wrap-around, restore, model swap, magnitudes, constant series; the same
 * for cellcast-tx/3 models (linear path, floor, calibration), with linear windows shorter and
 * longer than the tx/2 ring.
 * The streaming and batch-invariance tests run twice: with the engine's choice of attention
 * kernels (the AVX-512 register kernels where the CPU has AVX-512 and DK = 16) and with
 * portable_attention forced. On a CPU without AVX-512 both runs take the portable path.
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

#include "cc_engine.h"
#include "cc_ref.h"
#include "testlib.h"

static uint64_t rng_state = 99;
static double urand(void) { return tl_rng_uniform(&rng_state); }

static CcModel *small_model(uint64_t seed)
{
    CcHparams hp;
    tl_hparams_small(&hp);
    hp.tz_offset_s = 3600;
    CcModel *m = NULL;
    tl_model_open(&m, &hp, seed);
    /* make LayerNorm parameters and biases non-trivial so their errors show */
    for (size_t i = 0; i < (size_t)hp.n_layers * hp.d_model; i++) {
        m->w.ln1_g[i] = 1.0f + 0.3f * (float)(urand() - 0.5);
        m->w.ln2_b[i] = 0.2f * (float)(urand() - 0.5);
    }
    for (size_t i = 0; i < 3 * (size_t)hp.d_model * hp.n_layers; i++)
        m->w.qkv_b[i] = 0.2f * (float)(urand() - 0.5);
    return m;
}

static CcModel *default_model(uint64_t seed)
{
    CcHparams hp;
    cc_hparams_default(&hp);
    CcModel *m = NULL;
    tl_model_open(&m, &hp, seed);
    return m;
}

static const double kpi_scale[] = {3e8, 0.6, 40, 1e-3, 5, 1e4, 12, 0.02};

/* Steps at the start of every series made by make_series that repeat the first value (a
 * KPI constant for its first steps: the tx/3 floor alone makes sigma). */
static int const_prefix;

/* A realistic channel: diurnal shape, noise; magnitude chosen per feature. */
static void make_series(float *x, int T, int F, int64_t p0, int64_t S, uint64_t seed)
{
    rng_state = seed;
    for (int t = 0; t < T; t++)
        for (int f = 0; f < F; f++) {
            double ph = 2 * M_PI * (double)((p0 + t) * S % 86400) / 86400.0;
            double v = kpi_scale[f % 8] * (1 + 0.5 * sin(ph + f) + 0.2 * (urand() - 0.5));
            x[(size_t)t * F + f] = t < const_prefix && t > 0 ? x[f] : (float)v;
        }
}

/* Gives m (opened with linear_window > 0) a non-trivial tx/3 part: linear weights of the
 * size a trained one has, floors of 1 % of each KPI's magnitude, scales in [0.5, 2]. */
static void tx3_randomise(CcModel *m)
{
    const CcHparams *hp = &m->hp;
    size_t nl = (size_t)hp->horizon * hp->linear_window;
    for (size_t i = 0; i < nl; i++)
        m->w.lin_w[i] = (float)((urand() - 0.5) * 2 / sqrt((double)hp->linear_window));
    for (int k = 0; k < hp->horizon; k++)
        m->w.lin_b[k] = 0.2f * (float)(urand() - 0.5);
    for (int f = 0; f < hp->n_features; f++) {
        m->w.norm_floor[f] = (float)(0.01 * kpi_scale[f % 8]);
        for (int k = 0; k < hp->horizon; k++)
            m->w.sigma_scale[f * hp->horizon + k] = (float)(0.5 + 1.5 * urand());
    }
}

static CcModel *tx3_model(CcModel *(*base)(uint64_t), uint64_t seed, int linear_window)
{
    CcModel *b = base(seed), *m = NULL;
    CcHparams hp = b->hp;
    hp.linear_window = linear_window;
    assert_int_equal(cc_model_open(&m, &hp, NULL, 0), 0);
    memcpy(m->block, b->block, b->n_params * sizeof(float)); /* tx/2 parts come first */
    cc_model_close(&b);
    tx3_randomise(m);
    return m;
}

/* Checks that the engine took the attention path its settings and the CPU call for, so that
 * a run meant for one path cannot silently test the other. */
static void check_attention_path(const CcEngine *e, const CcModel *m, const CcEngineSettings *s)
{
    int avx512 = 0;
#if defined(__x86_64__)
    avx512 = !!__builtin_cpu_supports("avx512f");
#endif
    int reg = avx512 && !s->portable_attention && m->hp.d_model / m->hp.n_heads == 16 &&
              m->hp.n_patches <= 63;
    assert_string_equal(cc_engine_attention_path(e), reg ? "avx512" : "portable");
}

typedef struct Errors {
    double y, mu, sigma, sd; ///< sd: relative, served sd (cc_forecast_point) vs the oracle's
    int compared;
} Errors;

/* Streams a series through the engine; at every step compares with cc_ref. */
static Errors stream_vs_ref(const CcModel *m, const CcEngineSettings *s, int64_t p0, int T,
                            uint64_t seed)
{
    const CcHparams *hp = &m->hp;
    int F = hp->n_features, HZ2 = 2 * hp->horizon;
    float *x = malloc((size_t)T * F * sizeof(float)), *col = malloc((size_t)T * sizeof(float));
    float *pts_mean = malloc((size_t)F * hp->horizon * sizeof(float)),
          *pts_sd = malloc((size_t)F * hp->horizon * sizeof(float));
    float y[2 * 64], mu, sigma;
    Errors err = {0};
    make_series(x, T, F, p0, hp->step_seconds, seed);
    CcEngine *e = NULL;
    CcCell *c = NULL;
    assert_int_equal(cc_engine_open(&e, m, s, NULL, 0), 0);
    check_attention_path(e, m, s);
    assert_int_equal(cc_cell_open(&c, e), 0);
    for (int t = 0; t < T; t++) {
        CcStepInput in = {c, p0 + t, &x[(size_t)t * F]};
        int st = 1;
        assert_int_equal(cc_engine_step(e, &in, 1, &st), 0);
        assert_int_equal(st, 0);
        CcForecast fc;
        cc_cell_forecast(c, &fc);
        if (fc.valid)
            cc_forecast_points(&fc, pts_mean, pts_sd);
        for (int f = 0; f < F; f++) {
            for (int k = 0; k <= t; k++)
                col[k] = x[(size_t)k * F + f];
            int r = cc_ref_forward(m, f, col, p0, p0 + t, y, &mu, &sigma, NULL);
            if (r == -EAGAIN) {
                assert_false(fc.valid); /* cold-start rule agrees */
                continue;
            }
            assert_int_equal(r, 0);
            assert_true(fc.valid);
            assert_true(fc.step == p0 + t);
            for (int k = 0; k < HZ2; k++)
                err.y = fmax(err.y, fabs(fc.y[f * HZ2 + k] - y[k]));
            err.mu = fmax(err.mu, fabs(fc.mu[f] - mu) / (fabs(mu) + 1e-30));
            err.sigma = fmax(err.sigma, fabs(fc.sigma[f] - sigma) / sigma);
            for (int k = 0; k < hp->horizon; k++) {
                double mean, sd, scale = 1;
                if (hp->linear_window > 0)
                    scale = m->w.sigma_scale[f * hp->horizon + k];
                double want = exp((double)y[2 * k + 1]) * sigma * scale;
                cc_forecast_point(&fc, f, k, &mean, &sd);
                err.sd = fmax(err.sd, fabs(sd - want) / want);
                /* the batched float twin (online calibration's input) agrees */
                size_t i = (size_t)f * hp->horizon + k;
                err.sd = fmax(err.sd, fabs(pts_sd[i] - sd) / sd);
                err.y = fmax(err.y, fabs(pts_mean[i] - mean) / (fabs(mean) + sigma));
            }
            err.compared++;
        }
    }
    cc_cell_close(&c);
    cc_engine_close(&e);
    free(x);
    free(col);
    free(pts_mean);
    free(pts_sd);
    return err;
}

static const char *const path_name[] = {"engine's choice", "portable forced"};

static void test_streaming_equals_direct_every_alignment(void **state)
{
    (void)state;
    CcModel *m = small_model(1);
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    int64_t base = 1900000; /* ≈ unix time / 900: large absolute positions */
    for (int portable = 0; portable < 2; portable++) {
        s.portable_attention = portable;
        for (int align = 0; align < m->hp.patch_len; align++) {
            /* 40 patches: many times the ring (R = 27 steps) and the cache (N = 5) */
            Errors e = stream_vs_ref(m, &s, base + align, 160, 7 + align);
            printf("%s, alignment %d: %d forecasts, max |dy| %.3g, mu rel %.3g, sigma rel %.3g\n",
                   path_name[portable], align, e.compared, e.y, e.mu, e.sigma);
            assert_true(e.compared > 100);
            assert_true(e.y <= 1e-4);
            assert_true(e.mu <= 1e-6 && e.sigma <= 1e-5);
        }
    }
    cc_model_close(&m);
}

static void test_streaming_default_shape(void **state)
{
    (void)state;
    CcModel *m = default_model(2);
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    for (int portable = 0; portable < 2; portable++) {
        s.portable_attention = portable;
        /* hourly data around 2026; 30 patches = 480 steps, past the 352-step ring */
        Errors e = stream_vs_ref(m, &s, 1780000000 / 3600 + 5, 480, 3);
        printf("default shape, %s: %d forecasts, max |dy| %.3g, mu rel %.3g, sigma rel %.3g\n",
               path_name[portable], e.compared, e.y, e.mu, e.sigma);
        assert_true(e.y <= 1e-4);
    }
    cc_model_close(&m);
}

/* DK = 16 models whose caches span 1, 2 or 4 blocks of 16 tokens (full and tail blocks of
 * the blocked key layout, the 1- and 2-vector score paths) and head counts that are not a
 * multiple of 4 (the all-heads kernel's groups of 4 and its single-head remainder), with
 * f32 and 16-bit caches, against the direct evaluation. */
static void test_streaming_dk16_block_shapes(void **state)
{
    (void)state;
    static const int shapes[][2] = {{16, 2}, {31, 5}, {32, 4}, {40, 3}, {63, 1}}; /* N, H */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        CcHparams hp;
        cc_hparams_default(&hp);
        hp.n_features = 2;
        hp.patch_len = 2;
        hp.n_patches = shapes[i][0];
        hp.norm_window = 24;
        hp.n_heads = shapes[i][1];
        hp.d_model = 16 * hp.n_heads;
        hp.d_ff = 32;
        hp.horizon = 3;
        CcModel *m = NULL;
        assert_int_equal(cc_model_open(&m, &hp, NULL, 0), 0);
        cc_model_init_random(m, 40 + i);
        for (int kv = CC_KV_F32; kv <= CC_KV_BF16; kv++)
            for (int portable = 0; portable < 2; portable++) {
                CcEngineSettings s;
                cc_engine_default_settings(&s);
                s.kv_type = (enum CcKvType)kv;
                s.portable_attention = portable;
                Errors e =
                    stream_vs_ref(m, &s, 1780000000 / 3600 + 1, (hp.n_patches + 8) * 2, 5 + i);
                double tol = kv == CC_KV_F32 ? 1e-4 : kv == CC_KV_F16 ? 2e-3 : 1e-2;
                printf("DK 16, N %d, H %d, kv %d, %s: %d forecasts, max |dy| %.3g (tolerance %g)\n",
                       hp.n_patches, hp.n_heads, kv, path_name[portable], e.compared, e.y, tol);
                assert_true(e.compared > hp.n_patches);
                assert_true(e.y <= tol);
            }
        cc_model_close(&m);
    }
}

static void test_no_cache_and_threads_equal_streaming(void **state)
{
    (void)state;
    CcModel *m = small_model(3);
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    s.no_cache = 1;
    for (int portable = 0; portable < 2; portable++) {
        s.portable_attention = portable;
        Errors e = stream_vs_ref(m, &s, 1900003, 80, 11);
        printf("no-cache, %s: max |dy| %.3g\n", path_name[portable], e.y);
        assert_true(e.y <= 1e-4);
    }
    cc_model_close(&m);
}

/* Runs `ncells` cells for T steps; cell 0 carries the probe series. Returns cell 0's y. */
static void run_batch(const CcModel *m, const CcEngineSettings *s, int ncells, int T, float *y_out)
{
    const CcHparams *hp = &m->hp;
    int F = hp->n_features;
    CcEngine *e = NULL;
    assert_int_equal(cc_engine_open(&e, m, s, NULL, 0), 0);
    check_attention_path(e, m, s);
    CcCell **cells = calloc((size_t)ncells, sizeof *cells);
    float *x = malloc((size_t)ncells * T * F * sizeof(float));
    CcStepInput *in = calloc((size_t)ncells, sizeof *in);
    int64_t p0 = 1780000000 / 3600;
    for (int i = 0; i < ncells; i++) {
        assert_int_equal(cc_cell_open(&cells[i], e), 0);
        make_series(&x[(size_t)i * T * F], T, F, p0, hp->step_seconds, i == 0 ? 77 : 1000 + i);
    }
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < ncells; i++)
            in[i] = (CcStepInput){cells[i], p0 + t, &x[((size_t)i * T + t) * F]};
        assert_int_equal(cc_engine_step(e, in, ncells, NULL), 0);
    }
    CcForecast fc;
    cc_cell_forecast(cells[0], &fc);
    assert_true(fc.valid);
    memcpy(y_out, fc.y, (size_t)F * 2 * hp->horizon * sizeof(float));
    for (int i = 0; i < ncells; i++)
        cc_cell_close(&cells[i]);
    free(cells);
    free(x);
    free(in);
    cc_engine_close(&e);
}

/* A channel's outputs do not depend on its batch: 1 cell against 4096 channels per batch,
 * on one and on two threads, on both attention paths. */
static void check_batch_invariance(const CcModel *m, const char *what)
{
    int n = m->hp.n_features * 2 * m->hp.horizon;
    float *y1 = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float)),
          *y3 = malloc(n * sizeof(float));
    int T = 2 * m->hp.patch_len + 3; /* crosses boundaries: rebuild batches too */
    for (int portable = 0; portable < 2; portable++) {
        CcEngineSettings s;
        cc_engine_default_settings(&s);
        s.portable_attention = portable;
        run_batch(m, &s, 1, T, y1);
        s.max_batch_cells = 512;
        run_batch(m, &s, 4096 / m->hp.n_features, T, y2); /* 4096 channels per batch */
        s.n_threads = 2;
        run_batch(m, &s, 4096 / m->hp.n_features, T, y3);
        double d12 = 0, d13 = 0;
        for (int i = 0; i < n; i++) {
            d12 = fmax(d12, fabs(y1[i] - y2[i]));
            d13 = fmax(d13, fabs(y1[i] - y3[i]));
        }
        printf("%s, %s: batch 1 vs 4096 channels: max |dy| %.3g; vs 2 threads: %.3g\n", what,
               path_name[portable], d12, d13);
        assert_true(d12 <= 1e-5 && d13 <= 1e-5);
    }
    free(y1);
    free(y2);
    free(y3);
}

static void test_batch_invariance(void **state)
{
    (void)state;
    CcModel *m = default_model(4);
    check_batch_invariance(m, "tx/2");
    cc_model_close(&m);
}

static void test_16bit_kv_within_tolerance(void **state)
{
    (void)state;
    CcModel *m = default_model(5);
    int n = m->hp.n_features * 2 * m->hp.horizon;
    float *yf = malloc(n * sizeof(float)), *yh = malloc(n * sizeof(float));
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    run_batch(m, &s, 3, 200, yf);
    const char *names[] = {"f32", "f16", "bf16"};
    /* Stated tolerances on the head output (normalised units): f16 keeps 11 bits,
     * bf16 8 bits of the keys and values. */
    const double tol[] = {0, 2e-3, 1e-2};
    for (int kv = CC_KV_F16; kv <= CC_KV_BF16; kv++) {
        s.kv_type = (enum CcKvType)kv;
        run_batch(m, &s, 3, 200, yh);
        double d = 0;
        for (int i = 0; i < n; i++)
            d = fmax(d, fabs(yf[i] - yh[i]));
        printf("%s KV cache vs f32: max |dy| %.3g (tolerance %.g)\n", names[kv], d, tol[kv]);
        assert_true(d <= tol[kv]);
    }
    free(yf);
    free(yh);
    cc_model_close(&m);
}

static void test_cold_start_and_refusals(void **state)
{
    (void)state;
    CcModel *m = small_model(6);
    CcEngine *e = NULL;
    CcCell *c = NULL;
    assert_int_equal(cc_engine_open(&e, m, NULL, NULL, 0), 0);
    assert_int_equal(cc_cell_open(&c, e), 0);
    float v[3] = {1, 2, 3};
    int P = m->hp.patch_len, st;
    /* p0 = 4k+2: the first complete patch is [4k+4, 4k+7] */
    int64_t p0 = 4000 + 2;
    for (int64_t p = p0; p < p0 + 6; p++) {
        CcStepInput in = {c, p, v};
        assert_int_equal(cc_engine_step(e, &in, 1, &st), 0);
        assert_int_equal(st, 0);
        CcForecast fc;
        cc_cell_forecast(c, &fc);
        int expect = p >= p0 + P + 1; /* first complete patch is [p0+2, p0+5] */
        assert_int_equal(fc.valid, expect);
    }
    /* gap, repeat, NaN, cell twice: refused, cell unchanged */
    CcStepInput gap = {c, p0 + 8, v};
    assert_int_equal(cc_engine_step(e, &gap, 1, &st), 0);
    assert_int_equal(st, -EINVAL);
    CcStepInput again = {c, p0 + 5, v};
    assert_int_equal(cc_engine_step(e, &again, 1, &st), 0);
    assert_int_equal(st, -EINVAL);
    float bad[3] = {1, NAN, 3};
    CcStepInput nan = {c, p0 + 6, bad};
    assert_int_equal(cc_engine_step(e, &nan, 1, &st), 0);
    assert_int_equal(st, -ERANGE);
    CcStepInput twice[2] = {{c, p0 + 6, v}, {c, p0 + 7, v}};
    int st2[2];
    assert_int_equal(cc_engine_step(e, twice, 2, st2), 0);
    assert_int_equal(st2[0], 0);
    assert_int_equal(st2[1], -EINVAL);
    int64_t first, last;
    cc_cell_span(c, &first, &last);
    assert_true(first == p0 && last == p0 + 6);
    /* reset: cold start again */
    cc_cell_reset(c);
    CcStepInput fresh = {c, 99999, v};
    assert_int_equal(cc_engine_step(e, &fresh, 1, &st), 0);
    assert_int_equal(st, 0);
    CcForecast fc;
    cc_cell_forecast(c, &fc);
    assert_false(fc.valid);
    cc_cell_close(&c);
    cc_engine_close(&e);
    cc_model_close(&m);
}

static void test_constant_series_is_finite(void **state)
{
    (void)state;
    CcModel *m = small_model(7);
    CcEngine *e = NULL;
    CcCell *c = NULL;
    assert_int_equal(cc_engine_open(&e, m, NULL, NULL, 0), 0);
    assert_int_equal(cc_cell_open(&c, e), 0);
    float v[3] = {0, 5e9f, 0.25f};
    for (int64_t p = 100; p < 160; p++) {
        CcStepInput in = {c, p, v};
        assert_int_equal(cc_engine_step(e, &in, 1, NULL), 0);
    }
    CcForecast fc;
    cc_cell_forecast(c, &fc);
    assert_true(fc.valid);
    for (int f = 0; f < 3; f++) {
        double mean, sd;
        cc_forecast_point(&fc, f, 0, &mean, &sd);
        assert_true(isfinite(mean) && isfinite(sd) && sd > 0);
        assert_true(fabs(fc.mu[f] - v[f]) <= 1e-6 * fabs(v[f]));
        assert_true(fabs(fc.sigma[f] - 1e-5 * (1 + fabs(v[f]))) <= 1e-3 * fc.sigma[f]);
    }
    cc_cell_close(&c);
    cc_engine_close(&e);
    cc_model_close(&m);
}

static void test_restore_history_and_model_swap(void **state)
{
    (void)state;
    CcModel *m = small_model(8), *m2 = small_model(9);
    const int F = 3, T = 70;
    float x[70 * 3];
    make_series(x, T, F, 5000, 900, 5);
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    s.keep_attention = 1;
    CcEngine *e = NULL;
    CcCell *a = NULL, *b = NULL;
    assert_int_equal(cc_engine_open(&e, m, &s, NULL, 0), 0);
    assert_int_equal(cc_cell_open(&a, e), 0);
    assert_int_equal(cc_cell_open(&b, e), 0);
    for (int t = 0; t < T; t++) {
        CcStepInput in = {a, 5000 + t, &x[t * F]};
        assert_int_equal(cc_engine_step(e, &in, 1, NULL), 0);
    }
    /* b gets a's history from a snapshot-like copy, then a forecast without new data */
    int64_t first, last;
    cc_cell_span(a, &first, &last);
    int cnt = (int)(last - first + 1);
    float *hist = malloc((size_t)cnt * F * sizeof(float));
    assert_int_equal(cc_cell_history(a, first, cnt, hist), 0);
    assert_int_equal(cc_cell_restore(b, cc_cell_seq_start(a), first, cnt, hist), 0);
    CcStepInput re = {b, last, NULL};
    int st;
    assert_int_equal(cc_engine_step(e, &re, 1, &st), 0);
    assert_int_equal(st, 0);
    CcForecast fa, fb;
    cc_cell_forecast(a, &fa);
    cc_cell_forecast(b, &fb);
    assert_true(fa.valid && fb.valid);
    for (int i = 0; i < F * 2 * 6; i++)
        assert_true(fabs(fa.y[i] - fb.y[i]) <= 1e-5);
    /* attention rows sum to one and point at patch ends */
    float w[2 * 2 * 6];
    int64_t ends[6];
    int nt = 0;
    assert_int_equal(cc_cell_attention(a, 1, w, ends, &nt), 0);
    assert_int_equal(nt, 6);
    assert_true(ends[5] == last && (ends[4] + 1) % 4 == 0);
    for (int r = 0; r < 4; r++) {
        double sum = 0;
        for (int j = 0; j < nt; j++)
            sum += w[r * nt + j];
        assert_true(fabs(sum - 1) < 1e-5);
    }
    /* swap the model: the next recompute equals the oracle of the new weights */
    assert_int_equal(cc_engine_set_model(e, m2), 0);
    assert_int_equal(cc_engine_step(e, &re, 1, &st), 0);
    cc_cell_forecast(b, &fb);
    float col[70], y[12], mu, sigma;
    for (int t = 0; t < T; t++)
        col[t] = x[t * F + 2];
    assert_int_equal(cc_ref_forward(m2, 2, col, 5000, last, y, &mu, &sigma, NULL), 0);
    for (int k = 0; k < 12; k++)
        assert_true(fabs(fb.y[2 * 12 + k] - y[k]) <= 1e-4);
    free(hist);
    cc_cell_close(&a);
    cc_cell_close(&b);
    cc_engine_close(&e);
    cc_model_close(&m);
    cc_model_close(&m2);
}

/* Opens an engine (default settings) and one cell on m and steps x (T, F) in from p0. */
static void open_and_stream(const CcModel *m, const float *x, int T, int64_t p0, CcEngine **e,
                            CcCell **c)
{
    const int F = m->hp.n_features;
    assert_int_equal(cc_engine_open(e, m, NULL, NULL, 0), 0);
    assert_int_equal(cc_cell_open(c, *e), 0);
    for (int t = 0; t < T; t++) {
        CcStepInput in = {*c, p0 + t, &x[t * F]};
        assert_int_equal(cc_engine_step(*e, &in, 1, NULL), 0);
    }
}

/* The ring keeps exactly the newest R steps: after several wraps the history read back is
 * the input, older steps are refused, and forecasts still match the oracle (checked in
 * test_streaming_*). */
static void test_ring_wrap_around(void **state)
{
    (void)state;
    CcModel *m = small_model(10);
    const int F = 3, T = 100; /* R = max(N·P + P, M + P − 1) = 27 here: ~3.7 wraps */
    float x[100 * 3], back[100 * 3];
    make_series(x, T, F, 7000, 900, 21);
    CcEngine *e = NULL;
    CcCell *c = NULL;
    open_and_stream(m, x, T, 7000, &e, &c);
    int64_t first, last;
    cc_cell_span(c, &first, &last);
    int R = (int)(last - first + 1);
    assert_int_equal(R, 27);
    assert_true(last == 7000 + T - 1);
    assert_int_equal(cc_cell_history(c, first, R, back), 0);
    for (int i = 0; i < R * F; i++)
        assert_true(back[i] == x[(T - R) * F + i]);
    assert_int_equal(cc_cell_history(c, first - 1, 2, back), -ERANGE);
    assert_int_equal(cc_cell_history(c, last, 2, back), -ERANGE);
    assert_int_equal(cc_cell_seq_start(c), 7000);
    cc_cell_close(&c);
    cc_engine_close(&e);
    cc_model_close(&m);
}

/* ---- cellcast-tx/3 ------------------------------------------------------------------ */

/* Every alignment, both attention paths, linear windows inside the tx/2 ring (12 < 27), past
 * it (40: the ring grows to 40) and over the whole stream's start (cold starts with fewer
 * than RL values); the first 30 steps constant, so the floor alone makes sigma there. */
static void test_tx3_streaming_every_alignment(void **state)
{
    (void)state;
    static const int windows[] = {12, 40};
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    int64_t base = 1900000;
    const_prefix = 30;
    for (size_t wi = 0; wi < 2; wi++) {
        CcModel *m = tx3_model(small_model, 21 + wi, windows[wi]);
        CcEngine *e = NULL;
        assert_int_equal(cc_engine_open(&e, m, &s, NULL, 0), 0);
        int ring = 5 * 4 + 4 > 24 + 4 - 1 ? 5 * 4 + 4 : 24 + 4 - 1;
        assert_int_equal(cc_engine_ring_steps(e), windows[wi] > ring ? windows[wi] : ring);
        cc_engine_close(&e);
        for (int portable = 0; portable < 2; portable++) {
            s.portable_attention = portable;
            for (int align = 0; align < m->hp.patch_len; align++) {
                Errors r = stream_vs_ref(m, &s, base + align, 160, 7 + align);
                printf("tx/3 R %d, %s, alignment %d: %d forecasts, max |dy| %.3g, mu rel %.3g, "
                       "sigma rel %.3g, sd rel %.3g\n",
                       windows[wi], path_name[portable], align, r.compared, r.y, r.mu, r.sigma,
                       r.sd);
                assert_true(r.compared > 100);
                assert_true(r.y <= 1e-4);
                assert_true(r.mu <= 1e-6 && r.sigma <= 1e-5 && r.sd <= 1e-4);
            }
        }
        cc_model_close(&m);
    }
    const_prefix = 0;
}

/* The default shape with R = 336 (inside the 352-step ring) and R = 512 (the ring grows). */
static void test_tx3_streaming_default_shape(void **state)
{
    (void)state;
    static const int windows[] = {336, 512};
    for (size_t wi = 0; wi < 2; wi++) {
        CcModel *m = tx3_model(default_model, 31 + wi, windows[wi]);
        CcEngineSettings s;
        cc_engine_default_settings(&s);
        for (int portable = 0; portable < 2; portable++) {
            s.portable_attention = portable;
            Errors e = stream_vs_ref(m, &s, 1780000000 / 3600 + 5, 560, 3);
            printf("tx/3 R %d default shape, %s: %d forecasts, max |dy| %.3g, sd rel %.3g\n",
                   windows[wi], path_name[portable], e.compared, e.y, e.sd);
            assert_true(e.y <= 1e-4 && e.sd <= 1e-4);
        }
        cc_model_close(&m);
    }
}

static void test_tx3_batch_invariance(void **state)
{
    (void)state;
    CcModel *m = tx3_model(default_model, 41, 336);
    check_batch_invariance(m, "tx/3");
    cc_model_close(&m);
}

/* Hot swaps tx/2 -> tx/3 (R = 12: same ring, no rebind) -> tx/3 (R = 40: the ring grows,
 * the cell is refused until rebound; the kept 27 steps start a new cold sequence) -> tx/2,
 * each recompute equal to the oracle of the new weights, served sd with the new scales. */
static void test_tx3_model_swap(void **state)
{
    (void)state;
    CcModel *m = small_model(8), *m12 = tx3_model(small_model, 9, 12);
    CcModel *m40 = tx3_model(small_model, 10, 40);
    const int F = 3, T = 70, HZ = 6;
    float x[70 * 3], col[70], y[12], mu, sigma;
    make_series(x, T, F, 5000, 900, 5);
    CcEngine *e = NULL;
    CcCell *a = NULL;
    open_and_stream(m, x, T, 5000, &e, &a);
    const int64_t last = 5000 + T - 1;
    CcStepInput re = {a, last, NULL};
    const CcModel *seq[] = {m12, m40, m};
    const int ring[] = {27, 40, 27};
    for (int i = 0; i < 3; i++) {
        int st = 1;
        assert_int_equal(cc_engine_set_model(e, seq[i]), 0);
        assert_int_equal(cc_engine_ring_steps(e), ring[i]);
        assert_int_equal(cc_engine_step(e, &re, 1, &st), 0);
        if (i == 0) {
            assert_int_equal(st, 0);
        } else { /* the ring changed: laid out for the old shape until rebound */
            assert_int_equal(st, -ESTALE);
            assert_int_equal(cc_cell_rebind(a, e), 0);
            assert_int_equal(cc_engine_step(e, &re, 1, &st), 0);
            assert_int_equal(st, 0);
        }
        int64_t p0 = cc_cell_seq_start(a);
        assert_true(i == 0 ? p0 == 5000 : p0 == last - 26); /* 27 steps kept from the swap */
        CcForecast fc;
        cc_cell_forecast(a, &fc);
        assert_true(fc.valid);
        for (int f = 0; f < F; f++) {
            for (int t = 0; t < T; t++)
                col[t] = x[t * F + f];
            assert_int_equal(
                cc_ref_forward(seq[i], f, col + (p0 - 5000), p0, last, y, &mu, &sigma, NULL), 0);
            for (int k = 0; k < 2 * HZ; k++)
                assert_true(fabs(fc.y[f * 2 * HZ + k] - y[k]) <= 1e-4);
            for (int k = 0; k < HZ; k++) {
                double mean, sd,
                    scale = seq[i]->hp.linear_window ? seq[i]->w.sigma_scale[f * HZ + k] : 1;
                cc_forecast_point(&fc, f, k, &mean, &sd);
                assert_true(fabs(sd - exp((double)y[2 * k + 1]) * sigma * scale) <= 1e-4 * sd);
            }
        }
    }
    cc_cell_close(&a);
    cc_engine_close(&e);
    cc_model_close(&m);
    cc_model_close(&m12);
    cc_model_close(&m40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streaming_equals_direct_every_alignment),
        cmocka_unit_test(test_streaming_default_shape),
        cmocka_unit_test(test_streaming_dk16_block_shapes),
        cmocka_unit_test(test_no_cache_and_threads_equal_streaming),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_16bit_kv_within_tolerance),
        cmocka_unit_test(test_cold_start_and_refusals),
        cmocka_unit_test(test_constant_series_is_finite),
        cmocka_unit_test(test_restore_history_and_model_swap),
        cmocka_unit_test(test_ring_wrap_around),
        cmocka_unit_test(test_tx3_streaming_every_alignment),
        cmocka_unit_test(test_tx3_streaming_default_shape),
        cmocka_unit_test(test_tx3_batch_invariance),
        cmocka_unit_test(test_tx3_model_swap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
