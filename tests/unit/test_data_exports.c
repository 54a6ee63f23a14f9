/*
 * test_data_exports.c — lib/cc_data on CSV files as operators export them (spreadsheets,
 * pandas, collectors, Grafana/InfluxDB): each case is one that used to load wrong or fail
 * without need, written to a temp file and read through cc_data_open_file as the CLI does.
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

/* 2016-10-01T00:00Z */
#define OCT1 1475280000

/* Writes csv to a temp file and loads it; rc, and err filled. The file is removed. */
static int load_file(const char *csv, const CcDataSettings *s, CcDataset **ds, CcDataReport *rep,
                     char *err, size_t errlen)
{
    char path[] = "/tmp/cc_exports_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(csv);
    assert_int_equal(write(fd, csv, n), (ssize_t)n);
    close(fd);
    err[0] = 0;
    int rc = cc_data_open_file(ds, path, s, rep, err, errlen);
    unlink(path);
    return rc;
}

/* Loads csv from a file: want NULL = must load (the dataset returned), else must fail
 * with a message containing want (NULL returned). */
static CcDataset *load(const char *csv, const CcDataSettings *s, CcDataReport *rep,
                       const char *want)
{
    CcDataset *ds = NULL;
    char err[512];
    int rc = load_file(csv, s, &ds, rep, err, sizeof err);
    if (want ? rc == 0 || !strstr(err, want) : rc != 0)
        print_error("rc %d, message '%s', wanted '%s'\n", rc, err, want ? want : "success");
    assert_true(want ? rc < 0 && !ds && strstr(err, want) : rc == 0 && ds);
    return ds;
}

#define load_ok(csv, s, rep) load(csv, s, rep, NULL)
#define load_fail(csv, s, want) (void)load(csv, s, NULL, want)

/* Appends printf output to a growing buffer of `cap` bytes. */
static void put(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
    assert_true(w >= 0 && (size_t)w < cap - n);
}

/* One series, hourly from t0, value of row i = i: checks the rows landed in place. */
static void assert_hourly_ramp(const CcDataset *ds, int64_t t0, int T)
{
    assert_int_equal(ds->step_seconds, 3600);
    assert_int_equal(ds->n_series, 1);
    assert_int_equal(ds->series[0].T, T);
    assert_int_equal(cc_data_row_ts(ds, 0, 0), t0);
    for (int i = 0; i < T; i++) {
        assert_int_equal(ds->series[0].mask[i * ds->n_features], 1);
        assert_true(ds->series[0].x[i * ds->n_features] == (float)i);
    }
}

/* Rows written even hours first, then odd: the step used to come from the file order
 * (every positive delta 2 h), so S was 7200 and half the rows were duplicates. */
static void test_unsorted_rows(void **state)
{
    (void)state;
    char csv[4096] = "time,kpi\n";
    for (int pass = 0; pass < 2; pass++)
        for (int i = pass; i < 24; i += 2)
            put(csv, sizeof csv, "%lld,%d\n", (long long)OCT1 + i * 3600, i);
    CcDataReport rep;
    CcDataset *ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1, 24);
    assert_int_equal(rep.duplicates, 0);
    assert_int_equal(rep.out_of_order, 1);
    assert_int_equal(rep.step_detected, 1);
    cc_data_close(&ds);
}

/* A collector stamps rows a few seconds around the hour. Whole-second jitter of -2/+2
 * used to give a step of 3598 s; millisecond stamps were refused as "not whole seconds". */
static void test_jittered_times(void **state)
{
    (void)state;
    static const int jit_ms[] = {0, -2000, 0, -2000, 1500, -3250, 2750, 0};
    char csv[8192] = "time,kpi\n";
    for (int i = 0; i < 48; i++)
        put(csv, sizeof csv, "%lld,%d\n", (long long)OCT1 + i * 3600 + (i % 2 ? -2 : 0), i);
    CcDataReport rep;
    CcDataset *ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1, 48);
    assert_int_equal(rep.misaligned, 24);
    cc_data_close(&ds);

    snprintf(csv, sizeof csv, "time,kpi\n");
    for (int i = 0; i < 48; i++) {
        int ms = jit_ms[i % 8] + 1000 * (i % 3);
        put(csv, sizeof csv, "%.3f,%d\n", OCT1 + i * 3600.0 + ms / 1000.0, i);
    }
    ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1, 48);
    assert_int_equal(rep.duplicates, 0);
    cc_data_close(&ds);

    /* a real 1.5 s feed is not jitter: still refused */
    snprintf(csv, sizeof csv, "time,kpi\n");
    for (int i = 0; i < 8; i++)
        put(csv, sizeof csv, "%.1f,%d\n", OCT1 + i * 1.5, i);
    load_fail(csv, NULL, "1.500 s is not whole seconds");
}

