/*
 * cc_anomaly_window.h — the multi-scale window rule (cc_anomaly_window.c): its scales, and
 * its step on one KPI's state (the ring of calibrated z and the tail of each scale's mean),
 * which the scoring of cc_anomaly.c runs per KPI.
 */
#ifndef CC_ANOMALY_WINDOW_H
#define CC_ANOMALY_WINDOW_H

#include "cc_anomaly_cell.h"

/* The window rule's scales in steps (at most CC_WIN_SCALES, distinct, ≥ 2); 0 = off. */
int cc_window_scales(const CcAnomalySettings *s, int *w);

/* The window rule of KPI f at this step: z (calibrated) enters its ring; the largest
 * window z over the scales in units of its own tail_q quantile times zq (comparable with
 * warn_z), NaN while none is warm; *unit gets that scale's zq / quantile (a window mean m
 * is m·unit there; NaN: none); then the quantiles learn (not while firing). */
double cc_window_z(const CcAnomalySettings *s, KpiState *k, int firing, double z, double zq,
                   double *unit);

#endif
