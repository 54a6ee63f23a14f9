/* cc_metrics.c — accuracy accumulators (MAE, MSE, RMSE, NRMSE, MASE, P10–P90 coverage). */
#include "cc_metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Acc {
    int64_t n, skipped, n_scaled, n_cov, n_in;
    double sum_abs, sum_sq, sum_true, sum_scaled;
} Acc;

struct CcMetrics {
    int F, HZ;
    Acc *acc; // (F, HZ)
};

int cc_metrics_open(CcMetrics **out, int n_kpis, int horizon)
{
    *out = NULL;
    if (n_kpis <= 0 || horizon <= 0 || n_kpis > 1 << 16 || horizon > 1 << 16)
        return -EINVAL;
    CcMetrics *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->acc = calloc((size_t)n_kpis * horizon, sizeof *m->acc);
    if (!m->acc) {
        free(m);
        return -ENOMEM;
    }
    m->F = n_kpis;
    m->HZ = horizon;
    *out = m;
    return 0;
}

void cc_metrics_close(CcMetrics **pm)
{
    if (!pm || !*pm)
        return;
    free((*pm)->acc);
    free(*pm);
    *pm = NULL;
}

void cc_metrics_reset(CcMetrics *m) { memset(m->acc, 0, (size_t)m->F * m->HZ * sizeof *m->acc); }

void cc_metrics_add(CcMetrics *m, int f, int k, double y, double yhat, double sd, double scale)
{
    if (f < 0 || f >= m->F || k < 0 || k >= m->HZ)
        return;
    Acc *a = &m->acc[(size_t)f * m->HZ + k];
    if (!isfinite(y) || !isfinite(yhat)) {
        a->skipped++;
        return;
    }
    double e = y - yhat, ae = fabs(e);
    a->n++;
    a->sum_abs += ae;
    a->sum_sq += e * e;
    a->sum_true += y;
    if (isfinite(scale) && scale > 0) {
        a->n_scaled++;
        a->sum_scaled += ae / scale;
    }
    if (isfinite(sd) && sd >= 0) {
        a->n_cov++;
        if (ae <= CC_Z80 * sd)
            a->n_in++;
    }
}

int cc_metrics_merge(CcMetrics *a, const CcMetrics *b)
{
    if (a->F != b->F || a->HZ != b->HZ)
        return -EINVAL;
    for (size_t i = 0; i < (size_t)a->F * a->HZ; i++) {
        Acc *x = &a->acc[i];
        const Acc *y = &b->acc[i];
        x->n += y->n;
        x->skipped += y->skipped;
        x->n_scaled += y->n_scaled;
        x->n_cov += y->n_cov;
        x->n_in += y->n_in;
        x->sum_abs += y->sum_abs;
        x->sum_sq += y->sum_sq;
        x->sum_true += y->sum_true;
        x->sum_scaled += y->sum_scaled;
    }
    return 0;
}

void cc_metrics_get(const CcMetrics *m, int f, int k, CcMetricValues *out)
{
    Acc s;
    memset(&s, 0, sizeof s);
    int f0 = f < 0 ? 0 : f, f1 = f < 0 ? m->F : f + 1;
    int k0 = k < 0 ? 0 : k, k1 = k < 0 ? m->HZ : k + 1;
    if (f >= m->F || k >= m->HZ)
        f1 = f0; /* empty */
    for (int i = f0; i < f1; i++)
        for (int j = k0; j < k1; j++) {
            const Acc *a = &m->acc[(size_t)i * m->HZ + j];
            s.n += a->n;
            s.skipped += a->skipped;
            s.n_scaled += a->n_scaled;
            s.n_cov += a->n_cov;
            s.n_in += a->n_in;
            s.sum_abs += a->sum_abs;
            s.sum_sq += a->sum_sq;
            s.sum_true += a->sum_true;
            s.sum_scaled += a->sum_scaled;
        }
    memset(out, 0, sizeof *out);
    out->n = s.n;
    out->skipped = s.skipped;
    out->n_cov = s.n_cov;
    if (s.n == 0) {
        out->mae = out->mse = out->rmse = out->nrmse = out->mase = out->coverage = out->mean_true =
            NAN;
        return;
    }
    out->mae = s.sum_abs / (double)s.n;
    out->mse = s.sum_sq / (double)s.n;
    out->rmse = sqrt(out->mse);
    out->mean_true = s.sum_true / (double)s.n;
    out->nrmse = out->mean_true != 0 ? out->rmse / fabs(out->mean_true) : NAN; /* never negative */
    out->mase = s.n_scaled ? s.sum_scaled / (double)s.n_scaled : NAN;
    out->coverage = s.n_cov ? (double)s.n_in / (double)s.n_cov : NAN;
}

double cc_mase_scale(const float *x, const uint8_t *mask, int stride, int col, int begin, int end,
                     int season)
{
    if (season < 1)
        return NAN;
    double sum = 0;
    int64_t n = 0;
    int start = begin + season;
    for (int i = start; i < end; i++) {
        size_t a = (size_t)i * stride + col, b = (size_t)(i - season) * stride + col;
        if (mask && (!mask[a] || !mask[b]))
            continue;
        if (!isfinite(x[a]) || !isfinite(x[b]))
            continue;
        sum += fabs((double)x[a] - (double)x[b]);
        n++;
    }
    return n ? sum / (double)n : NAN;
}
