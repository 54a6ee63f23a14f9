/* kafka_common.c — what every part of the Kafka module (kafka_common.h) shares: librdkafka's
 * logs and errors into cellcastd's log and statistics, the property helpers, and the
 * default settings. Event-loop thread only (the callbacks run inside the module's polls). */
#include "kafka_common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int kafka_log_level(int level)
{
    return level <= 3   ? CC_LOG_ERROR
           : level == 4 ? CC_LOG_WARN
           : level <= 6 ? CC_LOG_INFO
                        : CC_LOG_DEBUG;
}

void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    CcdKafka *k = rd_kafka_opaque(rk);
    if (k)
        CCD_LOG(kafka_log_level(level), "kafka", "kafka %s: %s: %s", rd_kafka_name(rk), fac, buf);
}

void kafka_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    CcdKafka *k = opaque;
    int is_consumer = rk == k->rk;
    if (is_consumer)
        kafka_count_consumer_error(k, err);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char buf[512];
        rd_kafka_resp_err_t ferr = rd_kafka_fatal_error(rk, buf, sizeof buf);
        CCD_LOG(CC_LOG_ERROR, "kafka", "kafka %s: fatal error %s: %s",
                is_consumer ? "consumer" : "producer", rd_kafka_err2name(ferr), buf);
        return;
    }
    CCD_LOG_RL_AT(is_consumer ? &k->rl_consumer : &k->rl_producer, CC_LOG_WARN, "kafka",
                  "kafka %s: %s: %s", is_consumer ? "consumer" : "producer", rd_kafka_err2name(err),
                  reason);
}

int kafka_set_prop(rd_kafka_conf_t *conf, const char *name, const char *value, char *err,
                   size_t errlen)
{
    char e[256];
    if (rd_kafka_conf_set(conf, name, value, e, sizeof e) != RD_KAFKA_CONF_OK)
        return cc_errf(err, errlen, -EINVAL, "kafka property %s=%s: %s", name, value, e);
    return 0;
}

int kafka_prop_is_forced(const char *name)
{
    return !strcmp(name, "enable.auto.offset.store") || !strcmp(name, "group.id") ||
           !strcmp(name, "bootstrap.servers") || !strcmp(name, "metadata.broker.list") ||
           !strcmp(name, "log.queue");
}

void ccd_kafka_default_settings(CcdKafkaSettings *s)
{
    static const char *const default_topics[] = {"kpis"};
    memset(s, 0, sizeof *s);
    s->brokers = "embedded";
    s->group_id = "cellcastd";
    s->topics = default_topics;
    s->n_topics = 1;
    s->alert_topic = "alerts";
    s->dead_letter_topic = NULL;
    s->embedded_partitions = 4;
    s->max_poll_messages = 10000;
    s->max_produce_queue = 100000;
    s->topic_setup_timeout_ms = 5000;
}

/* Counts a consumer error under its code (CcdKafkaStats.errors). */
void kafka_count_consumer_error(CcdKafka *k, int err)
{
    CcdKafkaStats *st = &k->st;
    st->consumer_errors++;
    for (int i = 0; i < st->n_error_codes; i++)
        if (st->errors[i].code == err) {
            st->errors[i].n++;
            return;
        }
    if (st->n_error_codes == CCD_KAFKA_ERR_CODES) {
        st->errors_other++;
        return;
    }
    st->errors[st->n_error_codes].code = err;
    st->errors[st->n_error_codes].name = rd_kafka_err2name((rd_kafka_resp_err_t)err);
    st->errors[st->n_error_codes++].n = 1;
}
