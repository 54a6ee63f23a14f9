/*
 * test_model_watch.c — daemon/model_watch.c's totals (ccd_watch_totals, the counters
 * /metrics exposes as cellcast_model_live_*_total): every matured forecast scored, whatever
 * the rollback window and the swaps (ccd_watch_restart clears the window, not the totals),
 * per KPI and forecast kind, against seasonal naive one day back; and the window's MASE
 * still computed from its own samples only. And the rollback's rule (ccd_watch_baseline,
 * ccd_watch_judge) on a network the size of the hourly replay (3 cells x 1 KPI x 2 kinds:
 * at most 144 matured forecasts in a day's window, under model.rollback_min_forecasts 200):
 * the windows grow until they hold the minimum, so a worse model is judged and rolled back;
 * the baseline never reaches before the previous model's own swap; a new model that never
 * gathers the minimum is "not judged" after CCD_WATCH_MAX_WINDOWS windows. And each cell
 * weighing alike (1 / its own scale): a cell in units 1000x the others' does not decide the
 * score, and a cell weighs only once its scale has learnt a day of steps.
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

/* Each history is a cell: its scale (what CcdCell.watch_scale holds) kept beside it here,
 * created at its first step like publish.c does, closed after each test (teardown). */
enum { MAX_TEST_CELLS = 8 };
static struct {
    const CcHistory *h;
    CcdWatchScale *scale;
} cells[MAX_TEST_CELLS];

static void watch_step(CcdModelWatch *w, const CcHistory *h, int64_t p)
{
    int i = 0;
    while (i < MAX_TEST_CELLS && cells[i].h && cells[i].h != h)
        i++;
    assert_true(i < MAX_TEST_CELLS);
    if (!cells[i].h) {
        int F, depth, HZ;
        cc_history_shape(h, &F, &depth, &HZ);
        cells[i].h = h;
        assert_int_equal(ccd_watch_scale_open(&cells[i].scale, F), 0);
    }
    ccd_watch_step(w, h, cells[i].scale, p);
}

static int forget_scales(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_TEST_CELLS; i++) {
        ccd_watch_scale_close(&cells[i].scale);
        cells[i].h = NULL;
    }
    return 0;
}

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
    watch_step(w, h, p);
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

/* The hourly replay's shape: hourly steps, a day's window, 3 cells, 1 KPI. */
enum { H_DAY = 24, H_STEP_S = 3600, H_W = H_DAY, H_HZ = 6, H_CELLS = 3, H_DEPTH = 64 };
enum { MIN_FORECASTS = 200 };
#define MARGIN 0.1

/* A step of every cell: truth rises by 3 a day (seasonal naive's error 3 on every sample),
 * both forecast kinds off by `off` (MASE off / 3). */
static void feed_cells(CcHistory **h, int cells, CcdModelWatch *w, int64_t p, float off)
{
    for (int c = 0; c < cells; c++) {
        const float v = (float)((p % H_DAY) * 10 + (p / H_DAY) * 3 + c), sd = 1;
        const float m1 = v + off, m2 = v - off;
        assert_int_equal(cc_history_forecast(h[c], p, CC_HISTORY_ONE_STEP, &m1, &sd), 0);
        assert_int_equal(cc_history_forecast(h[c], p, CC_HISTORY_HORIZON_END, &m2, &sd), 0);
        assert_int_equal(cc_history_observe(h[c], p, &v, 0), 0);
        watch_step(w, h[c], p);
    }
}

/* The new model's forecasts counted at target step p after a swap at step `swap`: one-step
 * made at p - 1, horizon-end at p - H_HZ, each counted when made after the swap. */
static int64_t counted_since(int64_t swap, int64_t p, int cells)
{
    int64_t n = 0;
    for (int64_t q = swap + 1; q <= p; q++)
        n += cells * ((q - 1 > swap) + (q - H_HZ > swap));
    return n;
}

/* |error| 1 against naive's 3 (float32 values below 2^10: the sums exact to ~1e-4 over
 * a few hundred samples) */
#define MASE_TOL 1e-6

