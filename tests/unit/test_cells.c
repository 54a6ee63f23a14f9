/* test_cells.c — cellcastd's ingest rules (daemon/cells.c) and micro-batching
 * (daemon/scheduler.c) on the real engine with the tiny golden model (F=3, P=4):
 * consecutive steps, combining several records of one step, filling absent KPIs,
 * duplicates, late steps, gap imputation and sequence restarts (both policies), rounds of
 * a cell with several steps in one batch, LRU eviction that spares busy cells, partition
 * release; then the worker thread steps a batch and publishes forecasts, on_done runs on
 * the event loop, and a drain steps what is pending. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "cells.h"
#include "config.h"
#include "interval.h"
#include "scheduler.h"
#include "testlib.h"

#define MODEL TL_TINY_MODEL

typedef struct Fx {
    CcModel *m;
    CcEngine *e;
    CcdCells *t;
    CcdBatch b;
} Fx;

static int setup_with(void **state, int64_t max_cells, int policy, int max_gap)
{
    Fx *x = calloc(1, sizeof *x);
    char err[256];
    assert_int_equal(cc_model_open_file(&x->m, MODEL, err, sizeof err), 0);
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    assert_int_equal(cc_engine_open(&x->e, x->m, &es, NULL, 0), 0);
    CcdCellsSettings cs = {.max_cells = max_cells,
                           .kv_budget_bytes = 1LL << 30,
                           .gap_policy = policy,
                           .max_gap = max_gap};
    assert_int_equal(ccd_cells_open(&x->t, x->e, &cs), 0);
    x->b.F = x->m->hp.n_features;
    *state = x;
    return 0;
}

static int setup(void **state) { return setup_with(state, 1000, CCD_GAP_IMPUTE, 3); }
static int setup_small(void **state) { return setup_with(state, 2, CCD_GAP_IMPUTE, 3); }
static int setup_restart(void **state) { return setup_with(state, 1000, CCD_GAP_RESTART, 3); }

static int teardown(void **state)
{
    Fx *x = *state;
    ccd_cells_close(&x->t);
    cc_engine_close(&x->e);
    cc_model_close(&x->m);
    free(x->b.items);
    free(x->b.values);
    free(x);
    return 0;
}

static CcKpiRecord rec(const char *cell, int64_t step, uint64_t present, float v0, float v1,
                       float v2)
{
    CcKpiRecord r;
    memset(&r, 0, sizeof r);
    snprintf(r.cell_id, sizeof r.cell_id, "%s", cell);
    r.step = step;
    r.ts = step * 900;
    r.present = present;
    r.values[0] = v0;
    r.values[1] = v1;
    r.values[2] = v2;
    return r;
}

static void ingest(Fx *x, CcKpiRecord r, int want)
{
    assert_int_equal(ccd_cells_ingest(x->t, &x->b, &r, 0, 1), want);
}

/* Seals the open batch and marks it done (as if stepped), leaving it empty. */
static void seal_done(Fx *x)
{
    ccd_cells_seal(x->t, &x->b);
    ccd_cells_unbusy(x->t, &x->b);
    x->b.n = 0;
    x->b.n_rounds = 0;
}

