/*
 * test_data.c — lib/cc_data (CSV loading, timestamps, missing-data policy, splits) and
 * lib/cc_synth (determinism, streaming = CSV, ranges), plus the real files of
 * ../shared/data with their row counts (skipped with a message when absent).
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cc_data.h"
#include "cc_synth.h"
#include "testlib.h"

#define NEAR(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol))

static CcDataset *load_str(const char *csv, const CcDataSettings *s, CcDataReport *rep)
{
    CcDataset *ds = NULL;
    char err[512] = "";
    int rc = cc_data_open_buffer(&ds, csv, strlen(csv), "t.csv", s, rep, err, sizeof err);
    if (rc)
        print_error("load failed: %s\n", err);
    assert_int_equal(rc, 0);
    return ds;
}

/* Expects a load failure whose message contains `want`. */
static void load_fail(const char *csv, const CcDataSettings *s, const char *want)
{
    CcDataset *ds = NULL;
    char err[512] = "";
    int rc = cc_data_open_buffer(&ds, csv, strlen(csv), "bad.csv", s, NULL, err, sizeof err);
    if (rc == 0 || !strstr(err, want))
        print_error("rc %d, message '%s', wanted '%s'\n", rc, err, want);
    assert_true(rc < 0);
    assert_null(ds);
    assert_non_null(strstr(err, want));
}

/* ---------------------------------------------------------------------------------- */

static void test_time_formats(void **state)
{
    (void)state;
    struct {
        const char *s, *fmt;
        double want;
    } ok[] = {
        {"1704067200", NULL, 1704067200},
        {"1704067200.5", NULL, 1704067200.5},
        {"1704067200000", NULL, 1704067200}, /* milliseconds */
        {"2024-01-01T00:00:00Z", NULL, 1704067200},
        {"2024-01-01T01:30:00+01:30", NULL, 1704067200},
        {"2024-01-01T00:00:00.250Z", NULL, 1704067200.25},
        {"2023-12-31T19:00:00-05:00", NULL, 1704067200},
        {"2024-01-01", NULL, 1704067200},
        {"2024-01-01 00:00:00", NULL, 1704067200},
        {"2024-01-01 00:00", NULL, 1704067200},
        {"2016-07-01 00:00:00", NULL, 1467331200}, /* ETTh1's first row */
        {"2018-03-28 15:56:00", NULL, 1522252560}, /* ElBorn's first row */
        {"10/23/2017 0:00", NULL, 1508716800},     /* lte-hourly */
        {"2/29/2024 13:05:07", NULL, 1709211907},
        {" 2024-02-29T12:00:00Z ", NULL, 1709208000},
        {"01.01.2024 00:00", "%d.%m.%Y %H:%M", 1704067200},
        {"2024/01/01 02:00 +0200", "%Y/%m/%d %H:%M %z", 1704067200},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double t = -1;
        int rc = cc_data_parse_time(ok[i].s, strlen(ok[i].s), ok[i].fmt, &t);
        if (rc || t != ok[i].want)
            print_error("'%s': rc %d, got %.3f want %.3f\n", ok[i].s, rc, t, ok[i].want);
        assert_int_equal(rc, 0);
        NEAR(t, ok[i].want, 1e-6);
    }
    const char *bad[] = {"",
                         "abc",
                         "2024-13-01",
                         "2023-02-29",
                         "2024-01-01T25:00:00Z",
                         "2024-01-01T00:00:00+25:00",
                         "2024-01-01 00:00:00 trailing",
                         "13/01/2024 0:00",
                         "1/1/24",
                         "12:00",
                         "2024-1-1",
                         "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double t;
        int rc = cc_data_parse_time(bad[i], strlen(bad[i]), NULL, &t);
        if (rc == 0)
            print_error("'%s' accepted as %.3f\n", bad[i], t);
        assert_int_equal(rc, -EINVAL);
    }
    double t;
    assert_int_equal(cc_data_parse_time("2024-01-01", 10, "%d.%m.%Y", &t), -EINVAL);
}

static void test_wide_crlf_bom_quotes(void **state)
{
    (void)state;
    const char *csv = "\xEF\xBB\xBF\"time\",\"a, quoted\",b\r\n"
                      "2024-01-01 00:00:00,1.5,\"2\"\r\n"
                      "2024-01-01 01:00:00, 2.5 ,NaN\r\n"
                      "\r\n"
                      "2024-01-01 02:00:00,\"3.5\",4\r\n"
                      "\r\n\r\n";
    CcDataReport rep;
    CcDataset *ds = load_str(csv, NULL, &rep);
    assert_int_equal(ds->n_features, 2);
    assert_string_equal(ds->features[0], "a, quoted");
    assert_string_equal(ds->features[1], "b");
    assert_int_equal(ds->n_series, 1);
    assert_string_equal(ds->series[0].cell_id, "t");
    assert_int_equal(rep.rows_read, 3);
    assert_int_equal(rep.blank_lines, 3);
    assert_int_equal(ds->step_seconds, 3600);
    assert_int_equal(rep.step_detected, 1);
    const CcSeries *s = &ds->series[0];
    assert_int_equal(s->T, 3);
    assert_int_equal(s->p0, 1704067200 / 3600);
    NEAR(s->x[0], 1.5, 0);
    NEAR(s->x[1], 2, 0);
    NEAR(s->x[2], 2.5, 0);
    NEAR(s->x[4], 3.5, 0);
    /* NaN at row 1 of b: masked, carried from row 0 */
    assert_int_equal(s->mask[3], 0);
    NEAR(s->x[3], 2, 0);
    assert_int_equal(rep.nan_cells[1], 1);
    assert_int_equal(rep.imputed_cells[1], 1);
    assert_int_equal(rep.nan_cells[0], 0);
    cc_data_close(&ds);
    assert_null(ds);

    /* no final newline, LF only, a quoted field with an escaped quote and a newline */
    const char *csv2 = "ts,v,note\n1000,1,\"say \"\"hi\"\"\nthere\"\n1060,2,x";
    CcDataSettings st;
    cc_data_default_settings(&st);
    st.features = "v";
    ds = load_str(csv2, &st, &rep);
    assert_int_equal(ds->n_features, 1);
    assert_int_equal(ds->step_seconds, 60);
    assert_int_equal(ds->series[0].T, 2);
    assert_int_equal(rep.rows_read, 2);
    cc_data_close(&ds);
}

