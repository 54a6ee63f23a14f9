/* linear_baseline.c — NLinear fitted in closed form, `cellcast eval`'s linear method (see
 * linear_baseline.h). */
#include "linear_baseline.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_ridge.h"

struct CctLinear {
    int L, H, K, F;
    int *kidx;      /* (K) */
    double *lambda; /* (K) the penalty of each KPI's map */
    double *coef;   /* (K, L, H): rows i < L-1 weigh x_{t-L+1+i} − x_t, row L-1 is the bias */
};

void cct_linear_default_settings(CctLinearSettings *s)
{
    memset(s, 0, sizeof *s);
    s->window = 336;
    s->lambda = -1;
}

/* Origins t with inputs t-L+1..t and targets t+1..t+H all inside the fit ranges. */
static int64_t count_origins(const CcRange *fit, int n_series, int L, int H)
{
    int64_t n = 0;
    for (int s = 0; s < n_series; s++) {
        int64_t c = (int64_t)fit[s].end - fit[s].begin - L - H + 1;
        n += c > 0 ? c : 0;
    }
    return n;
}

/* The largest L in [2, want] with at least 2·L origins, 0 when there is none (the count
 * falls as L grows, so a bisection finds it). */
static int cut_window(const CcRange *fit, int n_series, int want, int H)
{
    int lo = 2, hi = want;
    if (hi < lo || count_origins(fit, n_series, lo, H) < 2 * lo)
        return 0;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (count_origins(fit, n_series, mid, H) >= 2 * (int64_t)mid)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The forecast of coefficients c (L, H) for feature f of se at origin t (see the header). */
static void forecast(const double *c, int L, int H, int F, const CcSeries *se, int f, int t,
                     double *out)
{
    const double xt = se->x[(size_t)t * F + f];
    for (int k = 0; k < H; k++)
        out[k] = xt + c[(size_t)(L - 1) * H + k];
    for (int i = 0; i < L - 1; i++) {
        int r = t - L + 1 + i;
        double d = se->x[(size_t)(r > 0 ? r : 0) * F + f] - xt;
        if (d == 0)
            continue;
        const double *ci = c + (size_t)i * H;
        for (int k = 0; k < H; k++)
            out[k] += d * ci[k];
    }
}

/* Whether the H targets of origin t are all observed. */
static int targets_observed(const CcSeries *se, int F, int f, int t, int H)
{
    for (int k = 0; k < H; k++)
        if (!se->mask[(size_t)(t + 1 + k) * F + f])
            return 0;
    return 1;
}

/* Origin t of se as a row of the regression (its targets observed: the caller checked). */
static void push_origin(CcRidge *rg, const CcSeries *se, int F, int f, int t, int L, int H)
{
    const double xt = se->x[(size_t)t * F + f];
    double *y, *a = cc_ridge_row(rg, &y);
    for (int i = 0; i < L - 1; i++)
        a[i] = se->x[(size_t)(t - L + 1 + i) * F + f] - xt;
    a[L - 1] = 1.0;
    for (int k = 0; k < H; k++)
        y[k] = se->x[(size_t)(t + 1 + k) * F + f] - xt;
    cc_ridge_push(rg);
}

/* Solves with lambda relative to the inputs' mean square: the same for any units; a
 * constant KPI (no input variation at all) still gets a positive penalty, hence W = 0. */
static int solve(CcRidge *rg, int L, double lambda, double *coef)
{
    const int64_t n = cc_ridge_rows(rg);
    double ms = cc_ridge_trace(rg, L - 1) / ((double)n * (L - 1));
    return cc_ridge_solve(rg, lambda * (double)n * (ms > 0 ? ms : 1.0), L - 1, coef);
}

/* The first row of series s's held-out tail (the last CCT_LINEAR_VAL_FRAC of its fit rows). */
static int val_begin(const CcRange *fit)
{
    return fit->end - (int)((double)(fit->end - fit->begin) * CCT_LINEAR_VAL_FRAC);
}

/* Mean squared error over the held-out origins (targets in the tail, observed) of
 * coefficients c; *n gets their number. */
static double val_mse(const CctLinear *lb, const CcDataset *ds, const CcRange *fit, int f,
                      const double *c, double *out, int64_t *n)
{
    const int L = lb->L, H = lb->H, F = lb->F;
    double se2 = 0;
    *n = 0;
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        int t0 = val_begin(&fit[s]) - 1, tmin = fit[s].begin + L - 1;
        for (int t = t0 > tmin ? t0 : tmin; t + H < fit[s].end; t++) {
            if (!targets_observed(se, F, f, t, H))
                continue;
            forecast(c, L, H, F, se, f, t, out);
            for (int k = 0; k < H; k++) {
                double e = out[k] - se->x[(size_t)(t + 1 + k) * F + f];
                se2 += e * e;
            }
            (*n)++;
        }
    }
    return *n ? se2 / ((double)*n * H) : NAN;
}

static const double lambda_grid[] = {1e-4, 1e-3, 1e-2, 1e-1, 1};

/* The map of KPI q: its normal equations over every usable origin, then the solve. With
 * lambda < 0 the penalty is chosen first: fitted on the origins whose targets end before
 * each series' held-out tail, scored on the tail, the best of lambda_grid kept; then the
 * tail's origins are added and the map refitted on all. */
