/* test_alerts_unit.c — daemon/alerts.c linked from the daemon library without main: a
 * cell's data-quality transitions, scored on the worker side (ccd_alerts_on_stepped), wait
 * in the queue until the loop thread's flush, which counts them (firing, then resolved);
 * the cell's scores object (GET /v1/cells/{id}'s "scores") is JSON naming every KPI. On
 * the tiny golden model (F=3), no Kafka, no journal. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "alerts.h"
#include "api_util.h"
#include "cells.h"
#include "config.h"
#include "settings.h"
#include "testlib.h"
#include "tiny_daemon.h"

typedef struct Fx {
    Ccd d;
    CcdSettings st;
    CcdCell *c;
} Fx;

static int setup(void **state)
{
    Fx *x = calloc(1, sizeof *x);
    tiny_daemon_open(&x->d, &x->st);
    x->c = ccd_cells_add(x->d.cells, "site1/cell-a");
    assert_non_null(x->c);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    Fx *x = *state;
    tiny_daemon_close(&x->d, &x->st);
    free(x);
    return 0;
}

/* Steps [from, to) of the cell with every KPI at v (or a varying value when v < 0). */
static void steps(Fx *x, int64_t from, int64_t to, double v)
{
    const int F = x->d.model->hp.n_features;
    const uint64_t all = (1ULL << F) - 1;
    float values[CC_MAX_FEATURES];
    for (int64_t t = from; t < to; t++) {
        for (int f = 0; f < F; f++)
            values[f] = v >= 0 ? (float)v : (float)(10 + f + sin((double)t + f));
        ccd_alerts_on_stepped(&x->d, x->c, t, values, 0, all, NULL);
    }
}

static uint64_t all_zero(const Ccd *d, int state)
{
    CcdAlertsStats st;
    uint64_t n = 0;
    ccd_alerts_stats((Ccd *)d, &st);
    for (int sev = 1; sev < 3; sev++)
        n += st.trans[1][CC_DQ_ALL_ZERO][state][sev];
    return n;
}

static void test_transitions_wait_for_the_flush(void **state)
{
    Fx *x = *state;
    Ccd *d = &x->d;
    const int64_t t0 = 1000;
    steps(x, t0, t0 + 50, -1); /* a cell whose KPIs are never zero */
    ccd_alerts_flush(d);
    assert_int_equal(ccd_alerts_firing(d), 0);
    assert_int_equal(all_zero(d, 1), 0);
    steps(x, t0 + 50, t0 + 70, 0); /* an outage: every KPI 0 */
    /* scored on the worker's side: the cell's published state fires at once, the
     * transition waits in the queue until the loop thread takes it */
    assert_int_equal(ccd_alerts_firing(d), 1);
    assert_int_equal(all_zero(d, 1), 0);
    ccd_alerts_flush(d);
    assert_int_equal(all_zero(d, 1), 1);
    ccd_alerts_flush(d); /* taken once */
    assert_int_equal(all_zero(d, 1), 1);
    /* resolved after alerts.dq_resolve_steps clear steps, again at the flush */
    steps(x, t0 + 70, t0 + 70 + x->st.anomaly.dq_resolve_steps, -1);
    assert_int_equal(ccd_alerts_firing(d), 0);
    assert_int_equal(all_zero(d, 2), 0);
    ccd_alerts_flush(d);
    assert_int_equal(all_zero(d, 2), 1);
}

/* The cell's "scores" (GET /v1/cells/{id}) as JSON: the data-quality alert the outage
 * raised, no anomaly, and no scored step (no forecast was given). */
static void test_scores_are_json(void **state)
{
    Fx *x = *state;
    Ccd *d = &x->d;
    steps(x, 1000, 1040, -1);
    steps(x, 1040, 1050, 0);
    CcdSb *sb = ccd_reply_sb();
    ccd_sb_str(sb, "{\"id\":\"x\"");
    ccd_alerts_cell_write(d, x->c, sb);
    ccd_sb_add(sb, "}", 1);
    assert_false(sb->oom);
    json_error_t je;
    json_t *o = json_loadb(sb->p, sb->n, 0, &je);
    if (!o)
        fail_msg("not JSON (%s): %.*s", je.text, (int)sb->n, sb->p);
    json_t *scores = json_object_get(o, "scores");
    assert_true(json_is_object(scores));
    /* no forecast was given: no step was scored against one */
    assert_true(json_is_null(json_object_get(scores, "step")));
    assert_int_equal(json_integer_value(json_object_get(scores, "data_quality_firing")), 1);
    assert_true(json_is_false(json_object_get(scores, "anomaly_firing")));
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transitions_wait_for_the_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scores_are_json, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
