/*
 * site_evidence_bench.c — how much sooner the evidence rule (daemon/incidents.h, "cells
 * together as evidence"; docs/design/site-evidence.md) opens site incidents, and what it
 * costs in false incidents, on a synthetic fleet with sites (lib/cc_synth). The fleet runs
 * through the real engine (the default model) and detector (daemon alert defaults) as
 * cellcastd runs it — outage rows held from the model, gaps imputed, the missing-data check
 * ticked twice a step on the data's clock — and every alert transition goes to three
 * groupings of the same alerts: the evidence rule off; on (today's defaults); on with the
 * paging rule (incidents.cell_persist_steps = --persist, cell_persist_frac = --persist-frac;
 * docs/design/incident-paging.md), each from cellcastd's configuration defaults otherwise.
 * The evidence reports (cc_anomaly_cell_evidence, the silence's share of missing_after_s)
 * are made and handed over as cellcastd makes them (fleet_common.h, which fleet_eval shares):
 * those at or past --frac, to the second and third.
 *
 * Events: the generator's site-wide power outages and transport losses, and (--degrade-rate)
 * partial degradations this bench adds: every traffic KPI (prb, thr, users) of every cell of
 * a site times 1 − d, d in [dmin, dmax], for 8–32 steps (a slower event than an outage).
 * With --cell-event-rate, cell events: one cell's traffic KPIs times 0.3 or 2.5 for 4–24
 * steps (found when an incident with the cell as a member is open by the event's end + 2).
 * The generator's cell-level bursts and outages are off, so an incident that overlaps no
 * site event (from its opening to its resolution, with resolve_m + 2 steps of slack after the
 * event) is false.
 *
 * Delay: the time an incident of the site is first open during the event minus the arrival
 * of the event's first step (data of step t arrives at (t + 1)·S), in steps; an event whose
 * site has no incident open by its end + 2 steps is missed; "within 2 steps" allows the
 * tick (1 s) after the second step. Prints one JSON object, per arm with the false incidents
 * broken down (first alert's reason, severity and KPI, steps open, members).
 *
 *   usage: site_evidence_bench MODEL [--cells N] [--days D] [--seed X] [--site-outage-rate R]
 *          [--degrade-rate R] [--degrade-min D] [--degrade-max D] [--warm-days W]
 *          [--frac F] [--cells-needed M] [--persist N] [--persist-frac F]
 *          [--cell-event-rate R]
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_anomaly.h"
#include "cc_engine.h"
#include "cc_model.h"
#include "cc_synth.h"
#include "fleet_common.h"
#include "incidents.h"

#define MAX_GAP 96
#define TRAFFIC_KPIS 5 /* prb_dl, prb_ul, thr_dl_mbps, thr_ul_mbps, active_users */

typedef struct Cell {
    CcCell *cell;
    CcAnomalyCell *ac;
    int site;
    int64_t last; /* last stepped step, -1 */
    float fed[CC_MAX_FEATURES], prev[CC_MAX_FEATURES];
    char id[32];
} Cell;

#define N_ARMS 3 /* evidence off; evidence on (today's defaults); evidence on + paging rule */

typedef struct Event {
    int site, type;        /* 1 power, 2 transport, 3 degradation, 4 cell event */
    int64_t start, end;    /* steps, end exclusive */
    double opened[N_ARMS]; /* time an incident of the site (of the cell) was first open, -1 */
    int cell;              /* type 4: the cell, else -1 */
} Event;

typedef struct Inc { /* an incident as the bench follows it */
    char id[96];
    int site;                /* -1: not a site's */
    int64_t open_t, close_t; /* seconds */
    int evidence_opened;
    int scope_site;
    char reason[16]; /* of its first member */
    char kpi[32];    /* of its first member, "" cell-level */
    int critical;    /* its first member critical */
    int crit_any;    /* a member critical */
    size_t n_cells_seen, n_m;
} Inc;

typedef struct Arm {
    CcdIncidents *g;
    Inc *v;
    size_t n, cap;
    int64_t now;    /* the time being processed (s) */
    int *site_open; /* site -> incidents of it open now */
    int64_t *site_open_since;
    int *cell_open; /* cell -> incidents with it as a member open now */
    int64_t *cell_open_since;
    int n_cells;
    int persist; /* incidents.cell_persist_steps */
} Arm;