/* Hourly rows of 3 days written as a/b/YYYY H:MM, day first or month first. */
static void slash_days(char *csv, size_t cap, int day_first, int month, int d0)
{
    snprintf(csv, cap, "DateTime,Traffic\n");
    for (int i = 0; i < 72; i++) {
        int d = d0 + i / 24;
        put(csv, cap, "%d/%d/2016 %d:00,%d\n", day_first ? d : month, day_first ? month : d, i % 24,
            i);
    }
}

/* dd/mm/yyyy files: days 13..31 were refused, days 1..12 read silently as mm/dd. */
static void test_day_month_order(void **state)
{
    (void)state;
    char csv[8192];
    CcDataReport rep;
    /* 1..3 October, day first: only the day-first reading is 3 compact days */
    slash_days(csv, sizeof csv, 1, 10, 1);
    CcDataset *ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1, 72);
    assert_int_equal(rep.day_first, 1);
    assert_int_equal(rep.missing_steps, 0);
    cc_data_close(&ds);
    /* 14..16 September, day first: 14 cannot be a month */
    slash_days(csv, sizeof csv, 1, 9, 14);
    ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1 - 17 * 86400, 72);
    assert_int_equal(rep.day_first, 1);
    cc_data_close(&ds);
    /* month first stays month first (the lte-hourly files): 1..3 October */
    slash_days(csv, sizeof csv, 0, 10, 1);
    ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1, 72);
    assert_int_equal(rep.day_first, 0);
    cc_data_close(&ds);
    /* both orders in one file */
    load_fail("t,k\n10/16/2016 0:00,1\n16/10/2016 1:00,2\n", NULL,
              ":3: time '16/10/2016 1:00' is day/month/year but line 2 ('10/16/2016 0:00') is "
              "month/day/year");
    /* one ambiguous day: 5 June or 6 May, nothing tells */
    load_fail("t,k\n05/06/2016 0:00,1\n05/06/2016 1:00,2\n05/06/2016 2:00,3\n", NULL,
              "read as well month first as day first: give the time format");
    /* a day that is its own month is not ambiguous */
    CcDataSettings s;
    cc_data_default_settings(&s);
    ds = load_ok("t,k\n3/3/2016 0:00,1\n3/3/2016 1:00,2\n", &s, &rep);
    assert_int_equal(cc_data_row_ts(ds, 0, 0), 1456963200);
    cc_data_close(&ds);
}

/* "10/1/2016 12:00:00 AM", as US Excel writes times, was refused. */
static void test_am_pm(void **state)
{
    (void)state;
    char csv[8192] = "DateTime,Traffic\n";
    for (int i = 0; i < 48; i++)
        put(csv, sizeof csv, "10/%d/2016 %d:00:00 %s,%d\n", 1 + i / 24, (i % 12) ? i % 12 : 12,
            i % 24 < 12 ? "AM" : "PM", i);
    CcDataReport rep;
    CcDataset *ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1, 48);
    cc_data_close(&ds);
    load_fail("t,k\n10/1/2016 13:00 PM,1\n10/1/2016 2:00 PM,2\n", NULL,
              ":2:1: cannot parse time '10/1/2016 13:00 PM'");
}

