/*
 * state.c — snapshots of the cell table and the Kafka offsets acknowledged with them. See
 * state.h for the contract between the two.
 */
#include "state.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "alerts.h"
#include "cell_record.h"
#include "handover.h"
#include "cc_snapshot.h"
#include "log.h"

struct CcdState {
    char path[PATH_MAX];
    uint64_t ack_pending, ack_done;
    CcdStateStats st;
    uint64_t snapshot_cells;
    int64_t last_snap_ns;
};

typedef struct SnapCtx {
    Ccd *d;
    CcSnapshotWriter *w;
    int rc;
    uint64_t n;
    uint8_t *extra; /* the cell's extra bytes (cell_record.h: fields, scales, long history) */
    size_t cap;
} SnapCtx;

static void snap_cell(void *cookie, CcdCell *c)
{
    SnapCtx *x = cookie;
    int64_t first, last;
    if (x->rc || c->doomed || !c->cell)
        return;
    cc_cell_span(c->cell, &first, &last);
    if (first < 0)
        return;
    size_t n = ccd_cell_record_extra_size(x->d->cells, c, 1);
    if (n > x->cap) {
        uint8_t *p = realloc(x->extra, n);
        if (!p) {
            x->rc = -ENOMEM;
            return;
        }
        x->extra = p;
        x->cap = n;
    }
    n = ccd_cell_record_extra_write(x->d->cells, c, 1, x->extra, n);
    x->rc =
        cc_snapshot_write_engine_cell(x->w, c->id, c->cell, ccd_alerts_cell_state(c), x->extra, n);
    x->n++;
}

/* Writes the snapshot (loop thread, no batch in flight), then stores the offsets of what
 * it holds. 0, -EAGAIN (a batch is in flight), or -errno. */
/* Stores the offsets of every batch stepped so far (the state that holds them is durable). */
static void ack_pending(Ccd *d, uint64_t ack)
{
    CcdState *o = d->state;
    if (d->kafka && ack > o->ack_done) {
        ccd_kafka_ack(d->kafka, ack);
        o->ack_done = ack;
    }
}

/* Acks are held back until a checkpoint: when there is a snapshot file or a state topic. */
static int deferred(const Ccd *d) { return d->state->path[0] || ccd_handover_enabled(d); }

int ccd_state_handover(Ccd *d, int topic, const int32_t *parts, int n)
{
    uint64_t ack = d->state->ack_pending;
    int rc = ccd_handover_write(d, topic, parts, n);
    /* Safe with a snapshot file too: a restart restores the file, then the newer state
     * records of the partitions it is assigned. */
    if (!rc)
        ack_pending(d, ack);
    return rc;
}

/* The checkpoint: the snapshot file and the state records of the cells that stepped since
 * the last one (handover.c), then the offsets of what they hold. */
static int snapshot_write(Ccd *d, const char *why)
{
    CcdState *o = d->state;
    char err[512];
    if (!deferred(d))
        return 0;
    if (ccd_sched_busy(d->sched))
        return -EAGAIN;
    /* the transitions of the states about to be saved are journaled first: a restart from
     * this snapshot does not recompute them */
    ccd_alerts_flush(d);
    uint64_t ack = o->ack_pending;
    if (ccd_handover_enabled(d) && ccd_handover_write(d, -1, NULL, 0)) {
        LOG_WARN("state", "checkpoint (%s): state records not delivered; offsets not advanced",
                 why);
        o->last_snap_ns = cc_now_ns();
        return -EIO;
    }
    if (!o->path[0]) {
        o->last_snap_ns = cc_now_ns();
        ack_pending(d, ack);
        return 0;
    }
    int64_t t0 = cc_now_ns();
    CcSnapshotInfo in;
    cc_snapshot_info_for_model(&in, &d->model->hp);
    SnapCtx x = {d, NULL, 0, 0, NULL, 0};
    int rc = cc_snapshot_write_open(&x.w, o->path, &in, err, sizeof err);
    if (!rc) {
        ccd_cells_foreach(d->cells, snap_cell, &x);
        if (x.rc) {
            rc = x.rc;
            snprintf(err, sizeof err, "writing a cell record failed (%s)", strerror(-rc));
            cc_snapshot_write_abort(&x.w);
        } else {
            rc = cc_snapshot_write_finish(&x.w, err, sizeof err);
        }
    }
    free(x.extra);
    o->last_snap_ns = cc_now_ns();
    if (rc) {
        o->st.snapshot_errors++;
        LOG_ERROR("state", "snapshot %s (%s) failed: %s; offsets not advanced", o->path, why, err);
        return rc;
    }
    struct stat st;
    o->st.snapshots++;
    o->snapshot_cells = x.n;
    o->st.snapshot_unix = (int64_t)time(NULL);
    o->st.snapshot_bytes = stat(o->path, &st) ? -1 : (int64_t)st.st_size;
    o->st.snapshot_seconds = (double)(cc_now_ns() - t0) * 1e-9;
    ack_pending(d, ack);
    ccd_alerts_journal_compact(d);
    CCD_LOG(!strcmp(why, "periodic") ? CC_LOG_DEBUG : CC_LOG_INFO, "state",
            "snapshot %s (%s): %llu cells, %lld bytes in %.3f s", o->path, why,
            (unsigned long long)x.n, (long long)o->st.snapshot_bytes, o->st.snapshot_seconds);
    return 0;
}

