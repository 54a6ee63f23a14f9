/*
 * cc_anomaly.h — per-cell anomaly scoring and the alert lifecycle (pure: no I/O, no clock,
 * no global state). The host feeds observations, forecasts and clock ticks; the module
 * calls back with alert transitions.
 *
 * Scoring. An observation x_t of KPI f is scored against the forecast made one step
 * earlier for step t (horizon step 0 of the forecast at t-1, cc_forecast_point(fc, f, 0)):
 *     sd_eff = max(sd, kpi.sd_floor, sd_floor_rel·|mean|, sd_floor_scale·sigma_f)
 *     z_f    = (x_f - mean_f) / sd_eff
 * where sigma_f is the channel's normalisation scale (CcForecast.sigma; 0 when the
 * expectation comes from elsewhere, e.g. a baseline). With lag_steps = L > 0 (or -1:
 * L = the forecasts' horizon HZ, the oldest forecast there is for a step; default 0: off,
 * docs/results.md "Synthetic data" says why), x_t is also
 * scored against the forecast made L steps earlier (horizon step L-1 of the forecast at
 * t-L) and the z of larger magnitude is used: a one-step forecaster adapts to a level
 * shift or a drift within a few steps, the L-step-old forecast does not, so shifts stay
 * visible for L steps (k-of-n can confirm them). Hosts that set lagged expectations
 * themselves (cc_anomaly_set_expect_lagged) use an explicit L > 0.
 * Echo (lag_echo, default -1 = L): a model that copies the day before forecasts
 * yesterday's deviation into today; the one-step forecast corrects it from the steps just
 * seen, the L-step-old one does not. The lagged forecast is not used for a step whose time
 * one day earlier (86400 / step_seconds steps, when that plus lag_echo is under 1024) had,
 * within ±lag_echo steps, a step with some KPI's |z| ≥ cusum_k, some KPI over or a DQ
 * alert holding the cell (one bit per step and cell; not in the snapshot: after a restart
 * the rule knows the steps since).
 * Lag calibration: the lagged z is multiplied by min(1, mean|z_1| / mean|z_L|), running
 * means per KPI of the one-step and lagged |z| (plain mean over the first 500 scored
 * steps, then exponential with time constant 500, updates clipped at 5× the mean, frozen
 * while the cell's anomaly episode fires), and not used before both have 48 updates: a
 * long-horizon forecast worse than its sd says (a poor model) is never trusted more than
 * the one-step forecast. When the lagged z is the larger, attribution reports that
 * forecast, its interval widened by the same factor. A KPI is "over" at a step when
 * |z_f| ≥ its warning threshold in its direction (both, up or down), "critical" when
 * |z_f| ≥ its critical threshold.
 * Sustained deviations (cusum_h > 0): a shift or a drift of 2-3 σ keeps |z| at 3-4 for
 * many steps, below any threshold that keeps false alerts rare. Each KPI keeps a two-sided
 * CUSUM of its z (the calibrated lagged z when there is one, else the one-step z), each
 * step clipped to ±(cusum_k + 1):
 *     S⁺ = max(0, S⁺ + z − cusum_k),   S⁻ = max(0, S⁻ − z − cusum_k)
 * and is also "over" (warning, never critical) while S⁺ or S⁻ (in its direction) is
 * ≥ cusum_h: at least cusum_h steps of |z| ≥ cusum_k + 1, or more steps closer to cusum_k,
 * and (sustained_live 2, the default) the step's own z is past cusum_k in that sum's
 * direction: a sum drains by cusum_k − |z| a step after its deviation, and without that
 * condition held an episode a few steps past it.
 * Clipping keeps one spike (left to the z thresholds) from charging the sums.
 * Seasonal profile (profile_h > 0): a forecaster follows a slow drift or a long shift (its
 * context fills with it), so against any of its forecasts the deviation never looks
 * large. Each KPI also keeps its "usual value at this time of day": a mean per bin of
 * profile_bin_s seconds of the day, separately for weekdays and weekends (local time =
 * UTC + profile_utc_offset_s), each an exponential average over about profile_days days of
 * its type, linearly interpolated between bin centres (steps shorter than a bin; longer
 * steps use their own bin). The residual x − profile is scaled by its hour's usual
 * |residual| / 0.798 (the sd of a Gaussian with that mean |r|): the larger of the KPI's
 * running mean |residual| over all hours (plain mean over the first 500 steps, then time
 * constant 500, updates clipped at 5× the mean) and its bin's own mean |residual| less that
 * estimate's noise (both day types; a plain mean over 4·profile_days days of samples, then
 * exponential; not learnt while the cell fires; cc_anomaly_cell.h, PROFILE_SPREAD),
 * interpolated like the profile, floored by sd_floor, sd_floor_rel·|profile| and
 * sd_floor_scale·sigma_f like the forecast's sd; and a second two-sided CUSUM runs on that
 * profile z, clipped to ±(profile_k + 1):
 *     P⁺ = max(0, P⁺ + w·(zp − profile_k)),   P⁻ = max(0, P⁻ + w·(−zp − profile_k))
 * with w = min(1, S / profile_unit_s): a deviation from the usual value persists for
 * minutes, so steps shorter than profile_unit_s would count it many times over.
 * The KPI is also "over" (warning) while P⁺ or P⁻ (in its direction) is ≥ profile_h and
 * (sustained_live ≥ 1, default 2) the step's own zp is past profile_k in that sum's direction:
 * a sum only decays by profile_k − |zp| a step once the deviation is under profile_k, and
 * without that condition a deviation just under one sd held an episode for days.
 * profile_h assumes residuals independent from step to step; where a KPI's stay alike for
 * hours its sums wander higher. With profile_fa_weeks > 0 (default 4) each KPI fits the
 * peaks of its own sums' excursions past profile_h / 2 (not while the cell fires) and its
 * threshold is where they would cross once per profile_fa_weeks, never under profile_h
 * (cc_anomaly_cell.h, PROFILE_CAL).
 *
 * Tail calibration (tail_q > 0, default 0.999): each KPI tracks the tail_q quantile t of its
 * own |z| (stochastic approximation, adaptation time tail_steps, not while the cell's
 * episode fires; cc_anomaly_cell.h, TAIL_RATE) and its z is multiplied by
 * min(1, zq/t), zq the Gaussian quantile of tail_q (3.29 for 0.999): a bursty KPI, whose
 * residuals have a heavier tail than the forecast's sd says, is scored against its own
 * tail, so warn_z means the same rarity on every KPI; never more sensitive than the sd.
 * The KPI's own bar (bar_p > 0, off by default): the tail calibration matches the KPIs at
 * the tail_q quantile, but past it a bursty KPI's residuals keep a heavy tail and a calm
 * one's fall off like a Gaussian's, so one warn_z is either too high for the calm or too
 * low for the bursty. Each KPI fits a generalised Pareto tail to its own calibrated |z|
 * past u = 2.5·(mean |z| / 0.798) (peaks over a threshold: the rate p_u of steps past u,
 * the mean and mean square of their excesses, frozen while the cell's episode fires;
 * cc_anomaly_cell.h, BAR_U) and its warning bar is the level that tail passes with
 * probability bar_p per step, within [bar_floor, warn_z] (warn_z until the fit is warm);
 * its critical bar is that times crit_z / warn_z. A KPI's own kpis.<kpi>.warn_z fixes its
 * bar.
 * Window rule (window_s > 0, off by default; cc_anomaly_window.c): the mean of the
 * calibrated z (each clipped to ±warn_z) over the last W steps, for W = window_s,
 * window_s/2 and window_s/6 in steps (distinct, ≥ 2, ≤ 32), each in units of its own tracked
 * tail_q quantile times zq, counts as over (warning) at |·| ≥ window_z (0: warn_z) on any
 * scale: events of minutes that no single step shows (measured in docs/results.md).
 * Anomaly likelihood (lik_over > 0, off by default; cc_anomaly_likelihood.h): each KPI's
 * ln(1 + |z|), z calibrated, averaged over lik_short_n steps, against that average's own
 * long-run mean and variance (time constant lik_long_steps; updates clipped at 3 sd), as
 * ll = −log10(Q)/10 of the Gaussian upper tail Q (0.5 at Q = 1e-5): the KPI is over while
 * ll ≥ lik_over (per KPI: kpis.<kpi>.lik_over) in its direction. Runs of moderate
 * residuals that no single step shows, judged against the KPI's own history (after
 * Numenta's anomaly likelihood); cc_anomaly_cell_likelihood reads it. Off by default: on
 * the synthetic control and Barcelona it raises the false alerts (the measurement log (`git show
 * 0c50596:docs/operations.md` §7)). With sustained_live 2 (the default) the likelihood holds a KPI
 * over only at a step whose own ln(1 + |z|), taken as the short average, is past lik_over too: the
 * run must be unusual and the step part of it, and the average, which stays up for lik_short_n
 * steps after the run, does not hold an episode on its own (likewise the window rule: at a step
 * whose window of steps like it would be over).
 * Novelty (novelty_tol > 0; 0.05 by default, 0.02 until 2026-11-25): a value beyond the
 * range of the KPI's values seen so far by more than novelty_tol (per KPI:
 * kpis.<kpi>.novelty_tol) times that range is over, in its direction, once the range holds
 * novelty_min_s of scored values (two days; and at least 100: a new cell's range grows for
 * its first day or two, and each new extreme was an alert, the measurement log (`git show
 * 0c50596:docs/operations.md` §7)), and named in the attribution (novelty "value"). warn_z does not
 * bound it: a false-alert budget (anomaly-eval --budget) scales novelty_tol with the thresholds.
 * Shape novelty (shape_w > 0, off by default; cc_anomaly_shape.h): every shape_ds observed
 * values of a KPI are averaged into a point, and a window of its last shape_w points that
 * resembles no earlier window (after fuzzy ART's categories, as NAB's ARTime uses them:
 * vigilance shape_rho, shape_cats categories per KPI) is over in the direction of its last
 * point, counted as the novelty rule, once shape_warm windows were seen and when the
 * KPI's previous new shape is at least shape_quiet windows old: a shape change inside the
 * usual range (a flattened daily pattern) that value novelty cannot see. Neither warn_z nor
 * a budget bounds it; on bursty KPIs it raises false alerts (the measurement log (`git show
 * 0c50596:docs/operations.md` §7)). The profile is scored only where both bins have ≥
 * profile_min_days days of data and the scale has 48 updates; it learns from every observed,
 * unblocked step (updates clipped at ±3 scales once the scale is warm, so an anomaly moves it
 * little), and also while it fires, so a permanent change is learnt in a few days rather than
 * alerting forever. KPIs that are disabled, imputed (mask 0), in their data-quality grace period or
 * with a data-quality alert firing are not scored; at such a step of an observed KPI held by a DQ
 * alert its CUSUM sums (forecast and profile) restart at 0: the DQ alert has taken over, and a sum
 * charged before it must not raise an episode of its own when scoring resumes, draining over a
 * deviation long gone. The cell score is max_f |z_f| over the scored KPIs; the cell step is over
 * when at least min_kpis KPIs are over, critical  when at least one KPI is critical (and the step
 * is over).
 *
 * Anomaly lifecycle (one episode per cell at a time). A window holds the last window_n
 * steps (steps with no expectation count as not over):
 *   - firing    when ≥ warn_k of the window's steps are over, or ≥ crit_k are critical,
 *               and the cooldown since the last resolution has passed; severity critical
 *               if ≥ crit_k steps of the window are critical, else warning. The episode's
 *               start (onset) is the oldest over step of the window.
 *   - escalated while firing, severity rising from warning to critical emits a second
 *               `firing` event with the same id and severity critical (consumers upsert
 *               by id); an episode never de-escalates.
 *   - resolved  after resolve_m consecutive scored steps that are not over (a step whose
 *               KPIs are all held by DQ alerts counts as not over: the DQ alert takes
 *               over; steps without an expectation or fully imputed do not count).
 *   - cooldown  no new anomaly episode may fire within cooldown_steps steps after a
 *               resolution; with cooldown_crit 1 only a warning is held back: a window
 *               with ≥ crit_k critical steps fires (critical) through the cooldown, since
 *               a deviation past crit_z is not the tail of a burst that just resolved.
 * Alert id = "<cell>:anomaly:<onset step>" — a pure function of the data, so a host that
 * restores the state from a snapshot and replays the same steps produces the same ids.
 * Attribution: the KPIs over (threshold, CUSUM or profile) at the step of the event (firing) or at
 * the episode's peak (resolved), by |z| descending, at most CC_ALERT_MAX_ATTR, each with observed,
 * expected (mean), interval [mean ± interval_z·sd_eff] and z.
 *
 * Data-quality (DQ) alerts, kept apart from anomalies (kind CC_ALERT_DATA_QUALITY):
 *   - stuck (per KPI): the same value for ≥ stuck_steps consecutive observed steps, for
 *     a KPI that normally varies: its change rate (exponential average, time constant
 *     change_rate_steps, of "value differs from the previous observation", starting at 1
 *     and updated only by steps of runs shorter than stuck_steps) is ≥ stuck_min_change_rate,
 *     and the run is at least stuck_run_factor times the longest run of equal values the KPI
 *     had recently (a maximum decaying with time constant stuck_memory_steps) — a small
 *     integer KPI that sits at 0 or 1 for hours every night is stuck at most on the first
 *     night, then learnt as normal (a genuine stuck episode likewise raises the bar for the
 *     next one until it decays).
 *     Not raised while the whole cell is zero (that is all_zero).
 *   - all_zero (per cell): every observed KPI exactly 0 for ≥ zero_steps consecutive steps
 *     (by default the steps of 12 minutes, at least 2: cc_anomaly_zero_steps),
 *     and at least one of them a KPI where zero is not normal. Zero is normal for a KPI
 *     that says so (kpi.zero_normal 1), or, learnt (kpi.zero_normal 0, the default), for a
 *     KPI that was exactly 0 in ≥ zero_normal_rate of its recent observed steps: its zero
 *     share, a plain mean over its first stuck_memory_steps observed steps then an
 *     exponential average with that time constant, trusted after 48 steps. A disk-write
 *     or night-time KPI that sits at 0 most of the time is then not an outage (nor are its
 *     zeros held from anomaly scoring), while a KPI that is never 0 still raises all_zero
 *     at the first outage: it takes an outage of ≈ zero_normal_rate × stuck_memory_steps
 *     steps (200 by default) to teach a never-zero KPI that zero is normal, and that
 *     decays again. Where zero is normal, an outage is left to the anomaly rules (the
 *     forecast expects traffic). An all_zero alert firing stays firing while the cell is
 *     all zero, whatever the KPIs learn meanwhile; kpi.zero_normal -1 never learns.
 *   - bounds (per KPI): an observed value outside [min, max] of the KPI (when min < max).
 *   - missing (per cell): no step for more than missing_after_s seconds past the end of the
 *     last step, found by cc_anomaly_tick(now); resolved by the next observation. `now` is
 *     the host's: cellcastd passes its data clock (the wall clock only while the data is
 *     live, daemon/alerts.h), so that a replay of old data does not leave it firing.
 * A DQ alert fires at the first step its condition holds and resolves after
 * dq_resolve_steps consecutive steps without it. While a KPI has a DQ alert firing (its
 * own stuck/bounds, or the cell's all_zero/missing) and for dq_grace_steps after it
 * resolves, that KPI is not scored for anomalies: a flat or zero series raises one DQ alert,
 * not an endless stream of anomalies (and the model's normalisation has time to re-adapt).
 * Ids: "<cell>:stuck:<kpi>:<start>", "<cell>:bounds:<kpi>:<start>",
 * "<cell>:all_zero:<start>", "<cell>:missing:<first missing step>".
 *
 * Replays. cc_anomaly_cell_quiet_until(c, step) makes transitions at steps ≤ step update
 * the state without being emitted (counted in CcAnomalyCellStats.quiet): a host that
 * restores an older snapshot and replays steps whose transitions it already produced
 * sets it to the last step it knows it emitted.
 *
 * Thread-safety: a CcAnomalyCell is used by one thread at a time (the one stepping its
 * engine cell); readers on other threads (HTTP) need the host's lock or a published copy.
 * cc_anomaly_set_settings must not run while any thread is inside observe/tick (apply a
 * reload between batches). The CcAnomaly is otherwise read-only and shared by all cells.
 *
 * Wiring in a host (per cell, after the batched cc_engine_step that consumed step t):
 *     cc_anomaly_observe(a, ac, t, values, mask, &sink);   // scores x_t vs forecast of t-1
 *     cc_cell_forecast(cell, &fc);
 *     cc_anomaly_set_forecast(a, ac, &fc);                 // expectation for t+1
 * and from the cron, for every cell: cc_anomaly_tick(a, ac, now_unix_s, &sink).
 */
