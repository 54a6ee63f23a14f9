/*
 * kafka_reader.c — reads partitions directly, outside the consumer group: the state topic's
 * partitions at an assignment (ccd_kafka_read_partitions, for handover.c) through a lazy
 * assign-only consumer that never joins, and a topic's partition count.
 */
#include "kafka_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int open_reader(CcdKafka *k)
{
    char e[512], gid[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    snprintf(gid, sizeof gid, "%s.state-reader", k->group_id); /* assign only: never joins */
    if (kafka_set_prop(conf, "bootstrap.servers", k->bootstrap, e, sizeof e) ||
        kafka_set_prop(conf, "group.id", gid, e, sizeof e) ||
        kafka_set_prop(conf, "enable.auto.commit", "false", e, sizeof e) ||
        kafka_set_prop(conf, "enable.partition.eof", "true", e, sizeof e) ||
        kafka_set_prop(conf, "fetch.wait.max.ms", "10", e, sizeof e) ||
        kafka_set_prop(conf, "client.id", "cellcastd-state-reader", e, sizeof e) ||
        kafka_set_prop(conf, "log_level", "4", e, sizeof e)) {
        rd_kafka_conf_destroy(conf);
        CCD_LOG(CC_LOG_ERROR, "kafka", "state reader: %s", e);
        return -EINVAL;
    }
    k->reader = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
    if (!k->reader) {
        rd_kafka_conf_destroy(conf);
        CCD_LOG(CC_LOG_ERROR, "kafka", "state reader: %s", e);
        return -EIO;
    }
    rd_kafka_poll_set_consumer(k->reader);
    return 0;
}

int ccd_kafka_read_partitions(CcdKafka *k, const char *topic, const int32_t *parts, int n,
                              void (*fn)(void *cookie, int32_t partition, const void *key,
                                         size_t key_len, const void *payload, size_t len),
                              void *cookie, int timeout_ms)
{
    int ret = 0, left = 0;
    if (!k->reader && (ret = open_reader(k)))
        return ret;
    int64_t deadline = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    int64_t *end = calloc((size_t)(n > 0 ? n : 1), sizeof *end);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
    if (!end) {
        rd_kafka_topic_partition_list_destroy(l);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        int64_t lo = -1, hi = -1;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            k->reader, topic, parts[i], &lo, &hi, (int)((deadline - cc_now_ns()) / 1000000));
        if (err) {
            CCD_LOG(CC_LOG_WARN, "kafka", "%s [%" PRId32 "]: end offset unknown: %s", topic,
                    parts[i], rd_kafka_err2str(err));
            ret = err == RD_KAFKA_RESP_ERR__TIMED_OUT ? -ETIMEDOUT : -EIO;
            goto out;
        }
        end[i] = hi;
        if (hi > lo) { /* something to read */
            rd_kafka_topic_partition_list_add(l, topic, parts[i])->offset =
                RD_KAFKA_OFFSET_BEGINNING;
            left++;
        }
    }
    if (!left)
        goto out;
    if (rd_kafka_assign(k->reader, l)) {
        ret = -EIO;
        goto out;
    }
    while (left > 0) {
        if (cc_now_ns() >= deadline) {
            ret = -ETIMEDOUT;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(k->reader, 100);
        if (!m)
            continue;
        int i = 0;
        while (i < n && parts[i] != m->partition)
            i++;
        if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            CCD_LOG_RL_AT(&k->rl_consumer, CC_LOG_WARN, "kafka", "reading %s [%" PRId32 "]: %s",
                          topic, m->partition, rd_kafka_message_errstr(m));
        } else if (i < n && end[i] >= 0) {
            if (!m->err && m->offset < end[i])
                fn(cookie, m->partition, m->key, m->key_len, m->payload, m->len);
            if (m->err || m->offset + 1 >= end[i]) { /* at the end it had when we started */
                end[i] = -1;
                left--;
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(k->reader, NULL);
out:
    rd_kafka_topic_partition_list_destroy(l);
    free(end);
    return ret;
}

int ccd_kafka_topic_partitions(CcdKafka *k, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->rk, topic, NULL);
    int n = -1;
    if (rkt && !rd_kafka_metadata(k->rk, 0, rkt, &md, 5000) && md->topic_cnt == 1 &&
        !md->topics[0].err)
        n = md->topics[0].partition_cnt;
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return n;
}
