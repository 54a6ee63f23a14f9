/*
 * alerts.h — cellcastd's alerts: per-cell anomaly state (lib/cc_anomaly) scored on the
 * scheduler's worker after each step (ccd_alerts_on_stepped) and from the cron (missing
 * data, ccd_alerts_tick); a locked queue of transitions filled on the worker and drained
 * on the loop thread (ccd_alerts_flush) into the Kafka alert topic (key = cell id; a
 * refused produce stays queued and is retried in order, never dropped), the in-memory
 * history behind GET /v1/alerts, the per-cell scores behind GET /v1/cells/{id}/scores, and
 * the outbox (outbox.h): transitions journaled and fsync'ed before they are produced,
 * confirmed by their delivery report, produced again after a restart until confirmed.
 *
 * Threads. The worker scores the cells of the batch it steps (it owns those cells'
 * CcAnomalyCell while they are busy); everything else runs on the loop thread, which
 * touches a cell's anomaly state only while the cell is not busy. Transitions cross with a
 * mutex-protected queue; per-cell scores are published under the table's pub_lock.
 *
 * Restarts and alert transitions (at least once). Each transition is journaled
 * (<snapshot.path>.alerts; outbox.h) and synced before it is produced, and the journal is
 * flushed before every snapshot, so no snapshot holds a state whose transition is not
 * journaled. At start the unconfirmed ones are produced again from the journal. A cell's
 * anomaly state created or restored at start gets cc_anomaly_cell_quiet_until(its newest
 * journaled step): replayed steps recompute the same transitions (ids are pure functions
 * of the data) and update the state without producing them again.
 *
 * Missing data is judged on the data's own time. The data clock is the newest end of an
 * observed step over every cell (imputed steps excluded; restored cells included), with
 * the wall-clock lag it had when it was reached. While that lag is within the missing-data
 * silence (alerts.missing_after_s, 0 = 3 steps) the data is live and a cell is missing when
 * the wall clock passes the end of its last step by that silence: a feed that stops is
 * found. Otherwise (history replayed with its original, older timestamps; data delivered
 * later than the silence) a cell is missing only when the data clock passes it, i.e. while
 * other cells' data goes on without it: a replay that ends leaves nothing firing, and a
 * missing alert it raised is resolved by the cell's next step as always. One clock for
 * all cells: cells replayed far behind live ones are missing (they are, in live time).
 */
#ifndef CCD_ALERTS_H
#define CCD_ALERTS_H

#include <stdint.h>

#include <jansson.h>

#include "cc_anomaly.h"
#include "cellcastd.h"

typedef struct CcdAlerts CcdAlerts;
typedef struct CcdReq CcdReq;

/** Opens d->alerts with the scorer's settings; journal_path "" = no journal (snapshots
 *  off). 0 or -errno with a message. */
int ccd_alerts_open(Ccd *d, const CcAnomalySettings *s, const char *journal_path, char *err,
                    size_t errlen);
/** Frees every cell's alert state, then the module. */
void ccd_alerts_close(Ccd *d);

/** New scorer settings (reload; no batch in flight). */
void ccd_alerts_set_settings(Ccd *d, const CcAnomalySettings *s);

/** Scheduler hook (worker thread): scores the observation stepped at `step` and takes the
 *  cell's new forecast as the expectation of the next steps. Only the KPIs the records gave
 *  (bit f of present) are observed: the others' values are the cell's last ones, carried
 *  for the model, and the detector sees them as missing, as anomaly-eval does. */
void ccd_alerts_on_stepped(Ccd *d, CcdCell *c, int64_t step, const float *values, int imputed,
                           uint64_t present, const CcForecast *fc);

/** Scheduler hook (worker thread, before the step): whether the model should be fed the
 *  cell's previous step instead of this observation — an outage held for at most
 *  max_steps steps (cc_anomaly_outage_hold, judged by the cell's detector; ingest.h). 0
 *  when alerts are off. */
