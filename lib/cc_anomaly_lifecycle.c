/*
 * cc_anomaly_lifecycle.c — the alert lifecycle (cc_anomaly.h, "Anomaly lifecycle"): the
 * k-of-n window of over steps, the anomaly episode (firing, escalation, peak, hysteresis,
 * cooldown), its attribution, and how every event (data-quality ones too) is made and
 * emitted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_anomaly_lifecycle.h"

static void make_id(CcAlertEvent *ev, const char *cell, enum CcDqReason r, int kpi, int64_t start)
{
    if (r == CC_DQ_NONE)
        snprintf(ev->id, sizeof ev->id, "%s:anomaly:%lld", cell, (long long)start);
    else if (kpi >= 0)
        snprintf(ev->id, sizeof ev->id, "%s:%s:%d:%lld", cell, cc_dq_reason_name(r), kpi,
                 (long long)start);
    else
        snprintf(ev->id, sizeof ev->id, "%s:%s:%lld", cell, cc_dq_reason_name(r), (long long)start);
}

void cc_alert_event_init(const CcAnomaly *a, const CcAnomalyCell *c, CcAlertEvent *ev,
                         enum CcAlertState st, enum CcDqReason r, int kpi, int64_t start,
                         int64_t step, int severity)
{
    memset(ev, 0, sizeof *ev);
    make_id(ev, c->id, r, kpi, start);
    ev->state = st;
    ev->kind = r == CC_DQ_NONE ? CC_ALERT_ANOMALY : CC_ALERT_DATA_QUALITY;
    ev->reason = r;
    ev->severity = (enum CcAlertSeverity)severity;
    ev->cell_id = c->id;
    ev->kpi = kpi;
    ev->start_step = start;
    ev->step = step;
    ev->ts = step * a->s.step_seconds;
    ev->start_ts = start * a->s.step_seconds;
    ev->score = NAN;
    if (r == CC_DQ_NONE) {
        ev->trace = c->trace;
        ev->trace.live_run =
            c->live_last != NONE_STEP && c->live_last >= start ? c->live_last - start + 1 : 0;
    }
}

void cc_alert_emit(CcAnomalyCell *c, const CcAlertSink *sink, const CcAlertEvent *ev,
                   int64_t quiet_step)
{
    if (quiet_step <= c->quiet_until) {
        c->st.quiet++;
        return;
    }
    if (ev->state == CC_ALERT_FIRING)
        c->st.firing++;
    else
        c->st.resolved++;
    if (sink && sink->emit)
        sink->emit(sink->cookie, ev);
}

/* ------------------------------------------------------------------ attribution */

/* Attribution of one KPI from the expectation and value of the current step. */
static void attr_of(const CcAnomalySettings *s, const KpiState *k, int f, double x,
                    CcAlertAttr *out)
{
    double sd = sd_eff(s, f, k->att_mean, k->att_sd, k->att_scale) / k->att_mul;
    out->kpi = f;
    out->observed = x;
    out->expected = k->att_mean;
    out->lo = k->att_mean - s->interval_z * sd;
    out->hi = k->att_mean + s->interval_z * sd;
    out->z = k->z;
    out->cusum = cusum_over(s, k, f) ? cc_cusum_signed(k->cu_pos, k->cu_neg) : 0;
    out->profile = profile_over(s, k, f) ? cc_cusum_signed(k->pr_pos, k->pr_neg) : 0;
    out->profile_expected = k->pr_exp;
    out->novelty = novel_in_direction(s, k, f) ? k->novel_kind : CC_NOVEL_NONE;
}

/* A KPI to attribute an anomaly step to: |z| over its warning threshold, a CUSUM, or a
 * novel value in its direction (an alert raised by novelty alone named no KPI before). */
static int kpi_is_over(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return isfinite(k->z) && (fabs(k->z) >= kpi_bar(s, k, f) * k->bar || cusum_over(s, k, f) ||
                              profile_over(s, k, f) || novel_in_direction(s, k, f));
}

static int cmp_attr(const void *pa, const void *pb)
{
    double a = fabs(((const CcAlertAttr *)pa)->z), b = fabs(((const CcAlertAttr *)pb)->z);
    return a < b ? 1 : a > b ? -1 : ((const CcAlertAttr *)pa)->kpi - ((const CcAlertAttr *)pb)->kpi;
}

/* The KPIs over at this step, by |z| descending, at most CC_ALERT_MAX_ATTR into out.
 * Returns how many. */