static void test_missing_steps_and_imputation(void **state)
{
    (void)state;
    /* 10-minute steps; rows 2,3 absent; row 5 value empty; the last row duplicated; one
     * row out of order */
    const char *csv = "ts,x\n"
                      "0,0\n"
                      "600,1\n"
                      "2400,4\n"
                      "3000,\n"
                      "1800,3\n" /* out of order; step 3, but step 2 (1200) never comes */
                      "3600,6\n"
                      "3600,7\n"; /* duplicate: later wins */
    CcDataReport rep;
    CcDataset *ds = load_str(csv, NULL, &rep);
    const CcSeries *s = &ds->series[0];
    assert_int_equal(ds->step_seconds, 600);
    assert_int_equal(s->p0, 0);
    assert_int_equal(s->T, 7);
    assert_int_equal(rep.rows_read, 7);
    assert_int_equal(rep.missing_steps, 1); /* step 2 */
    assert_int_equal(rep.duplicates, 1);
    assert_int_equal(rep.out_of_order, 1);
    assert_int_equal(rep.nan_cells[0], 1);
    assert_int_equal(rep.imputed_cells[0], 2);
    const uint8_t mask[7] = {1, 1, 0, 1, 1, 0, 1};
    const float carry[7] = {0, 1, 1, 3, 4, 4, 7};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(s->mask[i], mask[i]);
        NEAR(s->x[i], carry[i], 0);
    }
    cc_data_close(&ds);

    CcDataSettings st;
    cc_data_default_settings(&st);
    st.impute = CC_IMPUTE_LINEAR;
    ds = load_str(csv, &st, &rep);
    const float lin[7] = {0, 1, 2, 3, 4, 5.5f, 7};
    for (int i = 0; i < 7; i++)
        NEAR(ds->series[0].x[i], lin[i], 1e-6);
    cc_data_close(&ds);

    /* leading NaNs take the first observation; a never-observed feature is 0 */
    ds = load_str("ts,a,b\n0,,\n60,,\n120,5,\n", NULL, &rep);
    s = &ds->series[0];
    NEAR(s->x[0], 5, 0);
    NEAR(s->x[2], 5, 0);
    NEAR(s->x[4], 5, 0);
    NEAR(s->x[1], 0, 0);
    NEAR(s->x[5], 0, 0);
    assert_int_equal(rep.imputed_cells[1], 3);
    cc_data_close(&ds);

    /* split at long gaps */
    cc_data_default_settings(&st);
    st.step_seconds = 60;
    st.max_gap_steps = 2;
    ds = load_str("ts,a\n0,1\n60,2\n240,3\n600,4\n660,5\n", &st, &rep);
    assert_int_equal(ds->n_series, 2);
    assert_int_equal(rep.segments_split, 1);
    assert_int_equal(ds->series[0].T, 5); /* steps 0..4, two inserted */
    assert_int_equal(ds->series[1].p0, 10);
    assert_int_equal(ds->series[1].T, 2);
    assert_int_equal(rep.missing_steps, 2);
    assert_string_equal(ds->series[0].cell_id, ds->series[1].cell_id);
    cc_data_close(&ds);

    /* misaligned times are rounded to the nearest step and counted */
    cc_data_default_settings(&st);
    st.step_seconds = 60;
    ds = load_str("ts,a\n0,1\n61,2\n119,3\n", &st, &rep);
    assert_int_equal(rep.misaligned, 2);
    assert_int_equal(rep.duplicates, 0);
    assert_int_equal(ds->series[0].T, 3);
    cc_data_close(&ds);
}

static void test_long_format(void **state)
{
    (void)state;
    const char *csv = "ts,cell_id,prb,users\n"
                      "2024-01-01T00:00:00Z,B,10,1\n"
                      "2024-01-01T00:00:00Z,A,20,2\n"
                      "2024-01-01T00:15:00Z,A,21,3\n"
                      "2024-01-01T00:15:00Z,B,11,4\n"
                      "2024-01-01T00:30:00Z,B,12,5\n"
                      "2024-01-01T01:00:00Z,A,23,6\n";
    CcDataReport rep;
    CcDataset *ds = load_str(csv, NULL, &rep);
    assert_int_equal(ds->n_series, 2);
    assert_int_equal(ds->n_features, 2);
    assert_int_equal(ds->step_seconds, 900);
    /* series in order of first appearance: B then A */
    assert_string_equal(ds->series[0].cell_id, "B");
    assert_string_equal(ds->series[1].cell_id, "A");
    assert_int_equal(ds->series[0].T, 3);
    assert_int_equal(ds->series[1].T, 5);
    assert_int_equal(rep.missing_steps, 2);
    NEAR(ds->series[1].x[2 * 4 + 0], 23, 0);
    NEAR(ds->series[1].x[2 * 4 + 1], 6, 0);
    assert_int_equal(ds->series[1].mask[2 * 2], 0);
    assert_int_equal(cc_data_feature_index(ds, "users"), 1);
    assert_int_equal(cc_data_feature_index(ds, "nope"), -1);

    /* selecting and reordering columns */
    const char *names[] = {"users", "prb"};
    char err[256];
    assert_int_equal(cc_data_select(ds, names, 2, err, sizeof err), 0);
    assert_string_equal(ds->features[0], "users");
    NEAR(ds->series[1].x[2 * 4 + 0], 6, 0);
    NEAR(ds->series[1].x[2 * 4 + 1], 23, 0);
    const char *bad[] = {"zz"};
    assert_int_equal(cc_data_select(ds, bad, 1, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "zz"));
    cc_data_close(&ds);

    /* wide format forced: cell_id would be a non-numeric feature → error with position */
    CcDataSettings st;
    cc_data_default_settings(&st);
    st.format = CC_DATA_WIDE;
    load_fail(csv, &st, "bad.csv:2:22: column 'cell_id': not a number: 'B'");
    /* long forced without the column */
    st.format = CC_DATA_LONG;
    load_fail("ts,a\n0,1\n", &st, "needs a 'cell_id' column");
    /* another name for the cell column; custom time column */
    cc_data_default_settings(&st);
    st.cell_column = "site";
    st.time_column = "when";
    ds = load_str("v,site,when\n1,x,0\n2,x,3600\n3,y,0\n", &st, &rep);
    assert_int_equal(ds->n_series, 2);
    assert_int_equal(ds->n_features, 1);
    assert_string_equal(ds->features[0], "v");
    cc_data_close(&ds);
}

