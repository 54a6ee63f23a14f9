/*
 * cc_anomaly_cell.h — the anomaly detector's state, which every file of the module reads:
 * the context (CcAnomaly), a cell (CcAnomalyCell) and the state of each of its KPIs
 * (KpiState: calibrations, sums, episodes, the window ring), the constants that tune them,
 * and the small rules read off them. The functions of each file are in its own header
 * (cc_anomaly_dq.h, _profile.h, _window.h, _lifecycle.h); cc_anomaly.c calls down into them
 * and none calls back. Not for hosts: they use cc_anomaly.h. The module's files, in the
 * order a step goes through them:
 *     cc_anomaly.c           contexts, cells, expectations, and observe: the scoring steps
 *     cc_anomaly_dq.c        data-quality rules (missing, all_zero, stuck, bounds) and tick
 *     cc_anomaly_profile.c   the seasonal profile (usual value per time of day)
 *     cc_anomaly_window.c    the multi-scale window rule
 *     cc_cusum.h             the two-sided CUSUM both sustained-deviation rules run
 *     cc_anomaly_likelihood.c the anomaly likelihood of the residuals, value novelty
 *     cc_anomaly_shape.c     shape novelty (a window of points unlike every earlier one)
 *     cc_anomaly_lifecycle.c the k-of-n window, episodes, attribution, event emission
 *     cc_alert_json.c        an alert event as JSON, and the names of its enums
 *     cc_anomaly_settings.c  defaults, validation, settings by name
 *     cc_anomaly_state.c     the state as bytes, for snapshots
 *     cc_anomaly_evidence.c  a cell's evidence as a share of its bars, for hosts
 */
#ifndef CC_ANOMALY_CELL_H
#define CC_ANOMALY_CELL_H

#include <math.h>
#include <stdlib.h>

#include "cc_anomaly.h"
#include "cc_anomaly_likelihood.h"
#include "cc_anomaly_shape.h"
#include "cc_cusum.h"

#define NONE_STEP INT64_MIN

/* Lag calibration. The L-step-old forecast is less precise than the one-step forecast in
 * ways its sd may not say (a poor or untrained model, a bursty KPI): its residuals |z_L|
 * can be much larger than the one-step ones on normal data, and every such step would be
 * an alert. Each KPI keeps running means of |z_1| and |z_L| (a plain mean over the first
 * LAGCAL_STEPS scored steps, then exponential with that time constant; updates clipped at
 * LAGCAL_CLIP times the mean so that bursts move them by a bounded amount; not updated
 * while the cell's anomaly episode fires, so an anomaly does not calibrate itself away),
 * and z_L is multiplied by min(1, mean|z_1| / mean|z_L|): the lagged forecast is never
 * trusted more than the one-step forecast. Before both means have LAGCAL_MIN_N updates the
 * lagged z is not used at all (a new cell scores one-step only for its first ~48 steps).
 * The seasonal profile's scale is the same kind of running mean, with the same constants. */
#define LAGCAL_STEPS 500
#define LAGCAL_CLIP 5.0
#define LAGCAL_MIN_N 48
/* The profile z's scale (PROFILE_SPREAD). A KPI whose spread follows its level (a load, a
 * drop rate whose noise is a share of the value) needs each hour judged against that
 * hour's spread: one scale for the whole day, mostly the quiet night's, made every busy
 * hour's ordinary day-to-day wobble a deviation of several scales (issue 32: 95 % of the
 * synthetic fleet's false incidents). So each bin of the day keeps the usual |x − profile|
 * of its steps (both day types together): started from the KPI's one scale (pr_abs), then a
 * plain mean over the bin's samples up to PROFILE_SPREAD_DAYS × profile_days days of them,
 * exponential with that time constant after (a spread needs more samples than a mean);
 * each update clipped at LAGCAL_CLIP times the bin's value; none while the cell's episode
 * fires (a drift or a shift must not widen its own hour's scale on the way). An hour's
 * spread is a noisy estimate (its residuals are alike within a day: about one sample a
 * day), so it counts only as far as it is past its own noise: the scale is the larger of
 * the one scale and the bin's lower bound, its value times 1 − PROFILE_SPREAD_REL_SD/√days
 * (the relative sd of one Gaussian |x|; days = the bin's samples / samples per day, at most
 * the time constant's), interpolated like the usual value. Narrowing quiet hours on the
 * bins' values as they are made false alarms (NAB: 25 more false positives a seed, its
 * score 68.0 → 65.2), and widening every hour whose estimate happens to be high slowed
 * the profile on a KPI of one spread at every hour (test_profile_drift): a quiet hour, and
 * every hour of such a KPI, is judged as before. */
