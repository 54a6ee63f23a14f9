/*
 * test_kpi.c — KPI message decoding (lib/cc_kpi): every refusal class gives its reason,
 * good elements around bad ones are kept, timestamps in all forms, mapping with scale
 * and aliases, bounds, settings validation; the fast scanner gives the reference path's
 * results (edge cases and 300k random mutations) and is taken for valid messages.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cc_kpi.h"
#include "cc_time.h"
#include "testlib.h"

static const char *const NAMES[4] = {"dl_prb", "ul_prb", "users", "thr"};

static CcKpiDecoder *open_dec(const CcKpiSettings *s)
{
    CcKpiDecoder *d = NULL;
    char err[256] = "";
    int rc = cc_kpi_open(&d, s, err, sizeof err);
    if (rc)
        print_error("cc_kpi_open: %s\n", err);
    assert_int_equal(rc, 0);
    return d;
}

static void base_settings(CcKpiSettings *s)
{
    cc_kpi_default_settings(s);
    s->n_features = 4;
    s->step_seconds = 3600;
    s->feature_names = NAMES;
}

static CcKpiBatch decode(CcKpiDecoder *d, const char *msg)
{
    CcKpiBatch b;
    assert_int_equal(cc_kpi_decode(d, msg, strlen(msg), &b), 0);
    return b;
}

/* Decodes msg and expects exactly one error with reason r and no record. */
static void expect_reason(CcKpiDecoder *d, const char *msg, enum CcKpiReason r)
{
    CcKpiBatch b = decode(d, msg);
    if (b.n_errors != 1 || b.errors[0].reason != r)
        print_error("message %s: want %s, got %d errors (first %s: %s), %d records\n", msg,
                    cc_kpi_reason_name(r), b.n_errors,
                    b.n_errors ? cc_kpi_reason_name(b.errors[0].reason) : "-",
                    b.n_errors ? b.errors[0].message : "", b.n_records);
    assert_int_equal(b.n_errors, 1);
    assert_int_equal(b.errors[0].reason, r);
    assert_int_equal(b.n_records, 0);
    assert_true(strlen(b.errors[0].message) > 0);
}

static void test_reason_names(void **state)
{
    (void)state;
    const char *want[] = {"ok",         "oversize",         "not_json",      "not_object",
                          "empty",      "too_many_records", "missing_cell",  "bad_cell_id",
                          "missing_ts", "bad_ts",           "misaligned_ts", "bad_value_type",
                          "non_finite", "absurd_value",     "no_kpis"};
    assert_int_equal(sizeof want / sizeof *want, CC_KPI_N_REASONS);
    for (int r = 0; r < CC_KPI_N_REASONS; r++)
        assert_string_equal(cc_kpi_reason_name(r), want[r]);
    assert_string_equal(cc_kpi_reason_name(CC_KPI_N_REASONS), "unknown");
    assert_string_equal(cc_kpi_reason_name(-1), "unknown");
}

static void test_object_top_level_and_kpis(void **state)
{
    (void)state;
    CcKpiSettings s;
    base_settings(&s);
    CcKpiDecoder *d = open_dec(&s);

    CcKpiBatch b = decode(d, "{\"cell\":\"enb-17/3\",\"ts\":7200,\"dl_prb\":41.5,"
                             "\"users\":12,\"vendor\":\"x\"}");
    assert_int_equal(b.n_errors, 0);
    assert_int_equal(b.n_records, 1);
    assert_string_equal(b.records[0].cell_id, "enb-17/3");
    assert_int_equal(b.records[0].ts, 7200);
    assert_int_equal(b.records[0].step, 2);
    assert_int_equal(b.records[0].present, (1u << 0) | (1u << 2));
    assert_float_equal(b.records[0].values[0], 41.5f, 0);
    assert_float_equal(b.records[0].values[2], 12.0f, 0);
    assert_float_equal(b.records[0].values[1], 0.0f, 0);
    assert_int_equal(b.unmapped_fields, 1);

    /* Under "kpis": top-level extras are not KPIs and not counted as unmapped. */
    b = decode(d, "{\"cell\":\"c1\",\"ts\":3600,\"site\":\"s\",\"kpis\":{\"ul_prb\":3,"
                  "\"thr\":null,\"other\":1}}");
    assert_int_equal(b.n_errors, 0);
    assert_int_equal(b.n_records, 1);
    assert_int_equal(b.records[0].present, 1u << 1);
    assert_float_equal(b.records[0].values[1], 3.0f, 0);
    assert_int_equal(b.unmapped_fields, 1);
    assert_int_equal(b.null_values, 1);

    /* With "kpis" present, a top-level KPI name is not read. */
    b = decode(d, "{\"cell\":\"c1\",\"ts\":3600,\"dl_prb\":5,\"kpis\":{\"ul_prb\":3}}");
    assert_int_equal(b.n_records, 1);
    assert_int_equal(b.records[0].present, 1u << 1);

    /* Numeric cell id. */
    b = decode(d, "{\"cell\":12345,\"ts\":0,\"dl_prb\":1}");
    assert_int_equal(b.n_records, 1);
    assert_string_equal(b.records[0].cell_id, "12345");
    assert_int_equal(b.records[0].step, 0);
    cc_kpi_close(&d);
    assert_null(d);
}

