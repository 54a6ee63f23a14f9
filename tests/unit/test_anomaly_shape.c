/* test_anomaly_shape.c — shape novelty (lib/cc_anomaly_shape): a repeating daily shape
 * makes its categories and then reports nothing; the same shape flattened at its middle
 * value (inside the range seen, so value novelty cannot see it) is reported; a KPI that
 * keeps making categories (noise) is never reported while quiet holds; a constant KPI has
 * one shape; categories never exceed cats. Through the detector (shape_w > 0): the flat
 * day fires with the novelty rule where it does not with the stage off, its alert names
 * the KPI with novelty "shape" (a value past the range: "value"), a cell restarted from
 * its state midway fires the same, an older record (version 7) still loads, and
 * truncated or inconsistent records and shape_w 1 are refused. */
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
#include "cc_anomaly_cell.h" /* the novelty count a record restores */
#include "cc_anomaly_shape.h"
#include "testlib.h"

enum { DAY = 96, W = 8, DS = 3, CATS = 32 };

static const CcShapeParams params = {W, DS, 0.75, CATS, 100, 256};

/* A daily wave of amplitude 10 around 50 with small noise; flat at 50 on day `flat_day`
 * (-1: never). */
static double wave(int64_t t, int flat_day, uint64_t *rng)
{
    double noise = 0.2 * (tl_rng_uniform(rng) - 0.5);
    if (flat_day >= 0 && t / DAY == flat_day)
        return 50 + noise;
    return 50 + 10 * sin(2 * M_PI * (double)(t % DAY) / DAY) + noise;
}

/* The stage alone over days of the wave; the steps reported (count), the first in *first. */
typedef struct Stage {
    CcShape *sh;
    int64_t *used;
    float *box;
    double lo, hi;
} Stage;

static void stage_open(Stage *s)
{
    s->sh = cc_shape_block(1, W, CATS, &s->used, &s->box);
    assert_non_null(s->sh);
    s->lo = INFINITY, s->hi = -INFINITY;
}

static int stage_step(Stage *s, const CcShapeParams *p, double x)
{
    s->lo = fmin(s->lo, x), s->hi = fmax(s->hi, x);
    int r = cc_shape_step(s->sh, s->box, s->used, p, x, s->lo, s->hi);
    assert_true(s->sh->n_cat <= p->cats);
    assert_true(cc_shape_valid(s->sh, s->box, p->w, p->ds, p->cats));
    return r;
}

static int run_wave(int days, int flat_day, int64_t *first)
{
    Stage s;
    stage_open(&s);
    uint64_t rng = 9;
    int n = 0;
    *first = -1;
    for (int64_t t = 0; t < (int64_t)days * DAY; t++)
        if (stage_step(&s, &params, wave(t, flat_day, &rng))) {
            if (*first < 0)
                *first = t;
            n++;
        }
    free(s.sh);
    return n;
}

static void test_repeating_shape_is_not_news(void **state)
{
    (void)state;
    int64_t first;
    assert_int_equal(run_wave(30, -1, &first), 0);
}

static void test_flat_day_is_reported(void **state)
{
    (void)state;
    int64_t first;
    int n = run_wave(30, 20, &first);
    assert_true(n >= 1 && n <= 2); /* quiet: at most one more within 256 windows */
    assert_true(first >= 20 * DAY && first < 21 * DAY);
}

static void test_noise_is_never_reported(void **state)
{
    (void)state;
    Stage s;
    stage_open(&s);
    uint64_t rng = 5;
    int n = 0;
    for (int t = 0; t < 50000; t++)
        n += !!stage_step(&s, &params, tl_rng_uniform(&rng));
    assert_int_equal(n, 0);
    assert_int_equal(s.sh->n_cat, CATS); /* it kept making them, the oldest made room */
    /* without quiet the same noise is reported: quiet is what holds it */
    CcShapeParams loud = params;
    loud.quiet = 0;
    for (int t = 0; t < 3000; t++)
        n += !!stage_step(&s, &loud, tl_rng_uniform(&rng));
    assert_true(n > 10);
    free(s.sh);
}

static void test_constant_has_one_shape(void **state)
{
    (void)state;
    Stage s;
    stage_open(&s);
    for (int t = 0; t < 5000; t++)
        assert_int_equal(stage_step(&s, &params, 7.0), 0);
    assert_int_equal(s.sh->n_cat, 0); /* no range: nothing to compare in */
    free(s.sh);
}

/* ---- through the detector ---- */

static void settings(CcAnomalySettings *s, int shape_w)
{
    cc_anomaly_default_settings(s);
    s->n_features = 1;
    s->step_seconds = 900;
    s->profile_h = 0; /* shape novelty alone: the profile would see a flat day too */
    s->cusum_h = 0;
    s->shape_w = shape_w;
    s->shape_ds = DS;
    s->shape_rho = 0.75;
    s->shape_quiet = 256;
}

