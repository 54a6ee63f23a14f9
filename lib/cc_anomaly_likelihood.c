/*
 * cc_anomaly_likelihood.c — the anomaly likelihood stage (cc_anomaly_likelihood.h): the
 * short average of a KPI's raw scores scored against its long-run distribution; and value
 * novelty, a value out of the range seen.
 */
#include "cc_anomaly_likelihood.h"

#include <math.h>

double cc_lik_raw(double z) { return isfinite(z) ? log1p(fabs(z)) : NAN; }

/* The log-scale likelihood of a Gaussian upper tail probability q. */
static double lik_log(double q)
{
    double ll = -log10(q + 1e-10) / 10.0;
    return ll < 0 ? 0 : ll > 1 ? 1 : ll;
}

double cc_lik_of(const CcLikState *st, double m)
{
    if (st->n < CC_LIK_MIN_N)
        return NAN;
    double sd = sqrt(st->var) > CC_LIK_MIN_SD ? sqrt(st->var) : CC_LIK_MIN_SD;
    double x = (m - st->mean) / sd;
    return x > 0 ? lik_log(0.5 * erfc(x / M_SQRT2)) : 0;
}

double cc_lik_step(CcLikState *st, int short_n, int long_steps, double r, int learn)
{
    if (!isfinite(r) || short_n < 1 || short_n > CC_LIK_SHORT_MAX || long_steps < 1)
        return NAN;
    if (st->filled > short_n || st->pos >= short_n) /* short_n changed: a new ring */
        st->filled = st->pos = 0;
    st->ring[st->pos] = (float)r;
    st->pos = (st->pos + 1) % short_n;
    if (st->filled < short_n)
        st->filled++;
    /* summed afresh each step (short_n ≤ 32): a running sum would drift in float */
    double m = 0;
    for (int i = 0; i < st->filled; i++)
        m += st->ring[i];
    m /= st->filled;
    double ll = cc_lik_of(st, m);
    if (learn && st->filled == short_n) {
        if (st->n < long_steps)
            st->n++;
        /* deviations clipped at CC_LIK_CLIP sd: an anomaly's own scores must not widen
         * the distribution that judges it faster than a few percent a step */
        double sd = sqrt(st->var) > CC_LIK_MIN_SD ? sqrt(st->var) : CC_LIK_MIN_SD;
        double a = 1.0 / st->n, d = m - st->mean;
        if (st->n > CC_LIK_MIN_N && fabs(d) > CC_LIK_CLIP * sd)
            d = d > 0 ? CC_LIK_CLIP * sd : -CC_LIK_CLIP * sd;
        st->mean += a * d;
        st->var = (1 - a) * (st->var + a * d * d);
    }
    return ll;
}

int cc_novelty_step(CcNovelty *nv, double x, double tol, int32_t min_n)
{
    if (!isfinite(x))
        return 0;
    double margin = tol * (nv->hi - nv->lo);
    int out = 0;
    if (tol > 0 && nv->n >= CC_LIK_MIN_N && nv->n >= min_n)
        out = x > nv->hi + margin ? 1 : x < nv->lo - margin ? -1 : 0;
    if (!nv->n || x > nv->hi)
        nv->hi = x;
    if (!nv->n || x < nv->lo)
        nv->lo = x;
    if (nv->n < CC_NOVELTY_MAX_N)
        nv->n++;
    return out;
}

int cc_lik_valid(const CcLikState *st, const CcNovelty *nv)
{
    if (nv->n < 0 || !isfinite(nv->lo) || !isfinite(nv->hi) || nv->lo > nv->hi)
        return 0;
    if (st->pos < 0 || st->pos >= CC_LIK_SHORT_MAX || st->filled < 0 ||
        st->filled > CC_LIK_SHORT_MAX || st->n < 0 || !isfinite(st->mean) ||
        !(st->var >= 0 && isfinite(st->var)))
        return 0;
    for (int i = 0; i < st->filled; i++)
        if (!isfinite(st->ring[i]))
            return 0;
    return 1;
}
