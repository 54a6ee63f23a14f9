/*
 * cells.h — cellcastd's cell table: cell id → engine cell (CcCell) + metadata, and the
 * ingest rules that turn decoded KPI records into engine steps.
 *
 * Ingest rules (per cell; `last` = the newest step accepted for the cell):
 *   - step == last and that step is still in the open (not yet dispatched) batch: the
 *     records are COMBINED — per KPI the value of the latest record wins, KPIs absent from
 *     every record of the step are filled with the cell's previous value (counted as
 *     filled_kpis; 0 if the cell never had one); a record repeating a KPI the open step
 *     already has is counted as a duplicate too (merged: its values win);
 *   - step == last, already dispatched: a duplicate — counted and dropped (this is what
 *     makes at-least-once redelivery idempotent);
 *   - step < last: late / out of order — counted and dropped;
 *   - step > last + 1 (a gap of g steps): with gap_policy impute and g ≤ max_gap the g
 *     missing steps are stepped with the last values and flagged imputed (counted); a
 *     longer gap, or gap_policy restart, resets the cell (its sequence restarts, cold);
 *   - a new cell beyond max_cells or the KV budget evicts the least recently updated cell
 *     that has nothing in flight (LRU by last accepted record); the evicted cell's history
 *     is dropped and it restarts cold if it comes back (counted as evictions).
 *
 * Cells are keyed to their Kafka (topic, partition) — the partition of the last message
 * that fed them; -1 for POST /v1/kpis — so a rebalance can release the cells of revoked
 * partitions (ccd_cells_release_partitions). Cells of newly assigned partitions are built
 * from the messages that arrive (from the committed offsets; a snapshot restore, state.h,
 * plugs in at the same place).
 *
 * Threading (the handoff with the scheduler's worker):
 *   - the table (hash, LRU, metadata, counters) belongs to the event-loop thread only;
 *   - a cell's CcCell belongs to the worker while the cell is `busy` (in the batch being
 *     stepped) and to the loop thread otherwise; busy is set and cleared by the loop thread
 *     at dispatch and completion, so the loop never touches a busy cell's CcCell (history
 *     and attention requests for a busy cell wait for the batch: see api.c);
 *   - the published forecast (CcdPub, publish.h) is written by the worker and read by
 *     HTTP handlers under the table's pub_lock, held only for a memcpy.
 */
#ifndef CCD_CELLS_H
#define CCD_CELLS_H

#include <pthread.h>
#include <stdint.h>

#include "cc_engine.h"
#include "cc_history.h"
#include "cc_kpi.h"
#include "cc_online_calib.h"
#include "publish.h"

typedef struct CcdBatch CcdBatch;

enum CcdCellState { CCD_CELL_COLD = 0, CCD_CELL_LIVE = 1 };

struct CcdCell {
    char id[CC_KPI_CELL_ID_MAX + 1];
    uint64_t serial; ///< unique per cell created by this table (never reused)
    CcCell *cell;
    int topic;              ///< index in kafka.topics, -1 = HTTP
    int32_t partition;      ///< -1 = HTTP / unknown
    int64_t last_step;      ///< newest accepted step (pending or stepped), -1
    int64_t first_step;     ///< first accepted step ever, -1
    int64_t last_ts;        ///< unix seconds of the newest record
    int64_t last_update_ns; ///< monotonic time of the newest accepted record
    uint64_t n_records, n_steps, n_duplicates, n_late, n_imputed, n_restarts, n_filled;
    uint64_t n_refused; ///< steps the engine refused (should stay 0)
    uint64_t n_held;    ///< steps whose model input was the previous step's (an outage held)
    float *last_values; ///< (F) values of the newest accepted step (for filling)
    int have_values;
    uint64_t *imputed_bits; ///< ring of R bits: step p imputed (history flags)
    int busy;               ///< in the batch being stepped (loop thread only)
    int open_items;         ///< items in the open batch
    int open_last;          ///< index in the open batch of its item for last_step, -1
    int doomed;             ///< release once not busy (revoked partition)
    int64_t state_step;     ///< newest step on the state topic + 1, 0 none (handover.c)
    CcdPub pub;             ///< its forecast, as published (publish.h)
    void *anomaly;          ///< its alert state (alerts.c)
    CcHistory *hist;        ///< long history (cc_history.h), created at its first publish;
                            ///< owned like the CcCell (worker while busy)
    size_t hist_bytes;      ///< cc_history_bytes(hist) as last counted (loop thread)
    CcOnlineCalib *calib;   ///< its interval scales (interval.h), NULL: scale 1; owned
                            ///< like hist
    struct CcdWatchScale *watch_scale; ///< its scale for the rollback watch (model_watch.h:
                                       ///< about 8 F bytes), created with hist when a watch
                                       ///< is on, owned like hist; NULL: it does not weigh
    struct CcdCell *hnext, *lru_prev, *lru_next;
};

/* F, HZ and the ring size R come from the engine (its model, cc_engine_ring_steps). */
typedef struct CcdCellsSettings {
    int64_t max_cells;
    int64_t kv_budget_bytes;
    int gap_policy; ///< CCD_GAP_IMPUTE / CCD_GAP_RESTART (config.h)
    int max_gap;
    int64_t history_depth_s;    ///< long history per cell (cc_history.h), 0 none
    int interval_adapt;         ///< interval.h (forecast.interval_adapt), 0 off
    double interval_adapt_rate; ///< its rate (forecast.interval_adapt_rate), 0 the library's
} CcdCellsSettings;

typedef struct CcdCellsStats {
    uint64_t records, steps_queued, duplicates, late, imputed, restarts, filled, evictions,
        released, created, rejected_full;
    uint64_t held; ///< steps fed the cell's previous step for an outage (ingest.outage_hold_steps)
} CcdCellsStats;