static void test_malformed(void **state)
{
    (void)state;
    load_fail("", NULL, "empty file");
    load_fail("ts,a\n", NULL, "no data rows");
    load_fail("ts,a\n0,1\n60,2,3\n", NULL, "bad.csv:3: expected 2 fields, found 3");
    load_fail("ts,a\n0,1\n60\n", NULL, "bad.csv:3: expected 2 fields, found 1");
    load_fail("ts,a\r\n0,1\r\n60,1x\r\n", NULL, "bad.csv:3:4: column 'a': not a number: '1x'");
    load_fail("ts,a\n0,1\nyesterday,2\n", NULL, "bad.csv:3:1: cannot parse time 'yesterday'");
    load_fail("ts,a\n0,\"1\n60,2\n", NULL, "bad.csv:2:3: unterminated quoted field");
    load_fail("ts,a\n0,\"1\"x\n", NULL, "bad.csv:2:6: unexpected character after closing quote");
    load_fail("ts,a\n0,1\"2\n", NULL, "bad.csv:2:4: quote inside an unquoted field");
    load_fail("ts,a,a\n0,1,2\n", NULL, "duplicate column 'a'");
    load_fail("ts,,b\n0,1,2\n", NULL, "header column 2 name is empty");
    load_fail("ts,a\n0,1e999\n", NULL, "bad.csv:2:3: column 'a': value '1e999' is not finite");
    load_fail("ts,a\n0,inf\n", NULL, "not finite");
    load_fail("ts,a\n0,1\n", NULL, "cannot detect the step");
    load_fail("ts,a\n0,1\n60,2\n999999999,3\n", NULL, "spans");
    CcDataSettings st;
    cc_data_default_settings(&st);
    st.features = "a,zz";
    load_fail("ts,a\n0,1\n60,2\n", &st, "feature 'zz' is not a column");
    st.features = "ts";
    load_fail("ts,a\n0,1\n60,2\n", &st, "is the time or cell column");
    cc_data_default_settings(&st);
    st.time_column = "time";
    load_fail("ts,a\n0,1\n60,2\n", &st, "no time column 'time'");
    st.time_column = NULL;
    st.time_format = "%d.%m.%Y";
    load_fail("ts,a\n2024-01-01,1\n", &st,
              "bad.csv:2:1: cannot parse time '2024-01-01' (format %d.%m.%Y)");
    /* the file path is named for a missing file */
    CcDataset *ds = NULL;
    char err[256];
    assert_int_equal(cc_data_open_file(&ds, "/nonexistent/x.csv", NULL, NULL, err, sizeof err),
                     -EIO);
    assert_non_null(strstr(err, "/nonexistent/x.csv"));
}

static void test_append_split_stats(void **state)
{
    (void)state;
    CcDataReport rep;
    CcDataset *a = load_str("ts,v\n0,1\n60,2\n120,3\n", NULL, &rep);
    CcDataset *b = load_str("ts,v\n300,6\n360,\n420,8\n", NULL, &rep);
    char err[256];
    int join = -1;
    assert_int_equal(cc_data_append(a, b, CC_IMPUTE_CARRY, &join, err, sizeof err), 0);
    assert_int_equal(join, 5);
    const CcSeries *s = &a->series[0];
    assert_int_equal(s->T, 8);
    const uint8_t mask[8] = {1, 1, 1, 0, 0, 1, 0, 1};
    const float x[8] = {1, 2, 3, 3, 3, 6, 6, 8};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(s->mask[i], mask[i]);
        NEAR(s->x[i], x[i], 0);
    }
    /* appending something that starts earlier is refused, naming both times */
    assert_int_equal(cc_data_append(a, b, CC_IMPUTE_CARRY, NULL, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "starts at step 5 (1970-01-01T00:05:00Z), not after the last "
                                "step 7 (1970-01-01T00:07:00Z)"));
    CcDataset *c = load_str("ts,w\n900,1\n960,2\n", NULL, &rep);
    assert_int_equal(cc_data_append(a, c, CC_IMPUTE_CARRY, NULL, err, sizeof err), -EINVAL);

    /* statistics over observed values only; standardisation */
    double mean[1], sd[1];
    cc_data_stats(a, 0, (CcRange){0, 8}, mean, sd);
    NEAR(mean[0], (1 + 2 + 3 + 6 + 8) / 5.0, 1e-12);
    double var = 0;
    const double obs[5] = {1, 2, 3, 6, 8};
    for (int i = 0; i < 5; i++)
        var += (obs[i] - 4.0) * (obs[i] - 4.0);
    NEAR(sd[0], sqrt(var / 5), 1e-12);
    cc_data_standardize(a, mean, sd);
    NEAR(a->series[0].x[7], (8 - 4.0) / sqrt(var / 5), 1e-6);
    cc_data_close(&a);
    cc_data_close(&b);
    cc_data_close(&c);

    CcRange r[3];
    assert_int_equal(cc_data_split(NULL, 100, r, err, sizeof err), 0);
    assert_int_equal(r[0].end, 70);
    assert_int_equal(r[1].begin, 70);
    assert_int_equal(r[1].end, 80);
    assert_int_equal(r[2].begin, 80);
    assert_int_equal(r[2].end, 100);
    assert_int_equal(cc_data_split("0.5,0.25", 10, r, err, sizeof err), 0);
    assert_int_equal(r[0].end, 5);
    assert_int_equal(r[1].end, 7);
    assert_int_equal(r[2].begin, 7);
    assert_int_equal(cc_data_split("rows:0-8640,8640-11520,11520-14400", 17420, r, err, sizeof err),
                     0);
    assert_int_equal(r[2].begin, 11520);
    assert_int_equal(r[2].end, 14400);
    assert_int_equal(cc_data_split("rows:0-10,5-20,20-30", 30, r, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "overlap"));
    assert_int_equal(cc_data_split("rows:0-10,10-20,20-31", 30, r, err, sizeof err), -EINVAL);
    assert_int_equal(cc_data_split("0.9,0.2", 30, r, err, sizeof err), -EINVAL);
    assert_int_equal(cc_data_split("x", 30, r, err, sizeof err), -EINVAL);
    assert_int_equal(cc_data_split("rows:0-10", 30, r, err, sizeof err), -EINVAL);

    /* the ETT benchmark's borders: ETTh's rows, ETTm's four times as many, nothing else */
    assert_int_equal(cc_data_ett_split(3600, r), 0);
    assert_int_equal(r[0].begin, 0);
    assert_int_equal(r[0].end, 8640);
    assert_int_equal(r[1].begin, 8640);
    assert_int_equal(r[1].end, 11520);
    assert_int_equal(r[2].begin, 11520);
    assert_int_equal(r[2].end, 14400);
    assert_int_equal(cc_data_ett_split(900, r), 0);
    assert_int_equal(r[0].end, 34560);
    assert_int_equal(r[1].end, 46080);
    assert_int_equal(r[2].begin, 46080);
    assert_int_equal(r[2].end, 57600);
    assert_int_equal(cc_data_ett_split(1800, r), -EINVAL);
    assert_int_equal(cc_data_ett_split(0, r), -EINVAL);
}

