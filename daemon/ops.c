/*
 * ops.c — alerting and operations of cellcastd (issue 5): the alert sink (worker → queue
 * → Kafka alert topic + history + journal), per-cell scores, state snapshots, reload, and
 * systemd notifications. See ops.h for the threading and the offset/snapshot contract.
 */
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cc_config.h"
#include "cc_snapshot.h"
#include "http.h"
#include "log.h"
#include "notify.h"

#define HIST_MAX 10000   /* transitions kept for GET /v1/alerts */
#define JBUCKETS 4096

/* Per-cell ops state (CcdCell.anomaly). ac belongs to whoever owns the cell (worker while
 * busy); the pub_* fields are written under the table's pub_lock. */
typedef struct OpsCell {
    CcAnomalyCell *ac;
    int64_t pub_step;            /* last scored step, -1 */
    double pub_score;
    int F;                       /* KPIs of pub */
    int pub_anomaly_firing, pub_dq_firing;
    uint64_t pub_quiet;
    double pub[];                // (PUB_N, F) per-KPI scores of pub_step, sized to the model's
                                 // KPIs: a resident cell must not pay for CC_MAX_FEATURES
} OpsCell;

/* Rows of OpsCell.pub. */
enum { PUB_Z, PUB_CU_UP, PUB_CU_DOWN, PUB_PR_EXP, PUB_PR_UP, PUB_PR_DOWN, PUB_N };

/* A transition with its cell id copied (CcAlertEvent.cell_id points at cell). */
typedef struct QEvent {
    CcAlertEvent ev;
    char cell[CC_ANOMALY_CELL_ID_MAX + 1];
    uint64_t seq;
} QEvent;

typedef struct JEntry {
    struct JEntry *next;
    int64_t step;
    char cell[];
} JEntry;

typedef struct EvVec {
    QEvent *v;
    size_t n, cap;
} EvVec;

struct CcdOps {
    CcAnomaly *an;
    CcdNotify *notify;
    int argc;
    char **argv;
    char snap_path[PATH_MAX];
    char journal_path[PATH_MAX + 16];
    FILE *journal;
    /* worker/tick → loop */
    pthread_mutex_t qlock;
    EvVec q;
    /* produce refused (queue full): retried in order, never dropped */
    EvVec retry;
    /* history ring */
    QEvent *hist;
    size_t hn, hhead; /* count, index of the oldest */
    uint64_t seq;
    /* journal: cell → last step whose transition was produced */
    pthread_mutex_t jlock;
    JEntry *jb[JBUCKETS];
    /* offsets */
    uint64_t ack_pending, ack_done;
    /* counters */
    uint64_t trans[2][5][3][3]; /* kind, reason, state, severity */
    uint64_t produced, produce_refused, quiet_total;
    uint64_t snapshots, snapshot_errors, snapshot_cells, restored_cells;
    int64_t snapshot_unix, snapshot_bytes;
    double snapshot_seconds;
    int restore_result; /* 0 restored, 1 none, 2 refused */
    uint64_t reloads_ok, reloads_failed;
    int64_t last_snap_ns, last_status_ns, last_wd_ns;
    int64_t busy_since_ns; /* the worker has been busy since (0: idle at the last cron) */
    int tick_enabled;
};

static CcdOps *OPS(Ccd *d) { return d->ops; }

/* ---- model path ----------------------------------------------------------------------- */

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void ccd_ops_model_path(const char *path, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", path);
    if (!path[0] || path[0] == '/' || file_exists(path))
        return;
    char cand[PATH_MAX];
    const char *home = getenv("CELLCAST_HOME");
    if (home && home[0]) {
        snprintf(cand, sizeof cand, "%s/%s", home, path);
        if (file_exists(cand)) {
            snprintf(out, outlen, "%s", cand);
            return;
        }
    }
    snprintf(cand, sizeof cand, "%s/%s", CC_DATADIR, path);
    if (file_exists(cand)) {
        snprintf(out, outlen, "%s", cand);
        return;
    }
    const char *slash = strrchr(path, '/');
    if (slash) {
        snprintf(cand, sizeof cand, "%s/%s", CC_DATADIR, slash + 1);
        if (file_exists(cand))
            snprintf(out, outlen, "%s", cand);
    }
}

/* ---- settings ------------------------------------------------------------------------- */

static int anomaly_settings(const CcdConfig *cfg, const CcHparams *hp, CcAnomalySettings *s,
                            char *err, size_t errlen)
{
    int nk;
    const CcAnomalyKey *keys = cc_anomaly_keys(&nk);
    cc_anomaly_default_settings(s);
    for (int i = 0; i < nk; i++) {
        size_t sz = keys[i].type == CC_AKEY_INT ? sizeof(int)
                    : keys[i].type == CC_AKEY_INT64 ? sizeof(int64_t) : sizeof(double);
        memcpy((char *)s + keys[i].offset, (const char *)&cfg->alerts + keys[i].offset, sz);
    }
    s->n_features = hp->n_features;
    s->step_seconds = hp->step_seconds;
    for (int i = 0; i < cfg->alerts_kpis.n; i++) {
        char key[256], e2[256];
        snprintf(key, sizeof key, "kpis.%s", cfg->alerts_kpis.items[i].key);
        if (cc_anomaly_settings_set(s, hp, key, cfg->alerts_kpis.items[i].value, e2, sizeof e2))
            return cc_errf(err, errlen, -EINVAL, "%s", e2);
    }
    char e3[256];
    if (cc_anomaly_validate(s, e3, sizeof e3))
        return cc_errf(err, errlen, -EINVAL, "alerts: %s", e3);
    return 0;
}

int ccd_ops_check(const CcdConfig *cfg, const CcHparams *hp, char *err, size_t errlen)
{
    CcAnomalySettings s;
    return anomaly_settings(cfg, hp, &s, err, errlen);
}

/* ---- journal -------------------------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* jlock held */
static JEntry **jfind(CcdOps *o, const char *cell)
{
    JEntry **pp = &o->jb[hash_str(cell) % JBUCKETS];
    while (*pp && strcmp((*pp)->cell, cell))
        pp = &(*pp)->next;
    return pp;
}

/* jlock held */
static void jset(CcdOps *o, const char *cell, int64_t step)
{
    JEntry **pp = jfind(o, cell);
    if (*pp) {
        if (step > (*pp)->step)
            (*pp)->step = step;
        return;
    }
    size_t n = strlen(cell) + 1;
    JEntry *e = malloc(sizeof *e + n);
    if (!e)
        return;
    memcpy(e->cell, cell, n);
    e->step = step;
    e->next = NULL;
    *pp = e;
}

static int64_t jget(CcdOps *o, const char *cell)
{
    pthread_mutex_lock(&o->jlock);
    JEntry **pp = jfind(o, cell);
    int64_t s = *pp ? (*pp)->step : -1;
    pthread_mutex_unlock(&o->jlock);
    return s;
}

static void journal_load(CcdOps *o)
{
    FILE *f = fopen(o->journal_path, "r");
    char line[256];
    int n = 0;
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        long long step;
        char cell[CC_ANOMALY_CELL_ID_MAX + 1];
        if (sscanf(line, "%lld %64s", &step, cell) == 2) {
            jset(o, cell, step);
            n++;
        }
    }
    fclose(f);
    LOG_INFO("alerts", "journal %s: %d transition(s) already produced (not produced again on replay)",
             o->journal_path, n);
}