#ifndef CC_ANOMALY_H
#define CC_ANOMALY_H

#include "cc_cell.h"
#include "cc_common.h"
#include "cc_kpi.h"
#include "cc_model.h"

#define CC_ALERT_MAX_ATTR 8
#define CC_ALERT_ID_MAX 160
/* Longest cell id in characters: the one limit of ingest, the scorer, snapshots and the
 * schemas (kpi/alert.schema.json, openapi.yaml). */
#define CC_ANOMALY_CELL_ID_MAX CC_KPI_CELL_ID_MAX
#define CC_ANOMALY_MAX_WINDOW 64
#define CC_ANOMALY_MAX_LAG 256

enum CcAlertKind { CC_ALERT_ANOMALY = 0, CC_ALERT_DATA_QUALITY = 1 };
enum CcAlertState { CC_ALERT_FIRING = 1, CC_ALERT_RESOLVED = 2 };
enum CcAlertSeverity { CC_SEV_WARNING = 1, CC_SEV_CRITICAL = 2 };
enum CcDqReason {
    CC_DQ_NONE = 0, ///< kind anomaly
    CC_DQ_STUCK = 1,
    CC_DQ_ALL_ZERO = 2,
    CC_DQ_BOUNDS = 3,
    CC_DQ_MISSING = 4,
};

