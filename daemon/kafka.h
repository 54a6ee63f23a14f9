/*
 * kafka.h — Kafka ingest for cellcastd (librdkafka high-level consumer), the embedded
 * mock cluster (`brokers: embedded`), the dead-letter producer, and at-least-once offset
 * bookkeeping. Runs on the daemon's single event base: the host calls ccd_kafka_poll()
 * from an event (the consumer queue's fd or the cron), never from worker threads.
 *
 * At-least-once: a polled message's offset is stored (rd_kafka_offsets_store) only when
 * the host says the step that consumed it is done, via ccd_kafka_ack(batch_id); stored
 * offsets are committed periodically and on close. Messages of a batch are handed to the
 * host's on_message with the batch id they belong to.
 *
 * ccd_kafka_fd() becomes readable when messages are waiting (add it to the event base with
 * EV_READ|EV_PERSIST; ccd_kafka_poll drains it). ccd_kafka_pause() pauses fetching of every
 * assigned partition (backpressure; keep calling ccd_kafka_poll so the group membership
 * stays alive). ccd_kafka_rewind(), from on_assign, starts a newly assigned partition at
 * the first message at or after a timestamp (rebuild a window of history), or at the
 * committed offset if that is earlier (never skips an unconsumed message). on_message's
 * msg points into librdkafka's message: valid only during the callback. on_assign /
 * on_revoke report changes of ownership incrementally with either protocol: with the
 * (default) eager protocol, the revoke-all/assign-all pair of a rebalance reaches the host
 * as on_revoke for the partitions that moved away and on_assign for the new ones only; a
 * partition that stays keeps its cells (default strategy range,roundrobin:
 * cooperative-sticky crashes librdkafka 2.0 on an early close). on_revoke is also called
 * from ccd_kafka_close (the consumer leaves the group). ccd_kafka_commit waits ≤ 5 s;
 * ccd_kafka_close is bounded by its timeout even with the broker gone.
 */
#ifndef CCD_KAFKA_H
#define CCD_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "cc_common.h"

typedef struct CcdKafka CcdKafka;

typedef struct CcdKafkaProp {
    const char *name, *value;
} CcdKafkaProp;

typedef struct CcdKafkaSettings {
    const char *brokers;       ///< bootstrap list, or "embedded" (default "embedded")
    const char *group_id;      ///< consumer group (default "cellcastd")
    const char *const *topics; ///< KPI topics to subscribe (default {"kpis"})
    int n_topics;
    const char *alert_topic;       ///< created on the embedded broker (default "alerts")
    const char *dead_letter_topic; ///< invalid messages go here; NULL/"" = off (default off)
    int embedded_partitions;       ///< partitions of topics created on the mock (default 4)
    const CcdKafkaProp *props;     ///< passed through to librdkafka as is
    int n_props;
    int max_poll_messages;              ///< messages per ccd_kafka_poll (default 10000)
    const CcdKafkaProp *producer_props; ///< to the dead-letter/alert producer (default none)
    int n_producer_props;
    int max_produce_queue;       ///< produced messages not yet delivered, incl. retries;
                                 ///< beyond it ccd_kafka_produce fails (default 100000)
    const char *state_topic;     ///< state handover topic (handover.h); NULL: none (handover off)
    const char *members_topic;   ///< cluster.h's members topic; NULL: none
    const char *incidents_topic; ///< incidents produced there (incidents.h); NULL: none
    int topic_setup_timeout_ms;  ///< bound of each step of the topic setup (default 5000)
} CcdKafkaSettings;

/** A topic cellcastd writes and owns (the state topic, the members topic): created before the
 *  first subscription with these partitions and configs when missing, checked when it exists
 *  (ccd_kafka_ensure_topics). */
