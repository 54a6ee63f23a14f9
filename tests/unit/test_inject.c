/* test_inject.c — tools/inject.c (cctools): injections land in the test rows only, one per
 * slot, with the documented lengths and magnitudes; outages zero every KPI; values of KPIs
 * with a non-negative history are clamped at 0; the same seed gives the same series. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "inject.h"

enum { T = 2000, F = 2, TEST0 = 1000 };

/* KPI 0 around 100 (σ about 10), KPI 1 in [0, 1] (non-negative). */
static void fill(CctInjectSeries *c, float *x, uint8_t *mask)
{
    for (int i = 0; i < T; i++) {
        x[i * F] = (float)(100 + 10 * sin(i * 0.7));
        x[i * F + 1] = (float)(0.5 + 0.5 * cos(i * 0.3));
        mask[i * F] = mask[i * F + 1] = 1;
    }
    *c = (CctInjectSeries){.x = x, .mask = mask, .T = T, .F = F, .test0 = TEST0};
}

static void test_labels(void **state)
{
    (void)state;
    static float x[T * F], x0[T * F];
    static uint8_t mask[T * F];
    const int kpis[2] = {0, 1};
    CctInjectSettings s = {.spacing = 120, .margin = 20, .mag_scale = 1, .kpis = kpis, .n_kpis = 2};
    CctInjectSeries c;
    fill(&c, x, mask);
    memcpy(x0, x, sizeof x);
    uint64_t rng = 7;
    assert_int_equal(cct_inject(&s, &c, &rng, 1), 0);
    assert_int_equal(c.n_lab, (T - TEST0 - 20) / 120);
    for (int l = 0; l < c.n_lab; l++) {
        const CctLabel *lb = &c.lab[l];
        int slot = TEST0 + 20 + l * 120, len = lb->end - lb->start;
        assert_int_equal(lb->type, (l + 1) % CCT_INJ_CLASSIC); /* rotation 1 */
        assert_true(lb->start >= slot && lb->start <= slot + 30);
        static const int lo[] = {1, 20, 10, 30}, hi[] = {3, 60, 40, 60};
        assert_true(len >= lo[lb->type] && len <= hi[lb->type]);
        if (lb->type == CCT_INJ_OUTAGE) {
            assert_int_equal(lb->kpi, -1);
            for (int i = lb->start; i < lb->end; i++)
                assert_true(x[i * F] == 0 && x[i * F + 1] == 0);
            continue;
        }
        static const double mlo[] = {3, 1.5, 0, 2}, mhi[] = {6, 3, 0, 4};
        assert_true(fabs(lb->mag) >= mlo[lb->type] && fabs(lb->mag) <= mhi[lb->type]);
        for (int i = lb->start; i < lb->end; i++)
            assert_true(x[i * F + lb->kpi] != x0[i * F + lb->kpi] || x[i * F + lb->kpi] == 0);
    }
    /* history untouched; KPI 1 never below 0 */
    assert_memory_equal(x, x0, sizeof(float) * TEST0 * F);
    for (int i = 0; i < T; i++)
        assert_true(x[i * F + 1] >= 0);
    free(c.lab);
}

static void test_reproducible(void **state)
{
    (void)state;
    static float x1[T * F], x2[T * F];
    static uint8_t m1[T * F], m2[T * F];
    const int kpis[1] = {1};
    CctInjectSettings s = {.spacing = 60, .margin = 5, .mag_scale = 2, .kpis = kpis, .n_kpis = 1};
    CctInjectSeries a, b;
    fill(&a, x1, m1);
    fill(&b, x2, m2);
    uint64_t r1 = 3, r2 = 3;
    assert_int_equal(cct_inject(&s, &a, &r1, 0), 0);
    assert_int_equal(cct_inject(&s, &b, &r2, 0), 0);
    assert_true(r1 == r2);
    assert_memory_equal(x1, x2, sizeof x1);
    assert_int_equal(a.n_lab, b.n_lab);
    for (int l = 0; l < a.n_lab; l++) {
        assert_true(a.lab[l].kpi == 1 || a.lab[l].kpi == -1);
        assert_true(a.lab[l].end - a.lab[l].start <= 30); /* at most spacing / 2 */
    }
    /* another seed: other draws (fill starts a new series: b's labels go first) */
    free(b.lab);
    fill(&b, x2, m2);
    r2 = 4;
    assert_int_equal(cct_inject(&s, &b, &r2, 0), 0);
    assert_true(memcmp(x1, x2, sizeof x1) != 0);
    free(a.lab);
    free(b.lab);
}

