/*
 * kafka_common.h — what the files of the Kafka module share: the CcdKafka context with
 * its pending batches and outgoing messages, and the functions one file calls in another.
 * The rest of the daemon sees only kafka.h.
 *
 *   kafka.c            open/close, the embedded broker, service, flush, stats
 *   kafka_common.c     default settings, logs and errors, property helpers (all files)
 *   kafka_consumer.c   poll, batches, acks, commits, pause, lag, rewinds, the consumer handle
 *   kafka_rebalance.c  assign/revoke/lost handling, what the host owns
 *   kafka_producer.c   produce, delivery reports and retries, dead letters, partitioner
 *   kafka_reader.c     reading partitions directly (the state topic), topic partition counts
 *   kafka_topics.c     the topics cellcastd owns: created or checked before subscribing
 */
#ifndef CCD_KAFKA_COMMON_H
#define CCD_KAFKA_COMMON_H

#include "kafka.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdint.h>

#include "log.h"

/* librdkafka's rebalance callback (kafka_rebalance.c), handed to the consumer's open by
 * kafka.c so that the consumer does not call into the rebalance that calls into it. */
typedef void (*KafkaRebalanceCb)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                 rd_kafka_topic_partition_list_t *parts, void *opaque);

/* One (topic, partition) → highest offset in a batch. */
typedef struct BatchPart {
    int topic; /* index in k->topics */
    int32_t partition;
    int64_t offset;
} BatchPart;

typedef struct Batch {
    uint64_t id;
    uint64_t n_messages;
    BatchPart *parts;
    int n_parts, cap_parts;
} Batch;

/* A produced message we own until its delivery report (alerts, the demo feed): one
 * allocation holding the topic, key and payload after the struct. */
typedef struct Outgoing {
    struct Outgoing *next;
    char *topic;
    void *key;
    size_t key_len;
    void *payload;
    size_t len;
    int32_t partition; /* RD_KAFKA_PARTITION_UA: the partitioner's */
    int attempts;
    int64_t due_ns;
    CcdKafkaDelivered done; /* told the outcome (ccd_kafka_produce_tracked), or NULL */
    void *done_cookie;
    uint64_t tag;
    char data[];
} Outgoing;

typedef struct TopicInfo {
    char *name;
    int32_t partitions;    /* -1 unknown */
    rd_kafka_topic_t *rkt; /* producer-side handle for the partitioner */
} TopicInfo;

struct CcdKafka {
    char *group_id, *alert_topic, *dlq_topic;
    char **topics;
    int n_topics;
    int max_poll;
    int max_produce_queue;

    rd_kafka_t *mock_rk; /* private handle owning the embedded cluster */
    rd_kafka_mock_cluster_t *mock;
    char *bootstrap;

    rd_kafka_t *rk;                /* consumer */
    KafkaRebalanceCb rebalance_cb; /* kafka_rebalance_cb, also served at the consumer's close */
    rd_kafka_queue_t *cq;          /* its consumer queue (for the wake-up fd) */
    rd_kafka_t *prod;              /* dead letters + alerts */
    int wake_rd, wake_wr;

    CcdKafkaHooks hooks;
    rd_kafka_topic_partition_list_t *assigned; /* librdkafka's assignment */
    rd_kafka_topic_partition_list_t *held;     /* what the hooks were told the host owns */
    int coop;               /* the assignors are cooperative (decided once: kafka_open_consumer) */
    int static_member;      /* group.instance.id is set: it does not leave the group at a stop */
    int consumer_closing;   /* ccd_kafka_close began: rebalances are answered, nothing taken over */
    int group_closing;      /* rd_kafka_consumer_close_queue was called: the group terminates */
    int64_t close_deadline; /* cc_now_ns() bound of ccd_kafka_close (0: not closing) */
    int consumer_abandoned; /* it did not close by the deadline: never destroyed (kafka.c) */
    int paused;
    int lost;           /* the assignment was lost: held ⊄ assigned until the next assign */
    rd_kafka_t *reader; /* assign-only consumer for ccd_kafka_read_partitions (lazy) */
    char *state_topic, *members_topic, *incidents_topic;
    int topics_unsure;    /* the topic setup at open could not check everything */
    int setup_timeout_ms; /* CcdKafkaSettings.topic_setup_timeout_ms */
    /* Set while on_assign runs: partitions being assigned (ccd_kafka_rewind edits it). */
    rd_kafka_topic_partition_list_t *assigning;
    int rewinds;

    Batch *batches; /* pending (unacked) batches, oldest first */
    int n_batches, cap_batches;
    uint64_t next_batch;
    rd_kafka_topic_t *last_rkt; /* cache: rkt → topic index */
    int last_topic;

    Outgoing *retry_head, *retry_tail; /* waiting for a re-send */
    int64_t in_flight;                 /* produced, no delivery report yet */
    int64_t n_retry;
    int closing; /* no more retries: failures are final */

    TopicInfo *tinfo;
    int n_tinfo;

    /* embedded broker: the next offset expected per (topic, partition), to count what its
     * retention deleted before we consumed it (a jump forward in offsets) */
    BatchPart *next_off;
    int n_next_off;

    CcdKafkaStats st;
    int64_t last_lag_ns;
    CcdRateLimit rl_consumer, rl_producer, rl_store; /* log lines, by kind */
};

/* kafka_common.c: shared by the consumer, producer and topic-setup handles */
int kafka_log_level(int syslog_level); /* librdkafka's syslog level → CC_LOG_* */
void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf);
void kafka_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque);
/* rd_kafka_conf_set with the message in err; 0 or -EINVAL */
int kafka_set_prop(rd_kafka_conf_t *conf, const char *name, const char *value, char *err,
                   size_t errlen);
/* Properties cellcastd sets itself: kafka.properties cannot change them. */
int kafka_prop_is_forced(const char *name);

/* Counts a consumer error under its code (CcdKafkaStats.errors). */
void kafka_count_consumer_error(CcdKafka *k, int err);

/* kafka_consumer.c */
void kafka_batch_free(Batch *b);
void kafka_batches_forget(CcdKafka *k, const char *topic, int32_t partition);
int kafka_commit_bounded(CcdKafka *k, int timeout_ms);
void kafka_update_lag(CcdKafka *k);
void kafka_resolve_rewinds(CcdKafka *k, rd_kafka_topic_partition_list_t *l);
/* The consumer handle, its rebalances served by rebalance_cb. 0 or -errno with a message. */
int kafka_open_consumer(CcdKafka *k, const CcdKafkaSettings *s, KafkaRebalanceCb rebalance_cb,
                        char *err, size_t errlen);
/* Leaves the group and closes the consumer by deadline; 1 when librdkafka says it is closed. */
int kafka_consumer_leave(CcdKafka *k, int64_t deadline, int timeout_ms);

/* kafka_rebalance.c */
void kafka_release(CcdKafka *k, rd_kafka_topic_partition_list_t *parts);
void kafka_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                        rd_kafka_topic_partition_list_t *parts, void *opaque);

/* kafka_producer.c */
void kafka_outgoing_done(Outgoing *o, int err);
void kafka_resend_due(CcdKafka *k, int64_t now);
void kafka_producer_drain(CcdKafka *k, int64_t deadline, int timeout_ms);
int kafka_open_producer(CcdKafka *k, const CcdKafkaSettings *s, char *err, size_t errlen);

#endif
