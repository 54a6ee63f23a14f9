/*
 * test_query.c — the API's query-string parser (daemon/query.c): bare keys (`?active`, a
 * 400 under libevent's parser), percent-decoding and '+', the refusals (empty key, %00,
 * too many pairs), first-wins lookup, and the buffer bound on inputs made of bare keys
 * (the one fuzz_query found overflowing: ASan builds of this test catch a regression).
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

#include "query.h"

static void test_pairs(void **state)
{
    (void)state;
    CcdQuery q = {0};
    assert_int_equal(ccd_query_parse(&q, "active&kind=anomaly&&cell=enb-7%2F2&x=a+b%zz&Kind=2"), 0);
    assert_int_equal(q.n, 5);
    assert_string_equal(ccd_query_find(&q, "active"), "");
    assert_string_equal(ccd_query_find(&q, "kind"), "anomaly"); /* the first wins */
    assert_string_equal(ccd_query_find(&q, "cell"), "enb-7/2");
    assert_string_equal(ccd_query_find(&q, "x"), "a b%zz");
    assert_null(ccd_query_find(&q, "nope"));
    /* the index of the pair read (the reply cache keys a reply by the pairs read): the
     * first of repeated names, whatever their case */
    assert_int_equal(ccd_query_index(&q, "KIND"), 1);
    assert_int_equal(ccd_query_index(&q, "cell"), 2);
    assert_int_equal(ccd_query_index(&q, "nope"), -1);
    ccd_query_free(&q);
}

static void test_refused(void **state)
{
    (void)state;
    CcdQuery q = {0};
    assert_int_equal(ccd_query_parse(&q, "=x"), -EINVAL);
    assert_int_equal(ccd_query_parse(&q, "a=%00"), -EINVAL);
    assert_int_equal(ccd_query_parse(&q, "%00=1"), -EINVAL);
    assert_int_equal(q.n, 0);
    assert_null(q.buf);
    char many[4 * (CCD_QUERY_MAX + 1) + 1] = "";
    for (int i = 0; i <= CCD_QUERY_MAX; i++)
        strcat(many, i ? "&a=1" : "a=1");
    assert_int_equal(ccd_query_parse(&q, many), -EINVAL);
}

static void test_bare_keys_fill_the_buffer(void **state)
{
    (void)state;
    /* one-character bare keys: each pair decodes to 3 bytes from 2 of source */
    char qs[2 * CCD_QUERY_MAX + 1] = "";
    for (int i = 0; i < CCD_QUERY_MAX; i++)
        strcat(qs, i ? "&k" : "k");
    CcdQuery q = {0};
    assert_int_equal(ccd_query_parse(&q, qs), 0);
    assert_int_equal(q.n, CCD_QUERY_MAX);
    for (int i = 0; i < q.n; i++)
        assert_true(!strcmp(q.key[i], "k") && !strcmp(q.val[i], ""));
    ccd_query_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_bare_keys_fill_the_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
