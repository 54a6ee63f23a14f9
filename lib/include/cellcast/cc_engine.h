/*
 * cc_engine.h — incremental, batched inference of cellcast-tx/3 (and tx/2) for many cells.
 *
 * A cell holds F channels (one per KPI) that step together: per channel a ring of the
 * last max(N·P + P, M + P - 1, RL) raw values (RL the tx/3 linear window, 0 in tx/2), the frozen
 * normalisation of the newest complete patch, and per layer the keys and values of the n ≤ N cached
 * patch tokens, laid out (L, 2, H, ·): one head's keys are one contiguous block, stored transposed
 * (DK, N) so a query's scores vectorise over tokens, its values (N, DK). A step whose newest
 * complete patch differs from the one the cache was built on (a boundary, a restored or reset cell,
 * a new model) first rebuilds the cache; then only the current token runs through the layers.
 *
 * cc_engine_step() batches the current tokens of every channel of every cell it is given
 * (one sgemm per dense part, the tx/3 linear path included) and, separately, the rebuilds. Cells
 * are split over n_threads threads (the caller's thread included); OpenBLAS must be single-threaded
 * (the host calls openblas_set_num_threads(1); the engine does not touch process state).
 *
 * Thread-safety: an engine and its cells are used by one thread at a time; the readers
 * (cc_cell_forecast, ...) must not run concurrently with a step touching that cell.
 */
#ifndef CC_ENGINE_H
#define CC_ENGINE_H

#include "cc_cell.h"
#include "cc_half.h"
#include "cc_model.h"

typedef struct CcEngine CcEngine;

/* enum CcKvType (CC_KV_F32, CC_KV_F16, CC_KV_BF16): cc_half.h */

typedef struct CcEngineSettings {
    int n_threads;          ///< threads over cells, caller's included; 0 = online cores (default 1)
    enum CcKvType kv_type;  ///< element type of the KV caches (default CC_KV_F32)
    int max_batch_cells;    ///< cells per internal batch chunk, bounds scratch memory (default 512)
    int keep_attention;     ///< keep the last step's attention weights per channel (default 0)
    int no_cache;           ///< rebuild every step: direct evaluation of N+1 tokens (default 0)
    int blas_dense;         ///< dense layers through OpenBLAS even where the packed AVX-512
                            ///< kernels of cc_gemm apply; for comparisons (default 0)
    int portable_attention; ///< attention through the portable kernels even where the
                            ///< AVX-512 ones of cc_attention apply; for tests (default 0)
} CcEngineSettings;

/** Time spent in the engine since open (or the last cc_engine_reset_stats), in ns. */
typedef struct CcEngineStats {
    uint64_t steps;          ///< cell-steps run
    uint64_t channel_steps;  ///< channel-steps with a forecast
    uint64_t rebuilds;       ///< channel cache rebuilds
    uint64_t rebuild_tokens; ///< tokens computed by rebuilds
    int64_t ns_dense;        ///< current-token sgemms, LayerNorms, embedding, head
    int64_t ns_attention;    ///< current-token attention against the caches
    int64_t ns_rebuild;      ///< rebuilds (all their parts)
    int64_t ns_other;        ///< rings, normalisation, token assembly
} CcEngineStats;

void cc_engine_default_settings(CcEngineSettings *s);

/**
 * Opens an engine on a model; the model must outlive the engine. s NULL: defaults.
 * Returns 0, -EINVAL (bad model or settings), -ENOMEM, or a pthread error; err (may be NULL)
 * says which.
 */
int cc_engine_open(CcEngine **out, const CcModel *model, const CcEngineSettings *s, char *err,
                   size_t errlen);
void cc_engine_close(CcEngine **e);
const CcModel *cc_engine_model(const CcEngine *e);

/**
 * Switches an engine to another model (hot reload). Cells keep their raw history; their
 * caches are invalidated and rebuilt at their next step. A model with a different F,
 * P, N, M, D, H, L or ring (linear window) than the cells were opened with needs
 * cc_cell_rebind(). 0 or -EINVAL.
 */
int cc_engine_set_model(CcEngine *e, const CcModel *model);

void cc_engine_stats(const CcEngine *e, CcEngineStats *out);
void cc_engine_reset_stats(CcEngine *e);

/** Bytes one cell occupies at most (full ring, caches, forecast, attention if kept); a
 *  cell with less history than one patch has no caches and a ring sized to its history. */
size_t cc_engine_cell_bytes(const CcEngine *e);
/** Steps of raw history a cell's ring keeps: max(N·P + P, M + P − 1, RL) (see the README;
 *  RL = linear_window, 0 in tx/2). */
int cc_engine_ring_steps(const CcEngine *e);
/** Bytes of KV cache per cell alone. */
size_t cc_engine_kv_bytes_per_cell(const CcEngine *e);

/** "avx512" when the current model's attention runs on the AVX-512 register kernels (the
 *  CPU has AVX-512F, DK = 16, N ≤ 63, not portable_attention), else "portable". */
const char *cc_engine_attention_path(const CcEngine *e);

/** Opens a cell laid out for e's model; it follows e across model swaps (cc_engine_set_model)
 *  until a new shape needs cc_cell_rebind. Its history and forecast: cc_cell.h. 0 or -ENOMEM. */
int cc_cell_open(CcCell **out, const CcEngine *e);

/**
 * Re-sizes a cell for the engine's current model, keeping as much raw history as both
 * shapes allow (the history's width must match: same F). 0, -EINVAL, -ENOMEM.
 */
int cc_cell_rebind(CcCell *c, const CcEngine *e);

/** One cell's observation for one step. */
typedef struct CcStepInput {
    CcCell *cell;
    int64_t step;        ///< absolute step index p = ts / S
    const float *values; ///< (F) raw KPI values, finite; NULL = recompute the forecast
                         ///< at the cell's last step without new data (after restore or
                         ///< model swap)
} CcStepInput;

/**
 * Appends each input's values to its cell and computes the new forecasts, batched.
 * A cell's step must be its last step + 1 unless the cell is empty (a gap is the caller's
 * policy: impute the missing steps or cc_cell_reset()). status (n, may be NULL) receives
 * per input: 0 ok, -EINVAL step not consecutive or cell given twice, -ERANGE non-finite
 * value, -ESTALE cell laid out for another model shape (cc_cell_rebind it), -ENOMEM no
 * memory for the cell's longer ring or its first KV caches (a cell's memory grows with its
 * history: cc_engine_cell_bytes is the most it takes); a refused input leaves its cell
 * unchanged. Returns 0, or -ENOMEM (then no cell
 * of the batch has advanced its forecast reliably: callers reset those cells).
 */
int cc_engine_step(CcEngine *e, const CcStepInput *in, int n, int *status);

/** The longest gap (missing steps) the hosts impute by default, stepping the cell with its
 *  last values, before they reset it instead (cellcastd's ingest.max_gap, cellcast
 *  anomaly-eval --max-gap): a day of 15-minute steps. A reset cell is not scored for
 *  alerts.warmup_steps (64) steps, so the earlier default of 3 turned an hour's collector
 *  gap at 15-minute steps into 16 hours without alerts, and irregularly sampled series
 *  (NAB's realTraffic) restarted every few rows (docs/operations.md §5 "Gaps"). */
#define CC_GAP_IMPUTE_STEPS 96

#endif
