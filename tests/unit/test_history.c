/*
 * test_history.c — a cell's long history (lib/cc_history.c): steps and forecasts read back
 * as written (NaN = not observed, bf16 sds), the span moving past the depth, gaps and a
 * jump beyond the span forgetting old rows, chunks allocated only as steps arrive, and
 * allocation failures returned as -ENOMEM with the history still usable (linked with the
 * failing allocator).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cc_history.h"

#include "failalloc.h"

enum { F = 3, DEPTH = 100, HZ = 6 };

static void values_of(int64_t p, float *v)
{
    for (int f = 0; f < F; f++)
        v[f] = (float)(p * 10 + f);
}

static void test_roundtrip(void **state)
{
    (void)state;
    CcHistory *h;
    CcHistoryRow row;
    float v[F], m[F] = {1.5f, -2.25f, 1e9f}, s[F] = {0.1f, 3.0f, 12345.0f};
    int64_t first, last, lo;
    assert_int_equal(cc_history_open(&h, F, DEPTH, HZ), 0);
    cc_history_span(h, &first, &last, &lo);
    assert_true(first == -1 && last == -1 && lo == -1);
    assert_int_equal(cc_history_get(h, 0, &row), 0);
    values_of(1000, v);
    v[1] = NAN;
    assert_int_equal(cc_history_observe(h, 1000, v, 0), 0);
    assert_int_equal(cc_history_forecast(h, 1001, CC_HISTORY_ONE_STEP, m, s), 0);
    assert_int_equal(cc_history_forecast(h, 1006, CC_HISTORY_HORIZON_END, m, s), 0);
    cc_history_span(h, &first, &last, &lo);
    assert_true(first == 1000 && last == 1006 && lo == 1000);
    assert_int_equal(cc_history_get(h, 1000, &row), 1);
    assert_true(row.observed && !row.imputed && !row.have_fc[0] && !row.have_fc[1]);
    assert_true(row.values[0] == 10000.0f && isnan(row.values[1]) && row.values[2] == 10002.0f);
    assert_true(isnan(row.mean[0][0]) && isnan(row.sd[1][2]));
    assert_int_equal(cc_history_get(h, 1001, &row), 1);
    assert_true(!row.observed && row.have_fc[0] && !row.have_fc[1] && isnan(row.values[0]));
    for (int f = 0; f < F; f++) {
        assert_true(row.mean[0][f] == m[f]);                      /* f32 */
        assert_true(fabsf(row.sd[0][f] - s[f]) <= s[f] / 256.0f); /* bf16 */
    }
    assert_int_equal(cc_history_get(h, 1006, &row), 1);
    assert_true(row.have_fc[1] && !row.have_fc[0] && row.mean[1][2] == 1e9f);
    assert_int_equal(cc_history_get(h, 1003, &row), 0); /* nothing recorded */
    /* an imputed step, then the same step observed again */
    assert_int_equal(cc_history_observe(h, 1001, v, 1), 0);
    assert_int_equal(cc_history_get(h, 1001, &row), 1);
    assert_true(row.observed && row.imputed && row.have_fc[0]);
    assert_int_equal(cc_history_observe(h, 1001, v, 0), 0);
    assert_int_equal(cc_history_get(h, 1001, &row), 1);
    assert_true(row.observed && !row.imputed);
    assert_int_equal(cc_history_observe(h, -1, v, 0), -EINVAL);
    assert_int_equal(cc_history_forecast(h, 5, (enum CcHistoryFc)2, m, s), -EINVAL);
    cc_history_close(&h);
    assert_null(h);
    cc_history_close(&h);
    assert_int_equal(cc_history_open(&h, 0, DEPTH, HZ), -EINVAL);
    assert_int_equal(cc_history_open(&h, F, 0, HZ), -EINVAL);
    assert_int_equal(cc_history_open(&h, CC_HISTORY_MAX_F + 1, DEPTH, HZ), -EINVAL);
}

