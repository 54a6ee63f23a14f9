/*
 * incidents_daemon.c — the incidents (incidents.h) hosted in cellcastd: fed by the alerts'
 * flush with the topology's labels, produced to the Kafka topic incidents.topic, served at
 * GET /v1/incidents and counted in /metrics. Loop thread only.
 */
#include "incidents.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "alertmanager.h"
#include "alerts.h"
#include "api_util.h"
#include "cellcastd.h"
#include "http.h"
#include "log.h"
#include "silences.h"
#include "topology.h"

void ccd_incident_settings_of_config(const CcdConfig *cfg, CcdIncidentSettings *s)
{
    ccd_incident_default_settings(s);
    s->group_by = cfg->incidents_group_by;
    s->keep = cfg->incidents_keep;
    s->evidence_cells = cfg->incidents_evidence_cells;
    s->evidence_share = cfg->incidents_evidence_share;
    s->evidence_frac = cfg->incidents_evidence_frac;
    s->cell_persist_steps = cfg->incidents_cell_persist_steps;
    s->cell_persist_frac = cfg->incidents_cell_persist_frac;
    s->resolve_hold_steps = cfg->incidents_resolve_hold_steps;
    s->profile_persist_steps = cfg->incidents_profile_persist_steps;
    s->evidence_forecast = cfg->incidents_evidence_forecast;
    s->evidence_missing_steps = cfg->incidents_evidence_missing_steps;
    s->site_same_kpi = cfg->incidents_site_same_kpi;
    s->stuck_persist_steps = cfg->incidents_stuck_persist_steps;
    s->site_forecast = cfg->incidents_site_forecast;
    s->cell_persist_own_kpi = cfg->incidents_cell_persist_own_kpi;
}

static void settings_of(const Ccd *d, CcdIncidentSettings *s)
{
    ccd_incident_settings_of_config(&d->cfg, s);
}

int ccd_incidents_start(Ccd *d)
{
    CcdIncidentSettings s;
    settings_of(d, &s);
    return ccd_incidents_open(&d->incidents, &s);
}

void ccd_incidents_stop(Ccd *d) { ccd_incidents_close(&d->incidents); }

void ccd_incidents_reconfigure(Ccd *d)
{
    CcdIncidentSettings s;
    settings_of(d, &s);
    if (d->incidents)
        ccd_incidents_set_settings(d->incidents, &s);
}

const char *ccd_incidents_topic(const Ccd *d)
{
    static char buf[512];
    ccd_config_incidents_topic(&d->cfg, buf, sizeof buf);
    return buf;
}

void ccd_incidents_on_alert(Ccd *d, const CcAlertEvent *ev)
{
    if (!d->incidents)
        return;
    const CcHparams *hp = &d->model->hp;
    const CcdTopology *t = d->topology;
    /* the KPI of a per-KPI alert; an anomaly's: the KPI that drove it most */
    int kpi = ev->kpi >= 0                                 ? ev->kpi
              : ev->kind == CC_ALERT_ANOMALY && ev->n_attr ? ev->attr[0].kpi
                                                           : -1;
    CcdIncAlert a = {
        .id = ev->id,
        .cell = ev->cell_id,
        .site = ccd_topology_label(t, ev->cell_id, "site"),
        .region = ccd_topology_label(t, ev->cell_id, "region"),
        .reason = ev->kind == CC_ALERT_ANOMALY ? "anomaly" : cc_dq_reason_name(ev->reason),
        .kpi = kpi >= 0 && kpi < hp->n_features ? hp->features[kpi] : NULL,
        .firing = ev->state == CC_ALERT_FIRING,
        .critical = ev->severity == CC_SEV_CRITICAL,
        .step = ev->step,
        .ts = ev->ts,
        .start_ts = ev->start_ts,
        .profile_only = ev->kind == CC_ALERT_ANOMALY && ev->trace.fire_rules == CC_RULE_PROFILE,
    };
    a.group_cells = d->cfg.incidents_group_by == CCD_INC_BY_REGION && a.region
                        ? ccd_topology_region_cells(t, a.region)
                    : a.site ? ccd_topology_site_cells(t, a.site)
                             : ccd_topology_region_cells(t, a.region);
    if (ccd_incidents_add(d->incidents, &a) == -ENOMEM)
        LOG_ERROR("incidents", "out of memory grouping alert %s", ev->id); /* counted */
}

