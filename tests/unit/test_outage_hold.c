/*
 * test_outage_hold.c — the outage hold (cc_anomaly_outage_hold, issue 13): which steps of
 * an outage a host feeds its model the previous values for, bounded, judged as all_zero
 * judges, with the all_zero alert unchanged; and `cellcast anomaly-eval`'s feed
 * (cct_ae_prepare), whose forecasts after a held outage are those of the same series with
 * the outage's rows replaced by the last good row.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "anomaly_eval.h"
#include "cc_anomaly.h"
#include "cc_engine.h"
#include "testlib.h"

enum { F = 3 };

typedef struct Fx {
    CcAnomaly *a;
    CcAnomalyCell *c;
    int64_t step;
    int zero_fired, zero_resolved;
} Fx;

static void on_event(void *cookie, const CcAlertEvent *ev)
{
    Fx *fx = cookie;
    if (ev->kind != CC_ALERT_DATA_QUALITY || ev->reason != CC_DQ_ALL_ZERO)
        return;
    if (ev->state == CC_ALERT_FIRING)
        fx->zero_fired++;
    else
        fx->zero_resolved++;
}

static void fx_open(Fx *fx, const CcAnomalySettings *override)
{
    CcAnomalySettings s;
    char err[256];
    memset(fx, 0, sizeof *fx);
    cc_anomaly_default_settings(&s);
    if (override)
        s = *override;
    s.n_features = F;
    s.step_seconds = 900;
    assert_int_equal(cc_anomaly_open(&fx->a, &s, err, sizeof err), 0);
    assert_int_equal(cc_anomaly_cell_open(&fx->c, fx->a, "c"), 0);
    fx->step = 1000;
}

static void fx_close(Fx *fx)
{
    cc_anomaly_cell_close(&fx->c);
    cc_anomaly_close(&fx->a);
}

/* One step as a host takes it: the hold asked first, then the observation (mask NULL: all
 * observed). Returns the hold. */
static int step(Fx *fx, float v0, float v1, float v2, const uint8_t *mask, int max_steps)
{
    const float v[F] = {v0, v1, v2};
    CcAlertSink sink = {fx, on_event};
    int h = cc_anomaly_outage_hold(fx->a, fx->c, v, mask, max_steps);
    cc_anomaly_observe(fx->a, fx->c, fx->step++, v, mask, &sink);
    return h;
}

static int normal_steps(Fx *fx, int n, int max_steps)
{
    int held = 0;
    for (int i = 0; i < n; i++)
        held += step(fx, 40.0f + (float)(i % 5), 300.0f + (float)i, 7.0f, NULL, max_steps);
    return held;
}

/* An outage is held for at most max_steps steps, while the all_zero alert fires and
 * resolves as without the hold; the next outage is held afresh. */
