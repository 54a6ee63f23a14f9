/*
 * test_online_calib.c — lib/cc_online_calib, the adaptive scale of the served sd: a model
 * whose sd is off by a known factor gets that factor back (2, and 1/20 as on a bursty KPI); a
 * change of volatility half way is followed; the miss share stays within the stated bound on
 * heavy-tailed errors; the forecast made at t is scored at t+1+k for its step k only, against the
 * interval it was served with; missing truths, gaps and out-of-order pushes; bad settings; the
 * scales saved and loaded (a host's snapshot or hand-over), and hostile saved bytes refused.
 *
 * `test_online_calib --bench` prints what it costs a host per cell-step (figures only).
 *
 * Truths are y = N(0, true_sd²) around a forecast mean of 0; the "model" states sd =
 * true_sd / factor, so the scale that covers 80 % is `factor`.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cc_common.h"
#include "cc_metrics.h"
#include "cc_online_calib.h"
#include "testlib.h"

enum { F = 2, HZ = 4 };

static double gauss(uint64_t *rs)
{
    double u = tl_rng_uniform(rs), v = tl_rng_uniform(rs);
    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

/* Streams T steps of truths with sd true_sd(t) against forecasts stating sd(t) = 1; returns
 * the share of forecasts (all f, k) after step `from` whose truth fell inside mean ±
 * CC_Z80·sd·scale, the scale read when the forecast was pushed (what a host serves). */
static double stream(CcOnlineCalib *c, int T, double (*true_sd)(int f, int t), int from,
                     uint64_t seed)
{
    uint64_t rs = seed;
    float mean[F * HZ], sd[F * HZ], y[F];
    float held[HZ][F * HZ]; /* the served half-width of each pending forecast */
    int64_t in = 0, n = 0;
    for (int i = 0; i < F * HZ; i++)
        mean[i] = 0, sd[i] = 1;
    for (int t = 0; t < T; t++) {
        for (int f = 0; f < F; f++)
            y[f] = (float)(gauss(&rs) * true_sd(f, t));
        if (t >= from + HZ)
            for (int k = 0; k < HZ; k++)
                for (int f = 0; f < F; f++) {
                    in += fabsf(y[f]) <= held[(t - 1 - k) % HZ][f * HZ + k];
                    n++;
                }
        cc_online_calib_observe(c, t, y);
        assert_int_equal(cc_online_calib_push(c, t, mean, sd), 0);
        for (int f = 0; f < F; f++)
            for (int k = 0; k < HZ; k++)
                held[t % HZ][f * HZ + k] = (float)(CC_Z80 * cc_online_calib_scale(c, f, k));
    }
    return (double)in / (double)n;
}

static double sd_factor_2(int f, int t) { return (void)f, (void)t, 2.0; }
static double sd_doubles(int f, int t) { return (void)f, t < 6000 ? 1.0 : 2.0; }
static double sd_twentieth(int f, int t) { return (void)f, (void)t, 0.05; }

/* Both modes: one scale per KPI (the default) and per (f, k) at a rate for one 0/1 a step. */
static CcOnlineCalib *opened(int per_step)
{
    CcOnlineCalibSettings s;
    CcOnlineCalib *c;
    cc_online_calib_default_settings(&s);
    if (per_step)
        s.per_step = 1, s.rate = 0.01;
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), 0);
    return c;
}

static void test_known_factor(void **state)
{
    (void)state;
    for (int per_step = 0; per_step < 2; per_step++) {
        CcOnlineCalib *c = opened(per_step);
        double cover = stream(c, 8000, sd_factor_2, 4000, 1);
        for (int f = 0; f < F; f++)
            for (int k = 0; k < HZ; k++) {
                double sc = cc_online_calib_scale(c, f, k);
                assert_true(sc > 1.75 && sc < 2.3);
            }
        assert_true(fabs(cover - 0.8) < 0.02);
        /* without the scale (sd off by 2) the interval would cover P(|N| < 0.64) = 0.48 */
        cc_online_calib_close(&c);
        assert_null(c);
    }
}

