/*
 * handover.c — cell state on the Kafka state topic: written at checkpoints and handovers,
 * read on assignment. See handover.h for the protocol and docs/operations.md ("Several
 * instances") for why a state topic rather than a rewind of the KPI topic.
 */
#include "handover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alerts.h"
#include "cc_snapshot.h"
#include "cluster.h"
#include "clock.h"
#include "log.h"
#include "cell_record.h"

#define WRITE_TIMEOUT_MS 15000 /* a handover: the next owner waits for these records */
/* A checkpoint blocks the event loop (HTTP included) at most this long; records not
 * delivered by then stay queued (the producer retries them) and the offsets wait. */
#define CHECKPOINT_TIMEOUT_MS 3000
#define READ_TIMEOUT_MS 30000

struct CcdHandover {
    char topic[256];
    int enabled, checked;
    int rewrite_all; /* a write failed: the next one writes every cell again */
    CcSnapshotWriter *enc;
    CcSnapshotReader *dec;
    CcdHandoverStats st;
};

void ccd_handover_topic(const CcdConfig *cfg, char *buf, size_t len)
{
    const char *t = cfg->kafka_state_topic ? cfg->kafka_state_topic : "";
    if (!strcmp(t, "auto"))
        snprintf(buf, len, "%s.state", cfg->kafka_topics.n ? cfg->kafka_topics.items[0] : "kpis");
    else
        snprintf(buf, len, "%s", t);
}

