/* test_config.c — cellcastd's config table: defaults, YAML parsing of every type, errors
 * naming key, file, line and column, bounds, --set, validation, and the commented YAML
 * (conf/cellcast.yaml) parsing back to the same configuration. */
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

#include "config.h"

static int load(CcdConfig *c, const char *yaml, char *err, size_t errlen)
{
    return ccd_config_load_string(c, yaml, strlen(yaml), "t.yaml", err, errlen);
}

static void test_defaults(void **state)
{
    (void)state;
    CcdConfig c;
    assert_int_equal(ccd_config_init(&c), 0);
    assert_string_equal(c.kafka_brokers, "embedded");
    assert_int_equal(c.http_port, 8080);
    assert_string_equal(c.http_bind, "127.0.0.1");
    assert_int_equal(c.engine_kv_type, CCD_KV_F16);
    assert_int_equal(c.kafka_topics.n, 1);
    assert_string_equal(c.kafka_topics.items[0], "kpis");
    assert_int_equal(c.kafka_properties.n, 0);
    assert_int_equal(c.ingest_gap_policy, CCD_GAP_IMPUTE);
    assert_true(c.forecast_level > 0.79 && c.forecast_level < 0.81);
    assert_int_equal(c.demo_enabled, 0);
    char err[256];
    assert_int_equal(ccd_config_validate(&c, err, sizeof err), 0);
    ccd_config_free(&c);
}

static void test_every_type(void **state)
{
    (void)state;
    CcdConfig c;
    char err[512] = "";
    assert_int_equal(ccd_config_init(&c), 0);
    const char *y = "model:\n  path: /x/m.safetensors\n"
                    "kafka:\n  brokers: a:9092,b:9092\n  topics: [t1, t2]\n"
                    "  properties:\n    security.protocol: SSL\n    sasl.password: hunter2\n"
                    "    ssl.key.pem: \"-----BEGIN PRIVATE KEY-----\"\n"
                    "    sasl.oauthbearer.config: \"principal=a clientSecret=s3cr\"\n"
                    "    ssl.keystore.location: /k.p12\n    fetch.wait.max.ms: 5\n"
                    "http:\n  port: 9090\n  max_body_bytes: 2048\n"
                    "engine:\n  kv_type: bf16\n  keep_attention: no\n"
                    "ingest:\n  gap_policy: restart\n  fields:\n    dl: \"prb_dl*0.01\"\n"
                    "forecast:\n  level: 0.9\n"
                    "demo:\n"
                    "log:\n  level: debug\n";
    assert_int_equal(load(&c, y, err, sizeof err), 0);
    assert_string_equal(c.model_path, "/x/m.safetensors");
    assert_string_equal(c.kafka_brokers, "a:9092,b:9092");
    assert_int_equal(c.kafka_topics.n, 2);
    assert_string_equal(c.kafka_topics.items[1], "t2");
    assert_string_equal(ccd_strmap_get(&c.kafka_properties, "security.protocol"), "SSL");
    assert_int_equal(c.http_port, 9090);
    assert_int_equal(c.http_max_body_bytes, 2048);
    assert_int_equal(c.engine_kv_type, CCD_KV_BF16);
    assert_int_equal(c.engine_keep_attention, 0);
    assert_int_equal(c.ingest_gap_policy, CCD_GAP_RESTART);
    assert_string_equal(ccd_strmap_get(&c.ingest_fields, "dl"), "prb_dl*0.01");
    assert_true(c.forecast_level > 0.89 && c.forecast_level < 0.91);
    assert_int_equal(c.log_level, 3);
    assert_int_equal(ccd_config_validate(&c, err, sizeof err), 0);
    /* secrets are redacted in the JSON view */
    json_t *j = ccd_config_to_json(&c);
    json_t *p = json_object_get(json_object_get(j, "kafka"), "properties");
    assert_string_equal(json_string_value(json_object_get(p, "sasl.password")), "(redacted)");
    /* an allow-list: whatever is not known to be safe is hidden */
    assert_string_equal(json_string_value(json_object_get(p, "ssl.key.pem")), "(redacted)");
    assert_string_equal(json_string_value(json_object_get(p, "sasl.oauthbearer.config")),
                        "(redacted)");
    assert_string_equal(json_string_value(json_object_get(p, "ssl.keystore.location")),
                        "(redacted)");
    assert_string_equal(json_string_value(json_object_get(p, "security.protocol")), "SSL");
    assert_string_equal(json_string_value(json_object_get(p, "fetch.wait.max.ms")), "5");
    /* and in --print-config */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(ccd_config_write_yaml(&c, f), 0);
    fclose(f);
    assert_null(strstr(buf, "hunter2"));
    assert_null(strstr(buf, "PRIVATE KEY"));
    assert_null(strstr(buf, "s3cr"));
    assert_non_null(strstr(buf, "\"security.protocol\": \"SSL\""));
    free(buf);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "http"), "port")), 9090);
    json_decref(j);
    ccd_config_free(&c);
}

