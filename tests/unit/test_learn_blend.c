/*
 * test_learn_blend.c — cc_learn_blend_seasonal, the forecast combination of a tx/3 model
 * with the one-day seasonal naive written as a tx/3 file (docs/learning.md, "Blending with
 * the seasonal naive"): served by the engine, the blended file's mean equals
 * a·(the model's mean) + (1 − a)·x_{t+1+k-D} at every step and horizon, for a linear window
 * shorter than a day (widened) and longer (kept), a in {0, 0.3, 0.7, 1}; its sd is the
 * model's; it survives a save and load; bad weights and models are refused.
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

#include "cc_engine.h"
#include "cc_learn.h"
#include "testlib.h"

#define TWO_PI 6.283185307179586
#define EPS32 1.1920929e-7
enum { DAY = 24, HZ = 6, T = 4 * DAY, P0 = 420000 };

/* Two KPIs of different levels: a daily cycle plus noise (x[t][f]). */
static void series(float x[T][2])
{
    uint64_t rng = 7;
    for (int t = 0; t < T; t++)
        for (int f = 0; f < 2; f++)
            x[t][f] = (float)((f ? 40.0 : 900.0) * (1 + 0.4 * sin(TWO_PI * t / DAY + f) +
                                                    0.1 * (tl_rng_uniform(&rng) - 0.5)));
}

/* A random tx/3 model of hourly steps, linear window R, with biases on the head and the
 * linear path and a floor, so that every part the blend touches is non-zero. */
static CcModel *model(int R)
{
    CcHparams hp;
    tl_hparams_tiny(&hp);
    hp.horizon = HZ;
    hp.linear_window = R;
    hp.step_seconds = 3600;
    CcModel *m = NULL;
    tl_model_open(&m, &hp, 11 + (uint64_t)R);
    uint64_t rng = 3;
    for (int k = 0; k < HZ; k++) {
        m->w.lin_b[k] = 0.2f * (tl_rng_float(&rng) - 0.5f);
        m->w.head_b[2 * k] = 0.5f * (tl_rng_float(&rng) - 0.5f); /* the init's are 0 */
        m->w.head_b[2 * k + 1] = 0.2f * (tl_rng_float(&rng) - 0.5f);
    }
    m->w.norm_floor[0] = 5.0f, m->w.norm_floor[1] = 0.5f;
    return m;
}

/* The engine's forecasts of m on x: mean[t][f][k], sd[t][f][k], mu/sigma[t][f]. */
typedef struct Run {
    double mean[T][2][HZ], sd[T][2][HZ], mu[T][2], sigma[T][2];
    int valid[T];
} Run;

static void run(const CcModel *m, float x[T][2], Run *out)
{
    CcEngine *e = NULL;
    CcCell *c = NULL;
    char err[256];
    assert_int_equal(cc_engine_open(&e, m, NULL, err, sizeof err), 0);
    assert_int_equal(cc_cell_open(&c, e), 0);
    for (int t = 0; t < T; t++) {
        CcStepInput in = {.cell = c, .step = P0 + t, .values = x[t]};
        int status = 0;
        assert_int_equal(cc_engine_step(e, &in, 1, &status), 0);
        assert_int_equal(status, 0);
        CcForecast fc;
        cc_cell_forecast(c, &fc);
        out->valid[t] = fc.valid;
        for (int f = 0; f < 2 && fc.valid; f++) {
            out->mu[t][f] = fc.mu[f], out->sigma[t][f] = fc.sigma[f];
            for (int k = 0; k < HZ; k++)
                cc_forecast_point(&fc, f, k, &out->mean[t][f][k], &out->sd[t][f][k]);
        }
    }
    cc_cell_close(&c);
    cc_engine_close(&e);
}

/* The float32 rounding of both forecasts at (t, f, k), from model.md steps 6-7: the head's
 * dot product of d terms (the last LayerNorm's output bounded by |g|·sqrt(d) + |b|), the
 * linear path's R' terms over r_i = xn_{t-R'+1+i} - xn_t (cold start: xn_{p0}), the bias
 * and xn_t, times sigma, plus mu and the seasonal value; each sum of n terms within
 * n·eps of its absolute sum. */
static double tolerance(const CcModel *b, float x[T][2], const Run *r, int t, int f, int k)
{
    const CcHparams *h = &b->hp;
    const int d = h->d_model, R = h->linear_window, last = h->n_layers - 1;
    double mu = r->mu[t][f], sg = r->sigma[t][f], head = fabs(b->w.head_b[2 * k]);
    for (int j = 0; j < d; j++)
        head += fabs(b->w.head_w[(size_t)2 * k * d + j]) *
                (fabs(b->w.ln2_g[last * d + j]) * sqrt(d) + fabs(b->w.ln2_b[last * d + j]));
    double xt = (x[t][f] - mu) / sg, lin = fabs(b->w.lin_b[k]) + fabs(xt);
    for (int i = 0; i < R; i++) {
        int p = t - R + 1 + i;
        lin += fabs(b->w.lin_w[(size_t)k * R + i]) * fabs((x[p < 0 ? 0 : p][f] - mu) / sg - xt);
    }
    int s = t + 1 + k - DAY;
    return 2 * EPS32 * (R + d + 4) * (sg * (head + lin) + fabs(mu) + fabs(x[s][f]));
}

