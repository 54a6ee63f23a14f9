/*
 * fleet_common.h — what the fleet benchmarks share to feed daemon/incidents.c as cellcastd
 * feeds it (issue 32): the incidents settings of the daemon's configuration defaults, and a
 * cell's evidence reports for the evidence rule (docs/design/site-evidence.md) — after each
 * observed step (daemon/alerts.c evidence_queue) and, at the missing-data ticks, the
 * silence's share of the missing-data bar (alerts.c missing_evidence) — handed to the
 * grouping with the class names of incidents_daemon.c (ccd_incidents_on_evidence).
 * Silences are not modelled (the benchmarks set none). cellcastd makes the reports only while
 * a rule that reads them is on (incidents.evidence_cells or incidents.cell_persist_steps > 0,
 * the defaults); the callers make them always, which is the same at the defaults they run.
 */
#ifndef FLEET_COMMON_H
#define FLEET_COMMON_H

#include <stdint.h>

#include "cc_anomaly.h"
#include "incidents.h"

/** One evidence report: class kpi ≥ 0 with dir (+1 up, −1 down), or CCD_EVIDENCE_ALL_ZERO /
 *  CCD_EVIDENCE_MISSING (dir 0); frac the share of its bar; step and ts as cellcastd gives
 *  them (an observation's step and step·S; a tick's now / S and now). */
typedef struct FleetEvidence {
    int kpi, dir;
    double frac;
    int64_t step, ts;
    double forecast_frac; ///< a KPI's: frac without the profile's sum (kpi_forecast), else 0
} FleetEvidence;

/** The incidents settings cellcastd runs with at its configuration's defaults (the
 *  incidents.* keys of daemon/config.c through ccd_incident_settings_of_config), so a key
 *  added there applies here too. 0 or -ENOMEM. */
int fleet_incident_settings(CcdIncidentSettings *s);

/** The reports after an observed (not imputed) step of the cell, as alerts.c queues them:
 *  all_zero and each KPI at or past frac (the settings' evidence_frac). Fills out (room for
 *  1 + n_features) and returns how many. */
int fleet_step_evidence(const CcAnomaly *an, const CcAnomalyCell *ac, int n_features,
                        int64_t step_seconds, double frac, FleetEvidence *out);

/** The missing-data report of a tick at now (unix seconds), as alerts.c's missing_evidence:
 *  the silence since the cell's last observed step over the missing-data bar, when at or past
 *  frac. newest_step: the step of the cell's newest record (-1: none). 1 and *out, or 0. */
int fleet_missing_evidence(const CcAnomaly *an, const CcAnomalyCell *ac, int64_t newest_step,
                           int64_t now, int64_t step_seconds, double frac, FleetEvidence *out);

/** Hands one report of cell (labels site, region; group_cells the cells of its group) to the
 *  grouping as ccd_incidents_on_evidence does; kpi_names the model's features. 0 or -ENOMEM. */
int fleet_incidents_evidence(CcdIncidents *g, const FleetEvidence *e, const char *cell,
                             const char *site, const char *region, int group_cells,
                             const char *const *kpi_names);

#endif