/* Each bad document must fail with "t.yaml:LINE:COL: key 'KEY': ..." */
static void expect_error(const char *yaml, const char *where, const char *key, const char *what)
{
    CcdConfig c;
    char err[512] = "";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_not_equal(load(&c, yaml, err, sizeof err), 0);
    if (!strstr(err, where) || (key && !strstr(err, key)) || (what && !strstr(err, what)))
        fail_msg("error '%s' lacks '%s' / '%s' / '%s'", err, where, key ? key : "",
                 what ? what : "");
    ccd_config_free(&c);
}

static void test_errors_name_key_line_column(void **state)
{
    (void)state;
    expect_error("http:\n  port: 70000\n", "t.yaml:2:9:", "'http.port'", "out of range");
    expect_error("http:\n  port: -1\n", "t.yaml:2:9:", "'http.port'", "out of range");
    expect_error("http:\n  port: eighty\n", "t.yaml:2:9:", "'http.port'", "integer");
    expect_error("http:\n  bind: x\n  prot: 9\n", "t.yaml:3:3:", "'http.prot'", "unknown key");
    expect_error("nosuch:\n  a: 1\n", "t.yaml:1:1:", "'nosuch'", "unknown key");
    expect_error("engine:\n  kv_type: f8\n", "t.yaml:2:12:", "'engine.kv_type'", "f32|f16|bf16");
    expect_error("engine:\n  keep_attention: maybe\n", "t.yaml:2:19:", "'engine.keep_attention'",
                 "true or false");
    expect_error("forecast:\n  level: 1.5\n", "t.yaml:2:10:", "'forecast.level'", "out of range");
    expect_error("http:\n  port: [1, 2]\n", "t.yaml:2:9:", "'http.port'", "single value");
    expect_error("kafka:\n  properties: [a]\n", "t.yaml:2:15:", "'kafka.properties'", "mapping");
    expect_error("kafka:\n  topics:\n    - {a: 1}\n", "t.yaml:3:7:", "'kafka.topics'", "strings");
    expect_error("http: 8080\n", "t.yaml:1:7:", "'http'", "section");
    expect_error("http:\n  port: [9\n", "t.yaml:", NULL, "YAML syntax");
    expect_error("- a\n- b\n", "t.yaml:1:1:", NULL, "mapping");
}

static void test_file_errors(void **state)
{
    (void)state;
    CcdConfig c;
    char err[512] = "", path[] = "/tmp/cc_test_config_XXXXXX";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_not_equal(ccd_config_load_file(&c, "/nonexistent/x.yaml", err, sizeof err), 0);
    assert_non_null(strstr(err, "/nonexistent/x.yaml"));
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# comment\nlimits:\n  max_cells: 0\n", f);
    fclose(f);
    assert_int_not_equal(ccd_config_load_file(&c, path, err, sizeof err), 0);
    char want[128];
    snprintf(want, sizeof want, "%s:3:14: key 'limits.max_cells'", path);
    if (!strstr(err, want))
        fail_msg("'%s' lacks '%s'", err, want);
    remove(path);
    /* a directory says so (it said "out of memory"); a FIFO is refused, not waited on */
    assert_int_not_equal(ccd_config_load_file(&c, "/tmp", err, sizeof err), 0);
    assert_non_null(strstr(err, "is a directory"));
    char fifo[] = "/tmp/cc_test_config_fifo_XXXXXX";
    assert_true(mkdtemp(fifo) != NULL);
    char fp[64];
    snprintf(fp, sizeof fp, "%s/f", fifo);
    assert_int_equal(mkfifo(fp, 0600), 0);
    assert_int_not_equal(ccd_config_load_file(&c, fp, err, sizeof err), 0);
    assert_non_null(strstr(err, "not a regular file"));
    remove(fp);
    rmdir(fifo);
    /* http.bind must be an address (or a name that resolves) */
    assert_int_equal(ccd_config_set(&c, "http.bind=999.1.1.1", err, sizeof err), 0);
    assert_int_not_equal(ccd_config_validate(&c, err, sizeof err), 0);
    assert_non_null(strstr(err, "http.bind"));
    assert_int_equal(ccd_config_set(&c, "http.bind=::", err, sizeof err), 0);
    assert_int_equal(ccd_config_validate(&c, err, sizeof err), 0);
    ccd_config_free(&c);
}