typedef struct Bench {
    CcSynth *syn;
    const CcAnomaly *an;
    const CcHparams *hp;
    const char *kpi_names[CC_MAX_FEATURES + 1]; /* hp's features, NULL-ended */
    Cell *cells;
    int n_cells, n_sites;
    int *site_cells;
    int64_t S;
    double evidence_frac; /* incidents.evidence_frac of the arms with the rule (--frac) */
    Arm arm[N_ARMS];
    double cell_rate; /* cell events per cell per week */
    int64_t *cell_ev_to;
    double *cell_factor;
    Event *ev;
    size_t n_ev, cap_ev;
    double *degrade;     /* (sites) the degradation factor now, 1: none */
    int64_t *degrade_to; /* (sites) end of the site's degradation */
    double deg_rate, deg_min, deg_max;
    uint64_t rng;
    long alerts;
} Bench;

static double urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* The labels of cell c: its site's name and its region (25 sites a region). */
static void cell_labels(const Cell *c, char site[32], char region[32])
{
    snprintf(site, 32, "site%04d", c->site);
    snprintf(region, 32, "region%03d", c->site / 25);
}

static int site_of_group(const char *group)
{
    return !strncmp(group, "site", 4) ? atoi(group + 4) : -1;
}

static int cell_index(const char *id, int n)
{
    char buf[32];
    for (int i = 0; i < n; i++) {
        cc_synth_cell_id(i, buf, sizeof buf);
        if (!strcmp(buf, id))
            return i;
    }
    return -1;
}

static void on_incident(void *cookie, const CcdIncident *inc)
{
    Arm *a = cookie;
    size_t i;
    for (i = 0; i < a->n; i++)
        if (!strcmp(a->v[i].id, inc->id))
            break;
    if (i == a->n) {
        if (a->n == a->cap) {
            a->cap = a->cap ? 2 * a->cap : 256;
            a->v = realloc(a->v, a->cap * sizeof *a->v);
            if (!a->v)
                abort();
        }
        Inc *x = &a->v[a->n++];
        memset(x, 0, sizeof *x);
        snprintf(x->id, sizeof x->id, "%s", inc->id);
        x->site = inc->group_scope == CCD_INC_SITE ? site_of_group(inc->group) : -1;
        x->open_t = a->now;
        x->close_t = -1;
        x->evidence_opened = inc->n_m > 0 && strstr(inc->m[0].alert_id, ":evidence:") != NULL;
        snprintf(x->reason, sizeof x->reason, "%s", inc->n_m ? inc->m[0].reason : "?");
        snprintf(x->kpi, sizeof x->kpi, "%s", inc->n_m && inc->m[0].kpi ? inc->m[0].kpi : "");
        x->critical = inc->n_m && inc->m[0].critical;
        if (x->site >= 0 && a->site_open[x->site]++ == 0)
            a->site_open_since[x->site] = a->now;
    }
    Inc *x = &a->v[i];
    x->scope_site |= inc->scope != CCD_INC_CELL;
    x->crit_any |= inc->critical;
    x->n_m = inc->n_m;
    for (; x->n_cells_seen < inc->n_cells; x->n_cells_seen++) {
        int c = cell_index(inc->cells[x->n_cells_seen], a->n_cells);
        if (c >= 0 && a->cell_open[c]++ == 0)
            a->cell_open_since[c] = a->now;
    }
    if (!inc->firing && x->close_t < 0) {
        x->close_t = a->now;
        if (x->site >= 0)
            a->site_open[x->site]--;
        for (size_t k = 0; k < inc->n_cells; k++) {
            int c = cell_index(inc->cells[k], a->n_cells);
            if (c >= 0)
                a->cell_open[c]--;
        }
    }
}

typedef struct SinkCtx {
    Bench *b;
    Cell *c;
} SinkCtx;