static void test_every_reason(void **state)
{
    (void)state;
    CcKpiSettings s;
    base_settings(&s);
    double lo[4] = {0, 0, 0, -1e9}, hi[4] = {100, 100, 1e6, 1e9};
    s.min = lo;
    s.max = hi;
    s.max_records = 3;
    s.max_message_bytes = 400;
    CcKpiDecoder *d = open_dec(&s);

    char big[600];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = 0;
    memcpy(big, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":1}", 30);
    expect_reason(d, big, CC_KPI_OVERSIZE);
    expect_reason(d, "{\"cell\":\"a\",", CC_KPI_NOT_JSON);
    expect_reason(d, "\xff\xfe", CC_KPI_NOT_JSON);
    expect_reason(d, "", CC_KPI_NOT_JSON);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":1e400}", CC_KPI_NOT_JSON);
    expect_reason(d, "42", CC_KPI_NOT_OBJECT);
    expect_reason(d, "\"text\"", CC_KPI_NOT_OBJECT);
    expect_reason(d, "null", CC_KPI_NOT_OBJECT);
    expect_reason(d, "[]", CC_KPI_EMPTY);
    expect_reason(d, "[{},{},{},{}]", CC_KPI_TOO_MANY_RECORDS);
    expect_reason(d, "[7]", CC_KPI_NOT_OBJECT);
    expect_reason(d, "{\"ts\":0,\"dl_prb\":1}", CC_KPI_MISSING_CELL);
    expect_reason(d, "{\"cell\":\"\",\"ts\":0,\"dl_prb\":1}", CC_KPI_BAD_CELL_ID);
    expect_reason(d, "{\"cell\":\"a b\",\"ts\":0,\"dl_prb\":1}", CC_KPI_BAD_CELL_ID);
    expect_reason(d, "{\"cell\":\"caf\\u00e9\",\"ts\":0,\"dl_prb\":1}", CC_KPI_BAD_CELL_ID);
    expect_reason(d, "{\"cell\":\"x\\u0000y\",\"ts\":0,\"dl_prb\":1}", CC_KPI_NOT_JSON);
    expect_reason(d, "{\"cell\":-1,\"ts\":0,\"dl_prb\":1}", CC_KPI_BAD_CELL_ID);
    expect_reason(d, "{\"cell\":1.5,\"ts\":0,\"dl_prb\":1}", CC_KPI_BAD_CELL_ID);
    expect_reason(d, "{\"cell\":true,\"ts\":0,\"dl_prb\":1}", CC_KPI_BAD_CELL_ID);
    expect_reason(d,
                  "{\"cell\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
                  "\"ts\":0,\"dl_prb\":1}",
                  CC_KPI_BAD_CELL_ID); /* 65 chars */
    expect_reason(d, "{\"cell\":\"a\",\"dl_prb\":1}", CC_KPI_MISSING_TS);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":\"yesterday\",\"dl_prb\":1}", CC_KPI_BAD_TS);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":\"2024-02-30T00:00:00Z\",\"dl_prb\":1}",
                  CC_KPI_BAD_TS);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":\"2024-01-01T00:00:00\",\"dl_prb\":1}",
                  CC_KPI_BAD_TS); /* no offset */
    expect_reason(d, "{\"cell\":\"a\",\"ts\":-5,\"dl_prb\":1}", CC_KPI_BAD_TS);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":1e300,\"dl_prb\":1}", CC_KPI_BAD_TS);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":null,\"dl_prb\":1}", CC_KPI_BAD_TS);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":\"12\"}", CC_KPI_BAD_VALUE_TYPE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":true}", CC_KPI_BAD_VALUE_TYPE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":[1]}", CC_KPI_BAD_VALUE_TYPE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"kpis\":[1]}", CC_KPI_BAD_VALUE_TYPE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":\"NaN\"}", CC_KPI_NON_FINITE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":\"-Infinity\"}", CC_KPI_NON_FINITE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":\"inf\"}", CC_KPI_NON_FINITE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":100.5}", CC_KPI_ABSURD_VALUE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":-0.1}", CC_KPI_ABSURD_VALUE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"thr\":2e15}", CC_KPI_ABSURD_VALUE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0}", CC_KPI_NO_KPIS);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":null,\"x\":1}", CC_KPI_NO_KPIS);

    CcKpiStats st;
    cc_kpi_stats(d, &st);
    assert_int_equal(st.invalid[CC_KPI_OVERSIZE], 1);
    assert_int_equal(st.invalid[CC_KPI_NOT_JSON], 5);
    assert_int_equal(st.invalid[CC_KPI_BAD_TS], 6);
    assert_int_equal(st.records, 0);
    cc_kpi_close(&d);
}

