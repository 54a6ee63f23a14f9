/*
 * fleet_eval.c — incidents on a synthetic fleet (issue 32): a `cellcast synth` fleet with
 * sites and labelled events, run through the engine, the detector and cellcastd's incident
 * grouping, scored against the events.
 *
 * The path (what cellcastd does, without Kafka or HTTP):
 *   - data: lib/cc_synth (the numbers of `cellcast synth --sites`, each value rounded to
 *     the CSV's %.5g; absent rows absent, empty fields unobserved), and the ground truth
 *     `cellcast synth --events` writes (cc_synth_write_events, read back from its CSV);
 *   - engine and detector: tools/anomaly_eval.c's cct_ae_prepare (cellcastd's ingest: gaps
 *     of at most ingest.max_gap 3 steps imputed, longer ones restart the sequence; outage
 *     rows held from the model, ingest.outage_hold_steps 96; the engine stepped one row at
 *     a time), then each row replayed through cc_anomaly_observe with the forecast made the
 *     step before (as `cellcast anomaly-eval`, which tests/daemon/test_alert_parity.sh holds
 *     to the daemon's alerts), every setting at its default (alerts.* = the library's);
 *   - the missing-data check: cc_anomaly_tick at 1 s past the end of every step (the
 *     daemon's cron on the wall clock of a live feed, whose step p arrives at (p+1)·S); an
 *     imputed row is observed when the row after its gap arrives, as cellcastd steps it;
 *   - incidents: daemon/incidents.c itself with cellcastd's settings at its configuration's
 *     defaults (fleet_common.h: every incidents.* key, those added later too), CcdIncAlert
 *     built as incidents_daemon.c builds it (the site and region of the topology, the KPI of
 *     a per-KPI alert or the first attributed one); the evidence rule fed as cellcastd feeds
 *     it (fleet_common.h): each observed (not imputed) step's evidence past
 *     incidents.evidence_frac, and at the ticks the silence's share of the missing-data bar
 *     (the cron ticks every second: reported at the first tick of a step it is past the
 *     share, 1 s past the step's end or the step's last second); one flush per step in
 *     cellcastd's order (PH_*): the evidence of step p's observations, the evidence expiry,
 *     their alerts, an emit; the tick's evidence and alerts, the later evidence, an emit.
 *
 * Scoring (a transition's step is its flush: the step whose data it followed; an evidence
 * member of an incident counts as an alert of its cell, except in alerts per incident):
 *   - warm-up: events that start in the first --warmup-days are not scored, nor incidents
 *     that open then (the model's window, the detector's warm-up and novelty ranges);
 *   - a site event (power_outage, transport_loss, neighbour_shift at the next site) is
 *     detected within 2 steps when an alert of a cell of its site opens or joins an
 *     incident at steps start..start+2; detected at all when one does in [start, end +
 *     post); split when more than one incident of the site takes alerts in that window;
 *   - a cell event (cell_outage, cell_spike, cell_degradation; burst and gap reported
 *     apart) likewise by alerts of its cell; a cell event inside a power outage or a
 *     transport loss of its site is not scored (nothing of the cell can show it);
 *   - an incident is false when none of its member alerts fires inside [start, end + post)
 *     of an event of its cell (any kind: a burst or a collector gap explains an incident
 *     too; counted apart); false incidents per 1,000 cells per day over the scored days;
 *   - cell_event_recall_alerts: a cell event found by an alert of its cell, whether or not
 *     it reached an incident (what the paging rule holds back is the difference);
 *   - alerts → incidents: firing alerts that joined incidents / incidents (scored part);
 *   - the false incidents broken down: cells, scope, first member (kind or DQ reason, KPI,
 *     critical, an evidence member), duration in steps (opening flush to resolving flush).
 *
 * Usage: fleet_eval --model M [--cells N] [--days D] [--seed X] [--threads T]
 *          [--site-outage-rate X] [--neighbour-shift X] [--cell-event-rate X]
 *          [--warmup-days D] [--post N] [--events FILE] [--incidents FILE] [--max-cells N]
 *          [--resolve-hold N[,N...]] [--profile-persist N[,N...]] [--evidence-cells N[,N...]]
 *          [--evidence-frac X[,X...]] [--no-missing-evidence] [--evidence-missing N[,N...]]
 *          [--evidence-forecast B[,B]] [--site-same-kpi B[,B]] [--site-forecast B[,B]]
 *          [--stuck-persist N[,N...]] [--cell-persist N[,N...]] [--persist-own-kpi B[,B]]
 *          [--set k=v[,k=v...]]
 * --set: the detector's alerts.* settings by name over the library's defaults (as
 * `cellcast anomaly-eval --set`; lag_steps -1 is the model's horizon). Prints one JSON object on
 * stdout; progress on stderr. --profile-persist, --evidence-cells,
 * --evidence-frac: incidents.profile_persist_steps, evidence_cells and evidence_frac (at
 * least the default's: the evidence is reported at the default's share, so a higher one
 * misses a silence that crosses it later within a step), each list's values grouped and
 * scored with each of the others' (and each hold's) after one engine pass, one JSON line
 * each, "{persist}" in --incidents replaced by the persistence. --no-missing-evidence: the
 * evidence rule fed no missing-data report (what that class adds). --evidence-missing,
 * --evidence-forecast, --site-same-kpi, --site-forecast, --stuck-persist, --cell-persist,
 * --persist-own-kpi: incidents.evidence_missing_steps, evidence_forecast, site_same_kpi,
 * site_forecast, stuck_persist_steps, cell_persist_steps, cell_persist_own_kpi (B: 0 or 1),
 * grouped likewise: every combination, the last list varying fastest, one JSON line each with
 * its index "combo" (also on stderr's line before its scoring), which "{combo}" in
 * --incidents is replaced by. The incidents file's opened_by: what opened it, from its
 * members at its first emit (evidence, critical, outage, two_cells, persisted). --resolve-hold: the
 * grouping's incidents.resolve_hold_steps (default: the configuration's); with several, the
 * engine's pass is made once and grouped and scored at each: one JSON line each on stdout (in that
 * order), a line "fleet_eval: resolve_hold_steps N" on stderr before each one's scoring, and
 * "{hold}" in --incidents replaced by N. Environment: FLEET_VERBOSE=1 lists
 * the site and cell events not seen within 2 steps (and whether they started in the
 * detector's cooldown after an episode of the cell: cooldown_steps); FLEET_TRACE=<cell id>
 * prints the cell's alert transitions, FLEET_TRACE_ROWS=<cell id> its scores per row.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anomaly_eval.h"
#include "cc_engine.h"
#include "cc_model.h"
#include "cc_synth.h"
#include "fleet_common.h"
#include "incidents.h"

enum { K_POWER, K_TRANSPORT, K_SHIFT, K_CELL_OUTAGE, K_SPIKE, K_DEGRADATION, K_BURST, K_GAP, NK };
static const char *const kind_names[NK] = {
    "power_outage", "transport_loss",   "neighbour_shift", "cell_outage",
    "cell_spike",   "cell_degradation", "burst",           "gap",
};

typedef struct Event {
    int kind, site; /* site: -1 without sites */
    int *cells, n_cells;
    int64_t a, b; /* steps, b exclusive */
} Event;

/* What happens in the flush of step p, in cellcastd's order (alerts.c ccd_alerts_flush and
 * ccd_alerts_tick): the evidence of the observations of step p, the evidence expiry, the
 * observations' alerts, an emit; then the tick 1 s past the step's end — the missing-data
 * evidence that is past the bar at that tick, the tick's alerts —, the missing-data evidence
 * that gets past it later in that step (the cron ticks every second), an emit. */
enum { PH_OBS_EVIDENCE, PH_OBS_ALERTS, PH_TICK_EVIDENCE, PH_TICK_ALERTS, PH_LATE_EVIDENCE };

/* One alert transition, as the grouping gets it. */
typedef struct Trans {
    int64_t flush; /* the step it followed */
    uint8_t phase; /* PH_OBS_ALERTS or PH_TICK_ALERTS */
    int cell;
    uint32_t seq; /* order within the cell */
    char *id;
    uint8_t firing, critical, kind, reason;
    int8_t kpi;
    uint8_t profile_only; /* an anomaly the seasonal profile's CUSUM alone fired */
    int64_t step, ts, start_ts;
} Trans;

typedef struct TransVec {
    Trans *v;
    size_t n, cap;
} TransVec;

/* One evidence report of a cell (fleet_common.h), in the flush it is handed over in. */
typedef struct EvidRec {
    int64_t flush;
    uint8_t phase; /* PH_*_EVIDENCE */
    int cell;
    FleetEvidence e;
} EvidRec;

typedef struct EvidVec {
    EvidRec *v;
    size_t n, cap;
} EvidVec;

