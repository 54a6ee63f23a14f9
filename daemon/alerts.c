/*
 * alerts.c — the alert sink of cellcastd: per-cell anomaly state and scores, the queue of
 * transitions (worker → loop), their production to the Kafka alert topic with retries in
 * order, the history behind GET /v1/alerts and the journal of what was produced. See
 * alerts.h for the threading and the journal's use at restarts.
 */
#include "alerts.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cc_time.h"
#include "alertmanager.h"
#include "feedback.h"
#include "api_util.h"
#include "http.h"
#include "http_cache.h"
#include "incidents.h"
#include "log.h"
#include "outbox.h"
#include "silences.h"
#include "topology.h"

#define HIST_MAX 10000 /* transitions kept for GET /v1/alerts */

/* Per-cell alert state (CcdCell.anomaly). ac belongs to whoever owns the cell (worker while
 * busy); the pub_* fields are written under the table's pub_lock. */
typedef struct AlertCell {
    CcAnomalyCell *ac;
    int64_t pub_step; /* last scored step, -1 */
    double pub_score;
    int F; /* KPIs of pub */
    int pub_anomaly_firing, pub_dq_firing;
    int pub_anomaly_critical, pub_dq_critical; /* of those, with severity critical */
    uint64_t pub_quiet;
    uint64_t pub_n; /* publishes of the scores: a version of what GET /v1/cells/{id} shows */
    double pub[];   // (PUB_N, F) per-KPI scores of pub_step, sized to the model's
                    // KPIs: a resident cell must not pay for CC_MAX_FEATURES
} AlertCell;

/* Rows of AlertCell.pub. */
enum { PUB_Z, PUB_CU_UP, PUB_CU_DOWN, PUB_PR_EXP, PUB_PR_UP, PUB_PR_DOWN, PUB_N };

/* A transition with its cell id copied (CcAlertEvent.cell_id points at cell). */
typedef struct QEvent {
    CcAlertEvent ev;
    char cell[CC_ANOMALY_CELL_ID_MAX + 1];
    uint64_t seq;
} QEvent;

typedef struct EvVec {
    QEvent *v;
    size_t n, cap;
} EvVec;

/* A cell's evidence past incidents.evidence_frac at a step (worker → loop; incidents.h). */
typedef struct EvidRec {
    char cell[CC_ANOMALY_CELL_ID_MAX + 1];
    int kpi, dir;               /* kpi: a KPI, or CCD_EVIDENCE_ALL_ZERO */
    double frac, forecast_frac; /* forecast_frac: without the profile's sum (kpi_forecast) */
    int64_t step;
} EvidRec;

struct CcdAlerts {
    CcAnomaly *an;
    CcdOutbox *outbox; /* the journal and the delivery of transitions (outbox.h) */
    /* worker/tick → loop */
    pthread_mutex_t qlock;
    EvVec q;
    EvidRec *evid; /* the evidence reports of the steps since the last flush */
    size_t n_evid, cap_evid;
    /* history ring */
    QEvent *hist;
    size_t hn, hhead; /* count, index of the oldest */
    uint64_t seq;
    /* moves (under the cells' pub_lock) whenever a cell's firing alerts may have: a publish
     * of the scores of a cell firing before or after, a firing cell freed; with seq, the
     * version of GET /v1/alerts/firing (an episode's end step and peak move without a
     * transition) */
    uint64_t firing_ver;
    /* counters */
    uint64_t trans[2][5][3][3]; /* kind, reason, state, severity */
    int tick_enabled;
    /* the data clock (alerts.h, Missing data); under qlock */
    _Atomic int64_t data_end_s; /* newest end of an observed step over every cell, 0: none
                                   yet; read without the lock by the worker's fast path */
    int64_t data_lag_s;         /* wall clock minus data_end_s when data_end_s was reached */
    int data_live;              /* the last tick judged on the wall clock (for the log) */
};

/* Rewrites the journal compactly (loop thread, after a snapshot). */
void ccd_alerts_journal_compact(Ccd *d) { ccd_outbox_compact(d->alerts->outbox); }

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
    CcdAlerts *o = cookie;
    QEvent e;
    e.ev = *ev;
    snprintf(e.cell, sizeof e.cell, "%s", ev->cell_id);
    e.seq = 0;
    pthread_mutex_lock(&o->qlock);
    if (vec_push(&o->q, &e))
        LOG_ERROR("alerts", "out of memory queueing alert %s", ev->id); /* daemon policy: log */
    pthread_mutex_unlock(&o->qlock);
}

static AlertCell *alert_cell(Ccd *d, CcdCell *c)
{
    CcdAlerts *o = d->alerts;
    if (c->anomaly)
        return c->anomaly;
    int F = d->model->hp.n_features;
    AlertCell *oc = calloc(1, sizeof *oc + (size_t)PUB_N * (size_t)F * sizeof(double));
    if (!oc)
        return NULL;
    oc->F = F;
    if (cc_anomaly_cell_open(&oc->ac, o->an, c->id)) {
        free(oc);
        return NULL;
    }
    oc->pub_step = -1;
    int64_t q = ccd_outbox_quiet_step(o->outbox, c->id);
    if (q >= 0)
        cc_anomaly_cell_quiet_until(oc->ac, q);
    pthread_mutex_lock(&d->cells->pub_lock); /* HTTP and /metrics read the pointer */
    c->anomaly = oc;
    pthread_mutex_unlock(&d->cells->pub_lock);
    return oc;
}

