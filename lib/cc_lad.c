/* cc_lad.c — least absolute deviations by IRLS (see cc_lad.h), and its naive reference. */
#include "cc_lad.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_ridge.h"

struct CcLad {
    int K, NY, rows; /* rows: buffered, not yet in the normal equations */
    int sums_only;   /* cc_lad_begin_sums: no normal equations this pass */
    int64_t n;
    double eps;
    double *x;               /* (K, NY) the pass's point */
    double *ata, *aty;       /* NY × (K, K) upper triangles, NY × (K) */
    double *fac, *rhs;       /* (K, K), (K): one output's solve */
    double *a, *y, *r;       /* (CC_LAD_CHUNK, K), (.., NY), (.., NY) residuals */
    double *b, *sy;          /* (CC_LAD_CHUNK, K) rows times sqrt(w), (CC_LAD_CHUNK) */
    double *abs_sum, *huber; /* (NY) */
};

int cc_lad_open(CcLad **out, int K, int NY)
{
    *out = NULL;
    if (K < 1 || NY < 1)
        return -EINVAL;
    CcLad *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    const size_t k = (size_t)K, ny = (size_t)NY, ch = CC_LAD_CHUNK;
    l->K = K, l->NY = NY, l->eps = 1;
    l->x = calloc(k * ny, sizeof *l->x);
    l->ata = calloc(ny * k * k, sizeof *l->ata);
    l->aty = calloc(ny * k, sizeof *l->aty);
    l->fac = malloc(k * k * sizeof *l->fac);
    l->rhs = malloc(k * sizeof *l->rhs);
    l->a = malloc(ch * k * sizeof *l->a);
    l->y = malloc(ch * ny * sizeof *l->y);
    l->r = malloc(ch * ny * sizeof *l->r);
    l->b = malloc(ch * k * sizeof *l->b);
    l->sy = malloc(ch * sizeof *l->sy);
    l->abs_sum = calloc(ny, sizeof *l->abs_sum);
    l->huber = calloc(ny, sizeof *l->huber);
    if (!l->x || !l->ata || !l->aty || !l->fac || !l->rhs || !l->a || !l->y || !l->r || !l->b ||
        !l->sy || !l->abs_sum || !l->huber) {
        cc_lad_close(&l);
        return -ENOMEM;
    }
    *out = l;
    return 0;
}

void cc_lad_close(CcLad **pl)
{
    CcLad *l = *pl;
    if (!l)
        return;
    free(l->x);
    free(l->ata);
    free(l->aty);
    free(l->fac);
    free(l->rhs);
    free(l->a);
    free(l->y);
    free(l->r);
    free(l->b);
    free(l->sy);
    free(l->abs_sum);
    free(l->huber);
    free(l);
    *pl = NULL;
}

static int begin(CcLad *l, const double *x, double eps, int sums_only)
{
    if (!(eps > 0) || !isfinite(eps))
        return -EINVAL;
    const size_t k = (size_t)l->K, ny = (size_t)l->NY;
    memcpy(l->x, x, k * ny * sizeof *l->x);
    memset(l->ata, 0, ny * k * k * sizeof *l->ata);
    memset(l->aty, 0, ny * k * sizeof *l->aty);
    memset(l->abs_sum, 0, ny * sizeof *l->abs_sum);
    memset(l->huber, 0, ny * sizeof *l->huber);
    l->eps = eps, l->rows = 0, l->n = 0, l->sums_only = sums_only;
    return 0;
}

int cc_lad_begin(CcLad *l, const double *x, double eps) { return begin(l, x, eps, 0); }

int cc_lad_begin_sums(CcLad *l, const double *x, double eps) { return begin(l, x, eps, 1); }

double *cc_lad_row(CcLad *l, double **y)
{
    *y = l->y + (size_t)l->rows * l->NY;
    return l->a + (size_t)l->rows * l->K;
}

/* The Huber function of width eps: the absolute error, quadratic within eps of 0. */
static double huber(double r, double eps)
{
    double m = fabs(r);
    return m < eps ? r * r / (2 * eps) + eps / 2 : m;
}

/* The buffered rows into every output's residual sums and (unless sums_only) weighted
 * normal equations. */
static void flush(CcLad *l)
{
    const int K = l->K, NY = l->NY, n = l->rows;
    if (n == 0)
        return;
    /* r = a x - y */
    memcpy(l->r, l->y, (size_t)n * NY * sizeof *l->r);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, NY, K, 1.0, l->a, K, l->x, NY, -1.0,
                l->r, NY);
    for (int c = 0; c < NY && l->sums_only; c++)
        for (int j = 0; j < n; j++) {
            double r = l->r[(size_t)j * NY + c];
            l->abs_sum[c] += fabs(r);
            l->huber[c] += huber(r, l->eps);
        }
    for (int c = 0; c < NY && !l->sums_only; c++) {
        for (int j = 0; j < n; j++) {
            double r = l->r[(size_t)j * NY + c], m = fabs(r);
            double sw = 1.0 / sqrt(m > l->eps ? m : l->eps);
            const double *aj = l->a + (size_t)j * K;
            double *bj = l->b + (size_t)j * K;
            for (int i = 0; i < K; i++)
                bj[i] = sw * aj[i];
            l->sy[j] = sw * l->y[(size_t)j * NY + c];
            l->abs_sum[c] += m;
            l->huber[c] += huber(r, l->eps);
        }
        double *g = l->ata + (size_t)c * K * K;
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, K, n, 1.0, l->b, K, 1.0, g, K);
        cblas_dgemv(CblasRowMajor, CblasTrans, n, K, 1.0, l->b, K, l->sy, 1, 1.0,
                    l->aty + (size_t)c * K, 1);
    }
    l->rows = 0;
}