static void check_blend(int R)
{
    static float x[T][2];
    static Run rm, rb;
    series(x);
    CcModel *m = model(R);
    run(m, x, &rm);
    const double weights[] = {0, 0.3, 0.7, 1};
    for (size_t w = 0; w < sizeof weights / sizeof *weights; w++) {
        double a = weights[w];
        CcModel *b = NULL;
        char err[256];
        assert_int_equal(cc_learn_blend_seasonal(&b, m, a, err, sizeof err), 0);
        assert_int_equal(b->hp.linear_window, R > DAY ? R : DAY);
        run(b, x, &rb);
        double worst = 0;
        int checked = 0;
        for (int t = DAY - 1; t < T; t++) { /* every target has its value a day before */
            assert_int_equal(rb.valid[t], rm.valid[t]);
            for (int f = 0; f < 2 && rm.valid[t]; f++) {
                assert_true(rb.mu[t][f] == rm.mu[t][f] && rb.sigma[t][f] == rm.sigma[t][f]);
                for (int k = 0; k < HZ; k++) {
                    double want = a * rm.mean[t][f][k] + (1 - a) * x[t + 1 + k - DAY][f];
                    double err_abs = fabs(rb.mean[t][f][k] - want);
                    double tol = tolerance(b, x, &rb, t, f, k);
                    if (err_abs > tol)
                        fail_msg("R %d a %g t %d f %d k %d: blended %.9g, want %.9g (tol %.3g)", R,
                                 a, t, f, k, rb.mean[t][f][k], want, tol);
                    worst = fmax(worst, err_abs / tol);
                    /* log-sigma and calibration untouched: the same sd */
                    assert_true(fabs(rb.sd[t][f][k] - rm.sd[t][f][k]) <=
                                EPS32 * (b->hp.d_model + 4) * rm.sd[t][f][k]);
                    checked++;
                }
            }
        }
        assert_true(checked > 0);
        printf("R %d, a %.1f: %d forecasts, worst |error| %.2g of the tolerance\n", R, a, checked,
               worst);
        cc_model_close(&b);
    }
    cc_model_close(&m);
}

static void test_blend_short_window(void **state)
{
    (void)state;
    check_blend(10); /* widened to a day */
}

static void test_blend_long_window(void **state)
{
    (void)state;
    check_blend(40); /* a day inside it */
}

/* The blended file is a valid tx/3 file: saved and loaded back, the same parameters and
 * the blend's weight in its metadata. */
static void test_blend_file(void **state)
{
    (void)state;
    CcModel *m = model(10), *b = NULL, *back = NULL;
    char err[256], path[] = "/tmp/test_learn_blend.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(cc_learn_blend_seasonal(&b, m, 0.7, err, sizeof err), 0);
    assert_int_equal(cc_model_save(b, path, err, sizeof err), 0);
    assert_int_equal(cc_model_open_file(&back, path, err, sizeof err), 0);
    unlink(path);
    assert_int_equal(back->n_params, b->n_params);
    assert_memory_equal(back->block, b->block, b->n_params * sizeof *b->block);
    const char *v = cc_hparams_get_extra(&back->hp, "blend_seasonal");
    assert_non_null(v);
    assert_string_equal(v, "0.7");
    cc_model_close(&back);
    cc_model_close(&b);
    cc_model_close(&m);
}

static void test_blend_refused(void **state)
{
    (void)state;
    CcModel *m = model(10), *b = NULL;
    char err[256];
    assert_int_equal(cc_learn_blend_seasonal(&b, m, -0.1, err, sizeof err), -EINVAL);
    assert_int_equal(cc_learn_blend_seasonal(&b, m, 1.5, err, sizeof err), -EINVAL);
    assert_int_equal(cc_learn_blend_seasonal(&b, m, NAN, err, sizeof err), -EINVAL);
    assert_null(b);
    m->hp.step_seconds = 7 * 3600; /* no whole number of steps in a day */
    assert_int_equal(cc_learn_blend_seasonal(&b, m, 0.5, err, sizeof err), -EINVAL);
    m->hp.step_seconds = 6 * 3600; /* 4 steps a day, horizon 6 */
    assert_int_equal(cc_learn_blend_seasonal(&b, m, 0.5, err, sizeof err), -EINVAL);
    cc_model_close(&m);
    CcHparams hp; /* tx/2: no linear path to carry the seasonal naive */
    tl_hparams_tiny(&hp);
    hp.step_seconds = 3600;
    tl_model_open(&m, &hp, 1);
    assert_int_equal(cc_learn_blend_seasonal(&b, m, 0.5, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "tx/2"));
    cc_model_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blend_short_window),
        cmocka_unit_test(test_blend_long_window),
        cmocka_unit_test(test_blend_file),
        cmocka_unit_test(test_blend_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