void ccd_alerts_cell_free(void *cookie, CcdCell *c)
{
    Ccd *d = cookie;
    AlertCell *oc = c->anomaly;
    if (!oc)
        return;
    pthread_mutex_lock(&d->cells->pub_lock);
    if (d->alerts && (oc->pub_anomaly_firing || oc->pub_dq_firing))
        d->alerts->firing_ver++;
    c->anomaly = NULL;
    pthread_mutex_unlock(&d->cells->pub_lock);
    cc_anomaly_cell_close(&oc->ac);
    free(oc);
}

CcAnomalyCell *ccd_alerts_cell(Ccd *d, CcdCell *c)
{
    AlertCell *oc = alert_cell(d, c);
    return oc ? oc->ac : NULL;
}

CcAnomalyCell *ccd_alerts_cell_state(const CcdCell *c)
{
    const AlertCell *oc = c->anomaly;
    return oc ? oc->ac : NULL;
}

static void publish_scores(Ccd *d, CcdCell *c, AlertCell *oc)
{
    double v[PUB_N][CC_MAX_FEATURES], score;
    CcAnomalyCellStats st;
    int64_t s = cc_anomaly_cell_scores(oc->ac, v[PUB_Z], &score);
    cc_anomaly_cell_cusum(oc->ac, v[PUB_CU_UP], v[PUB_CU_DOWN]);
    cc_anomaly_cell_profile(oc->ac, v[PUB_PR_EXP], v[PUB_PR_UP], v[PUB_PR_DOWN]);
    cc_anomaly_cell_stats(oc->ac, &st);
    pthread_mutex_lock(&d->cells->pub_lock);
    if (st.anomaly_firing || st.dq_firing || oc->pub_anomaly_firing || oc->pub_dq_firing)
        d->alerts->firing_ver++;
    oc->pub_n++;
    for (int r = 0; r < PUB_N; r++)
        memcpy(oc->pub + (size_t)r * oc->F, v[r], (size_t)oc->F * sizeof(double));
    oc->pub_step = s;
    oc->pub_score = score;
    oc->pub_anomaly_firing = st.anomaly_firing;
    oc->pub_dq_firing = st.dq_firing;
    oc->pub_anomaly_critical = st.anomaly_critical;
    oc->pub_dq_critical = st.dq_critical;
    oc->pub_quiet = st.quiet;
    pthread_mutex_unlock(&d->cells->pub_lock);
}

/* Any thread: the data clock sees a cell's observed step (alerts.h, Missing data). */
static void data_clock_advance(Ccd *d, int64_t step)
{
    CcdAlerts *o = d->alerts;
    int64_t end = (step + 1) * d->model->hp.step_seconds;
    /* per stepped cell on the worker: most steps do not move the clock, so they take no lock */
    if (end <= atomic_load_explicit(&o->data_end_s, memory_order_relaxed))
        return;
    pthread_mutex_lock(&o->qlock);
    if (end > o->data_end_s) {
        o->data_end_s = end;
        o->data_lag_s = (int64_t)time(NULL) - end;
    }
    pthread_mutex_unlock(&o->qlock);
}

/* The time missing data is judged at: the wall clock while the data is live (its newest
 * step arrived within the missing-data silence of its end), else the data's own newest
 * time, so that a replay of old data that ends leaves nothing missing. */
static int64_t data_clock_now(Ccd *d)
{
    CcdAlerts *o = d->alerts;
    int64_t wall = (int64_t)time(NULL);
    pthread_mutex_lock(&o->qlock);
    int64_t end = o->data_end_s, lag = o->data_lag_s;
    pthread_mutex_unlock(&o->qlock);
    int live = end > 0 && lag <= cc_anomaly_missing_after(o->an);
    if (live != o->data_live) {
        o->data_live = live;
        LOG_INFO(
            "alerts", "missing data judged on %s",
            live ? "the wall clock (live data)"
                 : "the data's own time (its newest step is older than the missing-data silence)");
    }
    return live ? wall : end;
}

/* The detector's mask of a stepped item: the KPIs its records gave, none on an imputed step. */
static void observed_mask(uint8_t *mask, int F, int imputed, uint64_t present)
{
    for (int f = 0; f < F; f++)
        mask[f] = !imputed && (present >> f & 1);
}

static void evid_push(CcdAlerts *o, const char *cell, int kpi, int dir, double frac,
                      double forecast_frac, int64_t step)
{
    if (o->n_evid == o->cap_evid) {
        size_t cap = o->cap_evid ? 2 * o->cap_evid : 64;
        EvidRec *p = realloc(o->evid, cap * sizeof *p);
        if (!p) {
            LOG_ERROR("alerts", "out of memory queueing the evidence of cell %s", cell);
            return; /* the evidence of one step: the cell's next step reports it again */
        }
        o->evid = p;
        o->cap_evid = cap;
    }
    EvidRec *r = &o->evid[o->n_evid++];
    snprintf(r->cell, sizeof r->cell, "%s", cell);
    r->kpi = kpi;
    r->dir = dir;
    r->frac = frac;
    r->forecast_frac = forecast_frac;
    r->step = step;
}

