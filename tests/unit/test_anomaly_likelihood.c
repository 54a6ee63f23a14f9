/* test_anomaly_likelihood.c — the anomaly likelihood stage (lib/cc_anomaly_likelihood): a
 * steady score stays unlikely, a sustained rise goes to ~1 within the short window and a
 * lone spike does not, a constant score is floored; a value out of the range seen is novel; through
 * the detector (lik_over) a sustained deviation under warn_z fires where it did not without the
 * stage, and off it is not run; the state survives a snapshot round trip and an older record
 * (version 6) still loads; settings. */
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

#include "cc_anomaly.h"
#include "cc_anomaly_likelihood.h"
#include "testlib.h"

enum { SHORT = 10, LONG = 2000 };

static double gauss(uint64_t *rng)
{
    double u = tl_rng_uniform(rng), v = tl_rng_uniform(rng);
    return sqrt(-2.0 * log(u > 1e-300 ? u : 1e-300)) * cos(2.0 * M_PI * v);
}

/* Steps of Gaussian z through the stage; the largest ll seen after warm-up. */
static double run_steady(CcLikState *st, uint64_t *rng, int n)
{
    double top = 0;
    for (int i = 0; i < n; i++) {
        double ll = cc_lik_step(st, SHORT, LONG, cc_lik_raw(gauss(rng)), 1);
        if (i < CC_LIK_MIN_N + SHORT - 1)
            assert_true(isnan(ll)); /* warming up: no verdict */
        else if (ll > top)
            top = ll;
    }
    return top;
}

static void test_steady_stays_low(void **state)
{
    (void)state;
    CcLikState st;
    memset(&st, 0, sizeof st);
    uint64_t rng = 7;
    double top = run_steady(&st, &rng, 5000);
    /* 5000 steps of the usual residuals: nothing near the 0.5 that counts as over (tail 1e-5) */
    assert_true(top < 0.5);
    assert_true(top > 0); /* the score does move: this is not a stage that never answers */
    assert_true(isnan(cc_lik_step(&st, SHORT, LONG, NAN, 1)));
}

static void test_sustained_rise_goes_to_one(void **state)
{
    (void)state;
    CcLikState st;
    memset(&st, 0, sizeof st);
    uint64_t rng = 11;
    run_steady(&st, &rng, 3000);
    /* a lone spike of z = 8 among the usual residuals: noticed, not certain */
    double spike = cc_lik_step(&st, SHORT, LONG, cc_lik_raw(8.0), 1);
    assert_true(spike < 0.5);
    for (int i = 0; i < SHORT; i++)
        cc_lik_step(&st, SHORT, LONG, cc_lik_raw(gauss(&rng)), 1);
    /* residuals four sd too large for a whole short window: the likelihood saturates */
    double ll = 0;
    int first = -1;
    for (int i = 0; i < SHORT; i++) {
        ll = cc_lik_step(&st, SHORT, LONG, cc_lik_raw(4.0 + gauss(&rng)), 1);
        if (first < 0 && ll >= 0.5)
            first = i;
    }
    assert_true(first >= 0 && first < SHORT / 2);
    assert_true(ll > 0.95);
}

static void test_constant_score_is_floored(void **state)
{
    (void)state;
    CcLikState st;
    memset(&st, 0, sizeof st);
    for (int i = 0; i < 500; i++)
        cc_lik_step(&st, SHORT, LONG, 0.5, 1);
    /* variance 0: a change by less than the floor is not certain, one well past it is */
    assert_true(cc_lik_step(&st, SHORT, LONG, 0.5 + 0.5 * CC_LIK_MIN_SD * SHORT, 1) < 0.1);
    double ll = 0;
    for (int i = 0; i < SHORT; i++)
        ll = cc_lik_step(&st, SHORT, LONG, 1.5, 1);
    assert_true(ll > 0.99);
    /* a quieter score is never an anomaly (one-sided) */
    memset(&st, 0, sizeof st);
    for (int i = 0; i < 500; i++)
        cc_lik_step(&st, SHORT, LONG, 1.0, 1);
    for (int i = 0; i < SHORT; i++)
        ll = cc_lik_step(&st, SHORT, LONG, 0.0, 1);
    assert_true(ll == 0);
    /* short_n changed between steps: a new ring, no out-of-range reads */
    assert_true(isfinite(cc_lik_step(&st, 3, LONG, 1.0, 1)));
    CcNovelty nv = {0, 0, 0};
    assert_true(cc_lik_valid(&st, &nv));
}

