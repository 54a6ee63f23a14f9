/* linear_baseline.c — NLinear fitted in closed form, `cellcast eval`'s linear method (see
 * linear_baseline.h). */
#include "linear_baseline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_ridge.h"

struct CctLinear {
    int L, H, K, F;
    int *kidx;    /* (K) */
    double *coef; /* (K, L, H): rows i < L-1 weigh x_{t-L+1+i} − x_t, row L-1 is the bias */
};

void cct_linear_default_settings(CctLinearSettings *s)
{
    memset(s, 0, sizeof *s);
    s->window = 336;
    s->lambda = 1e-3;
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

/* The map of KPI q: its normal equations over every usable origin, then the solve. */
static int fit_kpi(CctLinear *lb, const CcDataset *ds, const CcRange *fit, int q, double lambda,
                   char *msg, size_t msglen)
{
    const int L = lb->L, H = lb->H, F = lb->F, f = lb->kidx[q];
    CcRidge *rg = NULL;
    int ret = cc_ridge_open(&rg, L, H);
    if (ret < 0)
        return ret;
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        for (int t = fit[s].begin + L - 1; t + H < fit[s].end; t++) {
            int ok = 1;
            for (int k = 0; k < H && ok; k++)
                ok = se->mask[(size_t)(t + 1 + k) * F + f];
            if (!ok)
                continue;
            const double xt = se->x[(size_t)t * F + f];
            double *y, *a = cc_ridge_row(rg, &y);
            for (int i = 0; i < L - 1; i++)
                a[i] = se->x[(size_t)(t - L + 1 + i) * F + f] - xt;
            a[L - 1] = 1.0;
            for (int k = 0; k < H; k++)
                y[k] = se->x[(size_t)(t + 1 + k) * F + f] - xt;
            cc_ridge_push(rg);
        }
    }
    const int64_t n = cc_ridge_rows(rg);
    if (n < 2 * (int64_t)L) {
        snprintf(msg, msglen,
                 "linear skipped: KPI %s has %lld origins with observed targets before the test "
                 "range, fewer than 2·L = %d",
                 ds->features[f], (long long)n, 2 * L);
        ret = -EAGAIN;
        goto done;
    }
    /* lambda relative to the inputs' mean square: the same for any units; a constant KPI
     * (no input variation at all) still gets a positive penalty, hence W = 0 */
    double ms = cc_ridge_trace(rg, L - 1) / ((double)n * (L - 1));
    double pen = lambda * (double)n * (ms > 0 ? ms : 1.0);
    ret = cc_ridge_solve(rg, pen, L - 1, lb->coef + (size_t)q * L * H);
    if (ret == -EDOM)
        snprintf(msg, msglen, "linear: the system of KPI %s is singular (give a penalty > 0)",
                 ds->features[f]);
done:
    cc_ridge_close(&rg);
    return ret;
}

int cct_linear_open(CctLinear **out, const CcDataset *ds, const CcRange *fit, const int *kidx,
                    int K, const CctLinearSettings *s, char *msg, size_t msglen)
{
    *out = NULL;
    msg[0] = 0;
    if (s->window < 1 || s->horizon < 1 || !(s->lambda >= 0) || K < 1)
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
    int ret = lb->kidx && lb->coef ? 0 : -ENOMEM;
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
    free(lb);
    *plb = NULL;
}

int cct_linear_window(const CctLinear *lb) { return lb->L; }

void cct_linear_forecast(const CctLinear *lb, const CcSeries *se, int q, int t, double *out)
{
    const int L = lb->L, H = lb->H, F = lb->F, f = lb->kidx[q];
    const double *c = lb->coef + (size_t)q * L * H;
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