void ccd_incidents_on_evidence(Ccd *d, const char *cell, int kpi, int dir, double frac,
                               double forecast_frac, int64_t step, int64_t ts)
{
    /* the evidence rule, and the paging rule's persistence of a held anomaly */
    if (!d->incidents ||
        (d->cfg.incidents_evidence_cells <= 0 && d->cfg.incidents_cell_persist_steps <= 0))
        return;
    const CcHparams *hp = &d->model->hp;
    const CcdTopology *t = d->topology;
    const char *site = ccd_topology_label(t, cell, "site"),
               *region = ccd_topology_label(t, cell, "region");
    /* a cell of its own (no site, no region) counts for no site's evidence, only for the
     * persistence of its own held anomaly (ccd_incidents_evidence tells them apart) */
    char cls[96];
    const char *name = kpi >= 0 && kpi < hp->n_features ? hp->features[kpi] : NULL;
    if (name)
        snprintf(cls, sizeof cls, "%s:%s", name, dir > 0 ? "up" : "down");
    else
        snprintf(cls, sizeof cls, "%s", kpi == CCD_EVIDENCE_MISSING ? "missing" : "all_zero");
    /* a cell whose alert of this class a silence would hold does not count either (planned
     * work on a site opens no incident on its evidence) */
    const CcdSilenceLabels sl = {
        .cell = cell,
        .site = site,
        .region = region,
        .sector = ccd_topology_label(t, cell, "sector"),
        .kind = name ? "anomaly" : "data_quality",
        .reason = name                          ? "none"
                  : kpi == CCD_EVIDENCE_MISSING ? "missing"
                                                : "all_zero",
        .kpi = name,
    };
    if (ccd_silences_matching(d, &sl))
        return;
    CcdIncEvidence e = {
        .cell = cell,
        .site = site,
        .region = region,
        .cls = cls,
        .kpi = name,
        .frac = frac,
        .forecast_frac = forecast_frac,
        .step = step,
        .ts = ts,
        .group_cells = d->cfg.incidents_group_by == CCD_INC_BY_REGION && region
                           ? ccd_topology_region_cells(t, region)
                       : site   ? ccd_topology_site_cells(t, site)
                       : region ? ccd_topology_region_cells(t, region)
                                : 0,
    };
    if (ccd_incidents_evidence(d->incidents, &e) == -ENOMEM)
        LOG_ERROR("incidents", "out of memory weighing the evidence of cell %s",
                  cell); /* counted */
}

void ccd_incidents_evidence_step(Ccd *d, int64_t step)
{
    if (d->incidents)
        ccd_incidents_evidence_expire(d->incidents, step);
}

static void produce_one(void *cookie, const CcdIncident *inc)
{
    Ccd *d = cookie;
    LOG_INFO("incidents", "%s %s: %s", inc->id, inc->firing ? "firing" : "resolved", inc->summary);
    ccd_am_incident(d, inc);
    const char *topic = ccd_incidents_topic(d);
    if (!d->kafka || !topic[0])
        return;
    size_t len;
    char *s = ccd_incident_json(inc, &len);
    if (!s || ccd_kafka_produce(d->kafka, topic, inc->id, strlen(inc->id), s, len)) {
        d->incidents_refused++;
        LOG_WARN("incidents", "incident %s not produced to %s: %s", inc->id, topic,
                 s ? "producer queue full" : "out of memory");
    }
    free(s);
}

void ccd_incidents_publish(Ccd *d)
{
    if (d->incidents)
        ccd_incidents_emit(d->incidents, produce_one, d);
}

