/* test_outside_text.c — text from outside on its way into outputs that require UTF-8 or one
 * line: daemon/utf8 (the strict check and the lossy JSON string), the topology file refusing
 * a name or value that is not UTF-8 text (a Latin-1 export: "Zürich" as one byte 0xfc) or
 * that holds a control character, and log lines escaping bytes that are not UTF-8 (journald
 * keeps such a line as a blob `journalctl` does not show) as it escapes control characters,
 * and Alertmanager's items keeping a value that is not UTF-8 (jansson's json_string gives NULL
 * for it: the label was dropped, and an annotation dropped the whole alert, never sent)
 * with U+FFFD in place of the bad bytes, counted; an incident's JSON (Kafka, GET /v1/incidents)
 * and GET /v1/config keeping such a value as text with U+FFFD (json_string gave NULL: the
 * whole incident was lost, logged as "out of memory"; the setting dropped from the config);
 * a backslash in a logged name escaped, so that the text "\x0a" in a name does not read as
 * an escaped newline. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "alertmanager.h"
#include "cellcastd.h"
#include "config.h"
#include "incidents.h"
#include "log.h"
#include "topology.h"
#include "utf8.h"

static void test_utf8_check(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int valid;
    } cases[] = {
        {"plain ascii", 1},
        {"Z\xc3\xbcrich", 1},    /* ü */
        {"\xe2\x82\xac", 1},     /* € */
        {"\xf0\x9f\x93\xb6", 1}, /* U+1F4F6 */
        {"\xf4\x8f\xbf\xbf", 1}, /* U+10FFFF, the last */
        {"Z\xfcrich", 0},        /* Latin-1 ü */
        {"\xc3", 0},             /* cut */
        {"\xe2\x82", 0},         /* cut */
        {"\xc0\xaf", 0},         /* overlong '/' */
        {"\xe0\x80\xaf", 0},     /* overlong '/' */
        {"\xf0\x80\x80\xaf", 0}, /* overlong '/' */
        {"\xed\xa0\x80", 0},     /* U+D800, a surrogate */
        {"\xf4\x90\x80\x80", 0}, /* U+110000 */
        {"\x80", 0},             /* a lone continuation byte */
        {"\xff", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].s);
        if (ccd_utf8_valid(cases[i].s, n) != cases[i].valid)
            fail_msg("case %zu: want %d", i, cases[i].valid);
        /* the reference: jansson's own check, the one that made json_string return NULL */
        json_t *j = json_stringn(cases[i].s, n);
        assert_int_equal(j != NULL, cases[i].valid);
        json_decref(j);
    }
}

static void test_json_text(void **state)
{
    (void)state;
    size_t bad = 99;
    json_t *j = ccd_json_text("Z\xc3\xbcrich", &bad);
    assert_non_null(j);
    assert_string_equal(json_string_value(j), "Z\xc3\xbcrich");
    assert_int_equal(bad, 0);
    json_decref(j);
    /* Latin-1 ü, a cut € at the end: each bad byte one U+FFFD, the rest kept */
    j = ccd_json_text("Z\xfcrich \xe2\x82", &bad);
    assert_non_null(j);
    assert_string_equal(json_string_value(j), "Z\xef\xbf\xbdrich \xef\xbf\xbd\xef\xbf\xbd");
    assert_int_equal(bad, 3);
    json_decref(j);
    assert_null(ccd_json_text(NULL, &bad));
}

static void test_utf8_fix(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"caf\xc3\xa9", "caf\xc3\xa9"},             /* whole: kept */
        {"caf\xc3", "caf"},                         /* a 2-byte character cut after its first */
        {"x\xe2\x82", "x"},                         /* a 3-byte one after its second */
        {"x\xf0\x9f\x93", "x"},                     /* a 4-byte one after its third */
        {"x\xf0\x9f\x93\xb6", "x\xf0\x9f\x93\xb6"}, /* whole */
        {"Z\xfcrich", "Z?rich"},                    /* a bad byte inside */
        {"Z\xfcrich \xc3", "Z?rich "},              /* both */
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[32];
        snprintf(s, sizeof s, "%s", cases[i].in);
        ccd_utf8_fix(s);
        if (strcmp(s, cases[i].out))
            fail_msg("case %zu: '%s'", i, s);
    }
}

static void expect_refused(const char *text, const char *what)
{
    CcdTopology *t = (CcdTopology *)1;
    char err[256] = "";
    int rc = ccd_topology_parse(&t, text, strlen(text), "t.csv", err, sizeof err);
    if (rc != -EINVAL)
        fail_msg("'%s': rc %d, want -EINVAL", text, rc);
    assert_null(t);
    if (!strstr(err, what))
        fail_msg("error '%s' lacks '%s'", err, what);
    /* the error is printed to the log: it must be text itself */
    if (!ccd_utf8_valid(err, strlen(err)))
        fail_msg("error '%s' is not UTF-8", err);
}

