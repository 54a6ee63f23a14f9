/*
 * test_kafka.c — daemon/kafka.c against an in-process librdkafka mock cluster:
 *  - committed offsets (read back with rd_kafka_committed from a separate handle of the
 *    same group) advance only after ccd_kafka_ack, and exactly to the acked batches;
 *  - a consumer restarted in the same group continues from the committed offset (no loss,
 *    no duplicate); unacked messages are delivered again after a restart (at-least-once);
 *  - on_assign / on_revoke are called; ccd_kafka_rewind re-reads a partition from a time;
 *  - the dead-letter topic receives the message with the reason header;
 *  - ccd_kafka_produce to the alert topic is delivered; the produce-queue bound is counted;
 *  - `brokers: embedded` starts a reachable cluster; ccd_kafka_partition_of agrees with
 *    librdkafka's default partitioner.
 * Each consumer-group join on the mock takes ~3 s (its initial rebalance delay).
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
#include <unistd.h>

#include <cmocka.h>

#include "kafka.h"
#include "kafka_mock.h"
#include "log.h"

#define MAXMSG 256

typedef struct Got {
    int n;
    int32_t partition[MAXMSG];
    int64_t offset[MAXMSG];
    uint64_t batch[MAXMSG];
    char payload[MAXMSG][32];
    int assigned, revoked;
    CcdKafka *k; /* for ccd_kafka_rewind from on_assign */
    int rewind;  /* rewind every assigned partition to ts rewind_ts */
    int64_t rewind_ts;
} Got;

typedef KafkaMock World;

static void on_message(void *cookie, uint64_t batch_id, const CcdKafkaMessage *m)
{
    Got *g = cookie;
    assert_true(g->n < MAXMSG);
    g->partition[g->n] = m->partition;
    g->offset[g->n] = m->offset;
    g->batch[g->n] = batch_id;
    snprintf(g->payload[g->n], sizeof g->payload[0], "%.*s", (int)m->len, (const char *)m->payload);
    g->n++;
}

static void on_assign(void *cookie, const char *topic, const int32_t *p, int n)
{
    Got *g = cookie;
    g->assigned += n;
    for (int i = 0; g->rewind && i < n; i++)
        assert_int_equal(ccd_kafka_rewind(g->k, topic, p[i], g->rewind_ts), 0);
}

static void on_revoke(void *cookie, const char *topic, const int32_t *p, int n)
{
    Got *g = cookie;
    g->revoked += n;
}

static int setup(void **state)
{
    static const KafkaMockTopic topics[] = {{"kpis", 2}, {"dlq", 1}, {"alerts", 1}};
    *state = kafka_mock_open("3", topics, 3);
    return 0;
}

static int teardown(void **state)
{
    kafka_mock_close(*state);
    return 0;
}

static void produce(const char *bootstrap, const char *topic, int from, int n)
{
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, NULL, 0);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
    assert_non_null(p);
    for (int i = from; i < from + n; i++) {
        char key[16], val[32];
        snprintf(key, sizeof key, "c%d", i % 7);
        snprintf(val, sizeof val, "m%d", i);
        assert_int_equal(
            rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
                              RD_KAFKA_V_VALUE(val, strlen(val)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
            0);
    }
    assert_int_equal(rd_kafka_flush(p, 10000), 0);
    rd_kafka_destroy(p);
}

static CcdKafka *open_k(const char *brokers, const char *group, Got *g, int max_poll,
                        const char *dlq)
{
    static const char *const topics[] = {"kpis"};
    static const CcdKafkaProp props[] = {{"auto.commit.interval.ms", "100"},
                                         {"session.timeout.ms", "6000"},
                                         {"heartbeat.interval.ms", "500"}};
    CcdKafkaSettings s;
    ccd_kafka_default_settings(&s);
    s.brokers = brokers;
    s.group_id = group;
    s.topics = topics;
    s.n_topics = 1;
    s.dead_letter_topic = dlq;
    s.embedded_partitions = 3;
    s.props = props;
    s.n_props = 3;
    s.max_poll_messages = max_poll;
    CcdKafkaHooks h = {g, on_message, on_assign, on_revoke, NULL, NULL};
    CcdKafka *k = NULL;
    char err[512] = "";
    int rc = ccd_kafka_open(&k, &s, &h, err, sizeof err);
    if (rc)
        print_error("ccd_kafka_open: %s\n", err);
    assert_int_equal(rc, 0);
    g->k = k;
    return k;
}