typedef struct CcdKafkaTopicSpec {
    const char *name;
    const char *key;             ///< the configuration key that names it, for messages
    int32_t partitions;          ///< created with; 0 = the KPI topics' partition count
    int min_partitions;          ///< 1: an existing one with fewer partitions is refused
    const CcdKafkaProp *configs; ///< created with; cleanup.policy=compact is checked
    int n_configs;
    const char *without; ///< how to run without it ("" when there is no such way)
} CcdKafkaTopicSpec;

typedef struct CcdKafkaMessage {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; ///< broker/producer timestamp, -1 if none
    const void *key;
    size_t key_len;
    const void *payload;
    size_t len;
} CcdKafkaMessage;

typedef struct CcdKafkaHooks {
    void *cookie;
    /** One message of batch `batch_id` (host parses it; returns nothing: invalid messages
     *  are the host's to count and, if wanted, to pass to ccd_kafka_dead_letter). */
    void (*on_message)(void *cookie, uint64_t batch_id, const CcdKafkaMessage *msg);
    /** Partitions newly assigned to this member; the host rebuilds those cells. */
    void (*on_assign)(void *cookie, const char *topic, const int32_t *partitions, int n);
    /** Partitions this member no longer owns; the host releases their cells. */
    void (*on_revoke)(void *cookie, const char *topic, const int32_t *partitions, int n);
    /** Partitions about to be given up in an orderly way (every revoke of a rebalance, with
     *  either protocol, and the leave at close; not a loss): the host finishes what it
     *  consumed from them and hands their state over (handover.c); the stored offsets are
     *  committed synchronously right after it returns, before the group moves on. */
    void (*on_handover)(void *cookie, const char *topic, const int32_t *partitions, int n);
    /** Partitions lost (the session expired, e.g. the brokers were away): they are no
     *  longer fetched but stay the host's until the next assignment says who owns them
     *  (on_revoke then, for those that went to another member). */
    void (*on_lost)(void *cookie, const char *topic, const int32_t *partitions, int n);
} CcdKafkaHooks;

#define CCD_KAFKA_ERR_CODES 16
/** One partition the host owns (ccd_kafka_owned_partitions). */
typedef struct CcdKafkaOwned {
    const char *topic; ///< valid until the next rebalance (the next ccd_kafka_poll)
    int32_t partition;
    int fetching; ///< 1 assigned and fetched; 0 lost (unassigned, kept until reassigned)
} CcdKafkaOwned;

typedef struct CcdKafkaStats {
    uint64_t messages, bytes, batches, commits, commit_errors, dead_letters, dead_letter_errors,
        rebalances;
    int64_t lag; ///< sum over assigned partitions (high watermark - position), -1 unknown
    int assigned_partitions;
    uint64_t produced;         ///< ccd_kafka_produce messages delivered
    uint64_t produce_retries;  ///< re-sent after a failed delivery or a full queue
    uint64_t produce_failed;   ///< given up (attempts exhausted, queue bound, close)
    int64_t produce_queue;     ///< produced, not yet delivered (incl. retry list)
    uint64_t unacked_messages; ///< polled, in batches not yet acked
    uint64_t consumer_errors;  ///< consumer/broker errors reported by librdkafka
    /** consumer_errors by librdkafka error code: the first CCD_KAFKA_ERR_CODES codes seen,
     *  each with its name (rd_kafka_err2name, static); later codes in errors_other */
    struct {
        const char *name;
        int code;
        uint64_t n;
    } errors[CCD_KAFKA_ERR_CODES];
    int n_error_codes;
    uint64_t errors_other;
    uint64_t embedded_dropped; ///< embedded broker: messages its retention deleted unconsumed
    int lost_partitions;       ///< owned but not fetched: lost, waiting for a reassignment
    uint64_t losses;           ///< assignments lost (session expired)
} CcdKafkaStats;

void ccd_kafka_default_settings(CcdKafkaSettings *s);

/** Opens the consumer (and the mock cluster when brokers = "embedded"). 0 or -errno,
 *  message in err. */
