/* test_json.c — lib/cc_json.c, the tree's one JSON string escaping (cc_json_escape): the
 * escapes, a string written in place and one that does not fit (the bounded writer writes
 * what fits, NUL-terminated, and counts what it needed), the same bytes either way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cc_json.h"

static const char in[] = "a\"b\\c\x01\x1f\n\xc3\xa9/";
static const char want[] = "\"a\\\"b\\\\c\\u0001\\u001f\\u000a\xc3\xa9/\"";

static void test_escape(void **state)
{
    (void)state;
    char out[CC_JSON_ESCAPED_MAX(sizeof in)];
    size_t k = cc_json_escape(out, in, sizeof in - 1);
    assert_int_equal(k, strlen(want) - 2);
    assert_memory_equal(out, want + 1, k);
}

static void test_fits_and_not(void **state)
{
    (void)state;
    char big[256], small[12];
    CcJsonBuf j = cc_json_buf(big, sizeof big);
    cc_json_str(&j, in);
    assert_true(cc_json_fits(&j));
    assert_string_equal(big, want);
    CcJsonBuf s = cc_json_buf(small, sizeof small);
    cc_json_str(&s, in);
    assert_false(cc_json_fits(&s));
    assert_int_equal(s.len, strlen(want)); /* what it would have needed */
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, want, sizeof small - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_fits_and_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
