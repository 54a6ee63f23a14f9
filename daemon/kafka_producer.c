/*
 * kafka_producer.c — the one producer, for dead letters, alerts and the demo feed: produce
 * with a bound on what is undelivered, delivery reports, re-sends with backoff, and the
 * partitioner a caller asks for (ccd_kafka_partition_of).
 *
 * enable.idempotence=true (no duplicate and ordered per partition across librdkafka's
 * internal retries), linger.ms=5, delivery.timeout.ms=30000. A message whose delivery
 * finally failed with a retriable error is kept and re-produced from ccd_kafka_service with
 * exponential backoff (100 ms .. 10 s), at most 8 times; anything given up is counted
 * (produce_failed) and logged, never dropped silently. Dead letters are best effort:
 * counted in dead_letter_errors when they fail.
 */
#include "kafka_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MAX_ATTEMPTS 8
#define RETRY_BACKOFF_MIN_NS (100 * 1000000LL)
#define RETRY_BACKOFF_MAX_NS (10000 * 1000000LL)

static void outgoing_free(Outgoing *o) { free(o); }

static void retry_push(CcdKafka *k, Outgoing *o)
{
    int64_t backoff = RETRY_BACKOFF_MIN_NS << (o->attempts < 7 ? o->attempts : 7);
    if (backoff > RETRY_BACKOFF_MAX_NS)
        backoff = RETRY_BACKOFF_MAX_NS;
    o->due_ns = cc_now_ns() + backoff;
    o->next = NULL;
    if (k->retry_tail)
        k->retry_tail->next = o;
    else
        k->retry_head = o;
    k->retry_tail = o;
    k->n_retry++;
}

/* The producer of a tracked message learns the outcome; o is freed. */
void kafka_outgoing_done(Outgoing *o, int err)
{
    if (o->done)
        o->done(o->done_cookie, o->tag, err);
    outgoing_free(o);
}

static void give_up(CcdKafka *k, Outgoing *o, const char *why)
{
    k->st.produce_failed++;
    CCD_LOG_RL_AT(&k->rl_producer, CC_LOG_ERROR, "kafka",
                  "giving up on a message to %s (key %.*s, %zu bytes) after %d attempt(s): %s",
                  o->topic, (int)(o->key_len > 64 ? 64 : o->key_len),
                  o->key ? (const char *)o->key : "", o->len, o->attempts, why);
    kafka_outgoing_done(o, -EIO);
}

/* Hands o to librdkafka; on a full local queue it goes back to the retry list. */
static void send_outgoing(CcdKafka *k, Outgoing *o)
{
    o->attempts++;
    rd_kafka_resp_err_t err =
        rd_kafka_producev(k->prod, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_PARTITION(o->partition),
                          RD_KAFKA_V_KEY(o->key, o->key_len), RD_KAFKA_V_VALUE(o->payload, o->len),
                          RD_KAFKA_V_OPAQUE(o), RD_KAFKA_V_END);
    if (!err) {
        k->in_flight++;
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && o->attempts < RETRY_MAX_ATTEMPTS) {
        k->st.produce_retries++;
        retry_push(k, o);
        return;
    }
    give_up(k, o, rd_kafka_err2str(err));
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    CcdKafka *k = opaque;
    Outgoing *o = m->_private;
    if (!o) { /* a dead letter */
        if (m->err) {
            k->st.dead_letter_errors++;
            CCD_LOG_RL_AT(&k->rl_producer, CC_LOG_WARN, "kafka", "dead letter not delivered: %s",
                          rd_kafka_err2str(m->err));
        } else {
            k->st.dead_letters++;
        }
        return;
    }
    k->in_flight--;
    if (!m->err) {
        k->st.produced++;
        kafka_outgoing_done(o, 0);
        return;
    }
    int permanent = m->err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
                    m->err == RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE ||
                    m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                    m->err == RD_KAFKA_RESP_ERR__FATAL;
    if (!permanent && !k->closing && o->attempts < RETRY_MAX_ATTEMPTS) {
        k->st.produce_retries++;
        CCD_LOG_RL_AT(&k->rl_producer, CC_LOG_WARN, "kafka", "delivery to %s failed (%s), retrying",
                      o->topic, rd_kafka_err2str(m->err));
        retry_push(k, o);
        return;
    }
    give_up(k, o, rd_kafka_err2str(m->err));
}