/* The first anomaly firing's attribution, as the alert's JSON says it. */
typedef struct FirstFiring {
    int seen;
    int novelty;
    char json[1024];
} FirstFiring;

static void on_event(void *cookie, const CcAlertEvent *ev)
{
    FirstFiring *ff = cookie;
    if (ff->seen || ev->kind != CC_ALERT_ANOMALY || ev->state != CC_ALERT_FIRING)
        return;
    ff->seen = 1;
    ff->novelty = ev->n_attr > 0 ? ev->attr[0].novelty : -1;
    assert_true(cc_alert_event_json(ev, NULL, ff->json, sizeof ff->json) > 0);
}

static FirstFiring first_firing;

static void step(CcAnomaly *a, CcAnomalyCell *c, int64_t t, double x)
{
    double mean = x, sd = 1; /* a forecast that follows the series: z is 0 */
    float v = (float)x;
    const CcAlertSink sink = {&first_firing, on_event};
    cc_anomaly_set_expect(a, c, t, &mean, &sd, NULL);
    assert_int_equal(cc_anomaly_observe(a, c, t, &v, NULL, &sink), 0);
}

/* 30 days with the flat day 20; firings; a save and load (a restart) at reload_at; kpi_shape
 * the KPI's override (0 auto, -1 off). */
static int run_detector(int shape_w, int64_t reload_at, int kpi_shape)
{
    CcAnomalySettings s;
    settings(&s, shape_w);
    s.kpi[0].shape = kpi_shape;
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL;
    assert_int_equal(cc_anomaly_open(&a, &s, NULL, 0), 0);
    assert_int_equal(cc_anomaly_cell_open(&c, a, "shape"), 0);
    uint64_t rng = 9;
    for (int64_t t = 0; t < 30 * DAY; t++) {
        if (t == reload_at) {
            long n = cc_anomaly_cell_save(c, NULL, 0);
            uint8_t *b = malloc((size_t)n);
            assert_int_equal(cc_anomaly_cell_save(c, b, (size_t)n), n);
            CcAnomalyCell *c2 = NULL;
            assert_int_equal(cc_anomaly_cell_open(&c2, a, "shape"), 0);
            /* every truncation is refused, and a category count past cats */
            for (long len = 0; len < n; len += len < 64 ? 1 : 97)
                assert_int_equal(cc_anomaly_cell_load(c2, b, (size_t)len, NULL, 0), -EINVAL);
            assert_int_equal(cc_anomaly_cell_load(c2, b, (size_t)n, NULL, 0), 0);
            cc_anomaly_cell_close(&c);
            c = c2;
            free(b);
        }
        step(a, c, t, wave(t, 20, &rng));
    }
    CcAnomalyCellStats st;
    cc_anomaly_cell_stats(c, &st);
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
    return (int)st.firing;
}

static void test_detector_fires_on_flat_day(void **state)
{
    (void)state;
    assert_int_equal(run_detector(0, -1, 0), 0); /* inside the range: value novelty is silent */
    memset(&first_firing, 0, sizeof first_firing);
    int on = run_detector(W, -1, 0);
    assert_int_equal(on, 1);
    /* the alert names the KPI and says why: its z is 0, its shape is new */
    assert_true(first_firing.seen);
    assert_int_equal(first_firing.novelty, CC_NOVEL_SHAPE);
    assert_non_null(strstr(first_firing.json, "\"novelty\":\"shape\""));
    assert_int_equal(run_detector(W, 15 * DAY + 1, 0), on); /* restarted midway: the same */
    assert_int_equal(run_detector(W, -1, -1), 0);           /* off for this KPI */
}

/* A value 50 % of the range above it, the forecast following it (z 0): value novelty
 * fires, and its alert says so. */
static void test_value_novelty_is_named(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s, 0);
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL;
    assert_int_equal(cc_anomaly_open(&a, &s, NULL, 0), 0);
    assert_int_equal(cc_anomaly_cell_open(&c, a, "value"), 0);
    memset(&first_firing, 0, sizeof first_firing);
    uint64_t rng = 9;
    for (int64_t t = 0; t < 10 * DAY; t++)
        step(a, c, t, t == 8 * DAY ? 70 : wave(t, -1, &rng));
    assert_true(first_firing.seen);
    assert_int_equal(first_firing.novelty, CC_NOVEL_VALUE);
    assert_non_null(strstr(first_firing.json, "\"novelty\":\"value\""));
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
}

