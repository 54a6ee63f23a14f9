/*
 * kafka.c — cellcastd's Kafka module (see kafka.h): the high-level consumer with
 * at-least-once offset bookkeeping, the rebalance callback, the embedded mock cluster,
 * and one producer for dead letters and alerts with checked delivery and bounded retries.
 *
 * Threads: everything here runs on the host's event-loop thread. librdkafka's own threads
 * only hand work to queues that the calls below serve (consumer queue: messages,
 * rebalances, errors and logs; producer queue: delivery reports, errors and logs), so
 * every callback of this file runs inside ccd_kafka_poll / ccd_kafka_service / close.
 * The embedded broker's handle is never polled; its (rare) logs go to stderr directly.
 *
 * Offsets: enable.auto.offset.store=false. Every polled message joins the current batch,
 * which remembers per (topic, partition) the highest offset it holds. ccd_kafka_ack(id)
 * stores offset+1 of every batch ≤ id (rd_kafka_offsets_store); librdkafka's auto-commit
 * (auto.commit.interval.ms) commits what is stored, and close commits synchronously.
 * A revoked partition's entries are removed from pending batches, so an ack arriving
 * after the rebalance cannot store an offset for a partition another member now owns.
 *
 * Consumer tuning (defaults; every one can be overridden through `props`):
 *   queued.min.messages=1000000, queued.max.messages.kbytes=262144 — librdkafka 2.0 stops
 *     fetching a partition whose local queue is above either threshold and (without
 *     fetch.queue.backoff.ms, added in 2.1) only re-decides on its next broker-thread
 *     wake-up, up to ~1 s later: a consumer that drains a full queue faster than that
 *     idles. With thresholds well above one poll's worth of messages (10k) times the
 *     seconds a backlog takes to drain, catch-up reads stay fetch-bound, not stall-bound.
 *     The cost is memory while the host is paused: ≤ 256 MiB of queued messages.
 *     Measured (tests/bench/ingest_bench --consume, 300k messages of ~210 B in 16
 *     partitions, 2-core box): thresholds of 10k messages / 2 MiB → 37k msg/s with 7.9 s of
 *     8.0 s spent waiting on an empty queue (19.7k msg/s, 9.1 s stalled, with 20 µs of work
 *     per message); these defaults → 2.4M msg/s and 49.5k msg/s, no stall.
 *   fetch.wait.max.ms=50 — the broker answers an empty fetch after 50 ms instead of 500,
 *     so a partition that becomes busy is fetched sooner and close() is quicker.
 *   fetch.error.backoff.ms=100 — retry a failed fetch soon (embedded broker restarts).
 *   auto.offset.reset=earliest — a new group reads the history (it needs a window to
 *     warm the cells), not only what arrives after it joined.
 *   enable.partition.eof=false, enable.auto.commit=true, auto.commit.interval.ms=1000.
 *   partition.assignment.strategy=range,roundrobin (eager) — NOT cooperative-sticky:
 *     librdkafka < 2.3 asserts in rd_kafka_sticky_assignor_state_destroy when a consumer
 *     using it is closed before its first assignment (librdkafka issue #4312, fixed by
 *     PR #4381), i.e. a SIGTERM during the first join kills cellcastd. The rebalance
 *     callback handles both protocols: with a fixed librdkafka set
 *     kafka.properties.partition.assignment.strategy=cooperative-sticky so that a member
 *     joining or leaving moves only the partitions that change owner. (Still so in 2.0.2,
 *     checked for issue 14; 2.4 also fixes a hang on close with cooperative, #4527.)
 *   session.timeout.ms=10000, heartbeat.interval.ms=1000 — a crashed member's partitions
 *     move after ≤ 10 s (librdkafka's default 45 s left its cells unserved that long).
 *   reconnect.backoff.max.ms=1000 — during a broker outage the backoff between connection
 *     attempts doubles up to this (librdkafka's default 10 s): a member then found the
 *     group coordinator back up at once but waited up to 8.7 s for its connection to it
 *     before rejoining, and every late joiner cost the group one more eager rebalance
 *     (tests/test_cluster_failover.sh after a 9 s outage: cells served again 6-25 s after
 *     the brokers, 0-8.7 s of it waiting for that connection; with 1 s: 2-6 s, ≤ 0.2 s).
 *
 * Several members (issue 14, handover.c): a revoke that is not a loss is announced first
 * (on_handover: the host steps what it consumed, hands the state over and acks) and the
 * stored offsets are committed before the callback returns. A LOST assignment (session
 * expired, e.g. the brokers were away) is not a revoke for the host: the partitions stay
 * `held` (on_lost), the lag is unknown (-1 inside, absent from /metrics), and the next assignment
 * releases those that went elsewhere and announces again those that came back. Forced (props cannot
 * change them): enable.auto.offset.store=false, group.id, bootstrap.servers, log.queue=true.
 *
 * The embedded broker (`brokers: embedded`) is librdkafka's mock cluster: one in-process
 * broker on 127.0.0.1 with an ephemeral port, all in memory, gone with the process. Its
 * limits (hard-coded in librdkafka 2.0's rdkafka_mock.c): a partition keeps only its newest
 * 5 MiB / 100k message sets — older messages are deleted even when nobody consumed them
 * (≈ 25k KPI messages of ~200 bytes per partition: more partitions = more retention);
 * timestamp lookups answer "end", so ccd_kafka_rewind works there only to 0; a member that
 * leaves or dies holds the next rebalance up to session.timeout.ms. It is the demo and
 * test default; production points `brokers` at a real cluster.
 *
 * Topics of our own (issue 29; ccd_kafka_own_topics): the state topic (kafka.state_topic, the
 * KPI topics' partition count, co-partitioned) and the members topic (1 partition), both
 * cleanup.policy=compact. ccd_kafka_open creates the missing ones through the admin API
 * before the producer and the consumer exist — a broker that auto-creates would otherwise
 * make them at the first record with its default count (4 against a KPI topic of 12: the
 * handover went off) and not compacted — and refuses to open when an existing one has too
 * few partitions or is not compacted (DescribeConfigs), naming the command that fixes it.
 * What it cannot check (brokers down, KPI topic not there yet, no controller: librdkafka's
 * mock cluster implements neither CreateTopics nor DescribeConfigs) is logged and checked
 * again at the first assignment (ccd_kafka_recheck_topics, from handover.c). Lookups list
 * all topics: a named lookup may make the broker auto-create the topic it asks about.
 *
 * Producer (dead letters and alerts): enable.idempotence=true (no duplicate and ordered
 * per partition across librdkafka's internal retries), linger.ms=5, delivery.timeout.ms=
 * 30000. A message whose delivery finally failed with a retriable error is kept and
 * re-produced from ccd_kafka_service with exponential backoff (100 ms .. 10 s), at most
 * 8 times; anything given up is counted (produce_failed) and logged, never dropped
 * silently. Dead letters are best effort: counted in dead_letter_errors when they fail.
 */
#include "kafka.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define RETRY_MAX_ATTEMPTS 8
#define RETRY_BACKOFF_MIN_NS (100 * 1000000LL)
#define RETRY_BACKOFF_MAX_NS (10000 * 1000000LL)
#define LAG_PERIOD_NS (1000 * 1000000LL)

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

    rd_kafka_t *rk;       /* consumer */
    rd_kafka_queue_t *cq; /* its consumer queue (for the wake-up fd) */
    rd_kafka_t *prod;     /* dead letters + alerts */
    int wake_rd, wake_wr;

    CcdKafkaHooks hooks;
    rd_kafka_topic_partition_list_t *assigned; /* librdkafka's assignment */
    rd_kafka_topic_partition_list_t *held;     /* what the hooks were told the host owns */
    int consumer_closing;
    int paused;
    int lost;           /* the assignment was lost: held ⊄ assigned until the next assign */
    rd_kafka_t *reader; /* assign-only consumer for ccd_kafka_read_partitions (lazy) */
    char *state_topic, *members_topic;
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