static void test_topology_text(void **state)
{
    (void)state;
    /* what a spreadsheet saved as Latin-1 gives: the file is refused, not half-used (its
     * labels would go into alert JSON on Kafka, which consumers cannot parse, and be
     * dropped by jansson from incidents and Alertmanager payloads) */
    expect_refused("cell,site\nA,Z\xfcrich\n", "t.csv:2: site value is not UTF-8");
    expect_refused("cell,r\xe9gion\nA,R1\n", "t.csv:1: column 2 name is not UTF-8");
    expect_refused("cell,site\nA\xff,S1\n", "t.csv:2: cell value is not UTF-8");
    /* control characters: a tab or an escape inside a value (the ends are trimmed) */
    expect_refused("cell,site\nA,S\t1\n", "t.csv:2: site value holds a control character");
    expect_refused("cell,site\nA,S\x1b[31m1\n", "t.csv:2: site value holds a control character");
    expect_refused("cell,si\x7fte\nA,S1\n", "t.csv:1: column 2 name holds a control character");
    /* the neighbours (ids apart by blanks, not a label) may hold a tab */
    CcdTopology *tn;
    char en[256];
    const char nb[] = "cell,neighbours\nA,B\tC\n";
    assert_int_equal(ccd_topology_parse(&tn, nb, strlen(nb), "t.csv", en, sizeof en), 0);
    ccd_topology_free(&tn);
    /* UTF-8 text is fine, and round-trips into the labels' JSON */
    CcdTopology *t;
    char err[256], buf[CCD_TOPO_LABELS_JSON_MAX];
    const char ok[] = "cell,site,b\xc3\xa4nd\nA,Z\xc3\xbcrich,n78\n";
    assert_int_equal(ccd_topology_parse(&t, ok, strlen(ok), "t.csv", err, sizeof err), 0);
    assert_string_equal(ccd_topology_label(t, "A", "site"), "Z\xc3\xbcrich");
    int n = ccd_topology_labels_json(t, "A", buf, sizeof buf);
    assert_true(n > 0);
    json_t *j = json_loadb(buf, (size_t)n, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "b\xc3\xa4nd")), "n78");
    json_decref(j);
    ccd_topology_free(&t);
}

/* What one log line wrote to stderr. */
static void log_line(char *out, size_t cap, const char *fmt, const char *arg)
{
    char path[] = "/tmp/cc_outside_text_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    ccd_log_write(CC_LOG_WARN, "test", fmt, arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, out, cap - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    out[n] = 0;
}

static void test_log_escapes(void **state)
{
    (void)state;
    unsetenv("JOURNAL_STREAM");
    char line[4096];
    /* a newline in an id cannot forge a second line */
    log_line(line, sizeof line, "cell %s refused", "x\n2026-01-01T00:00:00.000Z error  forged");
    assert_non_null(strstr(line, "cell x\\x0a2026-01-01"));
    assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1);
    /* bytes that are not UTF-8 escaped the same way; UTF-8 text kept as is */
    log_line(line, sizeof line, "site %s", "Z\xfcrich / Z\xc3\xbcrich \xe2\x82");
    assert_non_null(strstr(line, "site Z\\xfcrich / Z\xc3\xbcrich \\xe2\\x82\n"));
    assert_true(ccd_utf8_valid(line, strlen(line)));
    /* a backslash is escaped too: the text "\x0a" in a name is not an escaped newline */
    log_line(line, sizeof line, "cell %s", "a\\x0ab\n");
    assert_non_null(strstr(line, "cell a\\\\x0ab\\x0a\n"));
}