/* The one producer path: queue-bound check, one copy, send (retried by dr_cb). */
static int produce(CcdKafka *k, const char *topic, int32_t partition, const void *key,
                   size_t key_len, const void *payload, size_t len, CcdKafkaDelivered done,
                   void *cookie, uint64_t tag)
{
    if (k->in_flight + k->n_retry >= k->max_produce_queue) {
        k->st.produce_failed++;
        CCD_LOG_RL_AT(&k->rl_producer, CC_LOG_ERROR, "kafka",
                      "produce queue full (%d messages undelivered): message to %s refused",
                      k->max_produce_queue, topic);
        return -ENOBUFS;
    }
    size_t tlen = strlen(topic) + 1;
    Outgoing *o = malloc(sizeof *o + tlen + key_len + len);
    if (!o)
        return -ENOMEM;
    memset(o, 0, sizeof *o);
    o->topic = memcpy(o->data, topic, tlen);
    o->key = key_len ? memcpy(o->data + tlen, key, key_len) : NULL;
    o->payload = len ? memcpy(o->data + tlen + key_len, payload, len) : NULL;
    o->key_len = key_len;
    o->len = len;
    o->done = done;
    o->done_cookie = cookie;
    o->tag = tag;
    o->partition = partition;
    send_outgoing(k, o);
    return 0;
}

int ccd_kafka_produce(CcdKafka *k, const char *topic, const void *key, size_t key_len,
                      const void *payload, size_t len)
{
    return produce(k, topic, RD_KAFKA_PARTITION_UA, key, key_len, payload, len, NULL, NULL, 0);
}

int ccd_kafka_produce_tracked(CcdKafka *k, const char *topic, const void *key, size_t key_len,
                              const void *payload, size_t len, CcdKafkaDelivered done, void *cookie,
                              uint64_t tag)
{
    return produce(k, topic, RD_KAFKA_PARTITION_UA, key, key_len, payload, len, done, cookie, tag);
}

int ccd_kafka_produce_to(CcdKafka *k, const char *topic, int32_t partition, const void *key,
                         size_t key_len, const void *payload, size_t len)
{
    return produce(k, topic, partition, key, key_len, payload, len, NULL, NULL, 0);
}