/* ---- small helpers ---- */

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static int level_of_syslog(int level)
{
    return level <= 3   ? CC_LOG_ERROR
           : level == 4 ? CC_LOG_WARN
           : level <= 6 ? CC_LOG_INFO
                        : CC_LOG_DEBUG;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    CcdKafka *k = rd_kafka_opaque(rk);
    if (k)
        CCD_LOG(level_of_syslog(level), "kafka", "kafka %s: %s: %s", rd_kafka_name(rk), fac, buf);
}

/* Counts a consumer error under its code (CcdKafkaStats.errors). */
static void count_consumer_error(CcdKafka *k, int err)
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

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    CcdKafka *k = opaque;
    int is_consumer = rk == k->rk;
    if (is_consumer)
        count_consumer_error(k, err);
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

/* Result of every commit, automatic or ccd_kafka_commit's (served on the consumer queue). */
static void commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    CcdKafka *k = opaque;
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return;
    if (!err) {
        for (int i = 0; offsets && i < offsets->cnt; i++)
            if (offsets->elems[i].err) {
                err = offsets->elems[i].err;
                break;
            }
    }
    if (err) {
        k->st.commit_errors++;
        CCD_LOG_RL_AT(&k->rl_store, CC_LOG_WARN, "kafka", "offset commit failed: %s",
                      rd_kafka_err2str(err));
    } else {
        k->st.commits++;
    }
}

static int set_prop(rd_kafka_conf_t *conf, const char *name, const char *value, char *err,
                    size_t errlen)
{
    char e[256];
    if (rd_kafka_conf_set(conf, name, value, e, sizeof e) != RD_KAFKA_CONF_OK)
        return cc_errf(err, errlen, -EINVAL, "kafka property %s=%s: %s", name, value, e);
    return 0;
}

static int topic_index(CcdKafka *k, rd_kafka_topic_t *rkt)
{
    if (rkt == k->last_rkt)
        return k->last_topic;
    const char *name = rd_kafka_topic_name(rkt);
    for (int i = 0; i < k->n_topics; i++)
        if (!strcmp(k->topics[i], name)) {
            k->last_rkt = rkt;
            k->last_topic = i;
            return i;
        }
    return -1;
}

/* Embedded broker only: it creates its topics empty, so every partition starts at offset
 * 0 for us; a message past the next offset expected, that offset being below the
 * partition's log start now, means the mock's retention (newest ~5 MiB per partition)
 * deleted the ones between, unconsumed. (A real cluster leaves gaps for transaction
 * markers and compaction: not counted there.) */
static void note_offset(CcdKafka *k, int topic, int32_t partition, int64_t offset)
{
    BatchPart *e = NULL;
    for (int i = 0; i < k->n_next_off && !e; i++)
        if (k->next_off[i].topic == topic && k->next_off[i].partition == partition)
            e = &k->next_off[i];
    if (!e) {
        BatchPart *n = realloc(k->next_off, (size_t)(k->n_next_off + 1) * sizeof *n);
        if (!n)
            return;
        k->next_off = n;
        e = &n[k->n_next_off++];
        *e = (BatchPart){topic, partition, 0};
    }
    int64_t lo = -1, hi = -1;
    if (offset > e->offset &&
        (rd_kafka_get_watermark_offsets(k->rk, k->topics[topic], partition, &lo, &hi) || lo < 0 ||
         e->offset < lo)) {
        k->st.embedded_dropped += (uint64_t)(offset - e->offset);
        CCD_LOG_RL_AT(&k->rl_consumer, CC_LOG_ERROR, "kafka",
                      "embedded broker: %" PRId64 " message(s) of %s [%" PRId32
                      "] deleted before they were consumed (it keeps only the newest ~5 MiB "
                      "per partition; produce slower, or use a real cluster)",
                      offset - e->offset, k->topics[topic], partition);
    }
    if (offset + 1 > e->offset)
        e->offset = offset + 1;
}

