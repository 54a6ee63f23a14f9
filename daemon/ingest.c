/*
 * ingest.c — KPI messages into the engine and the way back: the Kafka hooks, decoding, the
 * cell table, the scheduler's hooks on both threads, backpressure and the acks. See
 * ingest.h.
 */
#include "ingest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alerts.h"
#include "clock.h"
#include "handover.h"
#include "http.h"
#include "log.h"
#include "msg_labels.h"
#include "publish.h"
#include "state.h"
#include "topology.h"

/* Kafka batches: the newest acked, the newest polled, and messages in the current poll. */
static uint64_t acked_kafka, last_kafka, polled_in_batch;

int ccd_backpressure(const Ccd *d) { return 4 * d->cfg.ingest_batch_steps; }

/* Where a message came from, for log lines (formatted only when one is written: this is
 * the per-message path). */
static const char *source_name(char buf[48], int topic, int32_t partition)
{
    if (topic < 0)
        return "POST /v1/kpis";
    snprintf(buf, 48, "partition %d", partition);
    return buf;
}

/* The records of the message being applied refused for their time (for POST /v1/kpis's
 * reply); loop thread only. */
static CcdTsRefusal *ts_refused;
static int n_ts_refused, cap_ts_refused;

int ccd_ingest_ts_refusals(const CcdTsRefusal **out)
{
    *out = ts_refused;
    return n_ts_refused;
}

/* Whether a record's time is within ingest.max_future_s / max_past_s of the clock; counts
 * and logs the ones that are not. */
static int ts_in_range(Ccd *d, const CcKpiRecord *r, int64_t now, int topic, int32_t partition)
{
    char src[48];
    const char *why = NULL;
    if (r->ts - now > d->cfg.ingest_max_future_s) {
        d->in.future_ts++;
        why = "ahead of";
    } else if (d->cfg.ingest_max_past_s > 0 && now - r->ts > d->cfg.ingest_max_past_s) {
        d->in.past_ts++;
        why = "behind";
    }
    if (why && n_ts_refused == cap_ts_refused) {
        int cap = cap_ts_refused ? cap_ts_refused * 2 : 16;
        CcdTsRefusal *t = realloc(ts_refused, (size_t)cap * sizeof *t);
        if (t) {
            ts_refused = t;
            cap_ts_refused = cap;
        }
    }
    if (why && n_ts_refused < cap_ts_refused)
        ts_refused[n_ts_refused++] =
            (CcdTsRefusal){r->element, why[0] == 'a', r->ts, (int64_t)llabs(r->ts - now)};
    if (why)
        CCD_LOG_RL(CC_LOG_WARN, "ingest",
                   "record of cell %s (%s) refused: its time %lld is %lld s %s the clock "
                   "(ingest.max_future_s / max_past_s)",
                   r->cell_id, source_name(src, topic, partition), (long long)r->ts,
                   (long long)llabs(r->ts - now), why);
    return !why;
}

/* A record of KPI topic `topic` stamped ts was accepted (known 1) or refused because the
 * model has none of its KPIs (known 0): the data time seen (models.c's learning status). */
static void note_data(Ccd *d, int topic, int64_t ts, int known)
{
    if (topic < 0 || topic >= CCD_INGEST_TOPICS)
        return;
    CcdIngestSeen *t = &d->in.seen[topic];
    if (!t->records++ || ts < t->first)
        t->first = ts;
    if (t->records == 1 || ts > t->last)
        t->last = ts;
    if (known)
        return;
    if (!t->unknown_records++ || ts < t->unknown_first)
        t->unknown_first = ts;
    if (t->unknown_records == 1 || ts > t->unknown_last)
        t->unknown_last = ts;
}