/* Worker: the cell's evidence past incidents.evidence_frac after its observation (only
 * those: most cell-steps queue nothing) for the incidents' evidence rule. */
static void evidence_queue(Ccd *d, const CcAnomalyCell *ac)
{
    CcdAlerts *o = d->alerts;
    CcAnomalyEvidence ev;
    const double frac = d->cfg.incidents_evidence_frac;
    if (!(cc_anomaly_cell_evidence(o->an, ac, &ev) >= frac))
        return;
    const char *cell = cc_anomaly_cell_id(ac);
    pthread_mutex_lock(&o->qlock);
    if (ev.zero >= frac)
        evid_push(o, cell, CCD_EVIDENCE_ALL_ZERO, 0, ev.zero, 0, ev.step);
    for (int f = 0; f < d->model->hp.n_features; f++)
        if (fabs(ev.kpi[f]) >= frac)
            evid_push(o, cell, f, ev.kpi[f] > 0 ? 1 : -1, fabs(ev.kpi[f]), fabs(ev.kpi_forecast[f]),
                      ev.step);
    pthread_mutex_unlock(&o->qlock);
}

void ccd_alerts_on_stepped(Ccd *d, CcdCell *c, int64_t step, const float *values, int imputed,
                           uint64_t present, const CcForecast *fc)
{
    CcdAlerts *o = d->alerts;
    if (!o || !o->an)
        return;
    AlertCell *oc = alert_cell(d, c);
    if (!oc)
        return;
    uint8_t mask[CC_MAX_FEATURES];
    observed_mask(mask, d->model->hp.n_features, imputed, present);
    if (!imputed)
        data_clock_advance(d, step);
    CcAlertSink sink = {o, sink_emit};
    /* a maintenance window (silences.h): scored, but nothing of it is learnt */
    cc_anomaly_cell_freeze_learning(
        oc->ac, ccd_silences_in_maintenance(d, c->id, step * (int64_t)d->model->hp.step_seconds));
    cc_anomaly_observe(o->an, oc->ac, step, values, mask, &sink);
    if (!imputed &&
        (d->cfg.incidents_evidence_cells > 0 || d->cfg.incidents_cell_persist_steps > 0))
        evidence_queue(d, oc->ac);
    cc_anomaly_set_forecast(o->an, oc->ac, fc);
    publish_scores(d, c, oc);
}

int ccd_alerts_outage_hold(Ccd *d, CcdCell *c, const float *values, int imputed, uint64_t present,
                           int max_steps)
{
    CcdAlerts *o = d->alerts;
    AlertCell *oc = o && o->an ? alert_cell(d, c) : NULL;
    uint8_t mask[CC_MAX_FEATURES];
    if (!oc)
        return 0;
    observed_mask(mask, d->model->hp.n_features, imputed, present); /* as observed below */
    return cc_anomaly_outage_hold(o->an, oc->ac, values, mask, max_steps);
}

static int kind_i(const CcAlertEvent *e) { return e->kind == CC_ALERT_DATA_QUALITY; }
static int reason_i(const CcAlertEvent *e)
{
    return e->reason >= 0 && e->reason <= 4 ? (int)e->reason : 0;
}
static int state_i(const CcAlertEvent *e) { return e->state == CC_ALERT_RESOLVED ? 2 : 1; }
static int sev_i(const CcAlertEvent *e) { return e->severity == CC_SEV_CRITICAL ? 2 : 1; }

/* Journals one transition for the outbox (produced by its flush); without Kafka only its
 * step is noted (the replay's quiet step). */
static void journal(Ccd *d, const QEvent *e)
{
    CcdAlerts *o = d->alerts;
    if (!d->kafka) {
        ccd_outbox_note(o->outbox, e->cell, e->ev.step);
        return;
    }
    char buf[1024 + 256 * CC_ALERT_MAX_ATTR + CCD_TOPO_LABELS_JSON_MAX];
    int n = cc_alert_event_json(&e->ev, &d->model->hp, buf, sizeof buf);
    if (n > 0)
        n = ccd_topology_splice_labels(d->topology, e->cell, buf, n, sizeof buf);
    if (n < 0 || ccd_outbox_add(o->outbox, e->cell, e->ev.step, buf, (size_t)n))
        LOG_ERROR("alerts", "alert %s not produced: %s", e->ev.id,
                  n < 0 ? "cannot format it" : "out of memory"); /* daemon policy: log */
}

