/*
 * cc_anomaly_dq.c — the data-quality rules (cc_anomaly.h, "Data-quality alerts"): missing
 * data, all_zero, stuck and bounds, each an episode that fires at the first step its
 * condition holds and resolves after dq_resolve_steps clear steps. They run on every
 * observation before the anomaly scoring, which does not score what they hold.
 */
#include "cc_anomaly_dq.h"
#include "cc_anomaly_lifecycle.h"

static int kpi_stuck_steps(const CcAnomalySettings *s, int f)
{
    int n = s->kpi[f].stuck_steps;
    return n == 0 ? s->stuck_steps : n;
}

/* A DQ event with the one attribution entry of a per-KPI alert (attr NULL: none). */
static void dq_emit(const CcAnomaly *a, CcAnomalyCell *c, enum CcAlertState st, enum CcDqReason r,
                    int kpi, int64_t start, int64_t step, int severity, const CcAlertAttr *attr,
                    const CcAlertSink *sink)
{
    CcAlertEvent ev;
    cc_alert_event_init(a, c, &ev, st, r, kpi, start, step, severity);
    if (attr) {
        ev.attr[0] = *attr;
        ev.n_attr = 1;
    }
    cc_alert_emit(c, sink, &ev, step);
}

/* DQ episode step: cond holds at `step` (onset `onset` when it starts firing). */
static void dq_update(const CcAnomaly *a, CcAnomalyCell *c, Episode *e, int cond, enum CcDqReason r,
                      int kpi, int64_t step, int64_t onset, int severity, const CcAlertAttr *attr,
                      const CcAlertSink *sink)
{
    if (e->start == NONE_STEP) {
        if (!cond)
            return;
        e->start = onset;
        e->clear_run = 0;
        e->severity = severity;
        dq_emit(a, c, CC_ALERT_FIRING, r, kpi, onset, step, severity, attr, sink);
        return;
    }
    if (cond) {
        e->clear_run = 0;
        return;
    }
    if (++e->clear_run < a->s.dq_resolve_steps)
        return;
    int64_t start = e->start;
    e->start = NONE_STEP;
    e->resolved = step;
    e->clear_run = 0;
    dq_emit(a, c, CC_ALERT_RESOLVED, r, kpi, start, step, e->severity, attr, sink);
}

int cc_dq_blocks(const CcAnomalySettings *s, const Episode *e, int64_t step)
{
    if (e->start != NONE_STEP)
        return 1;
    return e->resolved != NONE_STEP && step - e->resolved <= s->dq_grace_steps;
}

/* Missing data ends with any observation. */
static void missing_resolve(const CcAnomaly *a, CcAnomalyCell *c, int64_t step,
                            const CcAlertSink *sink)
{
    if (c->missing.start == NONE_STEP)
        return;
    int64_t start = c->missing.start;
    c->missing.start = NONE_STEP;
    c->missing.resolved = step;
    dq_emit(a, c, CC_ALERT_RESOLVED, CC_DQ_MISSING, -1, start, step, c->missing.severity, NULL,
            sink);
}

/* Zero is normal for KPI f: said so, or learnt from its zero share (cc_anomaly.h, all_zero).
 * The share needs LAGCAL_MIN_N updates before it is trusted. */
static int zero_normal(const CcAnomalySettings *s, const KpiState *k, int f)
{
    int o = s->kpi[f].zero_normal;
    if (o)
        return o > 0;
    return s->zero_normal_rate > 0 && k->zero_n >= LAGCAL_MIN_N &&
           k->zero_rate >= s->zero_normal_rate;
}

/* The zero share of KPI k with an observed value v: a plain mean over the first
 * stuck_memory_steps updates, then exponential with that time constant. */
static void zero_rate_update(const CcAnomalySettings *s, KpiState *k, float v)
{
    if (k->zero_n < s->stuck_memory_steps)
        k->zero_n++;
    k->zero_rate += ((float)(v == 0.0f) - k->zero_rate) / (float)k->zero_n;
}

/* all_zero's judgement of one observation, on what the KPIs knew before it: *all_zero when
 * every observed KPI is exactly 0 (and one is observed); returns 1 when one of the observed
 * KPIs is one where zero is not normal. The outage hold (cc_anomaly_outage_hold) judges by
 * this too, so that the model is spared exactly the steps the alert calls an outage. */
