/*
 * kafka.c — cellcastd's Kafka module (see kafka.h): open and close, the embedded broker,
 * the periodic service and the statistics; the parts live beside it (list in
 * kafka_common.h): consumer, rebalance, producer, partition reader, topic setup, and what
 * they all share (kafka_common.c: default settings, logs, property helpers).
 *
 * Threads: everything here runs on the host's event-loop thread. librdkafka's own threads
 * only hand work to queues that the calls below serve (consumer queue: messages,
 * rebalances, errors and logs; producer queue: delivery reports, errors and logs), so
 * every callback of the module runs inside ccd_kafka_poll / ccd_kafka_service / close.
 * The embedded broker's handle is never polled; its (rare) logs go to stderr directly.
 *
 * The embedded broker (`brokers: embedded`) is librdkafka's mock cluster: one in-process
 * broker on 127.0.0.1 with an ephemeral port, all in memory, gone with the process. Its
 * limits (hard-coded in librdkafka 2.0's rdkafka_mock.c): a partition keeps only its newest
 * 5 MiB / 100k message sets — older messages are deleted even when nobody consumed them
 * (≈ 25k KPI messages of ~200 bytes per partition: more partitions = more retention);
 * timestamp lookups answer "end", so ccd_kafka_rewind works there only to 0; a member that
 * leaves or dies holds the next rebalance up to session.timeout.ms. It is the demo and
 * test default; production points `brokers` at a real cluster.
 */
#include "kafka_common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LAG_PERIOD_NS (1000 * 1000000LL)

/* ---- small helpers ---- */

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

const char *ccd_kafka_bootstrap(const CcdKafka *k) { return k->bootstrap; }

int ccd_kafka_fd(const CcdKafka *k) { return k->wake_rd; }

/* ---- service, stats ---- */

void ccd_kafka_service(CcdKafka *k)
{
    rd_kafka_poll(k->prod, 0);
    int64_t now = cc_now_ns();
    kafka_resend_due(k, now);
    if (now - k->last_lag_ns >= LAG_PERIOD_NS) {
        kafka_update_lag(k);
        k->last_lag_ns = now;
    }
}

/* Owned but not fetched (lost while the brokers were away): the lag is unknown, not 0. */
void ccd_kafka_stats(const CcdKafka *k, CcdKafkaStats *out)
{
    *out = k->st;
    out->produce_queue = k->in_flight + k->n_retry;
    out->assigned_partitions = k->assigned->cnt;
    out->lost_partitions = 0;
    for (int i = 0; i < k->held->cnt; i++)
        out->lost_partitions += !rd_kafka_topic_partition_list_find(
            k->assigned, k->held->elems[i].topic, k->held->elems[i].partition);
    if (out->lost_partitions)
        out->lag = -1;
}

/* ---- open / close ---- */

static int open_embedded(CcdKafka *k, const CcdKafkaSettings *s, char *err, size_t errlen)
{
    char e[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "client.id", "cellcastd-embedded-broker", NULL, 0);
    rd_kafka_conf_set(conf, "log_level", "4", NULL, 0);
    k->mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
    if (!k->mock_rk) {
        rd_kafka_conf_destroy(conf);
        return cc_errf(err, errlen, -EIO, "kafka: embedded broker handle: %s", e);
    }
    k->mock = rd_kafka_mock_cluster_new(k->mock_rk, 1);
    if (!k->mock)
        return cc_errf(err, errlen, -EIO, "kafka: cannot start the embedded mock cluster");
    int np = s->embedded_partitions > 0 ? s->embedded_partitions : 4;
    for (int i = 0; i < k->n_topics + 4; i++) {
        const char *t = i < k->n_topics        ? k->topics[i]
                        : i == k->n_topics     ? k->alert_topic
                        : i == k->n_topics + 1 ? k->dlq_topic
                        : i == k->n_topics + 2 ? k->incidents_topic
                                               : k->state_topic;
        if (!t || !*t)
            continue;
        rd_kafka_resp_err_t re = rd_kafka_mock_topic_create(k->mock, t, np, 1);
        if (re)
            return cc_errf(err, errlen, -EIO, "kafka: embedded broker: create topic %s: %s", t,
                           rd_kafka_err2str(re));
    }
    /* The members topic as ccd_kafka_own_topics wants it (the mock has no cleanup.policy) */
    if (k->members_topic) {
        rd_kafka_resp_err_t re = rd_kafka_mock_topic_create(k->mock, k->members_topic, 1, 1);
        if (re)
            return cc_errf(err, errlen, -EIO, "kafka: embedded broker: create topic %s: %s",
                           k->members_topic, rd_kafka_err2str(re));
    }
    k->bootstrap = xstrdup(rd_kafka_mock_cluster_bootstraps(k->mock));
    if (!k->bootstrap)
        return cc_errf(err, errlen, -ENOMEM, "kafka: out of memory");
    CCD_LOG(CC_LOG_INFO, "kafka",
            "embedded broker (librdkafka mock cluster) listening on %s; "
            "produce with: kcat -b %s -P -t %s",
            k->bootstrap, k->bootstrap, k->topics[0]);
    CCD_LOG(CC_LOG_WARN, "kafka",
            "the embedded broker is for demos and tests only: librdkafka's in-memory mock, "
            "nothing it holds (messages, committed offsets) survives a restart, a partition "
            "keeps only its newest ~5 MiB, older messages are deleted even unconsumed (counted: "
            "cellcast_kafka_embedded_dropped_total); use a real cluster (kafka.brokers) to keep "
            "data");
    return 0;
}