static void on_alert(void *cookie, const CcAlertEvent *ev)
{
    SinkCtx *x = cookie;
    Bench *b = x->b;
    char site[32], region[32];
    cell_labels(x->c, site, region);
    int kpi = ev->kpi >= 0                                 ? ev->kpi
              : ev->kind == CC_ALERT_ANOMALY && ev->n_attr ? ev->attr[0].kpi
                                                           : -1;
    CcdIncAlert a = {
        .id = ev->id,
        .cell = ev->cell_id,
        .site = site,
        .region = region,
        .reason = ev->kind == CC_ALERT_ANOMALY ? "anomaly" : cc_dq_reason_name(ev->reason),
        .kpi = kpi >= 0 ? b->hp->features[kpi] : NULL,
        .firing = ev->state == CC_ALERT_FIRING,
        .critical = ev->severity == CC_SEV_CRITICAL,
        .step = ev->step,
        .ts = ev->ts,
        .start_ts = ev->start_ts,
        .group_cells = b->site_cells[x->c->site],
        .profile_only = ev->kind == CC_ALERT_ANOMALY && ev->trace.fire_rules == CC_RULE_PROFILE,
    };
    b->alerts += ev->state == CC_ALERT_FIRING;
    for (int i = 0; i < N_ARMS; i++)
        ccd_incidents_add(b->arm[i].g, &a);
}

/* Cell c's n evidence reports to the arms with the evidence rule (all but the first). */
static void evidence(Bench *b, const Cell *c, const FleetEvidence *e, int n)
{
    char site[32], region[32];
    cell_labels(c, site, region);
    for (int k = 0; k < n; k++)
        for (int i = 1; i < N_ARMS; i++)
            if (fleet_incidents_evidence(b->arm[i].g, &e[k], c->id, site, region,
                                         b->site_cells[c->site], b->kpi_names))
                abort();
}

/* A site or cell event from step start to end (exclusive), its detection not yet seen. */
static void add_event(Bench *b, int site, int type, int64_t start, int64_t end, int cell)
{
    if (b->n_ev == b->cap_ev) {
        b->cap_ev = b->cap_ev ? 2 * b->cap_ev : 256;
        b->ev = realloc(b->ev, b->cap_ev * sizeof *b->ev);
        if (!b->ev)
            abort();
    }
    b->ev[b->n_ev++] = (Event){site, type, start, end, {-1, -1, -1}, cell};
}

static void emit_all(Bench *b, int64_t now)
{
    for (int i = 0; i < N_ARMS; i++) {
        b->arm[i].now = now;
        ccd_incidents_emit(b->arm[i].g, on_incident, &b->arm[i]);
    }
}

/* The site's degradation at step t (this bench's event): starts at rate deg_rate per site
 * per week, not during a generator's site event. */
static double degradation(Bench *b, int site, int64_t t)
{
    if (t < b->degrade_to[site])
        return b->degrade[site];
    b->degrade[site] = 1;
    double p = b->deg_rate * (double)b->S / 604800.0;
    if (p > 0 && urand(&b->rng) < p && !cc_synth_site_event(b->syn, site, t)) {
        int len = 8 + (int)(urand(&b->rng) * 25);
        b->degrade[site] = 1 - (b->deg_min + urand(&b->rng) * (b->deg_max - b->deg_min));
        b->degrade_to[site] = t + len;
        add_event(b, site, 3, t, t + len, -1);
        return b->degrade[site];
    }
    return 1;
}

/* Cell c's own event at step t (this bench's): its traffic KPIs times 0.3 or 2.5 for 4–24
 * steps, at rate cell_rate per cell per week, not during an event of its site. */
static double cell_event(Bench *b, int c, int site, int64_t t)
{
    if (t < b->cell_ev_to[c])
        return b->cell_factor[c];
    double p = b->cell_rate * (double)b->S / 604800.0;
    if (p <= 0 || urand(&b->rng) >= p || cc_synth_site_event(b->syn, site, t) ||
        t < b->degrade_to[site])
        return 1;
    int len = 4 + (int)(urand(&b->rng) * 21);
    b->cell_factor[c] = urand(&b->rng) < 0.5 ? 0.3 : 2.5;
    b->cell_ev_to[c] = t + len;
    add_event(b, site, 4, t, t + len, c);
    return b->cell_factor[c];
}