static int attribution(const CcAnomalySettings *s, const CcAnomalyCell *c, const float *values,
                       CcAlertAttr *out)
{
    CcAlertAttr all[CC_MAX_FEATURES];
    int n = 0;
    for (int f = 0; f < c->F; f++)
        if (kpi_is_over(s, &c->k[f], f))
            attr_of(s, &c->k[f], f, values[f], &all[n++]);
    qsort(all, (size_t)n, sizeof *all, cmp_attr);
    if (n > CC_ALERT_MAX_ATTR)
        n = CC_ALERT_MAX_ATTR;
    memcpy(out, all, (size_t)n * sizeof *all);
    return n;
}

/* ------------------------------------------------------------------ window and episode */

static uint64_t window_mask(int n) { return n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1); }

/* Shifts the window to this step (missed steps count as not over) and records it. */
static void window_push(CcAnomalyCell *c, int64_t step, int over, int crit)
{
    int64_t sh = c->win_step == NONE_STEP ? 64 : step - c->win_step;
    if (sh >= 64) {
        c->over_bits = c->crit_bits = 0;
    } else {
        c->over_bits <<= sh;
        c->crit_bits <<= sh;
    }
    c->win_step = step;
    c->over_bits |= (uint64_t)over;
    c->crit_bits |= (uint64_t)crit;
}

/* No episode: fires when the window says so and the cooldown has passed, or (cooldown_crit)
 * the window is critical: the cooldown keeps a burst's tail from raising episode after
 * episode, and a deviation past crit_z is not such a tail. */
static void episode_fire(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                         double score, int n_w, int n_c, const CcAlertSink *sink)
{
    const CcAnomalySettings *s = &a->s;
    Episode *e = &c->anom;
    int cool = e->resolved == NONE_STEP || step > e->resolved + s->cooldown_steps ||
               (s->cooldown_crit && n_c >= s->crit_k);
    if (!cool || (n_w < s->warn_k && n_c < s->crit_k))
        return;
    int oldest = 63 - __builtin_clzll(c->over_bits & window_mask(s->window_n));
    e->start = step - oldest;
    if (e->resolved != NONE_STEP && e->start <= e->resolved)
        e->start = e->resolved + 1; /* ids of episodes never collide */
    e->clear_run = 0;
    e->severity = n_c >= s->crit_k ? CC_SEV_CRITICAL : CC_SEV_WARNING;
    e->peak = score;
    CcAlertEvent ev;
    cc_alert_event_init(a, c, &ev, CC_ALERT_FIRING, CC_DQ_NONE, -1, e->start, step, e->severity);
    ev.score = score;
    ev.n_attr = attribution(s, c, values, ev.attr);
    c->n_peak = ev.n_attr;
    memcpy(c->peak, ev.attr, (size_t)ev.n_attr * sizeof *ev.attr);
    cc_alert_emit(c, sink, &ev, step);
}

/* Firing and over again: a new peak is kept, a warning becomes critical once. */
static void episode_over(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                         double score, int n_c, const CcAlertSink *sink)
{
    const CcAnomalySettings *s = &a->s;
    Episode *e = &c->anom;
    e->clear_run = 0;
    int escalate = e->severity == CC_SEV_WARNING && n_c >= s->crit_k;
    CcAlertAttr attr[CC_ALERT_MAX_ATTR];
    int n = 0;
    if (escalate || score > e->peak)
        n = attribution(s, c, values, attr);
    if (score > e->peak) {
        e->peak = score;
        c->n_peak = n;
        memcpy(c->peak, attr, (size_t)n * sizeof *attr);
    }
    if (escalate) {
        e->severity = CC_SEV_CRITICAL;
        CcAlertEvent ev;
        cc_alert_event_init(a, c, &ev, CC_ALERT_FIRING, CC_DQ_NONE, -1, e->start, step,
                            e->severity);
        ev.score = score;
        ev.n_attr = n;
        memcpy(ev.attr, attr, (size_t)n * sizeof *attr);
        cc_alert_emit(c, sink, &ev, step);
    }
}

/* Firing and clear: resolves after resolve_m clear steps, reporting the peak. */
static void episode_clear(const CcAnomaly *a, CcAnomalyCell *c, int64_t step,
                          const CcAlertSink *sink)
{
    Episode *e = &c->anom;
    if (++e->clear_run < a->s.resolve_m)
        return;
    CcAlertEvent ev;
    cc_alert_event_init(a, c, &ev, CC_ALERT_RESOLVED, CC_DQ_NONE, -1, e->start, step, e->severity);
    ev.score = e->peak;
    ev.n_attr = c->n_peak;
    memcpy(ev.attr, c->peak, (size_t)c->n_peak * sizeof *c->peak);
    e->start = NONE_STEP;
    e->resolved = step;
    e->clear_run = 0;
    cc_alert_emit(c, sink, &ev, step);
}