static void test_bounded(void **state)
{
    (void)state;
    CcAnomalySettings s;
    cc_anomaly_default_settings(&s);
    s.zero_steps = 6; /* the 3-step outage below is held without raising all_zero again */
    Fx fx;
    fx_open(&fx, &s);
    /* long enough that 10 steps of zeros do not teach the KPIs that zero is normal */
    assert_int_equal(normal_steps(&fx, 200, 4), 0);
    int held[10];
    for (int i = 0; i < 10; i++)
        held[i] = step(&fx, 0, 0, 0, NULL, 4);
    for (int i = 0; i < 10; i++)
        assert_int_equal(held[i], i < 4);
    assert_int_equal(fx.zero_fired, 1);
    assert_int_equal(normal_steps(&fx, 5, 4), 0);
    assert_int_equal(fx.zero_resolved, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(step(&fx, 0, 0, 0, NULL, 4), 1);
    /* 0 = off */
    assert_int_equal(normal_steps(&fx, 5, 0), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(step(&fx, 0, 0, 0, NULL, 0), 0);
    assert_int_equal(fx.zero_fired, 2);
    fx_close(&fx);
}

/* A step the host imputed (no KPI observed) is held inside a held outage without counting
 * towards the bound, and not held outside one. */
static void test_imputed(void **state)
{
    (void)state;
    static const uint8_t none[F] = {0, 0, 0};
    Fx fx;
    fx_open(&fx, NULL);
    normal_steps(&fx, 60, 5);
    assert_int_equal(step(&fx, 40, 300, 7, none, 5), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(step(&fx, 0, 0, 0, NULL, 5), 1);
    for (int i = 0; i < 4; i++)
        assert_int_equal(step(&fx, 0, 0, 0, none, 5), 1);
    assert_int_equal(step(&fx, 0, 0, 0, NULL, 5), 1);
    assert_int_equal(step(&fx, 0, 0, 0, NULL, 5), 1);
    assert_int_equal(step(&fx, 0, 0, 0, NULL, 5), 0); /* the 6th observed step */
    assert_int_equal(step(&fx, 0, 0, 0, none, 5), 0); /* past the bound: not held either */
    fx_close(&fx);
}

/* Only all-zero steps are held: not a step where one observed KPI is not 0; a KPI not
 * observed does not count. */
static void test_all_observed_zero(void **state)
{
    (void)state;
    static const uint8_t two[F] = {1, 1, 0};
    Fx fx;
    fx_open(&fx, NULL);
    normal_steps(&fx, 60, 96);
    assert_int_equal(step(&fx, 0, 0, 3, NULL, 96), 0);
    assert_int_equal(step(&fx, 0, 0, 3, two, 96), 1);
    assert_int_equal(step(&fx, 0, 0, 0, NULL, 96), 1);
    assert_int_equal(step(&fx, 1, 0, 0, NULL, 96), 0);
    fx_close(&fx);
}

/* Where zero is normal (said so, or learnt) an all-zero step is no outage, as for all_zero. */
static void test_zero_normal(void **state)
{
    (void)state;
    CcAnomalySettings s;
    cc_anomaly_default_settings(&s);
    for (int f = 0; f < F; f++)
        s.kpi[f].zero_normal = 1;
    Fx fx;
    fx_open(&fx, &s);
    normal_steps(&fx, 60, 96);
    for (int i = 0; i < 10; i++)
        assert_int_equal(step(&fx, 0, 0, 0, NULL, 96), 0);
    assert_int_equal(fx.zero_fired, 0);
    fx_close(&fx);

    /* learnt: every KPI 0 at one step in 4 (a share of 0.25 ≥ zero_normal_rate 0.1) */
    fx_open(&fx, NULL);
    int held_late = 0;
    for (int i = 0; i < 200; i++) {
        int zero = i % 4 == 3, h = zero ? step(&fx, 0, 0, 0, NULL, 96) : normal_steps(&fx, 1, 96);
        if (i >= 100)
            held_late += h;
    }
    assert_int_equal(held_late, 0);
    fx_close(&fx);
}

/* A firing all_zero spans runs of zeros a few steps apart; on a KPI that is mostly 0 (but
 * not yet learnt so when the alert fired) the next run is not an outage to hold. */
static void test_firing_alert_starts_no_hold(void **state)
{
    (void)state;
    Fx fx;
    fx_open(&fx, NULL);
    for (int i = 0; i < 60; i++) /* a cold start in zeros: nothing fed yet to hold */
        assert_int_equal(step(&fx, 0, 0, 0, NULL, 0), 0);
    assert_int_equal(fx.zero_fired, 1);
    step(&fx, 3, 1, 1, NULL, 96);
    CcAnomalyCellStats st;
    cc_anomaly_cell_stats(fx.c, &st);
    assert_int_equal(st.dq_firing, 1); /* still firing as the next run starts */
    for (int i = 0; i < 20; i++)
        assert_int_equal(step(&fx, 0, 0, 0, NULL, 96), 0);
    fx_close(&fx);
}

/* ---- anomaly-eval's feed ----------------------------------------------------------- */

enum { T = 140, OUT0 = 80, OUT1 = 92 };

typedef struct Run {
    CctAeCell c;
} Run;

/* A smooth 3-KPI series (rows OUT0..OUT1-1: zeros, or the last good row again) through
 * cct_ae_prepare without injections. */
static void run_feed(Run *r, CcEngine *e, const CcModel *m, int outage_zero, int hold)
{
    CcAnomalySettings s;
    cc_anomaly_default_settings(&s);
    s.n_features = F;
    s.step_seconds = m->hp.step_seconds;
    CctAeCell *c = &r->c;
    memset(c, 0, sizeof *c);
    snprintf(c->id, sizeof c->id, "feed");
    c->H = m->hp.horizon;
    c->p0 = 1714557600 / 900;
    c->ser.T = T;
    c->ser.F = F;
    c->ser.x = malloc(sizeof(float) * T * F);
    c->ser.mask = malloc((size_t)T * F);
    c->fm = malloc(sizeof(float) * T * F * (size_t)c->H);
    c->fs = malloc(sizeof(float) * T * F * (size_t)c->H);
    c->fsc = malloc(sizeof(float) * T * F);
    c->bm = malloc(sizeof(float) * T * F);
    c->bs = malloc(sizeof(float) * T * F);
    c->row = calloc((size_t)T, 1);
    assert_non_null(c->bs);
    assert_non_null(c->row);
    memset(c->ser.mask, 1, (size_t)T * F);
    for (int i = 0; i < T; i++) {
        int src = i >= OUT0 && i < OUT1 ? OUT0 - 1 : i;
        for (int f = 0; f < F; f++)
            c->ser.x[i * F + f] = i >= OUT0 && i < OUT1 && outage_zero
                                      ? 0.0f
                                      : 50.0f + 10.0f * f + 3.0f * sinf((float)src * 0.4f + f);
    }
    CctAePrep p = {.no_inject = 1, .baseline_window = 20, .alerts = &s, .outage_hold_steps = hold};
    uint64_t rng = 1;
    assert_int_equal(cct_ae_prepare(c, &p, m, e, &rng, 0), 0);
}

static void run_free(Run *r)
{
    free(r->c.ser.x);
    free(r->c.ser.mask);
    free(r->c.fm);
    free(r->c.fs);
    free(r->c.fsc);
    free(r->c.bm);
    free(r->c.bs);
    free(r->c.row);
}

static void test_anomaly_eval_feed(void **state)
{
    (void)state;
    CcHparams hp;
    CcModel *m = NULL;
    CcEngine *e = NULL;
    char err[256];
    tl_hparams_small(&hp);
    tl_model_open(&m, &hp, 7);
    assert_int_equal(cc_engine_open(&e, m, NULL, err, sizeof err), 0);
    Run held, gap, fed;
    run_feed(&held, e, m, 1, 96); /* the outage held */
    run_feed(&gap, e, m, 0, 96);  /* its rows the last good row: what the hold feeds */
    run_feed(&fed, e, m, 1, 0);   /* the zeros fed */
    assert_int_equal(held.c.held, OUT1 - OUT0);
    assert_int_equal(gap.c.held, 0);
    assert_int_equal(fed.c.held, 0);
    const size_t n = (size_t)T * F * (size_t)hp.horizon;
    assert_memory_equal(held.c.fm, gap.c.fm, n * sizeof(float));
    assert_memory_equal(held.c.fs, gap.c.fs, n * sizeof(float));
    /* fed the zeros, the window's scale and the forecast's sd after the outage are inflated
     * (M = 24 steps) */
    double worst = 0;
    for (int f = 0; f < F; f++) {
        size_t ix = ((size_t)(OUT1 + 4) * hp.horizon) * F + f;
        worst = fmax(worst, fed.c.fs[ix] / held.c.fs[ix]);
    }
    assert_true(worst > 2);
    run_free(&held);
    run_free(&gap);
    run_free(&fed);
    cc_engine_close(&e);
    cc_model_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_imputed),
        cmocka_unit_test(test_all_observed_zero),
        cmocka_unit_test(test_zero_normal),
        cmocka_unit_test(test_firing_alert_starts_no_hold),
        cmocka_unit_test(test_anomaly_eval_feed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
