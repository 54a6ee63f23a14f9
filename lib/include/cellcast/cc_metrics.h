/*
 * cc_metrics.h — forecast accuracy accumulators, per KPI and per horizon step.
 *
 * A CcMetrics accumulates, for each (KPI f, horizon step k), pairs of truth y and point
 * forecast ŷ (and optionally the forecast's sd for interval coverage). Sums are kept in
 * double. A pair whose y or ŷ is not finite is skipped (NaN targets are how missing
 * truths are passed in) and counted in `skipped`.
 *
 * Definitions over the n pairs of a cell of the table (or a pooled group of cells):
 *   MAE  = Σ|y − ŷ| / n            MSE = Σ(y − ŷ)² / n          RMSE = √MSE
 *   NRMSE = RMSE / mean(y)          (NaN when mean(y) = 0)
 *   MASE = Σ(|y − ŷ| / s) / n_s     s = the pair's scale: the in-sample MAE of the seasonal
 *          naive forecast (cc_mase_scale; the evaluator uses a season of one day, or one
 *          step when S does not divide a day); pairs given no scale (s ≤ 0 or NaN) are left
 *          out of MASE only
 *   coverage = share of pairs with a finite sd whose y lies in ŷ ± z·sd, z = CC_Z80
 *          (the central 80 % interval, P10–P90); NaN when no pair carried an sd.
 * Pooled values (cc_metrics_get with f and/or k = -1) sum the underlying counts, so they
 * weight every pair equally (ETT protocol: MSE over all channels and horizon steps).
 */
#ifndef CC_METRICS_H
#define CC_METRICS_H

#include "cc_common.h"

#define CC_Z80 1.2815516 ///< z of the central 80 % normal interval (P10–P90)

typedef struct CcMetrics CcMetrics;

typedef struct CcMetricValues {
    int64_t n;       ///< pairs scored
    int64_t skipped; ///< pairs skipped (non-finite truth or forecast)
    double mae, mse, rmse, nrmse, mase, coverage;
    double mean_true; ///< mean of y
    int64_t n_cov;    ///< pairs with an sd (coverage denominator)
} CcMetricValues;

/** Accumulators for F KPIs × HZ horizon steps, zeroed. 0, -EINVAL, -ENOMEM. */
int cc_metrics_open(CcMetrics **out, int n_kpis, int horizon);
void cc_metrics_close(CcMetrics **m);
void cc_metrics_reset(CcMetrics *m);

/**
 * Adds one pair for KPI f at horizon step k (0-based). sd: forecast standard deviation
 * (NaN = none, not counted in coverage). scale: MASE scale of this pair's series and KPI
 * (≤ 0 or NaN = not counted in MASE). Out-of-range f or k are ignored.
 */
void cc_metrics_add(CcMetrics *m, int f, int k, double y, double yhat, double sd, double scale);

/** Merges b into a (same shape); -EINVAL if shapes differ. */
int cc_metrics_merge(CcMetrics *a, const CcMetrics *b);

/** Values for KPI f (or -1 = all KPIs) at step k (or -1 = all steps). Empty → n = 0, NaNs. */
void cc_metrics_get(const CcMetrics *m, int f, int k, CcMetricValues *out);

/**
 * Mean absolute error of the seasonal naive forecast x_t ≈ x_{t−season} over the rows
 * [begin, end) of a (T, stride) array, column col, using only pairs where both values
 * are observed (mask NULL = all observed). NaN when no pair exists.
 */
double cc_mase_scale(const float *x, const uint8_t *mask, int stride, int col, int begin, int end,
                     int season);

#endif
