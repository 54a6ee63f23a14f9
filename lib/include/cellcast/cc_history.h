/*
 * cc_history.h — a cell's long history: per step its observed KPIs (NaN = not observed),
 * whether the step was imputed, and the two forecasts made for it (one step ahead and at
 * the end of the horizon: mean and sd per KPI), for a bounded span of steps (the
 * configured depth, beyond the model's window).
 *
 * Storage: a ring of `depth + horizon` rows (forecasts reach `horizon` steps past the
 * newest observation), cut into chunks of CC_HISTORY_CHUNK (16) steps that are allocated when a
 * step first lands in them, so a cell that has seen a few steps holds one chunk, not the
 * whole depth. A row is 4 + 16 F bytes: flags, values (f32), the two means (f32) and the
 * two sds (bf16: a band's width to 3 significant digits). Rows older than the span are
 * forgotten as newer steps arrive; a step that never had an observation or a forecast reads
 * as absent.
 *
 * No locks: the owner of the cell (the worker while it steps it, the loop otherwise)
 * writes and reads it.
 */
#ifndef CC_HISTORY_H
#define CC_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#define CC_HISTORY_CHUNK 16
#define CC_HISTORY_MAX_F 64

typedef struct CcHistory CcHistory;

enum CcHistoryFc { CC_HISTORY_ONE_STEP = 0, CC_HISTORY_HORIZON_END = 1 };

/** One step as read back. */
typedef struct CcHistoryRow {
    int observed, imputed;           ///< an observation (or an imputed step) was recorded
    int have_fc[2];                  ///< forecast kinds (CcHistoryFc) recorded for this step
    float values[CC_HISTORY_MAX_F];  ///< (F) NaN = KPI not observed (or no observation)
    float mean[2][CC_HISTORY_MAX_F]; ///< (F) per forecast kind, NaN when absent
    float sd[2][CC_HISTORY_MAX_F];
} CcHistoryRow;

/** A history of `depth` steps of F KPIs with forecasts up to `horizon` steps ahead.
 *  0, -EINVAL (F outside 1..64, depth < 1, horizon < 1) or -ENOMEM. */
int cc_history_open(CcHistory **out, int F, int depth, int horizon);
void cc_history_close(CcHistory **h);

/** Bytes it holds now (chunks and index). */
size_t cc_history_bytes(const CcHistory *h);
/** Bytes a full history of that shape holds (every chunk allocated). */
size_t cc_history_full_bytes(int F, int depth, int horizon);
/** Its shape. */
void cc_history_shape(const CcHistory *h, int *F, int *depth, int *horizon);

/** Records the observation of step p: values (F; NaN for a KPI not observed) and whether
 *  the step was imputed. A step older than the span is ignored. 0, -EINVAL (p < 0) or
 *  -ENOMEM (nothing recorded). */
int cc_history_observe(CcHistory *h, int64_t p, const float *values, int imputed);

/** Records the forecast of kind `kind` made for target step p: mean and sd (F). */
int cc_history_forecast(CcHistory *h, int64_t p, enum CcHistoryFc kind, const float *mean,
                        const float *sd);

/** Steps it may hold: [first, last] (last = the newest step recorded, observation or
 *  forecast; -1, -1 when empty) and the newest observed step (-1 none). */
void cc_history_span(const CcHistory *h, int64_t *first, int64_t *last, int64_t *last_observed);

/** Reads step p into *row. 1 when the step has anything recorded, 0 when not (or outside
 *  the span). */
int cc_history_get(const CcHistory *h, int64_t p, CcHistoryRow *row);

/** Bytes cc_history_save writes: a header and, per step recorded in the span, the step and
 *  its row. */
size_t cc_history_save_size(const CcHistory *h);
/** Writes the history into buf (n ≥ cc_history_save_size); returns the bytes written, or
 *  0 when buf is too small. Host byte order (like the snapshot's other host bytes). */
size_t cc_history_save(const CcHistory *h, uint8_t *buf, size_t n);
/** Replaces h's content by what cc_history_save wrote for a history of the same shape
 *  (F, depth, horizon); every field is checked (untrusted input: a snapshot file).
 *  0, -EINVAL (malformed or another shape: h is left empty) or -ENOMEM. */
int cc_history_load(CcHistory *h, const uint8_t *buf, size_t n);

/** Forgets everything (the chunks stay allocated). */
void cc_history_clear(CcHistory *h);

#endif