static void history_add(CcdAlerts *o, QEvent *e)
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
void ccd_alerts_flush(Ccd *d)
{
    CcdAlerts *o = d->alerts;
    EvVec q;
    if (!o)
        return;
    pthread_mutex_lock(&o->qlock);
    q = o->q;
    memset(&o->q, 0, sizeof o->q);
    EvidRec *evid = o->evid;
    size_t n_evid = o->n_evid;
    o->evid = NULL;
    o->n_evid = o->cap_evid = 0;
    int64_t data_end = o->data_end_s;
    pthread_mutex_unlock(&o->qlock);
    /* the evidence first: an alert of the same step then joins the incident it opened */
    const int64_t S = d->model->hp.step_seconds;
    for (size_t i = 0; i < n_evid; i++)
        ccd_incidents_on_evidence(d, evid[i].cell, evid[i].kpi, evid[i].dir, evid[i].frac,
                                  evid[i].forecast_frac, evid[i].step, evid[i].step * S);
    free(evid);
    if (data_end > 0) /* the newest observed step: members not reported since resolve */
        ccd_incidents_evidence_step(d, data_end / S - 1);
    for (size_t i = 0; i < q.n; i++) {
        QEvent *e = &q.v[i];
        e->ev.cell_id = e->cell;
        if (ccd_silences_hold(d, &e->ev)) /* silenced: it fires when the silence ends */
            continue;
        history_add(o, e);
        o->trans[kind_i(&e->ev)][reason_i(&e->ev)][state_i(&e->ev)][sev_i(&e->ev)]++;
        LOG_INFO("alerts", "%s %s %s%s%s (%s, step %lld, score %.2f)", e->ev.id,
                 cc_alert_state_name(e->ev.state), cc_alert_kind_name(e->ev.kind),
                 e->ev.kind == CC_ALERT_DATA_QUALITY ? "/" : "",
                 e->ev.kind == CC_ALERT_DATA_QUALITY ? cc_dq_reason_name(e->ev.reason) : "",
                 cc_alert_severity_name(e->ev.severity), (long long)e->ev.step, e->ev.score);
        journal(d, e);
        ccd_incidents_on_alert(d, &e->ev);
        ccd_am_alert(d, &e->ev); /* with alertmanager.send_cell_alerts */
    }
    ccd_incidents_publish(d); /* the incidents these transitions changed, once each */
    /* journaled and synced, then produced (with every earlier one not yet confirmed) */
    ccd_outbox_flush(o->outbox, d->kafka, d->cfg.kafka_alert_topic);
    free(q.v);
}

typedef struct TickCtx {
    Ccd *d;
    int64_t now;
} TickCtx;

/* Loop thread: the cell's silence as a share of the missing-data silence, past
 * incidents.evidence_frac, for the incidents' evidence rule (missing is judged at ticks). */
static void missing_evidence(Ccd *d, const CcdCell *c, const CcAnomalyCell *ac, int64_t now)
{
    const int64_t S = d->model->hp.step_seconds;
    const double after = (double)cc_anomaly_missing_after(d->alerts->an);
    /* most cells report: their newest record (at or after the detector's step) says so
     * without reading the detector */
    if (c->last_step < 0 ||
        (double)(now - (c->last_step + 1) * S) < d->cfg.incidents_evidence_frac * after)
        return;
    CcAnomalyEvidence ev;
    cc_anomaly_cell_evidence(d->alerts->an, ac, &ev);
    if (ev.step < 0)
        return;
    double silence = (double)(now - (ev.step + 1) * S), frac = silence / after;
    if (frac >= d->cfg.incidents_evidence_frac)
        ccd_incidents_on_evidence(d, cc_anomaly_cell_id(ac), CCD_EVIDENCE_MISSING, 0, frac, 0,
                                  now / S, now);
}

static void tick_cell(void *cookie, CcdCell *c)
{
    TickCtx *t = cookie;
    AlertCell *oc = c->anomaly;
    if (!oc || c->busy || c->doomed)
        return;
    CcAlertSink sink = {t->d->alerts, sink_emit};
    CcAnomalyCellStats before;
    cc_anomaly_cell_stats(oc->ac, &before);
    cc_anomaly_tick(t->d->alerts->an, oc->ac, t->now, &sink);
    if (t->d->cfg.incidents_evidence_cells > 0)
        missing_evidence(t->d, c, oc->ac, t->now);
    CcAnomalyCellStats after;
    cc_anomaly_cell_stats(oc->ac, &after);
    if (after.dq_firing != before.dq_firing)
        publish_scores(t->d, c, oc);
}

void ccd_alerts_tick(Ccd *d)
{
    CcdAlerts *o = d->alerts;
    if (!o)
        return;
    CcAlertSink unsilenced = {o, sink_emit};
    ccd_silences_release(d, &unsilenced); /* held alerts no silence matches any more */
    ccd_alerts_flush(d);
    /* missing data: only once the consumer has caught up (a backlog looks like silence) */
    int caught_up = 1;
    if (d->kafka) {
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        caught_up = ks.assigned_partitions > 0 && ks.lag >= 0 &&
                    ks.lag <= d->cfg.kafka_max_poll_messages && !ccd_sched_pending(d->sched);
    }
    caught_up = caught_up && !ccd_sched_busy(d->sched);
    if (caught_up != o->tick_enabled) {
        o->tick_enabled = caught_up;
        LOG_DEBUG("alerts", "missing-data checks %s",
                  caught_up ? "on (consumer caught up)" : "paused (backlog)");
    }
    if (o->tick_enabled) {
        TickCtx t = {d, data_clock_now(d)};
        ccd_cells_foreach(d->cells, tick_cell, &t);
        ccd_alerts_flush(d);
    }
}

