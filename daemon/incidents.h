/*
 * incidents.h — alerts grouped into what a NOC pages on. The alerts of the cells of one
 * site (incidents.group_by = site; or of one region: region) that overlap in time are one
 * incident: it opens with the first alert of a cell of the group while none of the group
 * is open, takes in every alert of the group's cells that fires while it is open, and
 * resolves when its last member alert resolves (after the resolve hold, below). A cell
 * without the label (no topology, or not listed) is a group of its own. Scope: `cell`
 * while its alerts come from one cell, `site` (`region`) once two or more cells of the
 * group are members. Severity: critical once a member fired critical. The id is
 * `<site|region|cell>:<group>:<step of the first alert>`, so it is stable while the
 * incident grows from one cell to the site.
 *
 * Transitions are batched: the alerts of one flush (one cron tick or one HTTP read) are
 * added first, then each incident they changed is emitted once (firing: opened or
 * changed; resolved), so that a site whose cells all fire at one step opens one incident
 * with all of them, not one per cell. Cost: O(1) expected per alert (hashes by group and
 * by alert id) and O(changed incidents) per flush.
 *
 * Cells together as evidence (docs/design/site-evidence.md): the host also reports, per
 * cell and step, each evidence class (a KPI and a direction, all_zero, missing) on which the
 * cell went past evidence_frac of its bar (cc_anomaly_cell_evidence; the silence's share of
 * the missing-data bar). When at least need = max(evidence_cells, ceil(evidence_share × the
 * group's cells)) cells of one site (region) are past it on one class at one step, each of
 * them joins the group's incident (opening it) as an evidence member (reason "evidence",
 * id "<cell>:evidence:<class>:<step>"), which resolves once its cell is no longer reported
 * past the share (ccd_incidents_evidence_expire); a lone cell, or cells without the label,
 * still need an alert of their own. evidence_cells 0 turns it off. While no incident of the
 * group is open, a cell counts on a KPI class only by its forecast's own share (forecast_frac,
 * evidence_forecast: not the seasonal profile's sum, which drains for hours after a slow
 * wobble, as for profile_persist_steps below), on the missing class only once its silence was
 * reported at evidence_missing_steps consecutive steps (one late row is 1.5-2 steps of
 * silence, and two cells of a site had one at the same step); all_zero at once. On the
 * synthetic fleet those two opened every false incident of the evidence rule (docs/results.md,
 * "Incidents on a synthetic fleet"). Counted: evidence_refused.
 *
 * Paging rule (docs/design/incident-paging.md): while no incident of its group is open, an
 * alert opens one only on its cell's own strong evidence — severity critical, a cell outage
 * (all_zero, or missing of the whole cell: no KPI), or still firing cell_persist_steps steps
 * after it fired — or when an alert of another cell of the same site (region) is held too
 * on the same KPI (site_same_kpi), neither a profile-only anomaly (site_forecast; two cells:
 * the site incident; otherwise pair_refused), or the evidence rule opens it. Any other alert
 * is held below paging (counted): it stays an alert, and joins the group's incident if one
 * opens while it fires; its resolution while held emits nothing. The persistence is checked
 * as the data reach a step (ccd_incidents_evidence_expire); an anomaly persists by its cell's
 * evidence on the alert's own KPI (ccd_incidents_evidence: past cell_persist_frac of its bar
 * at cell_persist_steps distinct steps, its firing step the first; cell_persist_own_kpi 0:
 * any KPI), another alert by firing that many steps — a stuck one only with another alert of
 * its cell held (several KPIs frozen: an outage), else by firing stuck_persist_steps (one
 * flat KPI is what a quiet KPI does). cell_persist_steps 0: every alert opens an incident.
 * Cost: a held firing scans the held alerts (O(held)) for another cell of its group, a
 * held stuck alert past cell_persist_steps for another alert of its cell, once a step.
 *
 * Profile-only anomalies (profile_persist_steps; docs/results.md, "Incidents on a synthetic
 * fleet"): an anomaly whose only rule over at its firing step was the seasonal profile's
 * CUSUM (the forecast's z, its CUSUM, the window, likelihood and novelty rules under their
 * bars) persists by its cell's evidence without the profile's sum (forecast_frac past
 * cell_persist_frac at cell_persist_steps steps) or by firing profile_persist_steps steps,
 * not by its cell's whole evidence (the profile sum it fired on keeps that past any share
 * for as long as it drains). It still
 * opens at once when it turns critical (its forecast z past the critical bar), with another
 * held cell of its group, by the evidence rule, and it joins an open incident at once. On
 * the synthetic fleet such alerts opened ~80 % of the false incidents, with the forecast's
 * z at firing under 1: a slow wobble of a KPI whose noise follows its load.
 *
 * Resolve hold: an incident whose last member alert resolves at step s stays open, resolving,
 * until the data reach step s + resolve_hold_steps + 1 (ccd_incidents_evidence_expire); an
 * alert of its group (site, region, or the lone cell) that fires meanwhile joins it again, as
 * it would join an open incident (no new incident, no new page; the paging rule does not
 * apply, and a second cell makes its scope the group's), and evidence members likewise. When
 * the hold expires it is emitted as resolved, end = when its last alert resolved (not the
 * hold's end). Its last alert's resolution is emitted as any member's is (firing, its
 * firing_alerts empty): consumers see it firing until the hold's end, the resolution that
 * many steps late. resolve_hold_steps 0: it resolves with its last alert. A
 * transport loss's missing-data alerts resolve when the site's rows return, and the restart's
 * transient or a load burst a few steps later would otherwise open a second incident.
 * Cost: O(incidents in the hold) per data step.
 *
 * The first part (CcdIncidents) is pure logic, no sockets and no daemon; the second hosts
 * it in cellcastd: fed by the alerts' flush (alerts.c) with the topology's labels
 * (topology.h), produced to the Kafka topic incidents.topic (proto/incident.schema.json,
 * key = incident id) and served at GET /v1/incidents. Incidents live in memory: a restart
 * starts with none (the alerts firing then join the incidents their next transitions open).
 * Loop thread only.
 */