static void test_consecutive_combine_fill(void **state)
{
    Fx *x = *state;
    ingest(x, rec("a", 100, 7, 1, 2, 3), 0);
    ingest(x, rec("b", 100, 7, 4, 5, 6), 0);
    seal_done(x);
    /* step 101 of a in two records: KPI 0 then KPIs 1 (latest wins) — KPI 2 absent */
    ingest(x, rec("a", 101, 1, 10, 0, 0), 0);
    ingest(x, rec("a", 101, 2, 0, 20, 0), 0);
    ingest(x, rec("a", 101, 2, 0, 21, 0), 0);
    assert_int_equal(x->b.n, 1);
    /* the third repeats a KPI the open item has: a duplicate merged (counted, latest wins) */
    assert_int_equal(ccd_cells_get(x->t, "a")->n_duplicates, 1);
    assert_int_equal(x->t->st.duplicates, 1);
    ccd_cells_seal(x->t, &x->b);
    const float *v = x->b.values;
    assert_true(v[0] == 10 && v[1] == 21 && v[2] == 3); /* KPI 2 filled with the previous 3 */
    CcdCell *a = ccd_cells_get(x->t, "a");
    assert_int_equal(a->n_filled, 1);
    assert_int_equal(a->busy, 1);
    ccd_cells_unbusy(x->t, &x->b);
    x->b.n = 0;
    assert_int_equal(a->n_steps, 2);
    assert_int_equal(a->n_records, 4);
    assert_int_equal(a->partition, 1);
}

static void test_duplicate_and_late(void **state)
{
    Fx *x = *state;
    ingest(x, rec("a", 100, 7, 1, 2, 3), 0);
    ingest(x, rec("a", 101, 7, 1, 2, 3), 0);
    seal_done(x);
    ingest(x, rec("a", 101, 7, 9, 9, 9), 0); /* dispatched already: duplicate */
    ingest(x, rec("a", 99, 7, 9, 9, 9), 0);  /* late */
    ingest(x, rec("a", 50, 7, 9, 9, 9), 0);  /* late */
    assert_int_equal(x->b.n, 0);
    CcdCell *a = ccd_cells_get(x->t, "a");
    assert_int_equal(a->n_duplicates, 1);
    assert_int_equal(a->n_late, 2);
    assert_int_equal(x->t->st.duplicates, 1);
    assert_int_equal(x->t->st.late, 2);
}

static void test_gap_impute_then_restart(void **state)
{
    Fx *x = *state;
    ingest(x, rec("a", 100, 7, 1, 2, 3), 0);
    seal_done(x);
    ingest(x, rec("a", 103, 7, 4, 5, 6), 0); /* gap of 2 ≤ max_gap 3: two imputed steps */
    assert_int_equal(x->b.n, 3);
    ccd_cells_seal(x->t, &x->b);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(x->b.items[i].step, 101 + i);
        assert_true(x->b.items[i].imputed);
        assert_true(x->b.values[i * 3] == 1 && x->b.values[i * 3 + 2] == 3);
        assert_int_equal(x->b.items[i].round, i);
    }
    assert_int_equal(x->b.items[2].step, 103);
    assert_false(x->b.items[2].imputed);
    assert_false(x->b.items[2].reset_before);
    assert_int_equal(x->b.items[2].round, 2);
    assert_int_equal(x->b.n_rounds, 3);
    ccd_cells_unbusy(x->t, &x->b);
    x->b.n = 0;
    ingest(x, rec("a", 108, 7, 7, 8, 9), 0); /* gap of 4 > 3: restart */
    assert_int_equal(x->b.n, 1);
    assert_true(x->b.items[0].reset_before);
    CcdCell *a = ccd_cells_get(x->t, "a");
    assert_int_equal(a->n_imputed, 2);
    assert_int_equal(a->n_restarts, 1);
    seal_done(x);
}

static void test_gap_policy_restart(void **state)
{
    Fx *x = *state;
    ingest(x, rec("a", 100, 7, 1, 2, 3), 0);
    seal_done(x);
    ingest(x, rec("a", 102, 7, 1, 2, 3), 0);
    assert_int_equal(x->b.n, 1);
    assert_true(x->b.items[0].reset_before);
    seal_done(x);
}