/* Rewrites the journal compactly (loop thread): temp file, rename. */
static void journal_compact(CcdOps *o)
{
    char tmp[PATH_MAX + 32];
    if (!o->journal_path[0])
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp", o->journal_path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        LOG_WARN("alerts", "cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    pthread_mutex_lock(&o->jlock);
    for (int b = 0; b < JBUCKETS; b++)
        for (JEntry *e = o->jb[b]; e; e = e->next)
            fprintf(f, "%lld %s\n", (long long)e->step, e->cell);
    pthread_mutex_unlock(&o->jlock);
    int bad = fflush(f) || fsync(fileno(f));
    bad |= fclose(f);
    if (bad || rename(tmp, o->journal_path)) {
        LOG_WARN("alerts", "cannot replace %s: %s", o->journal_path, strerror(errno));
        unlink(tmp);
        return;
    }
    if (o->journal)
        fclose(o->journal);
    o->journal = fopen(o->journal_path, "a");
}

/* ---- the sink ------------------------------------------------------------------------- */

static int vec_push(EvVec *v, const QEvent *e)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        QEvent *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = *e;
    v->v[v->n - 1].ev.cell_id = v->v[v->n - 1].cell;
    return 0;
}

static void sink_emit(void *cookie, const CcAlertEvent *ev)
{
    CcdOps *o = cookie;
    QEvent e;
    e.ev = *ev;
    snprintf(e.cell, sizeof e.cell, "%s", ev->cell_id);
    e.seq = 0;
    pthread_mutex_lock(&o->qlock);
    if (vec_push(&o->q, &e))
        LOG_ERROR("alerts", "out of memory queueing alert %s", ev->id); /* daemon policy: log */
    pthread_mutex_unlock(&o->qlock);
}

static OpsCell *ops_cell(Ccd *d, CcdCell *c)
{
    CcdOps *o = OPS(d);
    if (c->anomaly)
        return c->anomaly;
    int F = d->model->hp.n_features;
    OpsCell *oc = calloc(1, sizeof *oc + (size_t)PUB_N * (size_t)F * sizeof(double));
    if (!oc)
        return NULL;
    oc->F = F;
    if (cc_anomaly_cell_open(&oc->ac, o->an, c->id)) {
        free(oc);
        return NULL;
    }
    oc->pub_step = -1;
    int64_t q = jget(o, c->id);
    if (q >= 0)
        cc_anomaly_cell_quiet_until(oc->ac, q);
    pthread_mutex_lock(&d->cells->pub_lock); /* HTTP and /metrics read the pointer */
    c->anomaly = oc;
    pthread_mutex_unlock(&d->cells->pub_lock);
    return oc;
}

void ccd_ops_cell_free(Ccd *d, CcdCell *c)
{
    OpsCell *oc = c->anomaly;
    if (!oc)
        return;
    pthread_mutex_lock(&d->cells->pub_lock);
    c->anomaly = NULL;
    pthread_mutex_unlock(&d->cells->pub_lock);
    cc_anomaly_cell_close(&oc->ac);
    free(oc);
}

void ccd_ops_cell_free_hook(void *cookie, CcdCell *c) { ccd_ops_cell_free(cookie, c); }

static void publish_scores(Ccd *d, CcdCell *c, OpsCell *oc)
{
    double v[PUB_N][CC_MAX_FEATURES], score;
    CcAnomalyCellStats st;
    int64_t s = cc_anomaly_cell_scores(oc->ac, v[PUB_Z], &score);
    cc_anomaly_cell_cusum(oc->ac, v[PUB_CU_UP], v[PUB_CU_DOWN]);
    cc_anomaly_cell_profile(oc->ac, v[PUB_PR_EXP], v[PUB_PR_UP], v[PUB_PR_DOWN]);
    cc_anomaly_cell_stats(oc->ac, &st);
    pthread_mutex_lock(&d->cells->pub_lock);
    for (int r = 0; r < PUB_N; r++)
        memcpy(oc->pub + (size_t)r * oc->F, v[r], (size_t)oc->F * sizeof(double));
    oc->pub_step = s;
    oc->pub_score = score;
    oc->pub_anomaly_firing = st.anomaly_firing;
    oc->pub_dq_firing = st.dq_firing;
    oc->pub_quiet = st.quiet;
    pthread_mutex_unlock(&d->cells->pub_lock);
}

void ccd_ops_on_stepped(void *cookie, CcdCell *c, int64_t step, const float *values,
                        int imputed, const CcForecast *fc)
{
    Ccd *d = cookie;
    CcdOps *o = OPS(d);
    if (!o || !o->an)
        return;
    OpsCell *oc = ops_cell(d, c);
    if (!oc)
        return;
    uint8_t mask[CC_MAX_FEATURES];
    const int F = d->model->hp.n_features;
    memset(mask, imputed ? 0 : 1, (size_t)F);
    CcAlertSink sink = {o, sink_emit};
    cc_anomaly_observe(o->an, oc->ac, step, values, mask, &sink);
    cc_anomaly_set_forecast(o->an, oc->ac, fc);
    publish_scores(d, c, oc);
}

static int kind_i(const CcAlertEvent *e) { return e->kind == CC_ALERT_DATA_QUALITY; }
static int reason_i(const CcAlertEvent *e) { return e->reason >= 0 && e->reason <= 4 ? (int)e->reason : 0; }
static int state_i(const CcAlertEvent *e) { return e->state == CC_ALERT_RESOLVED ? 2 : 1; }
static int sev_i(const CcAlertEvent *e) { return e->severity == CC_SEV_CRITICAL ? 2 : 1; }

static void journal_note(CcdOps *o, const QEvent *e)
{
    pthread_mutex_lock(&o->jlock);
    jset(o, e->cell, e->ev.step);
    pthread_mutex_unlock(&o->jlock);
    if (o->journal) {
        fprintf(o->journal, "%lld %s\n", (long long)e->ev.step, e->cell);
        fflush(o->journal); /* in the page cache: survives SIGKILL */
    }
}

/* Produces one transition; 0 or -errno (refused: retry later). */
static int produce(Ccd *d, const QEvent *e)
{
    CcdOps *o = OPS(d);
    if (d->kafka) {
        char buf[1024 + 256 * CC_ALERT_MAX_ATTR];
        int n = cc_alert_event_json(&e->ev, &d->model->hp, buf, sizeof buf);
        if (n < 0)
            return n;
        int rc = ccd_kafka_produce(d->kafka, d->cfg.kafka_alert_topic, e->cell, strlen(e->cell), buf,
                                  (size_t)n);
        if (rc) {
            o->produce_refused++;
            return rc;
        }
        o->produced++;
    }
    journal_note(o, e);
    return 0;
}

static void history_add(CcdOps *o, QEvent *e)
{
    e->seq = ++o->seq;
    size_t i = (o->hhead + o->hn) % HIST_MAX;
    if (o->hn == HIST_MAX) {
        o->hhead = (o->hhead + 1) % HIST_MAX;
        i = (o->hhead + o->hn - 1) % HIST_MAX;
    } else {
        o->hn++;
    }
    o->hist[i] = *e;
    o->hist[i].ev.cell_id = o->hist[i].cell;
}

