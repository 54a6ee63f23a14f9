/*
 * publish.h — what a cell shows after each step: copies of its forecast (the head output,
 * mu and sigma), the observation stepped and the expectation it was scored against (horizon
 * step 0 of the forecast one step earlier). Written by the scheduler's worker right after
 * the engine stepped the cell (through the host's hook) and read by the HTTP handlers,
 * both under the cell table's pub_lock, held only for a memcpy.
 */
#ifndef CCD_PUBLISH_H
#define CCD_PUBLISH_H

#include <stdint.h>

#include "cc_engine.h"

typedef struct CcdCells CcdCells;
typedef struct CcdCell CcdCell;

typedef struct CcdPub {
    int valid;         ///< forecast valid (the cell holds a complete patch)
    int64_t step;      ///< newest stepped step t
    uint64_t seq;      ///< bumped by every publish (HTTP reply caches key on it)
    float *y;          ///< (F, HZ, 2) head output of the forecast at t
    float *mu, *sigma; ///< (F)
    /* The observation at t against the forecast made at t-1 for t (GET /v1/cells/{id}). */
    int have_expected;
    float *obs;               ///< (F) values observed at t (NaN: not in any record)
    float *exp_mean, *exp_sd; ///< (F) expectation for t from the forecast at t-1
    /* The one-step point of the forecast at t (valid with it): the expectation of t+1,
     * computed once when published, recorded in the history and read back next step. */
    float *next_mean, *next_sd; ///< (F)
    /* The interval scales of the forecast at t (interval.h), (F, HZ) at [f·HZ + k]; NULL:
     * every scale 1 (the feature off, or the cell not calibrated yet). */
    float *scale;
} CcdPub;

/** Allocates the arrays of a cell's CcdPub (F KPIs, horizon HZ). 0 or -ENOMEM. */
int ccd_pub_init(CcdPub *p, int F, int HZ);
void ccd_pub_free(CcdPub *p);

/** After the engine stepped the cell to `step` with `values` (worker, or the loop with the
 *  worker idle): publishes its forecast, filled into *fc, with the expectation of `step`
 *  from the forecast published one step earlier, and records the step in the cell's long
 *  history (cc_history.h): the KPIs of `present` (bit f; the others, and every KPI of an
 *  imputed step, are not observed: NaN, also in obs) and the forecast's one-step and horizon-end
 * points. With forecast.interval_adapt on, the observation first scores the cell's
 * matured forecasts (interval.h), the scales are published with the forecast and the
 * history records the served band's sd (sd·scale). A step held for an outage (held: the
 * model was fed the previous step) does not score the intervals. */
void ccd_publish_stepped(CcdCells *t, CcdCell *c, int64_t step, const float *values, int imputed,
                         uint64_t present, int held, CcForecast *fc);

/** Publishes a forecast without an expectation (a cell restored from a snapshot). */
void ccd_publish(CcdCells *t, CcdCell *c, int64_t step, const float *values, const CcForecast *fc);

#endif