static void test_lru_eviction_spares_busy(void **state)
{
    Fx *x = *state; /* max_cells 2 */
    ingest(x, rec("a", 100, 7, 1, 2, 3), 0);
    ingest(x, rec("b", 100, 7, 1, 2, 3), 0);
    seal_done(x);
    ingest(x, rec("a", 101, 7, 1, 2, 3), 0); /* a is now the most recently updated */
    seal_done(x);
    ingest(x, rec("c", 100, 7, 1, 2, 3), 0); /* evicts b */
    assert_null(ccd_cells_get(x->t, "b"));
    assert_non_null(ccd_cells_get(x->t, "a"));
    assert_int_equal(x->t->st.evictions, 1);
    /* c has an open step, a is busy in a sealed batch: nothing can go */
    ccd_cells_seal(x->t, &x->b); /* c busy */
    CcdBatch b2 = {.F = 3};
    CcKpiRecord r = rec("a", 102, 7, 1, 2, 3);
    assert_int_equal(ccd_cells_ingest(x->t, &b2, &r, 0, 1), 0); /* a: open item in b2 */
    r = rec("d", 100, 7, 1, 2, 3);
    assert_int_equal(ccd_cells_ingest(x->t, &b2, &r, 0, 1), -ENOSPC);
    assert_int_equal(x->t->st.rejected_full, 1);
    ccd_cells_unbusy(x->t, &x->b);
    x->b.n = 0;
    free(b2.items);
    free(b2.values);
}

static void test_release_partitions(void **state)
{
    Fx *x = *state;
    CcKpiRecord r = rec("p1", 100, 7, 1, 2, 3);
    assert_int_equal(ccd_cells_ingest(x->t, &x->b, &r, 0, 1), 0);
    r = rec("p2", 100, 7, 1, 2, 3);
    assert_int_equal(ccd_cells_ingest(x->t, &x->b, &r, 0, 2), 0);
    r = rec("h", 100, 7, 1, 2, 3);
    assert_int_equal(ccd_cells_ingest(x->t, &x->b, &r, -1, -1), 0);
    int32_t parts[] = {1, 3};
    assert_int_equal(ccd_cells_release_partitions(x->t, 0, parts, 2), 1);
    assert_int_equal(ccd_cells_release_partitions(x->t, 0, parts, 2), 1); /* twice: one cell */
    assert_int_equal(x->t->n_doomed, 1);
    assert_int_equal(ccd_cells_reap(x->t), 0); /* p1 has an open step: kept until stepped */
    seal_done(x);
    assert_int_equal(ccd_cells_reap(x->t), 1);
    assert_int_equal(x->t->n_doomed, 0);
    assert_null(ccd_cells_get(x->t, "p1"));
    /* a message for a doomed cell keeps it */
    int32_t p2[] = {2};
    assert_int_equal(ccd_cells_release_partitions(x->t, 0, p2, 1), 1);
    r = rec("p2", 101, 7, 1, 2, 3);
    assert_int_equal(ccd_cells_ingest(x->t, &x->b, &r, 0, 2), 0);
    assert_int_equal(x->t->n_doomed, 0);
    seal_done(x);
    assert_int_equal(ccd_cells_reap(x->t), 0);
    assert_non_null(ccd_cells_get(x->t, "p2"));
    assert_non_null(ccd_cells_get(x->t, "p2"));
    assert_non_null(ccd_cells_get(x->t, "h"));
}

/* ---- the scheduler on a real event base and worker ---- */

typedef struct Done {
    int batches, items;
    uint64_t kafka_hi;
    struct event_base *base;
    CcdCells *t;
} Done;

static void seal(void *cookie, CcdBatch *b) { ccd_cells_seal(((Done *)cookie)->t, b); }

static void on_stepped(void *cookie, CcdCell *c, int64_t step, const float *values, int imputed,
                       uint64_t present, int held)
{
    CcForecast fc;
    ccd_publish_stepped(((Done *)cookie)->t, c, step, values, imputed, present, held, &fc);
}

static void on_done(void *cookie, CcdBatch *b)
{
    Done *d = cookie;
    ccd_cells_unbusy(d->t, b);
    d->batches++;
    d->items += b->n;
    d->kafka_hi = b->kafka_hi;
    for (int i = 0; i < b->n; i++)
        assert_int_equal(b->items[i].status, 0);
    event_base_loopbreak(d->base);
}