/* Loop thread: takes the queued transitions, records them, produces them (and retries). */
static void drain(Ccd *d)
{
    CcdOps *o = OPS(d);
    EvVec q;
    pthread_mutex_lock(&o->qlock);
    q = o->q;
    memset(&o->q, 0, sizeof o->q);
    pthread_mutex_unlock(&o->qlock);
    /* retries first, in order */
    size_t done = 0;
    while (done < o->retry.n && !produce(d, &o->retry.v[done]))
        done++;
    if (done) {
        memmove(o->retry.v, o->retry.v + done, (o->retry.n - done) * sizeof *o->retry.v);
        o->retry.n -= done;
        for (size_t i = 0; i < o->retry.n; i++)
            o->retry.v[i].ev.cell_id = o->retry.v[i].cell;
    }
    for (size_t i = 0; i < q.n; i++) {
        QEvent *e = &q.v[i];
        e->ev.cell_id = e->cell;
        history_add(o, e);
        o->trans[kind_i(&e->ev)][reason_i(&e->ev)][state_i(&e->ev)][sev_i(&e->ev)]++;
        LOG_INFO("alerts", "%s %s %s%s%s (%s, step %lld, score %.2f)", e->ev.id,
                 cc_alert_state_name(e->ev.state), cc_alert_kind_name(e->ev.kind),
                 e->ev.kind == CC_ALERT_DATA_QUALITY ? "/" : "",
                 e->ev.kind == CC_ALERT_DATA_QUALITY ? cc_dq_reason_name(e->ev.reason) : "",
                 cc_alert_severity_name(e->ev.severity), (long long)e->ev.step, e->ev.score);
        if (o->retry.n || produce(d, e)) {
            if (vec_push(&o->retry, e))
                LOG_ERROR("alerts", "out of memory: alert %s not produced", e->ev.id);
        }
    }
    if (o->retry.n)
        CCD_LOG_RL(CC_LOG_WARN, "alerts", "%zu alert transition(s) waiting for the producer queue",
                   o->retry.n);
    free(q.v);
}

void ccd_ops_batch_done(Ccd *d)
{
    if (OPS(d))
        drain(d);
}

/* ---- snapshots ------------------------------------------------------------------------ */

typedef struct SnapExtra {
    int32_t topic, partition;
    int64_t first_step, last_ts;
    uint64_t n_records, n_steps;
} SnapExtra;

typedef struct SnapCtx {
    Ccd *d;
    CcSnapshotWriter *w;
    int rc;
    uint64_t n;
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
    SnapExtra ex = {c->topic, c->partition, c->first_step, c->last_ts, c->n_records, c->n_steps};
    OpsCell *oc = c->anomaly;
    x->rc = cc_snapshot_write_engine_cell(x->w, c->id, c->cell, oc ? oc->ac : NULL, &ex, sizeof ex);
    x->n++;
}

/* Writes the snapshot (loop thread, no batch in flight), then stores the offsets of what
 * it holds. 0, -EAGAIN (a batch is in flight), or -errno. */
static int snapshot_write(Ccd *d, const char *why)
{
    CcdOps *o = OPS(d);
    char err[512];
    if (!o->snap_path[0])
        return 0;
    if (ccd_sched_busy(d->sched))
        return -EAGAIN;
    int64_t t0 = cc_now_ns();
    uint64_t ack = o->ack_pending;
    CcSnapshotInfo in;
    cc_snapshot_info_for_model(&in, &d->model->hp);
    SnapCtx x = {d, NULL, 0, 0};
    int rc = cc_snapshot_write_open(&x.w, o->snap_path, &in, err, sizeof err);
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
    o->last_snap_ns = cc_now_ns();
    if (rc) {
        o->snapshot_errors++;
        LOG_ERROR("state", "snapshot %s (%s) failed: %s; offsets not advanced", o->snap_path, why, err);
        return rc;
    }
    struct stat st;
    o->snapshots++;
    o->snapshot_cells = x.n;
    o->snapshot_unix = (int64_t)time(NULL);
    o->snapshot_bytes = stat(o->snap_path, &st) ? -1 : (int64_t)st.st_size;
    o->snapshot_seconds = (double)(cc_now_ns() - t0) * 1e-9;
    if (d->kafka && ack > o->ack_done) {
        ccd_kafka_ack(d->kafka, ack);
        o->ack_done = ack;
    }
    journal_compact(o);
    CCD_LOG(!strcmp(why, "periodic") ? CC_LOG_DEBUG : CC_LOG_INFO, "state",
            "snapshot %s (%s): %llu cells, %lld bytes in %.3f s", o->snap_path, why,
            (unsigned long long)x.n, (long long)o->snapshot_bytes, o->snapshot_seconds);
    return 0;
}

void ccd_ops_ack(Ccd *d, uint64_t id)
{
    CcdOps *o = OPS(d);
    if (!d->kafka)
        return;
    if (!o || !o->snap_path[0]) {
        ccd_kafka_ack(d->kafka, id);
        return;
    }
    if (id > o->ack_pending)
        o->ack_pending = id;
}

/* Recomputes a restored cell's forecast and publishes it (loop thread, worker idle). */
static void restore_forecast(Ccd *d, CcdCell *c, OpsCell *oc, int64_t last, const float *lastv)
{
    const int F = d->model->hp.n_features, HZ = d->model->hp.horizon;
    CcStepInput in = {c->cell, last, NULL};
    int st = 0;
    if (cc_engine_step(d->engine, &in, 1, &st) || st)
        return;
    CcForecast fc;
    cc_cell_forecast(c->cell, &fc);
    pthread_mutex_lock(&d->cells->pub_lock);
    c->pub.valid = fc.valid;
    c->pub.step = last;
    if (fc.valid) {
        memcpy(c->pub.y, fc.y, (size_t)F * (size_t)HZ * 2 * sizeof(float));
        memcpy(c->pub.mu, fc.mu, (size_t)F * sizeof(float));
        memcpy(c->pub.sigma, fc.sigma, (size_t)F * sizeof(float));
    }
    memcpy(c->pub.obs, lastv, (size_t)F * sizeof(float));
    c->pub.have_expected = 0;
    pthread_mutex_unlock(&d->cells->pub_lock);
    cc_anomaly_set_forecast(OPS(d)->an, oc->ac, &fc);
}