#ifndef CCD_INCIDENTS_H
#define CCD_INCIDENTS_H

#include <stddef.h>
#include <stdint.h>

#include "strmap.h"

enum CcdIncScope { CCD_INC_CELL, CCD_INC_SITE, CCD_INC_REGION };
enum CcdIncGroupBy { CCD_INC_BY_SITE, CCD_INC_BY_REGION };

typedef struct CcdIncidentSettings {
    int group_by;               ///< CCD_INC_BY_SITE (default) or CCD_INC_BY_REGION
    int keep;                   ///< resolved incidents kept for GET /v1/incidents (default 1000)
    int evidence_cells;         ///< cells of a group past evidence_frac at one step, on one class,
                                ///< that open its incident (default 2; 0: the rule off)
    double evidence_share;      ///< or this share of the group's cells, if more (default 0)
    double evidence_frac;       ///< the share of its bar a cell must be past (default 0.5)
    int cell_persist_steps;     ///< paging rule: a lone cell's alert that is not critical nor an
                                ///< outage opens an incident once it has fired this many steps
                                ///< (default 2; 0: every alert opens one, the rule off)
    double cell_persist_frac;   ///< an anomaly persists at a step its cell's evidence on a KPI
                                ///< is at or past this share of its bar (default 0.5)
    int resolve_hold_steps;     ///< data steps an incident whose last alert resolved stays open,
                                ///< resolving, for an alert of its group to join it again
                                ///< (default 6; 0: it resolves with its last alert)
    int profile_persist_steps;  ///< paging rule: a lone cell's anomaly fired by the seasonal
                                ///< profile's CUSUM alone (CcdIncAlert.profile_only) persists
                                ///< by its cell's forecast evidence (forecast_frac, not the
                                ///< profile sum it fired on) or by firing this many steps; it
                                ///< joins an open one at once (default 24; 0: as any anomaly)
    int evidence_forecast;      ///< evidence rule: with no incident of the group open, a cell
                                ///< counts on a KPI class only by the forecast's own share
                                ///< (forecast_frac) past evidence_frac (default 1; 0: frac)
    int evidence_missing_steps; ///< evidence rule: with no incident of the group open, a cell
                                ///< counts on the missing class once reported past
                                ///< evidence_frac at this many consecutive steps (default 2;
                                ///< 0 or 1: at once)
    int site_same_kpi;          ///< paging rule: two cells' held alerts open their site's
                                ///< incident at once only on one KPI (default 1; 0: any two)
    int stuck_persist_steps;    ///< paging rule: a lone cell's stuck alert opens an incident
                                ///< once it has fired this many steps (default 0:
                                ///< cell_persist_steps)
    int site_forecast;          ///< paging rule: a held profile-only anomaly (under
                                ///< profile_persist_steps) is no cell of the two cells that
                                ///< open their site's incident at once (default 1; 0: it is)
    int cell_persist_own_kpi;   ///< paging rule: a held anomaly persists by its cell's
                                ///< evidence on the alert's own KPI (default 1; 0: any KPI)
} CcdIncidentSettings;

/** One cell's evidence at one step on one class, past evidence_frac (strings are copied). */
typedef struct CcdIncEvidence {
    const char *cell;
    const char *site, *region; ///< the cell's labels, NULL: none
    const char *cls;           ///< the class: "<kpi>:up", "<kpi>:down", "all_zero", "missing"
    const char *kpi;           ///< the KPI of a KPI class, else NULL
    double frac;               ///< the share of the bar (cc_anomaly_cell_evidence; ≥ 0)
    int64_t step, ts;          ///< the data step it is of, and its unix seconds
    int group_cells;           ///< cells of the cell's site (region), 0: unknown
    double forecast_frac;      ///< a KPI's frac without the seasonal profile's sum (the
                               ///< forecast's z and CUSUM: kpi_forecast), ≥ 0
} CcdIncEvidence;

