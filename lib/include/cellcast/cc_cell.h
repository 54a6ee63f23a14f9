/*
 * cc_cell.h — one cell of the engine: its history of raw values and the forecast the engine
 * last made for it, and what a host reads of them. A cell is opened on an engine and stepped
 * by it (cc_cell_open, cc_cell_rebind, cc_engine_step: cc_engine.h, which includes this);
 * everything here works on the cell alone.
 *
 * Thread-safety: as cc_engine.h: the readers must not run concurrently with a step touching
 * that cell.
 */
#ifndef CC_CELL_H
#define CC_CELL_H

#include <stdint.h>

typedef struct CcCell CcCell;

void cc_cell_close(CcCell **c);

/** Forgets the history: the next step starts a new sequence (cold start again). */
void cc_cell_reset(CcCell *c);

/** The cell's current forecast, valid until the cell's next step. */
typedef struct CcForecast {
    int valid;    ///< 0 until the cell holds one complete patch (cold start)
    int64_t step; ///< t, the newest observed step; forecasts are for t+1..t+HZ
    int n_features, horizon;
    const float *y;        // (F, HZ, 2) head output: normalised mean (tx/3: with the linear
                           //            path) and log-sigma
    const float *mu;       // (F) normalisation mean
    const float *sigma;    // (F) normalisation scale
    const float *sd_scale; // (F, HZ) tx/3 calib.sigma_scale; NULL = 1 (tx/2). Points into
                           //         the model: valid while the engine serves it
    int64_t seq_start;     ///< first step of the sequence behind it (p0): step - seq_start + 1
                           ///< steps of history, for callers that distrust cold starts
} CcForecast;

void cc_cell_forecast(const CcCell *c, CcForecast *out);

/** Mean and sd in the KPI's own units for channel f, horizon step k (0-based): the served
 *  numbers, sd with the calibration (sd_scale) applied. */
void cc_forecast_point(const CcForecast *fc, int f, int k, double *mean, double *sd);

/** The same for every (f, k) at once, in float, (F, HZ) as [f·HZ + k]: for hosts that need
 *  the whole forecast each step (online calibration); within float rounding of the above. */
void cc_forecast_points(const CcForecast *fc, float *mean, float *sd);

/** Steps held: first/last absolute step (-1 when empty) and how many (≤ ring size). */
void cc_cell_span(const CcCell *c, int64_t *first, int64_t *last);

/** Copies the stored raw values of steps [from, from+count) as (count, F); 0 or -ERANGE. */
int cc_cell_history(const CcCell *c, int64_t from, int count, float *out);

/**
 * Restores a cell's raw history (e.g. from a snapshot): steps first..first+count-1 with
 * values (count, F). The cell is reset first; the forecast becomes valid at the next
 * cc_engine_step (values NULL to compute it without new data). 0, -EINVAL, -ERANGE.
 * `seq_start` is the first step of the sequence (≤ first) for the cold-start rule.
 */
int cc_cell_restore(CcCell *c, int64_t seq_start, int64_t first, int count, const float *values);

/** First step of the cell's current sequence (p0), -1 when empty. */
int64_t cc_cell_seq_start(const CcCell *c);

/**
 * Last step's attention of channel f (requires keep_attention): weights (L, H, T) packed
 * with T = n+1 over the tokens [cached_0..cached_{n-1}, current], and each token's end
 * step (T). Buffers of (L, H, N+1) and (N+1) always suffice. *n_tokens gets T. 0, -EAGAIN (no
 * forecast yet), -EINVAL (not kept).
 */
int cc_cell_attention(const CcCell *c, int f, float *weights, int64_t *token_end, int *n_tokens);

#endif