static void snapshot_restore(Ccd *d)
{
    CcdOps *o = OPS(d);
    char err[512];
    CcSnapshotReader *r = NULL;
    CcSnapshotInfo info;
    const int F = d->model->hp.n_features;
    if (!o->snap_path[0]) {
        o->restore_result = 1;
        return;
    }
    int rc = cc_snapshot_read_open(&r, o->snap_path, cc_snapshot_model_hash(&d->model->hp), &info,
                                   err, sizeof err);
    if (rc == -ENOENT) {
        LOG_INFO("state", "no snapshot at %s: starting empty, cells are built from Kafka", o->snap_path);
        o->restore_result = 1;
        return;
    }
    if (rc) {
        o->restore_result = 2;
        LOG_WARN("state", "snapshot refused: %s; falling back to rebuilding the cells from Kafka "
                 "(the file is left in place and replaced by the next snapshot)", err);
        if (d->cfg.kafka_rewind_on_assign_s == 0) {
            /* re-read one window of history of the partitions assigned */
            d->cfg.kafka_rewind_on_assign_s = (int64_t)d->cells->s.ring * d->model->hp.step_seconds;
            LOG_INFO("state", "kafka.rewind_on_assign_s set to %lld s (one window) for this run",
                     (long long)d->cfg.kafka_rewind_on_assign_s);
        }
        return;
    }
    CcSnapshotRecord rec;
    uint64_t n = 0, failed = 0;
    while ((rc = cc_snapshot_read_next(r, &rec, err, sizeof err)) == 1) {
        if (rec.type != CC_SNAP_CELL)
            continue;
        const CcSnapshotCell *sc = &rec.cell;
        if (sc->count <= 0 || sc->n_features != F)
            continue;
        CcdCell *c = ccd_cells_add(d->cells, sc->cell_id);
        OpsCell *oc = c ? ops_cell(d, c) : NULL;
        if (!oc) {
            failed++;
            continue;
        }
        if (cc_snapshot_restore_engine_cell(sc, c->cell, oc->ac, err, sizeof err)) {
            LOG_WARN("state", "snapshot: cell %s not restored: %s", sc->cell_id, err);
            failed++;
            continue;
        }
        int64_t q = jget(o, c->id);
        if (q >= 0)
            cc_anomaly_cell_quiet_until(oc->ac, q);
        int64_t last = sc->first + sc->count - 1;
        const float *lastv = sc->values + (size_t)(sc->count - 1) * (size_t)F;
        SnapExtra ex;
        memset(&ex, 0, sizeof ex);
        if (sc->extra_len == sizeof ex)
            memcpy(&ex, sc->extra, sizeof ex);
        else
            ex.topic = ex.partition = -1, ex.first_step = sc->first;
        c->topic = ex.topic < d->cfg.kafka_topics.n ? ex.topic : -1;
        c->partition = ex.partition;
        c->first_step = ex.first_step;
        c->last_step = last;
        c->last_ts = ex.last_ts;
        c->n_records = ex.n_records;
        c->n_steps = ex.n_steps;
        memcpy(c->last_values, lastv, (size_t)F * sizeof(float));
        c->have_values = 1;
        restore_forecast(d, c, oc, last, lastv);
        publish_scores(d, c, oc);
        n++;
    }
    if (rc < 0)
        LOG_ERROR("state", "snapshot %s: %s (after %llu cells)", o->snap_path, err, (unsigned long long)n);
    cc_snapshot_read_close(&r);
    o->restored_cells = n;
    o->restore_result = 0;
    LOG_INFO("state", "snapshot %s restored: %llu cells (%llu failed), written %lld s ago; Kafka "
             "resumes at the offsets committed with it", o->snap_path, (unsigned long long)n,
             (unsigned long long)failed, (long long)((int64_t)time(NULL) - info.created_s));
}

/* ---- lifecycle ------------------------------------------------------------------------ */

int ccd_ops_open(Ccd *d, int argc, char **argv, char *err, size_t errlen)
{
    CcdOps *o = calloc(1, sizeof *o);
    CcAnomalySettings as;
    char e2[256];
    int rc;
    if (!o)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    d->ops = o;
    o->argc = argc;
    o->argv = argv;
    pthread_mutex_init(&o->qlock, NULL);
    pthread_mutex_init(&o->jlock, NULL);
    o->restore_result = 1;
    if (!(o->hist = calloc(HIST_MAX, sizeof *o->hist)))
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    if ((rc = anomaly_settings(&d->cfg, &d->model->hp, &as, err, errlen)))
        return rc;
    if ((rc = cc_anomaly_open(&o->an, &as, e2, sizeof e2)))
        return cc_errf(err, errlen, rc, "alerts: %s", e2);
    if ((rc = ccd_notify_open(&o->notify, e2, sizeof e2)))
        LOG_WARN("notify", "%s (systemd notifications off)", e2);
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
            if (snprintf(o->snap_path, sizeof o->snap_path, "%s/state.snap", first) >=
                (int)sizeof o->snap_path)
                o->snap_path[0] = 0;
        }
    } else {
        snprintf(o->snap_path, sizeof o->snap_path, "%s", sp);
    }
    if (o->snap_path[0]) {
        snprintf(o->journal_path, sizeof o->journal_path, "%s.alerts", o->snap_path);
        journal_load(o);
        o->journal = fopen(o->journal_path, "a");
        if (!o->journal)
            LOG_WARN("alerts", "cannot open the journal %s: %s (a restart after a crash may "
                     "produce some transitions again)", o->journal_path, strerror(errno));
        LOG_INFO("state", "snapshots: %s every %d s and at shutdown", o->snap_path,
                 d->cfg.snapshot_interval_s);
    } else {
        LOG_INFO("state", "snapshots off (snapshot.path); a restart rebuilds cells from Kafka");
    }
    snapshot_restore(d);
    o->last_snap_ns = o->last_status_ns = o->last_wd_ns = cc_now_ns();
    return 0;
}

void ccd_ops_close(Ccd *d)
{
    CcdOps *o = OPS(d);
    if (!o)
        return;
    if (d->cells) /* the anomaly cells must go before the context */
        for (size_t i = 0; i < d->cells->n_buckets; i++)
            for (CcdCell *c = d->cells->buckets[i]; c; c = c->hnext)
                ccd_ops_cell_free(d, c);
    cc_anomaly_close(&o->an);
    ccd_notify_close(&o->notify);
    if (o->journal)
        fclose(o->journal);
    for (int b = 0; b < JBUCKETS; b++)
        for (JEntry *e = o->jb[b], *n; e; e = n) {
            n = e->next;
            free(e);
        }
    free(o->q.v);
    free(o->retry.v);
    free(o->hist);
    pthread_mutex_destroy(&o->qlock);
    pthread_mutex_destroy(&o->jlock);
    free(o);
    d->ops = NULL;
}

void ccd_ops_ready(Ccd *d)
{
    CcdOps *o = OPS(d);
    char st[256];
    snprintf(st, sizeof st, "serving model '%s': %zu cells (%llu restored)", d->model_name,
             d->cells->n_cells, (unsigned long long)o->restored_cells);
    ccd_notify_ready(o->notify, st);
}

void ccd_ops_stopping(Ccd *d)
{
    CcdOps *o = OPS(d);
    if (o) {
        ccd_notify_stopping(o->notify);
        ccd_notify_send(o->notify, "EXTEND_TIMEOUT_USEC=60000000");
    }
}

void ccd_ops_shutdown(Ccd *d)
{
    CcdOps *o = OPS(d);
    if (!o)
        return;
    drain(d);
    if (o->snap_path[0]) {
        if (snapshot_write(d, "shutdown"))
            LOG_WARN("state", "no snapshot at shutdown: offsets stay at the previous snapshot");
    }
    if (o->retry.n) {
        /* give the producer a moment, then the rest is reported (Kafka close flushes) */
        for (int i = 0; i < 50 && o->retry.n; i++) {
            ccd_kafka_service(d->kafka);
            usleep(20000);
            drain(d);
        }
        if (o->retry.n)
            LOG_ERROR("alerts", "%zu alert transition(s) could not be queued for Kafka before exit; "
                      "they are not journaled and are produced again by the replay after restart",
                      o->retry.n);
    }
}

