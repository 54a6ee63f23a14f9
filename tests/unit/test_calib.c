/*
 * test_calib.c — lib/cc_calib, the fit of calib.sigma_scale: the per-(KPI, step) quantile
 * fit against cc_calib_scale, a known factor recovered by the default fit, the drift
 * shrinkage (halves that disagree pull the scale toward 1, halves that agree do not), the
 * pull of a KPI with few rows toward the others, the conformal order statistic, the step
 * pooling, the validation-only backtest, and bad input.
 *
 * Residuals are drawn as |z| = s·U·CC_Z80/0.8 with U uniform in [0, 1): their 0.8 quantile is
 * exactly s·CC_Z80, so the scale that covers 80 % is s.
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

#include "cc_calib.h"
#include "cc_metrics.h"
#include "testlib.h"

enum { F = 2, HZ = 8, S = 3, T = 600 };

static float draw(uint64_t *rs, double s) { return (float)(s * tl_rng_uniform(rs) * CC_Z80 / 0.8); }

/* S series × T origins of every (f, k), |z| of scale sc(f, k, t). */
static CcCalib *filled(const CcCalibSettings *cs, double (*sc)(int f, int k, int t), uint64_t seed)
{
    CcCalib *c;
    assert_int_equal(cc_calib_open(&c, F, HZ, cs), 0);
    uint64_t rs = seed;
    for (int s = 0; s < S; s++)
        for (int t = 0; t < T; t++)
            for (int f = 0; f < F; f++)
                for (int k = 0; k < HZ; k++)
                    assert_int_equal(cc_calib_add(c, s, 1000 + t, f, k, draw(&rs, sc(f, k, t))), 0);
    return c;
}

static double sc_known(int f, int k, int t)
{
    (void)f, (void)k, (void)t;
    return 2.5;
}

static double sc_two(int f, int k, int t)
{
    (void)k, (void)t;
    return f ? 2.5 : 0.4;
}

/* A model whose sd is off by a known factor (2.5 on every KPI and step) gets it back from
 * the default fit when validation is stationary (within the sampling error of 1,800 draws
 * per step); two KPIs off by different factors (0.4, 2.5) get theirs without the pull
 * toward each other (pool_n 0); the per-(f, k) quantile fit is cc_calib_scale of each
 * bucket. */
static void test_known_factor(void **state)
{
    (void)state;
    CcCalibSettings cs;
    cc_calib_defaults(&cs);
    CcCalib *c = filled(&cs, sc_known, 7);
    float sc[F * HZ];
    CcCalibReport rep;
    assert_int_equal(cc_calib_fit(c, sc, &rep), 0);
    double worst = 0;
    for (int f = 0; f < F; f++)
        for (int k = 0; k < HZ; k++)
            worst = fmax(worst, fabs(sc[f * HZ + k] / sc_known(f, k, 0) - 1));
    printf("stationary, factor 2.5: worst relative error %.4f; coverage %.3f -> %.3f, "
           "backtest %.3f, shrinkage %.3f-%.3f\n",
           worst, rep.cover_raw, rep.cover, rep.late_cover, rep.shrink_min, rep.shrink_max);
    assert_true(worst < 0.04);
    assert_true(fabs(rep.cover - 0.8) < 0.01 && fabs(rep.late_cover - 0.8) < 0.02);
    assert_true(rep.shrink_min > 0.99);
    assert_true(fabs(rep.cover_raw - 0.32) < 0.02); /* |z|/Z80 uniform in [0, 3.125) */
    assert_int_equal(rep.n, (size_t)S * T * F * HZ);
    cc_calib_close(&c);

    cs.pool_n = 0;
    c = filled(&cs, sc_two, 8);
    assert_int_equal(cc_calib_fit(c, sc, &rep), 0);
    for (int f = 0; f < F; f++)
        for (int k = 0; k < HZ; k++)
            assert_true(fabs(sc[f * HZ + k] / sc_two(f, k, 0) - 1) < 0.04);
    /* the raw coverage: 1 for the KPI 0.4 too wide, 0.32 for the one 2.5 too narrow */
    assert_true(fabs(rep.cover_raw - 0.66) < 0.02);
    cc_calib_close(&c);

    cs.fit = CC_CALIB_QUANTILE;
    c = filled(&cs, sc_two, 7);
    assert_int_equal(cc_calib_fit(c, sc, &rep), 0);
    uint64_t rs = 7;
    float *b[F * HZ];
    for (int i = 0; i < F * HZ; i++)
        b[i] = malloc(S * T * sizeof(float));
    for (int s = 0, n = 0; s < S; s++)
        for (int t = 0; t < T; t++, n++)
            for (int i = 0; i < F * HZ; i++)
                b[i][n] = draw(&rs, sc_two(i / HZ, i % HZ, t));
    for (int i = 0; i < F * HZ; i++) {
        assert_true(fabsf(sc[i] / cc_calib_scale(b[i], S * T) - 1) < 1e-6f);
        free(b[i]);
    }
    assert_true(fabs(rep.cover - 0.8) < 0.002);
    cc_calib_close(&c);
}

