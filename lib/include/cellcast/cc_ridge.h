/*
 * cc_ridge.h — ridge regression by its normal equations, for the closed-form linear maps
 * (the tx/3 trainer's ridge start, cc_trainer_fit_linear; `cellcast eval`'s linear
 * baseline): rows (a, y) with K inputs and NY outputs are accumulated in double into
 * a^T a (upper triangle) and a^T y by BLAS rank-k updates of CC_RIDGE_CHUNK rows, a penalty
 * is added to the diagonal, and a Cholesky factorisation solves for x (K, NY) minimising
 * |a x - y|² + pen · |x[0..n_pen)|².
 *
 * Double throughout: the inputs of a window regression are strongly correlated and K is
 * up to several hundred. K³/6 flops for the factorisation: milliseconds at K = 721.
 */
#ifndef CC_RIDGE_H
#define CC_RIDGE_H

#include <stdint.h>

#define CC_RIDGE_CHUNK 256 /* rows per rank-k update of the normal equations */

typedef struct CcRidge CcRidge;

/** An empty system of K ≥ 1 inputs and NY ≥ 1 outputs. 0, -EINVAL, -ENOMEM. */
int cc_ridge_open(CcRidge **out, int K, int NY);
void cc_ridge_close(CcRidge **r);

/** The next row's buffers: returns a (K values) and sets *y (NY values); the caller fills
 * both, then cc_ridge_push counts the row (a row not pushed is overwritten by the next). */
double *cc_ridge_row(CcRidge *r, double **y);
void cc_ridge_push(CcRidge *r);

/** Rows pushed so far. */
int64_t cc_ridge_rows(const CcRidge *r);

/** Σ over i < n of (a^T a)[i][i], the rows pushed so far (e.g. to scale a penalty). */
double cc_ridge_trace(CcRidge *r, int n);

/**
 * Solves, with pen ≥ 0 added to the first n_pen diagonal entries of a^T a (the rest, e.g.
 * a bias column, unpenalised), into x (K, NY, row-major: x[i·NY + c]). The sums are kept:
 * the system can be solved again with another penalty, or after more rows (e.g. a penalty
 * chosen on held-out rows, then a refit on all). 0, -EINVAL (pen < 0, n_pen outside
 * [0, K]), -EAGAIN (no row), -EDOM (not positive definite: pen = 0 on collinear inputs).
 */
int cc_ridge_solve(CcRidge *r, double pen, int n_pen, double *x);

/** The solver of cc_ridge_solve on a system of one's own (e.g. lib/cc_lad.c's weighted
 *  normal equations): b (K, NB, row-major) := a^-1 b for a (K, K) symmetric positive
 *  definite, its upper triangle read and overwritten by its Cholesky factor. 0 or -EDOM
 *  (a pivot not positive). */
int cc_ridge_spd_solve(double *a, double *b, int K, int NB);

#endif