static void test_max_abs_without_bounds(void **state)
{
    (void)state;
    CcKpiSettings s;
    base_settings(&s);
    CcKpiDecoder *d = open_dec(&s);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":-1.5e15}", CC_KPI_ABSURD_VALUE);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":1e200}", CC_KPI_ABSURD_VALUE);
    CcKpiBatch b = decode(d, "{\"cell\":\"a\",\"ts\":0,\"dl_prb\":-9e14}");
    assert_int_equal(b.n_records, 1);
    assert_float_equal(b.records[0].values[0], -9e14f, 1e8);
    cc_kpi_close(&d);
}

static void test_array_keeps_good_elements(void **state)
{
    (void)state;
    CcKpiSettings s;
    base_settings(&s);
    CcKpiDecoder *d = open_dec(&s);
    CcKpiBatch b = decode(d, "["
                             "{\"cell\":\"a\",\"ts\":3600,\"dl_prb\":1},"
                             "{\"cell\":\"b\",\"ts\":\"bad\",\"dl_prb\":2},"
                             "{\"cell\":\"c\",\"ts\":3600,\"dl_prb\":3},"
                             "17,"
                             "{\"cell\":\"d\",\"ts\":3600,\"dl_prb\":\"NaN\"},"
                             "{\"cell\":\"e\",\"ts\":3600,\"ul_prb\":5}"
                             "]");
    assert_int_equal(b.n_elements, 6);
    assert_int_equal(b.n_records, 3);
    assert_string_equal(b.records[0].cell_id, "a");
    assert_int_equal(b.records[0].element, 0);
    assert_string_equal(b.records[1].cell_id, "c");
    assert_int_equal(b.records[1].element, 2);
    assert_string_equal(b.records[2].cell_id, "e");
    assert_int_equal(b.records[2].element, 5);
    assert_float_equal(b.records[2].values[1], 5.0f, 0);
    assert_int_equal(b.n_errors, 3);
    assert_int_equal(b.errors[0].reason, CC_KPI_BAD_TS);
    assert_int_equal(b.errors[0].element, 1);
    assert_int_equal(b.errors[1].reason, CC_KPI_NOT_OBJECT);
    assert_int_equal(b.errors[1].element, 3);
    assert_int_equal(b.errors[2].reason, CC_KPI_NON_FINITE);
    assert_int_equal(b.errors[2].element, 4);
    assert_non_null(strstr(b.errors[0].message, "element 1"));

    /* A long array grows the output arrays. */
    char *buf = malloc(200 * 64);
    size_t n = 0;
    n += (size_t)sprintf(buf + n, "[");
    for (int i = 0; i < 150; i++)
        n += (size_t)sprintf(buf + n, "%s{\"cell\":\"c%d\",\"ts\":%d,\"users\":%d}", i ? "," : "",
                             i, i * 3600, i);
    n += (size_t)sprintf(buf + n, "]");
    assert_int_equal(cc_kpi_decode(d, buf, n, &b), 0);
    assert_int_equal(b.n_records, 150);
    for (int i = 0; i < 150; i++) {
        assert_int_equal(b.records[i].step, i);
        assert_float_equal(b.records[i].values[2], (float)i, 0);
    }
    free(buf);
    cc_kpi_close(&d);
}