/* The previous model serves 4 days (scored from day 1, weighed from day 2: a cell's scale
 * learns a day first), then a swap to a model `new_off` off: the baseline
 * grows back past a day (144 forecasts) to the minimum, and the new model's window grows
 * from the swap until it spans a day and holds the minimum; then it is judged `want`. */
static void judged_on_hourly(float new_off, CcdWatchVerdict want)
{
    CcHistory *h[H_CELLS];
    CcdModelWatch *w;
    for (int c = 0; c < H_CELLS; c++)
        assert_int_equal(cc_history_open(&h[c], 1, H_DEPTH, H_HZ), 0);
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    const int64_t swap = 4 * H_DAY - 1;
    for (int64_t p = 0; p <= swap; p++)
        feed_cells(h, H_CELLS, w, p, 1.0f);
    CcdWatchScore s;
    ccd_watch_score(w, &s); /* the issue: a day's window holds 144, under the minimum */
    assert_int_equal(s.forecasts, (int64_t)H_W * H_CELLS * 2);
    assert_true(s.forecasts < MIN_FORECASTS);
    ccd_watch_baseline(w, MIN_FORECASTS, &s);
    const int64_t per_step = H_CELLS * 2, steps = (MIN_FORECASTS + per_step - 1) / per_step;
    assert_int_equal(s.forecasts, steps * per_step);
    assert_int_equal(s.steps, steps);
    assert_int_equal(s.last_step, swap);
    assert_int_equal(s.first_step, swap - steps + 1);
    assert_true(fabs(s.mase - 1.0 / 3) < MASE_TOL);
    const double baseline = s.mase;
    ccd_watch_restart(w, swap);
    int64_t judged_at = -1;
    CcdWatchVerdict v = CCD_WATCH_WAIT;
    for (int64_t p = swap + 1; p < swap + 3 * H_W && v == CCD_WATCH_WAIT; p++) {
        feed_cells(h, H_CELLS, w, p, new_off);
        v = ccd_watch_judge(w, baseline, MIN_FORECASTS, MARGIN, &s);
        if (v == CCD_WATCH_WAIT) { /* waits while the window is short of a day or of 200 */
            assert_true(p - swap < H_W || counted_since(swap, p, H_CELLS) < MIN_FORECASTS);
        } else
            judged_at = p;
    }
    assert_int_equal(v, want);
    /* judged at the first step with a day and the minimum, on every forecast since the
     * swap (the window grew: the early ones count) */
    assert_true(judged_at - swap >= H_W);
    assert_true(counted_since(swap, judged_at, H_CELLS) >= MIN_FORECASTS);
    assert_true(counted_since(swap, judged_at - 1, H_CELLS) < MIN_FORECASTS);
    assert_int_equal(s.forecasts, counted_since(swap, judged_at, H_CELLS));
    assert_int_equal(s.steps, judged_at - swap);
    assert_true(fabs(s.mase - new_off / 3.0) < MASE_TOL);
    ccd_watch_close(&w);
    for (int c = 0; c < H_CELLS; c++)
        cc_history_close(&h[c]);
}

static void test_hourly_worse_model_rolled_back(void **state)
{
    (void)state;
    judged_on_hourly(2.0f, CCD_WATCH_ROLL_BACK); /* 2/3 > 1.1 x 1/3 */
}

static void test_hourly_as_good_model_kept(void **state)
{
    (void)state;
    judged_on_hourly(1.0f, CCD_WATCH_KEEP);
}

/* The baseline stops at the previous model's own swap (its predecessor's forecasts are not
 * its own), and reaches no further than a window when that holds the minimum. */