int ccd_ingest_message(Ccd *d, const void *buf, size_t len, int topic, int32_t partition,
                       CcKpiBatch *out)
{
    CcKpiBatch kb;
    int64_t t0 = cc_now_ns();
    n_ts_refused = 0;
    int rc = cc_kpi_decode(d->kpi, buf, len, &kb);
    int64_t t1 = cc_now_ns();
    d->in.ns_parse += t1 - t0;
    if (rc) {
        memset(&kb, 0, sizeof kb);
        if (out)
            *out = kb;
        return rc;
    }
    d->in.unmapped_fields += kb.unmapped_fields;
    /* the cells' labels from the message's fields (ingest.labels; msg_labels.h) */
    ccd_msg_labels_read(ccd_topology_msg_labels(d->topology), buf, len, &kb);
    for (int i = 0; i < kb.n_errors; i++) {
        char src[48];
        d->in.invalid[kb.errors[i].reason]++;
        d->in.invalid_elements++;
        if (kb.errors[i].reason == CC_KPI_NO_KPIS && kb.errors[i].ts >= 0)
            note_data(d, topic, kb.errors[i].ts, 0); /* KPIs the model lacks */
        CCD_LOG_RL(CC_LOG_WARN, "ingest", "invalid %s (%s): %s: %s",
                   kb.errors[i].element >= 0 ? "record" : "message",
                   source_name(src, topic, partition), cc_kpi_reason_name(kb.errors[i].reason),
                   kb.errors[i].message);
    }
    int ret = 0;
    int64_t now = ccd_clock_unix(d);
    for (int i = 0; i < kb.n_records; i++) {
        if (!ts_in_range(d, &kb.records[i], now, topic, partition))
            continue;
        d->in.records++;
        note_data(d, topic, kb.records[i].ts, 1);
        rc = ccd_cells_ingest(d->cells, ccd_sched_open_batch(d->sched), &kb.records[i], topic,
                              partition);
        if (rc == -ENOSPC) {
            d->in.refused_full++;
            CCD_LOG_RL(CC_LOG_WARN, "ingest",
                       "cell table full (limits.max_cells / kv_budget_mb "
                       "with every cell busy): record of cell %s refused",
                       kb.records[i].cell_id);
            ret = rc;
        } else if (rc) {
            LOG_ERROR("ingest", "out of memory applying a record");
            ret = rc;
            break;
        }
    }
    d->in.ns_state += cc_now_ns() - t1;
    if (out)
        *out = kb;
    return ret;
}

/* ---- Kafka hooks ---- */

static int topic_index(const Ccd *d, const char *name)
{
    for (int i = 0; i < d->cfg.kafka_topics.n; i++)
        if (!strcmp(d->cfg.kafka_topics.items[i], name))
            return i;
    return -1;
}

static void on_message(void *cookie, uint64_t batch_id, const CcdKafkaMessage *msg)
{
    Ccd *d = cookie;
    CcKpiBatch kb;
    (void)batch_id;
    polled_in_batch++;
    d->in.kafka_messages++;
    d->in.kafka_bytes += msg->len;
    int topic = topic_index(d, msg->topic);
    uint64_t future = d->in.future_ts, past = d->in.past_ts;
    ccd_ingest_message(d, msg->payload, msg->len, topic, msg->partition, &kb);
    const char *reason = kb.n_errors                ? cc_kpi_reason_name(kb.errors[0].reason)
                         : d->in.future_ts > future ? "future_ts"
                         : d->in.past_ts > past     ? "past_ts"
                                                    : NULL;
    if (reason && d->cfg.kafka_dead_letter_topic[0]) {
        ccd_kafka_dead_letter(d->kafka, msg, reason);
        d->in.dead_letters++;
    }
}

static void on_assign(void *cookie, const char *topic, const int32_t *parts, int n)
{
    Ccd *d = cookie;
    LOG_INFO("kafka", "assigned %d partition(s) of '%s'", n, topic);
    ccd_handover_assign(d, topic, topic_index(d, topic), parts, n);
    if (d->cfg.kafka_rewind_on_assign_s > 0) {
        int64_t ts_ms = ((int64_t)time(NULL) - d->cfg.kafka_rewind_on_assign_s) * 1000;
        for (int i = 0; i < n; i++)
            ccd_kafka_rewind(d->kafka, topic, parts[i], ts_ms);
    }
}

static void on_revoke(void *cookie, const char *topic, const int32_t *parts, int n)
{
    Ccd *d = cookie;
    int t = topic_index(d, topic);
    int marked = t >= 0 ? ccd_handover_release(d, t, parts, n) : 0;
    LOG_INFO("kafka", "revoked %d partition(s) of '%s': releasing %d cell(s)", n, topic, marked);
    if (!d->stopping)
        ccd_cells_reap(d->cells);
}

/* Partitions about to go (a rebalance or the leave at close): what was consumed from them
 * is stepped, their cells' state written to the state topic and the offsets acked; kafka.c
 * commits right after. */
static void on_handover(void *cookie, const char *topic, const int32_t *parts, int n)
{
    Ccd *d = cookie;
    ccd_sched_drain(d->sched);
    int t = topic_index(d, topic);
    if (t >= 0 && ccd_state_handover(d, t, parts, n))
        LOG_WARN("kafka",
                 "handover of %d partition(s) of '%s' incomplete: the next owner replays "
                 "from older offsets",
                 n, topic);
}

/* The session expired (brokers away): the cells stay, unassigned, until the group says
 * where their partitions went (kafka.h, on_lost). */
static void on_lost(void *cookie, const char *topic, const int32_t *parts, int n)
{
    (void)cookie;
    LOG_WARN("kafka",
             "%d partition(s) of '%s' lost (session expired): their cells are kept, "
             "unassigned, until the partitions are assigned again",
             n, topic);
}

/* Acks Kafka batches that produced nothing to step (all duplicates/invalid). */
void ccd_ingest_ack_idle(Ccd *d)
{
    if (d->kafka && last_kafka > acked_kafka && !ccd_sched_pending(d->sched) &&
        !ccd_sched_busy(d->sched)) {
        ccd_state_ack(d, last_kafka);
        acked_kafka = last_kafka;
    }
}