static void test_set(void **state)
{
    (void)state;
    CcdConfig c;
    char err[512] = "";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_equal(ccd_config_set(&c, "http.port=0", err, sizeof err), 0);
    assert_int_equal(c.http_port, 0);
    assert_int_equal(ccd_config_set(&c, "kafka.topics=a, b ,c", err, sizeof err), 0);
    assert_int_equal(c.kafka_topics.n, 3);
    assert_string_equal(c.kafka_topics.items[1], "b");
    assert_int_equal(ccd_config_set(&c, "kafka.properties.fetch.wait.max.ms=5", err, sizeof err),
                     0);
    assert_string_equal(ccd_strmap_get(&c.kafka_properties, "fetch.wait.max.ms"), "5");
    assert_int_equal(ccd_config_set(&c, "demo.enabled=true", err, sizeof err), 0);
    assert_int_equal(c.demo_enabled, 1);
    assert_int_not_equal(ccd_config_set(&c, "http.port=65536", err, sizeof err), 0);
    assert_non_null(strstr(err, "--set http.port"));
    assert_int_equal(c.http_port, 0);
    assert_int_not_equal(ccd_config_set(&c, "nosuch.key=1", err, sizeof err), 0);
    assert_non_null(strstr(err, "unknown key"));
    assert_int_not_equal(ccd_config_set(&c, "http.port", err, sizeof err), 0);
    assert_int_not_equal(ccd_config_set(&c, "kafka.properties=x", err, sizeof err), 0);
    ccd_config_free(&c);
}

static void test_validate(void **state)
{
    (void)state;
    CcdConfig c;
    char err[512] = "";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_equal(ccd_config_set(&c, "ingest.fields.x=prb_dl*abc", err, sizeof err), 0);
    assert_int_not_equal(ccd_config_validate(&c, err, sizeof err), 0);
    assert_non_null(strstr(err, "ingest.fields.x"));
    assert_int_equal(ccd_config_set(&c, "ingest.fields.x=prb_dl*2", err, sizeof err), 0);
    assert_int_equal(ccd_config_validate(&c, err, sizeof err), 0);
    assert_int_equal(ccd_config_set(&c, "kafka.topics=", err, sizeof err), 0);
    assert_int_not_equal(ccd_config_validate(&c, err, sizeof err), 0);
    assert_non_null(strstr(err, "kafka.topics"));
    ccd_config_free(&c);
}

/* forecast.interval_adapt (issue 12, daemon/interval.h): on by default (issue 31), its rate 0 (the
 * library's) by default, [0, 1]; a negative, NaN or > 1 rate is refused naming the key;
 * both reloadable, in GET /v1/config. */
/* validate must refuse `key=value` with a message naming the key and containing `what` */
static void expect_invalid(const char *assignment, const char *key, const char *what)
{
    CcdConfig c;
    char err[512] = "";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_equal(ccd_config_set(&c, assignment, err, sizeof err), 0);
    if (!ccd_config_validate(&c, err, sizeof err))
        fail_msg("'%s' passed validation", assignment);
    if (!strstr(err, key) || !strstr(err, what))
        fail_msg("'%s': error '%s' lacks '%s' / '%s'", assignment, err, key, what);
    ccd_config_free(&c);
}

static void expect_valid(const char *assignment)
{
    CcdConfig c;
    char err[512] = "";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_equal(ccd_config_set(&c, assignment, err, sizeof err), 0);
    if (ccd_config_validate(&c, err, sizeof err))
        fail_msg("'%s' refused: %s", assignment, err);
    ccd_config_free(&c);
}