typedef struct TickCtx {
    Ccd *d;
    int64_t now;
} TickCtx;

static void tick_cell(void *cookie, CcdCell *c)
{
    TickCtx *t = cookie;
    OpsCell *oc = c->anomaly;
    if (!oc || c->busy || c->doomed)
        return;
    CcAlertSink sink = {OPS(t->d), sink_emit};
    CcAnomalyCellStats before;
    cc_anomaly_cell_stats(oc->ac, &before);
    cc_anomaly_tick(OPS(t->d)->an, oc->ac, t->now, &sink);
    CcAnomalyCellStats after;
    cc_anomaly_cell_stats(oc->ac, &after);
    if (after.dq_firing != before.dq_firing)
        publish_scores(t->d, c, oc);
}

void ccd_ops_cron(Ccd *d)
{
    CcdOps *o = OPS(d);
    if (!o)
        return;
    int64_t now_ns = cc_now_ns();
    drain(d);
    /* missing data: only once the consumer has caught up (a backlog looks like silence) */
    int caught_up = 1;
    CcdKafkaStats ks;
    if (d->kafka) {
        ccd_kafka_stats(d->kafka, &ks);
        caught_up = ks.assigned_partitions > 0 && ks.lag >= 0 &&
                    ks.lag <= d->cfg.kafka_max_poll_messages && !ccd_sched_pending(d->sched);
    }
    caught_up = caught_up && !ccd_sched_busy(d->sched);
    if (caught_up != o->tick_enabled) {
        o->tick_enabled = caught_up;
        LOG_DEBUG("alerts", "missing-data checks %s", caught_up ? "on (consumer caught up)" : "paused (backlog)");
    }
    if (o->tick_enabled) {
        TickCtx t = {d, (int64_t)time(NULL)};
        ccd_cells_foreach(d->cells, tick_cell, &t);
        drain(d);
    }
    if (o->snap_path[0] && d->cfg.snapshot_interval_s > 0 &&
        now_ns - o->last_snap_ns >= (int64_t)d->cfg.snapshot_interval_s * 1000000000LL) {
        /* a batch in flight: try again next second; under sustained load (the worker never
         * idle at the cron) wait for it after 5 s, or the offsets would never advance */
        if (ccd_sched_busy(d->sched) &&
            now_ns - o->last_snap_ns >= ((int64_t)d->cfg.snapshot_interval_s + 5) * 1000000000LL)
            ccd_sched_drain(d->sched);
        snapshot_write(d, "periodic");
    }
    if (!ccd_sched_busy(d->sched))
        o->busy_since_ns = 0;
    else if (!o->busy_since_ns)
        o->busy_since_ns = now_ns;
    if (ccd_notify_enabled(o->notify)) {
        uint64_t wd = ccd_notify_watchdog_usec(o->notify);
        /* only while the loop runs (we are in its cron) and the worker makes progress */
        int stuck = o->busy_since_ns && now_ns - o->busy_since_ns > (int64_t)(wd / 2) * 1000;
        if (wd && !stuck && now_ns - o->last_wd_ns >= (int64_t)(wd / 2) * 1000 - 500000000LL) {
            ccd_notify_watchdog(o->notify);
            o->last_wd_ns = now_ns;
        }
        if (now_ns - o->last_status_ns >= 10000000000LL) {
            int firing = 0;
            pthread_mutex_lock(&d->cells->pub_lock);
            for (size_t i = 0; i < d->cells->n_buckets; i++)
                for (CcdCell *c = d->cells->buckets[i]; c; c = c->hnext) {
                    OpsCell *oc = c->anomaly;
                    if (oc)
                        firing += oc->pub_anomaly_firing + oc->pub_dq_firing;
                }
            pthread_mutex_unlock(&d->cells->pub_lock);
            ccd_notify_status(o->notify, "%zu cells, %.0f steps/s, lag %lld, %d alerts firing",
                             d->cells->n_cells, d->in.rate_steps,
                             d->kafka ? (long long)ks.lag : 0LL, firing);
            o->last_status_ns = now_ns;
        }
    }
}

/* ---- reload --------------------------------------------------------------------------- */

static size_t field_size(enum CcdCfgType t)
{
    switch (t) {
    case CCD_CFG_BOOL:
    case CCD_CFG_INT:
    case CCD_CFG_ENUM:
        return sizeof(int);
    case CCD_CFG_INT64:
        return sizeof(int64_t);
    case CCD_CFG_DOUBLE:
        return sizeof(double);
    case CCD_CFG_STRING:
        return sizeof(char *);
    case CCD_CFG_LIST:
        return sizeof(CcdStrList);
    case CCD_CFG_MAP:
        return sizeof(CcdStrMap);
    }
    return 0;
}

static int cfg_equal(const CcdConfigDef *def, const CcdConfig *a, const CcdConfig *b)
{
    const char *pa = (const char *)a + def->offset, *pb = (const char *)b + def->offset;
    switch (def->type) {
    case CCD_CFG_STRING: {
        const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
        return !strcmp(sa ? sa : "", sb ? sb : "");
    }
    case CCD_CFG_LIST: {
        const CcdStrList *la = (const CcdStrList *)pa, *lb = (const CcdStrList *)pb;
        if (la->n != lb->n)
            return 0;
        for (int i = 0; i < la->n; i++)
            if (strcmp(la->items[i], lb->items[i]))
                return 0;
        return 1;
    }
    case CCD_CFG_MAP: {
        const CcdStrMap *ma = (const CcdStrMap *)pa, *mb = (const CcdStrMap *)pb;
        if (ma->n != mb->n)
            return 0;
        for (int i = 0; i < ma->n; i++)
            if (strcmp(ma->items[i].key, mb->items[i].key) || strcmp(ma->items[i].value, mb->items[i].value))
                return 0;
        return 1;
    }
    default:
        return !memcmp(pa, pb, field_size(def->type));
    }
}

static int load_config(Ccd *d, CcdConfig *c, char *err, size_t errlen)
{
    CcdOps *o = OPS(d);
    int rc;
    if ((rc = ccd_config_init(c)))
        return cc_errf(err, errlen, rc, "out of memory");
    if (d->config_path && (rc = ccd_config_load_file(c, d->config_path, err, errlen)))
        return rc;
    for (int i = 1; i < o->argc; i++)
        if ((!strcmp(o->argv[i], "-s") || !strcmp(o->argv[i], "--set")) && i + 1 < o->argc) {
            if ((rc = ccd_config_set(c, o->argv[++i], err, errlen)))
                return rc;
        } else if ((!strcmp(o->argv[i], "-c") || !strcmp(o->argv[i], "--config")) && i + 1 < o->argc) {
            i++;
        }
    return ccd_config_validate(c, err, errlen);
}

static int same_features(const CcHparams *a, const CcHparams *b)
{
    if (a->n_features != b->n_features || a->step_seconds != b->step_seconds ||
        a->horizon != b->horizon)
        return 0;
    for (int f = 0; f < a->n_features; f++)
        if (strcmp(a->features[f], b->features[f]))
            return 0;
    return 1;
}

static int same_shape(const CcHparams *a, const CcHparams *b)
{
    return a->patch_len == b->patch_len && a->n_patches == b->n_patches &&
           a->norm_window == b->norm_window && a->d_model == b->d_model &&
           a->n_heads == b->n_heads && a->n_layers == b->n_layers && a->d_ff == b->d_ff &&
           a->horizon == b->horizon;
}