typedef struct Args {
    const char *model, *events_out, *incidents_out;
    const char *resolve_holds;      /* incidents.resolve_hold_steps to group with, "a,b": each */
    const char *profile_persists;   /* incidents.profile_persist_steps likewise */
    const char *evidence_cells;     /* incidents.evidence_cells likewise */
    const char *evidence_fracs;     /* incidents.evidence_frac likewise (at least the default) */
    const char *evidence_persists;  /* incidents.evidence_missing_steps likewise */
    const char *evidence_forecasts; /* incidents.evidence_forecast likewise (0, 1) */
    const char *site_same_kpis;     /* incidents.site_same_kpi likewise (0, 1) */
    const char *stuck_persists;     /* incidents.stuck_persist_steps likewise */
    const char *cell_persists;      /* incidents.cell_persist_steps likewise */
    const char *site_forecasts,
        *own_kpis;           /* incidents.site_forecast, cell_persist_own_kpi likewise */
    const char *anomaly_set; /* --set k=v,k=v: alerts.* settings over the defaults */
    int no_missing_evidence; /* the evidence rule without its missing-data class */
    CcSynthSettings ss;
    double days, warmup_days;
    int threads, post, max_cells;
} Args;

typedef struct Shared {
    const Args *a;
    const CcModel *m;
    const CcSynth *g;
    const CcAnomalySettings *as;
    const CcdIncidentSettings *is;
    int64_t n_steps;
    int next_cell, done_cells;
    pthread_mutex_t lock;
    int64_t t0;
    int failed;
} Shared;

typedef struct Worker {
    Shared *sh;
    TransVec tv;
    EvidVec evv;
    int64_t held, restarts;
} Worker;

static int push(TransVec *v, const Trans *t)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 1024;
        Trans *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = *t;
    return 0;
}

static int push_evid(EvidVec *v, const EvidRec *e)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 1024;
        EvidRec *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = *e;
    return 0;
}

/* ------------------------------------------------------------------ per cell */

typedef struct SinkCtx {
    TransVec *tv;
    int cell;
    uint32_t seq;
    int64_t flush;
    uint8_t phase;
    int oom;
} SinkCtx;

static void sink_emit(void *cookie, const CcAlertEvent *ev)
{
    SinkCtx *s = cookie;
    int kpi = ev->kpi >= 0                                 ? ev->kpi
              : ev->kind == CC_ALERT_ANOMALY && ev->n_attr ? ev->attr[0].kpi
                                                           : -1;
    Trans t = {s->flush,
               s->phase,
               s->cell,
               s->seq++,
               strdup(ev->id),
               ev->state == CC_ALERT_FIRING,
               ev->severity == CC_SEV_CRITICAL,
               (uint8_t)ev->kind,
               (uint8_t)ev->reason,
               (int8_t)kpi,
               ev->kind == CC_ALERT_ANOMALY && ev->trace.fire_rules == CC_RULE_PROFILE,
               ev->step,
               ev->ts,
               ev->start_ts};
    const char *trace = getenv("FLEET_TRACE"); /* a cell id: its transitions on stderr */
    if (trace && !strcmp(trace, ev->cell_id))
        fprintf(stderr, "  trace %s %s flush %lld step %lld start %lld score %.1f\n", ev->id,
                cc_alert_state_name(ev->state), (long long)s->flush, (long long)ev->step,
                (long long)ev->start_step, ev->score);
    if (!t.id || push(s->tv, &t)) {
        free(t.id);
        s->oom = 1;
    }
}

/* The cell's rows from the generator as a CSV replay has them: absent rows and empty
 * fields unobserved (mask 0, the last observed value carried), values at %.5g. */
static int fill_cell(CctAeCell *c, const CcSynth *g, int cell, int64_t n_steps, int F, int H)
{
    memset(c, 0, sizeof *c);
    cc_synth_cell_id(cell, c->id, sizeof c->id);
    size_t n = (size_t)n_steps * F;
    c->H = H;
    c->ser.T = (int)n_steps;
    c->ser.F = F;
    c->p0 = cc_synth_first_step(g);
    c->ser.x = malloc(n * sizeof *c->ser.x);
    c->ser.mask = malloc(n);
    c->fm = malloc(n * H * sizeof *c->fm);
    c->fs = malloc(n * H * sizeof *c->fs);
    c->fsc = malloc(n * sizeof *c->fsc);
    c->bm = malloc(n * sizeof *c->bm);
    c->bs = malloc(n * sizeof *c->bs);
    c->row = calloc((size_t)n_steps, 1);
    if (!c->ser.x || !c->ser.mask || !c->fm || !c->fs || !c->fsc || !c->bm || !c->bs || !c->row)
        return -ENOMEM;
    float v[CC_SYNTH_N_KPIS], last[CC_SYNTH_N_KPIS] = {0};
    for (int64_t i = 0; i < n_steps; i++) {
        int present = cc_synth_values(g, cell, c->p0 + i, v);
        for (int f = 0; f < F; f++) {
            size_t ix = (size_t)i * F + f;
            if (present && !isnan(v[f])) {
                char buf[32];
                snprintf(buf, sizeof buf, "%.5g", v[f]);
                last[f] = strtof(buf, NULL);
                c->ser.mask[ix] = 1;
            } else {
                c->ser.mask[ix] = 0;
            }
            c->ser.x[ix] = last[f];
        }
    }
    return 0;
}

static void free_cell(CctAeCell *c)
{
    free(c->ser.x);
    free(c->ser.mask);
    free(c->fm);
    free(c->fs);
    free(c->fsc);
    free(c->bm);
    free(c->bs);
    free(c->row);
    free(c->ser.lab);
}

/* The evidence reports of one call of fleet_common's, kept for the grouping. */
static int keep_evidence(EvidVec *evv, int64_t flush, uint8_t phase, int cell,
                         const FleetEvidence *e, int n)
{
    for (int k = 0; k < n; k++) {
        EvidRec r = {flush, phase, cell, e[k]};
        if (push_evid(evv, &r))
            return -ENOMEM;
    }
    return 0;
}

/* The detector over the cell's rows in the daemon's order, ticks included, and the cell's
 * evidence reports as cellcastd makes them (fleet_common.h). */
static int replay_cell(const CcAnomalySettings *s, const CcdIncidentSettings *is, CctAeCell *c,
                       int F, int cell, TransVec *tv, EvidVec *evv)
{
    CcAnomaly *an = NULL;
    CcAnomalyCell *ac = NULL;
    char err[256];
    int rc = cc_anomaly_open(&an, s, err, sizeof err);
    if (!rc)
        rc = cc_anomaly_cell_open(&ac, an, c->id);
    if (rc) {
        fprintf(stderr, "fleet_eval: %s\n", rc == -EINVAL ? err : "out of memory");
        cc_anomaly_close(&an);
        return rc;
    }
    SinkCtx sc = {tv, cell, 0, 0, PH_OBS_ALERTS, 0};
    CcAlertSink sink = {&sc, sink_emit};
    const int64_t S = s->step_seconds;
    int pending = -1;    /* first row of an imputed run not stepped yet */
    int64_t newest = -1; /* the step of the cell's newest record */
    FleetEvidence fe[1 + CC_MAX_FEATURES];
    int oom = 0;
    const char *trace_rows = getenv("FLEET_TRACE_ROWS"); /* a cell id: its scores */
    for (int i = 0; i < c->ser.T; i++) {
        int64_t p = c->p0 + i;
        sc.flush = p;
        sc.phase = PH_OBS_ALERTS;
        if (c->row[i] == CCT_AE_ROW_SKIPPED) {
            pending = -1;
        } else if (!memchr(c->ser.mask + (size_t)i * F, 1, (size_t)F)) {
            if (pending < 0)
                pending = i; /* stepped when the next row comes */
        } else {
            for (int k = pending >= 0 ? pending : i; k <= i; k++) {
                cct_ae_set_expect(an, ac, s, c, k);
                cc_anomaly_observe(an, ac, c->p0 + k, c->ser.x + (size_t)k * F,
                                   c->ser.mask + (size_t)k * F, &sink);
                if (trace_rows && !strcmp(trace_rows, c->id)) {
                    double z[CC_MAX_FEATURES], score;
                    int64_t at = cc_anomaly_cell_scores(ac, z, &score);
                    fprintf(stderr,
                            "  row %d scored %lld score %.1f x0 %.3g fm0 %.3g fs0 %.3g z0 %.1f\n",
                            k, (long long)(at - c->p0), score, c->ser.x[(size_t)k * F],
                            k ? c->fm[((size_t)(k - 1) * c->H) * F] : NAN,
                            k ? c->fs[((size_t)(k - 1) * c->H) * F] : NAN, z[0]);
                }
            }
            pending = -1;
            newest = p; /* the observed row's evidence (the imputed ones before it give none) */
            int n = fleet_step_evidence(an, ac, F, S, is->evidence_frac, fe);
            oom |= keep_evidence(evv, p, PH_OBS_EVIDENCE, cell, fe, n);
        }
        /* the tick 1 s past the step's end, then the cron's ticks up to the next step's data */
        const int64_t tick = (p + 1) * S + 1, last_tick = (p + 2) * S - 1;
        sc.phase = PH_TICK_ALERTS;
        cc_anomaly_tick(an, ac, tick, &sink);
        /* alerts.c's tick_cell: the evidence after the tick, handed over at once (before the
         * tick's alerts, which wait for the flush) */
        int n = fleet_missing_evidence(an, ac, newest, tick, S, is->evidence_frac, fe);
        oom |= keep_evidence(evv, p, PH_TICK_EVIDENCE, cell, fe, n);
        if (!n) {
            n = fleet_missing_evidence(an, ac, newest, last_tick, S, is->evidence_frac, fe);
            oom |= keep_evidence(evv, p, PH_LATE_EVIDENCE, cell, fe, n);
        }
    }
    cc_anomaly_cell_close(&ac);
    cc_anomaly_close(&an);
    return sc.oom || oom ? -ENOMEM : 0;
}

