/*
 * test_alerts_oom.c — allocation failures in lib/cc_anomaly and lib/cc_snapshot are
 * returned as -ENOMEM (or, for the void setters, leave the previous state), never a crash
 * or a leak (LeakSanitizer checks leaks in the ASan build). Linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc like test_loader_oom.c: the k-th
 * allocation of the library's own code fails, for every k until a scenario completes
 * without reaching k.
 */
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

#include "cc_anomaly.h"
#include "cc_snapshot.h"

#include "failalloc.h"
#include "testlib.h"

/* Runs the anomaly scenario; returns 0 when it completed, -ENOMEM when an allocation
 * failed (after cleaning up). */
static int anomaly_scenario(void)
{
    CcAnomalySettings s;
    cc_anomaly_default_settings(&s);
    s.n_features = 2;
    s.lag_steps = 3;
    CcAnomaly *a = NULL;
    CcAnomalyCell *c = NULL, *d = NULL;
    uint8_t *buf = NULL;
    int rc = cc_anomaly_open(&a, &s, NULL, 0);
    if (rc)
        goto done;
    if ((rc = cc_anomaly_cell_open(&c, a, "c")))
        goto done;
    for (int64_t t = 0; t < 40; t++) {
        double m[2] = {10, 20}, sd[2] = {1, 1};
        float x[2] = {(float)(10 + (t == 30 ? 50 : sin((double)t))), (float)(20 + cos((double)t))};
        cc_anomaly_set_expect(a, c, t, m, sd, NULL);
        cc_anomaly_set_expect_lagged(a, c, t, m, sd, NULL);
        cc_anomaly_observe(a, c, t, x, NULL, NULL);
    }
    long n = cc_anomaly_cell_save(c, NULL, 0);
    assert_true(n > 0);
    if (!(buf = malloc((size_t)n))) {
        rc = -ENOMEM;
        goto done;
    }
    assert_int_equal(cc_anomaly_cell_save(c, buf, (size_t)n), n);
    if ((rc = cc_anomaly_cell_open(&d, a, "d")))
        goto done;
    rc = cc_anomaly_cell_load(d, buf, (size_t)n, NULL, 0);
    assert_true(rc == 0 || rc == -ENOMEM);
done:
    free(buf);
    cc_anomaly_cell_close(&d);
    cc_anomaly_cell_close(&c);
    cc_anomaly_close(&a);
    return rc;
}

static void test_anomaly_oom(void **state)
{
    (void)state;
    int completed = 0;
    for (long k = 0; k < 1000 && !completed; k++) {
        failalloc_arm(k);
        int rc = anomaly_scenario();
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(rc, 0);
            completed = 1;
            assert_true(k >= 6); /* the scenario allocates: failures were exercised */
        } else {
            assert_true(rc == 0 || rc == -ENOMEM);
        }
    }
    assert_true(completed);
}

typedef struct World {
    CcModel *m;
    CcEngine *e;
    CcCell *cell[2];
    CcAnomaly *a;
    CcAnomalyCell *ac[2];
} World;

static int snapshot_scenario(World *w, const char *path)
{
    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &w->m->hp);
    CcSnapshotWriter *sw = NULL;
    CcSnapshotReader *rd = NULL;
    CcCell *rc_cell = NULL;
    char err[256];
    int rc = cc_snapshot_write_open(&sw, path, &info, err, sizeof err);
    if (rc)
        goto done;
    CcSnapshotPosition pos = {"kpis", 1, 42};
    if ((rc = cc_snapshot_write_positions(sw, &pos, 1)))
        goto done;
    for (int i = 0; i < 2; i++)
        if ((rc = cc_snapshot_write_engine_cell(sw, i ? "b" : "a", w->cell[i], w->ac[i], "xy", 2)))
            goto done;
    rc = cc_snapshot_write_finish(&sw, err, sizeof err);
    if (rc)
        goto done;
    if ((rc = cc_snapshot_read_open(&rd, path, info.model_hash, NULL, err, sizeof err)))
        goto done;
    CcSnapshotRecord rec;
    int k;
    while ((k = cc_snapshot_read_next(rd, &rec, err, sizeof err)) == 1) {
        if (rec.type != CC_SNAP_CELL)
            continue;
        long saved = failalloc_pause(); /* the engine's allocations are not under test */
        assert_int_equal(cc_cell_open(&rc_cell, w->e), 0);
        failalloc_resume(saved);
        rc = cc_snapshot_restore_engine_cell(&rec.cell, rc_cell, w->ac[0], err, sizeof err);
        cc_cell_close(&rc_cell);
        if (rc)
            goto done;
    }
    rc = k;
done:
    cc_snapshot_write_abort(&sw);
    cc_snapshot_read_close(&rd);
    return rc;
}

static void test_snapshot_oom(void **state)
{
    (void)state;
    World w;
    memset(&w, 0, sizeof w);
    CcHparams hp;
    tl_hparams_tiny(&hp);
    hp.norm_window = 12;
    hp.horizon = 3;
    hp.step_seconds = 60;
    tl_model_open(&w.m, &hp, 3);
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    assert_int_equal(cc_engine_open(&w.e, w.m, &es, NULL, 0), 0);
    CcAnomalySettings as;
    cc_anomaly_default_settings(&as);
    as.n_features = 2;
    as.lag_steps = 2;
    assert_int_equal(cc_anomaly_open(&w.a, &as, NULL, 0), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cc_cell_open(&w.cell[i], w.e), 0);
        assert_int_equal(cc_anomaly_cell_open(&w.ac[i], w.a, i ? "b" : "a"), 0);
    }
    for (int64_t t = 100; t < 130; t++) {
        float x[2][2] = {{(float)t, 1}, {(float)(t % 5), 2}};
        CcStepInput in[2] = {{w.cell[0], t, x[0]}, {w.cell[1], t, x[1]}};
        assert_int_equal(cc_engine_step(w.e, in, 2, NULL), 0);
        for (int i = 0; i < 2; i++) {
            cc_anomaly_observe(w.a, w.ac[i], t, x[i], NULL, NULL);
            CcForecast fc;
            cc_cell_forecast(w.cell[i], &fc);
            cc_anomaly_set_forecast(w.a, w.ac[i], &fc);
        }
    }
    char dir[] = "/tmp/cc_alerts_oom_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[96];
    snprintf(path, sizeof path, "%s/s.snap", dir);
    int completed = 0;
    for (long k = 0; k < 1000 && !completed; k++) {
        failalloc_arm(k);
        int rc = snapshot_scenario(&w, path);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(rc, 0);
            completed = 1;
            assert_true(k >= 10);
        } else {
            if (rc != 0 && rc != -ENOMEM)
                fprintf(stderr, "k=%ld rc=%d\n", k, rc);
            assert_true(rc == 0 || rc == -ENOMEM);
        }
        char tmp[160];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        assert_int_equal(access(tmp, F_OK), -1); /* never a temp file left behind */
    }
    assert_true(completed);
    unlink(path);
    rmdir(dir);
    for (int i = 0; i < 2; i++) {
        cc_cell_close(&w.cell[i]);
        cc_anomaly_cell_close(&w.ac[i]);
    }
    cc_anomaly_close(&w.a);
    cc_engine_close(&w.e);
    cc_model_close(&w.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anomaly_oom),
        cmocka_unit_test(test_snapshot_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
