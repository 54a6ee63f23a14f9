/*
 * cc_anomaly_evidence.c — a cell's evidence as a share of its bars (cc_anomaly.h,
 * cc_anomaly_cell_evidence): what a host weighing several cells together reads after each
 * observation. Reads the state the scoring left; changes nothing.
 */
#include <math.h>

#include "cc_anomaly_dq.h"

/* A sum's share of its bar h, signed by the side it is on, while the step deviates that way
 * (d: the step's own statistic past k; the live condition of cc_cusum_live below the bar). */
static double sum_share(double pos, double neg, double h, double k, int dir, double d)
{
    if (!(h > 0) || !isfinite(d))
        return 0;
    if (dir >= 0 && d > k && pos > 0)
        return pos / h;
    if (dir <= 0 && d < -k && neg > 0)
        return -neg / h;
    return 0;
}

static double larger(double a, double b) { return fabs(b) > fabs(a) ? b : a; }

double cc_anomaly_cell_evidence(const CcAnomaly *a, const CcAnomalyCell *c, CcAnomalyEvidence *ev)
{
    const CcAnomalySettings *s = &a->s;
    int fresh = c->score_step >= 0 && c->score_step == c->last_step;
    double top = ev->zero = cc_dq_zero_evidence(a, c);
    ev->step = c->last_step;
    for (int f = 0; f < c->F; f++) {
        const KpiState *k = &c->k[f];
        double e = 0, z = k->z;
        ev->kpi_forecast[f] = 0;
        const int dir = s->kpi[f].direction;
        if (fresh && isfinite(z)) {
            if (dir == 0 || (dir > 0) == (z > 0))
                e = z / (kpi_bar(s, k, f) * k->bar);
            e = larger(e, sum_share(k->cu_pos, k->cu_neg, s->cusum_h, s->cusum_k, dir, z));
            ev->kpi_forecast[f] = e;
            /* the profile z is not kept: the side of the value against the profile is */
            if (isfinite(k->pr_exp) && k->has_last)
                e = larger(e, sum_share(k->pr_pos, k->pr_neg, profile_h_of(s, k), 0, dir,
                                        (double)k->last_val - k->pr_exp));
        }
        ev->kpi[f] = e;
        if (fabs(e) > top)
            top = fabs(e);
    }
    return top;
}