static int64_t ts_of(CcKpiDecoder *d, const char *tsjson)
{
    char msg[256];
    snprintf(msg, sizeof msg, "{\"cell\":\"a\",\"ts\":%s,\"dl_prb\":1}", tsjson);
    CcKpiBatch b = decode(d, msg);
    if (b.n_records != 1)
        print_error("ts %s refused: %s\n", tsjson, b.n_errors ? b.errors[0].message : "");
    assert_int_equal(b.n_records, 1);
    return b.records[0].ts;
}

static void test_timestamps(void **state)
{
    (void)state;
    CcKpiSettings s;
    base_settings(&s);
    CcKpiDecoder *d = open_dec(&s);
    const int64_t t0 = 1714557600; /* 2024-05-01T10:00:00Z */
    assert_int_equal(ts_of(d, "\"2024-05-01T10:00:00Z\""), t0);
    assert_int_equal(ts_of(d, "\"2024-05-01t10:00:00z\""), t0);
    assert_int_equal(ts_of(d, "\"2024-05-01 10:00:00Z\""), t0);
    assert_int_equal(ts_of(d, "\"2024-05-01T12:00:00+02:00\""), t0);
    assert_int_equal(ts_of(d, "\"2024-05-01T06:30:00-03:30\""), t0);
    assert_int_equal(ts_of(d, "\"2024-05-01T10:00:00.999Z\""), t0);
    assert_int_equal(ts_of(d, "\"2024-02-29T00:00:00Z\""), 1709164800);
    assert_int_equal(ts_of(d, "\"1970-01-01T00:00:00Z\""), 0);
    assert_int_equal(ts_of(d, "1714557600"), t0);
    assert_int_equal(ts_of(d, "1714557600.7"), t0);
    assert_int_equal(ts_of(d, "1714557600000"), t0);
    assert_int_equal(ts_of(d, "1714557600999"), t0);
    assert_int_equal(ts_of(d, "99999999999"), 99999999999); /* < 1e11: seconds */
    assert_int_equal(ts_of(d, "100000000000"), 100000000);  /* ≥ 1e11: ms */
    int64_t t;
    assert_int_equal(cc_time_parse_rfc3339("2023-02-29T00:00:00Z", 20, &t), -22);
    assert_int_equal(cc_time_parse_rfc3339("2023-01-01T24:00:00Z", 20, &t), -22);
    assert_int_equal(cc_time_parse_rfc3339("2023-01-01T00:00:00.Z", 21, &t), -22);
    assert_int_equal(cc_time_parse_rfc3339("2023-01-01T00:00:00Zx", 21, &t), -22);
    assert_int_equal(cc_time_parse_rfc3339("2023-01-01", 10, &t), -22);
    assert_int_equal(cc_time_parse_rfc3339("1900-03-01T00:00:00Z", 20, &t), 0);
    assert_int_equal(t, -2203891200);

    /* Step rules with S = 900. */
    cc_kpi_close(&d);
    s.step_seconds = 900;
    d = open_dec(&s);
    CcKpiBatch b = decode(d, "{\"cell\":\"a\",\"ts\":1799,\"dl_prb\":1}");
    assert_int_equal(b.records[0].step, 1); /* floor */
    assert_int_equal(b.records[0].ts, 1799);
    cc_kpi_close(&d);
    s.align = CC_KPI_ALIGN_NEAREST;
    d = open_dec(&s);
    b = decode(d, "[{\"cell\":\"a\",\"ts\":1349,\"dl_prb\":1},{\"cell\":\"a\",\"ts\":1350,"
                  "\"dl_prb\":1}]");
    assert_int_equal(b.records[0].step, 1);
    assert_int_equal(b.records[1].step, 2);
    cc_kpi_close(&d);
    s.align = CC_KPI_ALIGN_EXACT;
    d = open_dec(&s);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":901,\"dl_prb\":1}", CC_KPI_MISALIGNED_TS);
    b = decode(d, "{\"cell\":\"a\",\"ts\":\"1970-01-01T00:30:00Z\",\"dl_prb\":1}");
    assert_int_equal(b.records[0].step, 2);
    cc_kpi_close(&d);
}