/* Past depth + horizon steps the oldest rows go; a jump past the whole span forgets all. */
static void test_span_moves(void **state)
{
    (void)state;
    CcHistory *h;
    CcHistoryRow row;
    float v[F];
    int64_t first, last, lo;
    assert_int_equal(cc_history_open(&h, F, DEPTH, HZ), 0);
    for (int64_t p = 0; p < 1000; p++) {
        values_of(p, v);
        assert_int_equal(cc_history_observe(h, p, v, 0), 0);
    }
    cc_history_span(h, &first, &last, &lo);
    assert_true(last == 999 && lo == 999 && first == 999 - (DEPTH + HZ) + 1);
    for (int64_t p = first; p <= last; p++) {
        assert_int_equal(cc_history_get(h, p, &row), 1);
        assert_true(row.values[2] == (float)(p * 10 + 2));
    }
    assert_int_equal(cc_history_get(h, first - 1, &row), 0);
    values_of(0, v);
    assert_int_equal(cc_history_observe(h, first - 1, v, 0), 0); /* too old: ignored */
    assert_int_equal(cc_history_get(h, first - 1, &row), 0);
    /* a gap of 10: the skipped rows read as absent, not as the old steps of their slots */
    assert_int_equal(cc_history_observe(h, 1010, v, 0), 0);
    for (int64_t p = 1000; p < 1010; p++)
        assert_int_equal(cc_history_get(h, p, &row), 0);
    assert_int_equal(cc_history_get(h, 1010, &row), 1);
    assert_int_equal(cc_history_get(h, 999, &row), 1);
    /* a jump past the span */
    assert_int_equal(cc_history_observe(h, 5000, v, 0), 0);
    cc_history_span(h, &first, &last, &lo);
    assert_true(last == 5000 && first == 5000 - (DEPTH + HZ) + 1);
    for (int64_t p = first; p < 5000; p++)
        assert_int_equal(cc_history_get(h, p, &row), 0);
    cc_history_clear(h);
    cc_history_span(h, &first, &last, &lo);
    assert_true(first == -1 && last == -1 && lo == -1);
    assert_int_equal(cc_history_get(h, 5000, &row), 0);
    cc_history_close(&h);
}

/* A cell that saw one step holds one chunk; a full one every chunk, and no more. */
static void test_lazy_bytes(void **state)
{
    (void)state;
    CcHistory *h;
    float v[F] = {1, 2, 3};
    assert_int_equal(cc_history_open(&h, 8, 672, 24), 0);
    size_t empty = cc_history_bytes(h), full = cc_history_full_bytes(8, 672, 24);
    float v8[8] = {0};
    assert_int_equal(cc_history_observe(h, 77, v8, 0), 0);
    size_t one = cc_history_bytes(h);
    assert_int_equal(one - empty, CC_HISTORY_CHUNK * (4 + 16 * 8));
    for (int64_t p = 78; p < 78 + 2000; p++)
        assert_int_equal(cc_history_observe(h, p, v8, 0), 0);
    assert_int_equal(cc_history_bytes(h), full);
    assert_true(full < 100 * 1024); /* docs: ~92 KB per cell of 8 KPIs for 7 days of 15 min */
    cc_history_close(&h);
    (void)v;
}