static void noop(evutil_socket_t fd, short what, void *arg) { (void)fd, (void)what, (void)arg; }

/* A scheduler on x's table that publishes what it steps (on_stepped) and counts into done
 * (a new event base in done->base); batches are dispatched when asked (or drained). */
static CcdSched *sched_open(Fx *x, Done *done)
{
    CcdSched *s;
    assert_non_null(done->base = event_base_new());
    done->t = x->t;
    CcdSchedSettings ss = {.batch_steps = 1000000,
                           .batch_ms = 0,
                           .on_done = on_done,
                           .on_stepped = on_stepped,
                           .cookie = done,
                           .seal = seal};
    assert_int_equal(ccd_sched_open(&s, done->base, x->e, &ss), 0);
    return s;
}

static void test_scheduler_steps_and_publishes(void **state)
{
    Fx *x = *state;
    Done done = {0};
    CcdSched *s = sched_open(x, &done);
    struct event_base *base = done.base;
    /* a registered event keeps event_base_dispatch waiting for the worker's wake-up */
    struct event *keep = event_new(base, -1, EV_PERSIST, noop, NULL);
    struct timeval tv = {3600, 0};
    event_add(keep, &tv);
    /* 12 steps of 3 cells, some cells with several steps in one batch */
    for (int k = 0; k < 12; k++) {
        for (int c = 0; c < 3; c++) {
            char id[8];
            snprintf(id, sizeof id, "s%d", c);
            CcKpiRecord r = rec(id, 1000 + k, 7, 10 + c + k % 5, 20 - k % 3, 5);
            assert_int_equal(ccd_cells_ingest(x->t, ccd_sched_open_batch(s), &r, 0, 0), 0);
        }
        if (k % 4 == 3) {
            ccd_sched_note_kafka(s, (uint64_t)k);
            assert_int_equal(ccd_sched_maybe_flush(s, 0), 1);
            event_base_dispatch(base); /* until on_done breaks the loop */
        }
    }
    assert_int_equal(done.batches, 3);
    assert_int_equal(done.items, 36);
    assert_int_equal(done.kafka_hi, 11);
    CcdCell *c = ccd_cells_get(x->t, "s1");
    assert_int_equal(c->n_steps, 12);
    assert_true(c->pub.valid);
    assert_int_equal(c->pub.step, 1011);
    assert_true(c->pub.have_expected);
    assert_true(c->pub.obs[0] == 10 + 1 + 11 % 5);
    /* the published copy equals the engine's forecast */
    CcForecast fc;
    cc_cell_forecast(c->cell, &fc);
    assert_memory_equal(c->pub.y, fc.y, sizeof(float) * 3 * (size_t)x->m->hp.horizon * 2);
    double m1[3], s1[3]; /* the expectation of 1012: the one-step point of this forecast */
    for (int f = 0; f < 3; f++)
        cc_forecast_point(&fc, f, 0, &m1[f], &s1[f]);
    /* drain steps what is pending without the loop */
    CcKpiRecord r = rec("s1", 1012, 7, 1, 2, 3);
    assert_int_equal(ccd_cells_ingest(x->t, ccd_sched_open_batch(s), &r, 0, 0), 0);
    ccd_sched_drain(s);
    assert_int_equal(c->pub.step, 1012);
    assert_true(c->pub.have_expected);
    for (int f = 0; f < 3; f++) {
        assert_float_equal(c->pub.exp_mean[f], (float)m1[f], 0);
        assert_float_equal(c->pub.exp_sd[f], (float)s1[f], 0);
    }
    assert_int_equal(ccd_sched_pending(s), 0);
    const CcdSchedStats *st = ccd_sched_stats(s);
    assert_int_equal(st->batches, 4);
    assert_int_equal(st->items, 37);
    ccd_sched_close(&s);
    event_free(keep);
    event_base_free(base);
}