static void test_novelty(void **state)
{
    (void)state;
    CcNovelty nv = {0, 0, 0};
    int seen = 0;
    for (int i = 0; i < 200; i++)
        seen |= cc_novelty_step(&nv, 10 + 5 * sin(0.1 * i), 0.1, 0);
    assert_int_equal(seen, 0); /* values inside their own range, and the warm-up */
    assert_int_equal(cc_novelty_step(&nv, 15.9, 0.1, 0), 0); /* within 10% of the range */
    assert_int_equal(cc_novelty_step(&nv, 17.5, 0.1, 0), 1);
    assert_int_equal(cc_novelty_step(&nv, 17.5, 0.1, 0), 0); /* now part of the range */
    assert_int_equal(cc_novelty_step(&nv, 2, 0.1, 0), -1);
    assert_int_equal(cc_novelty_step(&nv, -100, 0, 0), 0); /* tol 0: off */
    assert_int_equal(cc_novelty_step(&nv, NAN, 0.1, 0), 0);
    /* with a minimum count, nothing before it however far, then the same rule */
    CcNovelty nm = {0, 0, 0};
    for (int i = 0; i < 500; i++)
        assert_int_equal(cc_novelty_step(&nm, i < 499 ? sin(0.1 * i) : 100.0 + i, 0.1, 500), 0);
    assert_int_equal(cc_novelty_step(&nm, 1e6, 0.1, 500), 1);
    CcLikState st;
    memset(&st, 0, sizeof st);
    assert_true(cc_lik_valid(&st, &nv));
    nv.lo = nv.hi + 1;
    assert_false(cc_lik_valid(&st, &nv));
}

/* One KPI, sd 10, the expectation 100; observation 100 + 10·z. */
static void step(CcAnomaly *a, CcAnomalyCell *c, int64_t t, double z, int *fired)
{
    double mean = 100, sd = 10;
    float x = (float)(100 + 10 * z);
    cc_anomaly_set_expect(a, c, t, &mean, &sd, NULL);
    const CcAlertSink sink = {fired, NULL};
    assert_int_equal(cc_anomaly_observe(a, c, t, &x, NULL, &sink), 0);
    CcAnomalyCellStats stt;
    cc_anomaly_cell_stats(c, &stt);
    *fired = (int)stt.firing;
}

/* Saves the cell's state, closes it and loads the state into a new cell (a restart); the
 * record's length, and the record itself in *keep (NULL: freed). */
static long reload(CcAnomaly *a, CcAnomalyCell **c, const char *id, uint8_t **keep)
{
    long n = cc_anomaly_cell_save(*c, NULL, 0);
    uint8_t *b = malloc((size_t)n);
    assert_non_null(b);
    assert_int_equal(cc_anomaly_cell_save(*c, b, (size_t)n), n);
    cc_anomaly_cell_close(c);
    assert_int_equal(cc_anomaly_cell_open(c, a, id), 0);
    assert_int_equal(cc_anomaly_cell_load(*c, b, (size_t)n, NULL, 0), 0);
    if (keep)
        *keep = b;
    else
        free(b);
    return n;
}

static void settings(CcAnomalySettings *s, double lik_over)
{
    cc_anomaly_default_settings(s);
    s->n_features = 1;
    s->step_seconds = 60;
    s->lag_steps = 0;
    s->lik_over = lik_over;
    s->novelty_tol = 0; /* the likelihood alone: test_novelty has the other stage */
}

/* 3000 usual steps, then z = 2.5 for 30 steps (under warn_z 4.5 and the CUSUM's reference
 * 3): the firings counted. */
static int run_detector(double lik_over, int reload_at)
{
    CcAnomalySettings s;
    settings(&s, lik_over);
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL;
    assert_int_equal(cc_anomaly_open(&a, &s, NULL, 0), 0);
    assert_int_equal(cc_anomaly_cell_open(&c, a, "lik"), 0);
    uint64_t rng = 3;
    int fired = 0;
    for (int64_t t = 0; t < 3030; t++) {
        if (t == reload_at)
            reload(a, &c, "lik", NULL);
        double z = 0.5 * gauss(&rng);
        step(a, c, t, t >= 3000 ? 2.5 + z : z, &fired);
    }
    /* off, the stage is not run at all (no likelihood to read); on, it is warm */
    assert_int_equal(!!isnan(cc_anomaly_cell_likelihood(c, NULL)), lik_over == 0);
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
    return fired;
}

static void test_detector_fires_on_sustained_rise(void **state)
{
    (void)state;
    assert_int_equal(run_detector(0, -1), 0); /* the stage off: nothing over warn_z */
    int on = run_detector(0.5, -1);
    assert_int_equal(on, 1);
    /* restarted from its state at step 2500: the same verdict */
    assert_int_equal(run_detector(0.5, 2500), on);
}

/* Two cells fed alike, one saved and loaded midway: the same likelihood at every step; an
 * older record (version 6, without the stage) still loads and the stage warms up again. */
