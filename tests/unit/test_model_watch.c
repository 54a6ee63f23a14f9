/*
 * test_model_watch.c — daemon/model_watch.c's totals (ccd_watch_totals, the counters
 * /metrics exposes as cellcast_model_live_*_total): every matured forecast scored, whatever
 * the rollback window and the swaps (ccd_watch_restart clears the window, not the totals),
 * per KPI and forecast kind, against seasonal naive one day back; and the window's MASE
 * still computed from its own samples only.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cc_history.h"
#include "model_watch.h"

enum { F = 2, HZ = 3, DAY = 4, STEP_S = 86400 / DAY, DEPTH = 64, W = 5 };

/* truth of KPI f at step p, and the forecasts: one-step off by 1 + f, horizon-end by 2 */
static float truth(int64_t p, int f) { return (float)((p % DAY) * 10 + f + (p / DAY) * 3); }

static void feed(CcHistory *h, CcdModelWatch *w, int64_t p)
{
    float v[F], m1[F], m2[F], sd[F] = {1, 1};
    for (int f = 0; f < F; f++) {
        v[f] = truth(p, f);
        m1[f] = v[f] + (float)(1 + f);
        m2[f] = v[f] - 2.0f;
    }
    assert_int_equal(cc_history_forecast(h, p, CC_HISTORY_ONE_STEP, m1, sd), 0);
    assert_int_equal(cc_history_forecast(h, p, CC_HISTORY_HORIZON_END, m2, sd), 0);
    assert_int_equal(cc_history_observe(h, p, v, 0), 0);
    ccd_watch_step(w, h, p);
}

static void test_totals_survive_window_and_restart(void **state)
{
    (void)state;
    CcHistory *h;
    CcdModelWatch *w;
    assert_int_equal(cc_history_open(&h, F, DEPTH, HZ), 0);
    assert_int_equal(ccd_watch_open(&w, W, STEP_S, F), 0);
    const int64_t steps = 20;
    for (int64_t p = 0; p < 10; p++)
        feed(h, w, p);
    ccd_watch_restart(w, 9); /* a swap at step 9: the window forgets, the totals do not */
    for (int64_t p = 10; p < steps; p++)
        feed(h, w, p);
    double err[2 * F], naive[2 * F];
    int64_t n[2 * F];
    ccd_watch_totals(w, err, naive, n);
    /* scored: steps DAY..steps-1 (a day back observed); naive error |y(p) - y(p - DAY)| = 3 */
    const int64_t scored = steps - DAY;
    for (int k = 0; k < 2; k++)
        for (int f = 0; f < F; f++) {
            const int i = k * F + f;
            const double per = k == 0 ? 1.0 + f : 2.0;
            assert_int_equal(n[i], scored);
            /* float32 values of magnitude < 100: each term exact to ~1e-5 */
            assert_true(fabs(err[i] - per * (double)scored) < 1e-5 * (double)scored);
            assert_true(fabs(naive[i] - 3.0 * (double)scored) < 1e-5 * (double)scored);
        }
    /* the window: only the last W steps, all made after the swap's origin filter allows
     * (one-step origin p - 1 > 9 from p 11; horizon-end origin p - HZ > 9 from p 13) */
    CcdWatchScore s;
    ccd_watch_score(w, &s);
    const double want = ((1.0 / 3 + 2.0 / 3) / 2 + (2.0 / 3 + 2.0 / 3) / 2) / 2;
    assert_true(fabs(s.mase - want) < 1e-9);
    assert_int_equal(s.forecasts, (int64_t)W * 2 * F);
    ccd_watch_close(&w);
    cc_history_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_totals_survive_window_and_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