int ccd_kafka_open(CcdKafka **out, const CcdKafkaSettings *s, const CcdKafkaHooks *hooks, char *err,
                   size_t errlen);

/** Bootstrap address actually used ("127.0.0.1:port,..." for the embedded cluster). */
const char *ccd_kafka_bootstrap(const CcdKafka *k);

/** Polls up to max_poll_messages without blocking, delivering them to on_message under one
 *  new batch id, which it returns (0 = nothing polled). */
uint64_t ccd_kafka_poll(CcdKafka *k);

/** The host stepped everything of batches ≤ batch_id: store their offsets for commit. */
void ccd_kafka_ack(CcdKafka *k, uint64_t batch_id);

/** Commits stored offsets now, waiting at most 5 s for the result; 0, -ETIMEDOUT, -EIO. */
int ccd_kafka_commit(CcdKafka *k);

/** Forwards an invalid message with the reason in a header; never blocks. */
void ccd_kafka_dead_letter(CcdKafka *k, const CcdKafkaMessage *msg, const char *reason);

/** Produces to a topic (alerts), keyed; delivery reports are checked and failed messages
 *  retried. 0 or -errno (queue full). */
int ccd_kafka_produce(CcdKafka *k, const char *topic, const void *key, size_t key_len,
                      const void *payload, size_t len);

/** The outcome of a tracked message: err 0 = the broker acknowledged it (acks per the
 *  producer's settings), -EIO = given up (it is not retried any more). Called on the loop
 *  thread from ccd_kafka_poll / ccd_kafka_service / ccd_kafka_close. */
typedef void (*CcdKafkaDelivered)(void *cookie, uint64_t tag, int err);

/** ccd_kafka_produce whose outcome is reported to done(cookie, tag, err) exactly once when
 *  it returns 0 (never when it fails: the caller still owns the message then). */
int ccd_kafka_produce_tracked(CcdKafka *k, const char *topic, const void *key, size_t key_len,
                              const void *payload, size_t len, CcdKafkaDelivered done, void *cookie,
                              uint64_t tag);
/** The same to a given partition (-1: the partitioner's); a NULL payload is a tombstone. */
int ccd_kafka_produce_to(CcdKafka *k, const char *topic, int32_t partition, const void *key,
                         size_t key_len, const void *payload, size_t len);

/** Serves delivery reports (ccd_kafka_poll serves them too, while messages are in flight)
 *  and re-sends due retries; called from the cron. */
void ccd_kafka_service(CcdKafka *k);

/** Partition of a key in a topic (librdkafka's default partitioner), for the host to map
 *  cells to partitions; -1 if unknown. */
int32_t ccd_kafka_partition_of(CcdKafka *k, const char *topic, const void *key, size_t key_len);

void ccd_kafka_stats(const CcdKafka *k, CcdKafkaStats *out);

/** Readable when the consumer queue went from empty to non-empty; ccd_kafka_poll drains it.
 *  If ccd_kafka_poll returned a full batch (max_poll_messages), more may be waiting without
 *  a new wake-up: poll again. */
int ccd_kafka_fd(const CcdKafka *k);

/** Pauses (1) or resumes (0) fetching on every assigned partition, and on partitions
 *  assigned later while paused. 0 or -errno. */
int ccd_kafka_pause(CcdKafka *k, int pause);

/** Only inside on_assign: start `partition` of `topic` at the first offset whose
 *  timestamp ≥ ts_ms, or at the committed offset if that is earlier (a rewind never skips
 *  an unconsumed message; messages before the committed offset come again, the host drops
 *  the steps it has). ts_ms 0 = from the beginning. 0, -EINVAL (not in an on_assign for
 *  that partition). */
int ccd_kafka_rewind(CcdKafka *k, const char *topic, int32_t partition, int64_t ts_ms);

/** Partitions of `topic` this member holds now (its live assignment), up to max in parts;
 *  returns how many it holds (may exceed max). For daemon/cluster.c. */
