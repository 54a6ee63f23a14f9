/*
 * test_data_stream.c — cc_data_open_file reads a CSV through a window of read_chunk bytes
 * (issue 31: the loader no longer holds the whole text). Every file here, good or bad, is
 * loaded from memory (cc_data_open_buffer: the whole text at once) and from disk with
 * window sizes from 1 byte up, so that records, quoted line breaks, CRLF pairs, the BOM,
 * annotation lines and the delimiter detection's two lines fall across every boundary: the
 * return code, the message, the report and every value and mask byte must be the same.
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

#include "cc_data.h"
#include "testlib.h"

/* Window sizes: tiny ones put a boundary inside every token; 0 is the default (1 MiB). */
static const size_t chunks[] = {1, 2, 3, 4, 5, 7, 11, 16, 61, 256, 4096, 0};

/* A growing text, for generated files. */
typedef struct Text {
    char *s;
    size_t n, cap;
} Text;

static void put(Text *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int w = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        assert_true(w >= 0);
        if (t->s && t->n + (size_t)w < t->cap) {
            t->n += (size_t)w;
            return;
        }
        t->cap = (t->cap + (size_t)w + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
}

/* Same dataset: shape, names, ids, steps, and x and mask byte for byte. */
static void assert_same_dataset(const CcDataset *a, const CcDataset *b)
{
    assert_int_equal(a->n_features, b->n_features);
    assert_int_equal(a->step_seconds, b->step_seconds);
    assert_int_equal(a->n_series, b->n_series);
    for (int f = 0; f < a->n_features; f++)
        assert_string_equal(a->features[f], b->features[f]);
    for (int i = 0; i < a->n_series; i++) {
        const CcSeries *x = &a->series[i], *y = &b->series[i];
        assert_string_equal(x->cell_id, y->cell_id);
        assert_int_equal(x->p0, y->p0);
        assert_int_equal(x->T, y->T);
        size_t n = (size_t)x->T * (size_t)a->n_features;
        assert_memory_equal(x->x, y->x, n * sizeof *x->x);
        assert_memory_equal(x->mask, y->mask, n);
    }
}

static void assert_same_report(const CcDataReport *a, const CcDataReport *b, const CcDataset *ds)
{
    char fa[4096], fb[4096];
    cc_data_report_format(a, ds, fa, sizeof fa);
    cc_data_report_format(b, ds, fb, sizeof fb);
    assert_string_equal(fa, fb);
    assert_int_equal(a->rows_read, b->rows_read);
    assert_int_equal(a->blank_lines, b->blank_lines);
    assert_int_equal(a->duplicates, b->duplicates);
    assert_int_equal(a->duplicates_differ, b->duplicates_differ);
    assert_int_equal(a->out_of_order, b->out_of_order);
    assert_int_equal(a->misaligned, b->misaligned);
    assert_int_equal(a->missing_steps, b->missing_steps);
    assert_int_equal(a->delimiter, b->delimiter);
    assert_int_equal(a->day_first, b->day_first);
    for (int f = 0; f < CC_DATA_MAX_FEATURES; f++) {
        assert_int_equal(a->nan_cells[f], b->nan_cells[f]);
        assert_int_equal(a->imputed_cells[f], b->imputed_cells[f]);
    }
}

/* Loads `text` from memory and from a file with every window size; all must agree. Returns
 * the load from memory (NULL when it failed; then err_out holds its message). */
static CcDataset *check_text(const char *text, size_t len, const CcDataSettings *given,
                             CcDataReport *rep_out, char *err_out, size_t errlen)
{
    char path[] = "/tmp/cc_test_stream_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    CcDataSettings s;
    if (given)
        s = *given;
    else
        cc_data_default_settings(&s);
    CcDataset *want = NULL;
    CcDataReport want_rep;
    memset(&want_rep, 0, sizeof want_rep);
    char want_err[512] = "";
    int want_rc =
        cc_data_open_buffer(&want, text, len, path, &s, &want_rep, want_err, sizeof want_err);
    for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++) {
        s.read_chunk = chunks[k];
        CcDataset *got = NULL;
        CcDataReport rep;
        memset(&rep, 0, sizeof rep);
        char err[512] = "";
        int rc = cc_data_open_file(&got, path, &s, &rep, err, sizeof err);
        if (rc != want_rc || strcmp(err, want_err))
            print_error("chunk %zu: rc %d '%s', from memory rc %d '%s'\n", chunks[k], rc, err,
                        want_rc, want_err);
        assert_int_equal(rc, want_rc);
        assert_string_equal(err, want_err);
        if (rc == 0) {
            assert_same_dataset(want, got);
            assert_same_report(&want_rep, &rep, want);
        } else {
            assert_null(got);
        }
        cc_data_close(&got);
    }
    unlink(path);
    if (rep_out)
        *rep_out = want_rep;
    if (err_out)
        snprintf(err_out, errlen, "%s", want_err);
    return want;
}