static int zero_judge(const CcAnomaly *a, const CcAnomalyCell *c, const float *values,
                      const uint8_t *mask, int *all_zero)
{
    int n_obs = 0, n_zero = 0, outage = 0;
    for (int f = 0; f < c->F; f++) {
        if (!kpi_observed(values, mask, f))
            continue;
        n_obs++;
        n_zero += values[f] == 0.0f;
        outage |= !zero_normal(&a->s, &c->k[f], f);
    }
    *all_zero = n_obs > 0 && n_zero == n_obs;
    return outage;
}

/* all_zero: every observed KPI exactly 0 for cc_anomaly_zero_steps steps, one of them a KPI where
 * zero is not normal. Returns 1 when this step is all zero (stuck is not raised then). */
static int all_zero_update(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                           const uint8_t *mask, const CcAlertSink *sink)
{
    int all_zero_now, outage = zero_judge(a, c, values, mask, &all_zero_now);
    for (int f = 0; f < c->F && !c->learn_frozen; f++) /* judged above, learnt now */
        if (kpi_observed(values, mask, f))
            zero_rate_update(&a->s, &c->k[f], values[f]);
    c->zero_run = all_zero_now ? c->zero_run + 1 : 0;
    /* a firing all_zero stays firing while the cell is all zero (only data clears it) */
    int cond = c->zero_run >= cc_anomaly_zero_steps(a) && (outage || c->zero.start != NONE_STEP);
    dq_update(a, c, &c->zero, cond, CC_DQ_ALL_ZERO, -1, step, step - c->zero_run + 1,
              CC_SEV_CRITICAL, NULL, sink);
    return all_zero_now;
}

int cc_anomaly_outage_hold(const CcAnomaly *a, CcAnomalyCell *c, const float *values,
                           const uint8_t *mask, int max_steps)
{
    int all_zero, outage = zero_judge(a, c, values, mask, &all_zero);
    int n_obs = 0;
    for (int f = 0; f < c->F && !n_obs; f++)
        n_obs = kpi_observed(values, mask, f);
    if (!n_obs) /* imputed by the host: inside a held outage, held too (not counted) */
        return c->hold_run > 0 && !c->hold_spent;
    /* Like the alert, an outage stays one while the cell is all zero, whatever the KPIs
     * learn meanwhile; unlike it, a new run of zeros starts one only where zero is not
     * normal: a firing all_zero spans runs fewer than dq_resolve_steps steps apart (a KPI
     * that is mostly 0 but not yet learnt so), and holding those runs would feed the model
     * the rare non-zero values in place of its usual zeros. */
    if (!all_zero || !(outage || c->hold_run > 0 || c->hold_spent)) {
        c->hold_run = 0;
        c->hold_spent = 0;
        return 0;
    }
    if (c->hold_spent || c->hold_run >= max_steps) {
        c->hold_spent = 1; /* the zeros are the new normal until the outage ends */
        return 0;
    }
    c->hold_run++;
    return 1;
}

/* The run of equal values of KPI k, its decaying longest normal run and its change rate,
 * with the observed value v (nst: its stuck_steps). */
static void run_update(const CcAnomalySettings *s, KpiState *k, float v, int nst)
{
    if (k->has_last) {
        int changed = v != k->last_val;
        k->run_max *= 1.0f - 1.0f / (float)s->stuck_memory_steps;
        if (changed && (float)k->run > k->run_max)
            k->run_max = (float)k->run; /* a run ended: remember its length */
        k->run = changed ? 1 : k->run + 1;
        if (nst < 0 || k->run < nst)
            k->change_rate += ((float)changed - k->change_rate) / (float)s->change_rate_steps;
    } else {
        k->run = 1;
        k->has_last = 1;
    }
    k->last_val = v;
}

/* stuck and bounds of KPI f, observed at v. */
static void kpi_dq_update(const CcAnomaly *a, CcAnomalyCell *c, int f, int64_t step, float v,
                          int all_zero_now, const CcAlertSink *sink)
{
    const CcAnomalySettings *s = &a->s;
    KpiState *k = &c->k[f];
    int nst = kpi_stuck_steps(s, f);
    run_update(s, k, v, nst);
    int stuck = nst > 0 && k->run >= nst && k->change_rate >= s->stuck_min_change_rate &&
                (double)k->run >= s->stuck_run_factor * k->run_max && !all_zero_now;
    CcAlertAttr at = {f, v, NAN, NAN, NAN, NAN, 0, 0, NAN, CC_NOVEL_NONE};
    if (c->exp_step == step)
        at.expected = k->exp_mean;
    /* A firing stuck alert stays firing while the run goes on (even if the change rate
     * or the all-zero state says otherwise now): only a change clears it. */
    if (k->stuck.start != NONE_STEP && nst > 0 && k->run >= nst)
        stuck = 1;
    dq_update(a, c, &k->stuck, stuck, CC_DQ_STUCK, f, step, step - k->run + 1, CC_SEV_WARNING, &at,
              sink);
    const CcAnomalyKpi *kp = &s->kpi[f];
    int oob = kp->min < kp->max && (v < kp->min || v > kp->max);
    CcAlertAttr ab = {f, v, at.expected, kp->min, kp->max, NAN, 0, 0, NAN, CC_NOVEL_NONE};
    dq_update(a, c, &k->bounds, oob, CC_DQ_BOUNDS, f, step, step, CC_SEV_WARNING, &ab, sink);
}