/* Random corruptions of a valid file never crash the loader (run under ASan in CI): each
 * either loads with consistent shapes or fails with a message naming the file. */
static void test_mutations(void **state)
{
    (void)state;
    const char *base = "\xEF\xBB\xBFts,cell_id,\"a\",b\r\n"
                       "2024-01-01T00:00:00Z,c1,1.5,2\r\n"
                       "2024-01-01T00:15:00Z,c2,,3\r\n"
                       "2024-01-01T00:15:00Z,c1,\"2.5\",NaN\r\n"
                       "2024-01-01T00:45:00Z,c1,4,5e-3\r\n"
                       "2024-01-01T00:30:00Z,c2,1,1\r\n\r\n";
    const size_t n = strlen(base);
    const char alphabet[] = ",\"\r\n0123456789.-+eE:TZ/ abcNa";
    char buf[512];
    uint64_t x = 88172645463325252ull;
    int ok = 0, failed = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, base, n);
        size_t len = n;
        int edits = 1 + it % 4;
        for (int e = 0; e < edits; e++) {
            tl_xorshift_next(&x);
            size_t pos = (size_t)(x % len);
            switch ((x >> 32) % 4) {
            case 0: buf[pos] = alphabet[(x >> 40) % (sizeof alphabet - 1)]; break;
            case 1: len = pos + 1; break; /* truncate */
            case 2:
                memmove(buf + pos, buf + pos + 1, len - pos - 1);
                len--;
                break;
            default: buf[pos] = (char)(x >> 48); break; /* any byte */
            }
            if (len == 0)
                len = 1;
        }
        CcDataset *ds = NULL;
        CcDataReport rep;
        char err[512] = "";
        int rc = cc_data_open_buffer(&ds, buf, len, "mut.csv", NULL, &rep, err, sizeof err);
        if (rc == 0) {
            ok++;
            assert_non_null(ds);
            assert_true(ds->n_series >= 1 && ds->n_features >= 1);
            for (int i = 0; i < ds->n_series; i++) {
                const CcSeries *se = &ds->series[i];
                assert_true(se->T >= 1);
                for (size_t k = 0; k < (size_t)se->T * ds->n_features; k++)
                    assert_true(isfinite(se->x[k]));
            }
            cc_data_close(&ds);
        } else {
            failed++;
            assert_null(ds);
            assert_true(rc == -EINVAL || rc == -ERANGE);
            assert_non_null(strstr(err, "mut.csv"));
        }
    }
    print_message("mutations: %d loaded, %d refused with a message\n", ok, failed);
    assert_true(ok > 0 && failed > 0);
}

/* ---------------------------------------------------------------------------------- */
/* Delimiters, cell/time columns, row-index times, wide files (issue 12)               */

static void test_delimiters(void **state)
{
    (void)state;
    CcDataReport rep;
    CcDataSettings st;
    /* ';' detected from the header; decimal commas read as points; quoted ';' kept */
    const char *semi = "time;\"a;x\";b\n0;1,5;2\n60;2,25;\"3\"\n120;;4\n";
    CcDataset *ds = load_str(semi, NULL, &rep);
    assert_int_equal(rep.delimiter, ';');
    assert_int_equal(ds->n_features, 2);
    assert_string_equal(ds->features[0], "a;x");
    assert_int_equal(ds->step_seconds, 60);
    NEAR(ds->series[0].x[0], 1.5, 1e-6);
    NEAR(ds->series[0].x[2], 2.25, 1e-6);
    NEAR(ds->series[0].x[3], 3, 0);
    assert_int_equal(ds->series[0].mask[4], 0);
    char buf[1024];
    cc_data_report_format(&rep, ds, buf, sizeof buf);
    assert_non_null(strstr(buf, "delimiter ';'"));
    cc_data_close(&ds);
    /* forced: the same result */
    cc_data_default_settings(&st);
    st.delimiter = ';';
    ds = load_str(semi, &st, &rep);
    assert_int_equal(ds->n_features, 2);
    NEAR(ds->series[0].x[2], 2.25, 1e-6);
    cc_data_close(&ds);
    /* a ';' file forced to ',': the message says what is wrong, not "name too long" */
    st.delimiter = ',';
    load_fail("timestamp_utc;prb_utilisation_downlink;prb_utilisation_uplink;users\n0;1;2;3\n", &st,
              "bad.csv:1: the header is one column when split at ',' (given) and it contains "
              "';': is ';' the delimiter? try --delimiter ';'");
    /* '|' is never detected, but named when the header holds it */
    load_fail("ts|a|b\n0|1|2\n", NULL,
              "(detected) and it contains '|': is '|' the delimiter? "
              "try --delimiter '|'");
    st.delimiter = '|';
    ds = load_str("ts|a|b\n0|1|2\n60|3|4\n", &st, &rep);
    assert_int_equal(ds->n_features, 2);
    NEAR(ds->series[0].x[3], 4, 0);
    cc_data_close(&ds);
    st.delimiter = '"';
    load_fail("ts,a\n0,1\n", &st, "cannot be a quote");
    /* tab detected; a tab inside quotes is data; spaces around values are trimmed */
    ds = load_str("ts\ta\tb\n0\t 1\t\"x\ty\"\n",
                  &(CcDataSettings){.features = "a", .step_seconds = 60}, &rep);
    assert_int_equal(rep.delimiter, '\t');
    assert_int_equal(ds->n_features, 1);
    NEAR(ds->series[0].x[0], 1, 0);
    cc_data_close(&ds);
    ds = load_str("ts\ta\tb\n0\t1\t2\n60\t3,5\t4\n", NULL, &rep);
    NEAR(ds->series[0].x[2], 3.5, 1e-6); /* decimal comma off ',' */
    cc_data_close(&ds);
    /* ',' files: unchanged, and a decimal comma is no number there */
    ds = load_str("ts,a\n0,1.5\n60,2\n", NULL, &rep);
    assert_int_equal(rep.delimiter, ',');
    cc_data_report_format(&rep, ds, buf, sizeof buf);
    assert_null(strstr(buf, "delimiter"));
    cc_data_close(&ds);
    load_fail("ts,a\n0,\"1,5\"\n", NULL, "column 'a': not a number: '1,5'");
    /* the header and the first row agree: a ';' in a name of a ',' file */
    ds = load_str("ts,a;b;c\n0,1\n60,2\n", NULL, &rep);
    assert_int_equal(rep.delimiter, ',');
    assert_string_equal(ds->features[0], "a;b;c");
    cc_data_close(&ds);
    /* a tie goes to ',' (the header has one of each) */
    ds = load_str("t;x,a\n0,1\n60,2\n", NULL, &rep);
    assert_int_equal(rep.delimiter, ',');
    assert_string_equal(ds->features[0], "a");
    cc_data_close(&ds);
    /* a name too long says how long */
    char longname[200] = "ts,";
    memset(longname + 3, 'k', 100);
    strcpy(longname + 103, "\n0,1\n");
    load_fail(longname, NULL, "header column 2 name too long (100 bytes, at most 63)");
}