/* σ_L: the spread of L-step means around the previous L steps' mean. */
static void test_spread(void **state)
{
    (void)state;
    static float x[T * F];
    static uint8_t mask[T * F];
    CctInjectSeries c = {.x = x, .mask = mask, .T = T, .F = F, .test0 = TEST0};
    for (int i = 0; i < T; i++) {
        x[i * F] = i % 2 ? 1 : -1; /* alternating: one-step differences ±2 */
        x[i * F + 1] = 5;          /* constant: no spread → 1 */
        mask[i * F] = mask[i * F + 1] = 1;
    }
    double sd[F];
    cct_inject_spread(&c, TEST0, 1, sd);
    assert_float_equal(sd[0], sqrt(2.0), 1e-3); /* the mean of ±2 is not quite 0 */
    assert_float_equal(sd[1], 1.0, 0);
    cct_inject_spread(&c, TEST0, 2, sd); /* every 2-step mean is 0 */
    assert_float_equal(sd[0], 1.0, 0);
    /* a level that alternates every 3 steps: 3-step means differ by 0 or ±2 */
    for (int i = 0; i < T; i++)
        x[i * F] = (i / 3) % 2 ? 1 : -1;
    cct_inject_spread(&c, TEST0, 3, sd);
    assert_true(sd[0] > 0.5 && sd[0] < 1.5);
    /* a missing row leaves its windows out, it does not count as a value */
    mask[10 * F] = 0;
    double sd2[F];
    cct_inject_spread(&c, TEST0, 3, sd2);
    assert_true(fabs(sd2[0] - sd[0]) < 0.05);
}

/* The noise-aware protocol: types rotate surge → drop → outage → level shift → spike,
 * events last 10-60 minutes (≥ 2 steps), spikes one step, and an event moves its KPI's
 * L-step mean by mag · σ_L. */
static void test_noise_protocol(void **state)
{
    (void)state;
    static float x[T * F], x0[T * F];
    static uint8_t mask[T * F];
    const int kpis[1] = {0};
    CctInjectSettings s = {.spacing = 120,
                           .margin = 20,
                           .mag_scale = 1,
                           .kpis = kpis,
                           .n_kpis = 1,
                           .protocol = CCT_INJ_PROTO_NOISE,
                           .step_seconds = 120};
    CctInjectSeries c;
    fill(&c, x, mask);
    memcpy(x0, x, sizeof x);
    uint64_t rng = 11;
    assert_int_equal(cct_inject(&s, &c, &rng, 0), 0);
    assert_int_equal(c.n_lab, (T - TEST0 - 20) / 120);
    static const int order[] = {CCT_INJ_SURGE, CCT_INJ_DROP, CCT_INJ_OUTAGE, CCT_INJ_SHIFT,
                                CCT_INJ_SPIKE};
    for (int l = 0; l < c.n_lab; l++) {
        const CctLabel *lb = &c.lab[l];
        const int L = lb->end - lb->start;
        assert_int_equal(lb->type, order[l % 5]);
        if (lb->type == CCT_INJ_SPIKE)
            assert_int_equal(L, 1);
        else
            assert_true(L >= 5 && L <= 30); /* 10-60 minutes of 2-minute steps */
        if (lb->type == CCT_INJ_OUTAGE) {
            assert_float_equal(x[lb->start * F + 1], 0, 0);
            continue;
        }
        assert_true(fabs(lb->mag) >= 3 && fabs(lb->mag) <= 6);
        assert_true(lb->type != CCT_INJ_SURGE || lb->mag > 0);
        assert_true(lb->type != CCT_INJ_DROP || lb->mag < 0);
        double sd[F], moved = 0;
        cct_inject_spread(&c, TEST0, L, sd);
        for (int i = lb->start; i < lb->end; i++)
            moved += x[i * F] - x0[i * F];
        /* KPI 0 stays far from 0 (no clamp); the surge's sine averages 2/π only roughly */
        assert_float_equal(moved / L, lb->mag * sd[0], 0.03 * fabs(lb->mag * sd[0]));
    }
    free(c.lab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_noise_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
