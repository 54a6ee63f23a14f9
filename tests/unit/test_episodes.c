/* test_episodes.c — an anomaly episode against its triggering deviation plus the
 * hysteresis (CcEpisodeTrace in lib/cc_anomaly.h, tools/episodes.c), on constructed one-KPI
 * series whose expectation is known (the level ± 1: z is the deviation): a deviation the z
 * rule sees for N steps gives an episode of N + resolve_m steps (excess 0); a long one
 * leaves the forecast CUSUM over while its sum drains, and the profile rule without
 * sustained_live holds past the deviation likewise (excess > 0, held by that rule); with
 * sustained_live it does not; and a sum charged before a data-quality alert does not raise
 * an episode of its own once the alert has passed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "cc_anomaly.h"
#include "episodes.h"
#include "testlib.h"

#define HIST 504 /* 21 days of hourly steps: the seasonal profile is warm */

typedef struct Run {
    CctEpisodes ep;
    CcEpisodeTrace last; ///< of the last resolved episode
    int resolve_m;
} Run;

static void sink_fn(void *cookie, const CcAlertEvent *ev)
{
    Run *r = cookie;
    cct_episodes_add(&r->ep, ev, r->resolve_m);
    if (ev->kind == CC_ALERT_ANOMALY && ev->state == CC_ALERT_RESOLVED)
        r->last = ev->trace;
}

/* Settings of the runs: hourly steps, no warm-up, novelty off (a flat series' range makes
 * every deviation's first steps novel, which is not what these cases are about). The
 * deviations below are sized for the thresholds, k-of-n, hysteresis and profile rule of the
 * defaults until 2026-11-25 (4.5 / 6.75, 2 of 3, resolve 3, cooldown 6, profile 1 / 20),
 * set here; what is checked (length = deviation + excess + resolve_m, the excess and
 * which rule held it) does not depend on them. */
static void settings(CcAnomalySettings *s)
{
    cc_anomaly_default_settings(s);
    s->warn_z = 4.5;
    s->crit_z = 6.75;
    s->warn_k = 2;
    s->resolve_m = 3;
    s->cooldown_steps = 6;
    s->profile_k = 1;
    s->profile_h = 20;
    s->n_features = 1;
    s->step_seconds = 3600;
    s->warmup_steps = 0;
    s->novelty_tol = 0;
}

/* HIST steps of level plus noise in [-1, 1), then n steps at level + dev (plus the
 * noise), `outage` steps of exact zeros, then 60 of level plus noise; the expectation is
 * level ± 1 at every step. */
static void run(const CcAnomalySettings *s, double level, int n, double dev, int outage, Run *r)
{
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL;
    *r = (Run){.resolve_m = s->resolve_m};
    assert_int_equal(cc_anomaly_open(&a, s, NULL, 0), 0);
    assert_int_equal(cc_anomaly_cell_open(&c, a, "cell"), 0);
    CcAlertSink sink = {r, sink_fn};
    uint64_t rng = 7;
    for (int64_t i = 0; i < HIST + n + outage + 60; i++) {
        double mean = level, sd = 1;
        float v =
            (float)level + tl_rng_float(&rng) + (i >= HIST && i < HIST + n ? (float)dev : 0.0f);
        if (i >= HIST + n && i < HIST + n + outage)
            v = 0;
        cc_anomaly_set_expect(a, c, i, &mean, &sd, NULL);
        assert_int_equal(cc_anomaly_observe(a, c, i, &v, NULL, &sink), 0);
    }
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
}

/* What every checked episode satisfies: length = deviation + excess + resolve_m. */
static void check_sum(const Run *r)
{
    for (int i = 0; i < r->ep.n_worst; i++) {
        const CctEpisode *w = &r->ep.worst[i];
        assert_true(w->excess >= 0);
        assert_int_equal(w->length, w->deviation + w->excess + r->resolve_m);
    }
}

/* One run that must give one episode, exceeding or not: that episode. */
static const CctEpisode *one_episode(const CcAnomalySettings *s, int n, double dev, int exceeds,
                                     Run *r)
{
    run(s, 0, n, dev, 0, r);
    check_sum(r);
    assert_int_equal(r->ep.n, 1);
    assert_int_equal(r->ep.exceed, exceeds);
    assert_int_equal(r->ep.max_excess, r->ep.worst[0].excess);
    return &r->ep.worst[0];
}

/* A deviation of n steps past crit_z: one episode of n + resolve_m steps, excess 0. */
static void test_deviation_plus_hysteresis(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s);
    static const int ns[] = {1, 3, 5};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        Run r;
        const CctEpisode *w = one_episode(&s, ns[i], 8, 0, &r);
        assert_int_equal(w->excess, 0);
        assert_int_equal(w->length, ns[i] + s.resolve_m);
        assert_int_equal(w->deviation, ns[i]);
        assert_int_equal(w->kpi, 0);
        assert_true(w->rules & CC_RULE_Z);
        assert_string_equal(w->cell, "cell");
    }
}

/* 30 steps past crit_z charge the CUSUM to 30 (each step clipped to cusum_k + 1: +1 a
 * step); after them it drains by 2 to 4 a step (cusum_k − z, |z| < 1) and stays over
 * (≥ cusum_h 6) for 6 to 12 steps that show no deviation: with sustained_live 1 (the
 * profile alone bounded) the episode outlasts its deviation by them, held by the CUSUM.
 * Without the CUSUM it does not, nor with sustained_live 2 (the default), where a draining
 * sum does not hold a KPI over. */