void ccd_state_ack(Ccd *d, uint64_t id)
{
    CcdState *o = d->state;
    if (!d->kafka)
        return;
    if (!o || !deferred(d)) {
        ccd_kafka_ack(d->kafka, id);
        return;
    }
    if (id > o->ack_pending)
        o->ack_pending = id;
}

void ccd_state_restore(Ccd *d)
{
    CcdState *o = d->state;
    char err[512];
    CcSnapshotReader *r = NULL;
    CcSnapshotInfo info;
    const int F = d->model->hp.n_features;
    if (!o->path[0]) {
        LOG_INFO("state", "snapshots off (snapshot.path); a restart rebuilds cells from Kafka");
        return;
    }
    LOG_INFO("state", "snapshots: %s every %d s and at shutdown", o->path,
             d->cfg.snapshot_interval_s);
    int rc = cc_snapshot_read_open(&r, o->path, cc_snapshot_model_hash(&d->model->hp), &info, err,
                                   sizeof err);
    if (rc == -ENOENT) {
        LOG_INFO("state", "no snapshot at %s: starting empty, cells are built from Kafka", o->path);
        return;
    }
    if (rc) {
        LOG_WARN("state",
                 "snapshot refused: %s; falling back to rebuilding the cells from Kafka "
                 "(the file is left in place and replaced by the next snapshot)",
                 err);
        if (d->cfg.kafka_rewind_on_assign_s == 0) {
            /* re-read one window of history of the partitions assigned */
            d->cfg.kafka_rewind_on_assign_s = (int64_t)d->cells->ring * d->model->hp.step_seconds;
            LOG_INFO("state", "kafka.rewind_on_assign_s set to %lld s (one window) for this run",
                     (long long)d->cfg.kafka_rewind_on_assign_s);
        }
        return;
    }
    CcSnapshotRecord rec;
    uint64_t n = 0, failed = 0;
    CcdCell **done = NULL; /* restored, forecast pending (batched) */
    size_t nd = 0, cap = 0;
    /* A record refused by the reader (its checksums hold, its fields do not) is skipped and
     * counted like a cell that fails to restore: the other cells are restored, the refused
     * one starts empty and fills from new data. */
    while ((rc = cc_snapshot_read_next(r, &rec, err, sizeof err)) != 0) {
        if (rc == -EBADMSG && rec.type == CC_SNAP_POSITIONS) {
            /* not a cell: the offsets come from the group's committed ones anyway */
            LOG_WARN("state", "snapshot: positions record refused: %s", err);
            o->st.positions_refused++;
            continue;
        }
        if (rc == -EBADMSG) {
            LOG_WARN("state", "snapshot: cell record refused: %s", err);
            failed++;
            continue;
        }
        if (rc < 0)
            break;
        if (rec.type != CC_SNAP_CELL)
            continue;
        const CcSnapshotCell *sc = &rec.cell;
        if (sc->count <= 0 || sc->n_features != F)
            continue;
        if (nd == cap) { /* a full batch: forecast it */
            ccd_cell_record_forecast(d, done, (int)nd);
            nd = 0;
            if (!cap && (done = malloc(1024 * sizeof *done)))
                cap = 1024;
        }
        CcdCell *c = NULL;
        int batch = cap && ccd_cell_record_can_batch(d);
        if (ccd_cell_record_restore(d, sc, batch ? &c : NULL, err, sizeof err)) {
            LOG_WARN("state", "snapshot: cell %s not restored: %s", sc->cell_id, err);
            failed++;
            continue;
        }
        if (batch)
            done[nd++] = c;
        n++;
    }
    ccd_cell_record_forecast(d, done, (int)nd);
    free(done);
    if (rc < 0)
        LOG_ERROR("state", "snapshot %s: %s (after %llu cells)", o->path, err,
                  (unsigned long long)n);
    cc_snapshot_read_close(&r);
    o->st.restored_cells = n;
    o->st.restore_failed = failed;
    /* the embedded broker is in memory: the offsets committed with the snapshot died with
     * the previous process, and so did every message it held */
    const char *brokers = d->cfg.kafka_brokers ? d->cfg.kafka_brokers : "";
    int embedded = !strcmp(brokers, "embedded"), no_kafka = !strcmp(brokers, "none");
    LOG_INFO("state", "snapshot %s restored: %llu cells (%llu failed), written %lld s ago; %s",
             o->path, (unsigned long long)n, (unsigned long long)failed,
             (long long)((int64_t)time(NULL) - info.created_s),
             no_kafka   ? "no Kafka (kafka.brokers none): the cells continue with the records "
                          "posted to /v1/kpis"
             : embedded ? "the embedded broker kept nothing across the restart: steps produced "
                          "to the previous one after this snapshot are lost, its offsets too"
                        : "Kafka resumes at the offsets committed with it");
}