static CcDataset *check(const char *text, const CcDataSettings *s, CcDataReport *rep)
{
    char err[512];
    CcDataset *ds = check_text(text, strlen(text), s, rep, err, sizeof err);
    if (!ds)
        print_error("load failed: %s\n", err);
    assert_non_null(ds);
    return ds;
}

static void check_fails(const char *text, const CcDataSettings *s, const char *want)
{
    char err[512];
    CcDataset *ds = check_text(text, strlen(text), s, NULL, err, sizeof err);
    if (ds || !strstr(err, want))
        print_error("message '%s', wanted '%s'\n", err, want);
    assert_null(ds);
    assert_non_null(strstr(err, want));
}

/* ---------------------------------------------------------------------------------- */

static void test_line_ends(void **state)
{
    (void)state;
    /* no newline after the last line: its value is read */
    CcDataset *ds = check("ts,a,b\n0,1,2\n3600,3,4\n7200,5,6", NULL, NULL);
    assert_int_equal(ds->series[0].T, 3);
    assert_true(ds->series[0].x[5] == 6.0f);
    cc_data_close(&ds);
    /* CRLF, a CR before the end of the file, blank and whitespace-only lines */
    CcDataReport rep;
    ds = check("ts,a\r\n\r\n0,1\r\n  \t\r\n3600,2\r\n7200,3\r", NULL, &rep);
    assert_int_equal(ds->series[0].T, 3);
    assert_true(ds->series[0].x[2] == 3.0f);
    assert_int_equal(rep.blank_lines, 2);
    cc_data_close(&ds);
    /* a BOM and InfluxDB annotation lines before the header */
    ds = check("\xEF\xBB\xBF#datatype,string,long\n#group,false,false\n#default,,\n"
               "ts,a\n0,1\n3600,2\n",
               NULL, NULL);
    assert_int_equal(ds->series[0].T, 2);
    cc_data_close(&ds);
}

static void test_delimiters_and_quotes(void **state)
{
    (void)state;
    CcDataReport rep;
    /* ';' with decimal commas: the header and the first row decide */
    CcDataset *ds =
        check("ts;cell_id;a;b\n0;x;1,5;2\n3600;x;2,5;3\n0;y;7;8\n3600;y;9;10\n", NULL, &rep);
    assert_int_equal(rep.delimiter, ';');
    assert_int_equal(ds->n_series, 2);
    assert_true(ds->series[0].x[0] == 1.5f);
    cc_data_close(&ds);
    /* tabs */
    ds = check("ts\ta\tb\n0\t1\t2\n3600\t3\t4\n", NULL, &rep);
    assert_int_equal(rep.delimiter, '\t');
    cc_data_close(&ds);
    /* quoted header names and cell ids with doubled quotes, commas and line breaks */
    ds = check("\"ts\",\"cell_id\",\"a, \"\"x\"\"\"\n0,\"c\"\"1\",1\n3600,\"c\"\"1\",2\n"
               "0,\"c\n2\" ,3\n3600,\"c\n2\",4\r\n",
               NULL, NULL);
    assert_int_equal(ds->n_series, 2);
    assert_string_equal(ds->features[0], "a, \"x\"");
    assert_string_equal(ds->series[0].cell_id, "c\"1");
    assert_string_equal(ds->series[1].cell_id, "c\n2");
    cc_data_close(&ds);
    /* a quote in the header spanning lines: detection reads on to its end */
    ds = check("\"t\ns\";a;b\n0;1;2\n3600;3;4\n", NULL, &rep);
    assert_int_equal(rep.delimiter, ';');
    cc_data_close(&ds);
}

