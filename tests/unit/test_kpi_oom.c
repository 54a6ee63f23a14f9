/*
 * test_kpi_oom.c — allocation failures in the KPI decoder (lib/cc_kpi.c) are returned as
 * -ENOMEM, leave nothing half-built, leak nothing (LeakSanitizer in the ASan build), and
 * the decoder works again afterwards. Linked with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc: the k-th allocation of our own code fails, for every k until the call
 * succeeds without reaching k. jansson (a shared library) is not wrapped.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cc_kpi.h"

#include "failalloc.h"

static const char *const NAMES[3] = {"prb", "thr", "users"};

static void settings(CcKpiSettings *s, CcKpiMapEntry *map)
{
    cc_kpi_default_settings(s);
    s->n_features = 3;
    s->feature_names = NAMES;
    map[0] = (CcKpiMapEntry){.field = "thr_kbps", .feature_name = "thr", .scale = 1000};
    map[1] = (CcKpiMapEntry){.field = "prb_pct", .feature = 0, .scale = 0.01};
    s->map = map;
    s->n_map = 2;
}

static void test_open_oom(void **state)
{
    (void)state;
    CcKpiSettings s;
    CcKpiMapEntry map[2];
    settings(&s, map);
    long k;
    for (k = 0; k < 1000; k++) {
        CcKpiDecoder *d = (CcKpiDecoder *)1;
        char err[128] = "";
        failalloc_arm(k);
        int rc = cc_kpi_open(&d, &s, err, sizeof err);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(rc, 0);
            cc_kpi_close(&d);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(d);
        assert_non_null(strstr(err, "memory"));
    }
    assert_true(k > 3 && k < 1000); /* decoder, table and names were all failed once */
}

static void test_decode_oom(void **state)
{
    (void)state;
    CcKpiSettings s;
    CcKpiMapEntry map[2];
    settings(&s, map);
    CcKpiDecoder *d = NULL;
    assert_int_equal(cc_kpi_open(&d, &s, NULL, 0), 0);
    /* 40 good records (output array grows 16 → 32 → 64) and 20 bad ones (errors grow). */
    char *buf = malloc(1 << 16);
    size_t n = 0;
    n += (size_t)sprintf(buf, "[");
    for (int i = 0; i < 60; i++)
        n += (size_t)sprintf(buf + n, "%s{\"cell\":\"c%d\",\"ts\":%d,\"%s\":%d}", i ? "," : "", i,
                             i * 3600, i % 3 == 2 ? "nothing" : "thr_kbps", i);
    n += (size_t)sprintf(buf + n, "]");
    long k;
    CcKpiBatch b;
    for (k = 0; k < 1000; k++) {
        failalloc_arm(k);
        int rc = cc_kpi_decode(d, buf, n, &b);
        failalloc_disarm();
        if (!failalloc_failed()) {
            assert_int_equal(rc, 0);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_int_equal(b.n_records, 0);
        assert_int_equal(b.n_errors, 0);
    }
    assert_true(k >= 1 && k < 1000);
    assert_int_equal(b.n_records, 40);
    assert_int_equal(b.n_errors, 20);
    assert_float_equal(b.records[1].values[1], 1000.0f, 0);
    /* Once grown, decoding the same message allocates nothing of ours. */
    failalloc_arm(0);
    assert_int_equal(cc_kpi_decode(d, buf, n, &b), 0);
    failalloc_disarm();
    assert_false(failalloc_failed());
    assert_int_equal(b.n_records, 40);
    free(buf);
    cc_kpi_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_oom),
        cmocka_unit_test(test_decode_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
