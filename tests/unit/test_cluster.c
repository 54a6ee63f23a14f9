/*
 * test_cluster.c — daemon/cluster.c without a daemon:
 *  - ccd_partition_of_key agrees with where a librdkafka producer configured with the same
 *    `partitioner` puts keyed messages (delivery reports from librdkafka's mock cluster),
 *    for every kafka.partitioner and several partition counts; Java's murmur2 on known keys;
 *  - the identity defaults (client id from instance or host name and port, static
 *    membership from cluster.instance, advertise from the bind address) and that they reach
 *    the consumer and producer properties;
 *  - the partition → member map from member records: fresh claims route, stale ones and
 *    tombstones do not, invalid records are counted, other groups ignored.
 * (~2 s.)
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "cluster.h"
#include "kafka_mock.h"
#include "testlib.h"

typedef struct Delivered {
    int32_t partition[5 * 16];
    int n;
} Delivered;

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    Delivered *d = opaque;
    assert_int_equal(m->err, 0);
    int i = (int)(intptr_t)m->_private;
    d->partition[i] = m->partition;
    d->n++;
}

static const char *const keys[] = {
    "c-1", "c-2/a", "17", "cell.x", "c:5", "site-042:sector-3", "a", "ENB_123456_1", "x.y.z", "0"};
#define N_KEYS (int)(sizeof keys / sizeof *keys)

static void test_partitioners_match_librdkafka(void **state)
{
    (void)state;
    char e[512];
    KafkaMock *mock = kafka_mock_open("3", NULL, 0);
    static const int counts[] = {1, 3, 4, 12, 50};
    for (int ci = 0; ci < 5; ci++) {
        char topic[32];
        snprintf(topic, sizeof topic, "t%d", counts[ci]);
        assert_int_equal(rd_kafka_mock_topic_create(mock->mc, topic, counts[ci], 1), 0);
    }
    int checked = 0, spread = 0;
    for (int p = 0; p < CCD_PART_COUNT; p++) {
        Delivered d = {0};
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", mock->bootstrap, e, sizeof e),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(
            rd_kafka_conf_set(conf, "partitioner", ccd_partitioner_name(p), e, sizeof e),
            RD_KAFKA_CONF_OK);
        rd_kafka_conf_set(conf, "linger.ms", "0", NULL, 0);
        rd_kafka_conf_set_dr_msg_cb(conf, dr);
        rd_kafka_conf_set_opaque(conf, &d);
        rd_kafka_t *prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
        assert_non_null(prod);
        for (int ci = 0; ci < 5; ci++) {
            char topic[32];
            snprintf(topic, sizeof topic, "t%d", counts[ci]);
            for (int k = 0; k < N_KEYS; k++)
                assert_int_equal(
                    rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(topic),
                                      RD_KAFKA_V_KEY(keys[k], strlen(keys[k])),
                                      RD_KAFKA_V_VALUE("{}", 2),
                                      RD_KAFKA_V_OPAQUE((void *)(intptr_t)(ci * N_KEYS + k)),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                    0);
        }
        assert_int_equal(rd_kafka_flush(prod, 10000), 0);
        assert_int_equal(d.n, 5 * N_KEYS);
        for (int ci = 0; ci < 5; ci++) {
            int distinct = 0;
            const int32_t *got = &d.partition[ci * N_KEYS];
            for (int k = 0; k < N_KEYS; k++) {
                int32_t mine = ccd_partition_of_key(p, keys[k], strlen(keys[k]), counts[ci]);
                if (mine != got[k])
                    fail_msg("partitioner %s, %d partitions, key '%s': ours %d, librdkafka %d",
                             ccd_partitioner_name(p), counts[ci], keys[k], mine, got[k]);
                checked++;
                distinct += k && got[k] != got[0];
            }
            spread += distinct > 0;
        }
        rd_kafka_destroy(prod);
    }
    assert_int_equal(checked, CCD_PART_COUNT * 5 * N_KEYS);
    assert_true(spread >= CCD_PART_COUNT * 4); /* keys really spread where n > 1 */
    assert_int_equal(ccd_partition_of_key(CCD_PART_MURMUR2, "", 0, 4), -1);
    assert_int_equal(ccd_partition_of_key(CCD_PART_MURMUR2, "a", 1, 0), -1);
    assert_int_equal(ccd_partition_of_key(CCD_PART_COUNT, "a", 1, 4), -1);
    assert_null(ccd_partitioner_name(CCD_PART_COUNT));
    kafka_mock_close(mock);
}

/* Java's default partitioner: toPositive(Utils.murmur2(key)) % n; the hashes are the
 * vectors of Kafka's UtilsTest.testMurmur2. With n = 2^31 - 1 the partition is the hash. */