/* A model whose engine ring, max(N·P + P, M + P − 1) = 25, is longer than N·P + P = 24. */
static CcModel *ring_model(int n_patches, int norm_window)
{
    CcHparams hp;
    CcModel *m = NULL;
    cc_hparams_default(&hp);
    hp.n_features = 3;
    hp.patch_len = 4;
    hp.n_patches = n_patches;
    hp.norm_window = norm_window;
    hp.d_model = 16;
    hp.n_heads = 2;
    hp.n_layers = 1;
    hp.d_ff = 32;
    hp.horizon = 6;
    hp.step_seconds = 900;
    assert_int_equal(cc_model_open(&m, &hp, NULL, 0), 0);
    cc_model_init_random(m, 7);
    return m;
}

static int imputed_steps(const Fx *x, const CcdCell *c, int64_t from, int64_t to)
{
    int n = 0;
    for (int64_t p = from; p <= to; p++)
        n += ccd_cells_imputed(x->t, c, p);
    return n;
}

/* Every step the engine's ring holds shows its own imputed flag, the oldest included, and
 * after a reload to a model of another shape too. */
static void test_imputed_flags_cover_the_engine_ring(void **state)
{
    (void)state;
    Fx fx = {0}, *x = &fx;
    CcModel *m2 = ring_model(3, 8); /* ring max(16, 11) = 16 */
    CcEngineSettings es;
    x->m = ring_model(5, 22);
    cc_engine_default_settings(&es);
    assert_int_equal(cc_engine_open(&x->e, x->m, &es, NULL, 0), 0);
    CcdCellsSettings cs = {
        .max_cells = 10, .kv_budget_bytes = 1LL << 30, .gap_policy = CCD_GAP_IMPUTE, .max_gap = 3};
    assert_int_equal(ccd_cells_open(&x->t, x->e, &cs), 0);
    x->b.F = 3;
    assert_int_equal(x->t->ring, 25);
    ingest(x, rec("a", 0, 7, 1, 2, 3), 0);
    ingest(x, rec("a", 2, 7, 1, 2, 3), 0); /* step 1 imputed */
    seal_done(x);
    for (int64_t p = 3; p <= 25; p++) {
        ingest(x, rec("a", p, 7, 1, 2, 3), 0);
        seal_done(x);
    }
    CcdCell *a = ccd_cells_get(x->t, "a");
    /* steps 1..25 are what the engine keeps: step 1 is the oldest */
    assert_int_equal(ccd_cells_imputed(x->t, a, 1), 1);
    assert_int_equal(imputed_steps(x, a, 2, 25), 0);
    ingest(x, rec("a", 27, 7, 1, 2, 3), 0); /* step 26 imputed */
    seal_done(x);
    assert_int_equal(cc_engine_set_model(x->e, m2), 0);
    int failed;
    assert_int_equal(ccd_cells_rebind(x->t, &failed), 1);
    assert_int_equal(failed, 0);
    assert_int_equal(x->t->ring, cc_engine_ring_steps(x->e));
    assert_int_equal(x->t->ring, 16);
    assert_int_equal(ccd_cells_imputed(x->t, a, 26), 1);
    assert_int_equal(imputed_steps(x, a, 27 - 15, 27), 1);
    for (int64_t p = 28; p <= 26 + 15; p++) {
        ingest(x, rec("a", p, 7, 1, 2, 3), 0);
        seal_done(x);
    }
    assert_int_equal(ccd_cells_imputed(x->t, a, 26), 1); /* the oldest of 16 */
    assert_int_equal(imputed_steps(x, a, 27, 26 + 15), 0);
    ccd_cells_close(&x->t);
    cc_engine_close(&x->e);
    cc_model_close(&x->m);
    cc_model_close(&m2);
    free(x->b.items);
    free(x->b.values);
}