static void on_batch_done(void *cookie, CcdBatch *b)
{
    Ccd *d = cookie;
    ccd_cells_unbusy(d->cells, b);
    if (d->kafka && b->kafka_hi > acked_kafka) {
        ccd_state_ack(d, b->kafka_hi); /* now, or with the next snapshot (state.h) */
        acked_kafka = b->kafka_hi;
    }
    ccd_alerts_flush(d); /* alert transitions of this batch → Kafka, history */
    ccd_http_retry_deferred(d);
}

/* One poll of at most kafka.max_poll_messages per call, so that the loop stays responsive
 * (HTTP runs between polls); a full poll schedules the next one through a zero timeout,
 * which libevent runs after checking the sockets again. */
void ccd_ingest_poll(Ccd *d)
{
    if (!d->kafka || d->stopping)
        return;
    polled_in_batch = 0;
    uint64_t id = ccd_kafka_poll(d->kafka);
    if (id) {
        last_kafka = id;
        ccd_sched_note_kafka(d->sched, id);
    }
    ccd_sched_maybe_flush(d->sched, 0);
    if (polled_in_batch >= (uint64_t)d->cfg.kafka_max_poll_messages &&
        ccd_sched_pending(d->sched) < ccd_backpressure(d)) {
        static const struct timeval zero = {0, 0};
        evtimer_add(d->repoll_ev, &zero);
    }
    ccd_ingest_ack_idle(d);
}

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    ccd_ingest_poll(arg);
}

/* The scheduler seals a batch for the worker: the cell table resolves its values. */
static void on_seal(void *cookie, CcdBatch *b)
{
    Ccd *d = cookie;
    ccd_cells_seal(d->cells, b);
}

/* The worker is about to step a cell: an outage's zeros are held from the model (the
 * detector judges them as all_zero does), for at most ingest.outage_hold_steps steps. */
static int on_hold(void *cookie, CcdCell *c, const float *values, int imputed, uint64_t present,
                   int have_prev)
{
    Ccd *d = cookie;
    return ccd_alerts_outage_hold(d, c, values, imputed, present,
                                  have_prev ? d->cfg.ingest_outage_hold_steps : 0);
}

/* The worker stepped a cell: its forecast is published, then scored. */
static void on_stepped(void *cookie, CcdCell *c, int64_t step, const float *values, int imputed,
                       uint64_t present, int held)
{
    Ccd *d = cookie;
    CcForecast fc;
    ccd_publish_stepped(d->cells, c, step, values, imputed, present, held, &fc);
    ccd_alerts_on_stepped(d, c, step, values, imputed, present, &fc);
}

void ccd_ingest_backpressure(Ccd *d)
{
    int pending = ccd_sched_pending(d->sched), bp = ccd_backpressure(d);
    if (!d->kafka)
        return;
    if (!d->kafka_paused && pending >= bp) {
        ccd_kafka_pause(d->kafka, 1);
        d->kafka_paused = 1;
        LOG_DEBUG("ingest", "pausing Kafka: %d steps pending", pending);
    } else if (d->kafka_paused && pending < bp / 2) {
        ccd_kafka_pause(d->kafka, 0);
        d->kafka_paused = 0;
    }
}

int ccd_reopen_decoder(Ccd *d, const CcKpiSettings *ks, char *err, size_t errlen)
{
    CcKpiDecoder *old = d->kpi;
    d->kpi = NULL;
    int rc = cc_kpi_open(&d->kpi, ks, err, errlen);
    if (rc) {
        cc_kpi_close(&d->kpi);
        d->kpi = old;
        return rc;
    }
    cc_kpi_close(&old);
    return 0;
}

int ccd_ingest_open_kafka(Ccd *d, const CcdKafkaSettings *ks, char *err, size_t errlen)
{
    CcdKafkaHooks hooks = {d, on_message, on_assign, on_revoke, on_handover, on_lost};
    int rc = ccd_kafka_open(&d->kafka, ks, &hooks, err, errlen);
    if (rc)
        return rc;
    if (!(d->poll_ev =
              event_new(d->base, ccd_kafka_fd(d->kafka), EV_READ | EV_PERSIST, poll_cb, d)) ||
        !(d->repoll_ev = evtimer_new(d->base, poll_cb, d)) || event_add(d->poll_ev, NULL))
        return cc_errf(err, errlen, -ENOMEM, "cannot watch the Kafka consumer");
    return 0;
}

void ccd_ingest_sched_hooks(Ccd *d, CcdSchedSettings *ss)
{
    ss->on_done = on_batch_done;
    ss->on_stepped = on_stepped;
    ss->hold = on_hold;
    ss->seal = on_seal;
    ss->cookie = d;
}