/* A consumer that did not close by the deadline of ccd_kafka_close: not destroyed —
 * rd_kafka_destroy would wait for the group it still runs (forever when a rebalance waits for
 * an answer nobody gives) or assert on it — and kept here, reachable, until the process exits
 * or re-executes (the daemon closes Kafka only on its way out). */
static rd_kafka_t *abandoned_consumer;

static void destroy(CcdKafka *k)
{
    if (k->cq)
        rd_kafka_queue_destroy(k->cq);
    if (k->reader) {
        rd_kafka_consumer_close(k->reader); /* never joined a group: returns at once */
        rd_kafka_destroy(k->reader);
    }
    if (k->rk && k->consumer_abandoned)
        abandoned_consumer = k->rk;
    else if (k->rk) /* closed (bounded) by ccd_kafka_close; never block here */
        rd_kafka_destroy_flags(k->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    for (int i = 0; i < k->n_tinfo; i++) {
        free(k->tinfo[i].name);
        rd_kafka_topic_destroy(k->tinfo[i].rkt);
    }
    free(k->tinfo);
    if (k->prod)
        rd_kafka_destroy(k->prod);
    while (k->retry_head) {
        Outgoing *o = k->retry_head;
        k->retry_head = o->next;
        kafka_outgoing_done(o, -EIO);
    }
    if (k->mock)
        rd_kafka_mock_cluster_destroy(k->mock);
    if (k->mock_rk)
        rd_kafka_destroy(k->mock_rk);
    if (k->assigned)
        rd_kafka_topic_partition_list_destroy(k->assigned);
    if (k->held)
        rd_kafka_topic_partition_list_destroy(k->held);
    for (int i = 0; i < k->n_batches; i++)
        kafka_batch_free(&k->batches[i]);
    free(k->batches);
    free(k->next_off);
    if (k->wake_rd >= 0)
        close(k->wake_rd);
    if (k->wake_wr >= 0)
        close(k->wake_wr);
    for (int i = 0; i < k->n_topics; i++)
        free(k->topics[i]);
    free(k->topics);
    free(k->group_id);
    free(k->alert_topic);
    free(k->dlq_topic);
    free(k->state_topic);
    free(k->members_topic);
    free(k->incidents_topic);
    free(k->bootstrap);
    free(k);
}

int ccd_kafka_open(CcdKafka **out, const CcdKafkaSettings *s, const CcdKafkaHooks *hooks, char *err,
                   size_t errlen)
{
    int ret = 0;
    *out = NULL;
    if (!s || !s->brokers || !*s->brokers || !s->group_id || !*s->group_id || s->n_topics < 1 ||
        !s->topics)
        return cc_errf(err, errlen, -EINVAL, "kafka: brokers, group_id and topics are required");
    CcdKafka *k = calloc(1, sizeof *k);
    if (!k)
        return cc_errf(err, errlen, -ENOMEM, "kafka: out of memory");
    k->wake_rd = k->wake_wr = -1;
    if (hooks)
        k->hooks = *hooks;
    k->max_poll = s->max_poll_messages > 0 ? s->max_poll_messages : 10000;
    k->max_produce_queue = s->max_produce_queue > 0 ? s->max_produce_queue : 100000;
    k->last_topic = -1;
    k->group_id = strdup(s->group_id);
    k->alert_topic = s->alert_topic && *s->alert_topic ? strdup(s->alert_topic) : NULL;
    k->dlq_topic =
        s->dead_letter_topic && *s->dead_letter_topic ? strdup(s->dead_letter_topic) : NULL;
    k->state_topic = s->state_topic && *s->state_topic ? strdup(s->state_topic) : NULL;
    k->members_topic = s->members_topic && *s->members_topic ? strdup(s->members_topic) : NULL;
    k->incidents_topic =
        s->incidents_topic && *s->incidents_topic ? strdup(s->incidents_topic) : NULL;
    k->setup_timeout_ms = s->topic_setup_timeout_ms > 0 ? s->topic_setup_timeout_ms : 5000;
    k->topics = calloc((size_t)s->n_topics, sizeof *k->topics);
    k->assigned = rd_kafka_topic_partition_list_new(16);
    k->held = rd_kafka_topic_partition_list_new(16);
    if (!k->group_id || !k->topics || (s->alert_topic && *s->alert_topic && !k->alert_topic) ||
        (s->dead_letter_topic && *s->dead_letter_topic && !k->dlq_topic) ||
        (s->state_topic && *s->state_topic && !k->state_topic) ||
        (s->members_topic && *s->members_topic && !k->members_topic) ||
        (s->incidents_topic && *s->incidents_topic && !k->incidents_topic)) {
        ret = cc_errf(err, errlen, -ENOMEM, "kafka: out of memory");
        goto error;
    }
    for (int i = 0; i < s->n_topics; i++) {
        if (!s->topics[i] || !*s->topics[i]) {
            ret = cc_errf(err, errlen, -EINVAL, "kafka: topic %d is empty", i);
            goto error;
        }
        k->topics[k->n_topics] = strdup(s->topics[i]);
        if (!k->topics[k->n_topics]) {
            ret = cc_errf(err, errlen, -ENOMEM, "kafka: out of memory");
            goto error;
        }
        k->n_topics++;
    }
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC)) {
        ret = cc_errf(err, errlen, -errno, "kafka: pipe: %s", strerror(errno));
        goto error;
    }
    k->wake_rd = fds[0];
    k->wake_wr = fds[1];

    if (!strcmp(s->brokers, "embedded")) {
        if ((ret = open_embedded(k, s, err, errlen)))
            goto error;
    } else {
        k->bootstrap = strdup(s->brokers);
        if (!k->bootstrap) {
            ret = cc_errf(err, errlen, -ENOMEM, "kafka: out of memory");
            goto error;
        }
    }
    if (!k->mock) { /* before anything could make the brokers auto-create them */
        char msg[2048];
        int tr = ccd_kafka_check_topics(s, 1, msg, sizeof msg);
        if (tr == -EAGAIN) {
            k->topics_unsure = 1;
            CCD_LOG(CC_LOG_WARN, "kafka", "topic setup: %s (checked again at the first assignment)",
                    msg);
        } else if (tr) {
            ret = cc_errf(err, errlen, tr, "kafka: refusing to start: %s", msg);
            goto error;
        } else if (msg[0]) {
            CCD_LOG(CC_LOG_INFO, "kafka", "topic setup: %s", msg);
        }
    }
    if ((ret = kafka_open_producer(k, s, err, errlen)) ||
        (ret = kafka_open_consumer(k, s, kafka_rebalance_cb, err, errlen)))
        goto error;
    CCD_LOG(CC_LOG_INFO, "kafka", "consumer group %s on %s, %d topic(s) from %s", k->group_id,
            k->bootstrap, k->n_topics, k->topics[0]);
    *out = k;
    return 0;
