/* test_cell_record_unit.c — daemon/cell_record.c (the restore of a cell's record, for the
 * snapshot file and the state topic alike) linked from the daemon library without main:
 * a record restored into the table gives the cell its fields and its forecast; the cell
 * written again as a record (the snapshot's writer) gives back the same values and fields;
 * a record the checks refuse leaves no cell behind; the cell's interval scales survive the
 * snapshot's and the state topic's record, hostile ones are refused and counted (the cell
 * restored at scale 1). On the tiny golden model (F=3, HZ=6). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "alerts.h"
#include "cc_online_calib.h"
#include "cc_snapshot.h"
#include "cell_record.h"
#include "clock.h"
#include "cells.h"
#include "config.h"
#include "settings.h"
#include "testlib.h"
#include "tiny_daemon.h"

#define FIRST 1000000 /* steps: years back from now at any step length */

typedef struct Fx {
    Ccd d;
    CcdSettings st;
    int count; /* steps in the record: the model's context, a forecast can be made */
    float *values;
} Fx;

static int setup(void **state)
{
    Fx *x = calloc(1, sizeof *x);
    tiny_daemon_open(&x->d, &x->st);
    const CcHparams *hp = &x->d.model->hp;
    x->count = hp->patch_len * hp->n_patches;
    x->values = malloc((size_t)x->count * (size_t)hp->n_features * sizeof *x->values);
    for (int t = 0; t < x->count; t++)
        for (int f = 0; f < hp->n_features; f++)
            x->values[t * hp->n_features + f] = (float)(50 + 10 * f + 5 * sin(0.3 * t + f));
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    Fx *x = *state;
    tiny_daemon_close(&x->d, &x->st);
    free(x->values);
    free(x);
    return 0;
}

static CcSnapshotCell record(const Fx *x, const char *id, const CcdCellRecordExtra *ex)
{
    return (CcSnapshotCell){.cell_id = id,
                            .seq_start = FIRST,
                            .first = FIRST,
                            .count = x->count,
                            .n_features = x->d.model->hp.n_features,
                            .values = x->values,
                            .extra = (const uint8_t *)ex,
                            .extra_len = sizeof *ex};
}