#define PROFILE_SPREAD_DAYS 4.0
#define PROFILE_SPREAD_REL_SD 0.755
#define GAUSS_MEAN_ABS 0.798 /* mean |x| of a standard Gaussian: sd = mean |x| / this */

/* Tail calibration (tail_q > 0, see cc_anomaly.h): each KPI tracks the tail_q quantile t of
 * its own |z| by a multiplicative stochastic-approximation step: t ·= e^{λ·q} when |z| > t,
 * t ·= e^{−λ·(1−q)} otherwise (in equilibrium P(|z| > t) = 1 − q), λ = TAIL_RATE /
 * tail_steps, starting from the Gaussian quantile (the model taken at its word). Not updated
 * while the cell's episode fires (an anomaly does not calibrate itself away). z is then
 * multiplied by min(1, zq / t), zq the Gaussian quantile of tail_q: a KPI whose residuals
 * have a heavier tail than the forecast's sd says is scored against its own tail, never
 * more sensitively than the forecast says. Before TAIL_MIN_N updates the factor is 1.
 * Each sign of z has its own quantile (tail for z ≥ 0, tail_lo for z < 0), each learning on
 * the steps of its sign at twice the rate, so that tail_steps stays the time constant in
 * steps: a KPI's load bursts (upward) teach its upper tail and leave a drop of the same
 * size scored as the forecast says, and a KPI with one-sided bursts is not discounted on
 * the other side (docs/design/alert-sensitivity.md, "NAB with the defaults"). A sign with
 * fewer than TAIL_MIN_N steps of its own, while both together have them, is scored by the
 * larger of the two quantiles (as by the one tail of before). */
#define TAIL_RATE 30.0
#define TAIL_MIN_N 100

/* The KPI's own bar (bar_p > 0, see cc_anomaly.h): peaks over a threshold on the calibrated
 * |z|. The threshold u is BAR_U Gaussian sds of the KPI's own (u = BAR_U · mean|z| /
 * GAUSS_MEAN_ABS; that running mean like the lag calibration's); p_u is the share of steps
 * past u (a plain mean over the first BAR_STEPS scored steps, then exponential with that
 * time constant), m and m2 the mean and mean square of those steps' excesses over u (plain
 * means over the first BAR_EXC_N, then exponential with that time constant; each excess
 * clipped at BAR_CLIP · m), none learnt while the cell's episode fires. A generalised
 * Pareto tail P(|z| > u + y) = p_u·(1 + ξy/σ)^{−1/ξ} is fitted to them by the method of
 * moments (ξ in [0, BAR_XI_MAX]) and the bar is its level at bar_p. For a Gaussian KPI
 * (ξ → 0, the exponential tail) that is 5.1 at bar_p 1e-5 (its true 1e-5 level is 4.4: the
 * fit errs high on a light tail); a heavy-tailed one (ξ > 0) gets a much higher bar. Until
 * BAR_MIN_N steps and BAR_MIN_EXC excesses are learnt the bar is warn_z. */
#define BAR_U 2.5
#define BAR_CLIP 10.0
#define BAR_XI_MAX 0.45
#define BAR_STEPS 2000
#define BAR_EXC_N 100
#define BAR_MIN_N 300
#define BAR_MIN_EXC 5
/* The profile CUSUM's own threshold (PROFILE_CAL): residuals from the usual value that are
 * alike for hours make the sums' excursions longer and higher than the independent steps
 * profile_h assumes. Each KPI fits its excursions' peaks past u = PROFILE_CAL_U ·
 * profile_h (a peak is the highest P⁺ or P⁻ between two zeros, not while the cell fires)
 * like the KPI's own bar (BAR_U): their rate per step and mean excess, a generalised Pareto
 * tail, and the threshold is that tail's level at the target rate, never under profile_h.
 * Until PROFILE_CAL_MIN_DAYS of steps and BAR_MIN_EXC peaks are learnt it is profile_h. */
#define PROFILE_CAL_U 0.5
#define PROFILE_CAL_MIN_DAYS 2

/* The lagged forecast's echo (lag_echo; -1 = the lag L): a model that copies the day before
 * forecasts a deviation of yesterday into today's steps; the one-step forecast corrects it from the
 * steps just seen, the forecast made L steps earlier does not. Each cell keeps one bit per
 * step for its last ECHO_BITS steps: some KPI's |z| was past cusum_k, some rule was over or
 * a DQ alert held the cell. The lagged forecast is not used for a step whose time one day
 * earlier (86400 / step_seconds steps; the rule is off where that and lag_echo do not fit
 * in the bits) had such a step within ±lag_echo steps. */