void ccd_alerts_shutdown(Ccd *d)
{
    CcdAlerts *o = d->alerts;
    CcdOutboxStats st;
    if (!o || !d->kafka)
        return;
    /* give the producer a moment to confirm; the rest stays journaled */
    ccd_outbox_stats(o->outbox, &st);
    for (int i = 0; i < 100 && st.unconfirmed; i++) {
        ccd_kafka_service(d->kafka);
        usleep(20000);
        ccd_alerts_flush(d);
        ccd_outbox_stats(o->outbox, &st);
    }
    if (st.unconfirmed)
        LOG_WARN("alerts",
                 "%zu alert transition(s) not confirmed by Kafka before exit; they are journaled "
                 "and produced again at the next start",
                 st.unconfirmed);
}

void ccd_alerts_restored(Ccd *d, CcdCell *c, const CcForecast *fc)
{
    AlertCell *oc = c->anomaly;
    if (!oc)
        return;
    int64_t q = ccd_outbox_quiet_step(d->alerts->outbox, c->id);
    if (q >= 0)
        cc_anomaly_cell_quiet_until(oc->ac, q);
    if (fc)
        cc_anomaly_set_forecast(d->alerts->an, oc->ac, fc);
    if (c->last_step >= 0) /* live if the snapshot's data ended within the silence */
        data_clock_advance(d, c->last_step);
    publish_scores(d, c, oc);
}

typedef struct Firing {
    int anomaly, dq;
    int anomaly_critical, dq_critical;
    uint64_t quiet;
} Firing;

static void count_firing(void *cookie, CcdCell *c)
{
    Firing *f = cookie;
    const AlertCell *oc = c->anomaly;
    if (oc) {
        f->anomaly += oc->pub_anomaly_firing;
        f->dq += oc->pub_dq_firing;
        f->anomaly_critical += oc->pub_anomaly_critical;
        f->dq_critical += oc->pub_dq_critical;
        f->quiet += oc->pub_quiet;
    }
}

/* Over every cell, under pub_lock (the worker publishes the fields). */
static Firing firing(Ccd *d)
{
    Firing f = {0};
    pthread_mutex_lock(&d->cells->pub_lock);
    ccd_cells_foreach(d->cells, count_firing, &f);
    pthread_mutex_unlock(&d->cells->pub_lock);
    return f;
}

int ccd_alerts_firing(Ccd *d)
{
    Firing f = firing(d);
    return f.anomaly + f.dq;
}

void ccd_alerts_stats(Ccd *d, CcdAlertsStats *st)
{
    const CcdAlerts *o = d->alerts;
    Firing f = firing(d);
    memcpy(st->trans, o->trans, sizeof st->trans);
    CcdOutboxStats ob;
    ccd_outbox_stats(o->outbox, &ob);
    st->produced = ob.produced;
    st->produce_refused = ob.refused;
    st->waiting = ob.unconfirmed;
    st->recovered = ob.recovered;
    st->delivery_failed = ob.failed;
    st->quiet = f.quiet;
    st->firing_anomaly = f.anomaly;
    st->firing_dq = f.dq;
    st->firing_anomaly_critical = f.anomaly_critical;
    st->firing_dq_critical = f.dq_critical;
}

/* ---- lifecycle ---- */

int ccd_alerts_open(Ccd *d, const CcAnomalySettings *s, const char *journal_path, char *err,
                    size_t errlen)
{
    CcdAlerts *o = calloc(1, sizeof *o);
    char e2[256];
    int rc;
    if (!o)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    d->alerts = o;
    pthread_mutex_init(&o->qlock, NULL);
    if (!(o->hist = calloc(HIST_MAX, sizeof *o->hist)))
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    if ((rc = cc_anomaly_open(&o->an, s, e2, sizeof e2)))
        return cc_errf(err, errlen, rc, "alerts: %s", e2);
    return ccd_outbox_open(&o->outbox, journal_path, err, errlen);
}

void ccd_alerts_set_settings(Ccd *d, const CcAnomalySettings *s)
{
    char e2[256];
    cc_anomaly_set_settings(d->alerts->an, s, e2, sizeof e2);
}

void ccd_alerts_close(Ccd *d)
{
    CcdAlerts *o = d->alerts;
    if (!o)
        return;
    if (d->cells) /* the anomaly cells must go before the context */
        ccd_cells_foreach(d->cells, ccd_alerts_cell_free, d);
    cc_anomaly_close(&o->an);
    ccd_outbox_close(&o->outbox);
    free(o->q.v);
    free(o->evid);
    free(o->hist);
    pthread_mutex_destroy(&o->qlock);
    free(o);
    d->alerts = NULL;
}

/* ---- HTTP ---- */

/* The members of a cell's scores object (no braces): written directly, no jansson tree,
 * as GET /v1/cells/{id} (which the dashboard reads per visible row) carries them. */