/** One alert transition as the grouping sees it (strings are copied). */
typedef struct CcdIncAlert {
    const char *id;            ///< the alert's id (firing and resolved share it)
    const char *cell;          ///< its cell
    const char *site, *region; ///< the cell's labels, NULL: none
    const char *reason;        ///< "anomaly", or the DQ reason (stuck, all_zero, bounds, missing)
    const char *kpi;           ///< the alert's KPI, NULL: cell-level
    int firing;                ///< 1 firing, 0 resolved
    int critical;              ///< severity critical
    int64_t step;              ///< step of the transition
    int64_t ts, start_ts;      ///< unix seconds of the transition and of the alert's onset
    int group_cells;           ///< cells of the cell's site (region) in the topology, 0: unknown
    int profile_only;          ///< an anomaly whose only rule over at firing was the seasonal
                               ///< profile's CUSUM (CcEpisodeTrace.fire_rules == CC_RULE_PROFILE)
} CcdIncAlert;

typedef struct CcdIncMember {
    char *alert_id, *cell, *kpi; /* kpi NULL: cell-level */
    char reason[16];
    int firing, critical;
} CcdIncMember;

typedef struct CcdIncident {
    char *id;
    char *group;          /* the site, region or cell the incident is of */
    int group_scope;      /* what group is: CCD_INC_SITE, CCD_INC_REGION or CCD_INC_CELL */
    char *site, *region;  /* the group's labels (of its first alert), NULL: none */
    int scope;            /* CCD_INC_CELL until a second cell joins, then group_scope */
    int firing;           /* 1 open (in the resolve hold too), 0 resolved */
    int resolving;        /* in the resolve hold: every member resolved, not yet resolved */
    int64_t resolve_step; /* resolving: the step its last alert resolved at */
    int critical;
    int64_t start_ts; /* the earliest onset of its alerts */
    int64_t end_ts;   /* when its last alert resolved (firing and not resolving: 0) */
    int64_t time;     /* its last transition */
    int group_cells;  /* cells of the group in the topology (0: unknown) */
    CcdIncMember *m;  /* every alert that joined, in order */
    size_t n_m, cap_m, n_firing;
    char **cells; /* distinct member cells, in order of joining */
    size_t n_cells, cap_cells;
    CcdStrHash cell_set, alert_ix; /* cell -> 1; alert id -> index + 1 in m */
    uint64_t seq;                  /* bumped at each emitted transition */
    int dirty;
    char summary[256];
} CcdIncident;

typedef struct CcdIncidents CcdIncidents;

typedef struct CcdIncidentStats {
    uint64_t opened, resolved, updated; ///< emitted transitions
    uint64_t alerts_grouped;            ///< alert firings that joined or opened an incident
    uint64_t alerts_unknown;            ///< resolutions of alerts no incident held (restart)
    size_t firing, recent;              ///< incidents open now; resolved ones kept
    size_t firing_site, firing_region;  ///< of the open ones, with scope site / region
    uint64_t oom;                       ///< alerts not grouped for want of memory
    uint64_t evidence_reports;          ///< evidence reports past evidence_frac
    uint64_t evidence_opened;           ///< incidents the evidence rule opened
    uint64_t evidence_members;          ///< evidence members added
    uint64_t evidence_refused;          ///< steps a class had enough cells of a group with no
                                        ///< incident open, too few by evidence_forecast or
                                        ///< evidence_missing_steps
    uint64_t alerts_below_paging;       ///< firings held: no incident open, below the rule
    uint64_t alerts_persisted;          ///< held alerts that opened one by persisting
    uint64_t profile_held;              ///< of alerts_below_paging, profile-only anomalies
    uint64_t profile_persisted;         ///< of alerts_persisted, profile-only anomalies (by
                                        ///< forecast_frac or profile_persist_steps)
    uint64_t stuck_held;                ///< of alerts_below_paging, stuck alerts
    uint64_t stuck_persisted;           ///< of alerts_persisted, stuck alerts (with another
                                        ///< alert of the cell, or stuck_persist_steps)
    uint64_t persist_other_kpi;         ///< evidence steps of a held anomaly's cell past
                                        ///< cell_persist_frac on another KPI than the alert's
                                        ///< only (not counted: cell_persist_own_kpi)
    uint64_t pair_refused;              ///< held firings with another cell of the site held
                                        ///< that did not make a pair (site_same_kpi,
                                        ///< site_forecast)
    size_t held;                        ///< alerts held below the rule now
    size_t resolving;                   ///< of the open ones, those in the resolve hold
    uint64_t hold_rejoined;             ///< resolving incidents an alert joined again
    uint64_t hold_expired;              ///< resolving incidents resolved at the hold's end
} CcdIncidentStats;

