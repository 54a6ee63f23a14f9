/* test_silences.c — daemon/silences (the pure part): matchers (exact, regex anchored,
 * negated, an absent label), the time range, expiry, validation errors, and the file: the
 * silences survive a reopen, a bad file is refused (a silence whose id is not one the API
 * makes too: it was cut to 39 bytes and taken); weekly windows (week boundaries, a
 * window across midnight, Sunday into Monday, a UTC offset, the range clipping them); the
 * silences of the configuration (silences.file: read-only, replaced whole, a bad file
 * changes nothing); maintenance silences (the cell's labels only); records of the silences
 * topic merged (newer wins, an expiry in the same second, echoes) and hostile ones refused. */
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
    expect_bad(s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}]}", "endsAt (required");
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

    /* the file with its first silence's id changed to one the API would not make: too long
     * (it was cut to 39 bytes), with a blank or a quote, a configuration's (cfg-) */
    assert_int_equal(ccd_silences_open(&s, NULL, err, sizeof err), 0);
    assert_int_equal(
        add(s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"y\"}],\"endsAt\":1767229200}", id2),
        0);
    json_t *one = ccd_silences_get(s, id2, NOW);
    assert_non_null(one);
    ccd_silences_close(&s);
    static const char *const bad_ids[] = {"a123456789b123456789c123456789d123456789e", "a b",
                                          "a\"b", "cfg-7", ""};
    for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
        json_object_set_new(one, "id", json_string(bad_ids[i]));
        json_t *file = json_pack("{s:[O], s:i}", "silences", one, "next_id", 5);
        assert_int_equal(json_dump_file(file, path, 0), 0);
        json_decref(file);
        s = (CcdSilences *)1;
        err[0] = 0;
        if (ccd_silences_open(&s, path, err, sizeof err) != -EINVAL)
            fail_msg("id '%s': taken", bad_ids[i]);
        assert_null(s);
        if (!strstr(err, "silence 0: id"))
            fail_msg("id '%s': error '%s'", bad_ids[i], err);
    }
    json_decref(one);
    unlink(path);
}

/* 2026-01-05 is a Monday: MON is its 00:00 UTC. */
#define MON 1767571200
#define DAY 86400

static void recurrence(CcdRecurrence *r, const char *json)
{
    char err[256] = "";
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    if (ccd_recurrence_parse(r, j, err, sizeof err))
        fail_msg("recurrence %s refused: %s", json, err);
    json_decref(j);
}

static void expect_window(const CcdRecurrence *r, int64_t t, int64_t ws, int64_t we)
{
    int64_t s = 0, e = 0;
    assert_int_equal(ccd_recurrence_window(r, t, &s, &e), 0);
    if (s != ws || e != we)
        fail_msg("at %lld: window [%lld, %lld), expected [%lld, %lld)", (long long)(t - MON),
                 (long long)(s - MON), (long long)(e - MON), (long long)(ws - MON),
                 (long long)(we - MON));
}