static void scores_write(Ccd *d, CcdCell *c, CcdSb *b)
{
    const CcHparams *hp = &d->model->hp;
    int64_t step = -1;
    double score = 0, v[PUB_N][CC_MAX_FEATURES];
    for (int r = 0; r < PUB_N; r++)
        for (int f = 0; f < CC_MAX_FEATURES; f++)
            v[r][f] = NAN;
    int fa = 0, fd = 0;
    pthread_mutex_lock(&d->cells->pub_lock);
    AlertCell *oc = c->anomaly;
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
    static const char *const open[3] = {"\"z\":{", "},\"cusum\":{", "},\"profile\":{"};
    static const char *const part[PUB_N] = {
        "", "{\"up\":", ",\"down\":", "{\"expected\":", ",\"up\":", ",\"down\":"};
    static const int first[4] = {PUB_Z, PUB_CU_UP, PUB_PR_EXP, PUB_N}; /* rows of each object */
    if (step < 0) {
        ccd_sb_str(b,
                   "\"step\":null,\"ts\":null,\"score\":null,\"z\":{},\"cusum\":{},\"profile\":{}");
    } else {
        ccd_sb_str(b, "\"step\":");
        ccd_sb_int(b, step);
        ccd_sb_str(b, ",\"ts\":");
        ccd_sb_ts(b, step * hp->step_seconds);
        ccd_sb_str(b, ",\"score\":");
        ccd_sb_num(b, score);
        ccd_sb_add(b, ",", 1);
        for (int o = 0; o < 3; o++) { /* z: a number per KPI; cusum, profile: an object */
            ccd_sb_str(b, open[o]);
            for (int f = 0; f < hp->n_features; f++) {
                if (f)
                    ccd_sb_add(b, ",", 1);
                ccd_sb_jstr(b, hp->features[f]);
                ccd_sb_add(b, ":", 1);
                for (int r = first[o]; r < first[o + 1]; r++) {
                    ccd_sb_str(b, part[r]);
                    ccd_sb_num(b, v[r][f]);
                }
                if (o)
                    ccd_sb_add(b, "}", 1);
            }
        }
        ccd_sb_add(b, "}", 1);
    }
    ccd_sb_str(b, fa ? ",\"anomaly_firing\":true,\"data_quality_firing\":"
                     : ",\"anomaly_firing\":false,\"data_quality_firing\":");
    ccd_sb_int(b, fd);
}

void ccd_alerts_cell_write(Ccd *d, CcdCell *c, CcdSb *b)
{
    if (!d->alerts)
        return;
    ccd_sb_str(b, ",\"scores\":{");
    scores_write(d, c, b);
    ccd_sb_add(b, "}", 1);
}

uint64_t ccd_alerts_cell_version(Ccd *d, const CcdCell *c)
{
    pthread_mutex_lock(&d->cells->pub_lock);
    const AlertCell *oc = c->anomaly;
    uint64_t v = oc ? oc->pub_n : 0;
    pthread_mutex_unlock(&d->cells->pub_lock);
    return v;
}

static json_t *event_json(Ccd *d, const QEvent *e)
{
    char buf[1024 + 256 * CC_ALERT_MAX_ATTR + CCD_TOPO_LABELS_JSON_MAX];
    int n = cc_alert_event_json(&e->ev, &d->model->hp, buf, sizeof buf);
    if (n > 0)
        n = ccd_topology_splice_labels(d->topology, e->cell, buf, n, sizeof buf);
    json_t *j = n > 0 ? json_loadb(buf, (size_t)n, 0, NULL) : NULL;
    if (j && json_is_object(j)) {
        json_object_set_new(j, "seq", json_integer((json_int_t)e->seq));
        ccd_fb_annotate(d, e->ev.id, j); /* the operator's verdict, if any */
    }
    return j ? j : json_null();
}

int ccd_alerts_lookup(Ccd *d, const char *id, CcAlertEvent *ev, char *cell)
{
    CcdAlerts *o = d->alerts;
    if (!o)
        return -ENOENT;
    ccd_alerts_flush(d);
    for (size_t i = o->hn; i-- > 0;) {
        const QEvent *e = &o->hist[(o->hhead + i) % HIST_MAX];
        if (!strcmp(e->ev.id, id)) {
            *ev = e->ev;
            memcpy(cell, e->cell, sizeof e->cell);
            ev->cell_id = cell;
            return 0;
        }
    }
    return -ENOENT;
}

double ccd_alerts_raise_bar(Ccd *d, CcdCell *c, int kpi)
{
    AlertCell *oc = c->anomaly;
    if (!d->alerts || !oc)
        return -EINVAL;
    return cc_anomaly_cell_feedback(d->alerts->an, oc->ac, kpi, -1);
}

/* The `kind` and `limit` (default 100) parameters of the alert listings: 0, or the status
 * of the problem answered. */
