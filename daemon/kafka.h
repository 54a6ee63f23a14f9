/*
 * kafka.h — Kafka ingest for cellcastd (librdkafka high-level consumer), the embedded
 * mock cluster (`brokers: embedded`), the dead-letter producer, and at-least-once offset
 * bookkeeping. Runs on the daemon's single event base: the host calls cc_kafka_poll()
 * from an event (the consumer queue's fd or the cron), never from worker threads.
 *
 * At-least-once: a polled message's offset is stored (rd_kafka_offsets_store) only when
 * the host says the step that consumed it is done, via cc_kafka_ack(batch_id); stored
 * offsets are committed periodically and on close. Messages of a batch are handed to the
 * host's on_message with the batch id they belong to.
 *
 * Changes since the first version of this header (all additive; engineer "kafka"):
 *  - CcKafkaSettings: producer_props (librdkafka properties of the dead-letter/alert
 *    producer; `props` go to the consumer only), max_produce_queue; cc_kafka_default_settings
 *    fills them. Properties the module forces or tunes are listed at cc_kafka_open.
 *  - CcKafkaStats: produced, produce_retries, produce_failed, produce_queue,
 *    unacked_messages, consumer_errors.
 *  - cc_kafka_fd(): a descriptor that becomes readable when messages are waiting (add it
 *    to the event base with EV_READ|EV_PERSIST; cc_kafka_poll drains it).
 *  - cc_kafka_pause(): pause/resume fetching of all assigned partitions (backpressure;
 *    keep calling cc_kafka_poll while paused so the group membership stays alive).
 *  - cc_kafka_rewind(): called from on_assign, starts a newly assigned partition at the
 *    first message at or after a timestamp (rebuild a window of history), or at the
 *    committed offset if that is earlier (never skips an unconsumed message).
 *  - cc_kafka_commit waits ≤ 5 s; cc_kafka_close is bounded by its timeout even with the
 *    broker gone (it used to hang in rd_kafka_consumer_close).
 *  - on_message's msg points into librdkafka's message: valid only during the callback.
 *  - on_revoke is also called from cc_kafka_close (the consumer leaves the group).
 *  - on_assign / on_revoke report changes of ownership incrementally with either protocol:
 *    with the (default) eager protocol, the revoke-all/assign-all pair of a rebalance
 *    reaches the host as on_revoke for the partitions that moved away and on_assign for
 *    the new ones only; a partition that stays keeps its cells. (Default strategy is
 *    range,roundrobin: cooperative-sticky crashes librdkafka 2.0 on an early close.)
 */
#ifndef CC_DAEMON_KAFKA_H
#define CC_DAEMON_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "cc_common.h"

typedef struct CcKafka CcKafka;

typedef struct CcKafkaProp {
    const char *name, *value;
} CcKafkaProp;

typedef struct CcKafkaSettings {
    const char *brokers;            ///< bootstrap list, or "embedded" (default "embedded")
    const char *group_id;           ///< consumer group (default "cellcastd")
    const char *const *topics;      ///< KPI topics to subscribe (default {"kpis"})
    int n_topics;
    const char *alert_topic;        ///< created on the embedded broker (default "alerts")
    const char *dead_letter_topic;  ///< invalid messages go here; NULL/"" = off (default off)
    int embedded_partitions;        ///< partitions of topics created on the mock (default 4)
    const CcKafkaProp *props;       ///< passed through to librdkafka as is
    int n_props;
    int max_poll_messages;          ///< messages per cc_kafka_poll (default 10000)
    CcLogger logger;
    const CcKafkaProp *producer_props; ///< to the dead-letter/alert producer (default none)
    int n_producer_props;
    int max_produce_queue;          ///< produced messages not yet delivered, incl. retries;
                                    ///< beyond it cc_kafka_produce fails (default 100000)
} CcKafkaSettings;

typedef struct CcKafkaMessage {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms;           ///< broker/producer timestamp, -1 if none
    const void *key;
    size_t key_len;
    const void *payload;
    size_t len;
} CcKafkaMessage;

