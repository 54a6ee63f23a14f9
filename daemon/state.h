/*
 * state.h — cellcastd's state across restarts: snapshots (lib/cc_snapshot) of every cell's
 * ring and alert state, written on SIGTERM and every snapshot.interval_s and restored at
 * start (a corrupt or mismatched file is refused with the reader's message; the cells are
 * then rebuilt from Kafka, re-reading one window per assigned partition when
 * kafka.rewind_on_assign_s is 0), and the Kafka offsets acknowledged with them.
 *
 * Offsets and snapshots (at-least-once without loss across SIGKILL). With snapshots on,
 * the Kafka offsets of stepped batches are not stored at once: ccd_state_ack remembers
 * them and each snapshot stores (acks) them right after the snapshot file is in place, so
 * the committed offsets never run ahead of the newest snapshot. A restart restores the
 * snapshot and the consumer re-reads from the committed offsets: every step after the
 * snapshot comes again (steps the snapshot already holds are dropped as duplicates by the
 * (cell, step) rule). Without snapshots (snapshot.path ""), offsets are stored at once.
 *
 * Loop thread only.
 */
#ifndef CCD_STATE_H
#define CCD_STATE_H

#include <stdint.h>

#include "cc_snapshot.h"
#include "cellcastd.h"

typedef struct CcdState CcdState;

/** What a cell record carries besides the engine and alert state (snapshot files and the
 *  state topic alike). */
typedef struct CcdStateExtra {
    int32_t topic, partition;
    int64_t first_step, last_ts;
    uint64_t n_records, n_steps;
} CcdStateExtra;
void ccd_state_cell_extra(const CcdCell *c, CcdStateExtra *ex);

/** Checks the fields of a cell record before it is restored (snapshot files and the state
 *  topic): its steps end no later than the step of max_ts (ccd_clock_max_ts, the bound of
 *  ingest: a record further ahead made the cell's real records late for good), its extra
 *  fields (CcdStateExtra) in range. key non-NULL (a state-topic record): the cell id it
 *  holds is its key, and the KPI partition it names is `partition`, the one it was read
 *  from (state partition p holds the cells of KPI partition p). 0, or -EINVAL / -ERANGE
 *  with a message. */
int ccd_state_check_record(const CcSnapshotCell *sc, const char *key, int32_t partition,
                           int64_t step_seconds, int64_t max_ts, char *err, size_t errlen);

/** Restores one cell record into the table (created or replaced); the worker must be
 *  idle. out NULL: its forecast is computed and published now; else *out is the cell and
 *  the caller passes it to ccd_state_forecast_cells (batched). 0 or -errno with a
 *  message. */
int ccd_state_restore_cell(Ccd *d, const CcSnapshotCell *sc, CcdCell **out, char *err,
                           size_t errlen);
/** Computes the forecasts of restored cells in batched engine steps and publishes them. */
void ccd_state_forecast_cells(Ccd *d, CcdCell **cells, int n);
/** Whether restored cells may wait for a batched forecast (the table is far from full:
 *  no restore evicts a waiting cell). */
int ccd_state_can_batch(const Ccd *d);

/** Partitions handed over (revoke): their cells' state records written and delivered
 *  (handover.c), then the offsets of what was stepped acked, unless a snapshot file holds
 *  them back. topic -1 / parts NULL = every cell. 0 or -errno (nothing acked). */
int ccd_state_handover(Ccd *d, int topic, const int32_t *parts, int n);

/** Opens d->state: resolves snapshot.path ("auto" = $STATE_DIRECTORY/state.snap under
 *  systemd, else off). 0 or -ENOMEM. */
int ccd_state_open(Ccd *d, char *err, size_t errlen);
void ccd_state_close(Ccd *d);

/** The snapshot file ("" = snapshots off); the alert journal lives beside it. */
const char *ccd_state_path(const Ccd *d);

/** Restores the snapshot into the cell table (after the alerts module is open, before the
 *  scheduler and Kafka); a refused file is logged and the daemon rebuilds from Kafka. */
void ccd_state_restore(Ccd *d);

/** Kafka batches ≤ id were stepped: stores their offsets now, or at the next snapshot when
 *  snapshots are on. */
void ccd_state_ack(Ccd *d, uint64_t id);

/** Once per second from the cron: the periodic snapshot when due. */
void ccd_state_cron(Ccd *d);

/** At shutdown, after the scheduler drained: the last snapshot and the offsets it holds. */
void ccd_state_shutdown(Ccd *d);

typedef struct CcdStateStats {
    uint64_t snapshots, snapshot_errors, restored_cells;
    uint64_t restore_failed;               ///< cell records refused or not restored at the start
    uint64_t positions_refused;            ///< positions records refused at the start
    int64_t snapshot_unix, snapshot_bytes; ///< time and size of the last one (0, -1: none)
    double snapshot_seconds;
} CcdStateStats;
void ccd_state_stats(const Ccd *d, CcdStateStats *st);

#endif