void cc_lad_push(CcLad *l)
{
    l->n++;
    if (++l->rows == CC_LAD_CHUNK)
        flush(l);
}

int64_t cc_lad_rows(const CcLad *l) { return l->n; }

void cc_lad_residuals(CcLad *l, double *abs_sum, double *huber_sum)
{
    flush(l);
    memcpy(abs_sum, l->abs_sum, (size_t)l->NY * sizeof *abs_sum);
    if (huber_sum)
        memcpy(huber_sum, l->huber, (size_t)l->NY * sizeof *huber_sum);
}

double cc_lad_trace(CcLad *l, int c, int n)
{
    flush(l);
    const double *g = l->ata + (size_t)c * l->K * l->K;
    double t = 0;
    for (int i = 0; i < n && i < l->K; i++)
        t += g[(size_t)i * l->K + i];
    return t;
}

int cc_lad_solve(CcLad *l, const double *pen, int n_pen, double *x)
{
    const int K = l->K, NY = l->NY;
    if (n_pen < 0 || n_pen > K)
        return -EINVAL;
    for (int c = 0; c < NY; c++)
        if (!(pen[c] >= 0))
            return -EINVAL;
    flush(l);
    if (l->n == 0)
        return -EAGAIN;
    if (l->sums_only)
        return -EINVAL;
    for (int c = 0; c < NY; c++) {
        memcpy(l->fac, l->ata + (size_t)c * K * K, (size_t)K * K * sizeof *l->fac);
        for (int i = 0; i < n_pen; i++)
            l->fac[(size_t)i * K + i] += pen[c];
        memcpy(l->rhs, l->aty + (size_t)c * K, (size_t)K * sizeof *l->rhs);
        int ret = cc_ridge_spd_solve(l->fac, l->rhs, K, 1);
        if (ret < 0)
            return ret;
        for (int i = 0; i < K; i++)
            x[(size_t)i * NY + c] = l->rhs[i];
    }
    return 0;
}

/* Reference: g (K, K+1), the augmented system [G | rhs], solved by Gaussian elimination
 * with partial pivoting into sol (K). -EDOM on a zero pivot. */
static int gauss_solve(double *g, int K, double *sol)
{
    const int W = K + 1;
    for (int col = 0; col < K; col++) {
        int piv = col;
        for (int i = col + 1; i < K; i++)
            if (fabs(g[(size_t)i * W + col]) > fabs(g[(size_t)piv * W + col]))
                piv = i;
        if (g[(size_t)piv * W + col] == 0)
            return -EDOM;
        if (piv != col)
            for (int j = 0; j < W; j++) {
                double t = g[(size_t)col * W + j];
                g[(size_t)col * W + j] = g[(size_t)piv * W + j];
                g[(size_t)piv * W + j] = t;
            }
        for (int i = col + 1; i < K; i++) {
            double f = g[(size_t)i * W + col] / g[(size_t)col * W + col];
            for (int j = col; j < W; j++)
                g[(size_t)i * W + j] -= f * g[(size_t)col * W + j];
        }
    }
    for (int i = K - 1; i >= 0; i--) {
        double v = g[(size_t)i * W + K];
        for (int j = i + 1; j < K; j++)
            v -= g[(size_t)i * W + j] * sol[j];
        sol[i] = v / g[(size_t)i * W + i];
    }
    return 0;
}

int cc_lad_fit_ref(const double *a, const double *y, int64_t n, int K, int NY, const double *pen,
                   int n_pen, double eps, int iters, double *x)
{
    if (K < 1 || NY < 1 || n < 1 || n_pen < 0 || n_pen > K || !(eps > 0) || iters < 0)
        return -EINVAL;
    double *g = malloc((size_t)K * (K + 1) * sizeof *g);
    double *sol = malloc((size_t)K * sizeof *sol);
    double *next = malloc((size_t)K * NY * sizeof *next);
    int ret = g && sol && next ? 0 : -ENOMEM;
    for (int it = 0; ret == 0 && it < iters; it++) {
        for (int c = 0; ret == 0 && c < NY; c++) {
            memset(g, 0, (size_t)K * (K + 1) * sizeof *g);
            for (int64_t j = 0; j < n; j++) {
                const double *aj = a + (size_t)j * K;
                double r = -y[(size_t)j * NY + c];
                for (int i = 0; i < K; i++)
                    r += aj[i] * x[(size_t)i * NY + c];
                double w = 1.0 / fmax(fabs(r), eps);
                for (int i = 0; i < K; i++) {
                    for (int k = 0; k < K; k++)
                        g[(size_t)i * (K + 1) + k] += w * aj[i] * aj[k];
                    g[(size_t)i * (K + 1) + K] += w * aj[i] * y[(size_t)j * NY + c];
                }
            }
            for (int i = 0; i < n_pen; i++)
                g[(size_t)i * (K + 1) + i] += pen[c];
            ret = gauss_solve(g, K, sol);
            for (int i = 0; ret == 0 && i < K; i++)
                next[(size_t)i * NY + c] = sol[i];
        }
        if (ret == 0)
            memcpy(x, next, (size_t)K * NY * sizeof *x);
    }
    free(g);
    free(sol);
    free(next);
    return ret;
}