/* Saved and loaded back row for row; malformed bytes are refused and leave it empty. */
static void test_save_load(void **state)
{
    (void)state;
    CcHistory *a, *b, *other;
    CcHistoryRow ra, rb;
    float v[F], m[F] = {1, 2, 3}, s[F] = {0.5f, 0.25f, 4};
    assert_int_equal(cc_history_open(&a, F, DEPTH, HZ), 0);
    assert_int_equal(cc_history_open(&b, F, DEPTH, HZ), 0);
    assert_int_equal(cc_history_open(&other, F, DEPTH + 1, HZ), 0);
    for (int64_t p = 500; p < 700; p += (p % 7 ? 1 : 3)) { /* gaps */
        values_of(p, v);
        v[p % F] = NAN;
        assert_int_equal(cc_history_observe(a, p, v, p % 5 == 0), 0);
        assert_int_equal(cc_history_forecast(a, p + 1, CC_HISTORY_ONE_STEP, m, s), 0);
        assert_int_equal(cc_history_forecast(a, p + HZ, CC_HISTORY_HORIZON_END, m, s), 0);
    }
    size_t n = cc_history_save_size(a);
    uint8_t *buf = malloc(n), *bad = malloc(n);
    assert_int_equal(cc_history_save(a, buf, n - 1), 0);
    assert_int_equal(cc_history_save(a, buf, n), n);
    assert_int_equal(cc_history_load(b, buf, n), 0);
    int64_t fa, la, oa, fb, lb, ob;
    cc_history_span(a, &fa, &la, &oa);
    cc_history_span(b, &fb, &lb, &ob);
    assert_true(fa == fb && la == lb && oa == ob);
    for (int64_t p = fa; p <= la; p++) {
        int ga = cc_history_get(a, p, &ra), gb = cc_history_get(b, p, &rb);
        assert_int_equal(ga, gb);
        assert_memory_equal(&ra, &rb, sizeof ra.observed * 4);
        assert_memory_equal(ra.values, rb.values, F * sizeof(float));
        for (int k = 0; k < 2; k++) {
            assert_memory_equal(ra.mean[k], rb.mean[k], F * sizeof(float));
            assert_memory_equal(ra.sd[k], rb.sd[k], F * sizeof(float));
        }
    }
    assert_int_equal(cc_history_load(other, buf, n), -EINVAL); /* another depth */
    assert_int_equal(cc_history_load(b, buf, n - 1), -EINVAL);
    cc_history_span(b, &fb, &lb, &ob);
    assert_true(fb == -1 && lb == -1);
    /* every single-byte corruption of the header or the first row is refused or loads a
     * history that reads back without crashing */
    for (size_t i = 0; i < 48 + 8 + 4 + 16 * F && i < n; i++) {
        memcpy(bad, buf, n);
        bad[i] ^= 0x80;
        if (!cc_history_load(b, bad, n))
            for (int64_t p = 0; p < 800; p++)
                cc_history_get(b, p, &rb);
    }
    /* a row out of order */
    memcpy(bad, buf, n);
    int64_t step = 0;
    memcpy(bad + 44 + 8 + 16 * F + 4, &step, 8);
    assert_int_equal(cc_history_load(b, bad, n), -EINVAL);
    free(buf);
    free(bad);
    cc_history_close(&a);
    cc_history_close(&b);
    cc_history_close(&other);
}

static void test_oom(void **state)
{
    (void)state;
    CcHistory *h = NULL;
    float v[F] = {1, 2, 3};
    int rc;
    for (long k = 0;; k++) {
        failalloc_arm(k);
        rc = cc_history_open(&h, F, DEPTH, HZ);
        failalloc_disarm();
        if (!failalloc_failed())
            break;
        assert_int_equal(rc, -ENOMEM);
        assert_null(h);
    }
    assert_int_equal(rc, 0);
    failalloc_arm(0);
    assert_int_equal(cc_history_observe(h, 10, v, 0), -ENOMEM);
    failalloc_arm(0);
    assert_int_equal(cc_history_forecast(h, 11, CC_HISTORY_ONE_STEP, v, v), -ENOMEM);
    failalloc_disarm();
    CcHistoryRow row;
    int64_t first, last, lo;
    cc_history_span(h, &first, &last, &lo);
    assert_true(first == -1 && last == -1); /* nothing recorded */
    assert_int_equal(cc_history_observe(h, 10, v, 0), 0);
    assert_int_equal(cc_history_get(h, 10, &row), 1);
    cc_history_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),  cmocka_unit_test(test_span_moves),
        cmocka_unit_test(test_lazy_bytes), cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