static void test_cell_time_columns(void **state)
{
    (void)state;
    CcDataReport rep;
    CcDataSettings st;
    cc_data_default_settings(&st);
    /* the cell column named; the time column not first */
    st.cell_column = "site";
    st.time_column = "when";
    CcDataset *ds = load_str("v,site,when,w\n1,x,0,5\n2,x,3600,6\n3,y,0,7\n", &st, &rep);
    assert_int_equal(ds->n_series, 2);
    assert_int_equal(ds->n_features, 2);
    assert_string_equal(ds->series[0].cell_id, "x");
    assert_string_equal(ds->features[1], "w");
    cc_data_close(&ds);
    /* a cell column given but absent: refused (auto would have made it one wide series) */
    st.time_column = NULL;
    load_fail("when,v\n0,1\n3600,2\n", &st, "bad.csv:1: no cell column 'site' in the header");
    /* ... unless the format is wide */
    st.format = CC_DATA_WIDE;
    ds = load_str("when,v\n0,1\n3600,2\n", &st, &rep);
    assert_int_equal(ds->n_series, 1);
    cc_data_close(&ds);
    /* the cell column cannot be the time column */
    st.format = CC_DATA_AUTO;
    st.cell_column = "ts";
    load_fail("ts,v\n0,1\n60,2\n", &st, "no cell column 'ts'");
    /* default: cell_id when present, else wide (unchanged) */
    cc_data_default_settings(&st);
    assert_null(st.cell_column);
    ds = load_str("ts,cell_id,v\n0,a,1\n60,a,2\n0,b,3\n", &st, &rep);
    assert_int_equal(ds->n_series, 2);
    cc_data_close(&ds);
}

/* Issue 31: a file whose first column is not the time, or whose cell column is not named
 * cell_id, is refused with a message that names --time-column / --cell-column. */
static void test_column_hints(void **state)
{
    (void)state;
    /* the cell ids first: the time column is the second */
    load_fail("cell,time,v\nA1,2024-01-01 00:00,1\nA1,2024-01-01 01:00,2\n", NULL, "--time-column");
    /* a cell column not named cell_id is read as a KPI: its ids are not numbers */
    load_fail("time;cell;v\n2024-01-01 00:00;Cell000113;1\n2024-01-01 01:00;Cell000113;2\n", NULL,
              "--cell-column cell");
    /* a text column later in the file is still a matter of --features */
    load_fail("time,v,w\n2024-01-01 00:00,1,2\n2024-01-01 01:00,2,x\n", NULL,
              "column 'w': not a number: 'x'");
}

/* Issue 31: a 0/1 column named `label` (NAB-style anomaly labels, a training target's
 * mark) is not loaded as a KPI unless --features names it; the report says so. */
static void test_label_column(void **state)
{
    (void)state;
    CcDataReport rep;
    CcDataset *ds = load_str("ts,v,label\n0,1,0\n60,2,1\n120,3,0\n", NULL, &rep);
    assert_int_equal(ds->n_features, 1);
    assert_string_equal(ds->features[0], "v");
    assert_string_equal(rep.skipped_label, "label");
    char buf[1024];
    cc_data_report_format(&rep, ds, buf, sizeof buf);
    assert_non_null(strstr(buf, "column 'label' (0/1) not loaded as a KPI"));
    cc_data_close(&ds);
    /* named in features: loaded */
    CcDataSettings st;
    cc_data_default_settings(&st);
    st.features = "v,label";
    ds = load_str("ts,v,label\n0,1,0\n60,2,1\n120,3,0\n", &st, &rep);
    assert_int_equal(ds->n_features, 2);
    assert_string_equal(rep.skipped_label, "");
    cc_data_close(&ds);
    /* a `Label` column that is not 0/1 is a KPI like any other */
    ds = load_str("ts,v,Label\n0,1,0\n60,2,5\n120,3,0\n", NULL, &rep);
    assert_int_equal(ds->n_features, 2);
    assert_string_equal(rep.skipped_label, "");
    cc_data_close(&ds);
}

