/*
 * interval.h — intervals that hold (issue 12, forecast.interval_adapt): the daemon's
 * side of lib/cc_online_calib.h. The validation-fitted calib.sigma_scale of a model cannot
 * follow a stretch of data calmer or burstier than validation, so a cell's served P10–P90
 * intervals cover 0.70–0.87 instead of 0.80 (docs/results.md); a host that sees the truths
 * can correct that as it goes. Per cell, a scale per KPI f and horizon step k multiplies
 * the model's sd in the served intervals (lo/hi = mean ± z·sd·scale[f][k]), moved by every
 * forecast that matures toward a 0.2 miss rate of P10–P90.
 *
 * On by default. Off, nothing here runs and no per-cell memory is held: the served
 * intervals are the spec's mean ± z·sd.
 *
 * State, owned like the cell's long history (cells.h): CcdCell.calib (the library's ring of
 * the last HZ forecasts and the scales), created at the first valid forecast with the
 * feature on, written by the worker while the cell is busy; CcdPub.scale (publish.h), the
 * scales as published with the forecast, read by HTTP under pub_lock. A cell starts at
 * scale 1 when created and when the feature is turned on; a changed rate keeps them. Its
 * record (cell_record.h: the snapshot file and the state topic) carries the scales (the
 * library's saved form, 16 + 4·F·(HZ + 1) bytes: 816 at F 8, HZ 24), so a cell restored or
 * handed over serves them at once; not its pending forecasts (8·F·HZ² bytes): the forecast
 * computed at the restore is the first one scored again. A record without scales (older, or
 * written with the feature off) starts at scale 1; one with scales the calibration refuses
 * (not finite, outside its clamp, another F × HZ) too, told and counted
 * (cellcast_interval_scales_refused_total), the rest of the record restored.
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

/** Bytes ccd_interval_save writes for the cell: 0 when it has no calibration. */
size_t ccd_interval_save_size(const CcdCells *t, const CcdCell *c);
/** The cell's scales, saved into buf (n ≥ ccd_interval_save_size): the bytes written. Loop
 *  thread, the cell not busy. */
size_t ccd_interval_save(const CcdCells *t, const CcdCell *c, uint8_t *buf, size_t n);
/** Loop thread, the worker idle: a restored cell (its calibration dropped) gets the n saved
 *  bytes of its record as its scales, published at once. Feature off: ignored, 0. Else 0,
 *  or -EINVAL / -ENOMEM with a message, the cell at scale 1 (no calibration). */
int ccd_interval_restore(CcdCells *t, CcdCell *c, const uint8_t *buf, size_t n, char *err,
                         size_t errlen);
/** Loop thread, the worker idle: fc, the forecast computed for a restored cell at `step`
 *  and published with its scales, is held to be scored as it matures (opening the
 *  calibration, at scale 1, if the record had none). */
void ccd_interval_restored(CcdCells *t, CcdCell *c, int64_t step, const CcForecast *fc);

#endif