typedef struct CcKafkaHooks {
    void *cookie;
    /** One message of batch `batch_id` (host parses it; returns nothing: invalid messages
     *  are the host's to count and, if wanted, to pass to cc_kafka_dead_letter). */
    void (*on_message)(void *cookie, uint64_t batch_id, const CcKafkaMessage *msg);
    /** Partitions newly assigned to this member; the host rebuilds those cells. */
    void (*on_assign)(void *cookie, const char *topic, const int32_t *partitions, int n);
    /** Partitions this member no longer owns; the host releases their cells. */
    void (*on_revoke)(void *cookie, const char *topic, const int32_t *partitions, int n);
} CcKafkaHooks;

typedef struct CcKafkaStats {
    uint64_t messages, bytes, batches, commits, commit_errors, dead_letters,
        dead_letter_errors, rebalances;
    int64_t lag;                    ///< sum over assigned partitions (high watermark - position), -1 unknown
    int assigned_partitions;
    uint64_t produced;              ///< cc_kafka_produce messages delivered
    uint64_t produce_retries;       ///< re-sent after a failed delivery or a full queue
    uint64_t produce_failed;        ///< given up (attempts exhausted, queue bound, close)
    int64_t produce_queue;          ///< produced, not yet delivered (incl. retry list)
    uint64_t unacked_messages;      ///< polled, in batches not yet acked
    uint64_t consumer_errors;       ///< consumer/broker errors reported by librdkafka
} CcKafkaStats;

void cc_kafka_default_settings(CcKafkaSettings *s);

/** Opens the consumer (and the mock cluster when brokers = "embedded"). 0 or -errno,
 *  message in err. */
int cc_kafka_open(CcKafka **out, const CcKafkaSettings *s, const CcKafkaHooks *hooks,
                  char *err, size_t errlen);

/** Bootstrap address actually used ("127.0.0.1:port,..." for the embedded cluster). */
const char *cc_kafka_bootstrap(const CcKafka *k);

/** Polls up to max_poll_messages without blocking, delivering them to on_message under one
 *  new batch id, which it returns (0 = nothing polled). */
uint64_t cc_kafka_poll(CcKafka *k);

/** The host stepped everything of batches ≤ batch_id: store their offsets for commit. */
void cc_kafka_ack(CcKafka *k, uint64_t batch_id);

/** Commits stored offsets now, waiting at most 5 s for the result; 0, -ETIMEDOUT, -EIO. */
int cc_kafka_commit(CcKafka *k);

/** Forwards an invalid message with the reason in a header; never blocks. */
void cc_kafka_dead_letter(CcKafka *k, const CcKafkaMessage *msg, const char *reason);

/** Produces to a topic (alerts), keyed; delivery reports are checked and failed messages
 *  retried. 0 or -errno (queue full). */
int cc_kafka_produce(CcKafka *k, const char *topic, const void *key, size_t key_len,
                     const void *payload, size_t len);

/** Serves delivery reports (cc_kafka_poll serves them too, while messages are in flight)
 *  and re-sends due retries; called from the cron. */
void cc_kafka_service(CcKafka *k);

/** Partition of a key in a topic (librdkafka's default partitioner), for the host to map
 *  cells to partitions; -1 if unknown. */
int32_t cc_kafka_partition_of(CcKafka *k, const char *topic, const void *key, size_t key_len);

void cc_kafka_stats(const CcKafka *k, CcKafkaStats *out);

/** Readable when the consumer queue went from empty to non-empty; cc_kafka_poll drains it.
 *  If cc_kafka_poll returned a full batch (max_poll_messages), more may be waiting without
 *  a new wake-up: poll again. */
int cc_kafka_fd(const CcKafka *k);

/** Pauses (1) or resumes (0) fetching on every assigned partition, and on partitions
 *  assigned later while paused. 0 or -errno. */
int cc_kafka_pause(CcKafka *k, int pause);

/** Only inside on_assign: start `partition` of `topic` at the first offset whose
 *  timestamp ≥ ts_ms, or at the committed offset if that is earlier (a rewind never skips
 *  an unconsumed message; messages before the committed offset come again, the host drops
 *  the steps it has). ts_ms 0 = from the beginning. 0, -EINVAL (not in an on_assign for
 *  that partition). */
int cc_kafka_rewind(CcKafka *k, const char *topic, int32_t partition, int64_t ts_ms);

/** Commits, leaves the group, flushes the producer and closes; each part bounded by
 *  timeout_ms (the flush by at least 1 s), so it returns even when the broker is gone. */
void cc_kafka_close(CcKafka **k, int timeout_ms);

#endif
