/*
 * cc_calib.h — the fit of a tx/3 model's calib.sigma_scale (per KPI f and horizon step k)
 * from standardised residuals |z| = |target - mean| / sd of held-out samples (the trainer's
 * validation rows), so that the served P10–P90 interval mean ± CC_Z80·s·sd holds 80 %.
 *
 * The file holds one scale per (f, k) (spec); only how it is fitted is chosen here. The
 * validation rows are a short stretch of time and the test rows the next one, so a fit
 * that is exact on validation does not transfer when the two differ (ElBorn: validation
 * coverage 0.93 before the fit, 0.80 after it, 0.72 on test). The default fit
 * (CC_CALIB_SHRUNK) therefore:
 *  - pools each step with its neighbours k-r..k+r (the step profile of the scale is smooth;
 *    one step's quantile alone is noisy, the more so as neighbouring origins are correlated);
 *  - takes the conformal order statistic ceil((n+1)·0.8) rather than an interpolated
 *    quantile (the finite-sample correction of split conformal prediction);
 *  - pulls a KPI's log-scale toward the all-KPI one with weight pool_n/(n + pool_n), so a
 *    KPI with few validation rows borrows from the others;
 *  - shrinks the log-scale toward 0 (the model's own sd, fitted by NLL on the much longer
 *    training stretch) by how much the fit moves within the validation stretch itself: per
 *    KPI, with l the fitted log-scales and d the difference between the fits on the earlier
 *    and the later half of each series' validation rows, l·mean(l²)/(mean(l²) + mean(d²)).
 *    A correction the two halves agree on is kept; one they disagree on as much as its own
 *    size is halved, because the test stretch will differ from validation at least as much
 *    as the validation halves differ from each other.
 * CC_CALIB_QUANTILE is the first tx/3 fit (per (f, k) 0.8 quantile, nothing else), kept to
 * compare; CC_CALIB_NONE leaves every scale at 1.
 *
 * A backtest on validation only (cc_calib_fit's report): the same fit on the earlier two
 * thirds of each series' validation rows, scored on the later third, says how well the
 * method transfers to a later stretch without looking at test.
 */
#ifndef CC_CALIB_H
#define CC_CALIB_H

#include <stddef.h>
#include <stdint.h>

typedef enum CcCalibFit {
    CC_CALIB_SHRUNK = 0, ///< pooled steps, conformal quantile, KPI pooling, drift shrinkage
    CC_CALIB_QUANTILE,   ///< per (f, k) 0.8 quantile of |z| / CC_Z80 (the first tx/3 fit)
    CC_CALIB_NONE,       ///< every scale 1
} CcCalibFit;

typedef struct CcCalibSettings {
    CcCalibFit fit;  ///< default CC_CALIB_SHRUNK
    int step_radius; ///< at most this many steps pooled each side (k/4 at step k); -1
                     ///< (default): horizon/16 rounded, at most 8
    double pool_n;   ///< pseudo-count of the pull toward the all-KPI scale; default 50
    double recent;   ///< fit on this latest share of each series' rows; default 1 (all)
    int shrink;      ///< drift shrinkage toward 1 (SHRUNK only); default 1
} CcCalibSettings;

/** What a fit saw: P10–P90 coverage on the rows given, before the fit (all scales 1),
 *  after it, with the NLL-optimal per (f, k) scale RMS(z) (for the record), and the
 *  validation-only backtest: the fit on the earlier 2/3, scored on the later 1/3 (NAN when
 *  a series has too few rows to split), the same for CC_CALIB_QUANTILE and for no fit. */
typedef struct CcCalibReport {
    double cover_raw, cover, cover_rms;
    double late_cover, late_cover_quantile, late_cover_raw;
    double shrink_min, shrink_max; ///< the drift shrinkage weights over KPIs (1: none)
    size_t n;                      ///< samples
} CcCalibReport;

typedef struct CcCalib CcCalib;

/** Defaults as documented in CcCalibSettings. */
void cc_calib_defaults(CcCalibSettings *s);

/** A collector for n_features × horizon buckets. 0, -EINVAL, -ENOMEM. */
int cc_calib_open(CcCalib **out, int n_features, int horizon, const CcCalibSettings *s);
void cc_calib_close(CcCalib **c);

/** One held-out sample: series, its origin step t (orders the rows in time), KPI f,
 *  horizon step k (0-based), |z| (finite, >= 0; others are ignored). 0 or -ENOMEM. */
int cc_calib_add(CcCalib *c, int series, int64_t t, int f, int k, float absz);

/** scale (n_features × horizon, row-major by f) from the samples added; rep may be NULL.
 *  Every scale is positive (at least 1e-3; 1 for a bucket without samples). 0 or -ENOMEM. */
int cc_calib_fit(CcCalib *c, float *scale, CcCalibReport *rep);

/**
 * The scale that makes mean ± CC_Z80·s·sd hold 80 % of n standardised residuals |z|:
 * s = quantile_0.8(|z|)/CC_Z80, linear between order statistics (absz is reordered). 1 when
 * n = 0; at least 1e-3 (a KPI the model predicts exactly still gets a positive scale, as the
 * weight file requires).
 */
float cc_calib_scale(float *absz, size_t n);

#endif