static void test_baseline_bounds(void **state)
{
    (void)state;
    CcHistory *h[H_CELLS];
    CcdModelWatch *w;
    for (int c = 0; c < H_CELLS; c++)
        assert_int_equal(cc_history_open(&h[c], 1, H_DEPTH, H_HZ), 0);
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    const int64_t swap1 = 2 * H_DAY - 1, swap2 = swap1 + 30;
    for (int64_t p = 0; p <= swap1; p++)
        feed_cells(h, H_CELLS, w, p, 1.0f);
    ccd_watch_restart(w, swap1);
    for (int64_t p = swap1 + 1; p <= swap2; p++)
        feed_cells(h, H_CELLS, w, p, 2.0f);
    CcdWatchScore s;
    ccd_watch_baseline(w, MIN_FORECASTS, &s); /* 30 steps of its own: short of 200 */
    assert_int_equal(s.steps, swap2 - swap1);
    assert_int_equal(s.forecasts, counted_since(swap1, swap2, H_CELLS));
    assert_true(s.forecasts < MIN_FORECASTS);
    assert_true(fabs(s.mase - 2.0 / 3) < MASE_TOL); /* none of the model before's */
    ccd_watch_baseline(w, 1, &s);                   /* a large network: a window, not less */
    assert_int_equal(s.steps, H_W);
    assert_int_equal(s.forecasts, (int64_t)H_W * H_CELLS * 2);
    ccd_watch_close(&w);
    for (int c = 0; c < H_CELLS; c++)
        cc_history_close(&h[c]);
}

/* A swap before any step was scored (the first learned model after a re-exec: the watch is
 * new, at real step numbers): the windows start at the first step scored, and the counts
 * say so rather than the ring's length; the cells weigh from a day after it (their scales
 * learn a day of steps first). */
static void test_swap_before_any_step(void **state)
{
    (void)state;
    CcHistory *h[H_CELLS];
    CcdModelWatch *w;
    const int64_t t0 = 420000; /* hourly steps since the epoch, in 2017 */
    for (int c = 0; c < H_CELLS; c++)
        assert_int_equal(cc_history_open(&h[c], 1, H_DEPTH, H_HZ), 0);
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    ccd_watch_restart(w, ccd_watch_newest(w));    /* -1: nothing seen yet */
    for (int64_t p = t0; p < t0 + 3 * H_DAY; p++) /* scored from t0 + H_DAY (a day back) */
        feed_cells(h, H_CELLS, w, p, 2.0f);
    CcdWatchScore s;
    ccd_watch_baseline(w, MIN_FORECASTS, &s);
    assert_int_equal(s.steps, 2 * H_DAY);
    assert_int_equal(s.forecasts, (int64_t)H_DAY * H_CELLS * 2); /* the weighed day's */
    assert_int_equal(s.first_step, t0 + 2 * H_DAY);
    assert_int_equal(ccd_watch_judge(w, 1.0 / 3, MIN_FORECASTS, MARGIN, &s), CCD_WATCH_WAIT);
    assert_int_equal(s.steps, 2 * H_DAY);
    ccd_watch_close(&w);
    for (int c = 0; c < H_CELLS; c++)
        cc_history_close(&h[c]);
}

/* Nothing scored yet (GET /v1/model before the first matured forecast, with or without a
 * swap): every reading is empty, and reads no bucket (newest is -1; under ASan a read of
 * bucket -1 fails here). */
static void test_read_before_any_step(void **state)
{
    (void)state;
    CcdModelWatch *w;
    CcdWatchScore s;
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    for (int swap = 0; swap < 2; swap++) {
        if (swap)
            ccd_watch_restart(w, ccd_watch_newest(w));
        ccd_watch_score(w, &s);
        assert_int_equal(s.steps, 0);
        assert_int_equal(s.forecasts, 0);
        assert_true(isnan(s.mase));
        ccd_watch_baseline(w, MIN_FORECASTS, &s);
        assert_int_equal(s.steps, 0);
        assert_int_equal(s.forecasts, 0);
        assert_int_equal(ccd_watch_judge(w, 1.0, MIN_FORECASTS, MARGIN, &s), CCD_WATCH_WAIT);
        assert_int_equal(s.forecasts, 0);
    }
    ccd_watch_close(&w);
}

/* One cell (2 forecasts a step) and a minimum it never reaches: not judged once its window
 * spans CCD_WATCH_MAX_WINDOWS windows, with the counts. */