static void test_mapping_scale_aliases(void **state)
{
    (void)state;
    CcKpiSettings s;
    base_settings(&s);
    CcKpiMapEntry map[] = {
        {.field = "pmPrbUtilDl", .feature_name = "dl_prb", .scale = 100},
        {.field = "throughput_kbps", .feature = 3, .scale = 0.001},
        {.field = "thr", .feature = 3, .scale = 1},                /* alias, lower priority */
        {.field = "ul_prb", .feature_name = "ul_prb", .scale = 2}, /* overrides identity */
    };
    s.map = map;
    s.n_map = 4;
    CcKpiDecoder *d = open_dec(&s);
    CcKpiBatch b = decode(d, "{\"cell\":\"a\",\"ts\":0,\"pmPrbUtilDl\":0.25,\"thr\":7,"
                             "\"throughput_kbps\":5000,\"ul_prb\":4,\"dl_prb\":99}");
    assert_int_equal(b.n_records, 1);
    assert_float_equal(b.records[0].values[1], 8.0f, 1e-6);
    assert_float_equal(b.records[0].values[3], 5.0f, 1e-6); /* first alias wins over thr */
    /* pmPrbUtilDl (scaled) and dl_prb both map to feature 0: the explicit entry wins. */
    assert_float_equal(b.records[0].values[0], 25.0f, 1e-6);
    assert_int_equal(b.records[0].present, 0xbu);

    /* Order in the message does not matter. */
    b = decode(d, "{\"throughput_kbps\":5000,\"thr\":7,\"ts\":0,\"cell\":\"a\"}");
    assert_float_equal(b.records[0].values[3], 5.0f, 1e-6);
    b = decode(d, "{\"thr\":7,\"ts\":0,\"cell\":\"a\"}");
    assert_float_equal(b.records[0].values[3], 7.0f, 1e-6);
    cc_kpi_close(&d);

    /* Scale applies before the bounds. */
    double lo[4] = {0, 0, 0, 0}, hi[4] = {100, 100, 100, 100};
    s.min = lo;
    s.max = hi;
    d = open_dec(&s);
    expect_reason(d, "{\"cell\":\"a\",\"ts\":0,\"pmPrbUtilDl\":1.5}", CC_KPI_ABSURD_VALUE);
    cc_kpi_close(&d);

    /* Custom member names. */
    base_settings(&s);
    s.cell_field = "cell_id";
    s.ts_field = "time";
    s.kpis_field = "values";
    d = open_dec(&s);
    b = decode(d, "{\"cell_id\":\"z\",\"time\":3600,\"values\":{\"users\":1}}");
    assert_int_equal(b.n_records, 1);
    assert_int_equal(b.records[0].step, 1);
    expect_reason(d, "{\"cell\":\"z\",\"time\":3600,\"users\":1}", CC_KPI_MISSING_CELL);
    cc_kpi_close(&d);
}