void ccd_incident_default_settings(CcdIncidentSettings *s);
/** 0 or -ENOMEM. */
int ccd_incidents_open(CcdIncidents **out, const CcdIncidentSettings *s);
void ccd_incidents_close(CcdIncidents **g);
/** New settings: group_by applies to incidents opened from now on. */
void ccd_incidents_set_settings(CcdIncidents *g, const CcdIncidentSettings *s);

/** Adds one alert transition. 0, or -ENOMEM (counted; the alert is not grouped). */
int ccd_incidents_add(CcdIncidents *g, const CcdIncAlert *a);

/** One cell's evidence on one class at one step (ignored under evidence_frac, with the rule
 *  off, or for a cell without the group's label; a held anomaly's persistence reads it
 *  too). 0 or -ENOMEM (counted). */
int ccd_incidents_evidence(CcdIncidents *g, const CcdIncEvidence *e);

/** The data has reached `step`: evidence members last reported before step − 1 resolve,
 *  pending reports of those steps are dropped, held alerts that fired at or before
 *  step − cell_persist_steps open their incident, and incidents whose last alert resolved
 *  before step − resolve_hold_steps resolve (emitted at the next emit). */
void ccd_incidents_evidence_expire(CcdIncidents *g, int64_t step);

/** Emits every incident changed since the last call, once each (oldest change first), then
 *  keeps the resolved ones among the recent. */
void ccd_incidents_emit(CcdIncidents *g, void (*fn)(void *cookie, const CcdIncident *inc),
                        void *cookie);

/** The incidents: the open ones by start then the recent resolved ones newest first; *n
 *  their count. The array is the caller's to free (NULL: none or out of memory); the
 *  incidents are valid until the next add or emit. */
const CcdIncident **ccd_incidents_list(const CcdIncidents *g, size_t *n);

void ccd_incidents_stats(const CcdIncidents *g, CcdIncidentStats *st);

/** The incident as the JSON object of proto/incident.schema.json (one line, no newline):
 *  the Kafka payload and the element of GET /v1/incidents. Returns a malloc'ed string
 *  (NULL: out of memory); *len its length. */
char *ccd_incident_json(const CcdIncident *inc, size_t *len);

const char *ccd_inc_scope_name(int scope); ///< "cell", "site", "region"

/* ---- hosted in cellcastd ---------------------------------------------------------- */

typedef struct Ccd Ccd;
typedef struct CcdConfig CcdConfig;
typedef struct CcAlertEvent CcAlertEvent;
typedef struct CcdReq CcdReq;
struct evbuffer;

/** The settings the configuration's incidents.* keys give (what cellcastd runs with; the
 *  benchmarks take the defaults' from here, ccd_config_init). */
void ccd_incident_settings_of_config(const CcdConfig *cfg, CcdIncidentSettings *s);
/** Opens d->incidents from the configuration. 0 or -ENOMEM. */
int ccd_incidents_start(Ccd *d);
void ccd_incidents_stop(Ccd *d);
/** After a reload: the settings of the new configuration. */
void ccd_incidents_reconfigure(Ccd *d);
/** One alert transition (alerts.c's flush, loop thread), labelled with the topology. */
void ccd_incidents_on_alert(Ccd *d, const CcAlertEvent *ev);
/** Classes of evidence that are not a KPI's (the kpi of ccd_incidents_on_evidence). */
#define CCD_EVIDENCE_ALL_ZERO (-1)
#define CCD_EVIDENCE_MISSING (-2)
/** One cell's evidence past incidents.evidence_frac (alerts.c's flush and tick, loop
 *  thread): on KPI kpi in direction dir (+1 up, -1 down), or CCD_EVIDENCE_*, at step;
 *  forecast_frac: a KPI's share without the profile's sum (kpi_forecast; else 0). */
void ccd_incidents_on_evidence(Ccd *d, const char *cell, int kpi, int dir, double frac,
                               double forecast_frac, int64_t step, int64_t ts);
/** The data has reached step: evidence members no longer reported resolve. */
void ccd_incidents_evidence_step(Ccd *d, int64_t step);
/** End of the alerts' flush: produces the changed incidents. */
void ccd_incidents_publish(Ccd *d);
/** The lines of /metrics. */
void ccd_incidents_metrics(Ccd *d, struct evbuffer *b);
/** The topic incidents go to ("" = none). */
const char *ccd_incidents_topic(const Ccd *d);

int ccd_h_incidents(CcdReq *r); ///< GET /v1/incidents[?state=&site=&region=&scope=&limit=]

#endif
