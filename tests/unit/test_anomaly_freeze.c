/* test_anomaly_freeze.c — maintenance windows in the detector (cc_anomaly_cell_freeze_learning,
 * issue 32): a cell whose window holds a degraded period (planned work: the KPI at a fifth
 * of its usual level for six hours) learns from it exactly what it would have learnt had
 * those steps never come — its seasonal profile's usual values afterwards are bit for bit
 * those of a run without them — while the same period unfrozen drags the profile down.
 * The window's steps are still scored (the alerts are the host's to silence). */
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

#define T0 (9 * 24 + 2) /* day 9, 02:00: the window */
#define LEN 6
#define AFTER (4 * 24) /* compared for four days after it */

enum Run { SKIPPED, FROZEN, UNFROZEN };

static double daily_value(int64_t t)
{
    return 50.0 + 20.0 * sin(2.0 * M_PI * (double)(t % 24) / 24.0) + sin(2.3 * (double)t);
}

static void count_emit(void *cookie, const CcAlertEvent *ev)
{
    (void)ev;
    ++*(int *)cookie;
}

/* An hourly KPI with a daily cycle and a forecaster that follows it (z ~0.1: what the
 * profile learns is the point); the profile's usual value at each step after the window
 * into expected (AFTER), the transitions the window's steps raised into *window_alerts. */
static void run(enum Run how, double *expected, int *window_alerts)
{
    CcAnomalySettings s;
    cc_anomaly_default_settings(&s);
    s.n_features = 1;
    s.step_seconds = 3600;
    s.lag_steps = 0;
    s.profile_k = 1;
    s.profile_h = 20;
    char err[256];
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL;
    assert_int_equal(cc_anomaly_open(&a, &s, err, sizeof err), 0);
    assert_int_equal(cc_anomaly_cell_open(&c, a, "m1"), 0);
    int n_ev = 0;
    CcAlertSink sink = {&n_ev, count_emit};
    for (int64_t t = 0; t < T0 + LEN + AFTER; t++) {
        int in_window = t >= T0 && t < T0 + LEN;
        if (in_window && how == SKIPPED)
            continue;
        float x[1] = {(float)(daily_value(t) * (in_window ? 0.2 : 1.0))};
        double mean[1] = {x[0] - 0.1 * sin(1.1 * (double)t)}, sd[1] = {1.0};
        cc_anomaly_cell_freeze_learning(c, in_window && how == FROZEN);
        cc_anomaly_set_expect(a, c, t, mean, sd, NULL);
        int before = n_ev;
        assert_int_equal(cc_anomaly_observe(a, c, t, x, NULL, &sink), 0);
        if (in_window)
            *window_alerts += n_ev - before;
        if (t >= T0 + LEN) {
            double e[1], up[1], down[1];
            cc_anomaly_cell_profile(c, e, up, down);
            expected[t - T0 - LEN] = e[0];
        }
    }
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
}

static void test_window_not_learnt(void **state)
{
    (void)state;
    double skipped[AFTER], frozen[AFTER], unfrozen[AFTER];
    int alerts_skipped = 0, alerts_frozen = 0, alerts_unfrozen = 0;
    run(SKIPPED, skipped, &alerts_skipped);
    run(FROZEN, frozen, &alerts_frozen);
    run(UNFROZEN, unfrozen, &alerts_unfrozen);
    double worst = 0;
    for (int i = 0; i < AFTER; i++) {
        assert_true(isfinite(skipped[i]));
        /* the same arithmetic on the same inputs: equal, not close */
        if (frozen[i] != skipped[i])
            fail_msg("step %d after the window: usual value %.9g frozen, %.9g without the "
                     "window's steps",
                     i, frozen[i], skipped[i]);
        worst = fmax(worst, skipped[i] - unfrozen[i]);
    }
    /* unfrozen, the next day's bins at the window's hours moved down: each by one update of
     * weight 1/(profile_days + 1) = 1/5 (the default's 4 days, reached) of a residual
     * clamped at 3 mean absolute residuals over GAUSS_MEAN_ABS (the sin(2.3t) noise: ~0.64,
     * so 3·0.64/0.8/5 ≈ 0.48); half of it is the bar */
    if (!(worst > 0.24))
        fail_msg("the unfrozen window moved the profile by %.3g only", worst);
    /* the window is scored, frozen or not: it alerts (the profile rule, on a fifth of the
     * usual level) */
    assert_true(alerts_frozen > 0 && alerts_unfrozen > 0);
    assert_int_equal(alerts_skipped, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_not_learnt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