int ccd_handover_open(Ccd *d, char *err, size_t errlen)
{
    CcdHandover *h = calloc(1, sizeof *h);
    if (!h)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    ccd_handover_topic(&d->cfg, h->topic, sizeof h->topic);
    h->enabled = d->kafka && h->topic[0];
    CcSnapshotInfo in;
    cc_snapshot_info_for_model(&in, &d->model->hp);
    if (cc_snapshot_encoder_open(&h->enc, &in) || cc_snapshot_decoder_open(&h->dec, &in)) {
        cc_snapshot_encoder_close(&h->enc);
        cc_snapshot_read_close(&h->dec);
        free(h);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    d->handover = h;
    if (h->enabled)
        LOG_INFO("handover", "cell state follows its partition through the state topic '%s'",
                 h->topic);
    return 0;
}

void ccd_handover_close(Ccd *d)
{
    CcdHandover *h = d->handover;
    if (!h)
        return;
    cc_snapshot_encoder_close(&h->enc);
    cc_snapshot_read_close(&h->dec);
    free(h);
    d->handover = NULL;
}

int ccd_handover_enabled(const Ccd *d) { return d->handover && d->handover->enabled; }

void ccd_handover_stats(const Ccd *d, CcdHandoverStats *st)
{
    if (d->handover)
        *st = d->handover->st;
    else
        memset(st, 0, sizeof *st);
}

static int has_part(const int32_t *parts, int n, int32_t p)
{
    for (int i = 0; i < n; i++)
        if (parts[i] == p)
            return 1;
    return 0;
}

/* ---- writing ---- */

typedef struct WriteCtx {
    Ccd *d;
    int topic;
    const int32_t *parts;
    int n;
    int rc;
    uint64_t written;
    const CcdKafkaOwned *owned; /* checkpoint: the partitions fetched now */
    int n_owned;
    uint8_t *extra; /* a cell's extra bytes, reused (cap of them) */
    size_t cap;
} WriteCtx;

/* Whether this member fetches (topic index, partition) now: a lost partition's cells are
 * kept but their state is not written — another member may own them meanwhile, and a
 * stale record written after its records would win on the next move. */
static int fetching(const WriteCtx *x, int topic, int32_t partition)
{
    const char *name = x->d->cfg.kafka_topics.items[topic];
    for (int i = 0; i < x->n_owned; i++)
        if (x->owned[i].partition == partition && x->owned[i].fetching &&
            !strcmp(x->owned[i].topic, name))
            return 1;
    return 0;
}

static void write_cell(void *cookie, CcdCell *c)
{
    WriteCtx *x = cookie;
    CcdHandover *h = x->d->handover;
    int64_t first, last;
    if (x->rc || !c->cell || c->doomed || c->topic < 0 || c->partition < 0)
        return;
    if (x->topic >= 0
            ? c->topic != x->topic || !has_part(x->parts, x->n, c->partition)
            : c->topic >= x->d->cfg.kafka_topics.n || !fetching(x, c->topic, c->partition))
        return;
    cc_cell_span(c->cell, &first, &last);
    if (first < 0 || (!h->rewrite_all && c->state_step == last + 1))
        return;
    /* the cell's fields and interval scales (cell_record.h), not its long history */
    size_t n_extra = ccd_cell_record_extra_size(x->d->cells, c, 0);
    if (n_extra > x->cap) {
        uint8_t *p = realloc(x->extra, n_extra);
        if (!p) {
            x->rc = -ENOMEM;
            return;
        }
        x->extra = p;
        x->cap = n_extra;
    }
    n_extra = ccd_cell_record_extra_write(x->d->cells, c, 0, x->extra, n_extra);
    const void *buf;
    size_t len;
    int rc = cc_snapshot_encode_engine_cell(h->enc, c->id, c->cell, ccd_alerts_cell_state(c),
                                            x->extra, n_extra, &buf, &len);
    if (!rc) {
        rc = ccd_kafka_produce_to(x->d->kafka, h->topic, c->partition, c->id, strlen(c->id), buf,
                                  len);
        if (rc == -ENOBUFS && !ccd_kafka_flush(x->d->kafka, WRITE_TIMEOUT_MS)) /* queue full */
            rc = ccd_kafka_produce_to(x->d->kafka, h->topic, c->partition, c->id, strlen(c->id),
                                      buf, len);
    }
    if (rc) {
        x->rc = rc;
        return;
    }
    c->state_step = last + 1;
    x->written++;
    h->st.records_written++;
    h->st.bytes_written += len + strlen(c->id);
}

int ccd_handover_write(Ccd *d, int topic, const int32_t *parts, int n)
{
    CcdHandover *h = d->handover;
    if (!ccd_handover_enabled(d))
        return 0;
    int64_t t0 = cc_now_ns();
    uint64_t bytes0 = h->st.bytes_written;
    CcdKafkaStats ks;
    ccd_kafka_stats(d->kafka, &ks);
    /* at shutdown the last checkpoint is the one the next start restores from: give what is
     * still in flight (a burst of alerts just produced) a checkpoint's time, not 500 ms */
    if (topic < 0 && ks.produce_queue > 0 &&
        ccd_kafka_flush(d->kafka, d->stopping ? CHECKPOINT_TIMEOUT_MS : 500)) {
        /* the last checkpoint's records (or alerts) still undelivered: brokers away? Do not
         * pile more up; the offsets wait for a checkpoint that gets through */
        CCD_LOG_RL(CC_LOG_WARN, "handover",
                   "checkpoint skipped: %lld produced message(s) still undelivered",
                   (long long)ks.produce_queue);
        return -EAGAIN;
    }
    CcdKafkaOwned owned[1024];
    int n_owned = ccd_kafka_owned_partitions(d->kafka, owned, 1024);
    WriteCtx x = {d, topic, parts, n, 0, 0, owned, n_owned < 1024 ? n_owned : 1024, NULL, 0};
    ccd_cells_foreach(d->cells, write_cell, &x);
    free(x.extra);
    int rc = x.rc ? x.rc
                  : ccd_kafka_flush(d->kafka, topic < 0 ? CHECKPOINT_TIMEOUT_MS : WRITE_TIMEOUT_MS);
    if (rc) {
        h->rewrite_all = 1;
        h->st.write_errors++;
        LOG_ERROR("handover", "state records to '%s' not delivered (%s): offsets held back",
                  h->topic, strerror(-rc));
        return rc;
    }
    if (topic < 0)
        h->rewrite_all = 0;
    CCD_LOG(topic < 0 ? CC_LOG_DEBUG : CC_LOG_INFO, "handover",
            "%llu state record(s), %llu bytes, written to '%s' in %.3f s (%s)",
            (unsigned long long)x.written, (unsigned long long)(h->st.bytes_written - bytes0),
            h->topic, (double)(cc_now_ns() - t0) * 1e-9, topic < 0 ? "checkpoint" : "handover");
    return 0;
}

typedef struct ReleaseCtx {
    int topic, enabled, undelivered; /* undelivered: the last write failed */
    const int32_t *parts;
    int n;
    uint64_t sent, behind, cold;
} ReleaseCtx;

static void count_release(void *cookie, CcdCell *c)
{
    ReleaseCtx *x = cookie;
    int64_t first = -1, last = -1;
    if (c->doomed || c->topic != x->topic || !has_part(x->parts, x->n, c->partition))
        return;
    if (c->cell)
        cc_cell_span(c->cell, &first, &last);
    if (!x->enabled || c->state_step <= 0)
        x->cold++;
    else if (!x->undelivered && first >= 0 && c->state_step == last + 1)
        x->sent++;
    else
        x->behind++;
}

int ccd_handover_release(Ccd *d, int topic, const int32_t *parts, int n)
{
    CcdHandover *h = d->handover;
    ReleaseCtx x = {topic, ccd_handover_enabled(d), h && h->rewrite_all, parts, n, 0, 0, 0};
    ccd_cells_foreach(d->cells, count_release, &x);
    int released = ccd_cells_release_partitions(d->cells, topic, parts, n);
    if (h) {
        h->st.cells_sent += x.sent;
        h->st.cells_behind += x.behind;
        h->st.cells_cold += x.cold;
    }
    if (x.sent || x.behind || x.cold)
        LOG_INFO("handover",
                 "%d partition(s) of '%s' handed over: %llu cell(s) with their newest state on "
                 "'%s', %llu with an older one (the next owner replays the rest), %llu cold%s",
                 n, d->cfg.kafka_topics.items[topic], (unsigned long long)x.sent,
                 x.enabled ? h->topic : "(none)", (unsigned long long)x.behind,
                 (unsigned long long)x.cold,
                 x.enabled ? "" : " (no state topic: the next owner starts them anew)");
    return released;
}

void ccd_handover_cell_gone(void *cookie, CcdCell *c)
{
    Ccd *d = cookie;
    CcdHandover *h = d->handover;
    if (ccd_handover_enabled(d) && !d->stopping && !c->doomed && c->state_step > 0 &&
        c->partition >= 0 &&
        !ccd_kafka_produce_to(d->kafka, h->topic, c->partition, c->id, strlen(c->id), NULL, 0))
        h->st.tombstones_written++;
    ccd_alerts_cell_free(d, c);
}

/* ---- reading ---- */

/* The newest record of each cell read so far (open addressing on the id). */
typedef struct Slot {
    char *key; /* NULL: empty */
    uint8_t *val;
    size_t len;        /* 0 with val NULL: a tombstone */
    int32_t partition; /* of the state topic, where it was read */
} Slot;

typedef struct ReadCtx {
    Slot *slots;
    size_t cap, used;
    int oom;
    uint64_t records;
} ReadCtx;

static Slot *slot_find(ReadCtx *x, const char *key, size_t key_len)
{
    size_t i = (size_t)cc_fnv1a(CC_FNV1A_SEED, key, key_len) & (x->cap - 1);
    while (x->slots[i].key &&
           (strlen(x->slots[i].key) != key_len || memcmp(x->slots[i].key, key, key_len)))
        i = (i + 1) & (x->cap - 1);
    return &x->slots[i];
}

static int grow(ReadCtx *x)
{
    size_t cap = x->cap ? x->cap * 2 : 1024;
    Slot *ns = calloc(cap, sizeof *ns), *old = x->slots;
    if (!ns)
        return -ENOMEM;
    size_t ocap = x->cap;
    x->slots = ns;
    x->cap = cap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key)
            *slot_find(x, old[i].key, strlen(old[i].key)) = old[i];
    free(old);
    return 0;
}