/* Polls until g holds n messages (or the deadline); returns the number held. */
static int consume_until(CcdKafka *k, Got *g, int n, int timeout_ms)
{
    int64_t end = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    while (g->n < n && cc_now_ns() < end) {
        if (!ccd_kafka_poll(k))
            usleep(5000);
        ccd_kafka_service(k);
    }
    return g->n;
}

/* Committed offsets of the group for kpis [0] and [1], read by an independent handle. */
static void committed(const char *bootstrap, const char *group, int64_t out[2])
{
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, NULL, 0);
    rd_kafka_conf_set(conf, "group.id", group, NULL, 0);
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
    assert_non_null(c);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(2);
    rd_kafka_topic_partition_list_add(l, "kpis", 0);
    rd_kafka_topic_partition_list_add(l, "kpis", 1);
    assert_int_equal(rd_kafka_committed(c, l, 10000), 0);
    for (int i = 0; i < 2; i++)
        out[i] = rd_kafka_topic_partition_list_find(l, "kpis", i)->offset;
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(c);
}

static int64_t high_watermark(const char *bootstrap, int32_t partition)
{
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, NULL, 0);
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
    int64_t lo, hi;
    assert_int_equal(rd_kafka_query_watermark_offsets(c, "kpis", partition, &lo, &hi, 5000), 0);
    rd_kafka_destroy(c);
    return hi;
}