/* A model's sd 20× too wide, as on a bursty KPI whose sd the bursts set (Barcelona's up and
 * rb_up: the served P10–P90 covered 0.86–0.88 at the former clamp, [1/8, 8]): the scale
 * reaches 1/20 and the interval covers 0.80, in both modes. The same bands as the factor 2
 * above, relative to the factor (the update is the same on the log-scale). */
static void test_far_too_wide(void **state)
{
    (void)state;
    for (int per_step = 0; per_step < 2; per_step++) {
        CcOnlineCalib *c = opened(per_step);
        double cover = stream(c, 8000, sd_twentieth, 4000, 3);
        for (int f = 0; f < F; f++)
            for (int k = 0; k < HZ; k++) {
                double sc = cc_online_calib_scale(c, f, k);
                assert_true(sc > 0.05 * 0.875 && sc < 0.05 * 1.15);
            }
        assert_true(fabs(cover - 0.8) < 0.02);
        cc_online_calib_close(&c);
    }
}

static void test_follows_volatility(void **state)
{
    (void)state;
    for (int per_step = 0; per_step < 2; per_step++) {
        CcOnlineCalib *c = opened(per_step);
        double before = stream(c, 6000, sd_doubles, 2000, 2);
        assert_true(fabs(before - 0.8) < 0.03);
        assert_true(cc_online_calib_scale(c, 0, 0) < 1.35); /* 1 ± its jitter, not 2 */
        cc_online_calib_close(&c);
        /* again over 12000 steps, scored after the change has been absorbed */
        c = opened(per_step);
        double after = stream(c, 12000, sd_doubles, 8000, 2);
        assert_true(fabs(after - 0.8) < 0.03);
        assert_true(cc_online_calib_scale(c, 1, HZ - 1) > 1.6);
        cc_online_calib_close(&c);
    }
}

/* Cauchy errors against sd 1, their scale 1000× every other 250 steps: the miss share of
 * the scored forecasts stays within max_log/(rate·T) of 0.2 when the clamp is out of
 * reach (per (f, k): T its forecasts; pooled: T its steps, each weighing its share, so the
 * first HZ steps that score fewer forecasts add at most HZ/T), and the default clamp holds
 * the scale at its bound (the wild stretch needs ~2400: P10–P90 of a standard Cauchy is
 * ±tan(0.4π) = ±3.08, 2.4 sd at z 1.2816, times 1000). */
static void test_miss_share_bound(void **state)
{
    (void)state;
    enum { T = 3000 };
    const double max_log = log(1e6), rate = 0.05;
    CcOnlineCalibSettings s;
    /* per (f, k) free; per KPI with a step profile, free; per KPI alone, free; per KPI
     * alone with the default clamp */
    CcOnlineCalib *c[4];
    for (int j = 0; j < 4; j++) {
        cc_online_calib_default_settings(&s);
        s.rate = rate;
        s.per_step = j == 0;
        s.profile = j == 1 ? s.profile : 0;
        s.max_log = j < 3 ? max_log : s.max_log;
        assert_int_equal(cc_online_calib_open(&c[j], &s, F, HZ), 0);
    }
    uint64_t rs = 3;
    float mean[F * HZ] = {0}, sd[F * HZ], y[F];
    for (int i = 0; i < F * HZ; i++)
        sd[i] = 1;
    for (int t = 0; t < T; t++) {
        for (int f = 0; f < F; f++)
            y[f] = (float)tan(M_PI * (tl_rng_uniform(&rs) - 0.5)) * (t % 500 < 250 ? 1 : 1000);
        for (int j = 0; j < 4; j++) {
            cc_online_calib_observe(c[j], t, y);
            cc_online_calib_push(c[j], t, mean, sd);
        }
        if (t == 490) { /* in a wild stretch: the free scale is past the bound, the clamped one
                         * at it (expf of a float log: relative error ~ |log|·2^-23) */
            cc_online_calib_default_settings(&s);
            const double bound = exp(s.max_log);
            assert_true(cc_online_calib_scale(c[2], 0, 0) > 1.05 * bound &&
                        fabs(cc_online_calib_scale(c[3], 0, 0) / bound - 1) < 1e-5);
        }
    }
    for (int j = 0; j < 3; j++) {
        int64_t scored, missed;
        cc_online_calib_counts(c[j], &scored, &missed);
        assert_int_equal(scored, (int64_t)F * HZ * (T - 1) - F * (HZ * (HZ - 1) / 2));
        double bound = j == 0 ? max_log / (rate * ((double)scored / (F * HZ)))
                              : max_log / (rate * (T - 1)) + (double)HZ / T;
        assert_true(fabs((double)missed / (double)scored - 0.2) <= bound);
    }
    for (int j = 0; j < 4; j++)
        cc_online_calib_close(&c[j]);
}