static int topic_index_name(const CcdKafka *k, const char *name)
{
    for (int i = 0; i < k->n_topics; i++)
        if (!strcmp(k->topics[i], name))
            return i;
    return -1;
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

const char *ccd_kafka_bootstrap(const CcdKafka *k) { return k->bootstrap; }

int ccd_kafka_fd(const CcdKafka *k) { return k->wake_rd; }

/* ---- pending batches ---- */

static void batch_free(Batch *b)
{
    free(b->parts);
    b->parts = NULL;
    b->n_parts = b->cap_parts = 0;
}

static Batch *batch_open(CcdKafka *k)
{
    if (k->n_batches == k->cap_batches) {
        int cap = k->cap_batches ? k->cap_batches * 2 : 16;
        Batch *nb = realloc(k->batches, (size_t)cap * sizeof *nb);
        if (!nb)
            return NULL;
        k->batches = nb;
        k->cap_batches = cap;
    }
    Batch *b = &k->batches[k->n_batches++];
    memset(b, 0, sizeof *b);
    b->id = ++k->next_batch;
    return b;
}

static int batch_note(Batch *b, int topic, int32_t partition, int64_t offset)
{
    for (int i = 0; i < b->n_parts; i++) {
        BatchPart *p = &b->parts[i];
        if (p->topic == topic && p->partition == partition) {
            if (offset > p->offset)
                p->offset = offset;
            return 0;
        }
    }
    if (b->n_parts == b->cap_parts) {
        int cap = b->cap_parts ? b->cap_parts * 2 : 8;
        BatchPart *np = realloc(b->parts, (size_t)cap * sizeof *np);
        if (!np)
            return -ENOMEM;
        b->parts = np;
        b->cap_parts = cap;
    }
    b->parts[b->n_parts++] = (BatchPart){topic, partition, offset};
    return 0;
}

/* Drops a revoked partition from every pending batch. */
static void batches_forget(CcdKafka *k, const char *topic, int32_t partition)
{
    int t = topic_index_name(k, topic);
    for (int i = 0; i < k->n_batches; i++) {
        Batch *b = &k->batches[i];
        for (int j = 0; j < b->n_parts; j++)
            if (b->parts[j].topic == t && b->parts[j].partition == partition)
                b->parts[j--] = b->parts[--b->n_parts];
    }
}

void ccd_kafka_ack(CcdKafka *k, uint64_t batch_id)
{
    int n = 0;
    while (n < k->n_batches && k->batches[n].id <= batch_id)
        n++;
    if (!n)
        return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    for (int i = 0; i < n; i++) {
        Batch *b = &k->batches[i];
        for (int j = 0; j < b->n_parts; j++) {
            BatchPart *p = &b->parts[j];
            rd_kafka_topic_partition_t *tp =
                rd_kafka_topic_partition_list_find(l, k->topics[p->topic], p->partition);
            if (!tp)
                tp = rd_kafka_topic_partition_list_add(l, k->topics[p->topic], p->partition);
            if (p->offset + 1 > tp->offset)
                tp->offset = p->offset + 1;
        }
        k->st.unacked_messages -= b->n_messages;
        batch_free(b);
    }
    memmove(k->batches, k->batches + n, (size_t)(k->n_batches - n) * sizeof *k->batches);
    k->n_batches -= n;
    if (l->cnt) {
        rd_kafka_resp_err_t err = rd_kafka_offsets_store(k->rk, l);
        for (int i = 0; i < l->cnt; i++) {
            rd_kafka_resp_err_t e = l->elems[i].err;
            if (e || err)
                CCD_LOG_RL_AT(&k->rl_store, CC_LOG_WARN, "kafka",
                              "storing offset %" PRId64 " of %s [%" PRId32 "]: %s",
                              l->elems[i].offset, l->elems[i].topic, l->elems[i].partition,
                              rd_kafka_err2str(e ? e : err));
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
}

/* ---- rebalance ---- */

static int commit_bounded(CcdKafka *k, int timeout_ms);

/* Calls hook per topic with the partitions of that topic in list l. */
static void call_per_topic(CcdKafka *k, rd_kafka_topic_partition_list_t *l,
                           void (*hook)(void *, const char *, const int32_t *, int))
{
    if (!hook || !l->cnt)
        return;
    int32_t *parts = malloc((size_t)l->cnt * sizeof *parts);
    if (!parts) {
        CCD_LOG(CC_LOG_ERROR, "kafka", "out of memory in rebalance");
        abort(); /* daemon policy: log and exit on OOM; losing a rebalance is worse */
    }
    for (int i = 0; i < l->cnt; i++) {
        const char *t = l->elems[i].topic;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(l->elems[j].topic, t);
        if (seen)
            continue;
        int n = 0;
        for (int j = i; j < l->cnt; j++)
            if (!strcmp(l->elems[j].topic, t))
                parts[n++] = l->elems[j].partition;
        hook(k->hooks.cookie, t, parts, n);
    }
    free(parts);
}

int ccd_kafka_rewind(CcdKafka *k, const char *topic, int32_t partition, int64_t ts_ms)
{
    if (!k->assigning)
        return -EINVAL;
    rd_kafka_topic_partition_t *tp =
        rd_kafka_topic_partition_list_find(k->assigning, topic, partition);
    if (!tp || ts_ms < 0)
        return -EINVAL;
    if (ts_ms == 0) { /* everything: no lookup needed */
        tp->offset = RD_KAFKA_OFFSET_BEGINNING;
        return 0;
    }
    tp->offset = ts_ms; /* a timestamp until resolved by offsets_for_times */
    tp->opaque = (void *)1;
    k->rewinds++;
    return 0;
}

/*
 * Resolves the timestamps ccd_kafka_rewind put into l into start offsets (blocking, ≤ 5 s
 * per lookup). A rewind never skips an unconsumed message: the start is the earlier of
 * the timestamp's offset and the committed offset. With no commit yet it is the
 * timestamp's offset (history older than the window is not replayed), or the reset policy
 * when the lookup finds nothing. (librdkafka 2.0's mock cluster answers every timestamp
 * lookup with -1, so on the embedded broker a rewind other than to 0 starts at the
 * committed offset.)
 */
static void resolve_rewinds(CcdKafka *k, rd_kafka_topic_partition_list_t *l)
{
    rd_kafka_topic_partition_list_t *q = rd_kafka_topic_partition_list_new(l->cnt);
    rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_new(l->cnt);
    for (int i = 0; i < l->cnt; i++)
        if (l->elems[i].opaque) {
            rd_kafka_topic_partition_list_add(q, l->elems[i].topic, l->elems[i].partition)->offset =
                l->elems[i].offset;
            rd_kafka_topic_partition_list_add(c, l->elems[i].topic, l->elems[i].partition);
        }
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(k->rk, q, 5000);
    rd_kafka_resp_err_t cerr = rd_kafka_committed(k->rk, c, 5000);
    for (int i = 0; i < l->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &l->elems[i];
        if (!tp->opaque)
            continue;
        tp->opaque = NULL;
        rd_kafka_topic_partition_t *r =
            rd_kafka_topic_partition_list_find(q, tp->topic, tp->partition);
        rd_kafka_topic_partition_t *cm =
            rd_kafka_topic_partition_list_find(c, tp->topic, tp->partition);
        int64_t at = !err && r && !r->err && r->offset >= 0 ? r->offset : -1;
        int64_t committed = !cerr && cm && !cm->err && cm->offset >= 0 ? cm->offset : -1;
        if (cerr || (cm && cm->err)) {
            tp->offset = RD_KAFKA_OFFSET_INVALID; /* cannot tell: the committed offset */
            CCD_LOG(CC_LOG_WARN, "kafka",
                    "%s [%" PRId32 "]: rewind skipped, committed "
                    "offset unknown (%s)",
                    tp->topic, tp->partition, rd_kafka_err2str(cerr ? cerr : cm->err));
            continue;
        }
        if (at >= 0 && (committed < 0 || at < committed))
            tp->offset = at;
        else
            tp->offset = committed >= 0 ? committed : RD_KAFKA_OFFSET_INVALID;
        CCD_LOG(CC_LOG_INFO, "kafka",
                "%s [%" PRId32 "] starts at offset %" PRId64 " (rewind lookup %" PRId64
                ", committed %" PRId64 ")",
                tp->topic, tp->partition, tp->offset, at, committed);
    }
    rd_kafka_topic_partition_list_destroy(q);
    rd_kafka_topic_partition_list_destroy(c);
}

static void list_remove(rd_kafka_topic_partition_list_t *from,
                        const rd_kafka_topic_partition_list_t *what)
{
    for (int i = 0; i < what->cnt; i++)
        rd_kafka_topic_partition_list_del(from, what->elems[i].topic, what->elems[i].partition);
}

/* Elements of a that are not in b (a new list). */
static rd_kafka_topic_partition_list_t *list_minus(const rd_kafka_topic_partition_list_t *a,
                                                   const rd_kafka_topic_partition_list_t *b)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(a->cnt ? a->cnt : 1);
    for (int i = 0; i < a->cnt; i++)
        if (!rd_kafka_topic_partition_list_find(b, a->elems[i].topic, a->elems[i].partition))
            rd_kafka_topic_partition_list_add(l, a->elems[i].topic, a->elems[i].partition);
    return l;
}

/* Tells the host that it no longer owns `parts` (on_revoke) and forgets them. */
static void release(CcdKafka *k, rd_kafka_topic_partition_list_t *parts)
{
    call_per_topic(k, parts, k->hooks.on_revoke);
    if (parts == k->held) {
        rd_kafka_topic_partition_list_destroy(k->held);
        k->held = rd_kafka_topic_partition_list_new(16);
    } else {
        list_remove(k->held, parts);
    }
}

/*
 * The hooks always see incremental changes of ownership, whatever the protocol: with the
 * eager protocol librdkafka revokes everything on every rebalance and assigns the new set
 * right after; the revoke is held back until that assign and then only the partitions
 * that really moved away are revoked, and only the new ones assigned — so the cells of a
 * partition that stays with this member stay warm. A revoke at close, a lost assignment
 * or a rebalance error is passed on at once. Offsets of pending batches are forgotten at
 * every revoke (the partitions restart from their committed offsets; the host drops the
 * steps it already has).
 */
static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    CcdKafka *k = opaque;
    int coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
    rd_kafka_error_t *e = NULL;
    rd_kafka_resp_err_t re = 0;

    k->st.rebalances++;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < parts->cnt; i++) {
            parts->elems[i].offset = RD_KAFKA_OFFSET_INVALID; /* committed, or the reset */
            parts->elems[i].opaque = NULL;
        }
        if (!coop || k->lost) { /* the deferred revoke: what this member does not get back */
            rd_kafka_topic_partition_list_t *gone = list_minus(k->held, parts);
            if (coop) /* what stayed assigned through the loss is not gone either */
                list_remove(gone, k->assigned);
            release(k, gone);
            rd_kafka_topic_partition_list_destroy(gone);
        }
        /* After a loss another member may have owned a partition meanwhile: every
         * partition assigned back is announced again (the host restores the newer state). */
        rd_kafka_topic_partition_list_t *none = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_t *fresh = list_minus(parts, k->lost ? none : k->held);
        rd_kafka_topic_partition_list_destroy(none);
        k->lost = 0;
        k->assigning = parts;
        k->rewinds = 0;
        call_per_topic(k, fresh, k->hooks.on_assign);
        k->assigning = NULL;
        for (int i = 0; i < fresh->cnt; i++)
            if (!rd_kafka_topic_partition_list_find(k->held, fresh->elems[i].topic,
                                                    fresh->elems[i].partition))
                rd_kafka_topic_partition_list_add(k->held, fresh->elems[i].topic,
                                                  fresh->elems[i].partition);
        if (k->rewinds)
            resolve_rewinds(k, parts);
        if (coop)
            e = rd_kafka_incremental_assign(rk, parts);
        else
            re = rd_kafka_assign(rk, parts);
        for (int i = 0; i < parts->cnt; i++)
            rd_kafka_topic_partition_list_add(k->assigned, parts->elems[i].topic,
                                              parts->elems[i].partition);
        if (k->paused)
            rd_kafka_pause_partitions(rk, parts);
        CCD_LOG(CC_LOG_INFO, "kafka", "%d partition(s) assigned (%s), %d new, %d held", parts->cnt,
                coop ? "cooperative" : "eager", fresh->cnt, k->assigned->cnt);
        rd_kafka_topic_partition_list_destroy(fresh);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        int lost = rd_kafka_assignment_lost(rk);
        if (lost) {
            /* Not released: the cells stay the host's until an assignment says where the
             * partitions went (a broker outage must not cost the state of every cell). */
            k->lost = 1;
            k->st.losses++;
            call_per_topic(k, parts, k->hooks.on_lost);
        } else {
            /* An orderly give-up: the host hands the state over and acks what it stepped;
             * commit it now, while the generation is still ours (the next owner starts at
             * the committed offsets, consistent with the state it reads). */
            call_per_topic(k, parts, k->hooks.on_handover);
            if (k->hooks.on_handover)
                commit_bounded(k, 5000);
        }
        if (!lost && (coop || k->consumer_closing))
            release(k, coop ? parts : k->held);
        for (int i = 0; i < parts->cnt; i++)
            batches_forget(k, parts->elems[i].topic, parts->elems[i].partition);
        if (coop) {
            e = rd_kafka_incremental_unassign(rk, parts);
            list_remove(k->assigned, parts);
        } else {
            re = rd_kafka_assign(rk, NULL);
            rd_kafka_topic_partition_list_destroy(k->assigned);
            k->assigned = rd_kafka_topic_partition_list_new(16);
        }
        CCD_LOG(CC_LOG_INFO, "kafka", "%d partition(s) revoked%s, %d held", parts->cnt,
                lost ? " (lost)" : "", k->assigned->cnt);
    } else {
        CCD_LOG(CC_LOG_ERROR, "kafka", "rebalance error: %s", rd_kafka_err2str(err));
        release(k, k->held);
        for (int i = 0; i < k->assigned->cnt; i++)
            batches_forget(k, k->assigned->elems[i].topic, k->assigned->elems[i].partition);
        re = rd_kafka_assign(rk, NULL);
        rd_kafka_topic_partition_list_destroy(k->assigned);
        k->assigned = rd_kafka_topic_partition_list_new(16);
    }
    if (e) {
        CCD_LOG(CC_LOG_ERROR, "kafka", "incremental (un)assign: %s", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    if (re)
        CCD_LOG(CC_LOG_ERROR, "kafka", "(un)assign: %s", rd_kafka_err2str(re));
    k->st.assigned_partitions = k->assigned->cnt;
}

int ccd_kafka_pause(CcdKafka *k, int pause)
{
    pause = !!pause;
    if (pause == k->paused)
        return 0;
    k->paused = pause;
    if (!k->assigned->cnt)
        return 0;
    rd_kafka_resp_err_t err = pause ? rd_kafka_pause_partitions(k->rk, k->assigned)
                                    : rd_kafka_resume_partitions(k->rk, k->assigned);
    return err ? -EIO : 0;
}

/* ---- consuming ---- */

uint64_t ccd_kafka_poll(CcdKafka *k)
{
    char drain[64];
    while (read(k->wake_rd, drain, sizeof drain) > 0)
        ;
    /* Delivery reports are served here too, not only from ccd_kafka_service (the host's
     * 100 ms cron): at ~15k produced messages/s (the demo feed) a 100 ms backlog of them
     * held the event loop for ~7 ms at a time; served at every poll they come in chunks of
     * a few hundred µs. */
    if (k->prod && k->in_flight)
        rd_kafka_poll(k->prod, 0);
    Batch *b = NULL;
    uint64_t bid = 0;
    for (int n = 0; n < k->max_poll;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(k->rk, 0);
        if (!m)
            break;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                count_consumer_error(k, m->err);
                CCD_LOG_RL_AT(&k->rl_consumer, CC_LOG_WARN, "kafka", "consume %s [%" PRId32 "]: %s",
                              m->rkt ? rd_kafka_topic_name(m->rkt) : "-", m->partition,
                              rd_kafka_message_errstr(m));
            }
            rd_kafka_message_destroy(m);
            continue;
        }
        int t = topic_index(k, m->rkt);
        if (!b) {
            b = batch_open(k);
            if (!b) {
                CCD_LOG(CC_LOG_ERROR, "kafka", "out of memory (batch)");
                abort();
            }
            bid = b->id;
        }
        if (t >= 0 && k->mock)
            note_offset(k, t, m->partition, m->offset);
        if (t >= 0 && batch_note(b, t, m->partition, m->offset)) {
            CCD_LOG(CC_LOG_ERROR, "kafka", "out of memory (batch)");
            abort();
        }
        b->n_messages++;
        k->st.unacked_messages++;
        k->st.messages++;
        k->st.bytes += m->len;
        rd_kafka_timestamp_type_t tst;
        int64_t ts = rd_kafka_message_timestamp(m, &tst);
        CcdKafkaMessage msg = {
            .topic = rd_kafka_topic_name(m->rkt),
            .partition = m->partition,
            .offset = m->offset,
            .timestamp_ms = tst == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts,
            .key = m->key,
            .key_len = m->key_len,
            .payload = m->payload,
            .len = m->len,
        };
        if (k->hooks.on_message)
            k->hooks.on_message(k->hooks.cookie, bid, &msg);
        rd_kafka_message_destroy(m);
        /* A rebalance inside consumer_poll may drop entries of this batch, never the batch
         * itself; a host that acks from on_message removes it: then the next message
         * opens a new batch (and the newest id is returned). */
        b = k->n_batches && k->batches[k->n_batches - 1].id == bid ? &k->batches[k->n_batches - 1]
                                                                   : NULL;
        n++;
    }
    if (bid)
        k->st.batches++;
    return bid;
}

