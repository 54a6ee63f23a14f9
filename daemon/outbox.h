/*
 * outbox.h — the alert outbox: alert transitions on their way to the Kafka alert topic,
 * delivered at least once across crashes.
 *
 * Protocol. A transition is appended to the journal (<snapshot.path>.alerts) and the
 * journal is fsync'ed (ccd_outbox_flush: once per flush, for every transition added since
 * the last) before it is handed to the producer; it is marked delivered (a "D" record) only
 * by its delivery report. A transition whose delivery finally failed is produced again on
 * the next flush, in journal order. At start the journal's unconfirmed transitions are
 * produced again from their journaled JSON (counted: recovered), so a SIGKILL, a power
 * loss after the fsync or a broker that is down loses none. The cost is duplicates: a
 * transition delivered but whose report had not been seen (or whose "D" record was lost)
 * is delivered again. Consumers dedupe on (alert id, state, severity): an id names one
 * alert (cell, kind, reason, KPI and first step), its transitions are one `firing`, a
 * second `firing` if a warning escalates to critical, and one `resolved`. (The `seq` of
 * the API's listings numbers the history of one process and restarts with it: it is not
 * a dedupe key.)
 *
 * The journal also keeps, per cell, the newest step whose transition was journaled: the
 * replay after a restart recomputes the transitions of those steps and must not produce
 * them again (alerts.h: cc_anomaly_cell_quiet_until), since the journal does.
 *
 * Journal lines: "STEP CELL" (a cell's newest journaled step, every transition of it
 * delivered; the compact form), "T ID STEP CELL JSON" (a transition, journaled before it
 * is produced), "D ID" (delivered). Rewritten compactly after each snapshot.
 *
 * Loop thread only (the delivery reports come from ccd_kafka_poll / _service / _close).
 */
#ifndef CCD_OUTBOX_H
#define CCD_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "kafka.h"

typedef struct CcdOutbox CcdOutbox;

/** Opens the outbox and loads the journal at path ("" = none: delivery is still tracked
 *  and retried, but nothing survives a restart). 0 or -ENOMEM (message in err); a journal
 *  that cannot be opened is logged and the outbox works without it. */
int ccd_outbox_open(CcdOutbox **out, const char *path, char *err, size_t errlen);

/** Closes; transitions still unconfirmed stay in the journal (produced at next start). */
void ccd_outbox_close(CcdOutbox **ob);

/** The newest journaled step of a cell, -1 none (the replay's quiet step). */
int64_t ccd_outbox_quiet_step(CcdOutbox *ob, const char *cell);

/** Journals a transition (not yet synced); ccd_outbox_flush syncs and produces it.
 *  0 or -ENOMEM. */
int ccd_outbox_add(CcdOutbox *ob, const char *cell, int64_t step, const char *json, size_t len);

/** Records a transition that is not produced (no Kafka): its step only. */
void ccd_outbox_note(CcdOutbox *ob, const char *cell, int64_t step);

/** Syncs the journal if anything was added, then hands every transition not yet produced
 *  to k (topic, keyed by cell), in journal order, until the producer refuses one. */
void ccd_outbox_flush(CcdOutbox *ob, CcdKafka *k, const char *topic);

/** Rewrites the journal compactly (temp file, fsync, rename). */
void ccd_outbox_compact(CcdOutbox *ob);

typedef struct CcdOutboxStats {
    uint64_t produced;  ///< handed to the producer (re-productions included)
    uint64_t refused;   ///< refused by the producer (queue full); retried
    uint64_t delivered; ///< confirmed by a delivery report
    uint64_t failed;    ///< delivery given up by the producer; produced again
    uint64_t recovered; ///< unconfirmed in the journal at start; produced again
    uint64_t sync_errors;
    size_t unconfirmed; ///< journaled, no delivery report yet
} CcdOutboxStats;
void ccd_outbox_stats(const CcdOutbox *ob, CcdOutboxStats *st);

#endif