/* The forecast pushed at t is scored at p = t+1+k against its step k only: a forecast that
 * is right at step 2 and far off elsewhere moves (f, 2) down and the others up. */
static void test_matures_by_step(void **state)
{
    (void)state;
    CcOnlineCalibSettings s;
    cc_online_calib_default_settings(&s);
    s.rate = 0.1;
    s.per_step = 1;
    CcOnlineCalib *c;
    assert_int_equal(cc_online_calib_open(&c, &s, 1, HZ), 0);
    for (int t = 0; t < 50; t++) {
        float y = (float)t, mean[HZ], sd[HZ] = {1, 1, 1, 1};
        assert_int_equal(cc_online_calib_observe(c, t, &y), t < HZ ? t : HZ);
        for (int k = 0; k < HZ; k++)
            mean[k] = (float)(t + 1 + k) + (k == 2 ? 0.0f : 100.0f);
        assert_int_equal(cc_online_calib_push(c, t, mean, sd), 0);
    }
    assert_true(cc_online_calib_scale(c, 0, 2) < 0.5);
    for (int k = 0; k < HZ; k++)
        if (k != 2)
            assert_true(cc_online_calib_scale(c, 0, k) > 2);
    cc_online_calib_close(&c);
}

/* A forecast is judged by the interval it was served with: at 2 the forecast of 0 (served
 * at scale 1) misses 1.3 > CC_Z80, the forecast of 1 (served at the scale the miss at 1
 * raised, e^0.04) does not, though both have the same mean and sd. */
static void test_served_scale(void **state)
{
    (void)state;
    CcOnlineCalibSettings s;
    cc_online_calib_default_settings(&s);
    CcOnlineCalib *c;
    assert_int_equal(cc_online_calib_open(&c, &s, 1, HZ), 0);
    float mean[HZ] = {0}, sd[HZ] = {1, 1, 1, 1}, y = 1.5f;
    int64_t scored, missed;
    assert_int_equal(cc_online_calib_push(c, 0, mean, sd), 0);
    assert_int_equal(cc_online_calib_observe(c, 1, &y), 1);
    assert_true(fabs(cc_online_calib_scale(c, 0, 3) - exp(0.05 * 0.8)) < 1e-6);
    assert_int_equal(cc_online_calib_push(c, 1, mean, sd), 0);
    y = 1.3f;
    assert_int_equal(cc_online_calib_observe(c, 2, &y), 2);
    cc_online_calib_counts(c, &scored, &missed);
    assert_true(scored == 3 && missed == 2);
    cc_online_calib_close(&c);
}