static void test_time_index(void **state)
{
    (void)state;
    CcDataReport rep;
    CcDataSettings st;
    char buf[1024];
    const char *idx = "t,a\n0,10\n1,11\n2,12\n4,14\n5,15\n";
    /* auto: small consecutive integers are a row index; the step must be given */
    load_fail(idx, NULL,
              "bad.csv: the time column 't' holds small consecutive integers (0..5), a row "
              "index rather than unix seconds: give the seconds per row (--step S)");
    cc_data_default_settings(&st);
    st.step_seconds = 3600;
    CcDataset *ds = load_str(idx, &st, &rep);
    assert_int_equal(rep.time_index, 1);
    assert_int_equal(rep.step_detected, 0);
    assert_int_equal(ds->step_seconds, 3600);
    assert_int_equal(ds->series[0].p0, 0);
    assert_int_equal(ds->series[0].T, 6); /* row 3 absent: inserted */
    assert_int_equal(rep.missing_steps, 1);
    assert_int_equal(rep.duplicates, 0);
    assert_int_equal(rep.misaligned, 0);
    assert_int_equal(cc_data_row_ts(ds, 0, 5), 5 * 3600);
    NEAR(ds->series[0].x[5], 15, 0);
    cc_data_report_format(&rep, ds, buf, sizeof buf);
    assert_non_null(strstr(buf, "time = row index x 3600s"));
    cc_data_close(&ds);
    /* forced: an index that does not start at 0 or is not consecutive; long files too */
    st.time_index = CC_TIME_INDEX_YES;
    ds = load_str("t,cell_id,a\n100,x,1\n110,x,2\n100,y,3\n", &st, &rep);
    assert_int_equal(rep.time_index, 1);
    assert_int_equal(ds->n_series, 2);
    assert_int_equal(ds->series[0].T, 11);
    assert_int_equal(ds->series[0].p0, 100);
    cc_data_close(&ds);
    load_fail("t,a\n0,1\n1.5,2\n", &st, "bad.csv:3:1: time index '1.5' is not a non-negative");
    load_fail("t,a\n0,1\n-1,2\n", &st, "time index '-1'");
    st.step_seconds = 0;
    load_fail(idx, &st, "the time column 't' is a row index: give the seconds per row");
    /* no: unix seconds as before (step 1 s detected) */
    st.time_index = CC_TIME_INDEX_NO;
    ds = load_str(idx, &st, &rep);
    assert_int_equal(rep.time_index, 0);
    assert_int_equal(ds->step_seconds, 1);
    cc_data_close(&ds);
    /* auto leaves a given time format, real unix seconds and non-unit steps alone */
    cc_data_default_settings(&st);
    st.time_format = "%s";
    ds = load_str(idx, &st, &rep);
    assert_int_equal(rep.time_index, 0);
    assert_int_equal(ds->step_seconds, 1);
    cc_data_close(&ds);
    ds = load_str("ts,a\n0,1\n60,2\n120,3\n", NULL, &rep);
    assert_int_equal(rep.time_index, 0);
    assert_int_equal(ds->step_seconds, 60);
    cc_data_close(&ds);
    ds = load_str("ts,a\n1700000000,1\n1700000001,2\n1700000002,3\n", NULL, &rep);
    assert_int_equal(rep.time_index, 0);
    assert_int_equal(ds->step_seconds, 1);
    cc_data_close(&ds);
    ds = load_str("ts,a\n2024-01-01 00:00,1\n2024-01-01 01:00,2\n", NULL, &rep);
    assert_int_equal(rep.time_index, 0);
    cc_data_close(&ds);
}

/* A wide file of n KPI columns k0..k{n-1}, 3 hourly rows: value of k_j at row i = 1000 i + j. */
static char *wide_csv(int n)
{
    size_t cap = (size_t)n * 40 + 256, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    len += (size_t)snprintf(s + len, cap - len, "ts");
    for (int j = 0; j < n; j++)
        len += (size_t)snprintf(s + len, cap - len, ",k%d", j);
    for (int i = 0; i < 3; i++) {
        len += (size_t)snprintf(s + len, cap - len, "\n%d", 3600 * i);
        for (int j = 0; j < n; j++)
            len += (size_t)snprintf(s + len, cap - len, ",%d", 1000 * i + j);
    }
    snprintf(s + len, cap - len, "\n");
    return s;
}

static void test_many_kpis(void **state)
{
    (void)state;
    CcDataReport rep;
    char *csv = wide_csv(CC_DATA_MAX_FEATURES);
    CcDataset *ds = load_str(csv, NULL, &rep);
    assert_true(CC_DATA_MAX_FEATURES >= 256);
    assert_int_equal(ds->n_features, CC_DATA_MAX_FEATURES);
    assert_string_equal(ds->features[255], "k255");
    NEAR(ds->series[0].x[2 * CC_DATA_MAX_FEATURES + 255], 2255, 0);
    /* reordering all of them works at the dataset's limit, beyond the model's */
    const char *names[CC_DATA_MAX_FEATURES];
    char tmp[CC_DATA_MAX_FEATURES][CC_FEATURE_NAME_MAX];
    memcpy(tmp, ds->features, sizeof tmp);
    for (int j = 0; j < CC_DATA_MAX_FEATURES; j++)
        names[j] = tmp[CC_DATA_MAX_FEATURES - 1 - j];
    char err[256];
    assert_int_equal(cc_data_select(ds, names, CC_DATA_MAX_FEATURES, err, sizeof err), 0);
    assert_string_equal(ds->features[0], "k255");
    NEAR(ds->series[0].x[CC_DATA_MAX_FEATURES], 1255, 0);
    cc_data_close(&ds);
    free(csv);
    /* one more is refused with the limit named */
    csv = wide_csv(CC_DATA_MAX_FEATURES + 1);
    ds = NULL;
    int rc = cc_data_open_buffer(&ds, csv, strlen(csv), "w.csv", NULL, NULL, err, sizeof err);
    assert_int_equal(rc, -ERANGE);
    assert_non_null(strstr(err, "more than 256 feature columns"));
    /* ... unless some are chosen */
    CcDataSettings st;
    cc_data_default_settings(&st);
    st.features = "k256,k0";
    ds = load_str(csv, &st, &rep);
    assert_int_equal(ds->n_features, 2);
    NEAR(ds->series[0].x[0], 256, 0);
    cc_data_close(&ds);
    free(csv);
}

/* ---------------------------------------------------------------------------------- */
/* Synthetic generator                                                                  */

