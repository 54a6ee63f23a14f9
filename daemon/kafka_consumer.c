/*
 * kafka_consumer.c — the high-level consumer: its handle and defaults, poll into batches,
 * at-least-once offset bookkeeping (acks, bounded commits), pause, lag, and the rewinds the
 * host asks for while partitions are assigned.
 *
 * Offsets: enable.auto.offset.store=false. Every polled message joins the current batch,
 * which remembers per (topic, partition) the highest offset it holds. ccd_kafka_ack(id)
 * stores offset+1 of every batch ≤ id (rd_kafka_offsets_store); librdkafka's auto-commit
 * (auto.commit.interval.ms) commits what is stored, and close commits synchronously.
 * A revoked partition's entries are removed from pending batches, so an ack arriving
 * after the rebalance cannot store an offset for a partition another member now owns.
 *
 * Consumer defaults (consumer_defaults; every one can be overridden through `props`; why
 * and the measurements: docs/design/kafka-consumer.md):
 *   queued.min.messages=1000000, queued.max.messages.kbytes=262144 — thresholds well above
 *     one poll's worth of messages, so that a catch-up read stays fetch-bound and never
 *     idles on librdkafka 2.0's fetch stall; costs ≤ 256 MiB of queued messages while paused.
 *   fetch.wait.max.ms=50 — a partition that becomes busy is fetched sooner, close() is quicker.
 *   fetch.error.backoff.ms=100 — retry a failed fetch soon (embedded broker restarts).
 *   auto.offset.reset=earliest — a new group reads the history (it needs a window to
 *     warm the cells), not only what arrives after it joined.
 *   enable.partition.eof=false, enable.auto.commit=true, auto.commit.interval.ms=1000.
 *   partition.assignment.strategy=range,roundrobin (eager) — NOT cooperative-sticky, which
 *     asserts in librdkafka < 2.3 when a consumer is closed before its first assignment
 *     (librdkafka #4312, fixed by #4381): a SIGTERM during the first join would kill
 *     cellcastd. The rebalance callback handles both protocols: with a fixed librdkafka set
 *     kafka.properties.partition.assignment.strategy=cooperative-sticky.
 *   session.timeout.ms=10000, heartbeat.interval.ms=1000 — a crashed member's partitions
 *     move after ≤ 10 s (librdkafka's default 45 s left its cells unserved that long).
 *   reconnect.backoff.max.ms=1000 — after a broker outage a member reconnects to the group
 *     coordinator within a second instead of up to librdkafka's 10 s backoff.
 * Forced (props cannot change them): enable.auto.offset.store=false, group.id,
 * bootstrap.servers, log.queue=true.
 */
#include "kafka_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- pending batches ---- */

void kafka_batch_free(Batch *b)
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
void kafka_batches_forget(CcdKafka *k, const char *topic, int32_t partition)
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
        kafka_batch_free(b);
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
                kafka_count_consumer_error(k, m->err);
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
int kafka_commit_bounded(CcdKafka *k, int timeout_ms)
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

int ccd_kafka_commit(CcdKafka *k) { return kafka_commit_bounded(k, 5000); }

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

void kafka_update_lag(CcdKafka *k)
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

/* ---- rewinds (asked for by on_assign) ---- */

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
void kafka_resolve_rewinds(CcdKafka *k, rd_kafka_topic_partition_list_t *l)
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

/* ---- opening ---- */

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

int kafka_open_consumer(CcdKafka *k, const CcdKafkaSettings *s, KafkaRebalanceCb rebalance_cb,
                        char *err, size_t errlen)
{
    char e[512];
    int ret;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < sizeof consumer_defaults / sizeof *consumer_defaults; i++)
        if ((ret = kafka_set_prop(conf, consumer_defaults[i][0], consumer_defaults[i][1], err,
                                  errlen)))
            goto error;
    for (int i = 0; i < s->n_props; i++) {
        if (kafka_prop_is_forced(s->props[i].name)) {
            CCD_LOG(CC_LOG_WARN, "kafka", "property %s is set by cellcastd; ignored",
                    s->props[i].name);
            continue;
        }
        if ((ret = kafka_set_prop(conf, s->props[i].name, s->props[i].value, err, errlen)))
            goto error;
    }
    if ((ret = kafka_set_prop(conf, "group.id", k->group_id, err, errlen)) ||
        (ret = kafka_set_prop(conf, "bootstrap.servers", k->bootstrap, err, errlen)) ||
        (ret = kafka_set_prop(conf, "enable.auto.offset.store", "false", err, errlen)) ||
        (ret = kafka_set_prop(conf, "log.queue", "true", err, errlen)))
        goto error;
    /* The protocol, once: rd_kafka_rebalance_protocol() is a request to the group's thread
     * that never returns once the group has terminated (librdkafka #4041), and librdkafka
     * refuses to mix eager and cooperative assignors. */
    char strategy[256];
    size_t strategy_len = sizeof strategy;
    k->coop = rd_kafka_conf_get(conf, "partition.assignment.strategy", strategy, &strategy_len) ==
                  RD_KAFKA_CONF_OK &&
              strstr(strategy, "cooperative");
    char instance[256];
    size_t instance_len = sizeof instance;
    k->static_member =
        rd_kafka_conf_get(conf, "group.instance.id", instance, &instance_len) == RD_KAFKA_CONF_OK &&
        instance[0];
    rd_kafka_conf_set_opaque(conf, k);
    k->rebalance_cb = rebalance_cb;
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, commit_cb);
    rd_kafka_conf_set_error_cb(conf, kafka_error_cb);
    rd_kafka_conf_set_log_cb(conf, kafka_log_cb);
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