void ccd_incidents_metrics(Ccd *d, struct evbuffer *b)
{
    CcdIncidentStats st;
    if (!d->incidents)
        return;
    ccd_incidents_stats(d->incidents, &st);
    evbuffer_add_printf(
        b,
        "# HELP cellcast_incidents_firing Incidents open now, by scope.\n"
        "# TYPE cellcast_incidents_firing gauge\n"
        "cellcast_incidents_firing{scope=\"cell\"} %zu\n"
        "cellcast_incidents_firing{scope=\"site\"} %zu\n"
        "cellcast_incidents_firing{scope=\"region\"} %zu\n"
        "# HELP cellcast_incidents_transitions_total Incident transitions emitted.\n"
        "# TYPE cellcast_incidents_transitions_total counter\n"
        "cellcast_incidents_transitions_total{transition=\"opened\"} %llu\n"
        "cellcast_incidents_transitions_total{transition=\"updated\"} %llu\n"
        "cellcast_incidents_transitions_total{transition=\"resolved\"} %llu\n"
        "# HELP cellcast_incidents_alerts_total Alert transitions seen by the grouping: grouped "
        "(a firing that opened or joined an incident), below_paging (a firing held under "
        "incidents.cell_persist_steps: no incident), persisted (a held one that opened an "
        "incident by persisting), unknown (a resolution of an alert no incident held: it "
        "fired before a restart), dropped (out of memory).\n"
        "# TYPE cellcast_incidents_alerts_total counter\n"
        "cellcast_incidents_alerts_total{outcome=\"grouped\"} %llu\n"
        "cellcast_incidents_alerts_total{outcome=\"below_paging\"} %llu\n"
        "cellcast_incidents_alerts_total{outcome=\"persisted\"} %llu\n"
        "cellcast_incidents_alerts_total{outcome=\"unknown\"} %llu\n"
        "cellcast_incidents_alerts_total{outcome=\"dropped\"} %llu\n"
        "# HELP cellcast_incidents_profile_alerts_total Anomalies the seasonal profile's CUSUM "
        "alone fired, under incidents.profile_persist_steps: held below paging (held; also "
        "in below_paging), or that opened an incident by persisting, by their forecast's own "
        "evidence or by firing that long (persisted; also in persisted).\n"
        "# TYPE cellcast_incidents_profile_alerts_total counter\n"
        "cellcast_incidents_profile_alerts_total{outcome=\"held\"} %llu\n"
        "cellcast_incidents_profile_alerts_total{outcome=\"persisted\"} %llu\n"
        "# HELP cellcast_incidents_stuck_alerts_total Stuck alerts under "
        "incidents.stuck_persist_steps: held below paging (held; also in below_paging), or "
        "that opened an incident with another alert of their cell held or by firing that long "
        "(persisted; also in persisted).\n"
        "# TYPE cellcast_incidents_stuck_alerts_total counter\n"
        "cellcast_incidents_stuck_alerts_total{outcome=\"held\"} %llu\n"
        "cellcast_incidents_stuck_alerts_total{outcome=\"persisted\"} %llu\n"
        "# HELP cellcast_incidents_persist_other_kpi_total Evidence reports of a held "
        "anomaly's cell past incidents.cell_persist_frac on another KPI than the alert's, not "
        "counted toward its persistence (incidents.cell_persist_own_kpi).\n"
        "# TYPE cellcast_incidents_persist_other_kpi_total counter\n"
        "cellcast_incidents_persist_other_kpi_total %llu\n"
        "# HELP cellcast_incidents_pair_refused_total Held firings with another cell of their "
        "site held that did not open the site's incident as two cells: another KPI "
        "(incidents.site_same_kpi) or a profile-only anomaly (incidents.site_forecast).\n"
        "# TYPE cellcast_incidents_pair_refused_total counter\n"
        "cellcast_incidents_pair_refused_total %llu\n"
        "# HELP cellcast_incidents_evidence_total Cells together as evidence: reports of a "
        "cell past incidents.evidence_frac of a bar (reports), evidence members that joined "
        "an incident (members), incidents the evidence opened (opened), steps a class had "
        "enough cells of a site with no incident open but too few by the forecast's own share "
        "(incidents.evidence_forecast) or the silence's persistence "
        "(incidents.evidence_missing_steps): no incident (refused).\n"
        "# TYPE cellcast_incidents_evidence_total counter\n"
        "cellcast_incidents_evidence_total{what=\"reports\"} %llu\n"
        "cellcast_incidents_evidence_total{what=\"members\"} %llu\n"
        "cellcast_incidents_evidence_total{what=\"opened\"} %llu\n"
        "cellcast_incidents_evidence_total{what=\"refused\"} %llu\n"
        "# HELP cellcast_incidents_held Alerts held below the paging rule now.\n"
        "# TYPE cellcast_incidents_held gauge\n"
        "cellcast_incidents_held %zu\n"
        "# HELP cellcast_incidents_resolving Open incidents in the resolve hold now (every "
        "alert resolved, incidents.resolve_hold_steps not yet passed; counted in "
        "cellcast_incidents_firing too).\n"
        "# TYPE cellcast_incidents_resolving gauge\n"
        "cellcast_incidents_resolving %zu\n"
        "# HELP cellcast_incidents_hold_total Incidents in the resolve hold that an alert of "
        "their group joined again (rejoined) or that resolved at its end (expired).\n"
        "# TYPE cellcast_incidents_hold_total counter\n"
        "cellcast_incidents_hold_total{outcome=\"rejoined\"} %llu\n"
        "cellcast_incidents_hold_total{outcome=\"expired\"} %llu\n"
        "# HELP cellcast_incidents_produce_refused_total Incident transitions the producer "
        "refused (not retried).\n"
        "# TYPE cellcast_incidents_produce_refused_total counter\n"
        "cellcast_incidents_produce_refused_total %llu\n",
        st.firing - st.firing_site - st.firing_region, st.firing_site, st.firing_region,
        (unsigned long long)st.opened, (unsigned long long)st.updated,
        (unsigned long long)st.resolved, (unsigned long long)st.alerts_grouped,
        (unsigned long long)st.alerts_below_paging, (unsigned long long)st.alerts_persisted,
        (unsigned long long)st.alerts_unknown, (unsigned long long)st.oom,
        (unsigned long long)st.profile_held, (unsigned long long)st.profile_persisted,
        (unsigned long long)st.stuck_held, (unsigned long long)st.stuck_persisted,
        (unsigned long long)st.persist_other_kpi, (unsigned long long)st.pair_refused,
        (unsigned long long)st.evidence_reports, (unsigned long long)st.evidence_members,
        (unsigned long long)st.evidence_opened, (unsigned long long)st.evidence_refused, st.held,
        st.resolving, (unsigned long long)st.hold_rejoined, (unsigned long long)st.hold_expired,
        (unsigned long long)d->incidents_refused);
}

