/*
 * model_watch.h — the live accuracy of the model in service, for the rollback of a learned
 * model that degrades live (model.source kafka; models.h, docs/operations.md §6).
 *
 * What is measured: the forecasts the cells' long history holds (cc_history.h: the one-step
 * forecast and the horizon-end forecast of every step, as publish.c records them) scored
 * when their truth arrives, against seasonal naive of one day (the value one day of steps
 * before the target), pooled over cells: per KPI and forecast kind, MASE = Σ|y − ŷ| /
 * Σ|y − y(p − day)| over the matured forecasts whose target step p is in the window (the
 * newest W target steps seen); a KPI's MASE is the mean of its two kinds, the score the
 * mean over the KPIs that have one (each KPI weighs alike whatever its units: the learner's
 * criterion). The rollback's rule (ccd_watch_baseline, ccd_watch_judge): windows that grow
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
 * that it outlives the worker; models.c creates it.
 */
#ifndef CCD_MODEL_WATCH_H
#define CCD_MODEL_WATCH_H

#include <stdint.h>

#include "cc_history.h"
#include "cc_model.h"

typedef struct CcdModelWatch CcdModelWatch;

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

/** Worker, after the history h recorded the observation of step p: scores the forecasts
 *  it holds for p. NULL w: nothing. */
void ccd_watch_step(CcdModelWatch *w, const CcHistory *h, int64_t p);

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
 *  (ccd_watch_restart leaves them): per kind (CcHistoryFc) and KPI, index kind * F + f, the
 *  sums of |y − ŷ| and of seasonal naive's |y − y(p − day)| and the samples; arrays of
 *  2 * F. Read-only counters for /metrics, so that a reader differencing them gets the
 *  served accuracy of any period (tests/bench/learn_e2e.sh: per data day). */
void ccd_watch_totals(CcdModelWatch *w, double *err, double *naive, int64_t *n);

#endif