/* Whether librdkafka still holds a member id: empty once the consumer left the group (its
 * LeaveGroup sent) or before it ever joined. A request to librdkafka's group thread that
 * waits without a bound: only before rd_kafka_consumer_close_queue (the group is alive). */
static int in_group(CcdKafka *k)
{
    char *id = rd_kafka_memberid(k->rk);
    int in = id && *id;
    if (id)
        rd_kafka_mem_free(k->rk, id);
    return in;
}

/*
 * Leaves the group, then closes the consumer, bounded by deadline (rd_kafka_consumer_close()
 * blocks until the coordinator answers, i.e. forever when the broker is gone).
 *
 * Why in two steps: a rebalance librdkafka handed to the application before the close (the
 * host stops polling at SIGTERM, several members stopped together keep rebalancing) and
 * still unanswered when the close begins is abandoned by librdkafka's close — it unassigns
 * and terminates the group on its own — but the event stays queued. Answered late from
 * the close queue, it raced the group's termination: rd_kafka_assign() waited forever for
 * a group thread that had purged its request (a hang), or a commit reached the group
 * after it was marked terminated (rd_kafka_cgrp_terminated: assert
 * !rd_kafka_assignment_in_progress). So, first, while the group is alive:
 *   1. unsubscribe: librdkafka finishes the rebalance in progress (postponing the
 *      unsubscribe), revokes what is assigned and sends LeaveGroup;
 *   2. serve the consumer queue meanwhile — every rebalance answered while librdkafka
 *      waits for it (kafka_rebalance_cb: a revoke hands the cells over and commits, an
 *      assignment is answered but not taken over); polled messages are dropped, unacked
 *      (the next owner reads them from the committed offsets) — until librdkafka holds
 *      no member id and nothing is assigned;
 *   3. only then close: nothing is assigned and no rebalance can come, so the group
 *      terminates at once. Rebalance events on the close queue (none expected) are
 *      still served (librdkafka would wait for them), without commits (k->group_closing).
 * A static member (group.instance.id) must not leave: steps 1-2 are only a drain of the
 * queue, and its revoke comes from the close (served from the close queue, no commit in
 * the callback: librdkafka commits the stored offsets when it unassigns).
 * Past the deadline the consumer is abandoned, not destroyed (ccd_kafka_close).
 */
int kafka_consumer_leave(CcdKafka *k, int64_t deadline, int timeout_ms)
{
    uint64_t dropped = 0;
    int left = 1;
    rd_kafka_message_t *m;
    if (k->static_member) {
        /* KIP-345: a static member keeps its place in the group at a stop, and unsubscribe
         * would send LeaveGroup; librdkafka's close does not. Only what librdkafka already
         * handed over is answered first: the fetchers paused, the queue served until empty
         * (a rebalance handed over between this and the close is the one left to chance). */
        if (k->assigned->cnt)
            rd_kafka_pause_partitions(k->rk, k->assigned);
        while (cc_now_ns() < deadline && (m = rd_kafka_consumer_poll(k->rk, 0))) {
            dropped += !m->err;
            rd_kafka_message_destroy(m);
        }
    } else {
        rd_kafka_resp_err_t ue = rd_kafka_unsubscribe(k->rk);
        if (ue)
            CCD_LOG(CC_LOG_WARN, "kafka", "unsubscribe: %s", rd_kafka_err2str(ue));
        while (!(left = !k->assigned->cnt && !in_group(k)) && cc_now_ns() < deadline) {
            if ((m = rd_kafka_consumer_poll(k->rk, 50))) {
                dropped += !m->err;
                rd_kafka_message_destroy(m);
            }
        }
    }
    if (dropped)
        CCD_LOG(CC_LOG_INFO, "kafka",
                "%" PRIu64 " message(s) fetched while leaving the group: not stepped, "
                "read again by the partitions' next owners",
                dropped);
    if (!left) {
        CCD_LOG(CC_LOG_ERROR, "kafka",
                "the consumer did not leave the group within %d ms (a rebalance that does not "
                "finish, or the broker unreachable); its partitions move after "
                "session.timeout.ms",
                timeout_ms);
        return 0;
    }
    k->group_closing = 1;
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->rk);
    rd_kafka_error_t *ce = rd_kafka_consumer_close_queue(k->rk, q);
    if (ce) { /* a fatal error: rd_kafka_destroy's own close unassigns without us */
        CCD_LOG(CC_LOG_WARN, "kafka", "consumer close: %s", rd_kafka_error_string(ce));
        rd_kafka_error_destroy(ce);
        rd_kafka_queue_destroy(q);
        return 1;
    }
    while (!rd_kafka_consumer_closed(k->rk) && cc_now_ns() < deadline) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 50);
        if (!ev)
            continue;
        if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE)
            k->rebalance_cb(
                k->rk, rd_kafka_event_error(ev),
                (rd_kafka_topic_partition_list_t *)rd_kafka_event_topic_partition_list(ev), k);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    int closed = rd_kafka_consumer_closed(k->rk);
    if (!closed)
        CCD_LOG(CC_LOG_ERROR, "kafka", "the consumer did not close within %d ms", timeout_ms);
    return closed;
}