#define ECHO_BITS 1024

/* The multi-scale window rule (cc_anomaly_window.c): scales per KPI and the z it keeps. */
#define CC_WIN_SCALES 3
#define CC_WIN_RING 32

typedef struct WinState {
    float ring[CC_WIN_RING];       ///< the last calibrated z, clipped to ±warn_z
    int32_t pos, count;            ///< next ring slot, z in the ring
    int16_t w[CC_WIN_SCALES];      ///< the scale in steps each tail belongs to (0: none)
    double tail[CC_WIN_SCALES];    ///< tracked tail_q quantile of |mean of the last w z|
    int32_t tail_n[CC_WIN_SCALES]; ///< its updates
} WinState;

/* One alert episode (anomaly of a cell, or one DQ condition). */
typedef struct Episode {
    int64_t start;     ///< onset step while firing, NONE_STEP otherwise
    int64_t resolved;  ///< step of the last resolution, NONE_STEP if never
    int32_t clear_run; ///< consecutive clear steps while firing
    int32_t severity;  ///< CcAlertSeverity while firing
    double peak;       ///< anomaly: peak cell score of the episode
} Episode;

typedef struct KpiState {
    double exp_mean, exp_sd, exp_scale; ///< expectation for CcAnomalyCell.exp_step
    double z;                           ///< z of the last scored step (NaN: not scored)
    double att_mean, att_sd, att_scale; ///< the expectation z was taken against
    double att_mul;         ///< factor the z was multiplied by (lag calibration; 1: none)
    double abs1, absl;      ///< running means of |z| one-step and lagged (lag calibration)
    int32_t n1, nl;         ///< their updates (saturate at LAGCAL_STEPS)
    double cu_pos, cu_neg;  ///< CUSUM sums S⁺, S⁻ (cusum_k, cusum_h)
    double pr_pos, pr_neg;  ///< profile CUSUM sums P⁺, P⁻ (profile_k, profile_h)
    double pr_abs;          ///< running mean |x − profile|, the profile z's scale
    int32_t pr_n;           ///< its updates (saturate at LAGCAL_STEPS)
    double pr_exp;          ///< the profile's value at the last scored step (NaN: none)
    double pr_h;            ///< the profile CUSUM's threshold now (PROFILE_CAL; 0: profile_h)
    double pc_peak[2];      ///< the running excursion's peak of P⁺, P⁻ (PROFILE_CAL)
    double pc_rate;         ///< share of steps ending an excursion past u
    double pc_exc, pc_exc2; ///< mean and mean squared excess over u of those excursions
    int32_t pc_n;           ///< updates of pc_rate (saturate at the rate's steps)
    int32_t pc_exc_n;       ///< updates of pc_exc (saturate at BAR_EXC_N)
    float last_val;         ///< last observed value
    float change_rate;      ///< EWMA of "value changed"
    float run_max;          ///< longest recent run of equal values (decaying)
    int32_t run;            ///< consecutive observed steps equal to last_val
    int32_t has_last;
    double tail;          ///< the tracked tail_q quantile of |z|, z ≥ 0 (0: none; TAIL_RATE)
    int32_t tail_n;       ///< its updates (saturate at INT32_MAX / 2)
    double tail_lo;       ///< the same of z < 0
    int32_t tail_lo_n;    ///< its updates
    double bar_abs;       ///< the KPI's own bar (BAR_U): running mean of its calibrated |z|
    double bar_rate;      ///< its share of steps past u
    double bar_exc;       ///< the mean excess over u of those steps
    double bar_exc2;      ///< their mean squared excess
    int32_t bar_n;        ///< updates of bar_abs and bar_rate (saturate at BAR_STEPS)
    int32_t bar_exc_n;    ///< updates of bar_exc (saturate at BAR_EXC_N)
    double own_bar;       ///< its warning bar at the last scored step (0: kpi_warn's)
    WinState win;         ///< the multi-scale window rule (window_s)
    float zero_rate;      ///< share of observed steps exactly 0 (all_zero's "zero is normal")
    int32_t zero_n;       ///< its updates (saturate at stuck_memory_steps)
    double ll;            ///< anomaly likelihood (log scale) of the last scored step, NaN: none
    CcLikState lik;       ///< the anomaly likelihood stage (cc_anomaly_likelihood.h)
    CcNovelty nov;        ///< the range of the values seen (cc_anomaly_likelihood.h)
    int32_t novel;        ///< the last scored step was novel: +1 above, -1 below the range, 0 not
    int32_t novel_kind;   ///< what made it novel (CcNoveltyKind; with novel)
    int32_t absent_run;   ///< steps in a row the KPI was absent from records that gave others
    int64_t absent_since; ///< the first of them (NONE_STEP: the KPI was given last)
    Episode stuck, bounds;
    Episode absent;  ///< its missing-data alert (kpi_missing_steps)
    double fb_mul;   ///< the false-alarm bar factor at fb_step (1: none; cc_anomaly_cell_feedback)
    int64_t fb_step; ///< the step of the last verdict
    double bar;      ///< the factor in effect at the step being scored (not saved)
} KpiState;