/* 14.09.2016 00:00, as German spreadsheets write it, was refused. */
static void test_dotted_dates(void **state)
{
    (void)state;
    char csv[8192] = "Zeit;Last\n";
    for (int i = 0; i < 48; i++)
        put(csv, sizeof csv, "%02d.10.2016 %02d:00;%d\n", 1 + i / 24, i % 24, i);
    CcDataReport rep;
    CcDataset *ds = load_ok(csv, NULL, &rep);
    assert_hourly_ramp(ds, OCT1, 48);
    cc_data_close(&ds);
    double t;
    assert_int_equal(cc_data_parse_time("1.10.2016", 9, NULL, &t), 0);
    assert_true(t == OCT1);
    assert_int_equal(cc_data_parse_time("1476576000.5", 12, NULL, &t), 0);
    assert_true(t == 1476576000.5);
}

/* Epoch microseconds (InfluxDB, Grafana) and nanoseconds were read as milliseconds: a
 * series in the year 48000 with a step of 3600000 s that training accepted. */
static void test_epoch_units(void **state)
{
    (void)state;
    static const char *const unit[] = {"", "000", "000000", "000000000"};
    for (int u = 0; u < 4; u++) {
        char csv[4096] = "_time,_value\n";
        for (int i = 0; i < 24; i++)
            put(csv, sizeof csv, "%lld%s,%d\n", (long long)OCT1 + i * 3600, unit[u], i);
        CcDataReport rep;
        CcDataset *ds = load_ok(csv, NULL, &rep);
        assert_hourly_ramp(ds, OCT1, 24);
        cc_data_close(&ds);
    }
}

/* pandas' df.to_csv() of a frame indexed by time writes ",kpi1,kpi2". */
static void test_pandas_unnamed_index(void **state)
{
    (void)state;
    char csv[4096] = ",HUFL,OT\n";
    for (int i = 0; i < 24; i++)
        put(csv, sizeof csv, "2016-10-01 %02d:00:00,%d,7.5\n", i, i);
    CcDataReport rep;
    CcDataset *ds = load_ok(csv, NULL, &rep);
    assert_int_equal(ds->n_features, 2);
    assert_string_equal(ds->features[0], "HUFL");
    assert_string_equal(ds->features[1], "OT");
    assert_hourly_ramp(ds, OCT1, 24);
    cc_data_close(&ds);
    /* an empty name elsewhere is still an error */
    load_fail("t,,k\n1475280000,1,2\n", NULL, "header column 2 name is empty");
}

/* InfluxDB's annotated CSV: #datatype/#group/#default lines, an unnamed first column. */
static void test_influx_annotated(void **state)
{
    (void)state;
    char csv[8192] = "#datatype,string,long,dateTime:RFC3339,double,string\n"
                     "#group,false,false,false,false,true\n"
                     "#default,_result,,,,\n"
                     ",result,table,_time,_value,_field\n";
    for (int i = 0; i < 24; i++)
        put(csv, sizeof csv, ",,0,2016-10-01T%02d:00:00Z,%d,rrc_conn\n", i, i);
    CcDataSettings s;
    cc_data_default_settings(&s);
    s.time_column = "_time";
    s.features = "_value";
    CcDataReport rep;
    CcDataset *ds = load_ok(csv, &s, &rep);
    assert_hourly_ramp(ds, OCT1, 24);
    cc_data_close(&ds);
    /* left to the defaults, the first (empty) column is the time: said so */
    load_fail(csv, NULL, ":5:1: no time in the time column '' (another column? give --time-column");
    /* an unnamed column that would be a KPI */
    s.features = NULL;
    load_fail(csv, &s, ":4:1: header column 1 name is empty");
}

/* Excel's #N/A is a missing value; a text column is named as one. */
static void test_excel_na_and_text_columns(void **state)
{
    (void)state;
    CcDataReport rep;
    CcDataset *ds =
        load_ok("time;kpi\n1475280000;1,5\n1475283600;#N/A\n1475287200;2,5\n", NULL, &rep);
    assert_int_equal(rep.nan_cells[0], 1);
    assert_int_equal(ds->series[0].mask[1], 0);
    assert_true(ds->series[0].x[2] == 2.5f);
    cc_data_close(&ds);
    load_fail("time,site,kpi\n1475280000,BCN-ElBorn,1\n1475283600,BCN-ElBorn,2\n", NULL,
              ":2:12: column 'site': not a number: 'BCN-ElBorn' (the cell ids? give "
              "--cell-column site; another text column? choose the KPI columns with "
              "--features)");
}