/* KPI f absent (left out or null) from records that gave other KPIs at this step, or not
 * (present): its missing-data alert, a warning, from the first step of the absence. */
static void absent_update(const CcAnomaly *a, CcAnomalyCell *c, int f, int64_t step, int present,
                          const CcAlertSink *sink)
{
    KpiState *k = &c->k[f];
    int n = a->s.kpi_missing_steps;
    if (present) {
        k->absent_run = 0;
        k->absent_since = NONE_STEP;
    } else {
        if (k->absent_since == NONE_STEP)
            k->absent_since = step;
        if (k->absent_run < INT32_MAX)
            k->absent_run++;
    }
    dq_update(a, c, &k->absent, n > 0 && k->absent_run >= n, CC_DQ_MISSING, f, step,
              k->absent_since, CC_SEV_WARNING, NULL, sink);
}

void cc_dq_observe(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                   const uint8_t *mask, const CcAlertSink *sink)
{
    missing_resolve(a, c, step, sink);
    int all_zero_now = all_zero_update(a, c, step, values, mask, sink);
    int any = 0;
    for (int f = 0; f < c->F; f++)
        any |= kpi_observed(values, mask, f);
    for (int f = 0; f < c->F; f++) {
        int seen = kpi_observed(values, mask, f);
        if (seen) /* imputed values neither advance nor break runs */
            kpi_dq_update(a, c, f, step, values[f], all_zero_now, sink);
        if (any) /* an imputed step (no record) is the cell's silence, not the KPI's */
            absent_update(a, c, f, step, seen, sink);
    }
}

/* all_zero's evidence (cc_anomaly_cell_evidence): the run of all-zero steps over zero_steps
 * while a KPI where zero is not normal is among the cell's (the run would be an outage), or
 * while all_zero fires; else 0. */
double cc_dq_zero_evidence(const CcAnomaly *a, const CcAnomalyCell *c)
{
    if (c->zero_run <= 0)
        return 0;
    int outage = c->zero.start != NONE_STEP;
    for (int f = 0; f < c->F && !outage; f++)
        outage = !zero_normal(&a->s, &c->k[f], f);
    return outage ? (double)c->zero_run / cc_anomaly_zero_steps(a) : 0;
}

int64_t cc_anomaly_missing_after(const CcAnomaly *a)
{
    return a->s.missing_after_s > 0 ? a->s.missing_after_s : 3 * a->s.step_seconds;
}

/* A time, not a count of steps, by default: six steps are 12 minutes of 2-minute data but
 * six hours of hourly data, where a whole hour of exact zeros on a KPI that is never 0 is
 * already an outage. At least 2, so that one poll a collector wrote as zeros is not one. */
int cc_anomaly_zero_steps(const CcAnomaly *a)
{
    if (a->s.zero_steps > 0)
        return a->s.zero_steps;
    int64_t n = (720 + a->s.step_seconds - 1) / a->s.step_seconds;
    return n > 2 ? (int)(n < 1000000 ? n : 1000000) : 2;
}

void cc_anomaly_tick(const CcAnomaly *a, CcAnomalyCell *c, int64_t now_s, const CcAlertSink *sink)
{
    const CcAnomalySettings *s = &a->s;
    if (c->last_step < 0 || c->missing.start != NONE_STEP)
        return;
    int64_t after = cc_anomaly_missing_after(a);
    int64_t end = (c->last_step + 1) * s->step_seconds; /* end of the last step */
    if (now_s - end <= after)
        return;
    CcAlertEvent ev;
    c->missing.start = c->last_step + 1;
    c->missing.severity = CC_SEV_CRITICAL;
    c->missing.clear_run = 0;
    cc_alert_event_init(a, c, &ev, CC_ALERT_FIRING, CC_DQ_MISSING, -1, c->missing.start,
                        now_s / s->step_seconds, CC_SEV_CRITICAL);
    cc_alert_emit(c, sink, &ev, c->missing.start);
}