typedef struct CcAnomalyKpi {
    int enabled;        ///< scored for anomalies (default 1); DQ checks run regardless
    int direction;      ///< 0 both ways, +1 only above the forecast, -1 only below (default 0)
    double warn_z;      ///< warning |z|; 0 = the deployment's warn_z (default 0)
    double crit_z;      ///< critical |z|; 0 = the deployment's crit_z (default 0)
    double sd_floor;    ///< absolute sd floor in the KPI's units (default 0)
    double min, max;    ///< physical bounds, checked when min < max (default 0, 0: none)
    int stuck_steps;    ///< 0 = the deployment's; -1 = never stuck (default 0)
    int zero_normal;    ///< all_zero: 0 learnt from the KPI's zero share (zero_normal_rate),
                        ///< 1 zero is always normal, -1 never (default 0)
    double lik_over;    ///< anomaly likelihood level; 0 = the deployment's lik_over (default 0)
    double novelty_tol; ///< novelty margin; 0 = the deployment's novelty_tol (default 0)
    int shape;          ///< shape novelty: 0 the deployment's (on when shape_w > 0), -1 off
                        ///< for this KPI (a bursty one) (default 0)
} CcAnomalyKpi;

typedef struct CcAnomalySettings {
    int n_features;       ///< F, KPIs per cell (default 8; set it to the model's)
    int64_t step_seconds; ///< S, for timestamps and missing data (default 3600)
    double warn_z;        ///< warning threshold on |z| (default 10; 4.5 with warn_k 2
                   ///< until 2026-11-25, the measurement log (`git show 0c50596:docs/operations.md`
                   ///< §7) "Defaults for real data")
    double crit_z;         ///< critical threshold on |z| (default 15; was 6.75)
    int min_kpis;          ///< KPIs over threshold for a cell step to be over (default 1)
    int window_n;          ///< n of k-of-n, 1..64 (default 3)
    int warn_k;            ///< over steps in the window to fire (default 1; was 2)
    int crit_k;            ///< critical steps in the window to fire critical (default 1)
    int resolve_m;         ///< consecutive non-over steps to resolve (default 6; was 3)
    int cooldown_steps;    ///< steps after a resolution before a new episode (default 20; was 6)
    int cooldown_crit;     ///< 1: the cooldown holds back only a warning; a window with
                           ///< ≥ crit_k critical steps fires through it (default 1; 0
                           ///< until 2026-11-28, docs/design/alert-defaults.md)
    double sd_floor_rel;   ///< sd floor relative to |mean| (default 0.01)
    double sd_floor_scale; ///< sd floor relative to the normalisation scale (default 0.05)
    double interval_z;     ///< half-width of the reported interval in sd (default 1.2815516, 80%)
    int stuck_steps;       ///< equal consecutive values for stuck (default 12)
    double stuck_min_change_rate; ///< change rate a KPI needs to count as varying (default 0.5)
    int change_rate_steps;        ///< time constant of the change rate, steps (default 200)
    double stuck_run_factor;      ///< a stuck run must be ≥ this × the longest recent normal run
                                  ///< (default 2)
    int stuck_memory_steps;       ///< time constant of that longest run, steps (default 2000)
    int zero_steps;               ///< all-zero consecutive steps for all_zero; 0 = the steps
                                  ///< of 12 minutes, at least 2 (6 at 2-minute steps, 2 at
                                  ///< hourly ones) (default 0)
    double zero_normal_rate;      ///< a KPI zero in at least this share of its recent steps
                                  ///< is one where zero is normal; 0 = never learnt
                                  ///< (default 0.1)
    int64_t missing_after_s;      ///< silence before a missing-data alert; 0 = 3 steps (default 0)
    int kpi_missing_steps;        ///< steps in a row a KPI is absent from records that give
                                  ///< others before a missing-data alert for that KPI;
                                  ///< 0 = off (default 96)
    int dq_resolve_steps;         ///< clear steps to resolve a DQ alert (default 3)
    int dq_grace_steps;           ///< steps a KPI stays unscored after its DQ alert (default 16)
    int warmup_steps;             ///< forecasts of a sequence shorter than this are not scored:
                                  ///< with a patch or two of context they are poor, and every
                                  ///< new or restarted cell would alert; 0 = score from the first
                                  ///< forecast (default 64)
    int lag_steps;                ///< L: also score against the forecast made L steps earlier
                                  ///< (horizon step L-1; needs HZ ≥ L); 0 = off; -1 = the
                                  ///< horizon of the forecasts (HZ, at most 256) (default 0)
    double cusum_k;               ///< CUSUM reference value in |z| (default 3)
    double cusum_h;               ///< CUSUM decision threshold; 0 = no CUSUM (default 6)
    double tail_q;                ///< tail calibration: the quantile of each KPI's own |z| that
                                  ///< is scaled to the Gaussian one (cc_anomaly_cell.h,
                                  ///< TAIL_RATE); 0 = off (default 0.999)
    int tail_steps;               ///< its adaptation time in steps (default 2000)
    double bar_p;                 ///< the KPI's own bar (cc_anomaly_cell.h, BAR_U): each
                                  ///< KPI's warning bar is the |z| its own calibrated
                                  ///< residuals pass with this probability per step (a
                                  ///< Pareto tail fitted past 2.5 of its scales), within
                                  ///< [bar_floor, warn_z]; crit_z scales with it; a KPI's own
                                  ///< warn_z fixes its bar; 0 = warn_z for every KPI
                                  ///< (default 0)
    double bar_floor;             ///< the lowest bar bar_p may set (default 4)
    int lag_echo;                 ///< the lagged forecast is not used for a step whose time
                                  ///< one day earlier deviated within ±lag_echo steps
                                  ///< (cc_anomaly_cell.h, ECHO_BITS); -1 = the lag L;
                                  ///< 0 = off (default -1; nothing without lag_steps)
    int64_t window_s;             ///< window rule: the longest of its scales in seconds (the
                                  ///< others are window_s/2 and window_s/6): the mean of each
                                  ///< KPI's calibrated z over each scale, scored against its own
                                  ///< tracked tail_q quantile (events of minutes that no single
                                  ///< step shows); 0 = off (default 0: see docs/results.md)
    double window_z;              ///< the window rule's threshold; 0 = the KPI's warn_z
                                  ///< (default 0)
    int sustained_live;           ///< 1: the seasonal-profile rule counts a KPI over only
                                  ///< while the step's own profile deviation is past
                                  ///< profile_k in the direction of its sum, so that an
                                  ///< episode ends within resolve_m steps of its deviation;
                                  ///< 2: every rule only while live (CcEpisodeTrace: the
                                  ///< CUSUM's step past cusum_k, the likelihood of the step
                                  ///< alone, the window's step), not while a sum or an
                                  ///< average drains; 0 = while the sum is over (days on a
                                  ///< slow deviation) (default 2)
    double lik_over;              ///< anomaly likelihood: a KPI is over while its log-scale
                                  ///< likelihood is at least this (0.5: tail 1e-5); 0 = the
                                  ///< stage off (default 0)
    int lik_short_n;              ///< its short average, steps, 1..32 (default 10)
    int lik_long_steps;           ///< time constant of its long-run distribution (default 2000)
    double novelty_tol;           ///< a KPI is over at a value beyond the range of those seen
                                  ///< by more than this times the range; 0 = off (default
                                  ///< 0.05; was 0.02)
    int64_t novelty_min_s;        ///< seconds of values the range must hold first, and 100
                                  ///< values (default 172800: two days; 0 = 100 values, as
                                  ///< until 2026-11-25)
    int shape_w;                  ///< shape novelty (cc_anomaly_shape.h): points per window,
                                  ///< 2..16; 0 = off (default 0; the NAB settings: 8)
    int shape_ds;                 ///< observed steps averaged into a point (default 3)
    double shape_rho;             ///< its vigilance in (0, 1) (default 0.75)
    int shape_cats;               ///< its categories per KPI, 1..64 (default 32)
    int shape_warm;               ///< windows seen before it reports (default 100)
    int shape_quiet;              ///< windows since the KPI's previous new category for a new
                                  ///< one to be reported (default 256)
    double profile_k;             ///< profile CUSUM reference value in |zp| (default 1.75; was 1)
    double profile_h; ///< profile CUSUM threshold; 0 = no seasonal profile (default 10; was 20)
    double profile_fa_weeks; ///< each KPI's profile CUSUM threshold rises from profile_h to
                             ///< where its own excursions cross once per this many weeks
                             ///< (PROFILE_CAL; default 4); 0 = off, profile_h as it is
    int64_t profile_unit_s;  ///< a step shorter than this adds S / profile_unit_s of its
                             ///< increment to the profile CUSUM (default 300)
    int64_t profile_bin_s;   ///< profile bin width, seconds; divides 86400, ≥ 300 (default 3600)
    double profile_days;     ///< time constant of each bin's average, days of its type (default 4)
    int profile_min_days;    ///< days of data a bin needs before it is scored (default 2)
    int64_t profile_utc_offset_s;      ///< cells' local time minus UTC, for time of day and
                                       ///< weekends, |·| ≤ 14 h (default 0)
    int64_t feedback_half_life_s;      ///< half-life, in data time, of a false-alarm verdict's
                                       ///< raise of a KPI's z thresholds
                                       ///< (cc_anomaly_cell_feedback; default 604800: 7 days)
    CcAnomalyKpi kpi[CC_MAX_FEATURES]; ///< per-KPI overrides, model feature order
} CcAnomalySettings;