/* Long histories (issue 15): recorded at publish with NaN for the KPIs no record gave,
 * counted in the table's bytes at unbusy, and evicted for once they grow past the budget. */
static void test_history_bytes_and_budget(void **state)
{
    Fx *x = *state;
    CcdCellsSettings cs = {.max_cells = 1000,
                           .kv_budget_bytes = 1LL << 30,
                           .gap_policy = CCD_GAP_IMPUTE,
                           .max_gap = 3,
                           .history_depth_s = 200 * 900};
    ccd_cells_set_settings(x->t, &cs);
    assert_int_equal(x->t->hist_depth, 200);
    for (int64_t p = 1000; p < 1100; p++) {
        for (int c = 0; c < 4; c++) {
            char id[8];
            snprintf(id, sizeof id, "h%d", c);
            ingest(x, rec(id, p, c ? 7 : 1, 1, 2, 3), 0); /* h0 gives prb only */
        }
        ccd_cells_seal(x->t, &x->b);
        for (int i = 0; i < x->b.n; i++) { /* as the worker would, without the engine */
            CcForecast fc = {0};
            const CcdItem *it = &x->b.items[i];
            ccd_publish_stepped(x->t, it->cell, it->step, x->b.values + (size_t)i * x->b.F,
                                it->imputed, it->present, it->held, &fc);
        }
        ccd_cells_unbusy(x->t, &x->b);
        x->b.n = 0;
        x->b.n_rounds = 0;
    }
    CcdCell *h0 = ccd_cells_get(x->t, "h0");
    CcHistoryRow row;
    assert_non_null(h0->hist);
    assert_int_equal(cc_history_get(h0->hist, 1050, &row), 1);
    assert_true(row.observed && row.values[0] == 1 && isnan(row.values[1]) && isnan(row.values[2]));
    assert_true(isnan(h0->pub.obs[1]) && h0->pub.obs[0] == 1);
    size_t hist = 0;
    for (int c = 0; c < 4; c++) {
        char id[8];
        snprintf(id, sizeof id, "h%d", c);
        hist += cc_history_bytes(ccd_cells_get(x->t, id)->hist);
    }
    assert_true(hist > 0);
    assert_int_equal(x->t->hist_bytes, hist);
    assert_int_equal(ccd_cells_bytes(x->t), 4 * x->t->cell_bytes + hist);
    /* a budget the histories have outgrown: idle cells go, least recently updated first */
    cs.kv_budget_bytes = (int64_t)(2 * x->t->cell_bytes + hist / 2);
    ccd_cells_set_settings(x->t, &cs);
    ccd_cells_reap(x->t);
    assert_int_equal(x->t->n_cells, 2);
    assert_int_equal(x->t->st.evictions, 2);
    assert_true((int64_t)ccd_cells_bytes(x->t) <= cs.kv_budget_bytes);
    assert_int_equal(x->t->hist_bytes, hist / 2);
    assert_null(ccd_cells_get(x->t, "h0"));
}

/* Steps cell `id` n times (p: its next step) through the scheduler's worker, its KPIs a
 * sine with uniform noise of ±noise. */
static void feed_noisy(Fx *x, CcdSched *s, const char *id, int64_t *p, int n, float noise,
                       uint64_t *rng)
{
    for (int i = 0; i < n; i++, (*p)++) {
        float v = 50 + 20 * sinf((float)*p / 3), u = noise * (2 * tl_rng_float(rng) - 1);
        CcKpiRecord r = rec(id, *p, 7, v + u, 3 * v + 200 + 3 * u, 5 + u / 5);
        assert_int_equal(ccd_cells_ingest(x->t, ccd_sched_open_batch(s), &r, 0, 0), 0);
        ccd_sched_drain(s);
    }
}

/* Online interval scales (issue 12, daemon/interval.h) in the table: created at a cell's
 * first forecast with the feature on, counted in the bytes of every cell, every matured
 * forecast scored and added to the table's counts, published with the forecast; turned off
 * (reload) they are freed with their published copy and nothing more is counted; on again,
 * the cells start again at scale 1 as they next step; another rate keeps the scales. */
