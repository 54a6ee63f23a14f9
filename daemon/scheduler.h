/*
 * scheduler.h — micro-batching of cell-steps into the engine, on a worker thread.
 *
 * The event loop appends cell-steps to the OPEN batch (the cell table applies the ingest
 * rules, cells.h). A batch is SEALED and handed to the worker when it holds batch_steps
 * cell-steps, or its oldest step has waited batch_ms, or on drain — and only when the
 * worker is idle: at most one batch is in flight, and while it is, the open batch keeps
 * growing (so batches grow by themselves under load; the host stops polling Kafka above
 * 4 × batch_steps pending).
 *
 * Sealing (the host's seal hook, loop thread: ccd_cells_seal) resolves each step's values
 * (combined/filled/imputed), marks its cells busy and numbers each cell's steps in the
 * batch 0, 1, 2... (its "round"). The worker runs one cc_engine_step per round (a cell
 * appears at most once per engine call, in step order), resetting cells whose sequence
 * restarts and feeding the cell's previous step again where the host's hold says so (an
 * outage), and calls the host's on_stepped for each stepped cell with what was observed
 * (publish, then alerts).
 * The worker wakes the loop through a self-pipe (so libevent needs no locking), where the
 * batch completes: counters, then the host's on_done (cells un-busied, the Kafka ack of
 * the batch — offsets are stored only after the step —, the requests that waited for a
 * busy cell).
 *
 * The scheduler calls no other module: the cell table fills its batches, the host's hooks
 * take the batch on from there.
 */
#ifndef CCD_SCHEDULER_H
#define CCD_SCHEDULER_H

#include <pthread.h>
#include <stdint.h>

#include <event2/event.h>

#include "cc_engine.h"
#include "cells.h"
#include "histogram.h"

typedef struct CcdItem {
    CcdCell *cell;
    int64_t step;
    uint64_t present; ///< KPIs given by records (bit f); 0 for an imputed step
    int imputed;      ///< a gap step filled with the last values
    int reset_before; ///< the cell's sequence restarts at this step
    int held;         ///< the model was fed the cell's previous step instead (an outage held:
                      ///< CcdSchedSettings.hold); set by the worker
    int round;        ///< this cell's r-th step in the batch
    int status;       ///< engine status (0, -EINVAL, -ERANGE, -ENOMEM)
} CcdItem;

struct CcdBatch {
    CcdItem *items;
    float *values; // (cap, F)
    int n, cap, F;
    int n_rounds;
    uint64_t kafka_hi; ///< Kafka batches ≤ this are wholly in this batch or earlier ones
    int64_t t_open_ns, t_dispatch_ns, t_done_ns;
    int64_t ns_step;    ///< worker time in cc_engine_step
    int64_t ns_publish; ///< worker time publishing forecasts
    int enomem;
    CcEngineStats estats; ///< engine totals after this batch (copied by the worker)
};

/** Appends an item (values uninitialised, present 0); returns its index or -ENOMEM. */
int ccd_batch_push(CcdBatch *b, CcdCell *c, int64_t step);

/** Called on the worker after each stepped item; `values` is the stepped observation
 *  (filled), `present` the KPIs records gave (bit f; 0 for an imputed step). */
typedef void (*CcdSteppedFn)(void *cookie, CcdCell *c, int64_t step, const float *values,
                             int imputed, uint64_t present, int held);

/** Called on the worker before an item's step, with the item's values, the KPIs records
 *  gave (present, as CcdSteppedFn's) and whether the cell's ring holds its previous step
 *  (have_prev): 1 = feed the model that previous step's values again instead (on_stepped
 *  still gets the item's values); on have_prev 0 the answer is ignored. */
typedef int (*CcdHoldFn)(void *cookie, CcdCell *c, const float *values, int imputed,
                         uint64_t present, int have_prev);

typedef struct CcdSchedSettings {
    int batch_steps, batch_ms;
    CcdHoldFn hold; ///< on the worker (default NULL: every item fed as it is)
    void (*on_done)(void *cookie, CcdBatch *b); ///< on the loop thread, after the step
    CcdSteppedFn on_stepped;                    ///< on the worker (default NULL)
    void *cookie;
    void (*seal)(void *cookie, CcdBatch *b); ///< on the loop thread, before dispatch
    int worker_nice;                         ///< nice increment of the worker thread, so
                                             ///< the event loop (HTTP) wins a busy CPU (0)
} CcdSchedSettings;

typedef struct CcdSchedStats {
    uint64_t batches, items, imputed_items, refused, enomem;
    CcdHist batch_size;    ///< cell-steps per batch
    CcdHist step_seconds;  ///< worker time per batch
    CcdHist delay_seconds; ///< oldest record's wait from arrival to published forecast
    CcEngineStats engine;  ///< last copy from the worker
    int64_t ns_step, ns_publish;
} CcdSchedStats;

typedef struct CcdSched CcdSched;

int ccd_sched_open(CcdSched **out, struct event_base *base, CcEngine *e, const CcdSchedSettings *s);
/** Drains (see ccd_sched_drain) and stops the worker. */
void ccd_sched_close(CcdSched **s);

CcdBatch *ccd_sched_open_batch(CcdSched *s);
/** Records that Kafka batch `id` was wholly appended to the open batch. */
void ccd_sched_note_kafka(CcdSched *s, uint64_t id);
/** Seals and dispatches the open batch if due (or `force` and non-empty) and the worker
 *  is idle. Returns 1 if a batch was dispatched. */
int ccd_sched_maybe_flush(CcdSched *s, int force);
/** Pending cell-steps (open batch) and whether a batch is in flight. */
int ccd_sched_pending(const CcdSched *s);
int ccd_sched_busy(const CcdSched *s);
/** Steps everything pending synchronously (shutdown): waits for the in-flight batch, then
 *  dispatches the open one and waits for it, running on_done for each. */
void ccd_sched_drain(CcdSched *s);
const CcdSchedStats *ccd_sched_stats(const CcdSched *s);
void ccd_sched_set_batching(CcdSched *s, int batch_steps, int batch_ms);

#endif
