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

#include "cellcastd.h"

typedef struct CcdState CcdState;

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
