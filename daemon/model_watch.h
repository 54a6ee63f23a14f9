/*
 * model_watch.h — the live accuracy of the model in service, for the rollback of a learned
 * model that degrades live (model.source kafka; models.h, docs/operations.md §6).
 *
 * What is measured: the forecasts the cells' long history holds (cc_history.h: the one-step
 * forecast and the horizon-end forecast of every step, as publish.c records them) scored
 * when their truth arrives, against seasonal naive of one day (the value one day of steps
 * before the target), each cell weighing alike: per KPI and forecast kind, MASE =
 * Σ w|y − ŷ| / Σ w|y − y(p − day)| over the matured forecasts whose target step p is in the
 * window (the newest W target steps seen), where a sample of cell c weighs w = 1 / s_c,f, the
 * cell's own scale of KPI f (CcdWatchScale: the running mean of its |y − y(p − day)| over
 * its last week of steps, as it was before the sample). So the ratio is a mean of the cells'
 * own MASEs (weighted by their samples), not the cells' errors pooled in their units, where
 * one cell in large units (or a busy one) would decide: the learner's criterion (cc_learn:
 * eval's MASE per series, then the mean). A cell weighs once its scale has learnt from a
 * day of steps (a whole daily cycle) of the KPI, and while that has moved (s > 0); until
 * then its samples are in the unweighted counters only (ccd_watch_totals), not in the
 * window nor its forecast count: after a restart, a new cell or a cell without memory for
 * its scale, the window holds the other cells. A KPI's MASE is the mean of its two kinds,
 * the score the mean over the KPIs that have one (each KPI weighs alike whatever its units).
 * The rollback's rule (ccd_watch_baseline, ccd_watch_judge): windows that grow
 * until they hold model.rollback_min_forecasts, so that a small network (hourly, 3 cells:
 * 144 forecasts a day) is judged too. A sample needs the truth, the forecast and the value a
 * day before: a cell needs history.depth ≥ 1 day + the horizon, which the default 7 d gives.
 *
 * Why the history and not the interval calibration's ring: the history is on by default
 * whatever forecast.interval_adapt says, already holds the two forecast kinds per step, and
 * the value a day back; reading it costs two row reads per cell step.
 *
 * Threads: ccd_watch_step runs on the worker; the rest on the loop thread. A mutex guards
 * the buckets (one uncontended lock per cell step). Owned by the cell table (cells.h), so
 * that it outlives the worker; models.c creates it. A cell's scale (CcdWatchScale, about
 * 8 F bytes) is the cell's (cells.h CcdCell.watch_scale), created with its history by the
 * worker (publish.c) and owned like it: the worker writes it while the cell is busy, no lock.
 */
#ifndef CCD_MODEL_WATCH_H
#define CCD_MODEL_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "cc_history.h"
#include "cc_model.h"

typedef struct CcdModelWatch CcdModelWatch;

/** A cell's scale per KPI: the running mean of |y − y(p − day)| (exact over its first
 *  steps, then exponential over a week of steps) and the steps it has seen. */
typedef struct CcdWatchScale CcdWatchScale;

/** A scale for F KPIs, none learnt yet. 0, -EINVAL or -ENOMEM. */
int ccd_watch_scale_open(CcdWatchScale **out, int F);
void ccd_watch_scale_close(CcdWatchScale **s);
/** Its bytes (8 F and an int). */
size_t ccd_watch_scale_bytes(int F);

/** The watch keeps CCD_WATCH_MAX_WINDOWS windows of target steps: the most a baseline
 *  reaches back and a new model's window grows before it is "not judged". */
#define CCD_WATCH_MAX_WINDOWS 7

/** A window's score. */
typedef struct CcdWatchScore {
    double mase;                      ///< mean over KPIs with a score; NAN when none
    double mase_kpi[CC_MAX_FEATURES]; ///< per KPI (model order); NAN: no score
    int F;                            ///< KPIs
    int64_t forecasts;                ///< matured forecasts scored (both kinds, all KPIs)
    int64_t steps;                    ///< target steps the window spans (with samples or not)
    int64_t first_step, last_step;    ///< target steps of the window that hold samples
} CcdWatchScore;