static int query_kind_limit(CcdReq *r, const char **kind, long long *limit)
{
    const char *qs;
    char *end;
    *kind = ccd_query(r, "kind");
    *limit = 100;
    if (*kind && strcmp(*kind, "anomaly") && strcmp(*kind, "data_quality"))
        return ccd_problem(r, 422, "bad-parameter",
                           "kind must be anomaly or data_quality, got '%s'", *kind);
    if ((qs = ccd_query(r, "limit"))) {
        *limit = strtoll(qs, &end, 10);
        if (!*qs || *end)
            return ccd_problem(r, 400, "bad-parameter", "limit must be an integer");
        if (*limit < 1 || *limit > 1000)
            return ccd_problem(r, 422, "bad-parameter", "limit must be in [1, 1000], got %lld",
                               *limit);
    }
    return 0;
}

/* Transitions of the history matching the filters, oldest first, after seq `after`. */
static int list_alerts(CcdReq *r, const char *cell)
{
    Ccd *d = r->d;
    CcdAlerts *o = d->alerts;
    const char *state = ccd_query(r, "state"), *kind, *qs;
    int64_t since = INT64_MIN, until;
    long long limit, after = 0;
    char *end;
    if (state && strcmp(state, "firing") && strcmp(state, "resolved"))
        return ccd_problem(r, 422, "bad-parameter", "state must be firing or resolved, got '%s'",
                           state);
    int rc = query_kind_limit(r, &kind, &limit);
    if (rc)
        return rc;
    rc = ccd_query_since(r, &since);
    if (!rc)
        rc = ccd_query_time(r, "until", INT64_MAX, &until);
    if (rc)
        return rc;
    if ((qs = ccd_query(r, "after"))) {
        after = strtoll(qs, &end, 10);
        if (!*qs || *end || after < 0)
            return ccd_problem(r, 400, "bad-parameter",
                               "after must be a sequence number (the previous page's next)");
    }
    if (!cell)
        cell = ccd_query(r, "cell");
    ccd_alerts_flush(d); /* what the worker queued so far */
    /* a scan of the whole history (~0.3 ms): the same query gets the same reply until the
     * next transition (the dashboard rereads a cell's alerts; a 304 when nothing changed) */
    if ((rc = ccd_reply_cached(r,
                               ccd_fold(ccd_fold(ccd_version_seed(d), o->seq), ccd_fb_version(d)))))
        return rc;
    json_t *arr = json_array();
    uint64_t last = 0;
    int more = 0;
    for (size_t i = 0; i < o->hn; i++) {
        const QEvent *e = &o->hist[(o->hhead + i) % HIST_MAX];
        if (e->seq <= (uint64_t)after || (cell && strcmp(cell, e->cell)) ||
            (state && strcmp(state, cc_alert_state_name(e->ev.state))) ||
            (kind && strcmp(kind, cc_alert_kind_name(e->ev.kind))) || e->ev.ts < since ||
            e->ev.ts > until)
            continue;
        if ((long long)json_array_size(arr) == limit) {
            more = 1;
            break;
        }
        json_array_append_new(arr, event_json(d, e));
        last = e->seq;
    }
    return ccd_json(r, 200,
                    json_pack("{s:o, s:o}", "alerts", arr, "next",
                              more ? json_integer((json_int_t)last) : json_null()));
}

int ccd_h_alerts(CcdReq *r) { return list_alerts(r, NULL); }

/* Appends the alerts firing now in cell c (not busy) to v; kind NULL or a kind's name.
 * 0 or -ENOMEM. */
static int cell_active(Ccd *d, CcdCell *c, const char *kind, EvVec *v)
{
    AlertCell *oc = c->anomaly;
    if (!oc)
        return 0;
    /* at most the anomaly, all_zero, missing, and stuck and bounds per KPI */
    int max = 3 + 2 * oc->F;
    CcAlertEvent *ev = malloc((size_t)max * sizeof *ev);
    if (!ev)
        return -ENOMEM;
    int n = cc_anomaly_cell_active(d->alerts->an, oc->ac, ev, max), rc = 0;
    for (int i = 0; i < n && i < max && !rc; i++) {
        if ((kind && strcmp(kind, cc_alert_kind_name(ev[i].kind))) ||
            ccd_silences_held(d, ev[i].id))
            continue;
        QEvent q;
        q.ev = ev[i];
        snprintf(q.cell, sizeof q.cell, "%s", c->id);
        q.seq = 0;
        rc = vec_push(v, &q);
    }
    free(ev);
    return rc;
}

/* The JSON array of v's events (cell ids from their copies, no seq), from index i0: their
 * objects as cc_alert_event_json writes them, copied, no jansson tree. */
static void active_write(Ccd *d, EvVec *v, size_t i0, size_t n, CcdSb *b)
{
    char buf[1024 + 256 * CC_ALERT_MAX_ATTR + CCD_TOPO_LABELS_JSON_MAX];
    ccd_sb_add(b, "[", 1);
    for (size_t i = i0; i < i0 + n && i < v->n; i++) {
        v->v[i].ev.cell_id = v->v[i].cell;
        int k = cc_alert_event_json(&v->v[i].ev, &d->model->hp, buf, sizeof buf);
        if (k > 0)
            k = ccd_topology_splice_labels(d->topology, v->v[i].cell, buf, k, sizeof buf);
        if (i > i0)
            ccd_sb_add(b, ",", 1);
        if (k > 0 && buf[k - 1] == '}') { /* the operator's verdict, if any, as GET /v1/alerts */
            ccd_sb_add(b, buf, (size_t)k - 1);
            ccd_fb_write(d, v->v[i].ev.id, b);
            ccd_sb_add(b, "}", 1);
        } else if (k > 0)
            ccd_sb_add(b, buf, (size_t)k);
        else
            ccd_sb_str(b, "null");
    }
    ccd_sb_add(b, "]", 1);
}

