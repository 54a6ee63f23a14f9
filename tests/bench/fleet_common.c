/*
 * fleet_common.c — the incidents settings and evidence reports of the fleet benchmarks, as
 * cellcastd makes them (fleet_common.h). Each function names the daemon code it follows;
 * a change there is to be made here too.
 */
#include "fleet_common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "config.h"

int fleet_incident_settings(CcdIncidentSettings *s)
{
    CcdConfig cfg;
    if (ccd_config_init(&cfg))
        return -ENOMEM;
    ccd_incident_settings_of_config(&cfg, s);
    ccd_config_free(&cfg);
    return 0;
}

/* daemon/alerts.c evidence_queue */
int fleet_step_evidence(const CcAnomaly *an, const CcAnomalyCell *ac, int n_features,
                        int64_t step_seconds, double frac, FleetEvidence *out)
{
    CcAnomalyEvidence ev;
    if (!(cc_anomaly_cell_evidence(an, ac, &ev) >= frac))
        return 0;
    int n = 0;
    const int64_t ts = ev.step * step_seconds; /* alerts.c's flush: step · S */
    if (ev.zero >= frac)
        out[n++] = (FleetEvidence){CCD_EVIDENCE_ALL_ZERO, 0, ev.zero, ev.step, ts, 0};
    for (int f = 0; f < n_features; f++)
        if (fabs(ev.kpi[f]) >= frac)
            out[n++] = (FleetEvidence){f,  ev.kpi[f] > 0 ? 1 : -1,  fabs(ev.kpi[f]), ev.step,
                                       ts, fabs(ev.kpi_forecast[f])};
    return n;
}

/* daemon/alerts.c missing_evidence */
int fleet_missing_evidence(const CcAnomaly *an, const CcAnomalyCell *ac, int64_t newest_step,
                           int64_t now, int64_t step_seconds, double frac, FleetEvidence *out)
{
    const double after = (double)cc_anomaly_missing_after(an);
    if (newest_step < 0 || (double)(now - (newest_step + 1) * step_seconds) < frac * after)
        return 0;
    CcAnomalyEvidence ev;
    cc_anomaly_cell_evidence(an, ac, &ev);
    if (ev.step < 0)
        return 0;
    double share = (double)(now - (ev.step + 1) * step_seconds) / after;
    if (!(share >= frac))
        return 0;
    *out = (FleetEvidence){CCD_EVIDENCE_MISSING, 0, share, now / step_seconds, now, 0};
    return 1;
}

/* daemon/incidents_daemon.c ccd_incidents_on_evidence (no silences) */
int fleet_incidents_evidence(CcdIncidents *g, const FleetEvidence *e, const char *cell,
                             const char *site, const char *region, int group_cells,
                             const char *const *kpi_names)
{
    /* a cell of its own (no site, no region) counts for no site's evidence, only for the
     * persistence of its own held anomaly (ccd_incidents_evidence tells them apart) */
    char cls[96];
    const char *name = e->kpi >= 0 ? kpi_names[e->kpi] : NULL;
    if (name)
        snprintf(cls, sizeof cls, "%s:%s", name, e->dir > 0 ? "up" : "down");
    else
        snprintf(cls, sizeof cls, "%s", e->kpi == CCD_EVIDENCE_MISSING ? "missing" : "all_zero");
    CcdIncEvidence ie = {
        .cell = cell,
        .site = site,
        .region = region,
        .cls = cls,
        .kpi = name,
        .frac = e->frac,
        .step = e->step,
        .ts = e->ts,
        .group_cells = group_cells,
        .forecast_frac = e->forecast_frac,
    };
    return ccd_incidents_evidence(g, &ie);
}