static int fit_kpi(CctLinear *lb, const CcDataset *ds, const CcRange *fit, int q, double lambda,
                   char *msg, size_t msglen)
{
    const int L = lb->L, H = lb->H, F = lb->F, f = lb->kidx[q];
    const int choose = lambda < 0;
    double *coef = lb->coef + (size_t)q * L * H, *out = malloc((size_t)H * sizeof *out);
    CcRidge *rg = NULL;
    int ret = out ? cc_ridge_open(&rg, L, H) : -ENOMEM;
    if (ret < 0)
        goto done;
    /* pass 0: the origins before each tail (all of them when lambda is given); pass 1:
     * the rest */
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < ds->n_series; s++) {
            const CcSeries *se = &ds->series[s];
            const int vb = choose ? val_begin(&fit[s]) : fit[s].end;
            for (int t = fit[s].begin + L - 1; t + H < fit[s].end; t++)
                if ((t + H < vb) == (pass == 0) && targets_observed(se, F, f, t, H))
                    push_origin(rg, se, F, f, t, L, H);
        }
        if (pass == 1 || !choose)
            break;
        lb->lambda[q] = CCT_LINEAR_LAMBDA_FALLBACK;
        double best = INFINITY;
        int64_t nv = 0;
        for (size_t g = 0;
             g < sizeof lambda_grid / sizeof *lambda_grid && cc_ridge_rows(rg) >= 2 * (int64_t)L;
             g++) {
            if (solve(rg, L, lambda_grid[g], coef) < 0)
                continue;
            double mse = val_mse(lb, ds, fit, f, coef, out, &nv);
            if (mse < best)
                best = mse, lb->lambda[q] = lambda_grid[g];
        }
    }
    if (!choose)
        lb->lambda[q] = lambda;
    const int64_t n = cc_ridge_rows(rg);
    if (n < 2 * (int64_t)L) {
        snprintf(msg, msglen,
                 "linear skipped: KPI %s has %lld origins with observed targets before the test "
                 "range, fewer than 2·L = %d",
                 ds->features[f], (long long)n, 2 * L);
        ret = -EAGAIN;
        goto done;
    }
    ret = solve(rg, L, lb->lambda[q], coef);
    if (ret == -EDOM)
        snprintf(msg, msglen,
                 "linear skipped: the system of KPI %s is singular (a penalty > 0 "
                 "avoids it)",
                 ds->features[f]);
done:
    cc_ridge_close(&rg);
    free(out);
    return ret;
}

int cct_linear_open(CctLinear **out, const CcDataset *ds, const CcRange *fit, const int *kidx,
                    int K, const CctLinearSettings *s, char *msg, size_t msglen)
{
    *out = NULL;
    msg[0] = 0;
    if (s->window < 1 || s->horizon < 1 || !(s->lambda >= 0 || s->lambda == -1) || K < 1)
        return -EINVAL;
    const int L = cut_window(fit, ds->n_series, s->window, s->horizon);
    int64_t rows = 0;
    for (int q = 0; q < ds->n_series; q++)
        rows += fit[q].end > fit[q].begin ? fit[q].end - fit[q].begin : 0;
    if (L == 0) {
        snprintf(msg, msglen,
                 "linear skipped: the %lld rows before the test range hold fewer than 2·L "
                 "origins of L inputs and %d targets for any L ≥ 2",
                 (long long)rows, s->horizon);
        return -EAGAIN;
    }
    CctLinear *lb = calloc(1, sizeof *lb);
    if (!lb)
        return -ENOMEM;
    lb->L = L, lb->H = s->horizon, lb->K = K, lb->F = ds->n_features;
    lb->kidx = malloc((size_t)K * sizeof *lb->kidx);
    lb->coef = malloc((size_t)K * L * s->horizon * sizeof *lb->coef);
    lb->lambda = malloc((size_t)K * sizeof *lb->lambda);
    int ret = lb->kidx && lb->coef && lb->lambda ? 0 : -ENOMEM;
    if (ret == 0)
        memcpy(lb->kidx, kidx, (size_t)K * sizeof *kidx);
    for (int q = 0; q < K && ret == 0; q++)
        ret = fit_kpi(lb, ds, fit, q, s->lambda, msg, msglen);
    if (ret < 0) {
        cct_linear_close(&lb);
        return ret;
    }
    if (L < s->window)
        snprintf(msg, msglen,
                 "linear window cut from %d to %d steps: the %lld rows before the test range "
                 "hold %lld origins (at least 2·L wanted)",
                 s->window, L, (long long)rows,
                 (long long)count_origins(fit, ds->n_series, L, s->horizon));
    *out = lb;
    return 0;
}

void cct_linear_close(CctLinear **plb)
{
    CctLinear *lb = *plb;
    if (!lb)
        return;
    free(lb->kidx);
    free(lb->coef);
    free(lb->lambda);
    free(lb);
    *plb = NULL;
}

int cct_linear_window(const CctLinear *lb) { return lb->L; }

double cct_linear_lambda(const CctLinear *lb, int q) { return lb->lambda[q]; }

void cct_linear_forecast(const CctLinear *lb, const CcSeries *se, int q, int t, double *out)
{
    forecast(lb->coef + (size_t)q * lb->L * lb->H, lb->L, lb->H, lb->F, se, lb->kidx[q], t, out);
}