static void test_alertmanager_text(void **state)
{
    (void)state;
    Ccd d = {0};
    char err[256];
    assert_int_equal(ccd_config_init(&d.cfg), 0);
    d.cfg.alertmanager_urls.items = calloc(1, sizeof(char *));
    assert_non_null(d.cfg.alertmanager_urls.items);
    d.cfg.alertmanager_urls.items[0] = strdup("http://127.0.0.1:9/");
    d.cfg.alertmanager_urls.n = 1;
    assert_non_null(d.base = event_base_new());
    assert_int_equal(ccd_am_open(&d, err, sizeof err), 0);
    assert_non_null(d.am);
    /* an incident whose site (and so its group and summary) is not UTF-8: what reaches
     * Alertmanager if anything upstream lets such a value through */
    char site[] = "Z\xfcrich", summary[] = "site Z\xfcrich: 2 of 2 cells lost traffic";
    CcdIncident inc = {.id = "inc-1",
                       .group = site,
                       .group_scope = CCD_INC_SITE,
                       .site = site,
                       .scope = CCD_INC_SITE,
                       .firing = 1,
                       .start_ts = 1700000000,
                       .time = 1700000000};
    snprintf(inc.summary, sizeof inc.summary, "%s", summary);
    ccd_am_incident(&d, &inc);
    ccd_am_cron(&d);
    CcdAmStats st;
    ccd_am_stats(&d, &st);
    assert_int_equal(st.firing, 1);
    assert_int_equal(st.queued, 1); /* queued for the one URL: it was lost, never sent */
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.replaced, 3); /* group, site, summary */
    struct evbuffer *b = evbuffer_new();
    ccd_am_metrics(&d, b);
    size_t n = evbuffer_get_length(b);
    char *text = (char *)evbuffer_pullup(b, -1);
    static const char want[] = "\ncellcast_alertmanager_values_replaced_total 3\n";
    assert_non_null(memmem(text, n, want, sizeof want - 1));
    evbuffer_free(b);
    ccd_am_close(&d);
    event_base_free(d.base);
    ccd_config_free(&d.cfg);
}

/* An incident whose labels are not UTF-8 (if anything upstream lets such a value through):
 * its JSON is still made, the bad bytes as U+FFFD, every other field kept. */
static void test_incident_json_text(void **state)
{
    (void)state;
    char site[] = "Z\xfcrich", region[] = "Nord\xe9", cell[] = "A\xff";
    char *cells[] = {cell};
    char kpi[] = "prb\xc3", alert_id[] = "al-1";
    CcdIncMember m = {.alert_id = alert_id, .cell = cell, .kpi = kpi, .firing = 1};
    CcdIncident inc = {.id = "inc-1",
                       .group = site,
                       .group_scope = CCD_INC_SITE,
                       .site = site,
                       .region = region,
                       .scope = CCD_INC_SITE,
                       .firing = 1,
                       .start_ts = 1700000000,
                       .time = 1700000000,
                       .m = &m,
                       .n_m = 1,
                       .cells = cells,
                       .n_cells = 1};
    snprintf(inc.summary, sizeof inc.summary, "site %s: 1 of 1 cells lost traffic", site);
    size_t len = 0;
    char *s = ccd_incident_json(&inc, &len);
    assert_non_null(s); /* was NULL: the incident lost, logged as "out of memory" */
    assert_int_equal(len, strlen(s));
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "site")), "Z\xef\xbf\xbdrich");
    assert_string_equal(json_string_value(json_object_get(j, "group")), "Z\xef\xbf\xbdrich");
    assert_string_equal(json_string_value(json_object_get(j, "region")), "Nord\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_object_get(j, "summary")),
                        "site Z\xef\xbf\xbdrich: 1 of 1 cells lost traffic");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "cells"), 0)),
                        "A\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "kpis"), 0)),
                        "prb\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "alerts"), 0)), "al-1");
    assert_string_equal(json_string_value(json_object_get(j, "state")), "firing");
    json_decref(j);
}

/* GET /v1/config: a string setting that is not UTF-8 (only --set gives one: YAML is UTF-8)
 * is shown with U+FFFD, not dropped; so are a list's items and a map's values. */
static void test_config_json_text(void **state)
{
    (void)state;
    CcdConfig c;
    char err[256];
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_equal(ccd_config_set(&c, "model.path=/m/\xfc.safetensors", err, sizeof err), 0);
    assert_int_equal(ccd_config_set(&c, "kafka.topics=k\xfc,b", err, sizeof err), 0);
    assert_int_equal(
        ccd_config_set(&c, "kafka.properties.fetch.wait.max.ms=5\xfc", err, sizeof err), 0);
    json_t *j = ccd_config_to_json(&c);
    assert_non_null(j);
    json_t *p = json_object_get(json_object_get(j, "model"), "path");
    assert_non_null(p); /* was dropped */
    assert_string_equal(json_string_value(p), "/m/\xef\xbf\xbd.safetensors");
    json_t *k = json_object_get(j, "kafka"), *t = json_object_get(k, "topics");
    assert_int_equal(json_array_size(t), 2);
    assert_string_equal(json_string_value(json_array_get(t, 0)), "k\xef\xbf\xbd");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(k, "properties"), "fetch.wait.max.ms")),
        "5\xef\xbf\xbd");
    json_decref(j);
    ccd_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_check),         cmocka_unit_test(test_json_text),
        cmocka_unit_test(test_utf8_fix),           cmocka_unit_test(test_topology_text),
        cmocka_unit_test(test_log_escapes),        cmocka_unit_test(test_alertmanager_text),
        cmocka_unit_test(test_incident_json_text), cmocka_unit_test(test_config_json_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
