/* test_anomaly_evidence.c — cc_anomaly_cell_evidence (issue 32, docs/design/site-evidence.md):
 * a KPI's z as a share of its bar, signed by its side; the CUSUM's share while the step
 * deviates its way; a KPI scored one way only; all_zero's run as a share of zero_steps;
 * nothing before a step is scored; without a profile, kpi_forecast (the shares without the
 * profile's sum) is kpi. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cc_anomaly.h"

#define F 2
/* |z| / bar and S / h are a division or two of doubles of magnitude ≤ 10: exact to ~1e-15 */
#define TOL 1e-12

static void settings(CcAnomalySettings *s)
{
    cc_anomaly_default_settings(s);
    s->n_features = F;
    s->step_seconds = 900;
    s->lag_steps = 0;
    s->tail_q = 0;      /* z as scored, not scaled by a learnt tail */
    s->profile_h = 0;   /* no profile */
    s->novelty_tol = 0; /* no range */
    s->warn_z = 10;
    s->crit_z = 15;
    s->zero_steps = 4;
    s->kpi[1].direction = 1; /* KPI 1 is scored upwards only */
}

static void observe(const CcAnomaly *a, CcAnomalyCell *c, int64_t t, float x0, float x1)
{
    const double mean[F] = {100, 100}, sd[F] = {1, 1};
    const float v[F] = {x0, x1};
    cc_anomaly_set_expect(a, c, t, mean, sd, NULL);
    assert_int_equal(cc_anomaly_observe(a, c, t, v, NULL, NULL), 0);
}

static void test_evidence_shares(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s);
    CcAnomaly *a;
    CcAnomalyCell *c;
    char err[256];
    assert_int_equal(cc_anomaly_open(&a, &s, err, sizeof err), 0);
    assert_int_equal(cc_anomaly_cell_open(&c, a, "c1"), 0);
    CcAnomalyEvidence ev;
    assert_true(cc_anomaly_cell_evidence(a, c, &ev) == 0);
    assert_int_equal(ev.step, -1);

    /* z = −5 on KPI 0: half its bar, below; z = −5 on KPI 1 (scored up only): none */
    observe(a, c, 10, 95, 95);
    double top = cc_anomaly_cell_evidence(a, c, &ev);
    assert_int_equal(ev.step, 10);
    assert_true(fabs(ev.kpi[0] - -0.5) < TOL);
    assert_true(ev.kpi[1] == 0);
    assert_true(fabs(top - 0.5) < TOL);
    assert_true(ev.zero == 0);

    /* z = +4 three steps running on KPI 1: the CUSUM (k 3, steps clipped at 4) holds 1, 2,
     * 3 of its h 6 while z = 4 is 0.4 of the bar: then the sum's 0.5 is the larger */
    for (int64_t t = 11; t <= 13; t++)
        observe(a, c, t, 100, 104);
    cc_anomaly_cell_evidence(a, c, &ev);
    assert_true(fabs(ev.kpi[1] - 0.5) < TOL);
    assert_true(fabs(ev.kpi[0]) < TOL);
    for (int f = 0; f < F; f++)
        assert_true(ev.kpi_forecast[f] == ev.kpi[f]);
    /* the step back at the forecast: the sum drains (2 of 6) but the step does not deviate */
    observe(a, c, 14, 100, 100);
    cc_anomaly_cell_evidence(a, c, &ev);
    assert_true(ev.kpi[1] == 0);

    /* all zero for 2 of zero_steps 4 (KPIs never 0 before: an outage): 0.5 */
    observe(a, c, 15, 0, 0);
    observe(a, c, 16, 0, 0);
    cc_anomaly_cell_evidence(a, c, &ev);
    assert_true(fabs(ev.zero - 0.5) < TOL);
    /* a step's own z at a hundred sd below dwarfs it */
    assert_true(fabs(ev.kpi[0] - -10.0) < TOL);
    assert_true(ev.kpi_forecast[0] == ev.kpi[0]);
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evidence_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