static void test_ack_commit_restart(void **state)
{
    World *w = *state;
    const char *G = "g-ack";
    int64_t c[2];
    produce(w->bootstrap, "kpis", 0, 20);

    Got *g = calloc(1, sizeof *g);
    CcdKafka *k = open_k(w->bootstrap, G, g, 3, NULL);
    assert_int_equal(consume_until(k, g, 20, 20000), 20);
    assert_int_equal(g->assigned, 2);
    uint64_t last = g->batch[g->n - 1];
    assert_true(last >= 7); /* ≤ 3 messages per batch */

    /* Nothing acked: nothing committed, even after auto-commit intervals. */
    assert_int_equal(ccd_kafka_commit(k), 0);
    usleep(300000);
    ccd_kafka_poll(k);
    committed(w->bootstrap, G, c);
    assert_true(c[0] < 0 && c[1] < 0);
    CcdKafkaStats st;
    ccd_kafka_stats(k, &st);
    assert_int_equal(st.unacked_messages, 20);
    assert_int_equal(st.messages, 20);

    /* Ack the first batches: committed = (max offset of the acked messages) + 1. */
    uint64_t upto = g->batch[4];
    int64_t want[2] = {RD_KAFKA_OFFSET_INVALID, RD_KAFKA_OFFSET_INVALID};
    for (int i = 0; i < g->n; i++)
        if (g->batch[i] <= upto && g->offset[i] + 1 > want[g->partition[i]])
            want[g->partition[i]] = g->offset[i] + 1;
    ccd_kafka_ack(k, upto);
    assert_int_equal(ccd_kafka_commit(k), 0);
    committed(w->bootstrap, G, c);
    for (int p = 0; p < 2; p++)
        assert_int_equal(c[p] < 0 ? RD_KAFKA_OFFSET_INVALID : c[p], want[p]);

    /* Ack everything; the periodic auto-commit alone gets it there. */
    ccd_kafka_ack(k, last);
    ccd_kafka_stats(k, &st);
    assert_int_equal(st.unacked_messages, 0);
    for (int i = 0; i < 20; i++) {
        usleep(50000);
        ccd_kafka_poll(k);
        ccd_kafka_service(k);
    }
    committed(w->bootstrap, G, c);
    assert_int_equal(c[0], high_watermark(w->bootstrap, 0));
    assert_int_equal(c[1], high_watermark(w->bootstrap, 1));
    ccd_kafka_stats(k, &st);
    assert_int_equal(st.lag, 0);
    ccd_kafka_close(&k, 2000);
    assert_null(k);
    assert_int_equal(g->revoked, 2);

    /* Restart in the same group: exactly the new messages m20..m29, each once. */
    produce(w->bootstrap, "kpis", 20, 10);
    memset(g, 0, sizeof *g);
    k = open_k(w->bootstrap, G, g, 1000, NULL);
    assert_int_equal(consume_until(k, g, 10, 20000), 10);
    assert_int_equal(consume_until(k, g, 11, 700), 10); /* and nothing more */
    int seen[10] = {0};
    for (int i = 0; i < g->n; i++) {
        int id = atoi(g->payload[i] + 1);
        assert_true(id >= 20 && id < 30);
        seen[id - 20]++;
    }
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], 1);
    /* Close without acking: the next member of the group gets them again. */
    ccd_kafka_close(&k, 2000);
    memset(g, 0, sizeof *g);
    k = open_k(w->bootstrap, G, g, 1000, NULL);
    assert_int_equal(consume_until(k, g, 10, 20000), 10);
    assert_int_equal(consume_until(k, g, 11, 700), 10);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < g->n; i++)
        seen[atoi(g->payload[i] + 1) - 20]++;
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], 1);
    ccd_kafka_ack(k, g->batch[g->n - 1]);
    ccd_kafka_close(&k, 2000); /* commits synchronously */
    committed(w->bootstrap, G, c);
    assert_int_equal(c[0], high_watermark(w->bootstrap, 0));
    assert_int_equal(c[1], high_watermark(w->bootstrap, 1));

    /* A member that rewinds on assign re-reads the history despite the commits. */
    memset(g, 0, sizeof *g);
    g->rewind = 1;
    k = open_k(w->bootstrap, G, g, 1000, NULL);
    assert_int_equal(consume_until(k, g, 30, 20000), 30);
    ccd_kafka_close(&k, 2000);

    /* A rewind whose time lookup finds nothing (the mock answers -1 to every timestamp)
     * must not skip unconsumed messages: it starts at the committed offset. */
    memset(g, 0, sizeof *g);
    g->rewind = 1;
    g->rewind_ts = 1700000000000;
    k = open_k(w->bootstrap, G, g, 1000, NULL);
    produce(w->bootstrap, "kpis", 30, 3);
    assert_int_equal(consume_until(k, g, 3, 20000), 3);
    assert_int_equal(consume_until(k, g, 4, 700), 3);
    for (int i = 0; i < 3; i++)
        assert_true(atoi(g->payload[i] + 1) >= 30);
    ccd_kafka_close(&k, 2000);
    free(g);
}

/* Polls two members until cond(a, b) or the deadline. */
static int poll_two(CcdKafka *ka, Got *a, CcdKafka *kb, Got *b, int (*cond)(Got *, Got *),
                    int timeout_ms)
{
    int64_t end = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    while (!cond(a, b) && cc_now_ns() < end) {
        ccd_kafka_poll(ka);
        if (kb)
            ccd_kafka_poll(kb);
        usleep(5000);
    }
    return cond(a, b);
}

static int split_done(Got *a, Got *b) { return a->revoked == 1 && b->assigned == 1; }
static int moved_back(Got *a, Got *b) { return a->assigned == 3; }

