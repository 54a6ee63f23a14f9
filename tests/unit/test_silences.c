/* test_silences.c — daemon/silences (the pure part): matchers (exact, regex anchored,
 * negated, an absent label), the time range, expiry, validation errors, and the file: the
 * silences survive a reopen, a bad file is refused. */
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
#include <jansson.h>

#include "silences.h"

#define NOW 1767225600 /* 2026-01-01T00:00:00Z */

static int add(CcdSilences *s, const char *json, char *id)
{
    char err[256];
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    int rc = ccd_silences_add(s, j, NOW, id, err, sizeof err);
    json_decref(j);
    return rc;
}

static void expect_bad(CcdSilences *s, const char *json, const char *what)
{
    char err[256] = "", id[40];
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    assert_int_equal(ccd_silences_add(s, j, NOW, id, err, sizeof err), -EINVAL);
    json_decref(j);
    if (!strstr(err, what))
        fail_msg("error '%s' lacks '%s'", err, what);
}

static void test_match(void **state)
{
    (void)state;
    CcdSilences *s;
    char err[256], id1[40], id2[40];
    assert_int_equal(ccd_silences_open(&s, NULL, err, sizeof err), 0);
    /* site S1, any anomaly, for an hour */
    assert_int_equal(add(s,
                         "{\"matchers\":[{\"name\":\"site\",\"value\":\"S1\"},"
                         "{\"name\":\"kind\",\"value\":\"anomaly\"}],"
                         "\"endsAt\":\"2026-01-01T01:00:00Z\",\"createdBy\":\"noc\"}",
                         id1),
                     0);
    /* cells b1..b3 by regex, not the kpi thr, from 00:30 to 02:00 */
    assert_int_equal(add(s,
                         "{\"matchers\":[{\"name\":\"cell\",\"value\":\"b[1-3]\",\"isRegex\":true},"
                         "{\"name\":\"kpi\",\"value\":\"thr\",\"isEqual\":false}],"
                         "\"startsAt\":\"2026-01-01T00:30:00Z\",\"endsAt\":1767232800}",
                         id2),
                     0);
    assert_string_not_equal(id1, id2);
    CcdSilenceLabels a = {.cell = "a1", .site = "S1", .kind = "anomaly", .reason = "none"};
    assert_string_equal(ccd_silences_match(s, &a, NOW), id1);
    assert_null(ccd_silences_match(s, &a, NOW + 3600)); /* ended */
    a.kind = "data_quality";
    assert_null(ccd_silences_match(s, &a, NOW)); /* another kind */
    CcdSilenceLabels b = {.cell = "b2", .site = "S2", .kind = "anomaly", .kpi = NULL};
    assert_null(ccd_silences_match(s, &b, NOW));                     /* not started */
    assert_string_equal(ccd_silences_match(s, &b, NOW + 1800), id2); /* kpi absent: != thr */
    b.kpi = "thr";
    assert_null(ccd_silences_match(s, &b, NOW + 1800));
    b.kpi = "prb";
    b.cell = "b22"; /* anchored: b[1-3] is not a prefix match */
    assert_null(ccd_silences_match(s, &b, NOW + 1800));
    assert_int_equal(ccd_silences_active(s, NOW + 1800), 2);

    /* expire: the first ends now; a pending one expires without being active */
    assert_int_equal(ccd_silences_expire(s, id1, NOW + 60), 0);
    b.cell = "b1";
    assert_int_equal(ccd_silences_expire(s, id2, NOW + 60), 0);
    assert_null(ccd_silences_match(s, &b, NOW + 1800));
    assert_int_equal(ccd_silences_expire(s, "nope", NOW), -ENOENT);
    json_t *j = ccd_silences_json(s, NOW + 120);
    json_t *arr = json_object_get(j, "silences");
    assert_int_equal(json_array_size(arr), 2);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(arr, i), "status"), "state")),
                            "expired");
    json_decref(j);

    expect_bad(s, "{\"endsAt\":1767229200}", "matchers must be");
    expect_bad(s, "{\"matchers\":[{\"name\":\"planet\",\"value\":\"x\"}],\"endsAt\":1767229200}",
               "matchers[0]: name must be one of");
    expect_bad(s,
               "{\"matchers\":[{\"name\":\"cell\",\"value\":\"(\",\"isRegex\":true}],"
               "\"endsAt\":1767229200}",
               "bad regex");
    expect_bad(s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}]}", "endsAt (required)");
    expect_bad(s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"endsAt\":\"tomorrow\"}",
               "RFC 3339");
    expect_bad(s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"endsAt\":1767225000}",
               "endsAt must be after startsAt");
    ccd_silences_close(&s);
}

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/cellcast-silences-XXXXXX", err[256], id[40];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path); /* absent: an empty list */
    CcdSilences *s;
    assert_int_equal(ccd_silences_open(&s, path, err, sizeof err), 0);
    assert_int_equal(add(s,
                         "{\"matchers\":[{\"name\":\"region\",\"value\":\"R.*\",\"isRegex\":true}],"
                         "\"endsAt\":\"2026-01-02T00:00:00Z\",\"comment\":\"planned work\"}",
                         id),
                     0);
    ccd_silences_close(&s);
    assert_int_equal(ccd_silences_open(&s, path, err, sizeof err), 0);
    CcdSilenceLabels l = {.cell = "x", .region = "R7"};
    assert_string_equal(ccd_silences_match(s, &l, NOW + 100), id);
    char id2[40];
    assert_int_equal(
        add(s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"y\"}],\"endsAt\":1767229200}", id2),
        0);
    assert_string_not_equal(id, id2); /* ids go on after a reopen */
    ccd_silences_close(&s);

    FILE *f = fopen(path, "w");
    fputs("{\"silences\": 3}", f);
    fclose(f);
    assert_int_equal(ccd_silences_open(&s, path, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a silences file"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