static void on_record(void *cookie, int32_t partition, const void *key, size_t key_len,
                      const void *payload, size_t len)
{
    ReadCtx *x = cookie;
    x->records++;
    if (x->oom || !key || !key_len || key_len > 255)
        return;
    if (2 * (x->used + 1) > x->cap && grow(x)) {
        x->oom = 1;
        return;
    }
    Slot *s = slot_find(x, key, key_len);
    uint8_t *v = payload && len ? malloc(len) : NULL;
    if (payload && len && !v) {
        x->oom = 1;
        return;
    }
    if (v)
        memcpy(v, payload, len);
    if (!s->key) {
        if (!(s->key = strndup(key, key_len))) {
            free(v);
            x->oom = 1;
            return;
        }
        x->used++;
    }
    free(s->val);
    s->val = v;
    s->len = v ? len : 0;
    s->partition = partition;
}

typedef struct Restored {
    CcdCell **cells; /* restored, forecast pending */
    int n, cap;
    int64_t forecast_ns;  /* in ccd_cell_record_forecast */
    int32_t n_partitions; /* of the KPI topic, -1 unknown */
    int64_t max_ts;       /* ccd_clock_max_ts at the start of the takeover */
} Restored;

static void forecast(Ccd *d, Restored *r)
{
    int64_t t0 = cc_now_ns();
    ccd_cell_record_forecast(d, r->cells, r->n);
    r->forecast_ns += cc_now_ns() - t0;
    r->n = 0;
}

