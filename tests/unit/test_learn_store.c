/*
 * test_learn_store.c — the learner's store (cc_learn.h) at fleet scale: every record finds
 * its cell by an index, not by a scan of the sampled cells. With a scan, 10k sampled cells
 * cost ~5k string compares per record: reading 8 days of 15-minute records of 10k cells
 * took 2 minutes before the round began (tests/bench/learn_scale.sh), and 400k cells of
 * this test ~2.4·10^11 compares (several minutes); with the index, a few seconds.
 * Also: the cap (the first max_cells cells), a cleared store re-indexed from empty, and
 * every record in the right cell.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cc_learn.h"

enum { CELLS = 400000, RECORDS = 3 };
/* A scan needs CELLS² / 2 · RECORDS compares: minutes of CPU. An index: ~3 s, up to ~15×
 * that under ThreadSanitizer; the bound (the process's CPU time, not the wall clock of a
 * shared machine) sits between, far from both. */
#define BOUND_S 60.0

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void add_fleet(CcLearn *l, int cells, int64_t t0)
{
    const char *names[2] = {"prb", "users"};
    char id[32];
    double start = cpu_s();
    for (int r = 0; r < RECORDS; r++)
        for (int c = 0; c < cells; c++) { /* step-major, as a live feed delivers them */
            snprintf(id, sizeof id, "site%05d-cell%d", c / 3, c % 3);
            double v[2] = {c, r};
            assert_int_equal(cc_learn_add(l, id, t0 + 900 * r, names, v, 2), 0);
            if ((c & 1023) == 0 && cpu_s() - start > BOUND_S)
                fail_msg("%d records of %d cells took more than %.0f s of CPU: a scan per "
                         "record?",
                         r * cells + c, cells, BOUND_S);
        }
}

static void test_index_at_fleet_scale(void **state)
{
    (void)state;
    CcLearnSettings s;
    cc_learn_default_settings(&s);
    s.max_cells = CELLS;
    s.max_points = RECORDS + 1; /* a cell's first allocation: 4 records, not 64 (1.7 GB) */
    CcLearn *l = NULL;
    assert_int_equal(cc_learn_open(&l, &s), 0);
    for (int pass = 0; pass < 2; pass++) { /* the second after a clear: the index emptied */
        int64_t t0 = 1704067200 + pass * 86400;
        add_fleet(l, CELLS, t0);
        CcLearnStats st;
        cc_learn_stats(l, &st);
        assert_int_equal(st.cells, CELLS);
        assert_int_equal(st.records, (int64_t)CELLS * RECORDS);
        assert_int_equal(st.records_dropped, 0);
        assert_int_equal(st.first_ts, t0);
        assert_int_equal(st.step_s, 900);
        /* a cell beyond the cap is not sampled */
        const char *name = "prb";
        double v = 1;
        assert_int_equal(cc_learn_add(l, "one-too-many", t0, &name, &v, 1), -ENOSPC);
        cc_learn_clear(l);
    }
    cc_learn_close(&l);
}

/* Every record lands in its own cell: the CSV holds each cell's rows with its values. */
static void test_records_in_their_cells(void **state)
{
    (void)state;
    CcLearnSettings s;
    cc_learn_default_settings(&s);
    s.max_cells = 5;
    CcLearn *l = NULL;
    assert_int_equal(cc_learn_open(&l, &s), 0);
    const char *name = "k";
    char id[16];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 7; c++) { /* 7 cells, 5 sampled: the first 5 that arrive */
            snprintf(id, sizeof id, "c%d", (c * 3) % 7);
            double v = 100 * ((c * 3) % 7) + r;
            int rc = cc_learn_add(l, id, 1704067200 + 900 * r, &name, &v, 1);
            assert_int_equal(rc, c < 5 ? 0 : -ENOSPC);
        }
    char path[] = "/tmp/cc-learn-store-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char err[256];
    assert_int_equal(cc_learn_write_csv(l, path, 0, err, sizeof err), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    int rows = 0;
    assert_non_null(fgets(line, sizeof line, f)); /* header */
    while (fgets(line, sizeof line, f)) {
        long long ts;
        int cell;
        double v;
        assert_int_equal(sscanf(line, "%lld,c%d,%lf", &ts, &cell, &v), 3);
        assert_int_equal(v, 100 * cell + (ts - 1704067200) / 900);
        assert_true(cell == 0 || cell == 3 || cell == 6 || cell == 2 || cell == 5);
        rows++;
    }
    fclose(f);
    unlink(path);
    assert_int_equal(rows, 5 * 4);
    cc_learn_close(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_at_fleet_scale),
        cmocka_unit_test(test_records_in_their_cells),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