/* The later half of validation twice as wide as the earlier one (1.0 -> 2.0): the fit on
 * all of it (about 1.6) is not what the next stretch will hold, and the default fit moves
 * toward the model's own sd (1); a KPI whose halves agree (2.0 throughout) keeps its scale. */
static double sc_drift(int f, int k, int t)
{
    (void)k;
    return f ? 2.0 : (t < T / 2 ? 1.0 : 2.0);
}

static void test_drift_shrinks(void **state)
{
    (void)state;
    CcCalibSettings cs;
    cc_calib_defaults(&cs);
    float sc[F * HZ], sp[F * HZ];
    CcCalibReport rep;
    CcCalib *c = filled(&cs, sc_drift, 11);
    assert_int_equal(cc_calib_fit(c, sc, &rep), 0);
    cc_calib_close(&c);
    cs.shrink = 0;
    c = filled(&cs, sc_drift, 11);
    assert_int_equal(cc_calib_fit(c, sp, NULL), 0);
    cc_calib_close(&c);
    printf("drift 1 -> 2: scale %.3f (without shrinkage %.3f); steady 2: %.3f (%.3f); "
           "weights %.3f-%.3f\n",
           sc[0], sp[0], sc[HZ], sp[HZ], rep.shrink_min, rep.shrink_max);
    for (int k = 0; k < HZ; k++) {
        assert_true(sc[k] < sp[k] - 0.1 && sc[k] > 1.0);
        assert_true(fabs(sc[HZ + k] / sp[HZ + k] - 1) < 0.01);
        assert_true(fabs(sc[HZ + k] / 2.0 - 1) < 0.05);
    }
    assert_true(rep.shrink_min < 0.9 && rep.shrink_max > 0.99);
    /* --calib-recent 0.5: the later half alone, scale 2 */
    cs.recent = 0.5;
    c = filled(&cs, sc_drift, 11);
    assert_int_equal(cc_calib_fit(c, sp, NULL), 0);
    cc_calib_close(&c);
    printf("the later half alone: %.3f\n", sp[0]);
    for (int k = 0; k < HZ; k++)
        assert_true(fabs(sp[k] / 2.0 - 1) < 0.05);
}

/* A KPI with 4 validation samples is pulled toward the KPIs with many (weight 4/54 on its
 * own), and the conformal order statistic: of 4 values the ceil(5·0.8) = 4th, not the
 * interpolated 0.8 quantile. */
static void test_pool_and_conformal(void **state)
{
    (void)state;
    CcCalibSettings cs;
    cc_calib_defaults(&cs);
    cs.shrink = 0;
    CcCalib *c;
    float sc[2];
    assert_int_equal(cc_calib_open(&c, 2, 1, &cs), 0);
    uint64_t rs = 3;
    for (int t = 0; t < 4000; t++)
        assert_int_equal(cc_calib_add(c, 0, t, 0, 0, draw(&rs, 1.0)), 0);
    for (int t = 0; t < 4; t++)
        assert_int_equal(cc_calib_add(c, 0, t * 1000, 1, 0, (float)(5 * CC_Z80)), 0);
    assert_int_equal(cc_calib_fit(c, sc, NULL), 0);
    printf("few rows (own 5, all ~1): %.3f\n", sc[1]);
    assert_true(sc[1] < 1.2 && sc[1] > 0.95);
    cc_calib_close(&c);

    cs.pool_n = 0;
    assert_int_equal(cc_calib_open(&c, 1, 1, &cs), 0);
    for (int i = 1; i <= 4; i++)
        assert_int_equal(cc_calib_add(c, 0, i, 0, 0, (float)(i * CC_Z80)), 0);
    assert_int_equal(cc_calib_fit(c, sc, NULL), 0);
    float v[4] = {1 * CC_Z80, 2 * CC_Z80, 3 * CC_Z80, 4 * CC_Z80};
    printf("conformal of 1..4: %.4f (interpolated quantile %.4f)\n", sc[0], cc_calib_scale(v, 4));
    assert_true(fabsf(sc[0] - 4.0f) < 1e-5f);
    assert_true(fabsf(cc_calib_scale(v, 4) - 3.4f) < 1e-5f);
    cc_calib_close(&c);
}