error:
    destroy(k);
    return ret;
}

void ccd_kafka_close(CcdKafka **pk, int timeout_ms)
{
    CcdKafka *k = pk ? *pk : NULL;
    if (!k)
        return;
    /* Offsets stored by acks so far, synchronously; then leave the group (the revoke
     * callback runs here) — librdkafka commits once more on the way out. Everything within
     * timeout_ms: past it the consumer is abandoned (see abandoned_consumer). */
    int64_t deadline = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    k->close_deadline = deadline;
    kafka_commit_bounded(k, timeout_ms);
    k->consumer_closing = 1;
    if (!kafka_consumer_leave(k, deadline, timeout_ms)) {
        k->consumer_abandoned = 1;
        CCD_LOG(CC_LOG_ERROR, "kafka",
                "consumer abandoned, not destroyed: librdkafka's group is still running (it "
                "ends with the process)");
    }
    if (k->held->cnt) /* no revoke came (never assigned, or broker gone): tell the host */
        kafka_release(k, k->held);
    kafka_producer_drain(k, deadline, timeout_ms);
    if (k->n_batches)
        CCD_LOG(CC_LOG_INFO, "kafka",
                "%" PRIu64 " message(s) polled but not acked "
                "will be delivered again to the group",
                k->st.unacked_messages);
    destroy(k);
    *pk = NULL;
}

int ccd_kafka_flush(CcdKafka *k, int timeout_ms)
{
    uint64_t failed = k->st.produce_failed;
    int64_t deadline = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    while (k->in_flight + k->n_retry > 0 && cc_now_ns() < deadline) {
        rd_kafka_poll(k->prod, 10);
        ccd_kafka_service(k);
    }
    if (k->st.produce_failed != failed)
        return -EIO;
    return k->in_flight + k->n_retry > 0 ? -ETIMEDOUT : 0;
}