static void *worker_main(void *arg)
{
    Worker *w = arg;
    Shared *sh = w->sh;
    const CcModel *m = sh->m;
    const int F = m->hp.n_features, H = m->hp.horizon;
    CcEngine *e = NULL;
    CcEngineSettings es;
    char err[512];
    cc_engine_default_settings(&es);
    es.n_threads = 1;
    if (cc_engine_open(&e, m, &es, err, sizeof err)) {
        fprintf(stderr, "fleet_eval: engine: %s\n", err);
        sh->failed = 1;
        return NULL;
    }
    CctAePrep prep = {
        .no_inject = 1,
        .warmup_steps = sh->as->warmup_steps,
        .baseline_window = 96,
        .alerts = sh->as,
        .outage_hold_steps = CC_ANOMALY_OUTAGE_HOLD_STEPS,
        .max_gap_steps = CC_GAP_IMPUTE_STEPS,
    };
    uint64_t rng = 1;
    for (;;) {
        pthread_mutex_lock(&sh->lock);
        int cell = sh->failed ? -1 : sh->next_cell < sh->a->max_cells ? sh->next_cell++ : -1;
        pthread_mutex_unlock(&sh->lock);
        if (cell < 0)
            break;
        CctAeCell c;
        int rc = fill_cell(&c, sh->g, cell, sh->n_steps, F, H);
        if (!rc)
            rc = cct_ae_prepare(&c, &prep, m, e, &rng, 0);
        if (!rc)
            rc = replay_cell(sh->as, sh->is, &c, F, cell, &w->tv, &w->evv);
        w->held += c.held;
        w->restarts += c.restarts;
        free_cell(&c);
        pthread_mutex_lock(&sh->lock);
        if (rc)
            sh->failed = 1;
        int done = ++sh->done_cells;
        pthread_mutex_unlock(&sh->lock);
        if (done % 250 == 0)
            fprintf(stderr, "fleet_eval: %d cells, %.0f s\n", done,
                    (double)(cc_now_ns() - sh->t0) * 1e-9);
    }
    cc_engine_close(&e);
    return NULL;
}

/* ------------------------------------------------------------------ incidents */

typedef struct Member {
    int cell;
    int64_t flush;
    uint8_t kind, reason, critical;
    uint8_t evidence; /* an evidence member (the evidence rule), not an alert */
    int8_t kpi;
} Member;

typedef struct IncRec {
    char *id;
    int site;              /* -1: a cell's own */
    int64_t open, resolve; /* flush steps; resolve -1: open at the end */
    size_t seen;           /* members of the CcdIncident taken so far */
    Member *m;
    size_t n_m, cap_m;
    int n_cells_max;
    int scope;     /* the widest CcdIncident scope it reached */
    int opened_by; /* OPENED_*: what opened it, from its members at its first emit */
} IncRec;

/* What opened an incident, as its members at its first emit show it (the paging rule's
 * ways, incidents.h): an evidence member first; a critical member; a cell outage (all_zero,
 * a whole cell's missing); two cells' held alerts; one cell's alert that persisted. */
enum { OPENED_EVIDENCE, OPENED_CRITICAL, OPENED_OUTAGE, OPENED_TWO_CELLS, OPENED_PERSISTED };
static const char *const opened_names[] = {"evidence", "critical", "outage", "two_cells",
                                           "persisted"};

typedef struct Run {
    const Args *a;
    const CcSynth *g;
    Trans *tr;
    size_t n_tr;
    EvidRec *evid;
    size_t n_evid;
    const char *const *kpi_names;
    int64_t p0, p_end, flush;
    CcdStrHash alert_ix; /* firing alert id -> index + 1 in tr */
    CcdStrHash by_id;    /* incident id -> IncRec index + 1 */
    CcdIncidentStats st; /* the grouping's at the end */
    IncRec *inc;
    size_t n_inc, cap_inc;
    int oom;
} Run;

static int cell_of(const char *id) { return (int)strtol(id + 4, NULL, 10); /* "cell%04d" */ }

static void on_emit(void *cookie, const CcdIncident *inc)
{
    Run *r = cookie;
    uintptr_t ix = (uintptr_t)ccd_strhash_get(&r->by_id, inc->id);
    const int first_emit = !ix;
    if (!ix) {
        if (r->n_inc == r->cap_inc) {
            size_t cap = r->cap_inc ? 2 * r->cap_inc : 1024;
            IncRec *p = realloc(r->inc, cap * sizeof *p);
            if (!p) {
                r->oom = 1;
                return;
            }
            r->inc = p;
            r->cap_inc = cap;
        }
        IncRec *n = &r->inc[r->n_inc];
        memset(n, 0, sizeof *n);
        n->id = strdup(inc->id);
        n->open = r->flush;
        n->resolve = -1;
        n->site = inc->group_scope == CCD_INC_SITE ? (int)strtol(inc->group + 4, NULL, 10) : -1;
        if (!n->id || ccd_strhash_put(&r->by_id, inc->id, (void *)(uintptr_t)(r->n_inc + 1))) {
            r->oom = 1;
            return;
        }
        ix = ++r->n_inc;
    }
    IncRec *rec = &r->inc[ix - 1];
    for (; rec->seen < inc->n_m; rec->seen++) {
        const CcdIncMember *mm = &inc->m[rec->seen];
        uintptr_t t = (uintptr_t)ccd_strhash_get(&r->alert_ix, mm->alert_id);
        const Trans *tr = t ? &r->tr[t - 1] : NULL;
        const int evidence = strstr(mm->alert_id, ":evidence:") != NULL;
        if (rec->n_m == rec->cap_m) {
            size_t cap = rec->cap_m ? 2 * rec->cap_m : 8;
            Member *p = realloc(rec->m, cap * sizeof *p);
            if (!p) {
                r->oom = 1;
                return;
            }
            rec->m = p;
            rec->cap_m = cap;
        }
        if (!tr && !evidence) { /* every member is an alert of tr or the evidence's */
            r->oom = 1;
            return;
        }
        int kpi = -1;
        for (int f = 0; evidence && mm->kpi && r->kpi_names[f]; f++)
            if (!strcmp(r->kpi_names[f], mm->kpi))
                kpi = f;
        rec->m[rec->n_m++] = (Member){
            .cell = cell_of(mm->cell),
            .flush = r->flush,
            .kind = tr ? tr->kind : CC_ALERT_ANOMALY,
            .reason = tr ? tr->reason : 0,
            .critical = tr ? tr->critical : 0,
            .evidence = (uint8_t)evidence,
            .kpi = (int8_t)(tr ? tr->kpi : kpi),
        };
        if (evidence && strcmp(mm->reason, "anomaly")) { /* all_zero, missing */
            rec->m[rec->n_m - 1].kind = CC_ALERT_DATA_QUALITY;
            rec->m[rec->n_m - 1].reason =
                (uint8_t)(strcmp(mm->reason, "missing") ? CC_DQ_ALL_ZERO : CC_DQ_MISSING);
        }
    }
    if (first_emit) { /* what opened it */
        int critical = 0, outage = 0;
        for (size_t q = 0; q < rec->n_m; q++) {
            critical |= rec->m[q].critical;
            outage |= rec->m[q].kind == CC_ALERT_DATA_QUALITY &&
                      (rec->m[q].reason == CC_DQ_ALL_ZERO ||
                       (rec->m[q].reason == CC_DQ_MISSING && rec->m[q].kpi < 0));
        }
        rec->opened_by = rec->n_m && rec->m[0].evidence ? OPENED_EVIDENCE
                         : critical                     ? OPENED_CRITICAL
                         : outage                       ? OPENED_OUTAGE
                         : inc->n_cells >= 2            ? OPENED_TWO_CELLS
                                                        : OPENED_PERSISTED;
    }
    if ((int)inc->n_cells > rec->n_cells_max)
        rec->n_cells_max = (int)inc->n_cells;
    if (inc->scope > rec->scope)
        rec->scope = inc->scope;
    if (!inc->firing)
        rec->resolve = r->flush;
}