int ccd_h_incidents(CcdReq *r)
{
    Ccd *d = r->d;
    const char *state = ccd_query(r, "state"), *site = ccd_query(r, "site"),
               *region = ccd_query(r, "region"), *scope = ccd_query(r, "scope");
    long long limit = 100;
    int q = ccd_query_int(r, "limit", &limit);
    if (q == -2)
        return ccd_problem(r, 400, "bad-parameter", "limit must be an integer");
    if (limit < 1 || limit > 10000)
        return ccd_problem(r, 422, "bad-parameter", "limit must be in [1, 10000], got %lld", limit);
    if (state && strcmp(state, "firing") && strcmp(state, "resolved"))
        return ccd_problem(r, 422, "bad-parameter", "state must be firing or resolved, got '%s'",
                           state);
    if (scope && strcmp(scope, "cell") && strcmp(scope, "site") && strcmp(scope, "region"))
        return ccd_problem(r, 422, "bad-parameter", "scope must be cell, site or region, got '%s'",
                           scope);
    if (!d->incidents)
        return ccd_problem(r, 404, "not-found", "alerts are off: no incidents");
    size_t n;
    const CcdIncident **v = ccd_incidents_list(d->incidents, &n);
    if (!v && n)
        return ccd_problem(r, 500, "internal", "out of memory");
    CcdSb *sb = ccd_reply_sb();
    ccd_sb_str(sb, "{\"incidents\":[");
    long long k = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        const CcdIncident *inc = v[i];
        if ((state && strcmp(state, inc->firing ? "firing" : "resolved")) ||
            (scope && strcmp(scope, ccd_inc_scope_name(inc->scope))) ||
            (site && (!inc->site || strcmp(site, inc->site))) ||
            (region && (!inc->region || strcmp(region, inc->region))))
            continue;
        total++;
        if (k == limit)
            continue;
        size_t len;
        char *s = ccd_incident_json(inc, &len);
        if (k++)
            ccd_sb_add(sb, ",", 1);
        if (s)
            ccd_sb_add(sb, s, len);
        else
            ccd_sb_str(sb, "null");
        free(s);
    }
    free(v);
    ccd_sb_str(sb, "],\"total\":");
    ccd_sb_int(sb, total);
    ccd_sb_add(sb, "}", 1);
    return ccd_sb_reply(r, sb);
}