static void test_state_round_trip(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s, 0.5);
    CcAnomaly *a = NULL;
    CcAnomalyCell *c1 = NULL, *c2 = NULL;
    assert_int_equal(cc_anomaly_open(&a, &s, NULL, 0), 0);
    assert_int_equal(cc_anomaly_cell_open(&c1, a, "one"), 0);
    assert_int_equal(cc_anomaly_cell_open(&c2, a, "one"), 0);
    uint64_t rng = 5;
    int f1 = 0, f2 = 0;
    for (int64_t t = 0; t < 400; t++) {
        double z = gauss(&rng);
        step(a, c1, t, z, &f1);
        step(a, c2, t, z, &f2);
    }
    assert_true(isfinite(cc_anomaly_cell_likelihood(c1, NULL)));
    uint8_t *b = NULL;
    long n = reload(a, &c2, "one", &b);
    for (int64_t t = 400; t < 600; t++) {
        double z = t > 550 ? 3 + gauss(&rng) : gauss(&rng);
        step(a, c1, t, z, &f1);
        step(a, c2, t, z, &f2);
        double l1[1], l2[1];
        assert_true(cc_anomaly_cell_likelihood(c1, l1) == cc_anomaly_cell_likelihood(c2, l2));
        assert_true(l1[0] == l2[0] && isfinite(l1[0]));
    }
    assert_true(cc_anomaly_cell_likelihood(c1, NULL) > 0.5);
    assert_int_equal(f1, f2);
    /* version 6: the record without version 14's tail (the tail calibration of z < 0: 12
     * bytes), version 13's (the fit of the profile CUSUM's excursions: 48 bytes), version 12's (the
     * profile's spread per bin: 24 bins, 96 bytes), version 11's (the fit of the KPI's own bar: 40
     * bytes), version 10's (the KPI's false-alarm bar factor and its step: 16 bytes), version 9's
     * (the KPI's absence run, its first step and its alert: 44 bytes), version 8's (the peak's
     * novelty kinds and shape novelty's sizes: the stage is off), the stage's bytes and the
     * window rule's at its end (one KPI), with the 20 bytes of version 6's EWMA window rule
     * (read and dropped) instead */
    n -= 12 + 48 + 24 * 4 + 40 + 16 + 44 + 8 * 4 + 3 * 4;
    size_t v7 = CC_LIK_SHORT_MAX * sizeof(float) + 4 * sizeof(int32_t) + 4 * sizeof(double);
    size_t win = 32 * 4 + 4 + 4 + 3 * 2 + 3 * 8 + 3 * 4;
    size_t n6 = (size_t)n - v7 - win + 20;
    uint32_t six = 6;
    memcpy(b + 4, &six, sizeof six);
    memset(b + n6 - 20, 0, 20);
    char err[256] = "";
    cc_anomaly_cell_close(&c2);
    assert_int_equal(cc_anomaly_cell_open(&c2, a, "one"), 0);
    assert_int_equal(cc_anomaly_cell_load(c2, b, n6, err, sizeof err), 0);
    int f3 = 0;
    step(a, c2, 600, 0, &f3);
    assert_true(isnan(cc_anomaly_cell_likelihood(c2, NULL))); /* warming up again */
    /* a version 7 record cut short is refused */
    uint32_t seven = 7;
    memcpy(b + 4, &seven, sizeof seven);
    assert_int_equal(cc_anomaly_cell_load(c2, b, (size_t)n - 1, err, sizeof err), -EINVAL);
    free(b);
    cc_anomaly_cell_close(&c1);
    cc_anomaly_cell_close(&c2);
    cc_anomaly_close(&a);
}

static void test_settings(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s, 0);
    char err[256] = "";
    assert_int_equal(cc_anomaly_settings_set(&s, NULL, "lik_over", "0.6", err, sizeof err), 0);
    assert_true(s.lik_over == 0.6);
    assert_int_equal(cc_anomaly_settings_set(&s, NULL, "lik_over", "1.5", err, sizeof err),
                     -EINVAL);
    assert_int_equal(cc_anomaly_settings_set(&s, NULL, "lik_short_n", "33", err, sizeof err),
                     -EINVAL);
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), 0);
    s.lik_short_n = 0;
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "lik_short_n"));
    s.lik_short_n = 10;
    s.kpi[0].lik_over = -1;
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), -EINVAL);
    s.kpi[0].lik_over = 0.9;
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), 0);
    s.kpi[0].novelty_tol = -0.1;
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), -EINVAL);
    s.kpi[0].novelty_tol = 0.05;
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_stays_low),
        cmocka_unit_test(test_sustained_rise_goes_to_one),
        cmocka_unit_test(test_constant_score_is_floored),
        cmocka_unit_test(test_novelty),
        cmocka_unit_test(test_detector_fires_on_sustained_rise),
        cmocka_unit_test(test_state_round_trip),
        cmocka_unit_test(test_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