static void test_synth(void **state)
{
    (void)state;
    CcSynthSettings s;
    cc_synth_default_settings(&s);
    s.n_cells = 4;
    s.seed = 42;
    CcSynth *g = NULL, *g2 = NULL;
    char err[256];
    assert_int_equal(cc_synth_open(&g, &s, err, sizeof err), 0);
    assert_int_equal(cc_synth_n_features(g), 8);
    assert_string_equal(cc_synth_feature_name(g, 0), "prb_dl");
    assert_string_equal(cc_synth_feature_name(g, 7), "drop_rate");
    assert_int_equal(cc_synth_first_step(g), 1704067200 / 900);
    /* random access = same numbers; another seed differs */
    float v1[8], v2[8];
    int64_t p = cc_synth_first_step(g) + 1234;
    int r1 = cc_synth_values(g, 2, p, v1);
    cc_synth_values(g, 0, p + 7, v2);
    int r2 = cc_synth_values(g, 2, p, v2);
    assert_int_equal(r1, r2);
    assert_memory_equal(v1, v2, sizeof v1);
    s.seed = 43;
    assert_int_equal(cc_synth_open(&g2, &s, err, sizeof err), 0);
    cc_synth_values(g2, 2, p, v2);
    assert_true(memcmp(v1, v2, sizeof v1) != 0);
    cc_synth_close(&g2);

    /* 4 weeks: ranges, a daily rhythm, outages (NaN latency) and missing steps exist */
    int64_t n_steps = 28 * 96, rows = 0, missing = 0, nan_lat = 0;
    double day[24] = {0};
    int day_n[24] = {0};
    for (int c = 0; c < 4; c++)
        for (int64_t i = 0; i < n_steps; i++) {
            float v[8];
            int present = cc_synth_values(g, c, cc_synth_first_step(g) + i, v);
            rows += present;
            missing += !present;
            assert_true(v[0] >= 0 && v[0] <= 100);
            assert_true(v[1] >= 0 && v[1] <= 100);
            assert_true(v[2] >= 0 && v[3] >= 0 && v[4] >= 0);
            assert_true(v[4] == floorf(v[4]));
            if (isnan(v[5])) {
                nan_lat++;
                assert_true(isnan(v[6]));
            } else {
                assert_true(v[5] > 0);
                assert_true(v[6] >= 1 && v[6] <= 15);
            }
            assert_true(v[7] >= 0 && v[7] <= 100);
            int h = (int)((i * 900 / 3600) % 24);
            day[h] += v[0];
            day_n[h]++;
        }
    assert_true(missing > 0 && missing < n_steps * 4 / 20);
    assert_true(nan_lat > 0);
    double lo = 1e9, hi = 0;
    for (int h = 0; h < 24; h++) {
        double m = day[h] / day_n[h];
        lo = m < lo ? m : lo;
        hi = m > hi ? m : hi;
    }
    print_message("synth: %lld rows, %lld missing, %lld outage steps, prb_dl hourly mean "
                  "%.1f..%.1f\n",
                  (long long)rows, (long long)missing, (long long)nan_lat, lo, hi);
    assert_true(hi > 2.5 * lo); /* a real daily rhythm */

    /* CSV written in one go loads back to the same values */
    char path[] = "/tmp/cc_test_synth_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_int_equal(cc_synth_write_csv(g, f, 7 * 96), 0);
    fclose(f);
    CcDataset *ds = NULL;
    CcDataReport rep;
    assert_int_equal(cc_data_open_file(&ds, path, NULL, &rep, err, sizeof err), 0);
    unlink(path);
    assert_int_equal(ds->n_series, 4);
    assert_int_equal(ds->n_features, 8);
    assert_int_equal(ds->step_seconds, 900);
    assert_string_equal(ds->series[1].cell_id, "cell0001");
    int64_t expect_rows = 0;
    for (int c = 0; c < 4; c++) {
        const CcSeries *se = &ds->series[c];
        for (int i = 0; i < se->T; i++) {
            float v[8];
            int present = cc_synth_values(g, c, se->p0 + i, v);
            expect_rows += present;
            for (int j = 0; j < 8; j++) {
                if (!se->mask[(size_t)i * 8 + j])
                    continue;
                assert_true(present);
                NEAR(se->x[(size_t)i * 8 + j], v[j], 1e-4 * (1 + fabs(v[j])));
            }
        }
    }
    /* rows before a series' first step or after its last are absent, not counted above */
    assert_true(expect_rows <= rep.rows_read);
    assert_true(rep.rows_read - expect_rows < 40);
    cc_data_close(&ds);
    cc_synth_close(&g);

    /* feature subset and bad settings */
    cc_synth_default_settings(&s);
    s.features = "cqi,prb_dl";
    assert_int_equal(cc_synth_open(&g, &s, err, sizeof err), 0);
    assert_int_equal(cc_synth_n_features(g), 2);
    assert_string_equal(cc_synth_feature_name(g, 0), "cqi");
    cc_synth_close(&g);
    s.features = "cqi,bogus";
    assert_int_equal(cc_synth_open(&g, &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "bogus"));
    cc_synth_default_settings(&s);
    s.step_seconds = 0;
    assert_int_equal(cc_synth_open(&g, &s, err, sizeof err), -EINVAL);
}

/* ---------------------------------------------------------------------------------- */
/* The real data files                                                                  */

static int have_shared(void)
{
    struct stat st;
    return stat(CC_SHARED_DATA "/SOURCES.md", &st) == 0;
}

static void check_file(const char *rel, int64_t rows, int F, int64_t step, int64_t missing,
                       int64_t nan_total)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", CC_SHARED_DATA, rel);
    CcDataset *ds = NULL;
    CcDataReport rep;
    int rc = cc_data_open_file(&ds, path, NULL, &rep, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(rep.rows_read, rows);
    assert_int_equal(ds->n_features, F);
    assert_int_equal(ds->n_series, 1);
    assert_int_equal(ds->step_seconds, step);
    assert_int_equal(rep.missing_steps, missing);
    assert_int_equal(ds->series[0].T, rows + missing);
    assert_int_equal(rep.duplicates + rep.out_of_order + rep.misaligned, 0);
    int64_t nan = 0;
    for (int f = 0; f < F; f++)
        nan += rep.nan_cells[f];
    assert_int_equal(nan, nan_total);
    cc_data_close(&ds);
}