static int cmp_trans(const void *x, const void *y)
{
    const Trans *a = x, *b = y;
    if (a->flush != b->flush)
        return a->flush < b->flush ? -1 : 1;
    if (a->phase != b->phase)
        return a->phase - b->phase;
    if (a->cell != b->cell)
        return a->cell - b->cell;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int cmp_evid(const void *x, const void *y)
{
    const EvidRec *a = x, *b = y;
    if (a->flush != b->flush)
        return a->flush < b->flush ? -1 : 1;
    if (a->phase != b->phase)
        return a->phase - b->phase;
    if (a->cell != b->cell)
        return a->cell - b->cell;
    return a->e.kpi - b->e.kpi;
}

/* The labels of a cell as the topology of `cellcast synth --sites` gives them. */
typedef struct Labels {
    char cell[32], site[32], region[32];
    int group_cells;
} Labels;

static void labels_of(const Run *r, int cell, Labels *l)
{
    cc_synth_cell_id(cell, l->cell, sizeof l->cell);
    int s = cc_synth_cell_site(r->g, cell);
    snprintf(l->site, sizeof l->site, "site%04d", s);
    snprintf(l->region, sizeof l->region, "region%03d", s / r->a->ss.sites_per_region);
    l->group_cells = 0;
    for (int c = cell; c >= 0 && cc_synth_cell_site(r->g, c) == s; c--)
        l->group_cells++;
    for (int c = cell + 1; c < cc_synth_n_cells(r->g) && cc_synth_cell_site(r->g, c) == s; c++)
        l->group_cells++;
}

/* The alert transitions tr[*i..] of (flush, phase) into the grouping. */
static void add_alerts(Run *r, CcdIncidents *inc, size_t *i, uint8_t phase)
{
    for (; *i < r->n_tr && r->tr[*i].flush == r->flush && r->tr[*i].phase == phase; ++*i) {
        const Trans *t = &r->tr[*i];
        Labels l;
        labels_of(r, t->cell, &l);
        CcdIncAlert a = {
            .id = t->id,
            .cell = l.cell,
            .site = l.site,
            .region = l.region,
            .reason = t->kind == CC_ALERT_ANOMALY ? "anomaly" : cc_dq_reason_name(t->reason),
            .kpi = t->kpi >= 0 ? r->kpi_names[t->kpi] : NULL,
            .firing = t->firing,
            .critical = t->critical,
            .step = t->step,
            .ts = t->ts,
            .start_ts = t->start_ts,
            .group_cells = l.group_cells,
            .profile_only = t->profile_only,
        };
        if (t->firing && ccd_strhash_put(&r->alert_ix, t->id, (void *)(uintptr_t)(*i + 1)))
            r->oom = 1;
        if (ccd_incidents_add(inc, &a) == -ENOMEM)
            r->oom = 1;
    }
}

/* The evidence reports evid[*i..] of (flush, phase) into the grouping. */
static void add_evidence(Run *r, CcdIncidents *inc, size_t *i, uint8_t phase)
{
    for (; *i < r->n_evid && r->evid[*i].flush == r->flush && r->evid[*i].phase == phase; ++*i) {
        const EvidRec *e = &r->evid[*i];
        if (r->a->no_missing_evidence && e->e.kpi == CCD_EVIDENCE_MISSING)
            continue; /* --no-missing-evidence: not handed over */
        Labels l;
        labels_of(r, e->cell, &l);
        if (fleet_incidents_evidence(inc, &e->e, l.cell, l.site, l.region, l.group_cells,
                                     r->kpi_names) == -ENOMEM)
            r->oom = 1;
    }
}

/* Every transition and evidence report through daemon/incidents.c with the daemon's
 * settings (is), one flush per step in cellcastd's order (the PH_* phases). */
static int group_incidents(Run *r, const CcdIncidentSettings *is, double *ns_per_trans)
{
    CcdIncidents *inc = NULL;
    if (ccd_incidents_open(&inc, is))
        return -ENOMEM;
    int64_t t0 = cc_now_ns();
    size_t i = 0, k = 0;
    for (r->flush = r->p0; r->flush < r->p_end && !r->oom; r->flush++) {
        add_evidence(r, inc, &k, PH_OBS_EVIDENCE);
        ccd_incidents_evidence_expire(inc, r->flush); /* the data reached step flush */
        add_alerts(r, inc, &i, PH_OBS_ALERTS);
        ccd_incidents_emit(inc, on_emit, r);
        add_evidence(r, inc, &k, PH_TICK_EVIDENCE);
        add_alerts(r, inc, &i, PH_TICK_ALERTS);
        add_evidence(r, inc, &k, PH_LATE_EVIDENCE);
        ccd_incidents_emit(inc, on_emit, r);
    }
    if (!r->oom && (i < r->n_tr || k < r->n_evid)) {
        fprintf(stderr, "fleet_eval: transitions or evidence outside the steps\n");
        r->oom = 1;
    }
    *ns_per_trans = r->n_tr ? (double)(cc_now_ns() - t0) / (double)r->n_tr : 0;
    ccd_incidents_stats(inc, &r->st);
    ccd_incidents_close(&inc);
    return r->oom ? -ENOMEM : 0;
}

/* ------------------------------------------------------------------ events */

/* A ','-separated list of steps in [0, 10000] of option opt into v (at most 16). 0, or -1
 * with a message. */
static int parse_steps(const char *p, const char *opt, int *v, int *n)
{
    for (*n = 0; *n < 16;) {
        char *end;
        long h = strtol(p, &end, 10);
        if (end == p || h < 0 || h > 10000 || (*end && *end != ',')) {
            fprintf(stderr, "fleet_eval: %s: steps in [0, 10000], ','-separated\n", opt);
            return -1;
        }
        v[(*n)++] = (int)h;
        if (!*end)
            break;
        p = end + 1;
    }
    return 0;
}

static int read_events(const char *path, int64_t S, Event **out, int *n_out)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    Event *v = NULL;
    int n = 0, vcap = 0, rc = 0;
    if (getline(&line, &cap, fp) < 0 || strncmp(line, "kind,scope,site,cells,start,end", 31))
        rc = -EINVAL;
    while (!rc && getline(&line, &cap, fp) > 0) {
        char *save = NULL, *kind = strtok_r(line, ",", &save), *scope = strtok_r(NULL, ",", &save);
        char *site = NULL, *cells = NULL;
        /* site may be empty: split by hand */
        char *rest = save;
        char *c1 = rest ? strchr(rest, ',') : NULL;
        if (!kind || !scope || !c1) {
            rc = -EINVAL;
            break;
        }
        *c1 = 0;
        site = rest;
        cells = strtok_r(c1 + 1, ",", &save);
        char *st = strtok_r(NULL, ",", &save), *en = strtok_r(NULL, ",\n", &save);
        if (!cells || !st || !en) {
            rc = -EINVAL;
            break;
        }
        if (n == vcap) {
            vcap = vcap ? 2 * vcap : 1024;
            Event *p = realloc(v, (size_t)vcap * sizeof *p);
            if (!p) {
                rc = -ENOMEM;
                break;
            }
            v = p;
        }
        Event *e = &v[n];
        e->kind = -1;
        for (int k = 0; k < NK; k++)
            if (!strcmp(kind, kind_names[k]))
                e->kind = k;
        e->site = *site ? (int)strtol(site + 4, NULL, 10) : -1;
        e->a = strtoll(st, NULL, 10) / S;
        e->b = strtoll(en, NULL, 10) / S;
        e->n_cells = 1;
        for (const char *q = cells; *q; q++)
            e->n_cells += *q == ';';
        e->cells = malloc((size_t)e->n_cells * sizeof *e->cells);
        if (e->kind < 0 || !e->cells) {
            rc = e->cells ? -EINVAL : -ENOMEM;
            free(e->cells);
            break;
        }
        int k = 0;
        for (char *q = cells; q;) {
            e->cells[k++] = cell_of(q);
            q = strchr(q, ';');
            q = q ? q + 1 : NULL;
        }
        n++;
    }
    free(line);
    fclose(fp);
    *out = v;
    *n_out = n;
    return rc;
}

/* ------------------------------------------------------------------ scoring */

