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

/* A model whose KPIs are "up" and, with two, "down". */
static CcHparams kpis(int n)
{
    CcHparams hp = {.n_features = n};
    strcpy(hp.features[0], "up");
    if (n > 1)
        strcpy(hp.features[1], "down");
    return hp;
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
    CcHparams hp = kpis(2);
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

/* Label files as outsiders write them (issue 13): a BOM, CRLF, quoted fields, a capitalised
 * header, ';' or tab separators, and the timestamp spellings of other tools all read as the
 * plain file does. */
static void test_outsider_shapes(void **state)
{
    (void)state;
    static const char *const same[] = {
        "start,end,cell_id\n2024-01-08 07:00:00,2024-01-08 09:30:00,c1\n",
        "\xef\xbb\xbfstart,end,cell_id\r\n2024-01-08 07:00:00,2024-01-08 09:30:00,c1\r\n",
        "\"Start\",\"End\",\"Cell_ID\"\n\"2024-01-08 07:00:00\",\"2024-01-08 09:30:00\",\"c1\"\n",
        "start;end;cell_id\n2024-01-08T07:00:00Z;2024-01-08T09:30:00Z;c1\n",
        "start\tend\tcell_id\n2024-01-08T08:00:00+01:00\t2024-01-08T10:30:00+01:00\tc1\n",
        "START,END,CELL\n2024-01-08 07:00:00.000000,2024-01-08 09:30:00.000000,c1\n",
        "start,end,cell_id\n1704697200,1704706200,c1\n",
        "start,end,cell_id\n1704697200000,1704706200000,c1\n",
        "\xef\xbb\xbf{\"c1\": [[\"2024-01-08 07:00:00.000000\", \"2024-01-08 09:30:00.000000\"]]}",
        "{\"c1\": [[1704697200000, \"2024-01-08T04:30:00-05:00\"]]}\r\n",
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        CctLabelSet ls;
        char err[512] = "";
        int rc = load_text(&ls, same[i], err, sizeof err);
        if (rc)
            fail_msg("shape %zu refused: %s", i, err);
        assert_int_equal(ls.n, 1);
        assert_string_equal(ls.w[0].key, "c1");
        assert_true(ls.w[0].start == 1704697200.0 && ls.w[0].end == 1704706200.0);
        cct_labels_free(&ls);
    }
}

/* Refusals name the line (CSV) or the key and window (JSON) and say what is wanted. */
static void test_messages(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "empty file"},
        {"start,end\n", "a header and no rows"},
        {"\xef\xbb\xbf\r\n", "empty file"},
        {"[[\"2024-01-01 00:00:00\", \"2024-01-01 01:00:00\"]]", "the top level is a list"},
        {"start,end\n2024-01-01 00:00:00,2024-01-01 01:00:00\n\nnope,2024-01-01 01:00:00\n",
         "line 4: start 'nope' is not a timestamp"},
        {"start,end\n2024-01-01 00:00:00,\n", "line 2: no end"},
        {"start,end\n2024-01-01 02:00:00,2024-01-01 01:00:00\n", "line 2: end before start"},
        {"{\"a\": [[\"2024-01-01 00:00:00\", \"2024-01-01 01:00:00\"]],"
         " \"b\": [[1704067200, 1704070800], [\"x\", 1704070800]]}",
         "\"b\" window 2: start 'x'"},
        {"{\"a\": [\"2024-01-01 00:00:00\", \"2024-01-01 01:00:00\"]}",
         "\"a\" window 1 is a single timestamp, not [start, end]"},
        {"from,to\n2024-01-01 00:00:00,2024-01-01 01:00:00\n", "it is 'from,to'"},
        {"timestamp,is_anomaly\n2024-01-01 00:00:00,1\n", "a 0/1 flag per row?"},
        {"{\"a\": [[1704067200, 1704070800]], \"a\": [[1704074400, 1704078000]]}",
         "duplicate object key"},
        {"{\"a\": [\"2024-01-01 00:00:00\"]}", "(point labels, as NAB's combined_labels.json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CctLabelSet ls;
        char err[512] = "";
        assert_int_equal(load_text(&ls, cases[i].text, err, sizeof err), -EINVAL);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].want);
    }
}