static void test_open_errors(void **state)
{
    (void)state;
    CcKpiSettings s;
    CcKpiDecoder *d = NULL;
    char err[256];
    base_settings(&s);
    CcKpiMapEntry bad_name[] = {{.field = "x", .feature_name = "nope"}};
    s.map = bad_name;
    s.n_map = 1;
    assert_int_equal(cc_kpi_open(&d, &s, err, sizeof err), -22);
    assert_non_null(strstr(err, "nope"));
    assert_null(d);
    CcKpiMapEntry bad_idx[] = {{.field = "x", .feature = 4}};
    s.map = bad_idx;
    assert_int_equal(cc_kpi_open(&d, &s, err, sizeof err), -22);
    CcKpiMapEntry dup[] = {{.field = "x", .feature = 1}, {.field = "x", .feature = 2}};
    s.map = dup;
    s.n_map = 2;
    assert_int_equal(cc_kpi_open(&d, &s, err, sizeof err), -22);
    assert_non_null(strstr(err, "\"x\""));
    CcKpiMapEntry reserved[] = {{.field = "ts", .feature = 1}};
    s.map = reserved;
    s.n_map = 1;
    assert_int_equal(cc_kpi_open(&d, &s, err, sizeof err), -22);
    base_settings(&s);
    double lo[4] = {0, 0, 5, 0}, hi[4] = {1, 1, 1, 1};
    s.min = lo;
    s.max = hi;
    assert_int_equal(cc_kpi_open(&d, &s, err, sizeof err), -22);
    base_settings(&s);
    s.n_features = 0;
    assert_int_equal(cc_kpi_open(&d, &s, err, sizeof err), -22);
    base_settings(&s);
    s.step_seconds = 0;
    assert_int_equal(cc_kpi_open(&d, &s, err, sizeof err), -22);
    assert_null(d);
    cc_kpi_close(&d); /* NULL is fine */
}

static void test_cell_id_rule(void **state)
{
    (void)state;
    assert_true(cc_kpi_valid_cell_id("A-z_0.9:/", 9));
    assert_false(cc_kpi_valid_cell_id("", 0));
    assert_false(cc_kpi_valid_cell_id("a,b", 3));
    assert_false(cc_kpi_valid_cell_id("a\"b", 3));
    char s65[66];
    memset(s65, 'x', 65);
    assert_true(cc_kpi_valid_cell_id(s65, 64));
    assert_false(cc_kpi_valid_cell_id(s65, 65));
}

/* ---- the fast scanner and the reference path (jansson) give the same results ---- */

static void expect_same(CcKpiDecoder *fast, CcKpiDecoder *ref, const char *msg, size_t len)
{
    CcKpiBatch a, b;
    assert_int_equal(cc_kpi_decode(fast, msg, len, &a), 0);
    assert_int_equal(cc_kpi_decode(ref, msg, len, &b), 0);
    int same = a.n_records == b.n_records && a.n_errors == b.n_errors &&
               a.n_elements == b.n_elements && a.unmapped_fields == b.unmapped_fields &&
               a.null_values == b.null_values;
    for (int i = 0; same && i < a.n_records; i++) {
        const CcKpiRecord *x = &a.records[i], *y = &b.records[i];
        same = !strcmp(x->cell_id, y->cell_id) && x->element == y->element && x->ts == y->ts &&
               x->step == y->step && x->present == y->present &&
               !memcmp(x->values, y->values, sizeof x->values);
    }
    for (int i = 0; same && i < a.n_errors; i++)
        same = a.errors[i].reason == b.errors[i].reason &&
               a.errors[i].element == b.errors[i].element &&
               !strcmp(a.errors[i].message, b.errors[i].message);
    if (!same)
        print_error("fast and reference decoders differ on %.*s: records %d/%d errors %d/%d "
                    "(%s / %s) elements %d/%d unmapped %llu/%llu nulls %llu/%llu\n",
                    (int)len, msg, a.n_records, b.n_records, a.n_errors, b.n_errors,
                    a.n_errors ? a.errors[0].message : "-", b.n_errors ? b.errors[0].message : "-",
                    a.n_elements, b.n_elements, (unsigned long long)a.unmapped_fields,
                    (unsigned long long)b.unmapped_fields, (unsigned long long)a.null_values,
                    (unsigned long long)b.null_values);
    assert_true(same);
}