/* hostile-input probe (issue 29): values that passed --check-config and failed later */
static void test_names_and_urls(void **state)
{
    (void)state;
    char long_topic[300] = "kafka.topics=";
    memset(long_topic + strlen(long_topic), 'a', 250);
    expect_invalid("http.advertise=ftp://x", "'http.advertise'", "not an http:// or https://");
    expect_invalid("http.advertise=http://", "'http.advertise'", "with a host");
    expect_invalid("http.advertise=http://a b:80", "'http.advertise'", "URL");
    expect_invalid("http.advertise=cellcast-2:8080", "'http.advertise'", "URL");
    expect_valid("http.advertise=http://cellcast-2.example:8080");
    expect_valid("http.advertise=https://[::1]:8443");
    expect_invalid("http.advertise=https://[::1]:8443/base", "'http.advertise'", "no path");
    expect_invalid("kafka.topics=kpis,a b", "'kafka.topics'", "not a Kafka topic name");
    expect_invalid("kafka.topics=..", "'kafka.topics'", "not a Kafka topic name");
    expect_invalid("kafka.topics=.", "'kafka.topics'", "not a Kafka topic name");
    expect_invalid("kafka.topics=k/p", "'kafka.topics'", "not a Kafka topic name");
    expect_invalid(long_topic, "'kafka.topics'", "1..249");
    long_topic[strlen("kafka.topics=") + 249] = 0; /* 249: the longest legal */
    expect_valid(long_topic);
    expect_valid("kafka.topics=Kp_1.x-y,...");
    expect_invalid("kafka.alert_topic=al%erts", "'kafka.alert_topic'", "not a Kafka topic name");
    expect_invalid("kafka.alert_topic=", "'kafka.alert_topic'", "topic name is needed");
    expect_invalid("kafka.dead_letter_topic=dl q", "'kafka.dead_letter_topic'", "topic name");
    expect_valid("kafka.dead_letter_topic=");
    expect_invalid("kafka.state_topic=st:1", "'kafka.state_topic'", "topic name");
    expect_valid("kafka.state_topic=auto");
    expect_valid("kafka.state_topic=");
    expect_invalid("cluster.members_topic=m\xc3\xa9", "'cluster.members_topic'", "topic name");
}

/* snapshot.path: a device node passed --check-config and was replaced by a regular file at
 * shutdown; a FIFO passed and the start hung reading it */