/* Commits the stored offsets and waits for the result at most timeout_ms (a synchronous
 * rd_kafka_commit can block for minutes when the coordinator is gone). */
static int commit_bounded(CcdKafka *k, int timeout_ms)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->rk);
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(k->rk, NULL, q, NULL, NULL);
    if (!err) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms);
        if (!ev) {
            err = RD_KAFKA_RESP_ERR__TIMED_OUT;
        } else {
            err = rd_kafka_event_error(ev);
            const rd_kafka_topic_partition_list_t *l = rd_kafka_event_topic_partition_list(ev);
            for (int i = 0; !err && l && i < l->cnt; i++)
                err = l->elems[i].err;
            rd_kafka_event_destroy(ev);
        }
    }
    rd_kafka_queue_destroy(q);
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return 0;
    if (!err) {
        k->st.commits++;
        return 0;
    }
    k->st.commit_errors++;
    CCD_LOG(CC_LOG_WARN, "kafka", "commit: %s", rd_kafka_err2str(err));
    return err == RD_KAFKA_RESP_ERR__TIMED_OUT ? -ETIMEDOUT : -EIO;
}

int ccd_kafka_commit(CcdKafka *k) { return commit_bounded(k, 5000); }

/* ---- producing ---- */

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
static void outgoing_done(Outgoing *o, int err)
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
    outgoing_done(o, -EIO);
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
        outgoing_done(o, 0);
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