static void test_murmur2_is_javas(void **state)
{
    (void)state;
    static const struct {
        const char *key;
        int32_t java;
    } v[] = {{"21", -973932308}, {"foobar", -790332482}, {"abc", 479470107}};
    for (int i = 0; i < 3; i++) {
        int32_t want = (int32_t)((uint32_t)v[i].java & 0x7fffffff) % INT32_MAX;
        assert_int_equal(
            ccd_partition_of_key(CCD_PART_MURMUR2, v[i].key, strlen(v[i].key), INT32_MAX), want);
        assert_int_equal(
            ccd_partition_of_key(CCD_PART_MURMUR2_RANDOM, v[i].key, strlen(v[i].key), INT32_MAX),
            want);
    }
}

static void config(CcdConfig *c) { assert_int_equal(ccd_config_init(c), 0); }

static void set(char **field, const char *v)
{
    free(*field);
    *field = strdup(v);
}

static void test_identity(void **state)
{
    (void)state;
    char host[256] = "", want[512], err[256];
    gethostname(host, sizeof host - 1);
    CcdConfig c;
    CcdClusterIdentity id;
    config(&c);
    /* defaults: host name and port; loopback bind; dynamic membership */
    assert_int_equal(ccd_cluster_identity(&c, 8123, &id, err, sizeof err), 0);
    snprintf(want, sizeof want, "cellcastd-%s-8123", host);
    assert_string_equal(id.client_id, want);
    assert_string_equal(id.group_instance_id, "");
    assert_string_equal(id.advertise, "http://127.0.0.1:8123");
    /* an instance name: in the client id, and static membership by default */
    set(&c.cluster_instance, "cc-2");
    set(&c.http_bind, "0.0.0.0");
    assert_int_equal(ccd_cluster_identity(&c, 9000, &id, err, sizeof err), 0);
    assert_string_equal(id.client_id, "cellcastd-cc-2-9000");
    assert_string_equal(id.group_instance_id, "cc-2");
    snprintf(want, sizeof want, "http://%s:9000", host);
    assert_string_equal(id.advertise, want);
    set(&c.http_bind, "::1");
    assert_int_equal(ccd_cluster_identity(&c, 9000, &id, err, sizeof err), 0);
    assert_string_equal(id.advertise, "http://[::1]:9000");
    /* explicit keys win; advertise loses its trailing slash */
    set(&c.kafka_client_id, "edge-7");
    set(&c.kafka_group_instance_id, "edge-7-static");
    set(&c.http_advertise, "https://cellcast-7.example.net/");
    assert_int_equal(ccd_cluster_identity(&c, 9000, &id, err, sizeof err), 0);
    assert_string_equal(id.client_id, "edge-7");
    assert_string_equal(id.group_instance_id, "edge-7-static");
    assert_string_equal(id.advertise, "https://cellcast-7.example.net");
    static const char *const bad_adv[] = {"cellcast-7:8080", "http://gw/cellcast",
                                          "http://user@gw:80", "http://gw:80\r\nX: y"};
    for (int i = 0; i < 4; i++) {
        set(&c.http_advertise, bad_adv[i]);
        assert_int_equal(ccd_cluster_identity(&c, 9000, &id, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, "http.advertise"));
    }
    ccd_config_free(&c);

    /* kafka.properties.client.id is the default when kafka.client_id is empty; the module
     * hands client.id, group.instance.id and the partitioner to librdkafka */
    config(&c);
    assert_int_equal(ccd_config_set(&c, "kafka.properties.client.id=legacy", err, sizeof err), 0);
    assert_int_equal(ccd_config_set(&c, "cluster.instance=n1", err, sizeof err), 0);
    assert_int_equal(ccd_config_set(&c, "kafka.partitioner=fnv1a", err, sizeof err), 0);
    CcdKafkaSettings ks;
    ccd_kafka_default_settings(&ks);
    CcdKafkaProp given[] = {{"client.id", "legacy"}};
    ks.props = given;
    ks.n_props = 1;
    CcdCluster *cl;
    assert_int_equal(ccd_cluster_open(&cl, &c, 8080, &ks, err, sizeof err), 0);
    assert_int_equal(ks.n_props, 3);
    assert_string_equal(ks.props[1].name, "client.id");
    assert_string_equal(ks.props[1].value, "legacy");
    assert_string_equal(ks.props[2].name, "group.instance.id");
    assert_string_equal(ks.props[2].value, "n1");
    assert_int_equal(ks.n_producer_props, 2);
    assert_string_equal(ks.producer_props[0].name, "partitioner");
    assert_string_equal(ks.producer_props[0].value, "fnv1a");
    json_t *j = ccd_cluster_json(cl);
    assert_string_equal(json_string_value(json_object_get(j, "self")), "legacy");
    assert_string_equal(json_string_value(json_object_get(j, "group_state")), "unknown");
    json_decref(j);
    ccd_cluster_close(&cl, 0);
    assert_null(cl);
    ccd_config_free(&c);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int record(CcdCluster *cl, const char *key, const char *group, const char *addr,
                  const char *parts, int64_t ts)
{
    char v[1024];
    snprintf(v, sizeof v,
             "{\"v\":1,\"group_id\":\"%s\",\"client_id\":\"%s\",\"member_id\":\"m-%s\","
             "\"group_instance_id\":\"\",\"address\":\"%s\",\"topic\":\"kpis\","
             "\"partition_count\":4,\"partitions\":[%s],\"protocol\":\"EAGER\","
             "\"heartbeat_ms\":1000,\"ts_ms\":%lld}",
             group, key, key, addr, parts, (long long)ts);
    return ccd_cluster_record(cl, key, strlen(key), v, strlen(v));
}

/* A key whose murmur2 partition among 4 is `want`. */
static const char *key_on(int32_t want, char *buf, size_t n)
{
    for (int i = 0;; i++) {
        snprintf(buf, n, "cell-%d", i);
        if (ccd_partition_of_key(CCD_PART_MURMUR2_RANDOM, buf, strlen(buf), 4) == want)
            return buf;
    }
}

static void test_owner_map(void **state)
{
    (void)state;
    char err[256], k0[32], k2[32];
    CcdConfig c;
    config(&c);
    CcdKafkaSettings ks;
    ccd_kafka_default_settings(&ks);
    CcdCluster *cl;
    assert_int_equal(ccd_cluster_open(&cl, &c, 8080, &ks, err, sizeof err), 0);
    int32_t p;
    const char *addr;
    key_on(0, k0, sizeof k0);
    key_on(2, k2, sizeof k2);
    /* nothing known: no partition count, no other member: alone (answers as one daemon) */
    assert_int_equal(ccd_cluster_owner(cl, k2, &p, &addr), CCD_OWNER_ALONE);
    assert_int_equal(p, -1);
    int64_t t = now_ms();
    assert_int_equal(record(cl, "b", "cellcastd", "http://b:1", "2,3", t), 0);
    assert_int_equal(record(cl, "old", "cellcastd", "http://old:1", "0,1", t - 60000), 0);
    assert_int_equal(record(cl, "x", "other-group", "http://x:1", "0", t), 0);
    assert_int_equal(ccd_cluster_owner(cl, k2, &p, &addr), CCD_OWNER_OTHER);
    assert_int_equal(p, 2);
    assert_string_equal(addr, "http://b:1");
    /* the stale member and the other group's member own nothing */
    assert_int_equal(ccd_cluster_owner(cl, k0, &p, &addr), CCD_OWNER_UNKNOWN);
    assert_int_equal(p, 0);
    /* a newer claim wins (a rebalance moved partition 2 to c) */
    assert_int_equal(record(cl, "c", "cellcastd", "http://c:1", "2", t + 5), 0);
    assert_int_equal(ccd_cluster_owner(cl, k2, &p, &addr), CCD_OWNER_OTHER);
    assert_string_equal(addr, "http://c:1");
    json_t *j = ccd_cluster_json(cl);
    assert_int_equal(json_array_size(json_object_get(j, "members")), 3); /* self, b, c */
    assert_string_equal(json_string_value(json_object_get(j, "group_state")), "rebalancing");
    json_decref(j);
    /* tombstones; with only a stale record left the member is alone again */
    assert_int_equal(ccd_cluster_record(cl, "c", 1, NULL, 0), 0);
    assert_int_equal(ccd_cluster_owner(cl, k2, &p, &addr), CCD_OWNER_OTHER);
    assert_string_equal(addr, "http://b:1");
    assert_int_equal(ccd_cluster_record(cl, "b", 1, NULL, 0), 0);
    assert_int_equal(ccd_cluster_owner(cl, k2, &p, &addr), CCD_OWNER_ALONE);
    /* invalid records are refused and counted */
    static const char *const bad[] = {"{", "[]", "{\"v\":1}",
                                      "{\"v\":1,\"group_id\":\"cellcastd\",\"client_id\":\"z\","
                                      "\"member_id\":\"\",\"group_instance_id\":\"\",\"address\":"
                                      "\"ftp://z\",\"topic\":\"kpis\",\"partition_count\":4,"
                                      "\"partitions\":[1],\"protocol\":\"EAGER\","
                                      "\"heartbeat_ms\":1000,\"ts_ms\":5}"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(ccd_cluster_record(cl, "z", 1, bad[i], strlen(bad[i])), -EINVAL);
    assert_int_equal(record(cl, "z", "cellcastd", "http://z:1", "1,-1", t), -EINVAL);
    assert_int_equal(record(cl, "", "cellcastd", "http://z:1", "1", t), -EINVAL);
    j = ccd_cluster_json(cl);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "records"), "invalid")),
                     6);
    json_decref(j);
    ccd_cluster_close(&cl, 0);
    ccd_config_free(&c);
}