int ccd_kafka_assignment(const CcdKafka *k, const char *topic, int32_t *parts, int max);

/** The group member id the coordinator gave this consumer ("" before the first join) and
 *  the rebalance protocol in use ("EAGER", "COOPERATIVE", or "NONE" before it is known),
 *  into caller buffers. */
void ccd_kafka_membership(const CcdKafka *k, char *member_id, size_t id_len, char *protocol,
                          size_t protocol_len);
/** The partitions the host owns (what on_assign gave and on_revoke did not take back),
 *  lost ones included (fetching 0); fills at most max, returns how many there are. */
int ccd_kafka_owned_partitions(const CcdKafka *k, CcdKafkaOwned *out, int max);

/** Waits until everything produced so far (ccd_kafka_produce) is delivered, serving
 *  delivery reports and retries: 0, -ETIMEDOUT (still in flight after timeout_ms), -EIO (a
 *  message was given up meanwhile). Blocks the caller: for checkpoints and handovers. */
int ccd_kafka_flush(CcdKafka *k, int timeout_ms);

/** Reads partitions of a topic from the beginning to their current end with a private
 *  assign-only consumer (no group), calling fn for every message (payload NULL for a
 *  tombstone). 0, -ETIMEDOUT (not at the end after timeout_ms; what was read was passed
 *  on), -EIO. Blocks the caller: for restoring state on assign. */
int ccd_kafka_read_partitions(CcdKafka *k, const char *topic, const int32_t *parts, int n,
                              void (*fn)(void *cookie, int32_t partition, const void *key,
                                         size_t key_len, const void *payload, size_t len),
                              void *cookie, int timeout_ms);

/** Partitions of a topic (metadata, ≤ 5 s); -1 unknown (no such topic, broker away). */
int ccd_kafka_topic_partitions(CcdKafka *k, const char *topic);

/** The topics cellcastd owns under settings s (state topic, members topic), with their
 *  partitions and configs: into out (room for CCD_KAFKA_MAX_OWN_TOPICS); returns how many.
 *  Another (e.g. a model topic) is one more entry here. Points into s. */
#define CCD_KAFKA_MAX_OWN_TOPICS 4
int ccd_kafka_own_topics(const CcdKafkaSettings *s, CcdKafkaTopicSpec *out);

/** Checks the topics cellcastd owns on the brokers of s (not the embedded broker), and with
 *  create = 1 creates the missing ones (rd_kafka_CreateTopics: the spec's partitions, the
 *  KPI topics' count for 0, and its configs; replication factor: the brokers' default).
 *  Refused (-EINVAL, msg says why and the command that fixes it): a topic with fewer
 *  partitions than required, one whose cleanup.policy is not compact, a missing one the
 *  brokers refused to create (or, create = 0, a missing one: msg says it would be created).
 *  -EAGAIN: could not check everything (brokers unreachable, a KPI topic missing so its
 *  partition count is unknown, brokers without a controller — librdkafka's mock cluster —
 *  so no CreateTopics/DescribeConfigs); msg says what was left unchecked. 0: all good; msg
 *  lists what was done (created) or "". Blocks up to a few times timeout_ms. */
int ccd_kafka_check_topics(const CcdKafkaSettings *s, int create, char *msg, size_t msglen);

/** The same on an open handle, for the topics of the settings it was opened with (the
 *  first assignment calls it when the check at open returned -EAGAIN, e.g. the KPI topic
 *  did not exist yet): 0, -EINVAL, -EAGAIN as above; 0 at once when the check at open
 *  already passed or the broker is the embedded one. */
int ccd_kafka_recheck_topics(CcdKafka *k, char *msg, size_t msglen);

/** Commits, leaves the group, flushes the producer and closes; each part bounded by
 *  timeout_ms (the flush by at least 1 s), so it returns even when the broker is gone. */
void ccd_kafka_close(CcdKafka **k, int timeout_ms);

#endif