typedef struct CcAlertAttr {
    int kpi; ///< feature index
    double observed, expected, lo, hi, z;
    double cusum;            ///< the KPI's CUSUM sum when it counted as over by it (cusum_h;
                             ///< + up, − down), else 0
    double profile;          ///< the KPI's profile CUSUM sum when over by it (profile_h; signed),
                             ///< else 0
    double profile_expected; ///< the profile's usual value for this step, NaN when none
    int novelty;             ///< the KPI counted as over by novelty: CC_NOVEL_VALUE (a value
                             ///< beyond the range seen), CC_NOVEL_SHAPE (a window of a shape
                             ///< never seen), else 0
} CcAlertAttr;

enum CcNoveltyKind { CC_NOVEL_NONE = 0, CC_NOVEL_VALUE = 1, CC_NOVEL_SHAPE = 2 };

/** The rules that count a KPI over (bits of CcEpisodeTrace's rule sets). */
enum CcAnomalyRule {
    CC_RULE_Z = 1,           ///< |z| past warn_z
    CC_RULE_CUSUM = 2,       ///< the forecast z's CUSUM
    CC_RULE_PROFILE = 4,     ///< the seasonal profile's CUSUM
    CC_RULE_WINDOW = 8,      ///< the multi-scale window rule
    CC_RULE_LIKELIHOOD = 16, ///< the anomaly likelihood
    CC_RULE_NOVELTY = 32,    ///< a value beyond the range seen
};
#define CC_RULES 6