static void test_round_trip(void **state)
{
    Fx *x = *state;
    Ccd *d = &x->d;
    const int F = d->model->hp.n_features;
    const int64_t S = d->model->hp.step_seconds, last = FIRST + x->count - 1;
    CcdCellRecordExtra ex = {.topic = 0,
                             .partition = 3,
                             .first_step = FIRST - 5,
                             .last_ts = last * S + 7,
                             .n_records = 123,
                             .n_steps = 99};
    CcSnapshotCell sc = record(x, "site1/cell-a", &ex);
    char err[256] = "";
    int rc = ccd_cell_record_restore(d, &sc, NULL, err, sizeof err);
    if (rc)
        fail_msg("restore: %s", err);
    CcdCell *c = ccd_cells_get(d->cells, "site1/cell-a");
    assert_non_null(c);
    assert_int_equal(c->topic, 0);
    assert_int_equal(c->partition, 3);
    assert_int_equal(c->first_step, FIRST - 5);
    assert_int_equal(c->last_step, last);
    assert_int_equal(c->last_ts, last * S + 7);
    assert_int_equal(c->n_records, 123);
    assert_int_equal(c->n_steps, 99);
    assert_memory_equal(c->last_values, x->values + (size_t)(x->count - 1) * F,
                        (size_t)F * sizeof(float));
    /* out NULL: the forecast of the last step is computed and published at once */
    assert_true(c->pub.valid);
    assert_int_equal(c->pub.step, last);
    assert_non_null(ccd_alerts_cell_state(c));

    /* the cell written again as a record: the same fields and values */
    CcdCellRecordExtra back;
    ccd_cell_record_extra(c, &back);
    assert_memory_equal(&back, &ex, sizeof ex);
    char path[] = "/tmp/test_cell_record_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &d->model->hp);
    CcSnapshotWriter *w = NULL;
    assert_int_equal(cc_snapshot_write_open(&w, path, &info, err, sizeof err), 0);
    assert_int_equal(cc_snapshot_write_engine_cell(w, c->id, c->cell, ccd_alerts_cell_state(c),
                                                   &back, sizeof back),
                     0);
    assert_int_equal(cc_snapshot_write_finish(&w, err, sizeof err), 0);
    CcSnapshotReader *r = NULL;
    assert_int_equal(cc_snapshot_read_open(&r, path, cc_snapshot_model_hash(&d->model->hp), &info,
                                           err, sizeof err),
                     0);
    CcSnapshotRecord rec;
    int cells = 0;
    while ((rc = cc_snapshot_read_next(r, &rec, err, sizeof err)) == 1) {
        if (rec.type != CC_SNAP_CELL)
            continue;
        cells++;
        assert_string_equal(rec.cell.cell_id, "site1/cell-a");
        assert_int_equal(rec.cell.first, FIRST);
        assert_int_equal(rec.cell.count, x->count);
        assert_memory_equal(rec.cell.values, x->values,
                            (size_t)x->count * (size_t)F * sizeof(float));
        assert_int_equal(rec.cell.extra_len, sizeof ex);
        assert_memory_equal(rec.cell.extra, &ex, sizeof ex);
        /* and restored again, under another id: the same cell */
        CcSnapshotCell again = rec.cell;
        again.cell_id = "site1/cell-b";
        assert_int_equal(ccd_cell_record_restore(d, &again, NULL, err, sizeof err), 0);
        CcdCell *b = ccd_cells_get(d->cells, "site1/cell-b");
        assert_non_null(b);
        assert_int_equal(b->last_step, last);
        assert_int_equal(b->n_records, 123);
        assert_true(b->pub.valid);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(cells, 1);
    cc_snapshot_read_close(&r);
    unlink(path);
}

static void test_refused_leaves_nothing(void **state)
{
    Fx *x = *state;
    Ccd *d = &x->d;
    const int64_t S = d->model->hp.step_seconds;
    CcdCellRecordExtra ex = {.topic = -1, .partition = -1, .first_step = FIRST, .last_ts = 0};
    CcSnapshotCell sc = record(x, "ahead", &ex);
    /* steps that end past the newest step ingest accepts now (clock + max_future_s) */
    sc.first = sc.seq_start = ccd_clock_max_ts(d) / S + 1;
    char err[256] = "";
    assert_int_equal(ccd_cell_record_restore(d, &sc, NULL, err, sizeof err), -ERANGE);
    assert_non_null(strstr(err, "ingest accepts"));
    assert_null(ccd_cells_get(d->cells, "ahead"));
    ex.partition = -7; /* fields out of range */
    sc = record(x, "bad-fields", &ex);
    assert_int_equal(ccd_cell_record_restore(d, &sc, NULL, err, sizeof err), -EINVAL);
    assert_null(ccd_cells_get(d->cells, "bad-fields"));
}

/* The tiny model's F × HZ calibration moved away from 1 (a model whose sd is half the
 * truth's error: the scales grow), saved as a record carries it. */
static uint8_t *moved_scales(int F, int HZ, size_t *n, float *scales)
{
    CcOnlineCalibSettings s;
    CcOnlineCalib *cal;
    cc_online_calib_default_settings(&s);
    assert_int_equal(cc_online_calib_open(&cal, &s, F, HZ), 0);
    float mean[CC_MAX_FEATURES * 64] = {0}, sd[CC_MAX_FEATURES * 64], y[CC_MAX_FEATURES];
    assert_true(F * HZ <= CC_MAX_FEATURES * 64);
    for (int i = 0; i < F * HZ; i++)
        sd[i] = 1;
    for (int t = 0; t < 200; t++) {
        for (int f = 0; f < F; f++)
            y[f] = (float)((t * 7 + f) % 5) - 2.0f; /* |y| up to 2 against sd 1 */
        cc_online_calib_observe(cal, t, y);
        cc_online_calib_push(cal, t, mean, sd);
    }
    *n = cc_online_calib_save_size(F, HZ);
    uint8_t *b = malloc(*n);
    assert_int_equal(cc_online_calib_save(cal, b, *n), *n);
    cc_online_calib_scales(cal, scales);
    cc_online_calib_close(&cal);
    return b;
}

/* The record's extra bytes: the fields, then `tail` (n bytes). */
static uint8_t *extra_with(const CcdCellRecordExtra *ex, const uint8_t *tail, size_t n)
{
    uint8_t *b = malloc(sizeof *ex + n);
    memcpy(b, ex, sizeof *ex);
    memcpy(b + sizeof *ex, tail, n);
    return b;
}

/* exp() of the saved log-scales against the scales the calibration kept by products (≤ HZ
 * products of ≤ 2 ulp since its last resync): 4·HZ·FLT_EPSILON relative. */
static void assert_scales(const CcdCell *c, const float *want, int F, int HZ)
{
    assert_non_null(c->calib);
    assert_non_null(c->pub.scale);
    int moved = 0;
    for (int i = 0; i < F * HZ; i++) {
        if (fabsf(c->pub.scale[i] - want[i]) > 4 * HZ * FLT_EPSILON * want[i])
            fail_msg("scale %d: %g, want %g", i, (double)c->pub.scale[i], (double)want[i]);
        moved += want[i] != 1;
    }
    assert_true(moved > 0);
}

/* A cell's interval scales survive its record: restored (the snapshot file's record,
 * fields + scales + long history) and handed over (the state topic's, fields + scales),
 * and the forecast computed at the restore is the first one scored again. */
static void test_scales_round_trip(void **state)
{
    Fx *x = *state;
    Ccd *d = &x->d;
    const int F = d->model->hp.n_features, HZ = d->model->hp.horizon;
    const int64_t S = d->model->hp.step_seconds, last = FIRST + x->count - 1;
    assert_true(d->cells->s.interval_adapt); /* the default */
    size_t n;
    float want[CC_MAX_FEATURES * 64];
    uint8_t *saved = moved_scales(F, HZ, &n, want);
    CcdCellRecordExtra ex = {.topic = 0, .partition = 1, .first_step = FIRST, .last_ts = last * S};
    uint8_t *extra = extra_with(&ex, saved, n);
    CcSnapshotCell sc = record(x, "cal-a", &ex);
    sc.extra = extra;
    sc.extra_len = sizeof ex + n;
    char err[256] = "";
    if (ccd_cell_record_restore(d, &sc, NULL, err, sizeof err))
        fail_msg("restore: %s", err);
    CcdCell *c = ccd_cells_get(d->cells, "cal-a");
    assert_non_null(c);
    assert_true(c->pub.valid);
    assert_scales(c, want, F, HZ);
    assert_int_equal(d->cells->interval_refused, 0);

    /* written again as the snapshot writes it (with the long history) and as the state
     * topic does (without): fields + the same scales, read back through the library */
    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &d->model->hp);
    CcSnapshotWriter *enc = NULL;
    CcSnapshotReader *dec = NULL;
    assert_int_equal(cc_snapshot_encoder_open(&enc, &info), 0);
    assert_int_equal(cc_snapshot_decoder_open(&dec, &info), 0);
    for (int with_history = 0; with_history < 2; with_history++) {
        size_t m = ccd_cell_record_extra_size(d->cells, c, with_history);
        assert_true(m >= sizeof ex + n);
        uint8_t *out = malloc(m);
        assert_int_equal(ccd_cell_record_extra_write(d->cells, c, with_history, out, m), m);
        assert_memory_equal(out + sizeof ex, saved, n); /* the log-scales exactly */
        const void *buf;
        size_t len;
        assert_int_equal(cc_snapshot_encode_engine_cell(
                             enc, c->id, c->cell, ccd_alerts_cell_state(c), out, m, &buf, &len),
                         0);
        CcSnapshotRecord rec;
        assert_int_equal(cc_snapshot_decode(dec, buf, len, &rec, err, sizeof err), 0);
        /* keyed as the state topic keys it: the check passes the scales to the restore */
        if (ccd_cell_record_check(&rec.cell, "cal-a", 1, S, ccd_clock_max_ts(d), err, sizeof err))
            fail_msg("check: %s", err);
        CcSnapshotCell again = rec.cell;
        again.cell_id = with_history ? "cal-snap" : "cal-state";
        if (ccd_cell_record_restore(d, &again, NULL, err, sizeof err))
            fail_msg("restore again: %s", err);
        CcdCell *b = ccd_cells_get(d->cells, again.cell_id);
        assert_non_null(b);
        assert_scales(b, want, F, HZ);
        /* the restored forecast (made at `last`) is held: the next step scores it, F KPIs */
        float y[CC_MAX_FEATURES];
        for (int f = 0; f < F; f++)
            y[f] = x->values[(size_t)(x->count - 1) * F + f];
        assert_int_equal(cc_online_calib_observe(b->calib, last + 1, y), F);
        free(out);
    }
    cc_snapshot_encoder_close(&enc);
    cc_snapshot_read_close(&dec);
    assert_int_equal(d->cells->interval_refused, 0);

    /* an older record (the fields alone): restored at scale 1, nothing refused */
    sc = record(x, "cal-old", &ex);
    assert_int_equal(ccd_cell_record_restore(d, &sc, NULL, err, sizeof err), 0);
    c = ccd_cells_get(d->cells, "cal-old");
    assert_non_null(c);
    for (int i = 0; c->pub.scale && i < F * HZ; i++)
        assert_true(c->pub.scale[i] == 1);
    assert_int_equal(d->cells->interval_refused, 0);
    /* an older snapshot's record: the fields, then a long history (its own magic, "CCH1"):
     * not taken for scales (the history itself is refused here: a header alone) */
    uint8_t hist[44] = {'C', 'C', 'H', '1'};
    uint8_t *old_extra = extra_with(&ex, hist, sizeof hist);
    sc = record(x, "cal-old-hist", &ex);
    sc.extra = old_extra;
    sc.extra_len = sizeof ex + sizeof hist;
    assert_int_equal(ccd_cell_record_restore(d, &sc, NULL, err, sizeof err), 0);
    assert_non_null(ccd_cells_get(d->cells, "cal-old-hist"));
    assert_int_equal(d->cells->interval_refused, 0);
    free(old_extra);
    free(extra);
    free(saved);
}