/* The members topic is writable by whoever the brokers let write it: a forged record must
 * not send clients elsewhere. One record with a far-future ts_ms (9e15: fresh forever, the
 * newest claim everywhere) and an address of the attacker's used to make a member answer
 * 307 to it; an address with a path, userinfo, spaces or a CRLF (a 307 without Location),
 * or a key other than its client_id, was taken as well. Each is refused and counted; the
 * real member keeps the partition. */
static void test_forged_records(void **state)
{
    (void)state;
    char err[256], k2[32];
    CcdConfig c;
    config(&c);
    CcdKafkaSettings ks;
    ccd_kafka_default_settings(&ks);
    CcdCluster *cl;
    assert_int_equal(ccd_cluster_open(&cl, &c, 8080, &ks, err, sizeof err), 0);
    key_on(2, k2, sizeof k2);
    int64_t t = now_ms();
    int32_t p;
    const char *addr;
    assert_int_equal(record(cl, "b", "cellcastd", "http://b:1", "2", t), 0);
    assert_int_equal(
        record(cl, "evil", "cellcastd", "http://attacker.invalid:9", "0,1,2,3", (int64_t)9e15),
        -EINVAL);
    assert_int_equal(record(cl, "evil", "cellcastd", "http://attacker.invalid:9", "0,1,2,3",
                            t + 2 * CCD_CLUSTER_MAX_SKEW_MS),
                     -EINVAL);
    static const char *const addrs[] = {
        "http://a:1/x",  "http://u@a:1",      "http://a:1\\r\\nX-A: b",
        "http://a b:1",  "http://a:1?x=1",    "httpx://a:1",
        "http://:1",     "http://a:",         "http://a:65536",
        "http://a:1#f",  "http://a\\u0000:1", "ftp://a:1",
        "http://[::1:1", "http://a:1/",       "https://",
        "http://a:-1",
    };
    const int n_addrs = (int)(sizeof addrs / sizeof *addrs);
    for (int i = 0; i < n_addrs; i++)
        if (record(cl, "evil", "cellcastd", addrs[i], "2", t + 10) != -EINVAL)
            fail_msg("address \"%s\" accepted", addrs[i]);
    /* a key that is not the record's client id (another member's record overwritten) */
    char v[512];
    snprintf(v, sizeof v,
             "{\"v\":1,\"group_id\":\"cellcastd\",\"client_id\":\"evil\",\"member_id\":\"m\","
             "\"group_instance_id\":\"\",\"address\":\"http://evil:1\",\"topic\":\"kpis\","
             "\"partition_count\":4,\"partitions\":[2],\"protocol\":\"EAGER\","
             "\"heartbeat_ms\":1000,\"ts_ms\":%lld}",
             (long long)(t + 10));
    assert_int_equal(ccd_cluster_record(cl, "b", 1, v, strlen(v)), -EINVAL);
    assert_int_equal(ccd_cluster_owner(cl, k2, &p, &addr), CCD_OWNER_OTHER);
    assert_string_equal(addr, "http://b:1");
    CcdClusterStats st;
    ccd_cluster_stats(cl, &st);
    assert_int_equal(st.invalid, 2 + n_addrs + 1);
    /* what the daemon advertises is accepted, and a clock a little ahead */
    static const char *const good[] = {"http://b2:1", "https://cellcast-7.example.net",
                                       "http://[::1]:8080", "http://10.0.0.7:65535",
                                       "http://node_3.local:80"};
    for (int i = 0; i < 5; i++)
        if (record(cl, "b", "cellcastd", good[i], "2", t + CCD_CLUSTER_MAX_SKEW_MS / 2))
            fail_msg("address \"%s\" refused", good[i]);
    assert_int_equal(ccd_cluster_owner(cl, k2, &p, &addr), CCD_OWNER_OTHER);
    assert_string_equal(addr, good[4]);
    ccd_cluster_close(&cl, 0);
    ccd_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partitioners_match_librdkafka),
        cmocka_unit_test(test_murmur2_is_javas),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_owner_map),
        cmocka_unit_test(test_forged_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