int ccd_ops_reload(Ccd *d, json_t **report, char *err, size_t errlen)
{
    CcdOps *o = OPS(d);
    CcdConfig nc;
    CcModel *nm = NULL;
    CcAnomalySettings as;
    char path[PATH_MAX], e2[512];
    int rc, shape_changed = 0;
    json_t *changed = json_array(), *restart = json_array();
    if (report)
        *report = NULL;
    ccd_notify_reloading(o->notify);
    memset(&nc, 0, sizeof nc);
    if ((rc = load_config(d, &nc, e2, sizeof e2))) {
        cc_errf(err, errlen, rc, "configuration refused: %s", e2);
        goto fail;
    }
    ccd_ops_model_path(nc.model_path, path, sizeof path);
    if ((rc = cc_model_open_file(&nm, path, e2, sizeof e2))) {
        cc_errf(err, errlen, rc, "model '%s' refused: %s", path, e2);
        goto fail;
    }
    if (!same_features(&d->model->hp, &nm->hp)) {
        rc = cc_errf(err, errlen, -EINVAL,
                     "model '%s' refused: its KPIs, step length or horizon differ from the model "
                     "served (cells hold history of those KPIs; that change needs a restart)", path);
        goto fail;
    }
    if ((rc = anomaly_settings(&nc, &nm->hp, &as, e2, sizeof e2))) {
        cc_errf(err, errlen, rc, "configuration refused: %s", e2);
        goto fail;
    }
    /* everything checked: apply between batches */
    ccd_sched_drain(d->sched);
    drain(d);
    shape_changed = !same_shape(&d->model->hp, &nm->hp);
    if ((rc = cc_engine_set_model(d->engine, nm))) {
        cc_errf(err, errlen, rc, "the engine refused model '%s'", path);
        goto fail;
    }
    int rebound = 0, rebind_failed = 0;
    if (shape_changed) {
        for (size_t i = 0; i < d->cells->n_buckets; i++)
            for (CcdCell *c = d->cells->buckets[i]; c; c = c->hnext) {
                if (cc_cell_rebind(c->cell, d->engine)) {
                    cc_cell_reset(c->cell);
                    rebind_failed++;
                } else {
                    rebound++;
                }
            }
        LOG_WARN("reload", "model '%s' has another shape (P=%d N=%d M=%d D=%d H=%d L=%d FF=%d): "
                 "caches of %d cell(s) are rebuilt at their next step%s", path, nm->hp.patch_len,
                 nm->hp.n_patches, nm->hp.norm_window, nm->hp.d_model, nm->hp.n_heads,
                 nm->hp.n_layers, nm->hp.d_ff, rebound, rebind_failed ? " (some were reset)" : "");
    }
    CcModel *old = d->model;
    d->model = nm;
    nm = NULL;
    cc_model_close(&old);
    if (snprintf(d->model_name, sizeof d->model_name, "%s",
                 d->model->hp.name[0] ? d->model->hp.name : path) >= (int)sizeof d->model_name)
        d->model_name[sizeof d->model_name - 1] = 0;
    cc_anomaly_set_settings(o->an, &as, e2, sizeof e2);
    /* reloadable keys: swap the new values in; report the others that changed */
    for (int i = 0; i < ccd_config_table_len; i++) {
        const CcdConfigDef *def = &ccd_config_table[i];
        if (cfg_equal(def, &d->cfg, &nc))
            continue;
        if (!def->reloadable) {
            json_array_append_new(restart, json_string(def->name));
            LOG_WARN("reload", "%s changed but needs a restart: keeping the running value", def->name);
            continue;
        }
        char tmp[64];
        size_t sz = field_size(def->type);
        memcpy(tmp, (char *)&d->cfg + def->offset, sz);
        memcpy((char *)&d->cfg + def->offset, (char *)&nc + def->offset, sz);
        memcpy((char *)&nc + def->offset, tmp, sz);
        json_array_append_new(changed, json_string(def->name));
        LOG_INFO("reload", "%s changed", def->name);
    }
    ccd_config_free(&nc);
    /* keys read at setup */
    ccd_log_level = d->cfg.log_level;
    ccd_sched_set_batching(d->sched, d->cfg.ingest_batch_steps, d->cfg.ingest_batch_ms);
    d->cells->s.gap_policy = d->cfg.ingest_gap_policy;
    d->cells->s.max_gap = d->cfg.ingest_max_gap;
    d->cells->s.max_cells = d->cfg.limits_max_cells;
    d->cells->s.kv_budget_bytes = d->cfg.limits_kv_budget_mb << 20;
    d->cells->cell_bytes = cc_engine_cell_bytes(d->engine) + sizeof(CcdCell) +
                           sizeof(float) * ((size_t)d->cells->s.n_features * (size_t)d->cells->s.horizon * 2 +
                                            6 * (size_t)d->cells->s.n_features);
    {
        int64_t by_budget = d->cells->s.kv_budget_bytes / (int64_t)d->cells->cell_bytes;
        d->cells->max_resident = d->cells->s.max_cells < by_budget ? d->cells->s.max_cells : by_budget;
        if (d->cells->max_resident < 1)
            d->cells->max_resident = 1;
    }
    if ((rc = ccd_reopen_decoder(d, e2, sizeof e2)))
        LOG_ERROR("reload", "ingest field mapping: %s (the previous mapping stays)", e2);
    o->reloads_ok++;
    LOG_INFO("reload", "reloaded: model '%s' from %s%s; %zu key(s) changed, %zu need a restart",
             d->model_name, path, shape_changed ? " (new shape)" : "", json_array_size(changed),
             json_array_size(restart));
    if (report)
        *report = json_pack("{s:b, s:s, s:s, s:b, s:o, s:o}", "reloaded", 1, "model", d->model_name,
                            "model_path", path, "shape_changed", shape_changed, "changed", changed,
                            "restart_needed", restart);
    else {
        json_decref(changed);
        json_decref(restart);
    }
    ccd_notify_ready(o->notify, "reloaded");
    return 0;
fail:
    cc_model_close(&nm);
    ccd_config_free(&nc);
    json_decref(changed);
    json_decref(restart);
    o->reloads_failed++;
    LOG_ERROR("reload", "%s; still serving model '%s' with the previous configuration", err,
              d->model_name);
    ccd_notify_ready(o->notify, "reload refused; previous model and configuration kept");
    ccd_notify_status(o->notify, "reload refused: %s", err);
    return rc;
}

/* ---- metrics and API ------------------------------------------------------------------ */