/**
 * How an anomaly episode's steps were over (diagnostics: detection does not read it).
 * A KPI over by a rule is "live" when the step's own statistic still deviates, as opposed to
 * a sum or an average that only drains: the z rule and novelty always; a CUSUM (forecast or
 * profile) while the step's own z (the one its sum saw) is past its reference k in the
 * direction of the sum that is over (the sum grows); the window rule while a window of
 * steps like this one (its z clipped to ±warn_z, in the window's direction) would be over
 * on the scale that is; the likelihood while a short average of steps like this one would
 * be over against the distribution as learnt so far. A step deviates (is live) when at
 * least min_kpis KPIs are live-over: it would be over without any draining sum.
 * The episode's triggering deviation runs from its onset to its last live step, and an
 * episode that ends when its deviation does lasts live_run + resolve_m steps from its onset
 * to its resolution (both included); what it lasts beyond that, the rules that held it say.
 * Not in the snapshot: after a restore, counted from the restore on.
 */
typedef struct CcEpisodeTrace {
    int64_t live_run;   ///< onset to the last live step so far, both included (0: none)
    int32_t fire_rules; ///< rules over at the firing step (CcAnomalyRule bits, any KPI)
    int32_t fire_kpi;   ///< the KPI over there with the largest |z| (-1: none)
    int32_t hold_rules; ///< rules over at over steps after the last live step (held ones)
    int32_t hold_kpi;   ///< the KPI of the last held step with the largest |z| (-1: none)
    int32_t held;       ///< over steps after the last live step (counted from firing)
    int32_t unscored;   ///< steps after it without a verdict (no expectation, all imputed)
} CcEpisodeTrace;

