/*
 * cc_anomaly_dq.h — the data-quality rules (cc_anomaly_dq.c): one observation through them,
 * whether an episode of theirs holds a KPI's scoring, and all_zero's share of its bar.
 */
#ifndef CC_ANOMALY_DQ_H
#define CC_ANOMALY_DQ_H

#include "cc_anomaly_cell.h"

/* The data-quality rules of one observation, in order: missing data ends, all_zero, then
 * per KPI stuck and bounds. */
void cc_dq_observe(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                   const uint8_t *mask, const CcAlertSink *sink);

/* Within an episode's firing time or its grace period after resolving: the KPIs it covers
 * are not scored. */
int cc_dq_blocks(const CcAnomalySettings *s, const Episode *e, int64_t step);
/* all_zero's share of its bar now (cc_anomaly_cell_evidence). */
double cc_dq_zero_evidence(const CcAnomaly *a, const CcAnomalyCell *c);

#endif