/* Two rows on one step with other values (a local-time export's autumn hour, two sources)
 * are told apart from plain repeated rows; a column with no value is named. */
static void test_duplicates_and_empty_column(void **state)
{
    (void)state;
    CcDataReport rep;
    CcDataset *ds = load_ok("time,kpi,empty\n"
                            "1475280000,1,\n1475283600,2,\n1475283600,2,\n"
                            "1475287200,3,\n1475287200,9,\n1475290800,4,\n",
                            NULL, &rep);
    assert_int_equal(rep.duplicates, 2);
    assert_int_equal(rep.duplicates_differ, 1);
    assert_true(ds->series[0].x[2 * 2] == 9.0f); /* the later row kept */
    char buf[1024];
    cc_data_report_format(&rep, ds, buf, sizeof buf);
    assert_non_null(strstr(buf, "duplicates 2 (1 with other values: the later row kept)"));
    assert_non_null(strstr(buf, "; no value at all in empty"));
    assert_null(strstr(buf, "no value at all in kpi"));
    cc_data_close(&ds);
}

/* A long file of series at different steps (NAB's families as cells): the file's step is the
 * most common one, and the hourly cell among 5-minute ones is padded with 11 imputed rows
 * for every real one. The load says so, naming it. */
static void test_series_at_another_step(void **state)
{
    (void)state;
    static char csv[8192];
    csv[0] = 0;
    put(csv, sizeof csv, "time,cell_id,kpi\n");
    for (int i = 0; i < 48; i++)
        put(csv, sizeof csv, "%d,fast,%d\n", OCT1 + 300 * i, i % 7);
    for (int i = 0; i < 6; i++)
        put(csv, sizeof csv, "%d,slow,%d\n", OCT1 + 3600 * i, i);
    CcDataReport rep;
    CcDataset *ds = load_ok(csv, NULL, &rep);
    assert_int_equal(ds->step_seconds, 300);
    assert_int_equal(rep.sparse_series, 1);
    assert_string_equal(rep.sparse_first, "slow");
    char buf[1024];
    cc_data_report_format(&rep, ds, buf, sizeof buf);
    assert_non_null(strstr(buf, "; 1 series with under half their steps in the file (first "
                                "'slow': 10%; another step than 300s?"));
    cc_data_close(&ds);
    /* a gap alone is not that: half or more of the steps present */
    csv[0] = 0;
    put(csv, sizeof csv, "time,kpi\n");
    for (int i = 0; i < 48; i++)
        if (i < 20 || i >= 40)
            put(csv, sizeof csv, "%d,%d\n", OCT1 + 300 * i, i % 7);
    ds = load_ok(csv, NULL, &rep);
    assert_int_equal(rep.sparse_series, 0);
    cc_data_close(&ds);
}

/* A time past the year 9999 (a 26-digit number fuzz_csv found: read as ns it is still
 * 1.5e16 s) is refused with its line; it overflowed the step detection's milliseconds. */
static void test_time_out_of_range(void **state)
{
    (void)state;
    load_fail("time,x\n1475280000,1\n14752801198714752842009876,2\n1475283600,3\n", NULL,
              ":3:1: time '14752801198714752842009876' is out of range (beyond the year 9999)");
    CcDataSettings s;
    cc_data_default_settings(&s);
    s.time_index = CC_TIME_INDEX_YES;
    s.step_seconds = 60;
    load_fail("t,x\n0,1\n99999999999999,2\n", &s, ":3:1: time '99999999999999' is out of range");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unsorted_rows),
        cmocka_unit_test(test_jittered_times),
        cmocka_unit_test(test_day_month_order),
        cmocka_unit_test(test_am_pm),
        cmocka_unit_test(test_dotted_dates),
        cmocka_unit_test(test_epoch_units),
        cmocka_unit_test(test_pandas_unnamed_index),
        cmocka_unit_test(test_influx_annotated),
        cmocka_unit_test(test_excel_na_and_text_columns),
        cmocka_unit_test(test_duplicates_and_empty_column),
        cmocka_unit_test(test_series_at_another_step),
        cmocka_unit_test(test_time_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