static void test_fast_path_matches_reference(void **state)
{
    (void)state;
    static const char *const msgs[] = {
        "{\"cell\":\"c1\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":41.5,\"ul_prb\":12,\"users\":7,"
        "\"thr\":3.25}}",
        "{\"cell\":\"c1\",\"ts\":\"2024-05-01T10:00:00Z\",\"dl_prb\":41.5,\"x\":\"y\",\"users\":"
        "null}",
        " [ {\"cell\" : \"a\" , \"ts\" : 1714557600123 , \"dl_prb\" : -0 } "
        ",\n\t{\"ts\":1.5e9,\"cell\":\"b/2\",\"kpis\":{\"pm\":0.25,\"dl_prb\":1}} ] \r\n",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":0.30000000000000004,\"ul_prb\":1e-"
        "400,\"users\":123456789012345678901234,\"thr\":4.9e-324}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":1e400}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":1E+2,\"ul_prb\":-2.5e-3,\"thr\":"
        "1e22,\"users\":1e23}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":9007199254740993,\"ul_prb\":0."
        "1234567890123456789012}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":1,\"dl_prb\":2}",
        "{\"cell\":\"c\",\"cell\":\"d\",\"ts\":1714557600,\"dl_prb\":1}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":1},\"kpis\":{\"ul_prb\":2}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":1,\"z\":1,\"z\":2,\"cell\":3,"
        "\"ts\":4}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"u1\":1,\"u1\":2,\"dl_prb\":1,\"kpis\":{\"users\":3}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":1},\"meta\":{\"a\":[1,2]}}",
        "{\"cell\":\"c\\u0031\",\"ts\":1714557600,\"dl_prb\":1}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"d\\u006c_prb\":1,\"ul_prb\":\"NaN\"}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":\"inf\"}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":true}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":1e300,\"ul_prb\":1}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":\"x\",\"kpis\":{\"ul_prb\":1}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"users\":null}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":[1]}",
        "{\"cell\":\"caf\xc3\xa9\",\"ts\":1714557600,\"dl_prb\":1}",
        "{\"cell\":\"c\",\"ts\":\"2024-05-01T10:00:00.999+02:00\",\"dl_prb\":1}",
        "{\"cell\":\"c\",\"ts\":\"2024-02-30T10:00:00Z\",\"dl_prb\":1}",
        "{\"cell\":\"c\",\"ts\":1714557601,\"dl_prb\":1}",
        "{\"cell\":\"c\",\"ts\":-1,\"dl_prb\":1}",
        "{\"cell\":17,\"ts\":1714557600,\"dl_prb\":1}",
        "{\"cell\":\"\",\"ts\":1714557600,\"dl_prb\":1}",
        "{\"ts\":1714557600,\"dl_prb\":1}",
        "{\"cell\":\"c\",\"dl_prb\":1}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":01}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":1.}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":.5}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":+1}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":1,}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":1} x",
        "{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":1}{}",
        "[]",
        "[1]",
        "[{}]",
        "{}",
        "\"x\"",
        "42",
        "null",
        "",
        "   ",
        "[{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":1},]",
        "[{\"cell\":\"c\",\"ts\":1714557600,\"dl_prb\":1},{\"cell\":\"d\",\"ts\":1714557600,\"dl_"
        "prb\":\"x\"}]",
        "{\"cell\":\"c\",\"ts\":1714557600,\"pm\":0.5,\"dl_prb\":7,\"t2\":5000}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":7,\"pm\":0.5,\"t2\":-5000}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":101}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"thr\":-1e10}}",
        "{\"cell\":\"c\",\"ts\":1714557600,\"kpis\":{\"a0\":1,\"a1\":1,\"a2\":1,\"a3\":1,\"a4\":1,"
        "\"a5\":1,\"a6\":1,\"a7\":1,\"a8\":1,\"a9\":1,\"b0\":1,\"b1\":1,\"b2\":1,\"b3\":1,\"b4\":1,"
        "\"b5\":1,\"b6\":1,\"b7\":1,\"b8\":1,\"b9\":1,\"c0\":1,\"c1\":1,\"c2\":1,\"c3\":1,\"c4\":1,"
        "\"c5\":1,\"c6\":1,\"c7\":1,\"c8\":1,\"c9\":1,\"d0\":1,\"d1\":1,\"d2\":1,\"d3\":1,"
        "\"users\":2}}",
    };
    static const double lo[4] = {0, 0, 0, -1e9}, hi[4] = {100, 100, 1e30, 1e9};
    CcKpiMapEntry map[] = {{.field = "pm", .feature_name = "dl_prb", .scale = 100},
                           {.field = "t2", .feature = 3, .scale = 1e-3}};
    int n = (int)(sizeof msgs / sizeof *msgs);
    for (int align = 0; align < 3; align++) {
        CcKpiSettings s;
        base_settings(&s);
        s.step_seconds = 900;
        s.align = (enum CcKpiAlign)align;
        s.map = map;
        s.n_map = 2;
        s.min = lo;
        s.max = hi;
        s.max_records = 3;
        CcKpiDecoder *fast = open_dec(&s);
        s.jansson_only = 1;
        CcKpiDecoder *ref = open_dec(&s);
        for (int i = 0; i < n; i++)
            expect_same(fast, ref, msgs[i], strlen(msgs[i]));
        /* byte mutations of every message: insert, delete, replace */
        static const char alphabet[] = "{}[],:\"\\ 0123456789.eE+-ntfaxu\x80\x01";
        uint64_t x = 0x9e3779b97f4a7c15ULL + (uint64_t)align;
        char buf[1024];
        for (int it = 0; it < 100000; it++) {
            const char *m = msgs[tl_xorshift_next(&x) % (uint64_t)n];
            size_t len = strlen(m), pos;
            memcpy(buf, m, len);
            for (int k = 1 + (int)(tl_xorshift_next(&x) % 3); k > 0; k--) {
                pos = len ? tl_xorshift_next(&x) % len : 0;
                char c = alphabet[tl_xorshift_next(&x) % (sizeof alphabet - 1)];
                switch (tl_xorshift_next(&x) % 3) {
                case 0:
                    memmove(buf + pos + 1, buf + pos, len - pos);
                    buf[pos] = c;
                    len++;
                    break;
                case 1:
                    if (len) {
                        memmove(buf + pos, buf + pos + 1, len - pos - 1);
                        len--;
                    }
                    break;
                default:
                    if (len)
                        buf[pos] = c;
                }
            }
            expect_same(fast, ref, buf, len);
        }
        CcKpiStats sf, sr;
        cc_kpi_stats(fast, &sf);
        cc_kpi_stats(ref, &sr);
        assert_int_equal(sr.fast, 0);
        print_message("align %d: %llu of %llu messages on the fast path\n", align,
                      (unsigned long long)sf.fast, (unsigned long long)sf.messages);
        assert_true(sf.fast > 1000); /* many mutations leave a valid message */
        assert_int_equal(sf.records, sr.records);
        assert_int_equal(sf.messages, sr.messages);
        for (int r = 0; r < CC_KPI_N_REASONS; r++)
            assert_int_equal(sf.invalid[r], sr.invalid[r]);
        cc_kpi_close(&fast);
        cc_kpi_close(&ref);
    }
}