static void test_cusum_drain_exceeds(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s);
    assert_int_equal(s.sustained_live, 2);
    Run live;
    const CctEpisode *l = one_episode(&s, 30, 8, 0, &live);
    assert_int_equal(l->deviation, 30);
    assert_int_equal(l->excess, 0);
    assert_int_equal(l->length, 30 + s.resolve_m);
    s.sustained_live = 1;
    Run r;
    const CctEpisode *w = one_episode(&s, 30, 8, 1, &r);
    assert_int_equal(w->deviation, 30);
    assert_true(w->excess >= 6 && w->excess <= 12);
    assert_int_equal(w->excess, w->held);
    assert_int_equal(w->unscored, 0);
    assert_int_equal(w->rules, CC_RULE_CUSUM);
    assert_int_equal(r.ep.by_rule[1], 1); /* CC_RULE_CUSUM is bit 1 */
    assert_int_equal(r.last.hold_kpi, 0);
    s.cusum_h = 0;
    assert_int_equal(one_episode(&s, 30, 8, 0, &r)->length, 30 + s.resolve_m);
}

/* A deviation of 2.5 (z 1.5–3.5: under every threshold, the forecast CUSUM off) for 30
 * steps is seen by the seasonal profile alone: its sum (+1 a step) is over from the 20th
 * step. After it the sum drains, and without sustained_live it holds the KPI over until
 * it is under profile_h (excess > 0, held by the profile); with sustained_live (the
 * default) the episode ends with its deviation. */
static void test_profile_holds_without_live(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s);
    s.cusum_h = 0;
    s.sustained_live = 0;
    Run r;
    const CctEpisode *w = one_episode(&s, 30, 2.5, 1, &r);
    assert_true(w->deviation >= 5 && w->deviation <= 12);
    assert_true(w->excess > 0);
    assert_int_equal(w->excess, w->held);
    assert_int_equal(w->rules, CC_RULE_PROFILE);
    s.sustained_live = 1;
    Run live;
    const CctEpisode *l = one_episode(&s, 30, 2.5, 0, &live);
    assert_int_equal(l->deviation, w->deviation);
    assert_int_equal(l->length, w->deviation + s.resolve_m);
    assert_true(l->rules & CC_RULE_PROFILE);
}

/* A deviation down (level 10 → 2, z −8) for 30 steps charges the CUSUM's S⁻ to 30, then
 * an outage (exact zeros for 30 steps) raises all_zero after 6 of them: the DQ alert takes
 * over and the KPI is held until 16 steps after it resolves. The episode of the deviation
 * resolves under the DQ alert (its held steps count clear); the sum must not outlive it:
 * frozen at ~36, it was over when scoring resumed and raised a second episode with no
 * deviation at all, 10 steps of it draining (what anomaly-eval found on the synthetic
 * control). */
static void test_no_stale_sum_after_dq(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s);
    s.zero_steps = 6;
    Run r;
    run(&s, 10, 30, -8, 30, &r);
    check_sum(&r);
    assert_int_equal(r.ep.n, 1);
    assert_int_equal(r.ep.exceed, 0);
    /* the deviation and the outage's zeros before all_zero holds the KPI */
    assert_true(r.ep.worst[0].deviation > 30 && r.ep.worst[0].deviation < 30 + s.zero_steps);
    assert_true(r.ep.worst[0].rules & CC_RULE_Z);
}

/* The worst list keeps the three largest excesses, then the longest, in order. */
static void test_worst_order(void **state)
{
    (void)state;
    CctEpisodes e = {0};
    static const int64_t len[] = {10, 20, 12, 30, 11}, dev[] = {5, 17, 2, 27, 8};
    for (int i = 0; i < 5; i++) {
        CcAlertEvent ev = {.kind = CC_ALERT_ANOMALY, .state = CC_ALERT_RESOLVED};
        ev.cell_id = "c";
        ev.start_step = 100;
        ev.step = 100 + len[i] - 1;
        ev.trace.live_run = dev[i];
        ev.trace.hold_rules = CC_RULE_CUSUM;
        cct_episodes_add(&e, &ev, 3);
        ev.state = CC_ALERT_FIRING; /* not an episode's end: ignored */
        cct_episodes_add(&e, &ev, 3);
    }
    /* excesses 2, 0, 7, 0, 0 */
    assert_int_equal(e.n, 5);
    assert_int_equal(e.exceed, 2);
    assert_int_equal(e.max_excess, 7);
    assert_int_equal(e.n_worst, 3);
    assert_int_equal(e.worst[0].length, 12);
    assert_int_equal(e.worst[1].length, 10);
    assert_int_equal(e.worst[2].length, 30);
    char buf[64];
    assert_string_equal(cct_episode_rules(CC_RULE_CUSUM | CC_RULE_PROFILE, buf, sizeof buf),
                        "cusum+profile");
    assert_string_equal(cct_episode_rules(0, buf, sizeof buf), "-");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deviation_plus_hysteresis),
        cmocka_unit_test(test_cusum_drain_exceeds),
        cmocka_unit_test(test_profile_holds_without_live),
        cmocka_unit_test(test_no_stale_sum_after_dq),
        cmocka_unit_test(test_worst_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