static void test_missing_and_gaps(void **state)
{
    (void)state;
    CcOnlineCalibSettings s;
    cc_online_calib_default_settings(&s);
    CcOnlineCalib *c;
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), 0);
    float mean[F * HZ] = {0}, sd[F * HZ], y[F] = {NAN, 100};
    for (int i = 0; i < F * HZ; i++)
        sd[i] = 1;
    sd[1] = 0; /* (f 0, k 1): no sd, never scored */
    assert_int_equal(cc_online_calib_push(c, 10, mean, sd), 0);
    assert_int_equal(cc_online_calib_push(c, 10, mean, sd), -ERANGE);
    assert_int_equal(cc_online_calib_push(c, 9, mean, sd), -ERANGE);
    int ns, nm;
    cc_online_calib_last_counts(c, 1, &ns, &nm);
    assert_true(ns == 0 && nm == 0);                        /* before any observe */
    assert_int_equal(cc_online_calib_observe(c, 11, y), 1); /* f 0 missing: f 1 only */
    cc_online_calib_last_counts(c, 0, &ns, &nm);
    assert_true(ns == 0 && nm == 0);
    cc_online_calib_last_counts(c, 1, &ns, &nm);
    assert_true(ns == 1 && nm == 1); /* 100 against mean 0, sd 1: a miss */
    cc_online_calib_last_counts(c, F, &ns, &nm);
    assert_true(ns == 0 && nm == 0); /* out of range */
    assert_true(cc_online_calib_scale(c, 0, 0) == 1.0);
    assert_true(cc_online_calib_scale(c, 1, 0) > 1.0);
    y[0] = 100;
    assert_int_equal(cc_online_calib_observe(c, 12, y), 1); /* (0, 1) has no sd */
    /* a gap: origins 11..19 have no forecast */
    assert_int_equal(cc_online_calib_push(c, 20, mean, sd), 0);
    assert_int_equal(cc_online_calib_observe(c, 13, y), 2); /* 10's step 2 is still held */
    cc_online_calib_last_counts(c, 0, &ns, &nm);
    assert_true(ns == 1 && nm == 1);                        /* by KPI: one each */
    assert_int_equal(cc_online_calib_observe(c, 15, y), 0); /* 11..14 were never pushed */
    assert_int_equal(cc_online_calib_observe(c, 21, y), 2);
    assert_true(cc_online_calib_scale(c, 5, 0) == 1.0 && cc_online_calib_scale(c, 0, -1) == 1.0);
    /* negative steps map to ring slots too */
    cc_online_calib_close(&c);
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), 0);
    assert_int_equal(cc_online_calib_push(c, -5, mean, sd), 0);
    assert_int_equal(cc_online_calib_observe(c, -4, y), 2);
    cc_online_calib_close(&c);
    cc_online_calib_close(&c);
}

/* The step profile: a model whose sd is right at step 0 and half the truth's at the last
 * step gets each step's factor back (1 and 2), which one scale per KPI cannot (it settles
 * between them); the KPI's overall coverage holds either way. */
static void test_step_profile(void **state)
{
    (void)state;
    for (int profile = 0; profile < 2; profile++) {
        CcOnlineCalibSettings s;
        cc_online_calib_default_settings(&s);
        s.profile = profile ? s.profile : 0;
        CcOnlineCalib *c;
        assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), 0);
        uint64_t rs = 5;
        float mean[F * HZ] = {0}, sd[F * HZ], y[F];
        for (int f = 0; f < F; f++)
            for (int k = 0; k < HZ; k++) /* the truth's sd is 1 at every step */
                sd[f * HZ + k] = (float)(1.0 - 0.5 * k / (HZ - 1));
        int64_t in = 0, n = 0;
        for (int t = 0; t < 12000; t++) {
            for (int f = 0; f < F; f++)
                y[f] = (float)gauss(&rs);
            cc_online_calib_observe(c, t, y);
            cc_online_calib_push(c, t, mean, sd);
            if (t >= 6000) /* a fresh truth against the last step's interval served now */
                n++, in +=
                     fabs(gauss(&rs)) <= CC_Z80 * sd[HZ - 1] * cc_online_calib_scale(c, 0, HZ - 1);
        }
        double s0 = cc_online_calib_scale(c, 0, 0), s3 = cc_online_calib_scale(c, 0, HZ - 1);
        print_message("profile %d: scales %.3f (step 0, want 1) %.3f (step %d, want 2); "
                      "last step covers %.3f\n",
                      profile, s0, s3, HZ, (double)in / n);
        if (profile)
            assert_true(fabs(s0 - 1) < 0.15 && fabs(s3 - 2) < 0.3 &&
                        fabs((double)in / n - 0.8) < 0.04);
        else /* one scale between 1 and 2: the last step under-covers */
            assert_true(s0 == s3 && s0 > 1.1 && s0 < 1.8 && (double)in / n < 0.75);
        cc_online_calib_close(&c);
    }
}