/* The missing-data check at now (unix seconds): each cell's alerts, then its evidence. */
static void tick(Bench *b, int64_t now)
{
    for (int i = 0; i < b->n_cells; i++) {
        Cell *c = &b->cells[i];
        SinkCtx x = {b, c};
        CcAlertSink sink = {&x, on_alert};
        cc_anomaly_tick(b->an, c->ac, now, &sink);
        FleetEvidence e;
        int n = fleet_missing_evidence(b->an, c->ac, c->last, now, b->S, b->evidence_frac, &e);
        evidence(b, c, &e, n);
    }
}

/* One observation of cell c at step t (values: what was observed; mask NULL: all) through
 * the outage hold, the engine and the detector, then its evidence. */
static int step_cell(Bench *b, CcEngine *e, Cell *c, int64_t t, const float *v, const uint8_t *mask)
{
    const int F = b->hp->n_features;
    int first = c->last < 0;
    if (!cc_anomaly_outage_hold(b->an, c->ac, v, mask, first ? 0 : CC_ANOMALY_OUTAGE_HOLD_STEPS))
        for (int f = 0; f < F; f++) /* NaN (unreported) carried as the last value */
            c->fed[f] = isfinite(v[f]) ? v[f] : (first ? 0 : c->fed[f]);
    CcStepInput in = {c->cell, t, c->fed};
    int st;
    if (cc_engine_step(e, &in, 1, &st) || st)
        return -1;
    SinkCtx x = {b, c};
    CcAlertSink sink = {&x, on_alert};
    cc_anomaly_observe(b->an, c->ac, t, v, mask, &sink);
    CcForecast fc;
    cc_cell_forecast(c->cell, &fc);
    cc_anomaly_set_forecast(b->an, c->ac, &fc);
    c->last = t;
    if (mask) /* an imputed step: no evidence */
        return 0;
    FleetEvidence ev[CC_MAX_FEATURES + 1];
    int n = fleet_step_evidence(b->an, c->ac, F, b->S, b->evidence_frac, ev);
    evidence(b, c, ev, n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: site_evidence_bench MODEL [options]\n");
        return 2;
    }
    CcSynthSettings ss;
    cc_synth_default_settings(&ss);
    ss.n_cells = 300;
    ss.sites = 1;
    ss.burst_rate = 0;
    ss.outage_rate = 0;
    ss.site_outage_rate = 1.0;
    double days = 14, warm_days = 4, frac = 0.5;
    int need = 2, persist = 2;
    double persist_frac = 0.5;
    Bench b = {0};
    b.deg_min = 0.3;
    b.deg_max = 0.6;
    b.rng = 0x9E3779B97F4A7C15ull;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--cells"))
            ss.n_cells = atoi(v);
        else if (!strcmp(k, "--days"))
            days = atof(v);
        else if (!strcmp(k, "--seed"))
            ss.seed = (uint64_t)atoll(v), b.rng ^= (uint64_t)atoll(v) * 0x2545F4914F6CDD1Dull;
        else if (!strcmp(k, "--site-outage-rate"))
            ss.site_outage_rate = atof(v);
        else if (!strcmp(k, "--degrade-rate"))
            b.deg_rate = atof(v);
        else if (!strcmp(k, "--degrade-min"))
            b.deg_min = atof(v);
        else if (!strcmp(k, "--degrade-max"))
            b.deg_max = atof(v);
        else if (!strcmp(k, "--warm-days"))
            warm_days = atof(v);
        else if (!strcmp(k, "--frac"))
            frac = atof(v);
        else if (!strcmp(k, "--cells-needed"))
            need = atoi(v);
        else if (!strcmp(k, "--persist"))
            persist = atoi(v);
        else if (!strcmp(k, "--persist-frac"))
            persist_frac = atof(v);
        else if (!strcmp(k, "--cell-event-rate"))
            b.cell_rate = atof(v);
        else {
            fprintf(stderr, "site_evidence_bench: unknown option %s\n", k);
            return 2;
        }
    }
    char err[512];
    CcModel *m = NULL;
    CcEngine *e = NULL;
    CcAnomaly *an = NULL;
    if (cc_model_open_file(&m, argv[1], err, sizeof err)) {
        fprintf(stderr, "site_evidence_bench: %s\n", err);
        return 1;
    }
    b.hp = &m->hp;
    for (int f = 0; f < m->hp.n_features; f++)
        b.kpi_names[f] = m->hp.features[f];
    ss.step_seconds = m->hp.step_seconds;
    if (cc_synth_open(&b.syn, &ss, err, sizeof err)) {
        fprintf(stderr, "site_evidence_bench: %s\n", err);
        return 1;
    }
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    if (cc_engine_open(&e, m, &es, err, sizeof err)) {
        fprintf(stderr, "site_evidence_bench: %s\n", err);
        return 1;
    }
    CcAnomalySettings as;
    cc_anomaly_default_settings(&as);
    as.n_features = m->hp.n_features;
    as.step_seconds = m->hp.step_seconds;
    if (cc_anomaly_open(&an, &as, err, sizeof err)) {
        fprintf(stderr, "site_evidence_bench: %s\n", err);
        return 1;
    }
    b.an = an;
    b.S = m->hp.step_seconds;
    b.n_cells = ss.n_cells;
    b.n_sites = cc_synth_n_sites(b.syn);
    b.cells = calloc((size_t)b.n_cells, sizeof *b.cells);
    b.site_cells = calloc((size_t)b.n_sites, sizeof *b.site_cells);
    b.degrade = calloc((size_t)b.n_sites, sizeof *b.degrade);
    b.degrade_to = calloc((size_t)b.n_sites, sizeof *b.degrade_to);
    b.cell_ev_to = calloc((size_t)b.n_cells, sizeof *b.cell_ev_to);
    b.cell_factor = calloc((size_t)b.n_cells, sizeof *b.cell_factor);
    b.evidence_frac = frac;
    for (int i = 0; i < N_ARMS; i++) {
        CcdIncidentSettings is;
        if (fleet_incident_settings(&is))
            return 1;
        is.keep = 10;
        is.evidence_cells = i ? need : 0;
        is.evidence_frac = frac;
        is.cell_persist_steps = i == 2 ? persist : 0;
        is.cell_persist_frac = persist_frac;
        if (ccd_incidents_open(&b.arm[i].g, &is))
            return 1;
        b.arm[i].persist = is.cell_persist_steps;
        b.arm[i].n_cells = b.n_cells;
        b.arm[i].site_open = calloc((size_t)b.n_sites, sizeof(int));
        b.arm[i].site_open_since = calloc((size_t)b.n_sites, sizeof(int64_t));
        b.arm[i].cell_open = calloc((size_t)b.n_cells, sizeof(int));
        b.arm[i].cell_open_since = calloc((size_t)b.n_cells, sizeof(int64_t));
    }
    for (int i = 0; i < b.n_cells; i++) {
        Cell *c = &b.cells[i];
        cc_synth_cell_id(i, c->id, sizeof c->id);
        c->site = cc_synth_cell_site(b.syn, i);
        c->last = -1;
        b.site_cells[c->site]++;
        if (cc_cell_open(&c->cell, e) || cc_anomaly_cell_open(&c->ac, an, c->id))
            return 1;
    }
    const int F = m->hp.n_features;
    const int64_t t0 = cc_synth_first_step(b.syn),
                  n_steps = (int64_t)llround(days * 86400.0 / (double)b.S),
                  warm = t0 + (int64_t)llround(warm_days * 86400.0 / (double)b.S);
    int *site_ev = calloc((size_t)b.n_sites, sizeof(int)); /* the generator's event going on */
    float v[CC_MAX_FEATURES];
    uint8_t imputed[CC_MAX_FEATURES] = {0};
    for (int64_t t = t0; t < t0 + n_steps; t++) {
        for (int s = 0; s < b.n_sites; s++) { /* the generator's site events, as events */
            int type = cc_synth_site_event(b.syn, s, t);
            if (type && !site_ev[s]) {
                add_event(&b, s, type, t, t + 1, -1);
            } else if (type && site_ev[s]) {
                for (size_t k = b.n_ev; k-- > 0;)
                    if (b.ev[k].site == s && b.ev[k].type == type) {
                        b.ev[k].end = t + 1;
                        break;
                    }
            }
            site_ev[s] = type;
            b.degrade[s] = degradation(&b, s, t);
        }
        for (int i = 0; i < b.n_cells; i++) {
            Cell *c = &b.cells[i];
            if (!cc_synth_values(b.syn, i, t, v))
                continue; /* no row: a gap (missing found by the ticks) */
            double cf = cell_event(&b, i, c->site, t);
            for (int f = 0; f < TRAFFIC_KPIS && f < F; f++)
                v[f] *= (float)(b.degrade[c->site] * cf);
            if (c->last >= 0 && t - c->last - 1 > MAX_GAP) {
                cc_cell_reset(c->cell); /* ingest.max_gap: the sequence restarts */
            } else if (c->last >= 0) {
                for (int64_t g = c->last + 1; g < t; g++) /* imputed: stepped, not observed */
                    if (step_cell(&b, e, c, g, c->fed, imputed))
                        return 1;
            }
            if (step_cell(&b, e, c, t, v, NULL))
                return 1;
        }
        int64_t arrive = (t + 1) * b.S; /* step t's data arrives at its end */
        for (int i = 0; i < N_ARMS; i++)
            ccd_incidents_evidence_expire(b.arm[i].g, t);
        emit_all(&b, arrive);
        tick(&b, arrive + 1);
        emit_all(&b, arrive + 1);
        tick(&b, arrive + b.S / 2);
        emit_all(&b, arrive + b.S / 2);
        /* the detection of events going on */
        for (size_t k = 0; k < b.n_ev; k++) {
            Event *x = &b.ev[k];
            if (t < x->start || t > x->end + 2)
                continue;
            for (int i = 0; i < N_ARMS; i++) {
                int open = x->cell >= 0 ? b.arm[i].cell_open[x->cell] : b.arm[i].site_open[x->site];
                int64_t since = x->cell >= 0 ? b.arm[i].cell_open_since[x->cell]
                                             : b.arm[i].site_open_since[x->site];
                if (x->opened[i] < 0 && open)
                    x->opened[i] =
                        (double)(since > (x->start + 1) * b.S ? since : (x->start + 1) * b.S);
            }
        }
    }
    /* the scores */
    const int64_t end_t = (t0 + n_steps) * b.S;
    const double cell_days = (double)b.n_cells * (double)(t0 + n_steps - warm) * b.S / 86400.0;
    printf("{\"cells\": %d, \"sites\": %d, \"days\": %g, \"warm_days\": %g, \"seed\": %llu, "
           "\"site_outage_rate\": %g, \"degrade_rate\": %g, \"degrade\": [%g, %g], \"frac\": %g, "
           "\"cells_needed\": %d, \"cell_event_rate\": %g, \"alerts\": %ld,\n \"arms\": [",
           b.n_cells, b.n_sites, days, warm_days, (unsigned long long)ss.seed, ss.site_outage_rate,
           b.deg_rate, b.deg_min, b.deg_max, frac, need, b.cell_rate, b.alerts);
    static const char *const tname[] = {"", "power", "transport", "degradation", "cell"};
    for (int i = 0; i < N_ARMS; i++) {
        Arm *a = &b.arm[i];
        printf("%s\n  {\"rule\": %s, \"cell_persist_steps\": %d, \"events\": {", i ? "," : "",
               i ? "true" : "false", a->persist);
        for (int type = 1; type <= 4; type++) {
            int n = 0, det = 0;
            double dsum = 0, d[4096];
            for (size_t k = 0; k < b.n_ev; k++) {
                Event *x = &b.ev[k];
                if (x->type != type || x->start < warm || x->end + 2 >= t0 + n_steps)
                    continue;
                n++;
                if (x->opened[i] >= 0) {
                    double dl = (x->opened[i] - (double)(x->start + 1) * b.S) / (double)b.S;
                    if (det < 4096)
                        d[det] = dl;
                    det++;
                    dsum += dl;
                }
            }
            /* the median delay */
            for (int p = 1; p < det && p < 4096; p++)
                for (int q = p; q > 0 && d[q - 1] > d[q]; q--) {
                    double tmp = d[q];
                    d[q] = d[q - 1];
                    d[q - 1] = tmp;
                }
            int within2 = 0;
            for (int p = 0; p < det && p < 4096; p++)
                within2 += d[p] <= 2 + 2.0 / (double)b.S; /* a tick late is in time */
            char mean[32] = "null", median[32] = "null";  /* JSON has no NaN */
            if (det) {
                snprintf(mean, sizeof mean, "%.3f", dsum / det);
                snprintf(median, sizeof median, "%.2f", d[det / 2 < 4096 ? det / 2 : 0]);
            }
            printf("%s\"%s\": {\"n\": %d, \"detected\": %d, \"within_2_steps\": %d, "
                   "\"mean_delay_steps\": %s, \"median_delay_steps\": %s}",
                   type > 1 ? ", " : "", tname[type], n, det, within2, mean, median);
        }
        long total = 0, fals = 0, fals_site = 0, fals_ev = 0, ev_opened = 0, by_reason[6] = {0};
        /* the false ones broken down: first member's severity, its KPI, the steps open */
        long crit_first = 0, crit_any = 0, one_member = 0, dur[6] = {0},
             by_kpi[CC_MAX_FEATURES + 1] = {0};
        static const char *const dname[] = {"<=1", "2-3", "4-7", "8-15", "16-47", ">=48"};
        static const char *const rname[] = {"anomaly", "all_zero", "missing",
                                            "stuck",   "bounds",   "other"};
        for (size_t j = 0; j < a->n; j++) {
            Inc *x = &a->v[j];
            if (x->open_t < warm * b.S)
                continue;
            total++;
            ev_opened += x->evidence_opened;
            int64_t close = x->close_t < 0 ? end_t : x->close_t;
            int overlaps = 0;
            for (size_t k = 0; k < b.n_ev && !overlaps; k++) {
                Event *ev = &b.ev[k];
                if (ev->site != x->site)
                    continue;
                int64_t from = ev->start * b.S,
                        to = (ev->end + as.resolve_m + 2) * b.S + b.S; /* arrival of the last */
                overlaps = x->open_t <= to && close >= from;
            }
            if (!overlaps) {
                int r = 0;
                while (r < 5 && strcmp(rname[r], x->reason))
                    r++;
                by_reason[r]++;
                fals++;
                crit_first += x->critical;
                crit_any += x->crit_any;
                one_member += x->n_m == 1;
                double steps = (double)(close - x->open_t) / (double)b.S;
                dur[steps <= 1   ? 0
                    : steps < 4  ? 1
                    : steps < 8  ? 2
                    : steps < 16 ? 3
                    : steps < 48 ? 4
                                 : 5]++;
                int kf = F;
                for (int f = 0; f < F; f++)
                    if (!strcmp(x->kpi, b.hp->features[f]))
                        kf = f;
                by_kpi[kf]++;
                fals_site += x->scope_site;
                fals_ev += x->evidence_opened;
            }
        }
        printf("},\n   \"incidents\": %ld, \"evidence_opened\": %ld, \"false\": %ld, "
               "\"false_site_scope\": %ld, \"false_evidence_opened\": %ld, "
               "\"false_per_1000_cell_days\": %.3f, \"false_by_first_reason\": {",
               total, ev_opened, fals, fals_site, fals_ev, 1000.0 * fals / cell_days);
        for (int r = 0; r < 6; r++)
            printf("%s\"%s\": %ld", r ? ", " : "", rname[r], by_reason[r]);
        printf("},\n   \"false_breakdown\": {\"first_critical\": %ld, \"any_critical\": %ld, "
               "\"one_member\": %ld, \"steps_open\": {",
               crit_first, crit_any, one_member);
        for (int k = 0; k < 6; k++)
            printf("%s\"%s\": %ld", k ? ", " : "", dname[k], dur[k]);
        printf("}, \"first_kpi\": {");
        for (int f = 0; f <= F; f++)
            printf("%s\"%s\": %ld", f ? ", " : "", f < F ? b.hp->features[f] : "(cell)", by_kpi[f]);
        printf("}}}");
    }
    printf("\n]}\n");
    return 0;
}