static void test_two_members_incremental_hooks(void **state)
{
    World *w = *state;
    Got *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CcdKafka *ka = open_k(w->bootstrap, "g-two", a, 1000, NULL);
    int64_t end = cc_now_ns() + 20000000000LL;
    while (a->assigned < 2 && cc_now_ns() < end) {
        ccd_kafka_poll(ka);
        usleep(5000);
    }
    assert_int_equal(a->assigned, 2);
    /* A second member: the eager protocol revokes and re-assigns everything, the hooks
     * see only the partition that moved. */
    CcdKafka *kb = open_k(w->bootstrap, "g-two", b, 1000, NULL);
    assert_true(poll_two(ka, a, kb, b, split_done, 30000));
    assert_int_equal(a->assigned, 2);
    assert_int_equal(a->revoked, 1);
    CcdKafkaStats st;
    ccd_kafka_stats(ka, &st);
    assert_int_equal(st.assigned_partitions, 1);
    /* B leaves: its partition comes back to A as one new assignment. */
    ccd_kafka_close(&kb, 2000);
    assert_int_equal(b->revoked, 1);
    assert_true(poll_two(ka, a, NULL, NULL, moved_back, 30000));
    assert_int_equal(a->revoked, 1);
    ccd_kafka_close(&ka, 2000);
    assert_int_equal(a->revoked, 3);
    free(a);
    free(b);
}

static void test_dead_letter_and_alerts(void **state)
{
    World *w = *state;
    Got g = {0};
    CcdKafka *k = open_k(w->bootstrap, "g-dlq", &g, 100, "dlq");
    CcdKafkaMessage bad = {.topic = "kpis",
                           .partition = 1,
                           .offset = 42,
                           .timestamp_ms = -1,
                           .key = "cellX",
                           .key_len = 5,
                           .payload = "{not json",
                           .len = 9};
    ccd_kafka_dead_letter(k, &bad, "not_json");
    assert_int_equal(ccd_kafka_produce(k, "alerts", "cellA", 5, "{\"state\":\"firing\"}", 18), 0);
    CcdKafkaStats st;
    int64_t end = cc_now_ns() + 10000000000LL;
    do {
        usleep(10000);
        ccd_kafka_service(k);
        ccd_kafka_stats(k, &st);
    } while ((st.produced < 1 || st.dead_letters < 1) && cc_now_ns() < end);
    assert_int_equal(st.produced, 1);
    assert_int_equal(st.dead_letters, 1);
    assert_int_equal(st.produce_failed, 0);
    assert_int_equal(st.produce_queue, 0);
    ccd_kafka_close(&k, 2000);

    /* Read both topics back with a plain consumer. */
    const char *topics[2] = {"dlq", "alerts"};
    for (int t = 0; t < 2; t++) {
        char e[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "bootstrap.servers", w->bootstrap, NULL, 0);
        rd_kafka_conf_set(conf, "group.id", "reader", NULL, 0); /* assign() needs one */
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, topics[t], 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(c, l), 0);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_message_t *m = NULL;
        for (int i = 0; i < 100 && !m; i++) {
            m = rd_kafka_consumer_poll(c, 100);
            if (m && m->err) {
                rd_kafka_message_destroy(m);
                m = NULL;
            }
        }
        assert_non_null(m);
        if (t == 0) {
            assert_int_equal(m->len, 9);
            assert_memory_equal(m->payload, "{not json", 9);
            assert_memory_equal(m->key, "cellX", 5);
            rd_kafka_headers_t *h = NULL;
            assert_int_equal(rd_kafka_message_headers(m, &h), 0);
            const void *v;
            size_t vn;
            assert_int_equal(rd_kafka_header_get_last(h, "cellcast-reason", &v, &vn), 0);
            assert_int_equal(vn, 8);
            assert_memory_equal(v, "not_json", 8);
            assert_int_equal(rd_kafka_header_get_last(h, "cellcast-offset", &v, &vn), 0);
            assert_memory_equal(v, "42", 2);
        } else {
            assert_int_equal(m->len, 18);
            assert_memory_equal(m->payload, "{\"state\":\"firing\"}", 18);
            assert_memory_equal(m->key, "cellA", 5);
        }
        rd_kafka_message_destroy(m);
        rd_kafka_destroy(c);
    }
}