/* Restores one cell's newest record, unless this member holds a newer state of it. */
static void restore_slot(Ccd *d, int topic, const Slot *s, Restored *out)
{
    CcdHandover *h = d->handover;
    char err[512];
    CcdCell *c = ccd_cells_get(d->cells, s->key);
    if (!s->val) { /* tombstone: the cell was evicted by its owner */
        h->st.tombstones++;
        if (c && c->topic == topic && !c->busy && !c->open_items && !c->doomed) {
            c->doomed = 1; /* released by the reap after the restore */
            d->cells->n_doomed++;
        }
        return;
    }
    CcSnapshotRecord rec;
    if (cc_snapshot_decode(h->dec, s->val, s->len, &rec, err, sizeof err)) {
        h->st.records_refused++;
        CCD_LOG_RL(CC_LOG_WARN, "handover", "state record of %s refused: %s", s->key, err);
        return;
    }
    const CcSnapshotCell *sc = &rec.cell;
    CcdCellRecordExtra ex;
    /* keyed: the check refuses fewer extra bytes than the fields; the interval scales after
     * them are checked by the restore (cell_record.h) */
    if (ccd_cell_record_check(sc, s->key, s->partition, d->model->hp.step_seconds, out->max_ts, err,
                              sizeof err)) {
        h->st.records_refused++;
        CCD_LOG_RL(CC_LOG_WARN, "handover", "state record keyed '%s' on partition %d refused: %s",
                   s->key, (int)s->partition, err);
        return;
    }
    memcpy(&ex, sc->extra, sizeof ex);
    if (ex.topic != topic)
        return; /* a cell of another KPI topic co-partitioned here */
    /* Where kafka.partitioner puts the cell: a record elsewhere was written by a member that
     * got the cell's messages there, i.e. the KPI producers use another partitioner (then
     * redirects go astray too), or it is forged. Counted and told; restored all the same:
     * refusing would start every cell of such a deployment cold. */
    int32_t mapped = out->n_partitions > 0 ? ccd_partition_of_key(d->cfg.kafka_partitioner, s->key,
                                                                  strlen(s->key), out->n_partitions)
                                           : s->partition;
    if (mapped != s->partition) {
        h->st.records_misplaced++;
        CCD_LOG_RL(CC_LOG_WARN, "handover",
                   "state record of %s on partition %d: kafka.partitioner (%s) puts that cell "
                   "in partition %d of %d; the KPI producers must use kafka.partitioner, keyed "
                   "by the cell id (docs/operations.md, \"Finding a cell\")",
                   s->key, (int)s->partition, ccd_partitioner_name(d->cfg.kafka_partitioner),
                   (int)mapped, (int)out->n_partitions);
    }
    int64_t last = sc->first + sc->count - 1;
    if (c && c->cell) {
        int64_t first, mine;
        cc_cell_span(c->cell, &first, &mine);
        if (mine >= last || c->busy || c->open_items) { /* ours is as new: keep it */
            h->st.cells_kept++;
            return;
        }
    }
    if (out->n == out->cap) /* a full batch: forecast it */
        forecast(d, out);
    int batch = out->cap && ccd_cell_record_can_batch(d);
    c = NULL;
    if (ccd_cell_record_restore(d, sc, batch ? &c : NULL, err, sizeof err)) {
        h->st.records_refused++;
        CCD_LOG_RL(CC_LOG_WARN, "handover", "cell %s not restored: %s", s->key, err);
        return;
    }
    if (batch)
        out->cells[out->n++] = c;
    c = ccd_cells_get(d->cells, s->key);
    if (c)
        c->state_step = last + 1;
    h->st.cells_restored++;
}

typedef struct PruneCtx {
    int topic;
    const CcdKafkaOwned *owned;
    int n_owned;
    const int32_t *parts;
    int n;
    const char *name;
    int32_t *gone;
    int n_gone;
} PruneCtx;

static void find_unowned(void *cookie, CcdCell *c)
{
    PruneCtx *x = cookie;
    if (c->topic != x->topic || c->partition < 0 || c->doomed ||
        has_part(x->parts, x->n, c->partition) || has_part(x->gone, x->n_gone, c->partition))
        return;
    for (int i = 0; i < x->n_owned; i++)
        if (x->owned[i].partition == c->partition && !strcmp(x->owned[i].topic, x->name))
            return;
    if (x->n_gone < 4096)
        x->gone[x->n_gone++] = c->partition;
}

/* Releases the cells of `topic` on partitions this member does not own: a snapshot restored
 * at start holds the cells of the partitions it owned then, not of those it owns now. */