static void test_interval_scales_reload(void **state)
{
    Fx *x = *state;
    Done done = {0};
    CcdSched *s = sched_open(x, &done);
    const int F = 3, HZ = x->m->hp.horizon;
    const size_t off_bytes = x->t->cell_bytes;
    CcdCellsSettings cs = x->t->s;
    cs.interval_adapt = 1;
    ccd_cells_set_settings(x->t, &cs);
    assert_int_equal(x->t->cell_bytes, off_bytes + ccd_interval_cell_bytes(F, HZ));
    uint64_t rng = 12;
    int64_t p = 1000;
    feed_noisy(x, s, "a", &p, 80, 30, &rng);
    CcdCell *c = ccd_cells_get(x->t, "a");
    assert_non_null(c->calib);
    assert_non_null(c->pub.scale);
    int64_t scored, missed;
    cc_online_calib_counts(c->calib, &scored, &missed);
    assert_true(scored > 40 * F * HZ && missed > 0);
    assert_int_equal(x->t->interval_scored, scored);
    assert_int_equal(x->t->interval_missed, missed);
    /* one more step matures one forecast per KPI and horizon step */
    feed_noisy(x, s, "a", &p, 1, 30, &rng);
    assert_int_equal(x->t->interval_scored, scored + F * HZ);
    int moved = 0;
    for (int f = 0; f < F; f++)
        for (int k = 0; k < HZ; k++) {
            double sc = cc_online_calib_scale(c->calib, f, k);
            assert_float_equal(c->pub.scale[f * HZ + k], (float)sc, 0);
            moved += sc != 1;
        }
    assert_int_equal(moved, F * HZ);
    /* off: freed, not counted, not created again */
    const uint64_t n_scored = x->t->interval_scored;
    cs.interval_adapt = 0;
    ccd_cells_set_settings(x->t, &cs);
    assert_null(c->calib);
    assert_null(c->pub.scale);
    assert_int_equal(x->t->cell_bytes, off_bytes);
    feed_noisy(x, s, "a", &p, 5, 30, &rng);
    assert_null(c->calib);
    assert_int_equal(x->t->interval_scored, n_scored);
    /* on again: scale 1 from the next step (nothing of the cell's own forecasts has matured) */
    cs.interval_adapt = 1;
    ccd_cells_set_settings(x->t, &cs);
    feed_noisy(x, s, "a", &p, 1, 30, &rng);
    assert_non_null(c->calib);
    for (int i = 0; i < F * HZ; i++)
        assert_true(c->pub.scale[i] == 1);
    feed_noisy(x, s, "a", &p, 10, 30, &rng);
    assert_true(x->t->interval_scored > n_scored);
    /* another rate: the same calibration, its scales kept (test_online_calib checks that
     * it then moves by the new rate) */
    CcOnlineCalib *kept = c->calib;
    feed_noisy(x, s, "a", &p, 10, 30, &rng);
    const float before = c->pub.scale[0];
    assert_true(before != 1);
    cs.interval_adapt_rate = 0.5;
    ccd_cells_set_settings(x->t, &cs);
    assert_ptr_equal(c->calib, kept);
    assert_true(c->pub.scale[0] == before);
    assert_true(cc_online_calib_scale(c->calib, 0, 0) == before);
    ccd_sched_close(&s);
    event_base_free(done.base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_consecutive_combine_fill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_and_late, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gap_impute_then_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gap_policy_restart, setup_restart, teardown),
        cmocka_unit_test_setup_teardown(test_lru_eviction_spares_busy, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_release_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_steps_and_publishes, setup, teardown),
        cmocka_unit_test(test_imputed_flags_cover_the_engine_ring),
        cmocka_unit_test_setup_teardown(test_history_bytes_and_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interval_scales_reload, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