static void test_weekly_window(void **state)
{
    (void)state;
    CcdRecurrence r;
    /* Tuesday 02:00-04:00 UTC */
    recurrence(&r, "{\"weekly\":[{\"days\":[\"tue\"],\"start\":\"02:00\",\"end\":\"04:00\"}]}");
    expect_window(&r, MON, MON + DAY + 2 * 3600, MON + DAY + 4 * 3600);                  /* next */
    expect_window(&r, MON + DAY + 3 * 3600, MON + DAY + 2 * 3600, MON + DAY + 4 * 3600); /* in */
    expect_window(&r, MON + DAY + 2 * 3600, MON + DAY + 2 * 3600, MON + DAY + 4 * 3600); /* start */
    /* its end is not in it: the next is a week later */
    expect_window(&r, MON + DAY + 4 * 3600, MON + 8 * DAY + 2 * 3600, MON + 8 * DAY + 4 * 3600);
    /* from the week before (Sunday 23:59:59) */
    expect_window(&r, MON - 1, MON + DAY + 2 * 3600, MON + DAY + 4 * 3600);

    /* across midnight: Friday 22:00 to Saturday 03:00 */
    recurrence(&r, "{\"weekly\":[{\"days\":[\"friday\"],\"start\":\"22:00\",\"end\":\"03:00\"}]}");
    expect_window(&r, MON + 5 * DAY + 3600, MON + 4 * DAY + 22 * 3600, MON + 5 * DAY + 3 * 3600);
    expect_window(&r, MON + 5 * DAY + 3 * 3600, MON + 11 * DAY + 22 * 3600,
                  MON + 12 * DAY + 3 * 3600);

    /* Sunday 23:00 to Monday 01:00: at Monday 00:30 the window began in the week before */
    recurrence(&r, "{\"weekly\":[{\"days\":[\"sun\"],\"start\":\"23:00\",\"end\":\"01:00\"}]}");
    expect_window(&r, MON + 1800, MON - 3600, MON + 3600);
    expect_window(&r, MON + 3600, MON + 7 * DAY - 3600, MON + 7 * DAY + 3600);
    expect_window(&r, MON - 1800, MON - 3600, MON + 3600);

    /* windows that touch merge: Monday 22:00-24:00 and Tuesday 00:00-02:00 */
    recurrence(&r, "{\"weekly\":[{\"days\":[\"mon\"],\"start\":\"22:00\",\"end\":\"24:00\"},"
                   "{\"days\":[\"tue\"],\"start\":\"00:00\",\"end\":\"02:00\"}]}");
    expect_window(&r, MON + 23 * 3600, MON + 22 * 3600, MON + DAY + 2 * 3600);

    /* every day (no days) at +02:00: 01:00-02:00 local is 23:00-24:00 UTC the day before */
    recurrence(&r,
               "{\"weekly\":[{\"start\":\"01:00\",\"end\":\"02:00\"}],\"timezone\":\"+02:00\"}");
    expect_window(&r, MON + 12 * 3600, MON + 23 * 3600, MON + DAY);
    expect_window(&r, MON - 1800, MON - 3600, MON);

    /* a silence with a recurrence: active in its windows within [startsAt, endsAt) */
    CcdSilences *s;
    char err[256], id[40];
    assert_int_equal(ccd_silences_open(&s, NULL, err, sizeof err), 0);
    json_t *j = json_loads("{\"matchers\":[{\"name\":\"site\",\"value\":\"S1\"}],"
                           "\"startsAt\":\"2026-01-06T03:00:00Z\","
                           "\"endsAt\":\"2026-01-13T03:00:00Z\","
                           "\"recurrence\":{\"weekly\":[{\"days\":[\"tue\"],\"start\":\"02:00\","
                           "\"end\":\"04:00\"}],\"timezone\":\"UTC\"}}",
                           0, NULL);
    assert_int_equal(ccd_silences_add(s, j, MON, id, err, sizeof err), 0);
    json_decref(j);
    CcdSilenceLabels l = {.cell = "a1", .site = "S1"};
    assert_null(ccd_silences_match(s, &l, MON + DAY + 2 * 3600 + 1800)); /* before startsAt */
    assert_string_equal(ccd_silences_match(s, &l, MON + DAY + 3 * 3600 + 1), id);
    assert_null(ccd_silences_match(s, &l, MON + DAY + 4 * 3600)); /* between windows */
    assert_null(ccd_silences_match(s, &l, MON + 3 * DAY));
    assert_string_equal(ccd_silences_match(s, &l, MON + 8 * DAY + 2 * 3600), id);
    assert_null(ccd_silences_match(s, &l, MON + 8 * DAY + 3 * 3600)); /* endsAt */
    /* the state and the next window, clipped to the range */
    j = ccd_silences_json(s, MON + 2 * DAY);
    json_t *st = json_object_get(json_array_get(json_object_get(j, "silences"), 0), "status");
    assert_string_equal(json_string_value(json_object_get(st, "state")), "pending");
    json_t *nw = json_object_get(st, "nextWindow");
    assert_string_equal(json_string_value(json_object_get(nw, "startsAt")), "2026-01-13T02:00:00Z");
    assert_string_equal(json_string_value(json_object_get(nw, "endsAt")), "2026-01-13T03:00:00Z");
    json_decref(j);
    j = ccd_silences_json(s, MON + DAY + 3 * 3600 + 60);
    st = json_object_get(json_array_get(json_object_get(j, "silences"), 0), "status");
    assert_string_equal(json_string_value(json_object_get(st, "state")), "active");
    nw = json_object_get(st, "nextWindow");
    assert_string_equal(json_string_value(json_object_get(nw, "startsAt")), "2026-01-06T03:00:00Z");
    assert_string_equal(json_string_value(json_object_get(nw, "endsAt")), "2026-01-06T04:00:00Z");
    json_decref(j);
    assert_int_equal(ccd_silences_active(s, MON + DAY + 3 * 3600 + 60), 1);
    assert_int_equal(ccd_silences_active(s, MON + 2 * DAY), 0);

    /* no endsAt with a recurrence: it never ends */
    j = json_loads(
        "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"recurrence\":"
        "{\"weekly\":[{\"days\":[\"sat\",\"sun\"],\"start\":\"00:00\",\"end\":\"24:00\"}]}}",
        0, NULL);
    assert_int_equal(ccd_silences_add(s, j, MON, id, err, sizeof err), 0);
    json_decref(j);
    CcdSilenceLabels x = {.cell = "x"};
    assert_string_equal(ccd_silences_match(s, &x, MON + 100 * 7 * DAY + 6 * DAY), id);
    assert_null(ccd_silences_match(s, &x, MON + 100 * 7 * DAY + 4 * DAY));

    expect_bad(s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}]}", "endsAt (required");
    expect_bad(s,
               "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"recurrence\":{\"weekly\":"
               "[{\"days\":[\"tue\"],\"start\":\"2:00\",\"end\":\"04:00\"}]}}",
               "recurrence.weekly[0].start");
    expect_bad(
        s,
        "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"recurrence\":{\"weekly\":"
        "[{\"days\":[\"tuesday\",\"thu\",\"moon\"],\"start\":\"02:00\",\"end\":\"04:00\"}]}}",
        "recurrence.weekly[0].days[2]");
    expect_bad(s,
               "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"recurrence\":{\"weekly\":"
               "[{\"start\":\"02:00\",\"end\":\"02:00\"}]}}",
               "recurrence.weekly[0]: start and end");
    expect_bad(s,
               "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"recurrence\":{\"weekly\":"
               "[{\"start\":\"02:00\",\"end\":\"03:00\"}],\"timezone\":\"Europe/Paris\"}}",
               "recurrence.timezone");
    expect_bad(
        s, "{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"recurrence\":{\"weekly\":[]}}",
        "recurrence.weekly");
    ccd_silences_close(&s);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_config_silences(void **state)
{
    (void)state;
    char path[] = "/tmp/cellcast-silences-cfg-XXXXXX", err[256] = "", id[40];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "{\"silences\":[{\"id\":\"tuesday-works\",\"maintenance\":true,"
                     "\"matchers\":[{\"name\":\"site\",\"value\":\"S1\"}],\"comment\":\"planned\","
                     "\"recurrence\":{\"weekly\":[{\"days\":[\"tue\"],\"start\":\"02:00\","
                     "\"end\":\"04:00\"}]}}]}");
    CcdSilences *s, *cfg;
    assert_int_equal(ccd_silences_open(&s, NULL, err, sizeof err), 0);
    assert_int_equal(ccd_silences_config_read(&cfg, path, MON, err, sizeof err), 0);
    assert_int_equal(ccd_silences_config_swap(s, &cfg), 0);
    assert_null(cfg);
    CcdSilenceLabels l = {.cell = "a1", .site = "S1", .kind = "anomaly"};
    const char *m = ccd_silences_match(s, &l, MON + DAY + 3 * 3600);
    assert_non_null(m);
    assert_string_equal(m, "cfg-tuesday-works");
    /* read-only through the API */
    assert_int_equal(ccd_silences_expire(s, "cfg-tuesday-works", MON), -EPERM);
    /* maintenance: the cell's labels only (kind is not a cell's) */
    CcdSilenceLabels cell = {.cell = "a1", .site = "S1"};
    assert_string_equal(ccd_silences_maintenance(s, &cell, MON + DAY + 3 * 3600),
                        "cfg-tuesday-works");
    assert_null(ccd_silences_maintenance(s, &cell, MON + DAY + 5 * 3600));
    cell.site = "S2";
    assert_null(ccd_silences_maintenance(s, &cell, MON + DAY + 3 * 3600));
    /* an API silence is no maintenance unless it says so */
    json_t *j = json_loads("{\"matchers\":[{\"name\":\"site\",\"value\":\"S2\"}],"
                           "\"endsAt\":1767657600}",
                           0, NULL);
    assert_int_equal(ccd_silences_add(s, j, MON, id, err, sizeof err), 0);
    json_decref(j);
    assert_null(ccd_silences_maintenance(s, &cell, MON + 3600));
    j = json_loads("{\"matchers\":[{\"name\":\"site\",\"value\":\"S2\"},"
                   "{\"name\":\"kpi\",\"value\":\"prb\"}],\"maintenance\":true,"
                   "\"endsAt\":1767657600}",
                   0, NULL);
    assert_int_equal(ccd_silences_add(s, j, MON, id, err, sizeof err), 0);
    json_decref(j);
    assert_string_equal(ccd_silences_maintenance(s, &cell, MON + 3600), id);

    /* a bad file changes nothing: the message names the file and the entry */
    write_file(path, "{\"silences\":[{\"id\":\"a\",\"matchers\":[{\"name\":\"site\",\"value\":"
                     "\"S1\"}],\"endsAt\":1767657600},{\"id\":\"b\",\"matchers\":[]}]}");
    assert_int_equal(ccd_silences_config_read(&cfg, path, MON, err, sizeof err), -EINVAL);
    assert_null(cfg);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "silences[1]"));
    write_file(path, "{\"silences\":[{\"id\":\"a\",\"matchers\":[{\"name\":\"site\",\"value\":"
                     "\"S1\"}],\"endsAt\":1767657600},{\"id\":\"a\",\"matchers\":[{\"name\":"
                     "\"site\",\"value\":\"S1\"}],\"endsAt\":1767657600}]}");
    assert_int_equal(ccd_silences_config_read(&cfg, path, MON, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "duplicate id"));
    write_file(path, "{\"silences\":[{\"matchers\":[{\"name\":\"site\",\"value\":\"S1\"}],"
                     "\"endsAt\":1767657600}]}");
    assert_int_equal(ccd_silences_config_read(&cfg, path, MON, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "id"));
    l.site = "S1";
    assert_non_null(ccd_silences_match(s, &l, MON + DAY + 3 * 3600)); /* still there */

    /* no startsAt: always, so an end long past is an expired silence, not an error */
    write_file(path, "[{\"id\":\"old\",\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],"
                     "\"endsAt\":\"2020-01-01T00:00:00Z\"}]");
    assert_int_equal(ccd_silences_config_read(&cfg, path, MON, err, sizeof err), 0);
    json_t *old = ccd_silences_json(cfg, MON);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(old, "silences"), 0), "status"),
            "state")),
        "expired");
    json_decref(old);
    ccd_silences_close(&cfg);

    /* replaced whole: a file without it drops it, the API's stay */
    write_file(path, "[]");
    assert_int_equal(ccd_silences_config_read(&cfg, path, MON, err, sizeof err), 0);
    assert_int_equal(ccd_silences_config_swap(s, &cfg), 0);
    assert_null(ccd_silences_match(s, &l, MON + DAY + 3 * 3600));
    assert_string_equal(ccd_silences_maintenance(s, &cell, MON + 3600), id);
    /* no file configured: none */
    assert_int_equal(ccd_silences_config_read(&cfg, "", MON, err, sizeof err), 0);
    assert_int_equal(ccd_silences_config_swap(s, &cfg), 0);
    ccd_silences_close(&s);
    unlink(path);
}