static void test_long_lines(void **state)
{
    (void)state;
    /* 200 KPIs with long names: each line far longer than most windows */
    Text t = {0};
    put(&t, "ts");
    for (int j = 0; j < 200; j++)
        put(&t, ",kpi_with_a_rather_long_name_%03d", j);
    put(&t, "\n");
    for (int i = 0; i < 20; i++) {
        put(&t, "%d", 1704067200 + 900 * i);
        for (int j = 0; j < 200; j++)
            put(&t, (i + j) % 17 ? ",%.6f" : ",", 1000.0 * sin(i + 0.1 * j));
        put(&t, "\n");
    }
    CcDataset *ds = check(t.s, NULL, NULL);
    assert_int_equal(ds->n_features, 200);
    assert_int_equal(ds->series[0].T, 20);
    cc_data_close(&ds);
    free(t.s);
    /* one value of 100 000 digits: longer than the default window's tenth, still a number */
    Text u = {0};
    put(&u, "ts,a\n0,1\n900,");
    for (int i = 0; i < 100000; i++)
        put(&u, "%c", i ? '0' : '1');
    put(&u, "\n1800,3\n");
    check_fails(u.s, NULL, "not a number");
    free(u.s);
}

/* Many rows of several cells, shuffled, with duplicates, holes, missing values and jitter:
 * spans many windows of every size, and grows the row table more than once. */
static void test_many_rows(void **state)
{
    (void)state;
    Text t = {0};
    put(&t, "ts,cell_id,prb,thr,users\n");
    uint64_t rng = 7;
    for (int i = 0; i < 6000; i++) {
        int cell = (int)(tl_rng_next(&rng) % 5), step = (int)(tl_rng_next(&rng) % 1500);
        int jitter = i % 10 ? 0 : (int)(tl_rng_next(&rng) % 5) - 2; /* some collectors' */
        put(&t, "%d,cell-%d,%.3f,", 1704067200 + 900 * step + jitter, cell, tl_rng_uniform(&rng));
        if (i % 13)
            put(&t, "%.2f", 100 * tl_rng_uniform(&rng));
        put(&t, ",%d\n", (int)(tl_rng_next(&rng) % 50));
        if (i % 777 == 0)
            put(&t, "\n");
    }
    CcDataReport rep;
    CcDataset *ds = check(t.s, NULL, &rep);
    assert_int_equal(rep.rows_read, 6000);
    assert_int_equal(ds->n_series, 5);
    assert_int_equal(ds->step_seconds, 900);
    assert_true(rep.duplicates > 0 && rep.out_of_order > 0 && rep.missing_steps > 0);
    cc_data_close(&ds);
    /* the same with a gap limit: series split at holes */
    CcDataSettings s;
    cc_data_default_settings(&s);
    s.max_gap_steps = 2;
    s.impute = CC_IMPUTE_LINEAR;
    ds = check(t.s, &s, &rep);
    assert_true(rep.segments_split > 0);
    cc_data_close(&ds);
    free(t.s);
}

/* D/M/YYYY dates whose first day-first-only date comes after the row table has grown: the
 * second reading is kept for the rows before it too. */