struct CcAnomaly {
    CcAnomalySettings s;
    double zq; ///< the Gaussian |z| quantile of s.tail_q (0 when off), found once per settings
    int32_t novelty_min_n; ///< s.novelty_min_s in steps: values a range holds before novelty
};

struct CcAnomalyCell {
    char id[CC_ANOMALY_CELL_ID_MAX + 1];
    int F;
    int64_t last_step;             ///< last observed step, -1 none
    int64_t exp_step;              ///< step the expectation is for, NONE_STEP none
    int64_t score_step;            ///< last scored step, -1 none
    double score;                  ///< cell score at score_step
    double lik;                    ///< max anomaly likelihood of the KPIs at last_step, NaN none
    uint64_t over_bits, crit_bits; ///< bit i = step win_step - i
    int64_t win_step;              ///< step of bit 0, NONE_STEP before the first observation
    int32_t zero_run;
    int32_t hold_run;   ///< outage steps held in a row (cc_anomaly_outage_hold; not saved)
    int32_t hold_spent; ///< the outage outlasted max_steps: its zeros are fed (not saved)
    Episode anom, zero, missing;
    int n_peak;
    CcAlertAttr peak[CC_ALERT_MAX_ATTR];
    int64_t quiet_until;
    int learn_frozen; ///< a maintenance window: nothing is learnt (not saved)
    CcAnomalyCellStats st;
    KpiState *k;         // (F)
    int SW, SD, SC;      ///< shape novelty's w, ds and cats when allocated (0: none)
    CcShape *shape;      // (F) the stage per KPI, followed in the same allocation by
    int64_t *shape_used; // (F, SC) the window each category last took and
    float *shape_box;    // (F, SC, 2, SW) each category's lowest then highest points
    int L;               ///< lag ring length (settings.lag_steps when allocated)
    int64_t *lag_target; // (L) step each ring entry is the expectation for, followed in
                         // the same allocation by lag
    float *lag;          // (L, F, 3) mean, sd, scale from the forecast made L steps earlier
    int NB;              ///< profile bins per day (86400 / profile_bin_s when allocated)
    float *prof;         // (2, NB, F) usual value per day type (weekday, weekend) and bin,
                         // followed in the same allocation by prof_sc and prof_n
    float *prof_sc;      // (NB, F) the usual |x − profile| per bin, both day types (0: not
                         // learnt yet; see PROFILE_SPREAD)
    uint16_t *prof_n;    // (2, NB, F) samples averaged into each bin so far (saturating)

    uint64_t echo[ECHO_BITS / 64]; ///< bit t % ECHO_BITS: step t deviated (see ECHO_BITS)

    /* diagnostics (CcEpisodeTrace), not in the snapshot record */
    int64_t live_last;    ///< last step that deviated live, NONE_STEP none
    CcEpisodeTrace trace; ///< the anomaly episode's (live_run filled when an event is made)
};

/* One allocation for a lag ring of L entries of F KPIs: the targets, then the values
 * (*values). NULL on -ENOMEM. */
static inline int64_t *cc_lag_block(int L, int F, float **values)
{
    int64_t *t = calloc((size_t)L, sizeof *t + (size_t)F * 3 * sizeof **values);
    *values = t ? (float *)(t + L) : NULL;
    return t;
}

/* A value of KPI f is observed: flagged so by the host (mask NULL: all) and finite. */
static inline int kpi_observed(const float *values, const uint8_t *mask, int f)
{
    return (!mask || mask[f]) && isfinite(values[f]);
}

static inline double kpi_warn(const CcAnomalySettings *s, int f)
{
    return s->kpi[f].warn_z > 0 ? s->kpi[f].warn_z : s->warn_z;
}