int ccd_state_open(Ccd *d, char *err, size_t errlen)
{
    CcdState *o = calloc(1, sizeof *o);
    if (!o)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    d->state = o;
    /* snapshot.path: "auto" = $STATE_DIRECTORY/state.snap under systemd, else off */
    const char *sp = d->cfg.snapshot_path;
    if (!strcmp(sp, "auto")) {
        const char *sd = getenv("STATE_DIRECTORY");
        if (sd && sd[0]) {
            char first[PATH_MAX];
            snprintf(first, sizeof first, "%s", sd);
            char *colon = strchr(first, ':'); /* several directories: the first */
            if (colon)
                *colon = 0;
            if (snprintf(o->path, sizeof o->path, "%s/state.snap", first) >= (int)sizeof o->path)
                o->path[0] = 0;
        }
    } else {
        snprintf(o->path, sizeof o->path, "%s", sp);
    }
    o->last_snap_ns = cc_now_ns();
    return 0;
}

void ccd_state_close(Ccd *d)
{
    free(d->state);
    d->state = NULL;
}

const char *ccd_state_path(const Ccd *d) { return d->state->path; }

void ccd_state_cron(Ccd *d)
{
    CcdState *o = d->state;
    int64_t now_ns = cc_now_ns();
    if (!o || !deferred(d) || d->cfg.snapshot_interval_s <= 0 ||
        now_ns - o->last_snap_ns < (int64_t)d->cfg.snapshot_interval_s * 1000000000LL)
        return;
    /* a batch in flight: try again next second; under sustained load (the worker never idle
     * at the cron) wait for it after 5 s, or the offsets would never advance */
    if (ccd_sched_busy(d->sched) &&
        now_ns - o->last_snap_ns >= ((int64_t)d->cfg.snapshot_interval_s + 5) * 1000000000LL)
        ccd_sched_drain(d->sched);
    snapshot_write(d, "periodic");
}

void ccd_state_shutdown(Ccd *d)
{
    CcdState *o = d->state;
    if (o && deferred(d) && snapshot_write(d, "shutdown"))
        LOG_WARN("state", "no snapshot at shutdown: offsets stay at the previous snapshot");
}

void ccd_state_stats(const Ccd *d, CcdStateStats *st) { *st = d->state->st; }