static void test_slash_dates(void **state)
{
    (void)state;
    Text t = {0};
    put(&t, "time,v\n");
    for (int i = 0; i < 3000; i++) { /* hourly, days 1..28 of each month: day 13 at row 288 */
        int day = 1 + i / 24, hour = i % 24, month = 1;
        while (day > 28) {
            day -= 28;
            month++;
        }
        put(&t, "%d/%d/2024 %d:00,%d\n", day, month, hour, i);
    }
    CcDataReport rep;
    CcDataset *ds = check(t.s, NULL, &rep);
    assert_int_equal(rep.day_first, 1);
    assert_int_equal(rep.rows_read, 3000);
    assert_true(rep.missing_steps > 0); /* the 29th to 31st of each month */
    cc_data_close(&ds);
    free(t.s);
    /* unix times, then (after the row table has grown) D/M/YYYY ones: only the latter have
     * a second reading, the former keep theirs */
    Text u = {0};
    put(&u, "time,v\n");
    for (int i = 0; i < 1500; i++)
        put(&u, "%d,%d\n", 1704067200 + 3600 * i, i);
    for (int i = 1500; i < 1800; i++) /* 1500 h = 62.5 days: from 3 March 12:00 */
        put(&u, "%d/3/2024 %d:00,%d\n", 3 + (i - 1500 + 12) / 24, (i - 1500 + 12) % 24, i);
    ds = check(u.s, NULL, &rep);
    assert_int_equal(rep.day_first, 1);
    assert_int_equal(ds->n_series, 1);
    assert_int_equal(ds->series[0].T, 1800);
    assert_int_equal(rep.missing_steps, 0);
    cc_data_close(&ds);
    free(u.s);
    /* month-first and day-first rows mixed: refused, naming both lines */
    check_fails("time,v\n1/2/2024 0:00,1\n13/2/2024 1:00,2\n2/14/2024 2:00,3\n", NULL,
                "is day/month/year but line 4");
}

static void test_bad_files(void **state)
{
    (void)state;
    check_fails("", NULL, "empty file (no header)");
    check_fails("\n\r\n  \n", NULL, "empty file (no header)");
    check_fails("ts,a\n", NULL, "no data rows after the header");
    check_fails("ts,a\n0,1\n3600,\"2\n", NULL, ":3:6: unterminated quoted field");
    check_fails("ts,a\n0,1\n3600,2\"\n", NULL, ":3:7: quote inside an unquoted field");
    check_fails("ts,a\n0,1\n3600,\"2\"x\n", NULL, ":3:9: unexpected character after closing quote");
    check_fails("ts,a\n0,1\n3600,2,3\n", NULL, ":3: expected 2 fields, found 3");
    check_fails("ts,a\n0,1\n3600,abc", NULL, ":3:6: column 'a': not a number: 'abc'");
    check_fails("ts,a\n0,1\nyesterday,1\n", NULL, ":3:1: cannot parse time 'yesterday'");
    check_fails("ts;a,b\n0;1,5\n", NULL, ":2:1: cannot parse time '0;1'");
    Text t = {0};
    put(&t, "ts");
    for (int j = 0; j < 1100; j++)
        put(&t, ",c%d", j);
    put(&t, "\n");
    check_fails(t.s, NULL, "more than 1024 columns");
    free(t.s);
    /* a file that cannot be opened */
    CcDataset *ds = NULL;
    char err[256] = "";
    assert_int_equal(cc_data_open_file(&ds, "/nonexistent/x.csv", NULL, NULL, err, sizeof err),
                     -EIO);
    assert_null(ds);
    assert_non_null(strstr(err, "/nonexistent/x.csv"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_ends),   cmocka_unit_test(test_delimiters_and_quotes),
        cmocka_unit_test(test_long_lines),  cmocka_unit_test(test_many_rows),
        cmocka_unit_test(test_slash_dates), cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
