/*
 * cc_anomaly_lifecycle.h — the alert lifecycle (cc_anomaly_lifecycle.c): what the scoring
 * found at a step (StepVerdict), the anomaly episode's step, and how an event is made and
 * emitted (the data-quality rules emit theirs through it too).
 */
#ifndef CC_ANOMALY_LIFECYCLE_H
#define CC_ANOMALY_LIFECYCLE_H

#include "cc_anomaly_cell.h"

/* What scoring found at one step, for the anomaly lifecycle. */
typedef struct StepVerdict {
    int n_scored; ///< KPIs scored against an expectation
    int n_supp;   ///< KPIs that had one but were held by a DQ alert
    int n_over;   ///< KPIs over (threshold, CUSUM or profile)
    int n_crit;   ///< KPIs critical
    double score; ///< max |z| over the scored KPIs, NaN if none
    /* for CcEpisodeTrace only (detection does not read them) */
    int n_live;              ///< KPIs over by a live deviation (CcEpisodeTrace)
    int rules;               ///< CcAnomalyRule bits over, any KPI
    int hold_rules;          ///< those of KPIs over without a live deviation
    int over_kpi, hold_kpi;  ///< the KPI with the largest |z| of each kind, -1: none
    double over_az, hold_az; ///< their |z|
} StepVerdict;

/* The anomaly lifecycle of one observed step: the k-of-n window, the cell's stats, and
 * the episode (fire, escalate, track the peak, resolve). */
void cc_anomaly_lifecycle_step(const CcAnomaly *a, CcAnomalyCell *c, int64_t step,
                               const float *values, const StepVerdict *v, const CcAlertSink *sink);

/* An event of cell c with its id, times and no attribution (score NaN). */
void cc_alert_event_init(const CcAnomaly *a, const CcAnomalyCell *c, CcAlertEvent *ev,
                         enum CcAlertState st, enum CcDqReason r, int kpi, int64_t start,
                         int64_t step, int severity);

/* Counts the event and hands it to the sink, unless quiet_step is within quiet_until. */
void cc_alert_emit(CcAnomalyCell *c, const CcAlertSink *sink, const CcAlertEvent *ev,
                   int64_t quiet_step);

#endif
