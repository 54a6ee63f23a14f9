/*
 * handover.h — a cell's state follows its Kafka partition from member to member (issue
 * 14; docs/operations.md, "Several instances").
 *
 * The state topic (kafka.state_topic, default "<first KPI topic>.state", compacted) has
 * the KPI topic's partition count: state partition p holds the cells of KPI partition p
 * (co-partitioned, like a Kafka Streams changelog), one message per cell keyed by its id,
 * whose value is the cell's state record (cc_snapshot.h "State records in memory": history,
 * normalisation window, alert and anomaly state, counters). Written:
 *   - at every checkpoint (state.c, snapshot.interval_s) for the cells that stepped since
 *     the last one; the KPI offsets of what they hold are acked only once these records
 *     are delivered, so a new owner after a SIGKILL reads a state and a committed offset
 *     that agree (steps after the state are replayed, steps in it dropped as duplicates);
 *   - when partitions are handed over (revoked, or left at close): the open batch is
 *     stepped, the records of those partitions' cells written and delivered, the offsets
 *     acked and committed, all before the group moves on.
 * Read when partitions are assigned, before their KPI messages are consumed: every record
 * of the state partitions to their end; per cell the last record wins, restored unless
 * this member holds a newer state of the cell (a partition lost and assigned back).
 *
 * Loop thread only; the write and the read block the loop (bounded).
 */
#ifndef CCD_HANDOVER_H
#define CCD_HANDOVER_H

#include <stddef.h>
#include <stdint.h>

#include "cellcastd.h"
#include "config.h"

/** kafka.state_topic resolved: "auto" → "<topics[0]>.state"; "" when off. */
void ccd_handover_topic(const CcdConfig *cfg, char *buf, size_t len);

/** Opens d->handover (after Kafka). 0 or -ENOMEM. */
int ccd_handover_open(Ccd *d, char *err, size_t errlen);
void ccd_handover_close(Ccd *d);

/** Whether state records are written (a state topic configured, and found usable at the
 *  first assignment). */
int ccd_handover_enabled(const Ccd *d);

/** Writes the state records of the cells of (topic, parts) — topic -1: every cell — that
 *  stepped since their last record, and waits for their delivery (≤ 15 s). The worker
 *  must be idle. 0, or -errno (then every cell is written again next time). */
int ccd_handover_write(Ccd *d, int topic, const int32_t *parts, int n);

/** Partitions (of KPI topic `name`, index `topic`) assigned: reads their state
 *  partitions and restores the cells; then releases the cells of this topic whose
 *  partition this member does not own (a restored snapshot's or a lost partition's). */
void ccd_handover_assign(Ccd *d, const char *name, int topic, const int32_t *parts, int n);

/** Partitions (of KPI topic `topic`) revoked: this member no longer owns them. Releases
 *  their cells (ccd_cells_release_partitions) and counts each as handed over: with its
 *  newest state on the state topic (the next owner continues it), with an older record
 *  (the next owner restores that and replays the KPI messages after its offsets), or cold
 *  (no state topic, or no record yet: the next owner starts it anew); one log line says
 *  how many of each. Returns the cells released. */
int ccd_handover_release(Ccd *d, int topic, const int32_t *parts, int n);

/** CcdCells.free_anomaly (cookie = Ccd): a cell leaves the table. An evicted cell (not a
 *  released one: that one's record is the next owner's) that has a state record gets a
 *  tombstone, so that the next owner does not bring it back; then its alert state is
 *  freed (ccd_alerts_cell_free). */
void ccd_handover_cell_gone(void *cookie, CcdCell *c);

typedef struct CcdHandoverStats {
    uint64_t records_written, bytes_written, write_errors, tombstones_written;
    uint64_t records_read, cells_restored, cells_kept, records_refused, tombstones;
    /* restored, but on a partition kafka.partitioner does not map their cell to */
    uint64_t records_misplaced;
    /* cells released at a revoke: with their newest state on the state topic, with an older
     * record only (a lost partition, an undelivered handover), without any (cold) */
    uint64_t cells_sent, cells_behind, cells_cold;
    uint64_t takeovers;
    double last_takeover_s; ///< read + restore of the last assignment
    uint64_t last_takeover_cells;
} CcdHandoverStats;
void ccd_handover_stats(const Ccd *d, CcdHandoverStats *st);

#endif