static void test_shared_data(void **state)
{
    (void)state;
    if (!have_shared()) {
        print_message("skipping: %s not found (real datasets absent)\n", CC_SHARED_DATA);
        skip();
    }
    check_file("ett/ETTh1.csv", 17420, 7, 3600, 0, 0);
    check_file("lte-barcelona/ElBorn.csv", 4192, 11, 120, 0, 78);
    check_file("lte-barcelona/ElBorn_test.csv", 1049, 11, 120, 0, 6);
    check_file("lte-barcelona/LesCorts.csv", 6892, 11, 120, 0, 1604);
    check_file("lte-barcelona/LesCorts_test.csv", 1723, 11, 120, 0, 10);
    check_file("lte-barcelona/PobleSec.csv", 15927, 11, 120, 0, 22);
    check_file("lte-barcelona/PobleSec_test.csv", 3982, 11, 120, 0, 0);
    check_file("lte-hourly-3cells/train_Cell000113.csv", 8566, 1, 3600, 26, 0);
    check_file("lte-hourly-3cells/train_Cell000231.csv", 8565, 1, 3600, 27, 0);
    check_file("lte-hourly-3cells/train_Cell000233.csv", 8565, 1, 3600, 27, 0);
    check_file("lte-hourly-3cells/test_Cell000113.csv", 167, 1, 3600, 1, 0);
    check_file("lte-hourly-3cells/test_Cell000231.csv", 167, 1, 3600, 1, 0);
    check_file("lte-hourly-3cells/test_Cell000233.csv", 167, 1, 3600, 1, 0);

    /* a test file continues its train file: joined without a hole */
    char p1[1024], p2[1024], err[512];
    snprintf(p1, sizeof p1, "%s/lte-barcelona/ElBorn.csv", CC_SHARED_DATA);
    snprintf(p2, sizeof p2, "%s/lte-barcelona/ElBorn_test.csv", CC_SHARED_DATA);
    CcDataset *a = NULL, *b = NULL;
    assert_int_equal(cc_data_open_file(&a, p1, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(cc_data_open_file(&b, p2, NULL, NULL, err, sizeof err), 0);
    int join;
    assert_int_equal(cc_data_append(a, b, CC_IMPUTE_CARRY, &join, err, sizeof err), 0);
    assert_int_equal(join, 4192);
    assert_int_equal(a->series[0].T, 4192 + 1049);
    /* ETTh1's first value */
    cc_data_close(&a);
    cc_data_close(&b);
    snprintf(p1, sizeof p1, "%s/ett/ETTh1.csv", CC_SHARED_DATA);
    assert_int_equal(cc_data_open_file(&a, p1, NULL, NULL, err, sizeof err), 0);
    assert_string_equal(a->features[6], "OT");
    NEAR(a->series[0].x[6], 30.5310001373291, 1e-4);
    assert_int_equal(a->series[0].p0 * 3600, 1467331200);
    cc_data_close(&a);
}

/* Sites (issue 32): sizes 3-6 (the last site what is left), every cell of a site in a
 * site-wide event at the same steps (power: no traffic; transport: no row), and without
 * sites the same numbers as before (the site streams draw nothing). */
static void test_synth_sites(void **state)
{
    (void)state;
    CcSynthSettings s;
    cc_synth_default_settings(&s);
    s.n_cells = 100;
    s.seed = 7;
    s.site_outage_rate = 3; /* per site per week: events in 4 weeks are certain enough */
    CcSynth *plain = NULL, *g = NULL;
    char err[256];
    assert_int_equal(cc_synth_open(&plain, &s, err, sizeof err), 0);
    assert_int_equal(cc_synth_n_sites(plain), 0);
    assert_int_equal(cc_synth_cell_site(plain, 3), -1);
    s.sites = 1;
    s.sites_per_region = 4;
    assert_int_equal(cc_synth_open(&g, &s, err, sizeof err), 0);
    int n_sites = cc_synth_n_sites(g);
    assert_true(n_sites >= 100 / 6 && n_sites <= 100 / 3 + 1);
    int size = 0, prev = 0;
    for (int c = 0; c < 100; c++) {
        int site = cc_synth_cell_site(g, c);
        assert_true(site == prev || site == prev + 1); /* consecutive cells */
        if (site != prev) {
            assert_true(size >= 3 && size <= 6);
            size = 0;
        }
        prev = site;
        size++;
    }
    assert_int_equal(prev, n_sites - 1);
    assert_true(size >= 1 && size <= 6);

    int64_t p0 = cc_synth_first_step(g), n_steps = 28 * 96, power = 0, transport = 0, same = 0;
    for (int64_t i = 0; i < n_steps; i++) {
        float v[8], w[8];
        for (int c = 0; c < 100; c++) {
            int ev = cc_synth_site_event(g, cc_synth_cell_site(g, c), p0 + i);
            int present = cc_synth_values(g, c, p0 + i, v);
            int present_plain = cc_synth_values(plain, c, p0 + i, w);
            if (ev == 2) {
                transport++;
                assert_false(present);
            } else if (ev == 1) {
                power++;
                for (int k = 0; k < 8; k++) /* every counter 0; latency, CQI unreported */
                    assert_true(k == 5 || k == 6 ? isnan(v[k]) : v[k] == 0);
            } else {
                same += present == present_plain && !memcmp(v, w, sizeof v);
                assert_int_equal(present, present_plain);
                assert_memory_equal(v, w, sizeof v);
            }
        }
    }
    assert_true(power > 0 && transport > 0);
    assert_true(same > 0);

    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_int_equal(cc_synth_write_topology(g, fp), 0);
    fclose(fp);
    static const char head[] = "cell,site,region,sector,lat,lon\ncell0000,site0000,region000,1,";
    assert_true(!strncmp(buf, head, sizeof head - 1));
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    assert_int_equal(lines, 101);
    assert_non_null(strstr(buf, "region001")); /* 4 sites a region */
    free(buf);
    assert_int_equal(cc_synth_write_topology(plain, stdout), -EINVAL);
    cc_synth_close(&g);
    cc_synth_close(&plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_formats),
        cmocka_unit_test(test_wide_crlf_bom_quotes),
        cmocka_unit_test(test_missing_steps_and_imputation),
        cmocka_unit_test(test_long_format),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_append_split_stats),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_delimiters),
        cmocka_unit_test(test_cell_time_columns),
        cmocka_unit_test(test_column_hints),
        cmocka_unit_test(test_label_column),
        cmocka_unit_test(test_time_index),
        cmocka_unit_test(test_many_kpis),
        cmocka_unit_test(test_synth),
        cmocka_unit_test(test_synth_sites),
        cmocka_unit_test(test_shared_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
