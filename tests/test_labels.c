/* test_labels.c — tools/labels.c (cctools): both formats of `anomaly-eval --labels` parse
 * to the same windows; keys select cells by id or by the --data path (NAB's keys); windows
 * map to rows [ceil(start/S), floor(end/S)] cut to the test rows; bad files are refused
 * with a message. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "labels.h"

/* Writes text to a temporary file; its path in path (PATH_MAX-sized). */
static void write_tmp(char *path, const char *text)
{
    strcpy(path, "/tmp/cc_test_labels_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static int load_text(CctLabelSet *ls, const char *text, char *err, size_t errlen)
{
    char path[64];
    write_tmp(path, text);
    int rc = cct_labels_load(ls, path, NULL, err, errlen);
    unlink(path);
    return rc;
}

static void test_formats_agree(void **state)
{
    (void)state;
    CctLabelSet js, cs;
    char err[256];
    assert_int_equal(load_text(&js,
                               "{\"dir/cellA.csv\": [[\"2024-01-01 00:10:00\", "
                               "\"2024-01-01 00:30:00\", \"down\"]],\n"
                               " \"cellB\": [[1704067800, \"2024-01-01T00:40:00Z\"]]}",
                               err, sizeof err),
                     0);
    assert_int_equal(load_text(&cs,
                               "kpi, start ,end,cell_id\n"
                               "down,2024-01-01 00:10:00,2024-01-01 00:30:00,dir/cellA.csv\n"
                               "\n"
                               ",1704067800,2024-01-01T00:40:00Z,cellB\n",
                               err, sizeof err),
                     0);
    assert_int_equal(js.n, 2);
    assert_int_equal(cs.n, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(js.w[i].key, cs.w[i].key);
        assert_true(js.w[i].start == cs.w[i].start && js.w[i].end == cs.w[i].end);
        assert_true((js.w[i].kpi == NULL) == (cs.w[i].kpi == NULL));
    }
    assert_string_equal(cs.w[0].kpi, "down");
    assert_true(cs.w[0].start == 1704067800.0); /* 2024-01-01 00:10:00 UTC */
    assert_true(cs.w[1].end == 1704069600.0);
    cct_labels_free(&js);
    cct_labels_free(&cs);
}

static void test_apply(void **state)
{
    (void)state;
    CctLabelSet ls;
    char err[256];
    /* S = 600: 00:10 is row 1 of a series starting at 00:00, 00:30 row 3 */
    assert_int_equal(load_text(&ls,
                               "start,end,cell_id,kpi\n"
                               "2024-01-01 00:10:00,2024-01-01 00:30:00,cellA.csv,down\n"
                               "2024-01-01 00:05:00,2024-01-01 00:25:00,,\n"
                               "2024-01-01 00:00:00,2024-01-01 00:05:00,other,\n"
                               "2024-01-01 00:50:00,2024-01-02 00:00:00,cellX,\n",
                               err, sizeof err),
                     0);
    CcHparams hp = {.n_features = 2};
    strcpy(hp.features[0], "up");
    strcpy(hp.features[1], "down");
    CctInjectSeries ser = {.T = 8, .F = 2, .test0 = 0};
    const int64_t p0 = 1704067200 / 600;
    int n = -1;
    assert_int_equal(
        cct_labels_apply(&ls, "/data/cellA.csv", "cellX", p0, 600, &hp, &ser, &n, err, sizeof err),
        0);
    assert_int_equal(n, 3); /* by path suffix, the keyless one, by id; not "other" */
    assert_int_equal(ser.lab[0].kpi, 1);
    assert_int_equal(ser.lab[0].start, 1);
    assert_int_equal(ser.lab[0].end, 4);
    assert_int_equal(ser.lab[0].type, CCT_INJ_LABELLED);
    assert_int_equal(ser.lab[1].kpi, -1);
    assert_int_equal(ser.lab[1].start, 1); /* 00:05 rounds up to row 1 */
    assert_int_equal(ser.lab[1].end, 3);   /* 00:25 down to row 2 */
    assert_int_equal(ser.lab[2].start, 5);
    assert_int_equal(ser.lab[2].end, 8); /* cut at the series' end */
    assert_int_equal(ls.w[2].applied, 0);
    /* cut to the test rows; a window all in the history is skipped */
    CctInjectSeries hist = {.T = 8, .F = 2, .test0 = 3};
    assert_int_equal(
        cct_labels_apply(&ls, "/data/cellA.csv", "cellX", p0, 600, &hp, &hist, &n, err, sizeof err),
        0);
    assert_int_equal(n, 2);
    assert_int_equal(hist.lab[0].start, 3);
    assert_int_equal(hist.lab[1].start, 5);
    free(ser.lab);
    free(hist.lab);
    /* a KPI the model does not have */
    strcpy(hp.features[1], "dl");
    CctInjectSeries s2 = {.T = 8, .F = 2};
    assert_int_equal(
        cct_labels_apply(&ls, "cellA.csv", "c", p0, 600, &hp, &s2, &n, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "down"));
    free(s2.lab);
    cct_labels_free(&ls);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "start,cell_id\n2024-01-01 00:00:00,a\n",                  /* no end column */
        "start,end\n2024-01-01 00:30:00,2024-01-01 00:10:00\n",    /* end before start */
        "start,end\nyesterday,2024-01-01 00:10:00\n",              /* not a time */
        "start,end\n",                                             /* no windows */
        "{\"a\": [[\"2024-01-01 00:00:00\"]]}",                    /* one element */
        "{\"a\": \"2024-01-01 00:00:00\"}",                        /* not a list */
        "{\"a\": [[\"2024-01-01 00:00:00\", \"2024-01-01\", 3]]}", /* kpi not a string */
        "{\"a\": [[\"2024-01-01 00:00:00\"",                       /* broken JSON */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CctLabelSet ls;
        char err[256] = "";
        assert_int_equal(load_text(&ls, bad[i], err, sizeof err), -EINVAL);
        assert_true(strlen(err) > 0);
        assert_int_equal(ls.n, 0);
    }
    CctLabelSet ls;
    char err[256];
    assert_int_equal(cct_labels_load(&ls, "/nonexistent/labels.csv", NULL, err, sizeof err),
                     -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats_agree),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