static inline double kpi_crit(const CcAnomalySettings *s, int f)
{
    return s->kpi[f].crit_z > 0 ? s->kpi[f].crit_z : s->crit_z;
}

/* KPI f's warning bar at its last scored step: its own (bar_p) or kpi_warn; the feedback
 * factor (k->bar) multiplies it where it is compared. */
static inline double kpi_bar(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return k->own_bar > 0 ? k->own_bar : kpi_warn(s, f);
}

/* Its critical bar: kpi_crit, scaled as its own bar is from kpi_warn. */
static inline double kpi_bar_crit(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return k->own_bar > 0 ? k->own_bar * kpi_crit(s, f) / kpi_warn(s, f) : kpi_crit(s, f);
}

static inline double kpi_lik_over(const CcAnomalySettings *s, int f)
{
    return s->kpi[f].lik_over > 0 ? s->kpi[f].lik_over : s->lik_over;
}

static inline double kpi_novelty_tol(const CcAnomalySettings *s, int f)
{
    return s->kpi[f].novelty_tol > 0 ? s->kpi[f].novelty_tol : s->novelty_tol;
}

/* The sd a z is taken with: the forecast's, floored (see cc_anomaly.h, Scoring). */
static inline double sd_eff(const CcAnomalySettings *s, int f, double mean, double sd, double scale)
{
    double fl = s->kpi[f].sd_floor;
    if (s->sd_floor_rel * fabs(mean) > fl)
        fl = s->sd_floor_rel * fabs(mean);
    if (s->sd_floor_scale * scale > fl)
        fl = s->sd_floor_scale * scale;
    return sd > fl ? sd : fl;
}

/* One update of a running mean |z| (see LAGCAL_STEPS). */
static inline void absmean_update(double *m, int32_t *n, double z)
{
    double v = fabs(z);
    if (*n > 0 && v > LAGCAL_CLIP * *m)
        v = LAGCAL_CLIP * *m;
    if (*n < LAGCAL_STEPS)
        (*n)++;
    *m += (v - *m) / (double)*n;
}

/* One step of a tracked tail_q quantile *t of |v| learning on every `every`-th step on
 * average (1: every step; 2: a sign's steps): its rate is that many times tail_steps' (see
 * TAIL_RATE). */
static inline void cc_tail_learn_every(const CcAnomalySettings *s, double *t, int32_t *n, double v,
                                       double every)
{
    double lam = every * TAIL_RATE / s->tail_steps;
    *t *= fabs(v) > *t ? exp(lam * s->tail_q) : exp(-lam * (1 - s->tail_q));
    if (*n < INT32_MAX / 2)
        (*n)++;
}

/* One step of a tracked tail_q quantile *t of |v| (see TAIL_RATE). */
static inline void cc_tail_learn(const CcAnomalySettings *s, double *t, int32_t *n, double v)
{
    double lam = TAIL_RATE / s->tail_steps;
    *t *= fabs(v) > *t ? exp(lam * s->tail_q) : exp(-lam * (1 - s->tail_q));
    if (*n < INT32_MAX / 2)
        (*n)++;
}

/* The KPI counts as over by its CUSUM (sums of its last scored step, in its direction). */
static inline int cusum_over(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return cc_cusum_over(k->cu_pos, k->cu_neg, s->cusum_h, s->kpi[f].direction);
}

/* The KPI's last scored step was novel (value or shape) in its direction. */
static inline int novel_in_direction(const CcAnomalySettings *s, const KpiState *k, int f)
{
    const int dir = s->kpi[f].direction;
    return k->novel && (!dir || dir == k->novel);
}

/* KPI f's shape novelty categories: its (SC, 2, SW) boxes and (SC) last uses. */
static inline float *shape_box_of(const CcAnomalyCell *c, int f)
{
    return c->shape_box + (size_t)f * c->SC * 2 * c->SW;
}

static inline int64_t *shape_used_of(const CcAnomalyCell *c, int f)
{
    return c->shape_used + (size_t)f * c->SC;
}

/* The profile CUSUM's threshold of KPI k now (PROFILE_CAL): profile_h or above. */
static inline double profile_h_of(const CcAnomalySettings *s, const KpiState *k)
{
    return k->pr_h > s->profile_h ? k->pr_h : s->profile_h;
}

/* The KPI counts as over by its seasonal profile's CUSUM, in its direction. */
static inline int profile_over(const CcAnomalySettings *s, const KpiState *k, int f)
{
    return cc_cusum_over(k->pr_pos, k->pr_neg, profile_h_of(s, k), s->kpi[f].direction);
}

#endif