/** What ccd_watch_judge says of the model swapped in. */
typedef enum CcdWatchVerdict {
    CCD_WATCH_WAIT,       ///< its window is still growing
    CCD_WATCH_KEEP,       ///< not worse than the baseline by more than the margin
    CCD_WATCH_ROLL_BACK,  ///< worse by more than the margin
    CCD_WATCH_NOT_JUDGED, ///< CCD_WATCH_MAX_WINDOWS windows without the minimum of forecasts
} CcdWatchVerdict;

/** A watch of window_steps target steps (it keeps CCD_WATCH_MAX_WINDOWS times that: 48 F +
 *  32 bytes a step) for a model of F KPIs and a step of step_s seconds (the one day of
 *  seasonal naive is 86400 / step_s steps, at least 1). A history of another F is not
 *  scored. 0, -EINVAL or -ENOMEM. */
int ccd_watch_open(CcdModelWatch **out, int window_steps, int64_t step_s, int F);
void ccd_watch_close(CcdModelWatch **w);

/** Worker, after the history h of a cell recorded the observation of step p: scores the
 *  forecasts it holds for p, weighed by the cell's scale, which then learns step p (with
 *  forecasts or not). NULL w: nothing. NULL scale, or one of another F: the cell's samples
 *  are in the unweighted counters only. */
void ccd_watch_step(CcdModelWatch *w, const CcHistory *h, CcdWatchScale *scale, int64_t p);

/** The newest target step seen (-1: none). */
int64_t ccd_watch_newest(CcdModelWatch *w);
/** The model in service's last window: the newest window_steps target steps, none before
 *  its swap (ccd_watch_restart). */
void ccd_watch_score(CcdModelWatch *w, CcdWatchScore *s);
/** At a swap, the baseline: the model in service until now scored over its newest
 *  window_steps target steps, and further back a step at a time until they hold
 *  min_forecasts matured forecasts; never before its own swap nor past what the watch keeps.
 *  s->forecasts < min_forecasts: it never had them (s->steps: how far back it looked). */
void ccd_watch_baseline(CcdModelWatch *w, int64_t min_forecasts, CcdWatchScore *s);
/** A new model from now (a swap): only forecasts made after step `after` (origin > after)
 *  are counted from now, so that the old model's forecasts that mature after the swap are
 *  not charged to the new one, and its windows start after `after`. */
void ccd_watch_restart(CcdModelWatch *w, int64_t after);
/** The judgement of the model in service since the swap (ccd_watch_restart): its window is
 *  every target step since the swap, growing (never sliding) until it spans window_steps
 *  steps and holds min_forecasts matured forecasts; then KEEP, or ROLL_BACK when its MASE is
 *  above (1 + margin) x baseline_mase. NOT_JUDGED once it spans CCD_WATCH_MAX_WINDOWS
 *  windows without them; WAIT before. *s: the window's score. */
CcdWatchVerdict ccd_watch_judge(CcdModelWatch *w, double baseline_mase, int64_t min_forecasts,
                                double margin, CcdWatchScore *s);
/** Window steps. */
int ccd_watch_window(const CcdModelWatch *w);

/** Every matured forecast scored since the watch opened, whatever the window and the swaps
 *  (ccd_watch_restart leaves them) and whether its cell weighs yet: per kind (CcHistoryFc)
 *  and KPI, index kind * F + f, the UNWEIGHTED sums (each sample in its cell's units) of
 *  |y − ŷ| and of seasonal naive's |y − y(p − day)| and the samples; arrays of 2 * F.
 *  Read-only counters for /metrics, so that a reader differencing them gets the served
 *  accuracy of any period pooled over the cells (tests/bench/learn_e2e.sh: per data day). */
void ccd_watch_totals(CcdModelWatch *w, double *err, double *naive, int64_t *n);
/** The same, weighted as the rollback's windows weigh (w = 1 / s_c,f; only the samples of
 *  cells that weigh): their ratio is the per-cell score the rollback uses, of any period. */
void ccd_watch_scaled_totals(CcdModelWatch *w, double *err, double *naive, int64_t *n);

#endif
