/*
 * cc_lad.h — least absolute deviations by iteratively reweighted least squares (IRLS), for
 * the linear path fitted by the learner's own criterion (the MAE in MASE units,
 * cc_trainer_fit_linear_scaled with CC_LINEAR_LOSS_MAE) instead of the ridge's squared
 * error.
 *
 * The problem: rows (a, y) with K inputs and NY outputs, x (K, NY) minimising, for every
 * output c on its own,
 *     Σ_rows h_eps(a·x_c - y_c) + pen_c/2 · |x_c[0..n_pen)|²
 * where h_eps is the Huber function of width eps (r²/(2 eps) + eps/2 for |r| < eps, |r|
 * beyond): the absolute error, smoothed within eps of 0 so that the weights stay finite.
 * One pass over the rows at the current x accumulates, per output, the normal equations
 * weighted by w = 1/max(|r|, eps) (in double, by BLAS rank-k updates of CC_LAD_CHUNK rows,
 * as lib/cc_ridge.c); cc_lad_solve solves them (cc_ridge_spd_solve) for the next x. Each
 * such step is a majorise-minimise step of the objective above (the quadratic through
 * h_eps at the current residual lies above it), so the objective never rises: deterministic,
 * no seed, no learning rate. A pass costs NY · K² per row (the ridge: K²).
 *
 * cc_lad_fit_ref is the naive reference twin (rows in memory, plain loops, Gaussian
 * elimination): the oracle of tests/unit/test_lad.c.
 */
#ifndef CC_LAD_H
#define CC_LAD_H

#include <stdint.h>

#define CC_LAD_CHUNK 256 /* rows per rank-k update of the weighted normal equations */

typedef struct CcLad CcLad;

/** An empty system of K ≥ 1 inputs and NY ≥ 1 outputs. 0, -EINVAL, -ENOMEM. */
int cc_lad_open(CcLad **out, int K, int NY);
void cc_lad_close(CcLad **l);

/** Starts a pass at x (K, NY, row-major x[i·NY + c]; copied) with Huber width eps > 0:
 *  the sums of the previous pass are cleared. 0 or -EINVAL (eps not > 0 and finite). */
int cc_lad_begin(CcLad *l, const double *x, double eps);

/** Starts a pass at x that only sums the residuals (cc_lad_residuals), without the normal
 *  equations: a pass's cost without the NY · K² per row, e.g. to measure the objective at a
 *  point or set a penalty from its residuals. cc_lad_solve after it is -EINVAL. 0 or -EINVAL
 *  (as cc_lad_begin). */
int cc_lad_begin_sums(CcLad *l, const double *x, double eps);

/** The next row's buffers: returns a (K values) and sets *y (NY values); the caller fills
 *  both, then cc_lad_push counts the row (as cc_ridge_row / cc_ridge_push). */
double *cc_lad_row(CcLad *l, double **y);
void cc_lad_push(CcLad *l);

/** Rows pushed in this pass. */
int64_t cc_lad_rows(const CcLad *l);

/** The pass's rows at its x: per output c, abs_sum[c] = Σ |a·x_c - y_c| and (huber may be
 *  NULL) huber[c] = Σ h_eps(a·x_c - y_c). Either array has NY entries. */
void cc_lad_residuals(CcLad *l, double *abs_sum, double *huber);

/** Σ over i < n of the weighted (a^T W_c a)[i][i] of output c (e.g. to scale a penalty). */
double cc_lad_trace(CcLad *l, int c, int n);

/**
 * The next x (K, NY): per output c, the solution of the pass's weighted normal equations
 * with pen[c] ≥ 0 added to their first n_pen diagonal entries. The sums are kept.
 * 0, -EINVAL (a pen < 0, n_pen outside [0, K], a cc_lad_begin_sums pass), -EAGAIN (no row), -EDOM
 * (not positive definite: pen = 0 on collinear inputs).
 */
int cc_lad_solve(CcLad *l, const double *pen, int n_pen, double *x);

/**
 * The reference: iters IRLS steps from x (updated in place) over n rows a (n, K) and
 * y (n, NY) in memory, with plain loops and Gaussian elimination; the same steps as
 * cc_lad_begin / push / solve. 0, -EINVAL, -EDOM (a zero pivot), -ENOMEM.
 */
int cc_lad_fit_ref(const double *a, const double *y, int64_t n, int K, int NY, const double *pen,
                   int n_pen, double eps, int iters, double *x);

#endif