static void test_not_judged_after_max_windows(void **state)
{
    (void)state;
    CcHistory *h;
    CcdModelWatch *w;
    const int64_t min = 10000;
    assert_int_equal(cc_history_open(&h, 1, H_DEPTH, H_HZ), 0);
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    const int64_t swap = 2 * H_DAY - 1, last = swap + (int64_t)CCD_WATCH_MAX_WINDOWS * H_W;
    for (int64_t p = 0; p <= swap; p++)
        feed_cells(&h, 1, w, p, 1.0f);
    ccd_watch_restart(w, swap);
    CcdWatchScore s;
    for (int64_t p = swap + 1; p <= last; p++) {
        feed_cells(&h, 1, w, p, 2.0f);
        assert_int_equal(ccd_watch_judge(w, 1.0 / 3, min, MARGIN, &s),
                         p < last ? CCD_WATCH_WAIT : CCD_WATCH_NOT_JUDGED);
    }
    assert_int_equal(s.steps, last - swap);
    assert_int_equal(s.forecasts, counted_since(swap, last, 1));
    ccd_watch_close(&w);
    cc_history_close(&h);
}

/* KPIs that never move (seasonal naive's error 0): no MASE, whatever the forecasts (a cell
 * whose scale is 0 does not weigh: no sample in the window); not judged once the window
 * spans CCD_WATCH_MAX_WINDOWS windows, rather than waited on. */
static void test_no_mase_not_judged(void **state)
{
    (void)state;
    CcHistory *h;
    CcdModelWatch *w;
    assert_int_equal(cc_history_open(&h, 1, H_DEPTH, H_HZ), 0);
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    const int64_t swap = 2 * H_DAY - 1, last = swap + (int64_t)CCD_WATCH_MAX_WINDOWS * H_W;
    CcdWatchScore s;
    for (int64_t p = 0; p <= last; p++) {
        const float v = 5, m = 6, sd = 1;
        assert_int_equal(cc_history_forecast(h, p, CC_HISTORY_ONE_STEP, &m, &sd), 0);
        assert_int_equal(cc_history_forecast(h, p, CC_HISTORY_HORIZON_END, &m, &sd), 0);
        assert_int_equal(cc_history_observe(h, p, &v, 0), 0);
        watch_step(w, h, p);
        if (p == swap)
            ccd_watch_restart(w, swap);
        else if (p > swap)
            assert_int_equal(ccd_watch_judge(w, 1.0, 1, MARGIN, &s),
                             p < last ? CCD_WATCH_WAIT : CCD_WATCH_NOT_JUDGED);
    }
    assert_true(isnan(s.mase));
    assert_int_equal(s.forecasts, 0);
    double err[2], naive[2];
    int64_t n[2];
    ccd_watch_totals(w, err, naive, n); /* the counters have them */
    assert_int_equal(n[0], last + 1 - H_DAY);
    ccd_watch_close(&w);
    cc_history_close(&h);
}

/* Per-cell weighting (the learner's criterion: each series' MASE, then the mean): two
 * cells, one in units 1000x the other's. Truth rises by 3 units a day (seasonal naive's
 * error 3u on every sample); the forecasts are off by `ratio` x 3u (a MASE of `ratio`). */
static void feed_unit(CcHistory *h, CcdModelWatch *w, int64_t p, float unit, float ratio)
{
    const float v = unit * (float)((p % H_DAY) * 10 + (p / H_DAY) * 3), sd = 1;
    const float m1 = v + ratio * 3 * unit, m2 = v - ratio * 3 * unit;
    assert_int_equal(cc_history_forecast(h, p, CC_HISTORY_ONE_STEP, &m1, &sd), 0);
    assert_int_equal(cc_history_forecast(h, p, CC_HISTORY_HORIZON_END, &m2, &sd), 0);
    assert_int_equal(cc_history_observe(h, p, &v, 0), 0);
    watch_step(w, h, p);
}

/* values below 2^18 (float32 ulp 2^-6 there) against errors of ~3000 units: each term
 * exact to ~1e-5 relative */
#define UNIT_TOL 1e-4

/* The big cell slightly worse than naive (1.1), the small one far better (0.2): pooled
 * sums say 1.0995 (the big cell decides), the per-cell weighting their mean, 0.65. */
