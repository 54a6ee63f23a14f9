/* cc_ridge.c — ridge regression by its normal equations (see cc_ridge.h). */
#include "cc_ridge.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct CcRidge {
    int K, NY, rows; /* rows: buffered, not yet in the normal equations */
    int64_t n;
    double *ata, *aty; /* (K, K) upper triangle, (K, NY) */
    double *fac;       /* (K, K) the factorisation of one solve, so ata stays as summed */
    double *a, *y;     /* (CC_RIDGE_CHUNK, K), (CC_RIDGE_CHUNK, NY) */
};

int cc_ridge_open(CcRidge **out, int K, int NY)
{
    *out = NULL;
    if (K < 1 || NY < 1)
        return -EINVAL;
    CcRidge *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->K = K, r->NY = NY;
    r->ata = calloc((size_t)K * K, sizeof *r->ata);
    r->aty = calloc((size_t)K * NY, sizeof *r->aty);
    r->fac = malloc((size_t)K * K * sizeof *r->fac);
    r->a = malloc((size_t)CC_RIDGE_CHUNK * K * sizeof *r->a);
    r->y = malloc((size_t)CC_RIDGE_CHUNK * NY * sizeof *r->y);
    if (!r->ata || !r->aty || !r->fac || !r->a || !r->y) {
        cc_ridge_close(&r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

void cc_ridge_close(CcRidge **pr)
{
    CcRidge *r = *pr;
    if (!r)
        return;
    free(r->ata);
    free(r->aty);
    free(r->fac);
    free(r->a);
    free(r->y);
    free(r);
    *pr = NULL;
}

double *cc_ridge_row(CcRidge *r, double **y)
{
    *y = r->y + (size_t)r->rows * r->NY;
    return r->a + (size_t)r->rows * r->K;
}

/* The buffered rows into the normal equations. */
static void flush(CcRidge *r)
{
    const int K = r->K, NY = r->NY;
    if (r->rows > 0) {
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, K, r->rows, 1.0, r->a, K, 1.0, r->ata,
                    K);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, NY, r->rows, 1.0, r->a, K, r->y, NY,
                    1.0, r->aty, NY);
    }
    r->rows = 0;
}

void cc_ridge_push(CcRidge *r)
{
    r->n++;
    if (++r->rows == CC_RIDGE_CHUNK)
        flush(r);
}

int64_t cc_ridge_rows(const CcRidge *r) { return r->n; }

double cc_ridge_trace(CcRidge *r, int n)
{
    double t = 0;
    flush(r);
    for (int i = 0; i < n && i < r->K; i++)
        t += r->ata[(size_t)i * r->K + i];
    return t;
}

/* In place: a (K, K) symmetric positive definite (upper triangle read) -> its Cholesky
 * factor U (a = U^T U) in the upper triangle. -EDOM when a pivot is not positive. */
static int cholesky_upper(double *a, int K)
{
    for (int j = 0; j < K; j++) {
        double d = a[(size_t)j * K + j];
        for (int k = 0; k < j; k++)
            d -= a[(size_t)k * K + j] * a[(size_t)k * K + j];
        if (!(d > 0))
            return -EDOM;
        double u = sqrt(d);
        a[(size_t)j * K + j] = u;
        for (int i = j + 1; i < K; i++) {
            double v = a[(size_t)j * K + i];
            for (int k = 0; k < j; k++)
                v -= a[(size_t)k * K + j] * a[(size_t)k * K + i];
            a[(size_t)j * K + i] = v / u;
        }
    }
    return 0;
}

/* b (K, NB) := a^-1 b for a = U^T U factored by cholesky_upper. */
static void cholesky_solve(const double *u, double *b, int K, int NB)
{
    for (int i = 0; i < K; i++) /* U^T z = b, forward */
        for (int c = 0; c < NB; c++) {
            double v = b[(size_t)i * NB + c];
            for (int k = 0; k < i; k++)
                v -= u[(size_t)k * K + i] * b[(size_t)k * NB + c];
            b[(size_t)i * NB + c] = v / u[(size_t)i * K + i];
        }
    for (int i = K - 1; i >= 0; i--) /* U x = z, backward */
        for (int c = 0; c < NB; c++) {
            double v = b[(size_t)i * NB + c];
            for (int k = i + 1; k < K; k++)
                v -= u[(size_t)i * K + k] * b[(size_t)k * NB + c];
            b[(size_t)i * NB + c] = v / u[(size_t)i * K + i];
        }
}

int cc_ridge_spd_solve(double *a, double *b, int K, int NB)
{
    int ret = cholesky_upper(a, K);
    if (ret == 0)
        cholesky_solve(a, b, K, NB);
    return ret;
}

int cc_ridge_solve(CcRidge *r, double pen, int n_pen, double *x)
{
    const int K = r->K, NY = r->NY;
    if (!(pen >= 0) || n_pen < 0 || n_pen > K)
        return -EINVAL;
    flush(r);
    if (r->n == 0)
        return -EAGAIN;
    memcpy(r->fac, r->ata, (size_t)K * K * sizeof *r->fac);
    for (int i = 0; i < n_pen; i++)
        r->fac[(size_t)i * K + i] += pen;
    int ret = cholesky_upper(r->fac, K);
    if (ret < 0)
        return ret;
    memcpy(x, r->aty, (size_t)K * NY * sizeof *x);
    cholesky_solve(r->fac, x, K, NY);
    return 0;
}