int ccd_alerts_outage_hold(Ccd *d, CcdCell *c, const float *values, int imputed, uint64_t present,
                           int max_steps);

/** Loop thread: takes the queued transitions into the history and produces them (the
 *  refused ones first, in order). */
void ccd_alerts_flush(Ccd *d);

/** Once per second from the cron: missing-data checks on the data clock (above; only once
 *  the consumer has caught up: a backlog looks like silence), then flush. */
void ccd_alerts_tick(Ccd *d);

/** At shutdown, after the last flush: gives the producer a moment for refused transitions
 *  and reports those that are left. */
void ccd_alerts_shutdown(Ccd *d);

/** Alerts firing now over every cell (STATUS=). */
int ccd_alerts_firing(Ccd *d);

/** The cell's anomaly state, created on first use (NULL: out of memory); for the snapshot
 *  restore. ccd_alerts_cell_state only looks (NULL when the cell has none). */
CcAnomalyCell *ccd_alerts_cell(Ccd *d, CcdCell *c);
CcAnomalyCell *ccd_alerts_cell_state(const CcdCell *c);

/** After a snapshot restored the cell's anomaly state: journal quiet step, the forecast of
 *  its last step as the expectation (NULL: none), its scores published. */
void ccd_alerts_restored(Ccd *d, CcdCell *c, const CcForecast *fc);

/** Rewrites the journal compactly (after a snapshot). */
void ccd_alerts_journal_compact(Ccd *d);

/** Frees a cell's alert state (CcdCells.free_anomaly; cookie = Ccd). */
void ccd_alerts_cell_free(void *cookie, CcdCell *c);

typedef struct CcdAlertsStats {
    uint64_t trans[2][5][3][3]; ///< kind, reason, state (1 firing, 2 resolved), severity (1, 2)
    uint64_t produced, produce_refused, quiet;
    uint64_t recovered;       ///< unconfirmed in the journal at start, produced again
    uint64_t delivery_failed; ///< given up by the producer, produced again
    size_t waiting;           ///< journaled transitions not yet confirmed by Kafka
    int firing_anomaly, firing_dq;
    int firing_anomaly_critical, firing_dq_critical; ///< of those, with severity critical
} CcdAlertsStats;
void ccd_alerts_stats(Ccd *d, CcdAlertsStats *st);

typedef struct CcdSb CcdSb; /* api_util.h */
/** Writes ,"scores":{...} of the GET /v1/cells/{id} object (nothing without alerts). */
void ccd_alerts_cell_write(Ccd *d, CcdCell *c, CcdSb *b);
/** A count that moves whenever the "scores" of c (above) may have: part of the version of
 *  the GET /v1/cells/{id} reply (http_cache.h); 0 before the cell's first scores. */
uint64_t ccd_alerts_cell_version(Ccd *d, const CcdCell *c);

/** The newest transition of alert `id` in the history behind GET /v1/alerts into *ev (its
 *  cell id copied into cell, ≥ CC_ANOMALY_CELL_ID_MAX + 1 bytes). 0 or -ENOENT. */
int ccd_alerts_lookup(Ccd *d, const char *id, CcAlertEvent *ev, char *cell);
/** A false-alarm verdict on KPI kpi of cell c (not busy): cc_anomaly_cell_feedback. The new
 *  bar factor, or -EINVAL (no alert state, no such KPI). */
double ccd_alerts_raise_bar(Ccd *d, CcdCell *c, int kpi);

/* HTTP handlers (routes in api.c). */
int ccd_h_alerts(CcdReq *r);        ///< GET /v1/alerts[?state=&since=&cell=&kind=&after=&limit=]
int ccd_h_alerts_firing(CcdReq *r); ///< GET /v1/alerts/firing[?kind=&after=&limit=]
int ccd_h_cell_alerts(CcdReq *r);   ///< GET /v1/cells/{id}/alerts
int ccd_h_cell_scores(CcdReq *r);   ///< GET /v1/cells/{id}/scores

#endif