/* A changed rate keeps the scales and moves them by itself from then on; the bulk copy. */
static void test_set_rate(void **state)
{
    (void)state;
    CcOnlineCalib *c = opened(0);
    float mean[F * HZ] = {0}, sd[F * HZ], y[F] = {100, 100}, all[F * HZ];
    for (int i = 0; i < F * HZ; i++)
        sd[i] = 1;
    assert_int_equal(cc_online_calib_push(c, 0, mean, sd), 0);
    cc_online_calib_observe(c, 1, y); /* a miss: +0.8 · 0.05 */
    double s1 = cc_online_calib_scale(c, 0, 0);
    assert_true(fabs(log(s1) - 0.04) < 1e-6);
    assert_int_equal(cc_online_calib_set_rate(c, 0.5), 0);
    assert_true(cc_online_calib_scale(c, 0, 0) == s1);
    assert_int_equal(cc_online_calib_set_rate(c, -1), -EINVAL);
    assert_int_equal(cc_online_calib_set_rate(c, NAN), -EINVAL);
    assert_int_equal(cc_online_calib_push(c, 1, mean, sd), 0);
    cc_online_calib_observe(c, 2, y); /* misses again: +0.8 · 0.5 */
    assert_true(fabs(log(cc_online_calib_scale(c, 1, 3)) - 0.44) < 1e-5);
    assert_int_equal(cc_online_calib_set_rate(c, 0), 0); /* back to min(0.05, 4/HZ) */
    assert_int_equal(cc_online_calib_push(c, 2, mean, sd), 0);
    cc_online_calib_observe(c, 3, y);
    assert_true(fabs(log(cc_online_calib_scale(c, 1, 3)) - 0.48) < 1e-5);
    cc_online_calib_scales(c, all);
    for (int f = 0; f < F; f++)
        for (int k = 0; k < HZ; k++)
            assert_true(all[f * HZ + k] == (float)cc_online_calib_scale(c, f, k));
    cc_online_calib_close(&c);
}

static void test_bad_settings(void **state)
{
    (void)state;
    CcOnlineCalibSettings s;
    CcOnlineCalib *c = (CcOnlineCalib *)&s;
    cc_online_calib_default_settings(&s);
    assert_int_equal(cc_online_calib_open(&c, &s, 0, HZ), -EINVAL);
    assert_null(c);
    assert_int_equal(cc_online_calib_open(&c, &s, F, 0), -EINVAL);
    s.rate = -0.01;
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), -EINVAL);
    s.rate = 1.5;
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), -EINVAL);
    s.rate = NAN;
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), -EINVAL);
    cc_online_calib_default_settings(&s);
    s.max_log = INFINITY;
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), -EINVAL);
    s.max_log = 0;
    assert_int_equal(cc_online_calib_open(&c, &s, F, HZ), -EINVAL);
    assert_true(cc_online_calib_bytes(8, 24) > 8 * 8 * 24 * 24);
    /* rate 0: min(0.05, 4/HZ) */
    assert_true(cc_online_calib_auto_rate(24) == 0.05 && cc_online_calib_auto_rate(80) == 0.05);
    assert_true(fabs(cc_online_calib_auto_rate(720) - 4.0 / 720) < 1e-15);
}

/* Saved and loaded (a host's snapshot or hand-over): the same scales (exp_offset, kept by
 * products resynced one step a turn, is recomputed from the offset: ≤ HZ products of ≤ 2
 * ulp apart, so 4·HZ·FLT_EPSILON relative), saved again the same bytes, an empty ring (the
 * next step scores nothing; a forecast pushed after the load is scored). */