static void test_fast_path_taken(void **state)
{
    (void)state;
    CcKpiSettings s;
    base_settings(&s);
    CcKpiDecoder *d = open_dec(&s);
    CcKpiStats st;
    decode(d, "{\"cell\":\"c1\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":41.5,\"users\":7}}");
    decode(d, "[{\"cell\":\"c1\",\"ts\":1714561200,\"dl_prb\":1},{\"cell\":\"c2\",\"ts\":"
              "1714561200,\"thr\":2}]");
    cc_kpi_stats(d, &st);
    assert_int_equal(st.fast, 2);
    decode(d, "{\"cell\":\"c1\",\"ts\":1714557600,\"kpis\":{\"dl_prb\":\"x\"}}"); /* refused */
    decode(d, "{\"cell\":\"c\\u0031\",\"ts\":1714557600,\"dl_prb\":1}");          /* an escape */
    cc_kpi_stats(d, &st);
    assert_int_equal(st.fast, 2);
    assert_int_equal(st.messages, 4);
    assert_int_equal(st.records, 4);
    cc_kpi_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reason_names),
        cmocka_unit_test(test_object_top_level_and_kpis),
        cmocka_unit_test(test_every_reason),
        cmocka_unit_test(test_max_abs_without_bounds),
        cmocka_unit_test(test_array_keeps_good_elements),
        cmocka_unit_test(test_timestamps),
        cmocka_unit_test(test_mapping_scale_aliases),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_cell_id_rule),
        cmocka_unit_test(test_fast_path_matches_reference),
        cmocka_unit_test(test_fast_path_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