static void test_produce_bound(void **state)
{
    World *w = *state;
    Got g = {0};
    static const char *const topics[] = {"kpis"};
    CcdKafkaSettings s;
    ccd_kafka_default_settings(&s);
    s.brokers = w->bootstrap;
    s.group_id = "g-bound";
    s.topics = topics;
    s.max_produce_queue = 2;
    CcdKafkaHooks h = {&g, on_message, NULL, NULL, NULL, NULL};
    CcdKafka *k = NULL;
    assert_int_equal(ccd_kafka_open(&k, &s, &h, NULL, 0), 0);
    assert_int_equal(ccd_kafka_produce(k, "alerts", "a", 1, "1", 1), 0);
    assert_int_equal(ccd_kafka_produce(k, "alerts", "a", 1, "2", 1), 0);
    assert_int_equal(ccd_kafka_produce(k, "alerts", "a", 1, "3", 1), -ENOBUFS);
    CcdKafkaStats st;
    ccd_kafka_stats(k, &st);
    assert_int_equal(st.produce_failed, 1);
    assert_int_equal(st.produce_queue, 2);
    ccd_kafka_close(&k, 5000);
}

/* A delivery that times out (broker down) is retried by cc_kafka and delivered once the
 * broker is back; nothing is counted as failed. */
static void test_produce_retry(void **state)
{
    World *w = *state;
    Got g = {0};
    static const char *const topics[] = {"kpis"};
    static const CcdKafkaProp pprops[] = {{"delivery.timeout.ms", "1000"},
                                          {"socket.connection.setup.timeout.ms", "1000"}};
    CcdKafkaSettings s;
    ccd_kafka_default_settings(&s);
    s.brokers = w->bootstrap;
    s.group_id = "g-retry";
    s.topics = topics;
    s.producer_props = pprops;
    s.n_producer_props = 2;
    CcdKafkaHooks h = {&g, on_message, NULL, NULL, NULL, NULL};
    CcdKafka *k = NULL;
    assert_int_equal(ccd_kafka_open(&k, &s, &h, NULL, 0), 0);
    /* Connect and deliver one first, so the producer is known to work. */
    assert_int_equal(ccd_kafka_produce(k, "alerts", "r", 1, "before", 6), 0);
    CcdKafkaStats st;
    int64_t end = cc_now_ns() + 10000000000LL;
    do {
        usleep(10000);
        ccd_kafka_service(k);
        ccd_kafka_stats(k, &st);
    } while (st.produced < 1 && cc_now_ns() < end);
    assert_int_equal(st.produced, 1);

    assert_int_equal(rd_kafka_mock_broker_set_down(w->mc, 1), 0);
    assert_int_equal(ccd_kafka_produce(k, "alerts", "r", 1, "during", 6), 0);
    end = cc_now_ns() + 4000000000LL;
    do { /* until the first delivery attempt has failed */
        usleep(10000);
        ccd_kafka_service(k);
        ccd_kafka_stats(k, &st);
    } while (st.produce_retries < 1 && cc_now_ns() < end);
    assert_int_equal(rd_kafka_mock_broker_set_up(w->mc, 1), 0);
    assert_true(st.produce_retries >= 1);
    end = cc_now_ns() + 20000000000LL;
    do {
        usleep(10000);
        ccd_kafka_service(k);
        ccd_kafka_stats(k, &st);
    } while (st.produced < 2 && cc_now_ns() < end);
    assert_int_equal(st.produced, 2);
    assert_int_equal(st.produce_failed, 0);
    assert_int_equal(st.produce_queue, 0);
    ccd_kafka_close(&k, 2000);
}