static void test_save_load(void **state)
{
    (void)state;
    for (int per_step = 0; per_step < 2; per_step++) {
        CcOnlineCalib *c = opened(per_step), *b = opened(per_step);
        stream(c, 3000, sd_factor_2, 0, 7);
        const size_t n = cc_online_calib_save_size(F, HZ);
        assert_int_equal(n, 16 + 4 * F * (HZ + 1));
        uint8_t *buf = malloc(n + 8), *again = malloc(n);
        assert_int_equal(cc_online_calib_save(c, buf, n - 1), 0);
        assert_int_equal(cc_online_calib_save(c, buf, n), n);
        assert_int_equal(cc_online_calib_saved_size(buf, n + 8), n);
        assert_int_equal(cc_online_calib_saved_size(buf, n - 1), 0);
        char err[256] = "";
        assert_int_equal(cc_online_calib_load(b, buf, n, err, sizeof err), 0);
        for (int f = 0; f < F; f++)
            for (int k = 0; k < HZ; k++) {
                double a = cc_online_calib_scale(c, f, k), l = cc_online_calib_scale(b, f, k);
                assert_true(a > 1.5 && fabs(a - l) <= 4 * HZ * FLT_EPSILON * a);
            }
        assert_int_equal(cc_online_calib_save(b, again, n), n);
        assert_memory_equal(buf, again, n);
        float y[F] = {0, 0}, mean[F * HZ] = {0}, sd[F * HZ];
        for (int i = 0; i < F * HZ; i++)
            sd[i] = 1;
        assert_int_equal(cc_online_calib_observe(b, 3000, y), 0); /* c's ring was not saved */
        assert_int_equal(cc_online_calib_observe(c, 3000, y), F * HZ);
        assert_int_equal(cc_online_calib_push(b, 3000, mean, sd), 0);
        assert_int_equal(cc_online_calib_observe(b, 3001, y), F);
        cc_online_calib_close(&c);
        cc_online_calib_close(&b);
        free(buf);
        free(again);
    }
}

/* Hostile saved bytes: each refused with a message, the calibration unchanged. */
static void test_load_hostile(void **state)
{
    (void)state;
    CcOnlineCalib *c = opened(0), *other;
    stream(c, 500, sd_factor_2, 0, 8);
    const size_t n = cc_online_calib_save_size(F, HZ);
    uint8_t *good = malloc(n), *bad = malloc(n + 4), *before = malloc(n), *after = malloc(n);
    assert_int_equal(cc_online_calib_save(c, good, n), n);
    memcpy(before, good, n);
    CcOnlineCalibSettings ds;
    cc_online_calib_default_settings(&ds);
    const float L = (float)ds.max_log;
    const struct {
        size_t at; /* byte offset of the float or u32 changed */
        float v;   /* as a float (u32 fields: as is) */
        int u32;
        const char *msg;
    } cases[] = {
        {16, NAN, 0, "not finite"},                       /* a KPI level */
        {16 + 4 * F + 4 * 3, INFINITY, 0, "not finite"},  /* a step offset */
        {16 + 4 * F + 4 * 5, -INFINITY, 0, "not finite"}, /* scale 0 */
        {16 + 4, L * 1.001f, 0, "clamp"},                 /* scale above the bound */
        {16 + 4 * F, -L * 1.001f, 0, "clamp"},            /* scale below 1/bound */
        {4, 3, 1, "saved for 3 KPIs"},                    /* wrong F */
        {8, 5, 1, "x 5 steps"},                           /* wrong HZ */
        {12, 1, 1, "per_step 1"},                         /* another mode */
        {0, 7, 1, "magic"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, good, n);
        if (cases[i].u32) {
            uint32_t u = (uint32_t)cases[i].v;
            memcpy(bad + cases[i].at, &u, 4);
        } else {
            memcpy(bad + cases[i].at, &cases[i].v, 4);
        }
        err[0] = 0;
        assert_int_equal(cc_online_calib_load(c, bad, n, err, sizeof err), -EINVAL);
        if (!strstr(err, cases[i].msg))
            fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].msg);
        assert_int_equal(cc_online_calib_save(c, after, n), n);
        assert_memory_equal(before, after, n);
    }
    /* truncated, and trailing bytes */
    assert_int_equal(cc_online_calib_load(c, good, n - 4, err, sizeof err), -EINVAL);
    assert_int_equal(cc_online_calib_load(c, good, 8, err, sizeof err), -EINVAL);
    memcpy(bad, good, n);
    assert_int_equal(cc_online_calib_load(c, bad, n + 4, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "bytes, want"));
    /* a per-step calibration refuses a KPI level (it has none) */
    CcOnlineCalibSettings s;
    cc_online_calib_default_settings(&s);
    s.per_step = 1;
    assert_int_equal(cc_online_calib_open(&other, &s, F, HZ), 0);
    memcpy(bad, good, n);
    uint32_t one = 1;
    memcpy(bad + 12, &one, 4);
    assert_int_equal(cc_online_calib_load(other, bad, n, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "per-step"));
    cc_online_calib_close(&other);
    assert_int_equal(cc_online_calib_save(c, after, n), n);
    assert_memory_equal(before, after, n);
    cc_online_calib_close(&c);
    free(good);
    free(bad);
    free(before);
    free(after);
}