int ccd_h_cell_alerts(CcdReq *r)
{
    Ccd *d = r->d;
    CcdCell *c;
    int rc = ccd_find_cell(r, &c);
    if (rc < 0)
        return -rc;
    if (!ccd_query(r, "active"))
        return list_alerts(r, c->id);
    /* ?active: the alerts firing now, from the cell's state (waits if it is being stepped) */
    if (c->busy)
        return CCD_DEFER;
    EvVec v = {NULL, 0, 0};
    if (cell_active(d, c, NULL, &v)) {
        free(v.v);
        return ccd_problem(r, 500, "internal", "out of memory");
    }
    CcdSb *sb = ccd_reply_sb();
    ccd_sb_str(sb, "{\"cell\":");
    ccd_sb_jstr(sb, c->id);
    ccd_sb_str(sb, ",\"active\":");
    active_write(d, &v, 0, v.n, sb);
    ccd_sb_add(sb, "}", 1);
    free(v.v);
    return ccd_sb_reply(r, sb);
}

typedef struct FiringList {
    Ccd *d;
    const char *kind;
    EvVec v;
    int busy, oom;
} FiringList;

static void collect_firing(void *cookie, CcdCell *c)
{
    FiringList *l = cookie;
    if (!c->anomaly || l->busy || l->oom)
        return;
    if (c->busy)
        l->busy = 1;
    else if (cell_active(l->d, c, l->kind, &l->v))
        l->oom = 1;
}

static int cmp_event_id(const void *a, const void *b)
{
    return strcmp(((const QEvent *)a)->ev.id, ((const QEvent *)b)->ev.id);
}

int ccd_h_alerts_firing(CcdReq *r)
{
    Ccd *d = r->d;
    const char *kind, *after = ccd_query(r, "after");
    long long limit;
    int rc = query_kind_limit(r, &kind, &limit);
    if (rc)
        return rc;
    /* the same reply until a cell's firing alerts move: a poll between costs a cache hit or
     * a 304, and needs no wait for the batch being stepped (its publish moves the version) */
    ccd_alerts_flush(d);
    pthread_mutex_lock(&d->cells->pub_lock);
    uint64_t ver = d->alerts->firing_ver;
    pthread_mutex_unlock(&d->cells->pub_lock);
    ver = ccd_fold(ver, ccd_fb_version(d)); /* a verdict shows on its alert */
    if ((rc = ccd_reply_cached(r, ccd_fold(ccd_fold(ccd_version_seed(d), d->alerts->seq), ver))))
        return rc;
    /* every cell's state as of now: wait for the batch being stepped */
    FiringList l = {d, kind, {NULL, 0, 0}, 0, 0};
    ccd_cells_foreach(d->cells, collect_firing, &l);
    if (l.busy || l.oom) {
        free(l.v.v);
        return l.busy ? CCD_DEFER : ccd_problem(r, 500, "internal", "out of memory");
    }
    /* ordered by alert id, so that `after` (the previous page's last id) pages stably */
    if (l.v.n)
        qsort(l.v.v, l.v.n, sizeof *l.v.v, cmp_event_id);
    size_t i0 = 0;
    while (after && i0 < l.v.n && strcmp(l.v.v[i0].ev.id, after) <= 0)
        i0++;
    size_t n = l.v.n - i0 < (size_t)limit ? l.v.n - i0 : (size_t)limit;
    CcdSb *sb = ccd_reply_sb();
    ccd_sb_str(sb, "{\"alerts\":");
    active_write(d, &l.v, i0, n, sb);
    ccd_sb_str(sb, ",\"total\":");
    ccd_sb_int(sb, (long long)l.v.n);
    ccd_sb_str(sb, ",\"next\":");
    if (i0 + n < l.v.n)
        ccd_sb_jstr(sb, l.v.v[i0 + n - 1].ev.id);
    else
        ccd_sb_str(sb, "null");
    ccd_sb_add(sb, "}", 1);
    free(l.v.v);
    return ccd_sb_reply(r, sb);
}

int ccd_h_cell_scores(CcdReq *r)
{
    CcdCell *c;
    int rc = ccd_find_cell(r, &c);
    if (rc < 0)
        return -rc;
    CcdSb *sb = ccd_reply_sb();
    ccd_sb_str(sb, "{\"cell\":");
    ccd_sb_jstr(sb, c->id);
    ccd_sb_add(sb, ",", 1);
    scores_write(r->d, c, sb);
    ccd_sb_add(sb, "}", 1);
    return ccd_sb_reply(r, sb);
}
