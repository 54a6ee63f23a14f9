/* test_budget.c — the false-alert budget's scaling of the thresholds (tools/anomaly_eval.c,
 * cct_ae_scale_thresholds): every rule's bar is scaled, value novelty's margin included, so
 * that a budget bounds novelty too; through the detector, a value just out of the range seen
 * is over by novelty at factor 1 and not once the factor is large; a novel value at a large
 * factor is novel at every smaller one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "anomaly_eval.h"
#include "cc_anomaly.h"

static void test_scale_thresholds(void **state)
{
    (void)state;
    CcAnomalySettings s, t;
    cc_anomaly_default_settings(&s);
    s.novelty_tol = 0.05;
    s.kpi[2].novelty_tol = 0.1;
    cct_ae_scale_thresholds(&t, &s, 4);
    assert_true(fabs(t.warn_z - 4 * s.warn_z) < 1e-12);
    assert_true(fabs(t.crit_z - 4 * s.crit_z) < 1e-12);
    assert_true(fabs(t.cusum_k - 4 * s.cusum_k) < 1e-12);
    assert_true(fabs(t.profile_k - 4 * s.profile_k) < 1e-12);
    assert_true(fabs(t.novelty_tol - 0.2) < 1e-12);
    assert_true(fabs(t.kpi[2].novelty_tol - 0.4) < 1e-12);
    assert_true(t.kpi[0].novelty_tol == 0); /* 0 = the deployment's: stays so */
    assert_int_equal(t.window_n, s.window_n);
    s.novelty_tol = 0; /* off stays off */
    cct_ae_scale_thresholds(&t, &s, 4);
    assert_true(t.novelty_tol == 0);
}

/* A one-KPI cell whose forecasts are perfect (z = 0: no threshold rule can fire) sees 300
 * values in [0, 10], then `jump`: the steps counted over, with the settings scaled by k. */
static uint64_t over_steps(double k, double jump)
{
    CcAnomalySettings s, t;
    cc_anomaly_default_settings(&s);
    s.n_features = 1;
    s.step_seconds = 60;
    s.warmup_steps = 0;
    s.novelty_tol = 0.05;
    s.novelty_min_s = 0; /* 300 minutes of range: the two days' wait is test_anomaly's */
    cct_ae_scale_thresholds(&t, &s, k);
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL;
    assert_int_equal(cc_anomaly_open(&a, &t, NULL, 0), 0);
    assert_int_equal(cc_anomaly_cell_open(&c, a, "budget"), 0);
    for (int64_t i = 0; i <= 300; i++) {
        double x = i < 300 ? 5 + 5 * sin(0.1 * (double)i) : jump, sd = 1;
        float v = (float)x;
        uint8_t m = 1;
        cc_anomaly_set_expect(a, c, i, &x, &sd, NULL);
        assert_int_equal(cc_anomaly_observe(a, c, i, &v, &m, NULL), 0);
    }
    CcAnomalyCellStats st;
    cc_anomaly_cell_stats(c, &st);
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
    return st.over;
}

static void test_budget_bounds_novelty(void **state)
{
    (void)state;
    assert_int_equal(over_steps(1, 10), 0); /* in the range: nothing over */
    assert_int_equal(over_steps(1, 11), 1); /* 10 % of the range beyond it: novel */
    assert_int_equal(over_steps(4, 11), 0); /* the margin scaled to 20 %: not */
    assert_int_equal(over_steps(4, 13), 1); /* 30 % beyond: novel at 4 ... */
    assert_int_equal(over_steps(1, 13), 1); /* ... and at any smaller factor */
    assert_int_equal(over_steps(1, 100), 1);
    assert_int_equal(over_steps(222, 100), 0); /* warn_z 1000: 11 ranges beyond needed */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_thresholds),
        cmocka_unit_test(test_budget_bounds_novelty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