/* An over step of the episode in its trace: a live one ends what was held before it. */
static void trace_over(CcAnomalyCell *c, const StepVerdict *v, int live)
{
    CcEpisodeTrace *t = &c->trace;
    if (live) {
        t->held = t->unscored = t->hold_rules = 0;
        t->hold_kpi = -1;
    } else {
        t->held++;
        t->hold_rules |= v->hold_rules;
        t->hold_kpi = v->hold_kpi;
    }
}

/* An over step with no episode firing: the trace of the episode it may fire. */
static void trace_start(CcAnomalyCell *c, const StepVerdict *v, int live)
{
    memset(&c->trace, 0, sizeof c->trace);
    c->trace.fire_rules = v->rules;
    c->trace.fire_kpi = v->over_kpi;
    c->trace.hold_kpi = -1;
    trace_over(c, v, live);
}

void cc_anomaly_lifecycle_step(const CcAnomaly *a, CcAnomalyCell *c, int64_t step,
                               const float *values, const StepVerdict *v, const CcAlertSink *sink)
{
    const CcAnomalySettings *s = &a->s;
    int over = v->n_scored > 0 && v->n_over >= s->min_kpis;
    int crit = over && v->n_crit > 0;
    window_push(c, step, over, crit);
    if (v->n_scored) {
        c->st.scored++;
        c->st.over += over;
        c->score_step = step;
        c->score = v->score;
    }
    int n_w = __builtin_popcountll(c->over_bits & window_mask(s->window_n));
    int n_c = __builtin_popcountll(c->crit_bits & window_mask(s->window_n));
    int live = over && v->n_live >= s->min_kpis;
    if (live)
        c->live_last = step;
    if (c->anom.start == NONE_STEP) {
        if (over) {
            trace_start(c, v, live);
            episode_fire(a, c, step, values, v->score, n_w, n_c, sink);
        }
    } else if (over) {
        trace_over(c, v, live);
        episode_over(a, c, step, values, v->score, n_c, sink);
    } else if (v->n_scored || v->n_supp) {
        /* A step whose KPIs are all held by DQ alerts counts as clear: the DQ alert has
         * taken over, the anomaly episode must not stay open forever. */
        episode_clear(a, c, step, sink);
    } else {
        c->trace.unscored++;
    }
}

/* ------------------------------------------------------------------ readers */

/* Appends the firing event of episode e to out[*n] if there is room, and counts it. */
static void active_one(const CcAnomaly *a, const CcAnomalyCell *c, const Episode *e,
                       enum CcDqReason r, int kpi, CcAlertEvent *out, int max, int *n)
{
    if (e->start == NONE_STEP)
        return;
    if (*n < max) {
        CcAlertEvent *ev = &out[*n];
        cc_alert_event_init(a, c, ev, CC_ALERT_FIRING, r, kpi, e->start, c->last_step, e->severity);
        if (r == CC_DQ_NONE) {
            ev->score = e->peak;
            ev->n_attr = c->n_peak;
            memcpy(ev->attr, c->peak, (size_t)c->n_peak * sizeof *c->peak);
        }
    }
    (*n)++;
}

int cc_anomaly_cell_active(const CcAnomaly *a, const CcAnomalyCell *c, CcAlertEvent *out, int max)
{
    int n = 0;
    active_one(a, c, &c->anom, CC_DQ_NONE, -1, out, max, &n);
    active_one(a, c, &c->zero, CC_DQ_ALL_ZERO, -1, out, max, &n);
    active_one(a, c, &c->missing, CC_DQ_MISSING, -1, out, max, &n);
    for (int f = 0; f < c->F; f++) {
        active_one(a, c, &c->k[f].stuck, CC_DQ_STUCK, f, out, max, &n);
        active_one(a, c, &c->k[f].bounds, CC_DQ_BOUNDS, f, out, max, &n);
        active_one(a, c, &c->k[f].absent, CC_DQ_MISSING, f, out, max, &n);
    }
    return n;
}

void cc_anomaly_cell_stats(const CcAnomalyCell *c, CcAnomalyCellStats *out)
{
    *out = c->st;
    out->anomaly_firing = c->anom.start != NONE_STEP;
    int dq = (c->zero.start != NONE_STEP) + (c->missing.start != NONE_STEP);
    for (int f = 0; f < c->F; f++)
        dq += (c->k[f].stuck.start != NONE_STEP) + (c->k[f].bounds.start != NONE_STEP) +
              (c->k[f].absent.start != NONE_STEP);
    out->dq_firing = dq;
    out->anomaly_critical = out->anomaly_firing && c->anom.severity == CC_SEV_CRITICAL;
    /* all_zero and a silent cell's missing are the critical DQ alerts (a KPI's missing warns) */
    out->dq_critical = (c->zero.start != NONE_STEP) + (c->missing.start != NONE_STEP);
}