static int produce(CcdKafka *k, const char *topic, int32_t partition, const void *key,
                   size_t key_len, const void *payload, size_t len, CcdKafkaDelivered done,
                   void *cookie, uint64_t tag);

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

/* ---- service, stats, partitions ---- */

static void update_lag(CcdKafka *k)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_copy(k->assigned);
    int64_t lag = 0;
    int known = 0;
    if (l->cnt && !rd_kafka_position(k->rk, l)) {
        for (int i = 0; i < l->cnt; i++) {
            int64_t lo, hi;
            if (rd_kafka_get_watermark_offsets(k->rk, l->elems[i].topic, l->elems[i].partition, &lo,
                                               &hi) ||
                hi < 0)
                continue;
            int64_t pos = l->elems[i].offset >= 0 ? l->elems[i].offset : lo;
            if (pos < 0)
                continue;
            lag += hi > pos ? hi - pos : 0;
            known++;
        }
    }
    k->st.lag = known ? lag : (l->cnt ? -1 : 0);
    rd_kafka_topic_partition_list_destroy(l);
}

void ccd_kafka_service(CcdKafka *k)
{
    rd_kafka_poll(k->prod, 0);
    int64_t now = cc_now_ns();
    /* Re-send due retries (they are in due order: one backoff per push, FIFO). */
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
    if (now - k->last_lag_ns >= LAG_PERIOD_NS) {
        update_lag(k);
        k->last_lag_ns = now;
    }
}

