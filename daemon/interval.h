/*
 * interval.h — intervals that hold (issue 12, forecast.interval_adapt): the daemon's
 * side of lib/cc_online_calib.h. The validation-fitted calib.sigma_scale of a model cannot
 * follow a stretch of data calmer or burstier than validation, so a cell's served P10–P90
 * intervals cover 0.70–0.87 instead of 0.80 (docs/results.md); a host that sees the truths
 * can correct that as it goes. Per cell, a scale per KPI f and horizon step k multiplies
 * the model's sd in the served intervals (lo/hi = mean ± z·sd·scale[f][k]), moved by every
 * forecast that matures toward a 0.2 miss rate of P10–P90.
 *
 * Off (the default) nothing here runs and no per-cell memory is held: the served
 * intervals are the spec's mean ± z·sd.
 *
 * State, owned like the cell's long history (cells.h): CcdCell.calib (the library's ring of
 * the last HZ forecasts and the scales), created at the first valid forecast with the
 * feature on, written by the worker while the cell is busy; CcdPub.scale (publish.h), the
 * scales as published with the forecast, read by HTTP under pub_lock. A cell starts at
 * scale 1: when created, restored from a snapshot or handed over (the snapshot does not hold
 * the scales), and when the feature is turned on; a changed rate keeps them.
 *
 * Counters (over all cells, while on): forecasts scored and missed, the realised coverage
 * is 1 - missed/scored (cellcast_interval_*_total in /metrics).
 */
#ifndef CCD_INTERVAL_H
#define CCD_INTERVAL_H

#include <stddef.h>
#include <stdint.h>

#include "cc_engine.h"

typedef struct CcdCells CcdCells;
typedef struct CcdCell CcdCell;
typedef struct CcdCellsSettings CcdCellsSettings;

/** Bytes one cell holds with the feature on (the calibration and its published scales). */
size_t ccd_interval_cell_bytes(int F, int HZ);

/**
 * Worker, after the cell stepped to `step` and fc is its new forecast: scores the truths of
 * `step` (obs, F values, NaN = no truth: a KPI no record gave, an imputed step) against the
 * forecasts the cell holds, keeps fc (when valid) and returns the scales of fc (F × HZ,
 * [f·HZ + k], in a buffer of the table valid until the next call), or NULL when the
 * feature is off or the cell has no calibration (every scale 1).
 */
const float *ccd_interval_step(CcdCells *t, CcdCell *c, int64_t step, const float *obs,
                               const CcForecast *fc);

/** Loop thread, the worker idle (reload): the table's settings were *old and are now t->s.
 *  Off drops every cell's calibration (and its published scales), so a cell turned on
 *  again starts at scale 1 as it next steps; a changed rate is given to every calibration,
 *  its scales kept. */
void ccd_interval_apply(CcdCells *t, const CcdCellsSettings *old);

/** Frees one cell's calibration and published scales (loop thread, the cell not busy). */
void ccd_interval_drop(CcdCells *t, CcdCell *c);

#endif