typedef struct EvList {
    int *v;
    int n, cap;
} EvList;

static int evlist_add(EvList *l, int e)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        int *p = realloc(l->v, (size_t)cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = e;
    return 0;
}

typedef struct KindScore {
    int n, det, det2, split, site_scope, joined;
    double delay_sum;
} KindScore;

/* An incident member inside [a, b + post) of an event of its cell: the event, -1 none
 * (the most specific kind first: site outages, cell events, neighbour shift, burst, gap). */
static int explain(const Member *m, const Event *ev, const EvList *by_cell, int post)
{
    int best = -1;
    const EvList *l = &by_cell[m->cell];
    for (int k = 0; k < l->n; k++) {
        const Event *e = &ev[l->v[k]];
        if (m->flush >= e->a && m->flush < e->b + post && (best < 0 || e->kind < ev[best].kind))
            best = l->v[k];
    }
    return best;
}

int main(int argc, char **argv)
{
    Args a = {.days = 28, .warmup_days = 7, .threads = 1, .post = 10, .max_cells = -1};
    cc_synth_default_settings(&a.ss);
    a.ss.n_cells = 1000;
    a.ss.sites = 1;
    a.ss.neighbour_shift = 0.5;
    a.ss.cell_event_rate = 0.2;
    static const struct option lo[] = {
        {"model", 1, 0, 'm'},
        {"cells", 1, 0, 'c'},
        {"days", 1, 0, 'd'},
        {"seed", 1, 0, 's'},
        {"threads", 1, 0, 't'},
        {"site-outage-rate", 1, 0, 'o'},
        {"neighbour-shift", 1, 0, 'n'},
        {"cell-event-rate", 1, 0, 'e'},
        {"warmup-days", 1, 0, 'w'},
        {"post", 1, 0, 'p'},
        {"events", 1, 0, 'E'},
        {"incidents", 1, 0, 'I'},
        {"max-cells", 1, 0, 'x'},
        {"resolve-hold", 1, 0, 'r'},
        {"profile-persist", 1, 0, 'P'},
        {"evidence-cells", 1, 0, 'C'},
        {"evidence-frac", 1, 0, 'F'},
        {"no-missing-evidence", 0, 0, 'N'},
        {"evidence-missing", 1, 0, 'V'},
        {"evidence-forecast", 1, 0, 'W'},
        {"site-same-kpi", 1, 0, 'K'},
        {"stuck-persist", 1, 0, 'U'},
        {"cell-persist", 1, 0, 'L'},
        {"site-forecast", 1, 0, 'X'},
        {"persist-own-kpi", 1, 0, 'Y'},
        {"set", 1, 0, 'S'},
        {0, 0, 0, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (opt) {
        case 'm': a.model = optarg; break;
        case 'c': a.ss.n_cells = atoi(optarg); break;
        case 'd': a.days = atof(optarg); break;
        case 's': a.ss.seed = strtoull(optarg, NULL, 10); break;
        case 't': a.threads = atoi(optarg); break;
        case 'o': a.ss.site_outage_rate = atof(optarg); break;
        case 'n': a.ss.neighbour_shift = atof(optarg); break;
        case 'e': a.ss.cell_event_rate = atof(optarg); break;
        case 'w': a.warmup_days = atof(optarg); break;
        case 'p': a.post = atoi(optarg); break;
        case 'E': a.events_out = optarg; break;
        case 'I': a.incidents_out = optarg; break;
        case 'x': a.max_cells = atoi(optarg); break;
        case 'r': a.resolve_holds = optarg; break;
        case 'P': a.profile_persists = optarg; break;
        case 'C': a.evidence_cells = optarg; break;
        case 'F': a.evidence_fracs = optarg; break;
        case 'N': a.no_missing_evidence = 1; break;
        case 'V': a.evidence_persists = optarg; break;
        case 'W': a.evidence_forecasts = optarg; break;
        case 'K': a.site_same_kpis = optarg; break;
        case 'U': a.stuck_persists = optarg; break;
        case 'L': a.cell_persists = optarg; break;
        case 'X': a.site_forecasts = optarg; break;
        case 'Y': a.own_kpis = optarg; break;
        case 'S': a.anomaly_set = optarg; break;
        default:
            fprintf(stderr, "usage: fleet_eval --model M [--cells N] [--days D] [--seed X] "
                            "[--threads T] [--site-outage-rate X] [--neighbour-shift X] "
                            "[--cell-event-rate X] [--warmup-days D] [--post N] [--events FILE] "
                            "[--incidents FILE] [--max-cells N] [--resolve-hold N[,N...]] "
                            "[--profile-persist N[,N...]] [--evidence-cells N[,N...]] "
                            "[--evidence-frac X[,X...]] [--no-missing-evidence] "
                            "[--evidence-missing N[,N...]] [--evidence-forecast 0,1] "
                            "[--site-same-kpi 0,1] [--stuck-persist N[,N...]] "
                            "[--cell-persist N[,N...]] [--site-forecast 0,1] "
                            "[--persist-own-kpi 0,1] [--set k=v[,k=v...]]\n");
            return 2;
        }
    }
    if (!a.model || a.threads < 1 || a.threads > 64 || !(a.days > a.warmup_days)) {
        fprintf(stderr, "fleet_eval: --model is required, threads 1..64, days > warmup-days\n");
        return 2;
    }
    char err[512];
    CcModel *m = NULL;
    CcSynth *g = NULL;
    if (cc_model_open_file(&m, a.model, err, sizeof err)) {
        fprintf(stderr, "fleet_eval: %s\n", err);
        return 1;
    }
    const CcHparams *hp = &m->hp;
    a.ss.step_seconds = hp->step_seconds;
    char feats[CC_MAX_FEATURES * CC_FEATURE_NAME_MAX] = "";
    for (int f = 0; f < hp->n_features; f++)
        snprintf(feats + strlen(feats), sizeof feats - strlen(feats), "%s%s", f ? "," : "",
                 hp->features[f]);
    a.ss.features = feats;
    if (cc_synth_open(&g, &a.ss, err, sizeof err)) {
        fprintf(stderr, "fleet_eval: %s\n", err);
        return 1;
    }
    if (a.max_cells < 0 || a.max_cells > a.ss.n_cells)
        a.max_cells = a.ss.n_cells;
    const int64_t S = hp->step_seconds;
    const int64_t n_steps = (int64_t)llround(a.days * 86400.0 / (double)S);
    const int64_t p0 = cc_synth_first_step(g);
    const int64_t warm = p0 + (int64_t)llround(a.warmup_days * 86400.0 / (double)S);
    const int64_t p_end = p0 + n_steps;

    /* the ground truth, through its file */
    char tmpl[] = "/tmp/fleet_events_XXXXXX";
    const char *ev_path = a.events_out;
    if (!ev_path) {
        int fd = mkstemp(tmpl);
        if (fd < 0)
            return 1;
        FILE *tf = fdopen(fd, "w");
        if (!tf)
            return 1;
        if (cc_synth_write_events(g, tf, n_steps) || fclose(tf))
            return 1;
        ev_path = tmpl;
    } else {
        FILE *ef = fopen(ev_path, "w");
        if (!ef || cc_synth_write_events(g, ef, n_steps) || fclose(ef)) {
            fprintf(stderr, "fleet_eval: cannot write %s\n", ev_path);
            return 1;
        }
    }
    Event *ev = NULL;
    int n_ev = 0;
    int rc = read_events(ev_path, S, &ev, &n_ev);
    if (!a.events_out)
        remove(tmpl);
    if (rc) {
        fprintf(stderr, "fleet_eval: events: %s\n", strerror(-rc));
        return 1;
    }

    /* the detector's settings: the library's defaults, completed with the model's */
    CcAnomalySettings as;
    cc_anomaly_default_settings(&as);
    as.n_features = hp->n_features;
    as.step_seconds = S;
    if (as.min_kpis > hp->n_features)
        as.min_kpis = hp->n_features;
    char set_err[256]; /* --set: alerts.* by name over the library's defaults */
    if (a.anomaly_set &&
        cc_anomaly_settings_set_list(&as, hp, a.anomaly_set, set_err, sizeof set_err)) {
        fprintf(stderr, "fleet_eval: --set: %s\n", set_err);
        return 2;
    }
    if (as.lag_steps < 0)
        as.lag_steps = hp->horizon < CC_ANOMALY_MAX_LAG ? hp->horizon : CC_ANOMALY_MAX_LAG;
    if (cc_anomaly_validate(&as, err, sizeof err)) {
        fprintf(stderr, "fleet_eval: %s\n", err);
        return 1;
    }
    /* the grouping's: cellcastd's at its configuration's defaults */
    CcdIncidentSettings is;
    if (fleet_incident_settings(&is)) {
        fprintf(stderr, "fleet_eval: out of memory\n");
        return 1;
    }
    /* --resolve-hold, --profile-persist: the engine's pass once, the grouping and scoring
     * once per pair (each hold with each persistence) */
    int holds[16] = {is.resolve_hold_steps}, n_holds = 1;
    int persists[16] = {is.profile_persist_steps}, n_persists = 1;
    int ecells[16] = {is.evidence_cells}, n_ecells = 1;
    int efracs[16] = {(int)lround(is.evidence_frac * 100)}, n_efracs = 1; /* percent */
    int epersists[16] = {is.evidence_missing_steps}, n_epersists = 1;
    int eforecasts[16] = {is.evidence_forecast}, n_eforecasts = 1;
    int samekpis[16] = {is.site_same_kpi}, n_samekpis = 1;
    int spersists[16] = {is.stuck_persist_steps}, n_spersists = 1;
    int cpersists[16] = {is.cell_persist_steps}, n_cpersists = 1;
    int twofc[16] = {is.site_forecast}, n_twofc = 1;
    int ownkpi[16] = {is.cell_persist_own_kpi}, n_ownkpi = 1;
    if ((a.resolve_holds && parse_steps(a.resolve_holds, "--resolve-hold", holds, &n_holds)) ||
        (a.profile_persists &&
         parse_steps(a.profile_persists, "--profile-persist", persists, &n_persists)) ||
        (a.evidence_cells &&
         parse_steps(a.evidence_cells, "--evidence-cells", ecells, &n_ecells)) ||
        (a.evidence_persists &&
         parse_steps(a.evidence_persists, "--evidence-missing", epersists, &n_epersists)) ||
        (a.evidence_forecasts &&
         parse_steps(a.evidence_forecasts, "--evidence-forecast", eforecasts, &n_eforecasts)) ||
        (a.site_same_kpis &&
         parse_steps(a.site_same_kpis, "--site-same-kpi", samekpis, &n_samekpis)) ||
        (a.stuck_persists &&
         parse_steps(a.stuck_persists, "--stuck-persist", spersists, &n_spersists)) ||
        (a.cell_persists &&
         parse_steps(a.cell_persists, "--cell-persist", cpersists, &n_cpersists)) ||
        (a.site_forecasts && parse_steps(a.site_forecasts, "--site-forecast", twofc, &n_twofc)) ||
        (a.own_kpis && parse_steps(a.own_kpis, "--persist-own-kpi", ownkpi, &n_ownkpi)))
        return 2;
    if (a.evidence_fracs) { /* the reports are made at the default's share: only higher ones */
        const char *p = a.evidence_fracs;
        for (n_efracs = 0; n_efracs < 16;) {
            char *end;
            double f = strtod(p, &end);
            if (end == p || !(f >= is.evidence_frac && f <= 1) || (*end && *end != ',')) {
                fprintf(stderr, "fleet_eval: --evidence-frac: shares in [%g, 1], ','-separated\n",
                        is.evidence_frac);
                return 2;
            }
            efracs[n_efracs++] = (int)lround(f * 100);
            if (!*end)
                break;
            p = end + 1;
        }
    }

    fprintf(stderr,
            "fleet_eval: %d cells (%d run) in %d sites, %lld steps of %llds, seed %llu, %d "
            "events, %d threads\n",
            a.ss.n_cells, a.max_cells, cc_synth_n_sites(g), (long long)n_steps, (long long)S,
            (unsigned long long)a.ss.seed, n_ev, a.threads);
    Shared sh = {
        .a = &a, .m = m, .g = g, .as = &as, .is = &is, .n_steps = n_steps, .t0 = cc_now_ns()};
    pthread_mutex_init(&sh.lock, NULL);
    Worker *w = calloc((size_t)a.threads, sizeof *w);
    pthread_t *th = calloc((size_t)a.threads, sizeof *th);
    for (int i = 0; i < a.threads; i++) {
        w[i].sh = &sh;
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    size_t n_tr = 0, n_evid = 0;
    int64_t held = 0, restarts = 0;
    for (int i = 0; i < a.threads; i++) {
        pthread_join(th[i], NULL);
        n_tr += w[i].tv.n;
        n_evid += w[i].evv.n;
        held += w[i].held;
        restarts += w[i].restarts;
    }
    double engine_s = (double)(cc_now_ns() - sh.t0) * 1e-9;
    if (sh.failed) {
        fprintf(stderr, "fleet_eval: a cell failed\n");
        return 1;
    }
    Trans *tr = malloc((n_tr + 1) * sizeof *tr);
    EvidRec *evid = malloc((n_evid + 1) * sizeof *evid);
    if (!tr || !evid)
        return 1;
    n_tr = n_evid = 0;
    for (int i = 0; i < a.threads; i++) {
        memcpy(tr + n_tr, w[i].tv.v, w[i].tv.n * sizeof *tr);
        n_tr += w[i].tv.n;
        free(w[i].tv.v);
        memcpy(evid + n_evid, w[i].evv.v, w[i].evv.n * sizeof *evid);
        n_evid += w[i].evv.n;
        free(w[i].evv.v);
    }
    qsort(tr, n_tr, sizeof *tr, cmp_trans);
    qsort(evid, n_evid, sizeof *evid, cmp_evid);

    const char *kpi_names[CC_MAX_FEATURES + 1] = {0};
    for (int f = 0; f < hp->n_features; f++)
        kpi_names[f] = hp->features[f];
    /* every combination of the lists, the last one varying fastest */
    int *const dim_v[] = {holds,    persists,  ecells,    efracs, epersists, eforecasts,
                          samekpis, spersists, cpersists, twofc,  ownkpi};
    const int dim_n[] = {n_holds,    n_persists,  n_ecells,    n_efracs, n_epersists, n_eforecasts,
                         n_samekpis, n_spersists, n_cpersists, n_twofc,  n_ownkpi};
    enum { N_DIM = 11 };
    int n_combo = 1;
    for (int d = 0; d < N_DIM; d++)
        n_combo *= dim_n[d];
    for (int ci = 0; ci < n_combo; ci++) {
        int val[N_DIM];
        for (int d = N_DIM - 1, rest = ci; d >= 0; d--) {
            val[d] = dim_v[d][rest % dim_n[d]];
            rest /= dim_n[d];
        }
        const int hold = val[0];
        is.resolve_hold_steps = hold;
        is.profile_persist_steps = val[1];
        is.evidence_cells = val[2];
        is.evidence_frac = val[3] / 100.0;
        is.evidence_missing_steps = val[4];
        is.evidence_forecast = val[5];
        is.site_same_kpi = val[6];
        is.stuck_persist_steps = val[7];
        is.cell_persist_steps = val[8];
        is.site_forecast = val[9];
        is.cell_persist_own_kpi = val[10];
        if (n_combo > 1) /* the stderr of each one's scoring follows this line */
            fprintf(stderr,
                    "fleet_eval: resolve_hold_steps %d profile_persist_steps %d evidence_cells %d "
                    "evidence_frac %g evidence_missing_steps %d evidence_forecast %d "
                    "site_same_kpi %d stuck_persist_steps %d cell_persist_steps %d combo %d\n",
                    hold, is.profile_persist_steps, is.evidence_cells, is.evidence_frac,
                    is.evidence_missing_steps, is.evidence_forecast, is.site_same_kpi,
                    is.stuck_persist_steps, is.cell_persist_steps, ci);
        Run r = {.a = &a,
                 .g = g,
                 .tr = tr,
                 .n_tr = n_tr,
                 .evid = evid,
                 .n_evid = n_evid,
                 .kpi_names = kpi_names,
                 .p0 = p0,
                 .p_end = p_end};
        double ns_per_trans = 0;
        if (group_incidents(&r, &is, &ns_per_trans)) {
            fprintf(stderr, "fleet_eval: out of memory\n");
            return 1;
        }

        /* events by cell, for the explanation of incidents */
        const int n_cells = a.max_cells;
        EvList *by_cell = calloc((size_t)a.ss.n_cells, sizeof *by_cell);
        EvList *site_inc = calloc((size_t)cc_synth_n_sites(g) + 1, sizeof *site_inc);
        EvList *cell_inc = calloc((size_t)a.ss.n_cells, sizeof *cell_inc);
        for (int e = 0; e < n_ev; e++)
            for (int k = 0; k < ev[e].n_cells; k++)
                if (ev[e].cells[k] < n_cells)
                    evlist_add(&by_cell[ev[e].cells[k]], e);
        for (size_t i = 0; i < r.n_inc; i++) {
            const IncRec *in = &r.inc[i];
            if (in->site >= 0)
                evlist_add(&site_inc[in->site], (int)i);
            for (size_t k = 0; k < in->n_m; k++) {
                EvList *l = &cell_inc[in->m[k].cell];
                if (!l->n || l->v[l->n - 1] != (int)i)
                    evlist_add(l, (int)i);
            }
        }

        /* the steps (from p0) at which each cell's anomaly episodes resolved */
        EvList *resolved_at = calloc((size_t)a.ss.n_cells, sizeof *resolved_at);
        for (size_t i = 0; i < n_tr; i++)
            if (!tr[i].firing && tr[i].kind == CC_ALERT_ANOMALY)
                evlist_add(&resolved_at[tr[i].cell], (int)(tr[i].flush - p0));
        /* the steps (from p0) at which each cell's alerts first fired (not a change of one
         * firing already), paged or not */
        EvList *fired_at = calloc((size_t)a.ss.n_cells, sizeof *fired_at);
        CcdStrHash onset = {0};
        for (size_t i = 0; i < n_tr; i++)
            if (tr[i].firing && !ccd_strhash_get(&onset, tr[i].id)) {
                if (ccd_strhash_put(&onset, tr[i].id, (void *)1))
                    return 1;
                evlist_add(&fired_at[tr[i].cell], (int)(tr[i].flush - p0));
            }
        ccd_strhash_free(&onset);
        int cell_alerted = 0; /* cell events an alert of the cell fired in, incident or not */
        int missed_n[NK][2] = {{0}}, missed_cool[NK][2] = {{0}};

        /* site and cell events */
        KindScore ks[NK] = {{0}};
        int masked_cell_events = 0;
        for (int e = 0; e < n_ev; e++) {
            const Event *E = &ev[e];
            if (E->a < warm || E->cells[0] >= n_cells)
                continue;
            int site_scope = E->kind <= K_SHIFT;
            if (!site_scope) { /* a cell event inside its site's outage: nothing shows it */
                int hidden = 0;
                const EvList *l = &by_cell[E->cells[0]];
                for (int k = 0; k < l->n && !hidden; k++) {
                    const Event *o = &ev[l->v[k]];
                    hidden = (o->kind == K_POWER || o->kind == K_TRANSPORT) && o->a < E->b &&
                             E->a < o->b;
                }
                if (hidden) {
                    masked_cell_events++;
                    continue;
                }
            }
            KindScore *s = &ks[E->kind];
            s->n++;
            const EvList *il = site_scope ? &site_inc[E->site] : &cell_inc[E->cells[0]];
            int n_inc = 0, got2 = 0, scope2 = 0, joined = 0;
            int64_t first = INT64_MAX;
            for (int k = 0; k < il->n; k++) {
                const IncRec *in = &r.inc[il->v[k]];
                int hit = 0, cells_in = 0, lastc = -1;
                for (size_t q = 0; q < in->n_m; q++) {
                    const Member *mm = &in->m[q];
                    int mine = site_scope ? 1 : mm->cell == E->cells[0];
                    if (!mine || mm->flush < E->a || mm->flush >= E->b + a.post)
                        continue;
                    hit = 1;
                    if (mm->cell != lastc) {
                        cells_in++;
                        lastc = mm->cell;
                    }
                    if (mm->flush < first)
                        first = mm->flush;
                    if (mm->flush <= E->a + 2) {
                        got2 = 1;
                        joined |= in->open < E->a;
                    }
                }
                n_inc += hit;
                scope2 |= hit && cells_in >= 2;
            }
            if (!site_scope && E->kind <= K_DEGRADATION) {
                const EvList *l = &fired_at[E->cells[0]];
                int fired = 0;
                for (int q = 0; q < l->n && !fired; q++)
                    fired = l->v[q] >= E->a - p0 && l->v[q] < E->b + a.post - p0;
                cell_alerted += fired;
            }
            if (n_inc) {
                s->det++;
                s->delay_sum += (double)(first - E->a);
            }
            s->det2 += got2;
            s->split += n_inc > 1;
            s->site_scope += scope2;
            s->joined += joined;
            if (!got2 && (site_scope || E->kind <= K_DEGRADATION)) {
                /* in the detector's cooldown: an anomaly episode of the cell (of a cell of the
                 * site) resolved at most cooldown_steps before the start */
                int cool = 0;
                for (int k = 0; k < E->n_cells && !cool; k++) {
                    const EvList *l = &resolved_at[E->cells[k]];
                    for (int q = 0; q < l->n && !cool; q++)
                        cool = l->v[q] < E->a - p0 && l->v[q] >= E->a - p0 - as.cooldown_steps;
                }
                missed_cool[E->kind][n_inc ? 1 : 0] += cool;
                missed_n[E->kind][n_inc ? 1 : 0]++;
                if (getenv("FLEET_VERBOSE"))
                    fprintf(stderr, "  missed(2) %s site%04d cell%04d steps %lld+%lld: %s%s\n",
                            kind_names[E->kind], E->site, E->cells[0], (long long)(E->a - p0),
                            (long long)(E->b - E->a), n_inc ? "late" : "not detected",
                            cool ? " (cooldown)" : "");
            }
        }

        /* incidents: false, explained; the false ones broken down by scope, their first
         * member (kind or reason, KPI, severity, an evidence member) and duration in steps */
        int scored_inc = 0, false_inc = 0, by_kind[NK] = {0};
        /* false_by_first: [evidence member][anomaly, or 1 + the DQ reason] */
        long long member_alerts = 0, evidence_members = 0, false_by_first[2][8] = {{0}},
                  false_kpi[CC_MAX_FEATURES + 1] = {0};
        int false_cells_hist[8] = {0}, false_scope[3] = {0}, false_critical = 0, false_evidence = 0;
        static const int dur_upper[] = {1, 2, 4, 8, 16, 32, 96, INT32_MAX}; /* steps, inclusive */
        static const char *const dur_names[] = {"0-1",  "2",     "3-4",   "5-8",
                                                "9-16", "17-32", "33-96", ">96"};
        enum { N_DUR = 8 };
        int false_dur[N_DUR + 1] = {0}; /* the last: open at the end */
        /* "{hold}" in the path: the hold's steps */
        char io_path[1024] = "";
        if (a.incidents_out) {
            const char *h = strstr(a.incidents_out, "{hold}");
            if (h)
                snprintf(io_path, sizeof io_path, "%.*s%d%s", (int)(h - a.incidents_out),
                         a.incidents_out, hold, h + 6);
            else
                snprintf(io_path, sizeof io_path, "%s", a.incidents_out);
            char *cp = strstr(io_path, "{combo}");
            if (cp) {
                char tail[1024];
                snprintf(tail, sizeof tail, "%s", cp + 7);
                snprintf(cp, sizeof io_path - (size_t)(cp - io_path), "%d%s", ci, tail);
            }
            char *pp = strstr(io_path, "{persist}");
            if (pp) {
                char tail[1024];
                snprintf(tail, sizeof tail, "%s", pp + 9);
                snprintf(pp, sizeof io_path - (size_t)(pp - io_path), "%d%s",
                         is.profile_persist_steps, tail);
            }
        }
        FILE *io = io_path[0] ? fopen(io_path, "w") : NULL;
        if (io)
            fputs("id,open_step,resolve_step,cells,alerts,explained_by,scope,first,first_kpi,"
                  "first_critical,evidence_members,opened_by\n",
                  io);
        for (size_t i = 0; i < r.n_inc; i++) {
            const IncRec *in = &r.inc[i];
            if (in->open < warm)
                continue;
            scored_inc++;
            int n_evidence = 0;
            for (size_t q = 0; q < in->n_m; q++)
                n_evidence += in->m[q].evidence;
            member_alerts += (long long)in->n_m - n_evidence;
            evidence_members += n_evidence;
            const Member *m0 = &in->m[0];
            char first[32];
            snprintf(first, sizeof first, "%s%s", m0->evidence ? "evidence:" : "",
                     m0->kind == CC_ALERT_ANOMALY ? "anomaly"
                                                  : cc_dq_reason_name((enum CcDqReason)m0->reason));
            int best = -1;
            for (size_t q = 0; q < in->n_m; q++) {
                int e = explain(&in->m[q], ev, by_cell, a.post);
                if (e >= 0 && (best < 0 || ev[e].kind < ev[best].kind))
                    best = e;
            }
            if (best >= 0) {
                by_kind[ev[best].kind]++;
            } else {
                false_inc++;
                false_by_first[m0->evidence][m0->kind == CC_ALERT_ANOMALY
                                                 ? 0
                                                 : 1 + (m0->reason < 7 ? m0->reason : 6)]++;
                false_kpi[m0->kpi >= 0 && m0->kpi < CC_MAX_FEATURES ? m0->kpi : CC_MAX_FEATURES]++;
                false_cells_hist[in->n_cells_max < 7 ? in->n_cells_max : 7]++;
                false_scope[in->scope >= 0 && in->scope < 3 ? in->scope : 0]++;
                false_critical += m0->critical;
                false_evidence += m0->evidence;
                int d = N_DUR;
                if (in->resolve >= 0)
                    for (d = 0; d < N_DUR - 1 && in->resolve - in->open > dur_upper[d]; d++)
                        ;
                false_dur[d]++;
            }
            if (io)
                fprintf(
                    io, "%s,%lld,%lld,%d,%zu,%s,%s,%s,%s,%d,%d,%s\n", in->id,
                    (long long)(in->open - p0),
                    in->resolve >= 0 ? (long long)(in->resolve - p0) : -1LL, in->n_cells_max,
                    in->n_m - (size_t)n_evidence, best >= 0 ? kind_names[ev[best].kind] : "none",
                    ccd_inc_scope_name(in->scope), first, m0->kpi >= 0 ? hp->features[m0->kpi] : "",
                    m0->critical, n_evidence, opened_names[in->opened_by]);
        }
        if (io)
            fclose(io);
        double scored_days = (double)(p_end - warm) * (double)S / 86400.0;
        double false_rate = false_inc / ((double)n_cells / 1000.0) / scored_days;

        /* the JSON line */
        printf("{\"cells\":%d,\"sites\":%d,\"seed\":%llu,\"days\":%g,\"warmup_days\":%g,"
               "\"post_steps\":%d,\"step_s\":%lld,\"events\":%d,\"engine_s\":%.1f,"
               "\"held_rows\":%lld,\"restarts\":%lld,\"transitions\":%zu,"
               "\"grouping_ns_per_transition\":%.0f,",
               n_cells, cc_synth_n_sites(g), (unsigned long long)a.ss.seed, a.days, a.warmup_days,
               a.post, (long long)S, n_ev, engine_s, (long long)held, (long long)restarts, n_tr,
               ns_per_trans);
        printf("\"kinds\":{");
        for (int k = 0; k < NK; k++) {
            const KindScore *s = &ks[k];
            printf("%s\"%s\":{\"n\":%d,\"detected\":%d,\"within2\":%d,\"split\":%d,"
                   "\"site_scope\":%d,\"joined_open\":%d,\"mean_delay\":%.2f,"
                   "\"missed\":%d,\"missed_in_cooldown\":%d,\"late\":%d,\"late_in_cooldown\":%d}",
                   k ? "," : "", kind_names[k], s->n, s->det, s->det2, s->split, s->site_scope,
                   s->joined, s->det ? s->delay_sum / s->det : 0.0, missed_n[k][0],
                   missed_cool[k][0], missed_n[k][1], missed_cool[k][1]);
        }
        KindScore site = {0}, cell = {0};
        for (int k = K_POWER; k <= K_TRANSPORT; k++) {
            site.n += ks[k].n;
            site.det2 += ks[k].det2;
            site.split += ks[k].split;
            site.det += ks[k].det;
        }
        for (int k = K_CELL_OUTAGE; k <= K_DEGRADATION; k++) {
            cell.n += ks[k].n;
            cell.det += ks[k].det;
            cell.det2 += ks[k].det2;
        }
        printf("},\"site_outage_recall_within2\":%.4f,\"site_outage_recall\":%.4f,"
               "\"site_outage_split\":%.4f,\"site_all_recall_within2\":%.4f,"
               "\"cell_event_recall\":%.4f,\"cell_event_recall_within2\":%.4f,"
               "\"cell_event_recall_alerts\":%.4f,\"cell_events_masked\":%d,",
               site.n ? (double)site.det2 / site.n : 0, site.n ? (double)site.det / site.n : 0,
               site.n ? (double)site.split / site.n : 0,
               site.n + ks[K_SHIFT].n
                   ? (double)(site.det2 + ks[K_SHIFT].det2) / (site.n + ks[K_SHIFT].n)
                   : 0,
               cell.n ? (double)cell.det / cell.n : 0, cell.n ? (double)cell.det2 / cell.n : 0,
               cell.n ? (double)cell_alerted / cell.n : 0, masked_cell_events);
        printf("\"incidents\":%d,\"member_alerts\":%lld,\"alerts_per_incident\":%.3f,"
               "\"false_incidents\":%d,\"false_per_1000_cells_day\":%.3f,\"scored_days\":%.2f,"
               "\"explained_by\":{",
               scored_inc, member_alerts, scored_inc ? (double)member_alerts / scored_inc : 0,
               false_inc, false_rate, scored_days);
        for (int k = 0; k < NK; k++)
            printf("%s\"%s\":%d", k ? "," : "", kind_names[k], by_kind[k]);
        /* the first member: an alert's kind or DQ reason; "evidence:" an evidence member's class */
        printf("},\"false_first_alert\":{\"anomaly\":%lld", false_by_first[0][0]);
        for (int e = 0; e < 2; e++)
            for (int k = e ? -1 : 0; k < 7; k++)
                if (false_by_first[e][1 + k])
                    printf(",\"%s%s\":%lld", e ? "evidence:" : "",
                           k < 0 ? "anomaly" : cc_dq_reason_name((enum CcDqReason)k),
                           false_by_first[e][1 + k]);
        printf("},\"false_first_kpi\":{");
        for (int f = 0; f <= hp->n_features; f++)
            printf("%s\"%s\":%lld", f ? "," : "", f < hp->n_features ? hp->features[f] : "none",
                   false_kpi[f < hp->n_features ? f : CC_MAX_FEATURES]);
        printf("},\"false_by_cells\":[");
        for (int k = 1; k < 8; k++)
            printf("%s%d", k > 1 ? "," : "", false_cells_hist[k]);
        printf("],\"false_scope\":{");
        for (int k = 0; k < 3; k++)
            printf("%s\"%s\":%d", k ? "," : "", ccd_inc_scope_name(k), false_scope[k]);
        printf("},\"false_first_critical\":%d,\"false_first_evidence\":%d,"
               "\"false_duration_steps\":{",
               false_critical, false_evidence);
        for (int k = 0; k < N_DUR; k++)
            printf("%s\"%s\":%d", k ? "," : "", dur_names[k], false_dur[k]);
        printf(",\"open_at_end\":%d},\"evidence_members\":%lld,\"evidence_reports_fed\":%zu,"
               "\"grouping\":{\"evidence_reports\":%llu,\"evidence_opened\":%llu,"
               "\"evidence_members\":%llu,\"alerts_grouped\":%llu,\"alerts_below_paging\":%llu,"
               "\"alerts_persisted\":%llu,\"profile_held\":%llu,\"profile_persisted\":%llu,"
               "\"held_at_end\":%zu,\"oom\":%llu,"
               "\"hold_rejoined\":%llu,\"hold_expired\":%llu},"
               "\"incident_settings\":{\"group_by\":\"%s\",\"evidence_cells\":%d,"
               "\"evidence_share\":%g,\"evidence_frac\":%g,\"cell_persist_steps\":%d,"
               "\"cell_persist_frac\":%g,\"resolve_hold_steps\":%d,"
               "\"profile_persist_steps\":%d,\"evidence_missing_steps\":%d,"
               "\"evidence_forecast\":%d,\"site_same_kpi\":%d,\"stuck_persist_steps\":%d,\"site_"
               "forecast\":%d,\"cell_persist_own_kpi\":%d},"
               "\"evidence_refused\":%llu,\"combo\":%d}\n",
               false_dur[N_DUR], evidence_members, n_evid,
               (unsigned long long)r.st.evidence_reports, (unsigned long long)r.st.evidence_opened,
               (unsigned long long)r.st.evidence_members, (unsigned long long)r.st.alerts_grouped,
               (unsigned long long)r.st.alerts_below_paging,
               (unsigned long long)r.st.alerts_persisted, (unsigned long long)r.st.profile_held,
               (unsigned long long)r.st.profile_persisted, r.st.held, (unsigned long long)r.st.oom,
               (unsigned long long)r.st.hold_rejoined, (unsigned long long)r.st.hold_expired,
               is.group_by == CCD_INC_BY_REGION ? "region" : "site", is.evidence_cells,
               is.evidence_share, is.evidence_frac, is.cell_persist_steps, is.cell_persist_frac,
               is.resolve_hold_steps, is.profile_persist_steps, is.evidence_missing_steps,
               is.evidence_forecast, is.site_same_kpi, is.stuck_persist_steps, is.site_forecast,
               is.cell_persist_own_kpi, (unsigned long long)r.st.evidence_refused, ci);
        fflush(stdout);
        for (size_t i = 0; i < r.n_inc; i++) {
            free(r.inc[i].id);
            free(r.inc[i].m);
        }
        free(r.inc);
        ccd_strhash_free(&r.by_id);
        ccd_strhash_free(&r.alert_ix);
    }
    return 0;
}