static void prune(Ccd *d, const char *name, int topic, const int32_t *parts, int n)
{
    CcdKafkaOwned owned[1024];
    int32_t gone[4096];
    int n_owned = ccd_kafka_owned_partitions(d->kafka, owned, 1024);
    PruneCtx x = {topic, owned, n_owned < 1024 ? n_owned : 1024, parts, n, name, gone, 0};
    ccd_cells_foreach(d->cells, find_unowned, &x);
    if (!x.n_gone)
        return;
    int released = ccd_cells_release_partitions(d->cells, topic, gone, x.n_gone);
    ccd_cells_reap(d->cells);
    LOG_INFO("handover", "%d cell(s) of %d partition(s) this member does not own released",
             released, x.n_gone);
}

void ccd_handover_assign(Ccd *d, const char *name, int topic, const int32_t *parts, int n)
{
    CcdHandover *h = d->handover;
    if (!d->kafka || topic < 0)
        return;
    ccd_sched_drain(d->sched); /* restoring steps the engine: the worker must be idle */
    if (ccd_handover_enabled(d) && !h->checked) {
        /* The setup at start could not check or create the topics (e.g. the KPI topic did
         * not exist yet): now it can. A refusal here cannot stop a running member: logged,
         * and the checks below turn the handover off if the state topic is unusable. */
        char msg[2048];
        int tr = ccd_kafka_recheck_topics(d->kafka, msg, sizeof msg);
        if (tr)
            CCD_LOG(tr == -EAGAIN ? CC_LOG_WARN : CC_LOG_ERROR, "handover", "topic setup: %s", msg);
        else if (msg[0])
            LOG_INFO("handover", "topic setup: %s", msg);
        int sp = ccd_kafka_topic_partitions(d->kafka, h->topic);
        int kp = ccd_kafka_topic_partitions(d->kafka, name);
        h->checked = 1;
        if (sp < 0 || (kp > 0 && sp < kp)) {
            h->enabled = 0;
            if (sp < 0)
                LOG_WARN("handover",
                         "state topic '%s' not found: cells of a partition that changes "
                         "member start cold (create it compacted with the partitions of '%s', "
                         "or set kafka.state_topic \"\" to silence this)",
                         h->topic, name);
            else
                LOG_ERROR("handover",
                          "state topic '%s' has %d partitions, '%s' %d: they must be "
                          "co-partitioned; state handover off",
                          h->topic, sp, name, kp);
        }
    }
    if (ccd_handover_enabled(d)) {
        int64_t t0 = cc_now_ns();
        ReadCtx x = {0};
        int rc = grow(&x);
        if (!rc)
            rc = ccd_kafka_read_partitions(d->kafka, h->topic, parts, n, on_record, &x,
                                           READ_TIMEOUT_MS);
        if (rc || x.oom)
            LOG_ERROR("handover",
                      "reading the state of %d partition(s) from '%s': %s; their cells may "
                      "start cold",
                      n, h->topic, x.oom ? "out of memory" : strerror(-rc));
        double read_s = (double)(cc_now_ns() - t0) * 1e-9;
        uint64_t before = h->st.cells_restored, kept = h->st.cells_kept,
                 refused = h->st.records_refused;
        Restored done = {malloc(1024 * sizeof(CcdCell *)),
                         0,
                         1024,
                         0,
                         ccd_kafka_topic_partitions(d->kafka, name),
                         ccd_clock_max_ts(d)};
        if (!done.cells)
            done.cap = 0; /* forecast one by one */
        for (size_t i = 0; i < x.cap; i++)
            if (x.slots[i].key) {
                restore_slot(d, topic, &x.slots[i], &done);
                free(x.slots[i].key);
                free(x.slots[i].val);
            }
        forecast(d, &done);
        free(done.cells);
        free(x.slots);
        ccd_cells_reap(d->cells);
        h->st.records_read += x.records;
        h->st.takeovers++;
        h->st.last_takeover_s = (double)(cc_now_ns() - t0) * 1e-9;
        h->st.last_takeover_cells = h->st.cells_restored - before;
        LOG_INFO("handover",
                 "takeover of %d partition(s) of '%s': %llu state record(s) read, %llu cell(s) "
                 "restored in %.3f s (read %.3f s, forecasts %.3f s; %llu kept: this member's "
                 "state was as new; %llu refused)",
                 n, name, (unsigned long long)x.records,
                 (unsigned long long)h->st.last_takeover_cells, h->st.last_takeover_s, read_s,
                 (double)done.forecast_ns * 1e-9, (unsigned long long)(h->st.cells_kept - kept),
                 (unsigned long long)(h->st.records_refused - refused));
    }
    prune(d, name, topic, parts, n);
}