int ccd_kafka_owned_partitions(const CcdKafka *k, CcdKafkaOwned *out, int max)
{
    for (int i = 0; i < k->held->cnt && i < max; i++) {
        const rd_kafka_topic_partition_t *tp = &k->held->elems[i];
        out[i] = (CcdKafkaOwned){
            tp->topic, tp->partition,
            !!rd_kafka_topic_partition_list_find(k->assigned, tp->topic, tp->partition)};
    }
    return k->held->cnt;
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

static int open_reader(CcdKafka *k)
{
    char e[512], gid[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    snprintf(gid, sizeof gid, "%s.state-reader", k->group_id); /* assign only: never joins */
    if (set_prop(conf, "bootstrap.servers", k->bootstrap, e, sizeof e) ||
        set_prop(conf, "group.id", gid, e, sizeof e) ||
        set_prop(conf, "enable.auto.commit", "false", e, sizeof e) ||
        set_prop(conf, "enable.partition.eof", "true", e, sizeof e) ||
        set_prop(conf, "fetch.wait.max.ms", "10", e, sizeof e) ||
        set_prop(conf, "client.id", "cellcastd-state-reader", e, sizeof e) ||
        set_prop(conf, "log_level", "4", e, sizeof e)) {
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
    for (int i = 0; i < k->n_topics + 3; i++) {
        const char *t = i < k->n_topics        ? k->topics[i]
                        : i == k->n_topics     ? k->alert_topic
                        : i == k->n_topics + 1 ? k->dlq_topic
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

static const char *const consumer_defaults[][2] = {
    {"auto.offset.reset", "earliest"},
    {"enable.auto.commit", "true"},
    {"auto.commit.interval.ms", "1000"},
    {"enable.partition.eof", "false"},
    {"queued.min.messages", "1000000"},
    {"queued.max.messages.kbytes", "262144"},
    {"fetch.wait.max.ms", "50"},
    {"fetch.error.backoff.ms", "100"},
    {"partition.assignment.strategy", "range,roundrobin"},
    {"session.timeout.ms", "10000"},
    {"heartbeat.interval.ms", "1000"},
    {"reconnect.backoff.max.ms", "1000"},
    {"client.id", "cellcastd"},
};

static const char *const producer_defaults[][2] = {
    {"enable.idempotence", "true"},
    {"linger.ms", "5"},
    {"delivery.timeout.ms", "30000"},
    {"client.id", "cellcastd-producer"},
};

static int is_forced(const char *name)
{
    return !strcmp(name, "enable.auto.offset.store") || !strcmp(name, "group.id") ||
           !strcmp(name, "bootstrap.servers") || !strcmp(name, "metadata.broker.list") ||
           !strcmp(name, "log.queue");
}

/* ---- the topics cellcastd owns: created or checked before the first subscription ---- */

/* Only the newest record per key is needed on both: compaction keeps one per cell (state)
 * or member (members). The members topic's tombstones and segments go quickly: a member
 * reads the whole topic at every start. */
static const CcdKafkaProp state_topic_configs[] = {{"cleanup.policy", "compact"}};
static const CcdKafkaProp members_topic_configs[] = {
    {"cleanup.policy", "compact"}, {"delete.retention.ms", "60000"}, {"segment.ms", "600000"}};

/* State: partition p holds the cells of KPI partition p (handover.c writes a cell's record
 * to its KPI partition and reads the assigned partitions), so it needs at least the KPI
 * topics' count. Members: every member reads every partition of it (cluster.c), so any
 * count works; 1 keeps it one small log. */
int ccd_kafka_own_topics(const CcdKafkaSettings *s, CcdKafkaTopicSpec *out)
{
    int n = 0;
    if (s->state_topic && *s->state_topic)
        out[n++] = (CcdKafkaTopicSpec){
            s->state_topic,
            "kafka.state_topic",
            0,
            1,
            state_topic_configs,
            1,
            "or set kafka.state_topic: \"\" to run without state handover (the cells of a "
            "partition that changes member then start cold)"};
    if (s->members_topic && *s->members_topic)
        out[n++] = (CcdKafkaTopicSpec){
            s->members_topic, "cluster.members_topic", 1, 0, members_topic_configs, 3, ""};
    return n;
}

/* What a topic check says, three ways: refused (bad), not checked (unsure), done (done). */
typedef struct TopicReport {
    char bad[2048], unsure[2048], done[1024];
} TopicReport;

static void report_add(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used && used + 3 < len) {
        memcpy(buf + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (used < len)
        vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* Every topic the brokers show us, with the broker ids (for the controller check): one
 * all-topics request, which never makes a broker auto-create what it asks about — a named
 * lookup may (librdkafka's mock cluster answers Metadata ≤ v2, which cannot say "do not
 * create", and creates the topic with 4 partitions). NULL: the brokers could not be asked. */
static const struct rd_kafka_metadata *all_topics(rd_kafka_t *rk, int timeout_ms)
{
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms)) {
        if (md)
            rd_kafka_metadata_destroy(md);
        return NULL;
    }
    return md;
}

/* Partitions of topic in md: > 0, 0 when it is not there (does not exist, or this principal
 * may not describe it), -EIO when the brokers report an error for it. */
static int partitions_in(const struct rd_kafka_metadata *md, const char *topic)
{
    for (int i = 0; i < md->topic_cnt; i++)
        if (!strcmp(md->topics[i].topic, topic))
            return md->topics[i].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? 0
                   : md->topics[i].err || md->topics[i].partition_cnt < 1
                       ? -EIO
                       : md->topics[i].partition_cnt;
    return 0;
}

static void create_command(char *buf, size_t len, const char *bootstrap, const CcdKafkaTopicSpec *t,
                           int32_t partitions)
{
    int w = snprintf(buf, len,
                     "kafka-topics.sh --bootstrap-server %s --create --topic %s "
                     "--partitions %d",
                     bootstrap, t->name, (int)partitions);
    for (int i = 0; i < t->n_configs && w > 0 && (size_t)w < len; i++)
        w += snprintf(buf + w, len - (size_t)w, " --config %s=%s", t->configs[i].name,
                      t->configs[i].value);
}

/* One admin request's result event, or NULL after the timeout. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, int timeout_ms)
{
    return rd_kafka_queue_poll(q, timeout_ms + 2000); /* the request times out first */
}

static rd_kafka_AdminOptions_t *admin_options(rd_kafka_t *rk, rd_kafka_admin_op_t op,
                                              int timeout_ms)
{
    char e[256];
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, op);
    if (o) {
        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, e, sizeof e);
        if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS)
            rd_kafka_AdminOptions_set_operation_timeout(o, timeout_ms, e, sizeof e);
    }
    return o;
}

/* Creates the topics to_create[0..n) (their partitions in parts); what happened per topic
 * goes to r; created[i] = 1 when it exists now (created, or by someone else meanwhile). */
static void create_topics(rd_kafka_t *rk, const char *bootstrap, const CcdKafkaTopicSpec **t,
                          const int32_t *parts, int n, int timeout_ms, int *exists_now,
                          TopicReport *r)
{
    char e[512], cmd[1024];
    rd_kafka_NewTopic_t *nt[CCD_KAFKA_MAX_OWN_TOPICS];
    int made = 0;
    for (int i = 0; i < n; i++) {
        exists_now[i] = 0;
        if (!(nt[made] = rd_kafka_NewTopic_new(t[i]->name, parts[i], -1, e, sizeof e))) {
            report_add(r->bad, sizeof r->bad, "'%s' (%s): %s", t[i]->name, t[i]->key, e);
            return;
        }
        for (int c = 0; c < t[i]->n_configs; c++)
            rd_kafka_NewTopic_set_config(nt[made], t[i]->configs[c].name, t[i]->configs[c].value);
        made++;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = admin_options(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout_ms);
    rd_kafka_CreateTopics(rk, nt, (size_t)made, o, q);
    rd_kafka_event_t *ev = admin_wait(q, timeout_ms);
    const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
    size_t n_res = 0;
    const rd_kafka_topic_result_t **tr =
        res ? rd_kafka_CreateTopics_result_topics(res, &n_res) : NULL;
    for (int i = 0; i < n; i++) {
        rd_kafka_resp_err_t err = !ev ? RD_KAFKA_RESP_ERR__TIMED_OUT : rd_kafka_event_error(ev);
        const char *why = ev && err ? rd_kafka_event_error_string(ev) : rd_kafka_err2str(err);
        for (size_t j = 0; !err && j < n_res; j++)
            if (!strcmp(rd_kafka_topic_result_name(tr[j]), t[i]->name)) {
                err = rd_kafka_topic_result_error(tr[j]);
                why = rd_kafka_topic_result_error_string(tr[j]);
                if (!why)
                    why = rd_kafka_err2str(err);
            }
        create_command(cmd, sizeof cmd, bootstrap, t[i], parts[i]);
        if (!err) {
            exists_now[i] = 1;
            report_add(r->done, sizeof r->done, "created '%s' (%s): %d partition(s)", t[i]->name,
                       t[i]->key, (int)parts[i]);
            for (int c = 0; c < t[i]->n_configs; c++)
                report_add(r->done, sizeof r->done, "%s=%s", t[i]->configs[c].name,
                           t[i]->configs[c].value);
        } else if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            exists_now[i] = 1; /* another member created it meanwhile: checked below */
        } else if (err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__TRANSPORT) {
            report_add(r->unsure, sizeof r->unsure,
                       "'%s' (%s) does not exist and creating it timed out (%s): create it "
                       "with: %s",
                       t[i]->name, t[i]->key, why, cmd);
        } else {
            report_add(r->bad, sizeof r->bad,
                       "'%s' (%s) does not exist and the brokers refused to create it (%s: %s); "
                       "create it with: %s%s%s",
                       t[i]->name, t[i]->key, rd_kafka_err2name(err), why, cmd,
                       *t[i]->without ? ", " : "", t[i]->without);
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy_array(nt, (size_t)made);
}

/* cleanup.policy of the topics t[0..n): refused unless it holds "compact". */
static void check_compacted(rd_kafka_t *rk, const char *bootstrap, const CcdKafkaTopicSpec **t,
                            int n, int timeout_ms, TopicReport *r)
{
    rd_kafka_ConfigResource_t *cr[CCD_KAFKA_MAX_OWN_TOPICS];
    for (int i = 0; i < n; i++)
        cr[i] = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, t[i]->name);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout_ms);
    rd_kafka_DescribeConfigs(rk, cr, (size_t)n, o, q);
    rd_kafka_event_t *ev = admin_wait(q, timeout_ms);
    const rd_kafka_DescribeConfigs_result_t *res =
        ev && !rd_kafka_event_error(ev) ? rd_kafka_event_DescribeConfigs_result(ev) : NULL;
    size_t n_res = 0;
    const rd_kafka_ConfigResource_t **rs =
        res ? rd_kafka_DescribeConfigs_result_resources(res, &n_res) : NULL;
    for (int i = 0; i < n; i++) {
        const rd_kafka_ConfigResource_t *found = NULL;
        for (size_t j = 0; j < n_res; j++)
            if (!strcmp(rd_kafka_ConfigResource_name(rs[j]), t[i]->name))
                found = rs[j];
        if (!found || rd_kafka_ConfigResource_error(found)) {
            report_add(r->unsure, sizeof r->unsure,
                       "cleanup.policy of '%s' (%s) unknown (%s): it must be compact", t[i]->name,
                       t[i]->key,
                       found ? rd_kafka_err2str(rd_kafka_ConfigResource_error(found))
                       : ev  ? rd_kafka_event_error_string(ev)
                             : "no answer");
            continue;
        }
        size_t nc = 0;
        const rd_kafka_ConfigEntry_t **ce = rd_kafka_ConfigResource_configs(found, &nc);
        const char *policy = "delete"; /* Kafka's default when the entry is absent */
        for (size_t c = 0; c < nc; c++)
            if (!strcmp(rd_kafka_ConfigEntry_name(ce[c]), "cleanup.policy") &&
                rd_kafka_ConfigEntry_value(ce[c]))
                policy = rd_kafka_ConfigEntry_value(ce[c]);
        if (!strstr(policy, "compact"))
            report_add(r->bad, sizeof r->bad,
                       "'%s' (%s) has cleanup.policy=%s: it must be compacted (one record per "
                       "key is read back; without compaction every record ever written is "
                       "kept and read); fix: kafka-configs.sh --bootstrap-server %s --alter "
                       "--entity-type topics --entity-name %s --add-config "
                       "cleanup.policy=compact%s%s",
                       t[i]->name, t[i]->key, policy, bootstrap, t[i]->name,
                       *t[i]->without ? ", " : "", t[i]->without);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    for (int i = 0; i < n; i++)
        rd_kafka_ConfigResource_destroy(cr[i]);
}

/* Creates the missing topics of t[0..n) (create = 1) and checks the others, on handle rk
 * (which must not auto-create topics). The KPI topics give the partition count of a spec
 * with partitions 0. Returns 0 / -EINVAL / -EAGAIN with msg (see ccd_kafka_check_topics). */
static int ensure_topics(rd_kafka_t *rk, const char *bootstrap, char *const *kpi_topics, int n_kpi,
                         const CcdKafkaTopicSpec *t, int n, int create, int timeout_ms, char *msg,
                         size_t msglen)
{
    TopicReport *r = calloc(1, sizeof *r);
    if (!r)
        return cc_errf(msg, msglen, -ENOMEM, "out of memory");
    int32_t kpi_parts = 0;
    int ret = 0;
    const char *kpi_missing = NULL, *kpi_max = n_kpi ? kpi_topics[0] : "";
    const struct rd_kafka_metadata *md = all_topics(rk, timeout_ms);
    if (!md) {
        ret = cc_errf(msg, msglen, -EAGAIN,
                      "brokers %s not reachable within %d ms: the topics cellcastd owns "
                      "(%s%s%s) are not checked",
                      bootstrap, timeout_ms, t[0].name, n > 1 ? ", " : "", n > 1 ? t[1].name : "");
        goto out;
    }
    for (int i = 0; i < n_kpi; i++) {
        int p = partitions_in(md, kpi_topics[i]);
        if (p < 0)
            p = 0; /* an error for it: unknown, as if missing */
        if (!p && !kpi_missing)
            kpi_missing = kpi_topics[i];
        if (p > kpi_parts) {
            kpi_parts = p;
            kpi_max = kpi_topics[i];
        }
    }
    /* CreateTopics and DescribeConfigs go to the controller; librdkafka's mock cluster
     * names none of its brokers (controller id 0) and implements neither request. */
    int32_t controller = rd_kafka_controllerid(rk, timeout_ms);
    int have_controller = 0;
    for (int i = 0; i < md->broker_cnt; i++)
        have_controller |= controller >= 0 && md->brokers[i].id == controller;
    const CcdKafkaTopicSpec *missing[CCD_KAFKA_MAX_OWN_TOPICS], *present[CCD_KAFKA_MAX_OWN_TOPICS];
    int32_t missing_parts[CCD_KAFKA_MAX_OWN_TOPICS];
    int n_missing = 0, n_present = 0;
    char cmd[1024];
    for (int i = 0; i < n && i < CCD_KAFKA_MAX_OWN_TOPICS; i++) {
        int32_t want = t[i].partitions > 0 ? t[i].partitions : kpi_missing ? 0 : kpi_parts;
        int p = partitions_in(md, t[i].name);
        if (p < 0) {
            report_add(r->unsure, sizeof r->unsure, "'%s' (%s): metadata unavailable", t[i].name,
                       t[i].key);
        } else if (!p && !want) {
            report_add(r->unsure, sizeof r->unsure,
                       "'%s' (%s) does not exist and neither does the KPI topic '%s' whose "
                       "partition count it takes: created when the KPI topic is first assigned",
                       t[i].name, t[i].key, kpi_missing);
        } else if (!p && !create) {
            create_command(cmd, sizeof cmd, bootstrap, &t[i], want);
            report_add(r->done, sizeof r->done,
                       "'%s' (%s) does not exist: cellcastd creates it "
                       "at start as %s",
                       t[i].name, t[i].key, cmd);
        } else if (!p && !have_controller) {
            create_command(cmd, sizeof cmd, bootstrap, &t[i], want);
            report_add(r->unsure, sizeof r->unsure,
                       "'%s' (%s) does not exist and the brokers name no controller to create "
                       "it (librdkafka's mock cluster?): create it with: %s",
                       t[i].name, t[i].key, cmd);
        } else if (!p) {
            missing_parts[n_missing] = want;
            missing[n_missing++] = &t[i];
        } else {
            if (t[i].min_partitions && want > 0 && p < want)
                report_add(r->bad, sizeof r->bad,
                           "'%s' (%s) has %d partition(s), KPI topic '%s' %d: state partition p "
                           "holds the cells of KPI partition p, so it needs at least %d "
                           "(co-partitioned); fix: kafka-topics.sh --bootstrap-server %s --alter "
                           "--topic %s --partitions %d%s%s",
                           t[i].name, t[i].key, p, kpi_max, (int)want, (int)want, bootstrap,
                           t[i].name, (int)want, *t[i].without ? ", " : "", t[i].without);
            present[n_present++] = &t[i];
        }
    }
    if (n_missing) {
        int exists_now[CCD_KAFKA_MAX_OWN_TOPICS];
        create_topics(rk, bootstrap, missing, missing_parts, n_missing, timeout_ms, exists_now, r);
        for (int i = 0; i < n_missing; i++)
            if (exists_now[i] && strstr(r->done, missing[i]->name) == NULL) {
                /* created by another member meanwhile: check its partitions like ours */
                const struct rd_kafka_metadata *now = all_topics(rk, timeout_ms);
                int p = now ? partitions_in(now, missing[i]->name) : -EIO;
                if (now)
                    rd_kafka_metadata_destroy(now);
                if (missing[i]->min_partitions && p > 0 && p < missing_parts[i])
                    report_add(r->bad, sizeof r->bad,
                               "'%s' (%s) was created meanwhile with %d partition(s), not %d; "
                               "fix: kafka-topics.sh --bootstrap-server %s --alter --topic %s "
                               "--partitions %d",
                               missing[i]->name, missing[i]->key, p, (int)missing_parts[i],
                               bootstrap, missing[i]->name, (int)missing_parts[i]);
                present[n_present++] = missing[i];
            }
    }
    if (n_present && have_controller)
        check_compacted(rk, bootstrap, present, n_present, timeout_ms, r);
    else
        for (int i = 0; i < n_present; i++)
            report_add(r->unsure, sizeof r->unsure,
                       "cleanup.policy of '%s' (%s) not checked (no controller to ask): it must "
                       "be compact",
                       present[i]->name, present[i]->key);
    ret = r->bad[0] ? -EINVAL : r->unsure[0] ? -EAGAIN : 0;
    if (r->bad[0])
        snprintf(msg, msglen, "%s", r->bad);
    else
        snprintf(msg, msglen, "%s%s%s", r->done, r->done[0] && r->unsure[0] ? "; " : "", r->unsure);
    rd_kafka_metadata_destroy(md);
out:
    free(r);
    return ret;
}

static void setup_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    CCD_LOG(level_of_syslog(level), "kafka", "kafka topic setup: %s: %s", fac, buf);
}

/* A consumer handle for the topic setup: it never subscribes, and as a consumer it does not
 * ask the brokers to auto-create what it looks up (allow.auto.create.topics forced off). */
static rd_kafka_t *setup_handle(const char *bootstrap, const CcdKafkaSettings *s, char *err,
                                size_t errlen)
{
    char e[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
    for (int i = 0; i < s->n_props; i++) /* security.protocol, sasl.*, ssl.* … */
        if (!is_forced(s->props[i].name) && strcmp(s->props[i].name, "group.instance.id") &&
            set_prop(conf, s->props[i].name, s->props[i].value, err, errlen)) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    if (set_prop(conf, "bootstrap.servers", bootstrap, err, errlen) ||
        set_prop(conf, "allow.auto.create.topics", "false", err, errlen) ||
        set_prop(conf, "client.id", "cellcastd-topic-setup", err, errlen)) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_log_cb(conf, setup_log_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        cc_errf(err, errlen, -EINVAL, "kafka: topic setup: %s", e);
    }
    return rk;
}

int ccd_kafka_check_topics(const CcdKafkaSettings *s, int create, char *msg, size_t msglen)
{
    CcdKafkaTopicSpec t[CCD_KAFKA_MAX_OWN_TOPICS];
    int n = ccd_kafka_own_topics(s, t);
    if (msg && msglen)
        msg[0] = '\0';
    if (!n || !s->brokers || !strcmp(s->brokers, "embedded"))
        return 0;
    rd_kafka_t *rk = setup_handle(s->brokers, s, msg, msglen);
    if (!rk)
        return -EINVAL;
    int timeout = s->topic_setup_timeout_ms > 0 ? s->topic_setup_timeout_ms : 5000;
    int ret = ensure_topics(rk, s->brokers, (char *const *)s->topics, s->n_topics, t, n, create,
                            timeout, msg, msglen);
    rd_kafka_destroy(rk);
    return ret;
}

static int open_consumer(CcdKafka *k, const CcdKafkaSettings *s, char *err, size_t errlen)
{
    char e[512];
    int ret;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < sizeof consumer_defaults / sizeof *consumer_defaults; i++)
        if ((ret = set_prop(conf, consumer_defaults[i][0], consumer_defaults[i][1], err, errlen)))
            goto error;
    for (int i = 0; i < s->n_props; i++) {
        if (is_forced(s->props[i].name)) {
            CCD_LOG(CC_LOG_WARN, "kafka", "property %s is set by cellcastd; ignored",
                    s->props[i].name);
            continue;
        }
        if ((ret = set_prop(conf, s->props[i].name, s->props[i].value, err, errlen)))
            goto error;
    }
    if ((ret = set_prop(conf, "group.id", k->group_id, err, errlen)) ||
        (ret = set_prop(conf, "bootstrap.servers", k->bootstrap, err, errlen)) ||
        (ret = set_prop(conf, "enable.auto.offset.store", "false", err, errlen)) ||
        (ret = set_prop(conf, "log.queue", "true", err, errlen)))
        goto error;
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, commit_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    k->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
    if (!k->rk) {
        ret = cc_errf(err, errlen, -EINVAL, "kafka: consumer: %s", e);
        goto error;
    }
    conf = NULL;
    rd_kafka_set_log_queue(k->rk, NULL); /* logs served by consumer_poll on our thread */
    rd_kafka_poll_set_consumer(k->rk);
    k->cq = rd_kafka_queue_get_consumer(k->rk);
    rd_kafka_queue_io_event_enable(k->cq, k->wake_wr, "1", 1);

    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(k->n_topics);
    for (int i = 0; i < k->n_topics; i++)
        rd_kafka_topic_partition_list_add(sub, k->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t re = rd_kafka_subscribe(k->rk, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (re)
        return cc_errf(err, errlen, -EINVAL, "kafka: subscribe: %s", rd_kafka_err2str(re));
    return 0;
error:
    if (conf)
        rd_kafka_conf_destroy(conf);
    return ret;
}

static int open_producer(CcdKafka *k, const CcdKafkaSettings *s, char *err, size_t errlen)
{
    char e[512];
    int ret;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < sizeof producer_defaults / sizeof *producer_defaults; i++)
        if ((ret = set_prop(conf, producer_defaults[i][0], producer_defaults[i][1], err, errlen)))
            goto error;
    for (int i = 0; i < s->n_producer_props; i++)
        if (!is_forced(s->producer_props[i].name) &&
            (ret = set_prop(conf, s->producer_props[i].name, s->producer_props[i].value, err,
                            errlen)))
            goto error;
    if ((ret = set_prop(conf, "bootstrap.servers", k->bootstrap, err, errlen)) ||
        (ret = set_prop(conf, "log.queue", "true", err, errlen)))
        goto error;
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_log_cb(conf, log_cb);
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

static void destroy(CcdKafka *k)
{
    if (k->cq)
        rd_kafka_queue_destroy(k->cq);
    if (k->reader) {
        rd_kafka_consumer_close(k->reader); /* never joined a group: returns at once */
        rd_kafka_destroy(k->reader);
    }
    if (k->rk) /* closed (bounded) by ccd_kafka_close; never block here */
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
        outgoing_done(o, -EIO);
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
        batch_free(&k->batches[i]);
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
    k->setup_timeout_ms = s->topic_setup_timeout_ms > 0 ? s->topic_setup_timeout_ms : 5000;
    k->topics = calloc((size_t)s->n_topics, sizeof *k->topics);
    k->assigned = rd_kafka_topic_partition_list_new(16);
    k->held = rd_kafka_topic_partition_list_new(16);
    if (!k->group_id || !k->topics || (s->alert_topic && *s->alert_topic && !k->alert_topic) ||
        (s->dead_letter_topic && *s->dead_letter_topic && !k->dlq_topic) ||
        (s->state_topic && *s->state_topic && !k->state_topic) ||
        (s->members_topic && *s->members_topic && !k->members_topic)) {
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
    if ((ret = open_producer(k, s, err, errlen)) || (ret = open_consumer(k, s, err, errlen)))
        goto error;
    CCD_LOG(CC_LOG_INFO, "kafka", "consumer group %s on %s, %d topic(s) from %s", k->group_id,
            k->bootstrap, k->n_topics, k->topics[0]);
    *out = k;
    return 0;
error:
    destroy(k);
    return ret;
}

int ccd_kafka_assignment(const CcdKafka *k, const char *topic, int32_t *parts, int max)
{
    int n = 0;
    for (int i = 0; i < k->assigned->cnt; i++)
        if (!strcmp(k->assigned->elems[i].topic, topic)) {
            if (n < max)
                parts[n] = k->assigned->elems[i].partition;
            n++;
        }
    return n;
}

void ccd_kafka_membership(const CcdKafka *k, char *member_id, size_t id_len, char *protocol,
                          size_t protocol_len)
{
    char *id = rd_kafka_memberid(k->rk);
    snprintf(member_id, id_len, "%s", id ? id : "");
    if (id)
        rd_kafka_mem_free(k->rk, id);
    const char *p = rd_kafka_rebalance_protocol(k->rk);
    snprintf(protocol, protocol_len, "%s", p ? p : "NONE");
}

int ccd_kafka_recheck_topics(CcdKafka *k, char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = '\0';
    if (k->mock || !k->topics_unsure)
        return 0;
    CcdKafkaSettings s;
    ccd_kafka_default_settings(&s);
    s.state_topic = k->state_topic;
    s.members_topic = k->members_topic;
    CcdKafkaTopicSpec t[CCD_KAFKA_MAX_OWN_TOPICS];
    int n = ccd_kafka_own_topics(&s, t);
    /* the consumer: it does not ask for auto-creation (unless kafka.properties says so) */
    int ret = ensure_topics(k->rk, k->bootstrap, k->topics, k->n_topics, t, n, 1,
                            k->setup_timeout_ms, msg, msglen);
    if (ret != -EAGAIN)
        k->topics_unsure = 0;
    return ret;
}

void ccd_kafka_close(CcdKafka **pk, int timeout_ms)
{
    CcdKafka *k = pk ? *pk : NULL;
    if (!k)
        return;
    /* Offsets stored by acks so far, synchronously; then leave the group (the revoke
     * callback runs here) — librdkafka commits once more on the way out. */
    int64_t deadline = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    commit_bounded(k, timeout_ms);
    k->consumer_closing = 1;
    /* Leave the group, bounded: rd_kafka_consumer_close() blocks until the coordinator
     * answers, i.e. forever when the broker is gone. Callbacks (the revoke) are served
     * from q while we wait. */
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->rk);
    rd_kafka_error_t *ce = rd_kafka_consumer_close_queue(k->rk, q);
    if (ce) {
        CCD_LOG(CC_LOG_WARN, "kafka", "consumer close: %s", rd_kafka_error_string(ce));
        rd_kafka_error_destroy(ce);
    } else {
        while (!rd_kafka_consumer_closed(k->rk) && cc_now_ns() < deadline) {
            rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 50);
            if (!ev)
                continue;
            if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE)
                rebalance_cb(
                    k->rk, rd_kafka_event_error(ev),
                    (rd_kafka_topic_partition_list_t *)rd_kafka_event_topic_partition_list(ev), k);
            rd_kafka_event_destroy(ev);
        }
        if (!rd_kafka_consumer_closed(k->rk))
            CCD_LOG(CC_LOG_ERROR, "kafka",
                    "the consumer did not leave the group "
                    "within %d ms (broker unreachable?); closing anyway",
                    timeout_ms);
    }
    rd_kafka_queue_destroy(q);
    if (k->held->cnt) /* no revoke came (never assigned, or broker gone): tell the host */
        release(k, k->held);
    /* Flush the producer, re-sending what is in the retry list once more. */
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
    if (k->n_batches)
        CCD_LOG(CC_LOG_INFO, "kafka",
                "%" PRIu64 " message(s) polled but not acked "
                "will be delivered again to the group",
                k->st.unacked_messages);
    destroy(k);
    *pk = NULL;
}