void ccd_ops_metrics(Ccd *d, struct evbuffer *b)
{
    CcdOps *o = OPS(d);
    static const char *const states[] = {"", "firing", "resolved"};
    static const char *const sevs[] = {"", "warning", "critical"};
    if (!o)
        return;
    evbuffer_add_printf(b, "# HELP cellcast_alert_transitions_total Alert transitions by kind, reason, state and severity.\n"
                           "# TYPE cellcast_alert_transitions_total counter\n");
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 5; r++)
            for (int s = 1; s < 3; s++)
                for (int v = 1; v < 3; v++)
                    if (o->trans[k][r][s][v] || (r == (k ? 1 : 0) && v == 1))
                        evbuffer_add_printf(b, "cellcast_alert_transitions_total{kind=\"%s\",reason=\"%s\",state=\"%s\",severity=\"%s\"} %llu\n",
                                            cc_alert_kind_name((enum CcAlertKind)k),
                                            cc_dq_reason_name((enum CcDqReason)r), states[s], sevs[v],
                                            (unsigned long long)o->trans[k][r][s][v]);
    int fa = 0, fd = 0;
    uint64_t quiet = 0;
    pthread_mutex_lock(&d->cells->pub_lock);
    for (size_t i = 0; i < d->cells->n_buckets; i++)
        for (CcdCell *c = d->cells->buckets[i]; c; c = c->hnext) {
            OpsCell *oc = c->anomaly;
            if (oc) {
                fa += oc->pub_anomaly_firing;
                fd += oc->pub_dq_firing;
                quiet += oc->pub_quiet;
            }
        }
    pthread_mutex_unlock(&d->cells->pub_lock);
    evbuffer_add_printf(b, "# HELP cellcast_alerts_firing Alerts firing now.\n# TYPE cellcast_alerts_firing gauge\n"
                           "cellcast_alerts_firing{kind=\"anomaly\"} %d\ncellcast_alerts_firing{kind=\"data_quality\"} %d\n",
                        fa, fd);
    evbuffer_add_printf(b, "# HELP cellcast_alerts_quiet_total Transitions recomputed by a replay after a restart and not produced again.\n"
                           "# TYPE cellcast_alerts_quiet_total counter\ncellcast_alerts_quiet_total %llu\n",
                        (unsigned long long)quiet);
    evbuffer_add_printf(b, "# HELP cellcast_alerts_produced_total Alert transitions handed to the Kafka producer.\n"
                           "# TYPE cellcast_alerts_produced_total counter\ncellcast_alerts_produced_total %llu\n"
                           "# HELP cellcast_alerts_produce_refused_total Produce attempts refused (queue full); retried.\n"
                           "# TYPE cellcast_alerts_produce_refused_total counter\ncellcast_alerts_produce_refused_total %llu\n"
                           "# HELP cellcast_alerts_waiting Transitions waiting for the producer queue.\n"
                           "# TYPE cellcast_alerts_waiting gauge\ncellcast_alerts_waiting %zu\n",
                        (unsigned long long)o->produced, (unsigned long long)o->produce_refused, o->retry.n);
    if (d->kafka) {
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        evbuffer_add_printf(b, "# HELP cellcast_kafka_produce_total Producer outcomes (alerts and dead letters): delivered, retried, failed.\n"
                               "# TYPE cellcast_kafka_produce_total counter\n"
                               "cellcast_kafka_produce_total{result=\"delivered\"} %llu\n"
                               "cellcast_kafka_produce_total{result=\"retried\"} %llu\n"
                               "cellcast_kafka_produce_total{result=\"failed\"} %llu\n",
                            (unsigned long long)ks.produced, (unsigned long long)ks.produce_retries,
                            (unsigned long long)ks.produce_failed);
    }
    evbuffer_add_printf(b, "# HELP cellcast_snapshots_total Snapshots written, by result.\n# TYPE cellcast_snapshots_total counter\n"
                           "cellcast_snapshots_total{result=\"ok\"} %llu\ncellcast_snapshots_total{result=\"error\"} %llu\n"
                           "# HELP cellcast_snapshot_age_seconds Seconds since the last snapshot (-1: none yet).\n"
                           "# TYPE cellcast_snapshot_age_seconds gauge\ncellcast_snapshot_age_seconds %lld\n"
                           "# HELP cellcast_snapshot_bytes Size of the last snapshot.\n# TYPE cellcast_snapshot_bytes gauge\n"
                           "cellcast_snapshot_bytes %lld\n"
                           "# HELP cellcast_snapshot_duration_seconds Time the last snapshot took.\n"
                           "# TYPE cellcast_snapshot_duration_seconds gauge\ncellcast_snapshot_duration_seconds %.6f\n"
                           "# HELP cellcast_snapshot_restored_cells Cells restored from the snapshot at start.\n"
                           "# TYPE cellcast_snapshot_restored_cells gauge\ncellcast_snapshot_restored_cells %llu\n"
                           "# HELP cellcast_reloads_total Reloads (SIGHUP, POST /v1/admin/reload), by result.\n"
                           "# TYPE cellcast_reloads_total counter\ncellcast_reloads_total{result=\"ok\"} %llu\n"
                           "cellcast_reloads_total{result=\"refused\"} %llu\n",
                        (unsigned long long)o->snapshots, (unsigned long long)o->snapshot_errors,
                        o->snapshot_unix ? (long long)((int64_t)time(NULL) - o->snapshot_unix) : -1LL,
                        (long long)o->snapshot_bytes, o->snapshot_seconds,
                        (unsigned long long)o->restored_cells, (unsigned long long)o->reloads_ok,
                        (unsigned long long)o->reloads_failed);
}

static json_t *num_or_null(double v) { return v == v && v - v == 0 ? json_real(v) : json_null(); }

static json_t *scores_json(Ccd *d, CcdCell *c)
{
    const CcHparams *hp = &d->model->hp;
    int64_t step = -1;
    double score = 0, v[PUB_N][CC_MAX_FEATURES];
    for (int r = 0; r < PUB_N; r++)
        for (int f = 0; f < CC_MAX_FEATURES; f++)
            v[r][f] = NAN;
    int fa = 0, fd = 0;
    pthread_mutex_lock(&d->cells->pub_lock);
    OpsCell *oc = c->anomaly;
    if (oc) {
        step = oc->pub_step;
        score = oc->pub_score;
        int n = oc->F < hp->n_features ? oc->F : hp->n_features; /* a reloaded model's KPIs */
        for (int r = 0; r < PUB_N; r++)
            memcpy(v[r], oc->pub + (size_t)r * oc->F, (size_t)n * sizeof(double));
        fa = oc->pub_anomaly_firing;
        fd = oc->pub_dq_firing;
    }
    pthread_mutex_unlock(&d->cells->pub_lock);
    json_t *o = json_object();
    json_object_set_new(o, "step", step >= 0 ? json_integer(step) : json_null());
    json_object_set_new(o, "ts", step >= 0 ? json_integer(step * hp->step_seconds) : json_null());
    json_object_set_new(o, "score", step >= 0 ? num_or_null(score) : json_null());
    json_t *k = json_object();
    for (int f = 0; step >= 0 && f < hp->n_features; f++)
        json_object_set_new(k, hp->features[f], num_or_null(v[PUB_Z][f]));
    json_object_set_new(o, "z", k);
    json_t *cu = json_object();
    for (int f = 0; step >= 0 && f < hp->n_features; f++)
        json_object_set_new(cu, hp->features[f], json_pack("{s:o,s:o}", "up", num_or_null(v[PUB_CU_UP][f]), "down",
                                      num_or_null(v[PUB_CU_DOWN][f])));
    json_object_set_new(o, "cusum", cu);
    json_t *pr = json_object();
    for (int f = 0; step >= 0 && f < hp->n_features; f++)
        json_object_set_new(pr, hp->features[f],
                            json_pack("{s:o,s:o,s:o}", "expected", num_or_null(v[PUB_PR_EXP][f]),
                                      "up", num_or_null(v[PUB_PR_UP][f]), "down",
                                      num_or_null(v[PUB_PR_DOWN][f])));
    json_object_set_new(o, "profile", pr);
    json_object_set_new(o, "anomaly_firing", json_boolean(fa));
    json_object_set_new(o, "data_quality_firing", json_integer(fd));
    return o;
}