struct CcdCells {
    CcdCellsSettings s;
    int n_features, horizon; ///< F, HZ of the model
    int ring;                ///< R: steps the engine keeps (cc_engine_ring_steps)
    const CcEngine *engine;
    CcdCell **buckets;
    size_t n_buckets, n_cells;
    CcdCell *lru_head, *lru_tail; ///< head = least recently updated
    size_t cell_bytes;            ///< engine bytes per cell + ours
    int hist_depth;               ///< steps of long history per cell (history_depth_s), 0 none
    size_t hist_bytes;            ///< the cells' long histories, as counted at unbusy
    uint64_t hist_failed;         ///< history writes that found no memory (worker; approximate)
    /** Matured forecasts scored by the cells' interval calibrations and those outside
     *  their served P10–P90 interval (interval.h; the worker adds, atomically). */
    uint64_t interval_scored, interval_missed;
    /** The same by KPI f of the model in service (F used; a model of another KPI set
     *  re-executes the daemon, so an index keeps its KPI for the process's life). */
    uint64_t interval_kpi_scored[CC_MAX_FEATURES], interval_kpi_missed[CC_MAX_FEATURES];
    /** Cell records whose interval scales were refused (the cell restored at scale 1;
     *  interval.h; loop thread). */
    uint64_t interval_refused;
    float *interval_buf; ///< the worker's scratch of interval.c (3 × F × HZ), NULL until used
    /** The live accuracy of the model in service (model_watch.h; model.source kafka), set
     *  by models.c (atomically: the worker reads it), freed here; NULL: not measured. */
    struct CcdModelWatch *watch;
    int64_t max_resident;
    size_t n_doomed; ///< cells marked for release (reap runs only then)
    /** Moves whenever the cell set or a cell's ids, steps, times or counts may have (a
     *  record taken, a batch done, a cell added or removed, a rebind): the version of the
     *  GET /v1/cells reply (http_cache.h). Loop thread. */
    uint64_t version;
    CcdCellsStats st;
    pthread_mutex_t pub_lock;
    /** Frees CcdCell.anomaly when a cell goes (set by the host; loop thread). */
    void (*free_anomaly)(void *cookie, CcdCell *c);
    void *free_cookie;
};

int ccd_cells_open(CcdCells **out, const CcEngine *e, const CcdCellsSettings *s);
void ccd_cells_close(CcdCells **t);

/** Applies new limits and gap rules (reload; loop thread). */
void ccd_cells_set_settings(CcdCells *t, const CcdCellsSettings *s);

/** After the engine's model changed shape (reload, no batch in flight): rebinds every
 *  cell's caches to it (a cell that cannot be rebound is reset and counted in *failed),
 *  resizes the imputed-flag rings to the engine's ring and re-sizes the table's budget.
 *  Returns the cells rebound, or -ENOMEM (the table is then unchanged but for the cells
 *  already rebound). */
int ccd_cells_rebind(CcdCells *t, int *failed);

/** Whether step `step` of the cell was imputed, or held for an outage: the model was fed
 *  other values than observed (for the steps the engine's ring holds). */
int ccd_cells_imputed(const CcdCells *t, const CcdCell *c, int64_t step);

CcdCell *ccd_cells_get(CcdCells *t, const char *id);

/** Creates an empty cell (snapshot restore), evicting like ingest does; NULL when the
 *  table is full of busy cells or out of memory. Returns the existing cell if present. */
CcdCell *ccd_cells_add(CcdCells *t, const char *id);

/**
 * Applies one decoded record to the open batch per the rules above. topic/partition key
 * the cell. Returns 0 (applied, combined or counted as duplicate/late), -ENOSPC (table
 * full of busy cells: the record is refused and counted), -ENOMEM.
 */
int ccd_cells_ingest(CcdCells *t, CcdBatch *open, const CcKpiRecord *rec, int topic,
                     int32_t partition);

/** For the scheduler (loop thread): resolves a batch's values (combined, filled, imputed),
 *  numbers each cell's steps (rounds) and marks its cells busy; and, when the batch is
 *  done, un-busies them and counts the steps. */
void ccd_cells_seal(CcdCells *t, CcdBatch *b);
void ccd_cells_unbusy(CcdCells *t, CcdBatch *b);

/** Marks the cells of (topic, partitions) for release; freed by ccd_cells_reap. */
int ccd_cells_release_partitions(CcdCells *t, int topic, const int32_t *parts, int n);
/** Frees doomed cells that are neither busy nor pending, then evicts idle cells (LRU) while
 *  the cells' bytes are over the budget. Returns how many were released. */
int ccd_cells_reap(CcdCells *t);

/** Calls fn for every cell (loop thread). */
void ccd_cells_foreach(CcdCells *t, void (*fn)(void *, CcdCell *), void *cookie);

/** State bytes of the resident cells (rings + KV + ours + long histories); the cell limit
 *  (limits.kv_budget_mb) is checked against it when a cell is created and once a second
 *  (ccd_cells_reap), when histories that grew since may make the table evict. */
size_t ccd_cells_bytes(const CcdCells *t);
/** Restores c's long history from cc_history_save bytes (snapshot restore, loop thread,
 *  worker idle), counting its bytes. 0, -EINVAL (refused: the cell keeps no history) or
 *  -ENOMEM; 0 without doing anything when history.depth is 0. */
int ccd_cells_history_restore(CcdCells *t, CcdCell *c, const uint8_t *p, size_t n);
/** Bytes of one cell's long history when full (history.depth). */
size_t ccd_cells_history_full_bytes(const CcdCells *t);

#endif