/** One alert transition. Pointers are valid during the callback only. */
typedef struct CcAlertEvent {
    char id[CC_ALERT_ID_MAX];
    enum CcAlertState state;
    enum CcAlertKind kind;
    enum CcDqReason reason; ///< CC_DQ_NONE for anomalies
    enum CcAlertSeverity
        severity; ///< DQ alerts are warnings, except missing and all_zero (critical)
    const char *cell_id;
    int kpi;            ///< the KPI of a stuck/bounds alert, else -1
    int64_t start_step; ///< onset (part of the id)
    int64_t step;       ///< step of this transition (for missing: last step + 1)
    int64_t ts;         ///< unix seconds of `step` (step·S)
    int64_t start_ts;   ///< unix seconds of start_step
    double score;       ///< cell score at this step (firing) or the episode's peak (resolved)
    int n_attr;
    CcAlertAttr attr[CC_ALERT_MAX_ATTR];
    CcEpisodeTrace trace; ///< anomaly events: the episode so far (zero for DQ alerts)
} CcAlertEvent;

/** Where transitions go: called synchronously, once per transition. */
typedef struct CcAlertSink {
    void *cookie;
    void (*emit)(void *cookie, const CcAlertEvent *ev);
} CcAlertSink;

typedef struct CcAnomalyCellStats {
    uint64_t scored;           ///< steps scored against an expectation
    uint64_t over;             ///< scored steps that were over
    uint64_t firing, resolved; ///< transitions emitted (all kinds)
    uint64_t quiet;            ///< transitions suppressed by quiet_until
    int anomaly_firing;        ///< 1 while an anomaly episode is firing
    int dq_firing;             ///< DQ alerts firing now
    int anomaly_critical;      ///< 1 while the anomaly episode fires with severity critical
    int dq_critical;           ///< DQ alerts firing now with severity critical
} CcAnomalyCellStats;

typedef struct CcAnomaly CcAnomaly;
typedef struct CcAnomalyCell CcAnomalyCell;

void cc_anomaly_default_settings(CcAnomalySettings *s);

/** Checks ranges (k ≤ n ≤ 64, thresholds > 0, crit ≥ warn...). 0 or -EINVAL with a message. */
int cc_anomaly_validate(const CcAnomalySettings *s, char *err, size_t errlen);

/** Opens the deployment-wide context (settings copied). 0, -EINVAL, -ENOMEM. */
int cc_anomaly_open(CcAnomaly **out, const CcAnomalySettings *s, char *err, size_t errlen);
void cc_anomaly_close(CcAnomaly **a);

/** Replaces the settings (config reload); cells keep their state. n_features must not
 *  change. 0 or -EINVAL (old settings kept). */
int cc_anomaly_set_settings(CcAnomaly *a, const CcAnomalySettings *s, char *err, size_t errlen);
const CcAnomalySettings *cc_anomaly_settings(const CcAnomaly *a);

/** Opens a cell's state; the id (≤ CC_ANOMALY_CELL_ID_MAX bytes) goes into alert ids. 0, -EINVAL,
 * -ENOMEM. */
int cc_anomaly_cell_open(CcAnomalyCell **out, const CcAnomaly *a, const char *cell_id);
void cc_anomaly_cell_close(CcAnomalyCell **c);
const char *cc_anomaly_cell_id(const CcAnomalyCell *c);

/**
 * Sets the expectation for step `step`: mean and sd per KPI (F each; sd ≤ 0 or non-finite
 * = KPI not scored), and optionally the normalisation scale (NULL = none) for the sd floor.
 * Used directly by baselines; hosts of the engine call cc_anomaly_set_forecast.
 */
void cc_anomaly_set_expect(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const double *mean,
                           const double *sd, const double *scale);

/** Same for the lagged expectation of step `step` (the forecast made lag_steps earlier);
 *  ignored when lag_steps is 0, and when it is -1 until cc_anomaly_set_forecast has sized
 *  the lag ring (callers of this function set an explicit L). cc_anomaly_set_forecast
 *  fills it from the forecast. */
void cc_anomaly_set_expect_lagged(const CcAnomaly *a, CcAnomalyCell *c, int64_t step,
                                  const double *mean, const double *sd, const double *scale);

/** Takes horizon step 0 of a forecast (the expectation for fc->step + 1) and, with
 *  lag_steps = L, horizon step L-1 (the lagged expectation for fc->step + L; L = fc->horizon
 *  when lag_steps is -1). An invalid forecast clears the one-step expectation. */
void cc_anomaly_set_forecast(const CcAnomaly *a, CcAnomalyCell *c, const CcForecast *fc);

/**
 * One observation of step `step` (values: F raw values; mask: F flags, 1 = observed,
 * 0 = imputed by the host, NULL = all observed). Runs the DQ checks and, if an expectation
 * for this step is set, the anomaly scoring; emits transitions to sink (may be NULL).
 * Steps must increase; a step ≤ the last one is ignored (-EALREADY). 0 or -EALREADY.
 */
int cc_anomaly_observe(const CcAnomaly *a, CcAnomalyCell *c, int64_t step, const float *values,
                       const uint8_t *mask, const CcAlertSink *sink);

