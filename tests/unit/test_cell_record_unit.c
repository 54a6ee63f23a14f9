/* test_cell_record_unit.c — daemon/cell_record.c (the restore of a cell's record, for the
 * snapshot file and the state topic alike) linked from the daemon library without main:
 * a record restored into the table gives the cell its fields and its forecast; the cell
 * written again as a record (the snapshot's writer) gives back the same values and fields;
 * a record the checks refuse leaves no cell behind. On the tiny golden model (F=3). */
#include <errno.h>
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
#include "cc_snapshot.h"
#include "cell_record.h"
#include "clock.h"
#include "cells.h"
#include "config.h"
#include "settings.h"
#include "testlib.h"

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
    Ccd *d = &x->d;
    char err[256];
    assert_int_equal(ccd_config_init(&d->cfg), 0);
    assert_int_equal(cc_model_open_file(&d->model, TL_TINY_MODEL, err, sizeof err), 0);
    assert_int_equal(ccd_settings_from_config(&x->st, &d->cfg, &d->model->hp, err, sizeof err), 0);
    assert_int_equal(cc_engine_open(&d->engine, d->model, &x->st.engine, NULL, 0), 0);
    assert_int_equal(ccd_cells_open(&d->cells, d->engine, &x->st.cells), 0);
    assert_int_equal(ccd_alerts_open(d, &x->st.anomaly, "", err, sizeof err), 0);
    const CcHparams *hp = &d->model->hp;
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
    Ccd *d = &x->d;
    ccd_alerts_close(d);
    ccd_cells_close(&d->cells);
    cc_engine_close(&d->engine);
    ccd_settings_free(&x->st);
    cc_model_close(&d->model);
    ccd_config_free(&d->cfg);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_leaves_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