static int merge(CcdSilences *s, const char *key, const char *payload, int64_t now, char *err)
{
    return ccd_silences_merge(s, key, strlen(key), payload, payload ? strlen(payload) : 0, now, err,
                              256);
}

static void test_topic_merge(void **state)
{
    (void)state;
    CcdSilences *a, *b;
    char err[256] = "", id[40];
    assert_int_equal(ccd_silences_open(&a, NULL, err, sizeof err), 0);
    assert_int_equal(ccd_silences_open(&b, NULL, err, sizeof err), 0);
    /* a member adds one; its record reaches the other, whose echo changes nothing */
    json_t *j = json_loads("{\"matchers\":[{\"name\":\"site\",\"value\":\"S1\"}],"
                           "\"endsAt\":1767657600,\"maintenance\":true}",
                           0, NULL);
    assert_int_equal(ccd_silences_add(a, j, MON, id, err, sizeof err), 0);
    json_decref(j);
    char id_b[40];
    j = json_loads("{\"matchers\":[{\"name\":\"cell\",\"value\":\"x\"}],\"endsAt\":1767657600}", 0,
                   NULL);
    assert_int_equal(ccd_silences_add(b, j, MON, id_b, err, sizeof err), 0);
    json_decref(j);
    assert_string_not_equal(id, id_b); /* both members' first silence of the same second */
    json_t *rec = ccd_silences_get(a, id, MON);
    char *text = json_dumps(rec, JSON_COMPACT);
    json_decref(rec);
    assert_int_equal(merge(b, id, text, MON + 1, err), 1);
    assert_int_equal(merge(b, id, text, MON + 2, err), 0); /* again: not newer */
    assert_int_equal(merge(a, id, text, MON + 1, err), 0); /* the echo */
    free(text);
    CcdSilenceLabels l = {.cell = "a1", .site = "S1"};
    assert_string_equal(ccd_silences_match(b, &l, MON + 60), id);
    assert_string_equal(ccd_silences_maintenance(b, &l, MON + 60), id);
    /* expired in the same second it was made: the earlier end wins the tie */
    assert_int_equal(ccd_silences_expire(a, id, MON), 0);
    rec = ccd_silences_get(a, id, MON);
    text = json_dumps(rec, JSON_COMPACT);
    json_decref(rec);
    assert_int_equal(merge(b, id, text, MON + 1, err), 1);
    free(text);
    assert_null(ccd_silences_match(b, &l, MON + 60));

    /* hostile records: refused with a reason, nothing changed */
    const char *ok = "{\"id\":\"s9-1-2\",\"matchers\":[{\"name\":\"cell\",\"value\":\"y\"}],"
                     "\"startsAt\":\"2026-01-05T00:00:00Z\",\"endsAt\":\"2026-01-06T00:00:00Z\","
                     "\"updatedAt\":\"2026-01-05T00:00:00Z\"}";
    assert_int_equal(merge(b, "s9-1-2", ok, MON, err), 1);
    struct {
        const char *key, *payload, *why;
    } bad[] = {
        {"", ok, "not a silence id"},
        {"cfg-x", ok, "not a silence id"},
        {"s9 1", ok, "not a silence id"},
        {"s9-1-3", "{nope", "not a JSON object"},
        {"s9-1-3", "[1]", "not a JSON object"},
        {"s9-1-3", ok, "its id is not its key"},
        {"s9-1-2",
         "{\"id\":\"s9-1-2\",\"source\":\"config\",\"matchers\":[{\"name\":\"cell\","
         "\"value\":\"y\"}],\"startsAt\":1,\"endsAt\":1767657600,\"updatedAt\":1767571300}",
         "only the API's"},
        {"s9-1-2",
         "{\"id\":\"s9-1-2\",\"matchers\":[{\"name\":\"cell\",\"value\":\"y\"}],"
         "\"endsAt\":1767657600,\"updatedAt\":1767571300}",
         "updatedAt and startsAt are required"},
        {"s9-1-2",
         "{\"id\":\"s9-1-2\",\"matchers\":[{\"name\":\"cell\",\"value\":\"y\"}],"
         "\"startsAt\":1,\"endsAt\":1767657600,\"updatedAt\":1777571300}",
         "an hour ahead"},
        {"s9-1-2",
         "{\"id\":\"s9-1-2\",\"matchers\":[{\"name\":\"planet\",\"value\":\"y\"}],"
         "\"startsAt\":1,\"endsAt\":1767657600,\"updatedAt\":1767571300}",
         "matchers[0]"},
        {"s9-1-2",
         "{\"id\":\"s9-1-2\",\"id\":\"s9-1-2\",\"matchers\":[{\"name\":\"cell\","
         "\"value\":\"y\"}],\"startsAt\":1,\"endsAt\":1767657600,\"updatedAt\":1767571300}",
         "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        if (merge(b, bad[i].key, bad[i].payload, MON, err) != -EINVAL || !strstr(err, bad[i].why))
            fail_msg("record %zu ('%s') not refused for '%s': %s", i, bad[i].key, bad[i].why, err);
    }
    CcdSilenceLabels y = {.cell = "y"};
    assert_string_equal(ccd_silences_match(b, &y, MON + 60), "s9-1-2"); /* unchanged */
    char *big = malloc(CCD_SILENCE_RECORD_MAX + 2);
    memset(big, ' ', CCD_SILENCE_RECORD_MAX + 1);
    big[CCD_SILENCE_RECORD_MAX + 1] = 0;
    assert_int_equal(merge(b, "s9-1-4", big, MON, err), -EINVAL);
    assert_non_null(strstr(err, "bytes, over"));
    free(big);
    assert_int_equal(merge(b, "s9-1-2", NULL, MON, err), 0); /* a tombstone: ignored */
    assert_non_null(ccd_silences_match(b, &y, MON + 60));
    ccd_silences_close(&a);
    ccd_silences_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),         cmocka_unit_test(test_file),
        cmocka_unit_test(test_weekly_window), cmocka_unit_test(test_config_silences),
        cmocka_unit_test(test_topic_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