/* Closing while the broker is gone returns within the timeout (it used to hang in
 * rd_kafka_consumer_close) and still tells the host it no longer owns its partitions. */
static void test_close_without_broker(void **state)
{
    (void)state;
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", NULL, 0);
    rd_kafka_t *mrk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(mrk, 1);
    assert_int_equal(rd_kafka_mock_topic_create(mc, "kpis", 2, 1), 0);
    Got *g = calloc(1, sizeof *g);
    CcdKafka *k = open_k(rd_kafka_mock_cluster_bootstraps(mc), "g-gone", g, 100, NULL);
    int64_t end = cc_now_ns() + 20000000000LL;
    while (g->assigned < 2 && cc_now_ns() < end) {
        ccd_kafka_poll(k);
        usleep(5000);
    }
    assert_int_equal(g->assigned, 2);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(mrk);
    int64_t t0 = cc_now_ns();
    ccd_kafka_close(&k, 2000);
    double secs = (double)(cc_now_ns() - t0) * 1e-9;
    print_message("close without a broker took %.2f s\n", secs);
    assert_true(secs < 8.0);
    assert_int_equal(g->revoked, 2);
    free(g);
}

static void test_embedded(void **state)
{
    (void)state;
    Got *g = calloc(1, sizeof *g);
    CcdKafka *k = open_k("embedded", "g-emb", g, 1000, "dead");
    const char *bs = ccd_kafka_bootstrap(k);
    assert_non_null(bs);
    assert_non_null(strchr(bs, ':'));
    assert_true(ccd_kafka_fd(k) >= 0);
    produce(bs, "kpis", 0, 14);
    assert_int_equal(consume_until(k, g, 14, 20000), 14);
    assert_int_equal(g->assigned, 3);
    /* Keys c0..c6 (i % 7); ccd_kafka_partition_of must agree with where they landed. */
    for (int i = 0; i < g->n; i++) {
        char key[16];
        snprintf(key, sizeof key, "c%d", atoi(g->payload[i] + 1) % 7);
        assert_int_equal(ccd_kafka_partition_of(k, "kpis", key, strlen(key)), g->partition[i]);
    }
    assert_int_equal(ccd_kafka_partition_of(k, "kpis", "", 0), -1);
    /* Pause: nothing is fetched while paused, everything after resume. */
    assert_int_equal(ccd_kafka_pause(k, 1), 0);
    produce(bs, "kpis", 14, 5);
    assert_int_equal(consume_until(k, g, 15, 1500), 14);
    assert_int_equal(ccd_kafka_pause(k, 0), 0);
    assert_int_equal(consume_until(k, g, 19, 10000), 19);
    ccd_kafka_close(&k, 2000);
    free(g);
}

static void test_bad_settings(void **state)
{
    (void)state;
    CcdKafkaSettings s;
    CcdKafka *k = NULL;
    char err[256] = "";
    static const CcdKafkaProp bad[] = {{"no.such.property", "1"}};
    ccd_kafka_default_settings(&s);
    s.brokers = "127.0.0.1:1";
    s.props = bad;
    s.n_props = 1;
    assert_int_equal(ccd_kafka_open(&k, &s, NULL, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no.such.property"));
    assert_null(k);
    ccd_kafka_default_settings(&s);
    s.n_topics = 0;
    assert_int_equal(ccd_kafka_open(&k, &s, NULL, err, sizeof err), -EINVAL);
}

int main(void)
{
    ccd_log_level = getenv("TEST_KAFKA_VERBOSE") ? CC_LOG_DEBUG : CC_LOG_WARN;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_settings),
        cmocka_unit_test(test_ack_commit_restart),
        cmocka_unit_test(test_two_members_incremental_hooks),
        cmocka_unit_test(test_dead_letter_and_alerts),
        cmocka_unit_test(test_produce_bound),
        cmocka_unit_test(test_produce_retry),
        cmocka_unit_test(test_close_without_broker),
        cmocka_unit_test(test_embedded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