/* Steps pooled with their neighbours: a scale that grows linearly over 8 steps (1 .. 2.4)
 * is followed within a few percent (the pooled steps lie symmetrically around each step,
 * the first and last included, so a straight profile is not bent). */
static double sc_ramp(int f, int k, int t)
{
    (void)f, (void)t;
    return 1 + 0.2 * k;
}

static void test_step_pooling(void **state)
{
    (void)state;
    CcCalibSettings cs;
    cc_calib_defaults(&cs);
    cs.step_radius = 8;
    float sc[F * HZ];
    CcCalib *c = filled(&cs, sc_ramp, 5);
    assert_int_equal(cc_calib_fit(c, sc, NULL), 0);
    for (int k = 0; k < HZ; k++) {
        printf("ramp step %d: %.3f (true %.3f)\n", k + 1, sc[k], sc_ramp(0, k, 0));
        assert_true(fabs(sc[k] / sc_ramp(0, k, 0) - 1) < 0.05);
    }
    cc_calib_close(&c);
}

/* CC_CALIB_NONE: every scale 1; an empty collector: every scale 1; NaN, negative and out
 * of range samples are ignored; bad shapes are refused. */
static void test_edges(void **state)
{
    (void)state;
    CcCalibSettings cs;
    cc_calib_defaults(&cs);
    CcCalib *c;
    float sc[F * HZ];
    CcCalibReport rep;
    assert_int_equal(cc_calib_open(&c, 0, HZ, &cs), -EINVAL);
    assert_null(c);
    assert_int_equal(cc_calib_open(&c, F, 0, &cs), -EINVAL);
    assert_int_equal(cc_calib_open(&c, F, HZ, NULL), 0);
    assert_int_equal(cc_calib_add(c, 0, 0, 0, 0, NAN), 0);
    assert_int_equal(cc_calib_add(c, 0, 0, 0, 0, -1.0f), 0);
    assert_int_equal(cc_calib_add(c, 0, 0, F, 0, 1.0f), 0);
    assert_int_equal(cc_calib_add(c, 0, 0, 0, HZ, 1.0f), 0);
    assert_int_equal(cc_calib_add(c, -1, 0, 0, 0, 1.0f), 0);
    assert_int_equal(cc_calib_fit(c, sc, &rep), 0);
    assert_int_equal(rep.n, 0);
    for (int i = 0; i < F * HZ; i++)
        assert_true(sc[i] == 1.0f);
    cc_calib_close(&c);
    assert_null(c);
    cc_calib_close(&c); /* twice: harmless */

    cs.fit = CC_CALIB_NONE;
    c = filled(&cs, sc_known, 9);
    assert_int_equal(cc_calib_fit(c, sc, &rep), 0);
    for (int i = 0; i < F * HZ; i++)
        assert_true(sc[i] == 1.0f);
    assert_true(rep.cover == rep.cover_raw);
    cc_calib_close(&c);

    /* a KPI predicted exactly (every |z| 0) still gets a positive scale */
    cc_calib_defaults(&cs);
    assert_int_equal(cc_calib_open(&c, 1, 1, &cs), 0);
    for (int t = 0; t < 100; t++)
        assert_int_equal(cc_calib_add(c, 0, t, 0, 0, 0.0f), 0);
    assert_int_equal(cc_calib_fit(c, sc, NULL), 0);
    assert_true(sc[0] > 0 && isfinite(sc[0]));
    cc_calib_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_factor),
        cmocka_unit_test(test_drift_shrinks),
        cmocka_unit_test(test_pool_and_conformal),
        cmocka_unit_test(test_step_pooling),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