/* --bench: ns per cell-step of what a host adds with online calibration (observe the
 * step's truths, push its forecast), for the shapes served, with one cell (in cache) and
 * with 4096 cells stepped in turn (each cold, as in a daemon); figures only. */
static void bench(void)
{
    static const struct {
        int F, HZ, per_step, cells;
    } shapes[] = {{8, 24, 0, 1},  {8, 24, 0, 4096}, {8, 24, 1, 1},
                  {11, 30, 0, 1}, {7, 96, 0, 1},    {7, 720, 0, 1}};
    for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
        const int F = shapes[j].F, HZ = shapes[j].HZ, n = shapes[j].cells;
        const int steps = 2000000 / (F * HZ * n) + 2 * HZ;
        CcOnlineCalibSettings s;
        cc_online_calib_default_settings(&s);
        s.per_step = shapes[j].per_step;
        CcOnlineCalib **c = calloc((size_t)n, sizeof *c);
        float *mean = calloc((size_t)F * HZ, sizeof *mean), *sd = malloc((size_t)F * HZ * 4),
              *y = malloc((size_t)F * 4);
        uint64_t rs = 9;
        if (!c || !mean || !sd || !y)
            abort();
        for (int i = 0; i < n; i++)
            if (cc_online_calib_open(&c[i], &s, F, HZ))
                abort();
        for (int i = 0; i < F * HZ; i++)
            sd[i] = 1;
        int64_t t0 = 0;
        for (int t = 0; t < steps; t++) {
            if (t == HZ)
                t0 = cc_now_ns(); /* after the rings have filled */
            for (int i = 0; i < n; i++) {
                for (int f = 0; f < F; f++)
                    y[f] = (float)gauss(&rs);
                cc_online_calib_observe(c[i], t, y);
                cc_online_calib_push(c[i], t, mean, sd);
            }
        }
        double ns = (double)(cc_now_ns() - t0) / ((double)(steps - HZ) * n);
        printf("online_calib F %2d HZ %3d %-8s %4d cells %7.0f ns per cell-step (%.2f ns per "
               "KPI-step pair), %zu bytes per cell\n",
               F, HZ, s.per_step ? "per-step" : "pooled", n, ns, ns / (F * HZ),
               cc_online_calib_bytes(F, HZ));
        for (int i = 0; i < n; i++)
            cc_online_calib_close(&c[i]);
        free(c), free(mean), free(sd), free(y);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--bench")) {
        bench();
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_factor),       cmocka_unit_test(test_far_too_wide),
        cmocka_unit_test(test_follows_volatility), cmocka_unit_test(test_miss_share_bound),
        cmocka_unit_test(test_matures_by_step),    cmocka_unit_test(test_served_scale),
        cmocka_unit_test(test_missing_and_gaps),   cmocka_unit_test(test_step_profile),
        cmocka_unit_test(test_set_rate),           cmocka_unit_test(test_bad_settings),
        cmocka_unit_test(test_save_load),          cmocka_unit_test(test_load_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