/**
 * The outage hold: whether a host that steps a model should feed it, at the next step, the
 * values it fed at the previous step instead of this observation (values and mask as for
 * cc_anomaly_observe). Call it once per step, before cc_anomaly_observe of that step (which
 * still gets the observation: the alerts and any history see what was observed).
 *
 * A step is held when every observed KPI is exactly 0 and one of them is a KPI where zero
 * is not normal — all_zero's judgement, on what the cell has learnt so far — and stays
 * judged an outage while the cell is all zero (as a firing all_zero does, but a firing
 * all_zero does not make the next run of zeros an outage); at most
 * max_steps steps of one outage are held (0: none), after which its zeros are fed as the
 * new normal until a step is not all zero. A step with no observed KPI (imputed by the
 * host) is held while an outage is being held, and neither counts towards max_steps nor
 * ends it. Why: the
 * zeros of an outage would otherwise enter the model's normalisation window and inflate
 * its scale (and the forecast's sd) for as many steps as the window holds. The count is
 * not saved with the cell's state (cc_anomaly_cell_save): a restart in an outage starts it
 * afresh. Returns 1 (hold) or 0 (feed the observation).
 */
int cc_anomaly_outage_hold(const CcAnomaly *a, CcAnomalyCell *c, const float *values,
                           const uint8_t *mask, int max_steps);

/** The default max_steps of cc_anomaly_outage_hold where hosts expose it (cellcastd's
 *  ingest.outage_hold_steps, cellcast anomaly-eval --outage-hold): a day of 15-minute
 *  steps, longer than the outages the injections model (10–40 steps). */
#define CC_ANOMALY_OUTAGE_HOLD_STEPS 96

/** Clock tick (unix seconds): raises the missing-data alert when the cell has been silent
 *  for more than missing_after_s past the end of its last step. */
void cc_anomaly_tick(const CcAnomaly *a, CcAnomalyCell *c, int64_t now_s, const CcAlertSink *sink);

/** The silence (seconds past the end of a cell's last step) after which tick raises
 *  missing: missing_after_s, or 3 steps when it is 0. */
int64_t cc_anomaly_missing_after(const CcAnomaly *a);

/** The all-zero steps for all_zero: zero_steps, or when it is 0 the steps of 12 minutes
 *  (ceil(720 / step_seconds)), at least 2. */
int cc_anomaly_zero_steps(const CcAnomaly *a);

/** Transitions at steps ≤ step are applied but not emitted (see Replays above). */
void cc_anomaly_cell_quiet_until(CcAnomalyCell *c, int64_t step);

/**
 * Maintenance windows (issue 32): while frozen (on ≠ 0), the cell's observations are scored
 * and alert as usual but teach the detector nothing — the seasonal profile (its bins and
 * its residual scale), the tail calibration of z and of the window rule, the KPI's own bar
 * fit, the lag calibration, the zero share (all_zero's "zero is normal") and the value
 * range of novelty stay as they were — so that planned work's outage does not become the
 * cell's normal. Not saved with the cell's state: the host sets it before each observation
 * (cellcastd: from its maintenance silences, daemon/silences.h). Default 0.
 */
void cc_anomaly_cell_freeze_learning(CcAnomalyCell *c, int on);

/** Last scored step, its per-KPI z (F; NaN where not scored) and cell score (NaN if none).
 *  Returns the step, -1 if the cell was never scored. z may be NULL. */
int64_t cc_anomaly_cell_scores(const CcAnomalyCell *c, double *z, double *score);

/** The anomaly likelihood (log scale, cc_anomaly.h "Anomaly likelihood") of the last
 * observed step: the largest of the KPIs', returned, and each KPI's in ll (F; NULL: not
 * wanted); NaN where a KPI was not scored, its stage is off (lik_over 0 for it) or warming up. */
double cc_anomaly_cell_likelihood(const CcAnomalyCell *c, double *ll);

/** Each KPI's CUSUM sums (F each; 0 when cusum_h is 0 or nothing has accumulated). */
void cc_anomaly_cell_cusum(const CcAnomalyCell *c, double *up, double *down);
/** Each KPI's seasonal profile at its last scored step (F each): the usual value
 * (`expected`, NaN when the profile was not scored there) and the profile CUSUM sums. */
void cc_anomaly_cell_profile(const CcAnomalyCell *c, double *expected, double *up, double *down);

/**
 * Feedback (issue 32). An operator's false-alarm verdict on an alert raises the evidence bar
 * of the cell's KPI: its z thresholds (warn_z, crit_z, window_z; per-KPI overrides
 * included) are multiplied by a factor m, ×CC_FEEDBACK_STEP per verdict, at most
 * CC_FEEDBACK_MAX, that decays back towards 1 with half-life feedback_half_life_s of data
 * time: m(t) = 1 + (m₀ − 1)·2^(−(t − t₀)/half_life), t₀ the step of the last verdict. The
 * other rules (CUSUM, profile, novelty, likelihood) keep their bars. The factor is part of
 * the state record (version 10).
 */
#define CC_FEEDBACK_STEP 1.25
#define CC_FEEDBACK_MAX 2.0

/** A false-alarm verdict on KPI kpi of cell c at data step `step` (the cell's last observed
 *  step when negative): its bar factor m becomes min(CC_FEEDBACK_MAX, m(step)·
 *  CC_FEEDBACK_STEP). Returns the new factor, or -EINVAL for a KPI out of range. Only on
 *  the thread that owns the cell. */
double cc_anomaly_cell_feedback(const CcAnomaly *a, CcAnomalyCell *c, int kpi, int64_t step);

/** KPI kpi's bar factor at data step `step` (1: none; ≥ 1). */
double cc_anomaly_cell_bar(const CcAnomaly *a, const CcAnomalyCell *c, int kpi, int64_t step);

/**
 * Evidence (issue 32, docs/design/site-evidence.md): how far the cell's last observed step
 * went towards the bars that fire its alerts, for a host that weighs several cells together
 * (cellcastd opens a site incident when several cells of a site are past a share of their
 * bars at one step). Diagnostics only: the detector does not read it.
 */