/* A record whose stage is on, as bytes, as version 8 (without version 9's 44 bytes,
 * version 10's 16, version 11's 40, version 13's 48 and version 14's 12 at the end: the
 * KPI's absence run, its first step and its alert; its false-alarm bar factor and step; the
 * fit of its own bar; the fit of its profile CUSUM's excursions, the profile being off; the
 * tail calibration of z < 0). */
static uint8_t *saved(CcAnomaly *a, CcAnomalyCell **c, long *n)
{
    uint64_t rng = 9;
    assert_int_equal(cc_anomaly_cell_open(c, a, "shape"), 0);
    for (int64_t t = 0; t < 10 * DAY; t++)
        step(a, *c, t, wave(t, -1, &rng));
    *n = cc_anomaly_cell_save(*c, NULL, 0);
    uint8_t *b = malloc((size_t)*n);
    assert_int_equal(cc_anomaly_cell_save(*c, b, (size_t)*n), *n);
    uint32_t eight = 8;
    memcpy(b + 4, &eight, 4);
    *n -= 44 + 16 + 40 + 48 + 12;
    return b;
}

static void test_state_records(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s, W);
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL, *c2 = NULL;
    assert_int_equal(cc_anomaly_open(&a, &s, NULL, 0), 0);
    long n;
    uint8_t *b = saved(a, &c, &n);
    assert_int_equal(cc_anomaly_cell_open(&c2, a, "shape"), 0);
    /* the record ends with the sizes (3 × 4 bytes), the stage (acc 8, four int32 16, two
     * int64 16, the points' ring 4 × CC_SHAPE_MAX_W) and the categories (used, then boxes) */
    const size_t cats_bytes = (size_t)CATS * 8 + (size_t)CATS * 2 * W * 4;
    const size_t stage_at = (size_t)n - cats_bytes - 4 * CC_SHAPE_MAX_W - 16 - 16 - 8;
    const size_t sizes_at = stage_at - 12;
    int32_t sz[3];
    memcpy(sz, b + sizes_at, sizeof sz);
    assert_int_equal(sz[0], W);
    assert_int_equal(sz[1], DS);
    assert_int_equal(sz[2], CATS);
    /* an inconsistent category count (past cats) is refused, the intact record loads */
    const size_t ncat_at = stage_at + 8 + 4 * 3;
    int32_t ncat;
    memcpy(&ncat, b + ncat_at, 4);
    assert_true(ncat > 0 && ncat <= CATS);
    int32_t bad = CATS + 1;
    memcpy(b + ncat_at, &bad, 4);
    char err[256] = "";
    assert_int_equal(cc_anomaly_cell_load(c2, b, (size_t)n, err, sizeof err), -EINVAL);
    memcpy(b + ncat_at, &ncat, 4);
    assert_int_equal(cc_anomaly_cell_load(c2, b, (size_t)n, NULL, 0), 0);
    /* version 8 counts the values the novelty range holds (10 days of 96, each scored) */
    assert_int_equal(c2->k[0].nov.n, 10 * DAY);
    /* version 7 (without the peak's novelty kinds, 8 × 4 bytes, and the stage): loads, the
     * stage starts again */
    uint32_t seven = 7;
    memcpy(b + 4, &seven, 4);
    assert_int_equal(cc_anomaly_cell_load(c2, b, sizes_at - 8 * 4, err, sizeof err), 0);
    /* before version 8 the count stopped at 100: such a range is warm, not two days short */
    assert_int_equal(c2->k[0].nov.n, CC_NOVELTY_MAX_N);
    free(b);
    cc_anomaly_cell_close(&c);
    cc_anomaly_cell_close(&c2);
    cc_anomaly_close(&a);
}

static void test_settings(void **state)
{
    (void)state;
    CcAnomalySettings s;
    settings(&s, 0);
    char err[256] = "";
    assert_int_equal(cc_anomaly_settings_set(&s, NULL, "shape_w", "1", err, sizeof err), 0);
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "shape_w"));
    assert_int_equal(cc_anomaly_settings_set(&s, NULL, "shape_w", "17", err, sizeof err), -EINVAL);
    assert_int_equal(cc_anomaly_settings_set(&s, NULL, "shape_rho", "1", err, sizeof err), -EINVAL);
    assert_int_equal(cc_anomaly_settings_set(&s, NULL, "shape_w", "8", err, sizeof err), 0);
    assert_int_equal(cc_anomaly_validate(&s, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeating_shape_is_not_news),
        cmocka_unit_test(test_flat_day_is_reported),
        cmocka_unit_test(test_noise_is_never_reported),
        cmocka_unit_test(test_constant_has_one_shape),
        cmocka_unit_test(test_detector_fires_on_flat_day),
        cmocka_unit_test(test_value_novelty_is_named),
        cmocka_unit_test(test_state_records),
        cmocka_unit_test(test_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
