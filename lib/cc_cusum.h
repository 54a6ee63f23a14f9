/*
 * cc_cusum.h — a two-sided CUSUM (Page's cumulative sum) on a z-like input: the rule for
 * sustained deviations that stay under any single-step threshold. The anomaly scorer runs
 * one on each KPI's forecast z and one on its seasonal-profile z (cc_anomaly.h). Inline:
 * it runs per KPI per step.
 */
#ifndef CC_CUSUM_H
#define CC_CUSUM_H

#include <math.h>

/* One step with reference k, the input clipped to ±(k + 1) (one spike must not charge the
 * sums: spikes are the thresholds' job) and the increments weighted by w:
 *     pos = max(0, pos + w·(z − k)),   neg = max(0, neg + w·(−z − k)) */
static inline void cc_cusum_step(double *pos, double *neg, double z, double k, double w)
{
    double clip = k + 1;
    z = z > clip ? clip : z < -clip ? -clip : z;
    *pos = fmax(0, *pos + w * (z - k));
    *neg = fmax(0, *neg + w * (-z - k));
}

/* Sums at or over threshold h (> 0: else off) in direction dir (0 both, +1 up, -1 down). */
static inline int cc_cusum_over(double pos, double neg, double h, int dir)
{
    return h > 0 && ((dir >= 0 && pos >= h) || (dir <= 0 && neg >= h));
}

/* Over (as cc_cusum_over) with the step's own input d past the reference k in the direction
 * of a sum that is over: the sum grew at this step. A sum that is only draining (d under k)
 * is over without it. */
static inline int cc_cusum_live(double pos, double neg, double h, double k, int dir, double d)
{
    return h > 0 && ((dir >= 0 && pos >= h && d > k) || (dir <= 0 && neg >= h && d < -k));
}

/* The larger sum, signed by its direction. */
static inline double cc_cusum_signed(double pos, double neg) { return pos >= neg ? pos : -neg; }

#endif
