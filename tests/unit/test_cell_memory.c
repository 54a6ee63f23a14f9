/* test_cell_memory.c — a cell's memory grows with its history (issue 16: ~100 KB per cell
 * that got one record made bogus cell ids cost gigabytes): the ring starts at one patch and
 * doubles up to R rows, keeping every step; the KV caches come with the first complete
 * patch; a one-record cell's resident memory stays a few KB (measured with RSS over 20,000
 * cells, the default model's shapes). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "cc_cell_internal.h"
#include "cc_engine.h"
#include "testlib.h"

/* The shipped default model's shapes (models/default.safetensors), random weights. */
static CcModel *default_shape_model(void)
{
    CcHparams hp;
    tl_hparams_small(&hp);
    hp.n_features = 8, hp.patch_len = 16, hp.n_patches = 21, hp.norm_window = 336;
    hp.d_model = 64, hp.n_heads = 4, hp.n_layers = 2, hp.d_ff = 128, hp.horizon = 24;
    for (int f = 0; f < hp.n_features; f++)
        snprintf(hp.features[f], sizeof hp.features[f], "k%d", f);
    CcModel *m = NULL;
    tl_model_open(&m, &hp, 3);
    return m;
}

static CcEngine *engine(const CcModel *m)
{
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    s.kv_type = CC_KV_F32;
    CcEngine *e = NULL;
    assert_int_equal(cc_engine_open(&e, m, &s, NULL, 0), 0);
    return e;
}

static void values(float *v, int F, int64_t p)
{
    for (int f = 0; f < F; f++)
        v[f] = (float)(10 * f + (p * 7 + f) % 13);
}

static void test_grows_with_history(void **state)
{
    (void)state;
    CcModel *m = default_shape_model();
    CcEngine *e = engine(m);
    const int F = 8, P = 16, R = cc_engine_ring_steps(e);
    CcCell *c = NULL;
    float v[8], out[8];
    assert_int_equal(cc_cell_open(&c, e), 0);
    assert_int_equal(c->RC, 16);
    assert_null(c->kv);
    const int64_t p0 = 1008; /* patches are aligned on absolute steps: 1008 starts one */
    for (int64_t p = p0; p < p0 + R + 40; p++) {
        values(v, F, p);
        CcStepInput in = {c, p, v};
        int st = -1;
        assert_int_equal(cc_engine_step(e, &in, 1, &st), 0);
        assert_int_equal(st, 0);
        int64_t n = p - p0 + 1;
        /* the caches exactly from the first complete patch (step p0 + P - 1) */
        if (n < P)
            assert_null(c->kv);
        else
            assert_non_null(c->kv);
        assert_true(c->RC >= (n < R ? n : R) && c->RC <= R);
        if (n < R)
            assert_true(c->RC < 2 * n || c->RC == 16);
        CcForecast fc;
        cc_cell_forecast(c, &fc);
        assert_int_equal(fc.valid, n >= P);
    }
    assert_int_equal(c->RC, R);
    /* every step the window holds survived the growths */
    int64_t first, last;
    cc_cell_span(c, &first, &last);
    assert_int_equal(last - first + 1, R);
    for (int64_t p = first; p <= last; p++) {
        values(v, F, p);
        assert_int_equal(cc_cell_history(c, p, 1, out), 0);
        for (int f = 0; f < F; f++)
            assert_true(out[f] == v[f]);
    }
    cc_cell_close(&c);
    cc_engine_close(&e);
    cc_model_close(&m);
}

/* A restore lays out the ring its history needs; a short one keeps a short ring. */
static void test_restore_sizes_ring(void **state)
{
    (void)state;
    CcModel *m = default_shape_model();
    CcEngine *e = engine(m);
    const int F = 8, R = cc_engine_ring_steps(e);
    float *vals = malloc((size_t)(R + 5) * F * sizeof(float));
    assert_non_null(vals);
    for (int i = 0; i < R + 5; i++)
        values(vals + (size_t)i * F, F, 500 + i);
    CcCell *c = NULL;
    assert_int_equal(cc_cell_open(&c, e), 0);
    assert_int_equal(cc_cell_restore(c, 500, 500, 40, vals), 0);
    assert_int_equal(c->RC, 64);
    assert_null(c->kv);
    CcStepInput in = {c, 539, NULL};
    int st = -1;
    assert_int_equal(cc_engine_step(e, &in, 1, &st), 0);
    assert_int_equal(st, 0);
    assert_non_null(c->kv);
    assert_int_equal(cc_cell_restore(c, 500, 500, R + 5, vals), 0);
    assert_int_equal(c->RC, R);
    float out[8];
    assert_int_equal(cc_cell_history(c, 500 + R + 4, 1, out), 0);
    for (int f = 0; f < F; f++)
        assert_true(out[f] == vals[(size_t)(R + 4) * F + f]);
    cc_cell_close(&c);
    free(vals);
    cc_engine_close(&e);
    cc_model_close(&m);
}

static long rss_bytes(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

static void test_one_record_cells_are_small(void **state)
{
    (void)state;
    enum { N = 20000 };
    CcModel *m = default_shape_model();
    CcEngine *e = engine(m);
    CcCell **cells = calloc(N, sizeof *cells);
    CcStepInput *in = calloc(N, sizeof *in);
    int *st = calloc(N, sizeof *st);
    float v[8];
    values(v, 8, 0);
    assert_true(cells && in && st);
    long r0 = rss_bytes();
    if (r0 < 0) {
        skip();
        return;
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(cc_cell_open(&cells[i], e), 0);
        in[i] = (CcStepInput){cells[i], 1000, v};
    }
    assert_int_equal(cc_engine_step(e, in, N, st), 0);
    double per = (double)(rss_bytes() - r0) / N;
    printf("one-record cell: %.0f bytes resident (engine state; at most %zu with full history)\n",
           per, cc_engine_cell_bytes(e));
    /* was ~100 KB (every cell laid out for its full history and caches); AddressSanitizer's
     * redzones and shadow memory roughly triple small allocations */
#if defined(__SANITIZE_ADDRESS__)
    assert_true(per < 16384);
#else
    assert_true(per < 4096);
#endif
    for (int i = 0; i < N; i++)
        cc_cell_close(&cells[i]);
    free(cells);
    free(in);
    free(st);
    cc_engine_close(&e);
    cc_model_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grows_with_history),
        cmocka_unit_test(test_restore_sizes_ring),
        cmocka_unit_test(test_one_record_cells_are_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