static void test_big_units_do_not_decide(void **state)
{
    (void)state;
    CcHistory *h[2];
    CcdModelWatch *w;
    const float unit[2] = {1000, 1}, ratio[2] = {1.1f, 0.2f};
    for (int c = 0; c < 2; c++)
        assert_int_equal(cc_history_open(&h[c], 1, H_DEPTH, H_HZ), 0);
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    for (int64_t p = 0; p < 4 * H_DAY; p++) /* scored from day 1, weighed from day 2 */
        for (int c = 0; c < 2; c++)
            feed_unit(h[c], w, p, unit[c], ratio[c]);
    CcdWatchScore s;
    ccd_watch_score(w, &s);
    assert_int_equal(s.forecasts, (int64_t)H_W * 2 * 2);
    assert_true(s.mase < 1);
    assert_true(fabs(s.mase - (1.1 + 0.2) / 2) < UNIT_TOL);
    /* the counters stay unweighted: every sample in its own units (what learn_e2e.sh
     * differences), pooled */
    double err[2], naive[2];
    int64_t n[2];
    ccd_watch_totals(w, err, naive, n);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(n[k], 3 * H_DAY * 2);
        assert_true(err[k] / naive[k] > 1);
    }
    /* the weighted counters: the rollback's score of their period (the weighed days) */
    ccd_watch_scaled_totals(w, err, naive, n);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(n[k], 2 * H_DAY * 2);
        assert_true(fabs(err[k] / naive[k] - (1.1 + 0.2) / 2) < UNIT_TOL);
    }
    ccd_watch_close(&w);
    for (int c = 0; c < 2; c++)
        cc_history_close(&h[c]);
}

/* A cell weighs once its scale has learnt from a day of steps: a cell in large units and
 * twice as bad as naive joins late; for its first day of scored steps only the other
 * cell's samples are in the window (its own are in the counters); then both weigh alike. */
static void test_cold_cell_weighs_after_a_day(void **state)
{
    (void)state;
    CcHistory *h[2];
    CcdModelWatch *w;
    const float unit[2] = {1, 1000}, ratio[2] = {1.0f / 3, 2};
    const int64_t join = 3 * H_DAY; /* the second cell's first step: scored from join + a day */
    for (int c = 0; c < 2; c++)
        assert_int_equal(cc_history_open(&h[c], 1, H_DEPTH, H_HZ), 0);
    assert_int_equal(ccd_watch_open(&w, H_W, H_STEP_S, 1), 0);
    CcdWatchScore s;
    for (int64_t p = 0; p < join + 3 * H_DAY; p++) {
        for (int c = 0; c < 2; c++)
            if (c == 0 || p >= join)
                feed_unit(h[c], w, p, unit[c], ratio[c]);
        if (p == join + 2 * H_DAY - 1) { /* the window: the second cell's cold day */
            ccd_watch_score(w, &s);
            assert_int_equal(s.forecasts, (int64_t)H_W * 2);
            assert_true(fabs(s.mase - 1.0 / 3) < UNIT_TOL);
        }
    }
    ccd_watch_score(w, &s); /* a day later: both cells, each its own MASE, the mean */
    assert_int_equal(s.forecasts, (int64_t)H_W * 2 * 2);
    assert_true(fabs(s.mase - (1.0 / 3 + 2) / 2) < UNIT_TOL);
    double err[2], naive[2];
    int64_t n[2];
    ccd_watch_totals(w, err, naive, n);
    /* the cold samples are counted: the first cell's from step H_DAY, the second's from a
     * day after it joined */
    assert_int_equal(n[0], (join + 3 * H_DAY - H_DAY) + 2 * H_DAY);
    ccd_watch_close(&w);
    for (int c = 0; c < 2; c++)
        cc_history_close(&h[c]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_totals_survive_window_and_restart, forget_scales),
        cmocka_unit_test_teardown(test_hourly_worse_model_rolled_back, forget_scales),
        cmocka_unit_test_teardown(test_hourly_as_good_model_kept, forget_scales),
        cmocka_unit_test_teardown(test_baseline_bounds, forget_scales),
        cmocka_unit_test_teardown(test_swap_before_any_step, forget_scales),
        cmocka_unit_test_teardown(test_read_before_any_step, forget_scales),
        cmocka_unit_test_teardown(test_not_judged_after_max_windows, forget_scales),
        cmocka_unit_test_teardown(test_no_mase_not_judged, forget_scales),
        cmocka_unit_test_teardown(test_big_units_do_not_decide, forget_scales),
        cmocka_unit_test_teardown(test_cold_cell_weighs_after_a_day, forget_scales),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