void ccd_ops_cell_json(Ccd *d, CcdCell *c, json_t *o)
{
    if (OPS(d))
        json_object_set_new(o, "scores", scores_json(d, c));
}

static json_t *event_json(Ccd *d, const QEvent *e)
{
    char buf[1024 + 256 * CC_ALERT_MAX_ATTR];
    int n = cc_alert_event_json(&e->ev, &d->model->hp, buf, sizeof buf);
    json_t *j = n > 0 ? json_loadb(buf, (size_t)n, 0, NULL) : NULL;
    if (j && json_is_object(j))
        json_object_set_new(j, "seq", json_integer((json_int_t)e->seq));
    return j ? j : json_null();
}

static int parse_time(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end) {
        *out = v;
        return 0;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p || (*p && strcmp(p, "Z")))
        return -1;
    *out = (int64_t)timegm(&tm);
    return 0;
}

static int find_cell(CcdReq *r, CcdCell **out)
{
    if (!cc_kpi_valid_cell_id(r->id, strlen(r->id)))
        return -ccd_problem(r, 400, "bad-cell-id",
                            "'%s' is not a valid cell id (1..64 of [A-Za-z0-9._:/-])", r->id);
    *out = ccd_cells_get(r->d->cells, r->id);
    if (!*out)
        return -ccd_problem(r, 404, "cell-not-found", "no cell '%s' on this daemon", r->id);
    return 1;
}

/* Transitions of the history matching the filters, oldest first, after seq `after`. */
static int list_alerts(CcdReq *r, const char *cell)
{
    Ccd *d = r->d;
    CcdOps *o = OPS(d);
    const char *state = ccd_query(r, "state"), *kind = ccd_query(r, "kind"), *qs;
    int64_t since = INT64_MIN;
    long long limit = 100, after = 0;
    char *end;
    if (state && strcmp(state, "firing") && strcmp(state, "resolved"))
        return ccd_problem(r, 422, "bad-parameter", "state must be firing or resolved, got '%s'", state);
    if (kind && strcmp(kind, "anomaly") && strcmp(kind, "data_quality"))
        return ccd_problem(r, 422, "bad-parameter", "kind must be anomaly or data_quality, got '%s'", kind);
    if ((qs = ccd_query(r, "since")) && parse_time(qs, &since))
        return ccd_problem(r, 400, "bad-parameter", "since must be unix seconds or RFC 3339 UTC (2024-05-01T00:00:00Z), got '%s'", qs);
    if ((qs = ccd_query(r, "limit"))) {
        limit = strtoll(qs, &end, 10);
        if (!*qs || *end)
            return ccd_problem(r, 400, "bad-parameter", "limit must be an integer");
        if (limit < 1 || limit > 1000)
            return ccd_problem(r, 422, "bad-parameter", "limit must be in [1, 1000], got %lld", limit);
    }
    if ((qs = ccd_query(r, "after"))) {
        after = strtoll(qs, &end, 10);
        if (!*qs || *end || after < 0)
            return ccd_problem(r, 400, "bad-parameter", "after must be a sequence number (the previous page's next)");
    }
    if (!cell)
        cell = ccd_query(r, "cell");
    drain(d); /* what the worker queued so far */
    json_t *arr = json_array();
    uint64_t last = 0;
    int more = 0;
    for (size_t i = 0; i < o->hn; i++) {
        const QEvent *e = &o->hist[(o->hhead + i) % HIST_MAX];
        if (e->seq <= (uint64_t)after || (cell && strcmp(cell, e->cell)) ||
            (state && strcmp(state, cc_alert_state_name(e->ev.state))) ||
            (kind && strcmp(kind, cc_alert_kind_name(e->ev.kind))) || e->ev.ts < since)
            continue;
        if ((long long)json_array_size(arr) == limit) {
            more = 1;
            break;
        }
        json_array_append_new(arr, event_json(d, e));
        last = e->seq;
    }
    return ccd_json(r, 200, json_pack("{s:o, s:o}", "alerts", arr, "next",
                                      more ? json_integer((json_int_t)last) : json_null()));
}

int ccd_h_alerts(CcdReq *r) { return list_alerts(r, NULL); }

int ccd_h_cell_alerts(CcdReq *r)
{
    Ccd *d = r->d;
    CcdCell *c;
    int rc = find_cell(r, &c);
    if (rc < 0)
        return -rc;
    if (!ccd_query(r, "active"))
        return list_alerts(r, c->id);
    /* ?active: the alerts firing now, from the cell's state (waits if it is being stepped) */
    if (c->busy)
        return CCD_DEFER;
    OpsCell *oc = c->anomaly;
    CcAlertEvent ev[16];
    int n = oc ? cc_anomaly_cell_active(OPS(d)->an, oc->ac, ev, 16) : 0;
    json_t *arr = json_array();
    for (int i = 0; i < n && i < 16; i++) {
        QEvent q;
        q.ev = ev[i];
        snprintf(q.cell, sizeof q.cell, "%s", c->id);
        q.ev.cell_id = q.cell;
        q.seq = 0;
        json_t *j = event_json(d, &q);
        json_object_del(j, "seq");
        json_array_append_new(arr, j);
    }
    return ccd_json(r, 200, json_pack("{s:s, s:o}", "cell", c->id, "active", arr));
}

int ccd_h_cell_scores(CcdReq *r)
{
    CcdCell *c;
    int rc = find_cell(r, &c);
    if (rc < 0)
        return -rc;
    json_t *o = scores_json(r->d, c);
    json_object_set_new(o, "cell", json_string(c->id));
    return ccd_json(r, 200, o);
}

int ccd_h_admin_reload(CcdReq *r)
{
    Ccd *d = r->d;
    const char *tok = d->cfg.admin_token;
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
    if (!tok || !tok[0])
        return ccd_problem(r, 403, "admin-disabled",
                           "admin routes are disabled: set admin.token in the configuration");
    if (!auth || strncasecmp(auth, "Bearer ", 7)) {
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "WWW-Authenticate",
                          "Bearer realm=\"cellcastd admin\"");
        return ccd_problem(r, 401, "unauthorized", "send Authorization: Bearer <admin.token>");
    }
    const char *given = auth + 7;
    size_t lt = strlen(tok), lg = strlen(given);
    unsigned diff = (unsigned)(lt ^ lg);
    for (size_t i = 0; i < lg; i++)
        diff |= (unsigned char)given[i] ^ (unsigned char)tok[i % (lt ? lt : 1)];
    if (diff)
        return ccd_problem(r, 403, "forbidden", "wrong admin token");
    json_t *rep = NULL;
    char err[768];
    LOG_INFO("reload", "POST /v1/admin/reload");
    int rc = ccd_ops_reload(d, &rep, err, sizeof err);
    if (rc)
        return ccd_problem(r, 422, "reload-refused", "%s; the previous model and configuration keep serving", err);
    return ccd_json(r, 200, rep);
}