static void test_snapshot_path_kind(void **state)
{
    (void)state;
    char err[512] = "", dir[] = "/tmp/cc_test_snap_XXXXXX", p[96];
    assert_true(mkdtemp(dir) != NULL);
    snprintf(p, sizeof p, "%s/fifo", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_not_equal(ccd_snapshot_path_check(p, err, sizeof err), 0);
    assert_non_null(strstr(err, "'snapshot.path'"));
    assert_non_null(strstr(err, "a FIFO"));
    remove(p);
    assert_int_not_equal(ccd_snapshot_path_check("/dev/null", err, sizeof err), 0);
    assert_non_null(strstr(err, "a character device"));
    assert_int_not_equal(ccd_snapshot_path_check(dir, err, sizeof err), 0);
    assert_non_null(strstr(err, "a directory"));
    /* absent (made at the first snapshot), a regular file, a link to one: fine */
    assert_int_equal(ccd_snapshot_path_check(p, err, sizeof err), 0);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(ccd_snapshot_path_check(p, err, sizeof err), 0);
    char link[128];
    snprintf(link, sizeof link, "%s/link", dir);
    assert_int_equal(symlink("/dev/null", link), 0);
    assert_int_not_equal(ccd_snapshot_path_check(link, err, sizeof err), 0);
    remove(link);
    assert_int_equal(symlink(p, link), 0);
    assert_int_equal(ccd_snapshot_path_check(link, err, sizeof err), 0);
    remove(link);
    remove(p);
    rmdir(dir);
}

static void test_interval_adapt_rate(void **state)
{
    (void)state;
    CcdConfig c;
    char err[512] = "";
    assert_int_equal(ccd_config_init(&c), 0);
    assert_true(c.forecast_interval_adapt == 1 && c.forecast_interval_adapt_rate == 0);
    const CcdConfigDef *d = ccd_config_find("forecast.interval_adapt_rate");
    assert_non_null(d);
    assert_true(d->reloadable);
    d = ccd_config_find("forecast.interval_adapt");
    assert_non_null(d);
    assert_true(d->reloadable);
    assert_int_equal(load(&c, "forecast:\n  interval_adapt: true\n  interval_adapt_rate: 0.01\n",
                          err, sizeof err),
                     0);
    assert_true(c.forecast_interval_adapt == 1 && c.forecast_interval_adapt_rate == 0.01);
    assert_int_equal(ccd_config_set(&c, "forecast.interval_adapt_rate=1", err, sizeof err), 0);
    assert_true(c.forecast_interval_adapt_rate == 1);
    json_t *j = ccd_config_to_json(&c);
    assert_true(json_real_value(
                    json_object_get(json_object_get(j, "forecast"), "interval_adapt_rate")) == 1);
    json_decref(j);
    static const char *const bad[] = {"-0.01", "1.5", "nan", ".nan", "inf", "fast"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char set[64], yaml[96];
        snprintf(set, sizeof set, "forecast.interval_adapt_rate=%s", bad[i]);
        assert_int_not_equal(ccd_config_set(&c, set, err, sizeof err), 0);
        if (!strstr(err, "forecast.interval_adapt_rate") ||
            (!strstr(err, "out of range [0, 1]") && !strstr(err, "expected a number")))
            fail_msg("--set %s: unclear error '%s'", bad[i], err);
        snprintf(yaml, sizeof yaml, "forecast:\n  interval_adapt_rate: %s\n", bad[i]);
        expect_error(yaml, "t.yaml:2:24:", "'forecast.interval_adapt_rate'", NULL);
    }
    assert_true(c.forecast_interval_adapt_rate == 1); /* a refused value changes nothing */
    ccd_config_free(&c);
}

/* The generated, commented YAML parses back to the same configuration. */
static void test_yaml_round_trip(void **state)
{
    (void)state;
    CcdConfig a, b;
    char err[512] = "", *buf = NULL;
    size_t len = 0;
    assert_int_equal(ccd_config_init(&a), 0);
    assert_int_equal(ccd_config_set(&a, "kafka.properties.client.id=x \"q\"", err, sizeof err), 0);
    assert_int_equal(ccd_config_set(&a, "ingest.fields.dl_prb=prb_dl", err, sizeof err), 0);
    assert_int_equal(ccd_config_set(&a, "forecast.level=0.95", err, sizeof err), 0);
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(ccd_config_write_yaml(&a, f), 0);
    fclose(f);
    /* every key is documented */
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    for (int i = 0; i < n_defs; i++) {
        const char *dot = strchr(defs[i].name, '.');
        char key[96];
        snprintf(key, sizeof key, "\n  %s:", dot + 1);
        if (!strstr(buf, key))
            fail_msg("key %s missing from the YAML", defs[i].name);
    }
    assert_int_equal(ccd_config_init(&b), 0);
    assert_int_equal(ccd_config_load_string(&b, buf, len, "gen.yaml", err, sizeof err), 0);
    json_t *ja = ccd_config_to_json(&a), *jb = ccd_config_to_json(&b);
    assert_true(json_equal(ja, jb));
    json_decref(ja);
    json_decref(jb);
    free(buf);
    ccd_config_free(&a);
    ccd_config_free(&b);
}

/* A mapping of many keys parses in n log n (it was n^2: each key looked up on insertion);
 * a repeated key keeps its first place and its last value. Bounded by the test's timeout. */
static void test_large_map(void **state)
{
    (void)state;
    enum { N = 200000 };
    size_t cap = (size_t)N * 40 + 256, len = 0;
    char *y = malloc(cap), err[512] = "";
    assert_non_null(y);
    len += (size_t)snprintf(y + len, cap - len, "kafka:\n  properties:\n    dup: a\n");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(y + len, cap - len, "    k%d: v%d\n", i, i);
    len += (size_t)snprintf(y + len, cap - len, "    dup: b\n");
    CcdConfig c;
    assert_int_equal(ccd_config_init(&c), 0);
    assert_int_equal(ccd_config_load_string(&c, y, len, "big.yaml", err, sizeof err), 0);
    assert_int_equal(c.kafka_properties.n, N + 1);
    assert_string_equal(c.kafka_properties.items[0].key, "dup");
    assert_string_equal(c.kafka_properties.items[0].value, "b");
    assert_string_equal(c.kafka_properties.items[N].key, "k199999");
    assert_string_equal(ccd_strmap_get(&c.kafka_properties, "k12345"), "v12345");
    ccd_config_free(&c);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_type),
        cmocka_unit_test(test_errors_name_key_line_column),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_names_and_urls),
        cmocka_unit_test(test_snapshot_path_kind),
        cmocka_unit_test(test_interval_adapt_rate),
        cmocka_unit_test(test_yaml_round_trip),
        cmocka_unit_test(test_large_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