/* Hostile scales in a record (anyone may write the state topic or the snapshot file): not
 * finite, out of the clamp, another F × HZ. Each is refused and counted; the cell is
 * restored all the same (its window passed its own checks), at scale 1. */
static void test_hostile_scales(void **state)
{
    Fx *x = *state;
    Ccd *d = &x->d;
    const int F = d->model->hp.n_features, HZ = d->model->hp.horizon;
    const int64_t S = d->model->hp.step_seconds, last = FIRST + x->count - 1;
    size_t n, n_other;
    float want[CC_MAX_FEATURES * 64], other[CC_MAX_FEATURES * 64];
    uint8_t *saved = moved_scales(F, HZ, &n, want),
            *wrong = moved_scales(F, HZ + 1, &n_other, other);
    CcdCellRecordExtra ex = {.topic = 0, .partition = 1, .first_step = FIRST, .last_ts = last * S};
    CcOnlineCalibSettings ds; /* the clamp the record is checked against */
    cc_online_calib_default_settings(&ds);
    const float L = (float)ds.max_log;
    const struct {
        size_t at; /* byte offset in the saved scales of the float changed */
        float v;
    } cases[] = {{16, NAN},
                 {16 + 4 * (size_t)F, INFINITY},
                 {16 + 4 * (size_t)F + 4, -INFINITY},
                 {20, 2 * L},
                 {16 + 4 * (size_t)F + 8, -2 * L}};
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    char err[256], id[32];
    for (int i = 0; i <= n_cases; i++) {
        uint8_t *bad = malloc(n_other);
        size_t nb = i < n_cases ? n : n_other;
        memcpy(bad, i < n_cases ? saved : wrong, nb);
        if (i < n_cases)
            memcpy(bad + cases[i].at, &cases[i].v, 4);
        uint8_t *extra = extra_with(&ex, bad, nb);
        snprintf(id, sizeof id, "hostile-%d", i);
        CcSnapshotCell sc = record(x, id, &ex);
        sc.extra = extra;
        sc.extra_len = sizeof ex + nb;
        /* the state topic's check lets the record through to the restore */
        if (ccd_cell_record_check(&sc, id, 1, S, ccd_clock_max_ts(d), err, sizeof err))
            fail_msg("check: %s", err);
        if (ccd_cell_record_restore(d, &sc, NULL, err, sizeof err))
            fail_msg("case %d: the record refused whole: %s", i, err);
        CcdCell *c = ccd_cells_get(d->cells, id);
        assert_non_null(c);
        assert_true(c->pub.valid); /* its window restored: a forecast at once */
        assert_int_equal(c->last_step, last);
        for (int k = 0; c->pub.scale && k < F * HZ; k++)
            assert_true(c->pub.scale[k] == 1);
        assert_int_equal(d->cells->interval_refused, (uint64_t)i + 1);
        free(extra);
        free(bad);
    }
    free(saved);
    free(wrong);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scales_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_scales, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