void ccd_kafka_dead_letter(CcdKafka *k, const CcdKafkaMessage *msg, const char *reason)
{
    if (!k->dlq_topic)
        return;
    char part[16], off[24];
    snprintf(part, sizeof part, "%" PRId32, msg->partition);
    snprintf(off, sizeof off, "%" PRId64, msg->offset);
    rd_kafka_headers_t *h = rd_kafka_headers_new(4);
    rd_kafka_header_add(h, "cellcast-reason", -1, reason ? reason : "unknown", -1);
    rd_kafka_header_add(h, "cellcast-topic", -1, msg->topic ? msg->topic : "", -1);
    rd_kafka_header_add(h, "cellcast-partition", -1, part, -1);
    rd_kafka_header_add(h, "cellcast-offset", -1, off, -1);
    rd_kafka_resp_err_t err = rd_kafka_producev(
        k->prod, RD_KAFKA_V_TOPIC(k->dlq_topic), RD_KAFKA_V_KEY(msg->key, msg->key_len),
        RD_KAFKA_V_VALUE((void *)msg->payload, msg->len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
    if (err) {
        rd_kafka_headers_destroy(h);
        k->st.dead_letter_errors++;
        CCD_LOG_RL_AT(&k->rl_producer, CC_LOG_WARN, "kafka", "dead letter to %s: %s", k->dlq_topic,
                      rd_kafka_err2str(err));
    }
}

int32_t ccd_kafka_partition_of(CcdKafka *k, const char *topic, const void *key, size_t key_len)
{
    if (!key_len)
        return -1;
    TopicInfo *ti = NULL;
    for (int i = 0; i < k->n_tinfo; i++)
        if (!strcmp(k->tinfo[i].name, topic))
            ti = &k->tinfo[i];
    if (!ti) {
        TopicInfo *nt = realloc(k->tinfo, (size_t)(k->n_tinfo + 1) * sizeof *nt);
        if (!nt)
            return -1;
        k->tinfo = nt;
        ti = &k->tinfo[k->n_tinfo];
        *ti = (TopicInfo){strdup(topic), -1, rd_kafka_topic_new(k->prod, topic, NULL)};
        if (!ti->name || !ti->rkt) {
            free(ti->name);
            if (ti->rkt)
                rd_kafka_topic_destroy(ti->rkt);
            return -1;
        }
        k->n_tinfo++;
    }
    if (ti->partitions < 1) {
        const struct rd_kafka_metadata *md = NULL;
        if (!rd_kafka_metadata(k->prod, 0, ti->rkt, &md, 2000) && md->topic_cnt == 1 &&
            !md->topics[0].err)
            ti->partitions = md->topics[0].partition_cnt;
        if (md)
            rd_kafka_metadata_destroy(md);
        if (ti->partitions < 1)
            return -1;
    }
    /* librdkafka's default partitioner (consistent_random): CRC32 of the key. */
    return rd_kafka_msg_partitioner_consistent_random(ti->rkt, key, key_len, ti->partitions, NULL,
                                                      NULL);
}

/* ---- opening ---- */

static const char *const producer_defaults[][2] = {
    {"enable.idempotence", "true"},
    {"linger.ms", "5"},
    {"delivery.timeout.ms", "30000"},
    {"client.id", "cellcastd-producer"},
};

int kafka_open_producer(CcdKafka *k, const CcdKafkaSettings *s, char *err, size_t errlen)
{
    char e[512];
    int ret;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < sizeof producer_defaults / sizeof *producer_defaults; i++)
        if ((ret = kafka_set_prop(conf, producer_defaults[i][0], producer_defaults[i][1], err,
                                  errlen)))
            goto error;
    for (int i = 0; i < s->n_producer_props; i++)
        if (!kafka_prop_is_forced(s->producer_props[i].name) &&
            (ret = kafka_set_prop(conf, s->producer_props[i].name, s->producer_props[i].value, err,
                                  errlen)))
            goto error;
    if ((ret = kafka_set_prop(conf, "bootstrap.servers", k->bootstrap, err, errlen)) ||
        (ret = kafka_set_prop(conf, "log.queue", "true", err, errlen)))
        goto error;
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_error_cb(conf, kafka_error_cb);
    rd_kafka_conf_set_log_cb(conf, kafka_log_cb);
    k->prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
    if (!k->prod) {
        ret = cc_errf(err, errlen, -EINVAL, "kafka: producer: %s", e);
        goto error;
    }
    rd_kafka_set_log_queue(k->prod, NULL);
    return 0;
error:
    rd_kafka_conf_destroy(conf);
    return ret;
}

/* Re-sends the retries that are due (they are in due order: one backoff per push, FIFO). */
void kafka_resend_due(CcdKafka *k, int64_t now)
{
    int64_t n = k->n_retry;
    while (k->retry_head && n-- > 0) {
        Outgoing *o = k->retry_head;
        if (o->due_ns > now)
            break;
        k->retry_head = o->next;
        if (!k->retry_head)
            k->retry_tail = NULL;
        k->n_retry--;
        send_outgoing(k, o);
    }
}

/* At close: flushes the producer until deadline (at least 1 s from now), re-sending what is
 * in the retry list once more; what is left then fails and is counted. */
void kafka_producer_drain(CcdKafka *k, int64_t deadline, int timeout_ms)
{
    if (deadline < cc_now_ns() + 1000000000LL) /* at least 1 s for the flush */
        deadline = cc_now_ns() + 1000000000LL;
    while (k->retry_head) {
        Outgoing *o = k->retry_head;
        k->retry_head = o->next;
        k->n_retry--;
        o->attempts = o->attempts < RETRY_MAX_ATTEMPTS - 1 ? o->attempts : RETRY_MAX_ATTEMPTS - 1;
        send_outgoing(k, o);
    }
    k->retry_tail = NULL;
    while (cc_now_ns() < deadline && rd_kafka_outq_len(k->prod) > 0)
        rd_kafka_poll(k->prod, 10);
    /* What is left fails now: purged messages get delivery reports that count them. */
    k->closing = 1;
    int left = rd_kafka_outq_len(k->prod);
    if (left > 0) {
        CCD_LOG(CC_LOG_ERROR, "kafka", "%d produced message(s) not delivered within %d ms at close",
                left, timeout_ms);
        rd_kafka_purge(k->prod, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_poll(k->prod, 100);
    }
    k->st.produce_failed += (uint64_t)k->n_retry; /* re-queue failed at close */
}