/* Every window's KPI is checked against the model, also under a key that selects no cell. */
static void test_check_kpis(void **state)
{
    (void)state;
    CctLabelSet ls;
    char err[512];
    assert_int_equal(load_text(&ls,
                               "start,end,cell_id,kpi\n"
                               "2024-01-01 00:10:00,2024-01-01 00:30:00,a,down\n"
                               "2024-01-01 00:10:00,2024-01-01 00:30:00,nowhere,dl\n",
                               err, sizeof err),
                     0);
    CcHparams hp = kpis(2);
    assert_int_equal(cct_labels_check(&ls, &hp, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 3: 'dl' is not a model KPI (the model's: up, down)"));
    strcpy(hp.features[0], "dl");
    assert_int_equal(cct_labels_check(&ls, &hp, err, sizeof err), 0);
    cct_labels_free(&ls);
}

/* Windows of one cell and KPI that share a row are one event (a duplicate, an overlap, a
 * later window that bridges two); other KPIs and windows that only touch stay apart; a window
 * within one step covers that step. */
static void test_merge_and_short(void **state)
{
    (void)state;
    CctLabelSet ls;
    char err[512];
    /* S = 600, rows from 00:00 */
    assert_int_equal(load_text(&ls,
                               "start,end,kpi\n"
                               "2024-01-01 00:10:00,2024-01-01 00:20:00,\n"   /* rows 1-2 */
                               "2024-01-01 00:40:00,2024-01-01 00:50:00,\n"   /* rows 4-5 */
                               "2024-01-01 00:10:00,2024-01-01 00:20:00,\n"   /* duplicate */
                               "2024-01-01 00:20:00,2024-01-01 00:40:00,\n"   /* bridges: 1-5 */
                               "2024-01-01 00:10:00,2024-01-01 00:20:00,up\n" /* another KPI */
                               "2024-01-01 01:00:00,2024-01-01 01:10:00,\n"   /* rows 6-7 */
                               "2024-01-01 01:23:00,2024-01-01 01:24:00,\n"   /* in row 8 */
                               "2023-12-31,2023-12-31,up\n", /* a day: none of its rows */
                               err, sizeof err),
                     0);
    CcHparams hp = kpis(1);
    CctInjectSeries ser = {.T = 12, .F = 1, .test0 = 0};
    int n = -1;
    assert_int_equal(
        cct_labels_apply(&ls, "d.csv", "c", 1704067200 / 600, 600, &hp, &ser, &n, err, sizeof err),
        0);
    assert_int_equal(n, 4);
    assert_int_equal(ser.n_lab, 4);
    assert_int_equal(ls.w[7].applied, 0);
    assert_int_equal(ser.lab[0].kpi, -1);
    assert_int_equal(ser.lab[0].start, 1);
    assert_int_equal(ser.lab[0].end, 6);
    assert_int_equal(ser.lab[1].kpi, 0);
    assert_int_equal(ser.lab[2].start, 6);
    assert_int_equal(ser.lab[2].end, 8);
    assert_int_equal(ser.lab[3].start, 8);
    assert_int_equal(ser.lab[3].end, 9);
    assert_int_equal(ls.w[2].merged, 1);
    assert_int_equal(ls.w[3].merged, 1);
    assert_int_equal(ls.w[1].merged, 0);
    assert_int_equal(ls.w[5].merged, 0);
    for (int i = 0; i < 7; i++)
        assert_int_equal(ls.w[i].applied, 1);
    free(ser.lab);
    /* a date alone as the end is the whole day: from 2023-12-31 00:00 the day's 144 rows */
    CctInjectSeries day = {.T = 200, .F = 1, .test0 = 0};
    assert_int_equal(cct_labels_apply(&ls, "./d.csv", "c", 1703980800 / 600, 600, &hp, &day, &n,
                                      err, sizeof err),
                     0);
    assert_int_equal(day.lab[day.n_lab - 1].kpi, 0);
    assert_int_equal(day.lab[day.n_lab - 1].start, 0);
    assert_int_equal(day.lab[day.n_lab - 1].end, 144);
    free(day.lab);
    cct_labels_free(&ls);
}

/* "./d.csv" names the file d.csv does, on either side. */
static void test_dot_slash(void **state)
{
    (void)state;
    CctLabelSet ls;
    char err[512];
    assert_int_equal(load_text(&ls, "{\"./d.csv\": [[1704067200, 1704070800]]}", err, sizeof err),
                     0);
    CcHparams hp = kpis(1);
    static const char *const paths[] = {"d.csv", "./x/d.csv", "/data/d.csv", "e.csv", "xd.csv"};
    for (int i = 0; i < 5; i++) {
        CctInjectSeries ser = {.T = 12, .F = 1, .test0 = 0};
        int n = -1;
        assert_int_equal(cct_labels_apply(&ls, paths[i], "c", 1704067200 / 600, 600, &hp, &ser, &n,
                                          err, sizeof err),
                         0);
        assert_int_equal(n, i < 3);
        free(ser.lab);
    }
    cct_labels_free(&ls);
}

/* The report: windows of keys that select nothing are one line with a count, windows outside
 * the test rows and cut ones are named; it returns the windows that landed. */
static void test_report(void **state)
{
    (void)state;
    CctLabelSet ls;
    char err[512];
    assert_int_equal(
        load_text(&ls,
                  "{\"dir/a.csv\": [[\"2024-01-01 00:10:00\", \"2024-01-01 00:20:00\"],"
                  " [\"2023-01-01 00:00:00\", \"2023-01-01 01:00:00\"],"
                  " [\"2024-01-01 01:00:00\", \"2024-02-01 00:00:00\"]],"
                  " \"dir/b.csv\": [[1704067200, 1704070800], [1704067200, 1704070800]],"
                  " \"dir/c.csv\": [[1704067200, 1704070800]],"
                  " \"dir/d.csv\": [[1704067200, 1704070800]],"
                  " \"dir/e.csv\": [[1704067200, 1704070800]]}",
                  err, sizeof err),
        0);
    CcHparams hp = kpis(1);
    CctInjectSeries ser = {.T = 12, .F = 1, .test0 = 0};
    assert_int_equal(cct_labels_apply(&ls, "/x/dir/a.csv", "a", 1704067200 / 600, 600, &hp, &ser,
                                      NULL, err, sizeof err),
                     0);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(cct_labels_report(&ls, out), 2);
    fclose(out);
    assert_non_null(strstr(text, "\"dir/a.csv\" window 2 (2023-01-01T00:00:00Z to "
                                 "2023-01-01T01:00:00Z): outside the test rows of dir/a.csv"));
    assert_non_null(strstr(text, "\"dir/a.csv\" window 3 (2024-01-01T01:00:00Z to "
                                 "2024-02-01T00:00:00Z): cut to the test rows"));
    assert_non_null(strstr(text, "5 window(s) under 4 key(s) name no cell or --data file "
                                 "(\"dir/b.csv\", \"dir/c.csv\", \"dir/d.csv\", ...)"));
    assert_non_null(strstr(text, "6 of 8 labelled windows unused"));
    free(text);
    free(ser.lab);
    cct_labels_free(&ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats_agree),   cmocka_unit_test(test_apply),
        cmocka_unit_test(test_refused),         cmocka_unit_test(test_outsider_shapes),
        cmocka_unit_test(test_messages),        cmocka_unit_test(test_check_kpis),
        cmocka_unit_test(test_merge_and_short), cmocka_unit_test(test_dot_slash),
        cmocka_unit_test(test_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