typedef struct CcAnomalyEvidence {
    int64_t step; ///< the cell's last observed step (-1: none); kpi[] and zero are of it
    double zero;  ///< all_zero: the run of all-zero steps / zero_steps, while the run would be
                  ///< an outage (a KPI where zero is not normal) or all_zero fires; else 0
    double kpi[CC_MAX_FEATURES]; ///< per KPI, signed (+ above, − below the expectation): the
                                 ///< largest of |z| / its warning bar (own bar and false-alarm
                                 ///< factor included), the forecast CUSUM sum / cusum_h while
                                 ///< the step's z is past cusum_k its way, the profile sum /
                                 ///< profile_h while the step's value is on that sum's side of
                                 ///< the profile; 0 where not scored at `step` or in a
                                 ///< direction the KPI is not scored in. 1: at its bar
    double kpi_forecast[CC_MAX_FEATURES]; ///< kpi[] without the profile's sum: the forecast's
                                          ///< z and CUSUM alone (what a host tells a profile-
                                          ///< only deviation by)
} CcAnomalyEvidence;

/** Fills *ev (kpi[] for the cell's F KPIs); returns the largest of |kpi[f]| and zero. */
double cc_anomaly_cell_evidence(const CcAnomaly *a, const CcAnomalyCell *c, CcAnomalyEvidence *ev);

/** Fills up to max events describing the alerts firing now (state firing); returns the
 *  number firing (may exceed max). */
int cc_anomaly_cell_active(const CcAnomaly *a, const CcAnomalyCell *c, CcAlertEvent *out, int max);

void cc_anomaly_cell_stats(const CcAnomalyCell *c, CcAnomalyCellStats *out);

/**
 * State serialisation for snapshots (a versioned little-endian byte string; the cell id is
 * included). save: with buf NULL returns the size needed; else writes and returns the size,
 * or -ENOSPC if cap is too small; it writes version 5. load: replaces c's state; -EINVAL
 * with a message if the bytes are malformed, of a version other than 1 to 5, or for
 * another F; -ENOMEM (c unchanged). Older versions lack what later rules keep, which then
 * starts afresh: version 1 the lag calibration (it warms up again), 1 and 2 the CUSUM sums
 * (0), 1 to 3 the seasonal profile (empty), 1 to 4 the zero shares (0: learnt again).
 */
long cc_anomaly_cell_save(const CcAnomalyCell *c, uint8_t *buf, size_t cap);
int cc_anomaly_cell_load(CcAnomalyCell *c, const uint8_t *buf, size_t len, char *err,
                         size_t errlen);

/**
 * Every field of a loaded record is validated: counts in their ranges, floats finite where
 * the rules need them, and every step relative to `last`, the last step of the cell's data
 * (its ring; -1: none): the record's last step at most `last`, the others (expectation,
 * episodes, lag targets) at most one (the lag ring: L) past it, none negative but the
 * "none" markers; the silence (quiet_until) within 0..2^40 only. cc_anomaly_cell_load bounds them
 * by the record's own last step. load_at replaces c's state like cc_anomaly_cell_load; check only
 * validates (c unchanged): a host restoring several parts of a cell checks them all before changing
 * any. -EINVAL with a message naming steps past the cell's last step.
 */
int cc_anomaly_cell_load_at(CcAnomalyCell *c, const uint8_t *buf, size_t len, int64_t last,
                            char *err, size_t errlen);
int cc_anomaly_cell_check(const CcAnomalyCell *c, const uint8_t *buf, size_t len, int64_t last,
                          char *err, size_t errlen);

/**
 * One alert transition as the JSON object of proto/alert.schema.json (one line, no
 * newline): the payload of the Kafka alert topic (key: the cell id) and the element of
 * GET /v1/alerts. KPI names come from hp (NULL: "kpi<i>"); non-finite numbers are null.
 * Returns the length written (NUL excluded) or -ENOSPC when cap is too small
 * (1024 + 256 per attribution entry is always enough).
 */
int cc_alert_event_json(const CcAlertEvent *ev, const CcHparams *hp, char *buf, size_t cap);

/* ---- settings by name (for config files: the daemon's `alerts:` section) ------------ */

enum CcAnomalyKeyType { CC_AKEY_INT = 0, CC_AKEY_INT64 = 1, CC_AKEY_DOUBLE = 2 };

/** One deployment-wide setting: its name (= the field), type, bounds and doc line. */
typedef struct CcAnomalyKey {
    const char *name;
    enum CcAnomalyKeyType type;
    size_t offset; ///< in CcAnomalySettings
    double lo, hi;
    const char *doc;
} CcAnomalyKey;

/** The table of deployment-wide settings (n_features and step_seconds excluded: they come
 *  from the model). *n gets its length. */
const CcAnomalyKey *cc_anomaly_keys(int *n);

/**
 * Sets one setting from text: a deployment-wide key of cc_anomaly_keys() ("warn_z"), or a
 * per-KPI key "kpis.<kpi name>.<field>" with field enabled (true/false/1/0), direction
 * (both/up/down), warn_z, crit_z, sd_floor, min, max, stuck_steps, zero_normal
 * (auto/true/false); KPI names resolved with
 * hp (the model). Values are range-checked; cross-field rules are checked by
 * cc_anomaly_validate once all keys are set. 0, -ENOENT (unknown key or KPI), -EINVAL
 * (bad value), message in err naming the key.
 */
int cc_anomaly_settings_set(CcAnomalySettings *s, const CcHparams *hp, const char *key,
                            const char *value, char *err, size_t errlen);

/** cc_anomaly_settings_set for each "key=value" of a comma-separated list ("warn_z=12,
 *  kpis.prb.min=0"), in order. 0, or the first failure's code (-EINVAL also for an item
 *  that is not key=value, -ENOMEM), message in err; the items before it stay set. */
int cc_anomaly_settings_set_list(CcAnomalySettings *s, const CcHparams *hp, const char *list,
                                 char *err, size_t errlen);

const char *cc_alert_kind_name(enum CcAlertKind k);         ///< "anomaly", "data_quality"
const char *cc_alert_state_name(enum CcAlertState s);       ///< "firing", "resolved"
const char *cc_alert_severity_name(enum CcAlertSeverity s); ///< "warning", "critical"
const char *cc_dq_reason_name(enum CcDqReason r);           ///< "none", "stuck", "all_zero", ...
const char *cc_anomaly_rule_name(int rule); ///< one CcAnomalyRule bit: "z", "cusum", ..., "?"

#endif
