/*
 * ops.h — cellcastd's alerting and operations (issue 5), hosted by cellcastd.c:
 *
 * One module (ops.c), three parts:
 *   alerts     the alert sink: per-cell anomaly state (lib/cc_anomaly) driven from the
 *              scheduler's worker (ccd_ops_on_stepped) and the cron (missing data); a
 *              locked queue of transitions filled on the worker and drained on the loop
 *              thread into the Kafka alert topic (key = cell id; a refused produce stays
 *              queued and is retried, never dropped), the in-memory history behind
 *              GET /v1/alerts, per-cell scores, the Prometheus series, and a journal of the
 *              last transition produced per cell (see "Restarts" below);
 *   state      snapshots (lib/cc_snapshot) written on SIGTERM and every
 *              snapshot.interval_s, restored at start (a corrupt or mismatched file is
 *              refused with the reader's message; the cells are then rebuilt from Kafka,
 *              re-reading one window per assigned partition when kafka.rewind_on_assign_s
 *              is 0);
 *   operations reload (SIGHUP, POST /v1/admin/reload) of the model and the reloadable keys;
 *              systemd notifications (notify.h); the model path fallback of installed
 *              daemons.
 *
 * Threads. The worker calls ccd_ops_on_stepped for the cells of the batch it steps (it owns
 * those cells' CcAnomalyCell while they are busy); everything else runs on the loop thread,
 * which touches a cell's anomaly state only while the cell is not busy. Transitions cross
 * with a mutex-protected queue; per-cell scores are published under the table's pub_lock.
 *
 * Offsets and snapshots (at-least-once without loss across SIGKILL). With snapshots on,
 * the Kafka offsets of stepped batches are not stored at once: ccd_ops_ack remembers them
 * and each snapshot stores (acks) them right after the snapshot file is in place, so the
 * committed offsets never run ahead of the newest snapshot. A restart restores the
 * snapshot and the consumer re-reads from the committed offsets: every step after the
 * snapshot comes again (steps the snapshot already holds are dropped as duplicates by the
 * (cell, step) rule). Without snapshots (snapshot.path ""), offsets are stored at once as
 * before.
 *
 * Restarts and alert transitions. Each transition produced appends "cell step" to the
 * journal (<snapshot.path>.alerts; rewritten compactly at every snapshot). A cell's
 * anomaly state created or restored at start gets cc_anomaly_cell_quiet_until(journal
 * step): replayed steps recompute the same transitions (ids are pure functions of the
 * data) and update the state without producing them again.
 */
#ifndef CCD_OPS_H
#define CCD_OPS_H

#include <event2/buffer.h>
#include <stdint.h>

#include "cc_anomaly.h"
#include "cellcastd.h"

typedef struct CcdOps CcdOps;
typedef struct CcdAlerts CcdAlerts;
typedef struct CcdReq CcdReq;

/* ---- ops.c: lifecycle (called by cellcastd.c) ------------------------------------------ */

/** Resolves model.path for loading: as given when it exists; a relative path that does
 *  not exist is tried under $CELLCAST_HOME, then the installed data directory
 *  (CC_DATADIR, e.g. /usr/share/cellcast; `models/x` also as `x` there). out gets the
 *  path to use (the original when nothing else exists). */
void ccd_ops_model_path(const char *path, char *out, size_t outlen);

/** Checks the alerts.* keys against the model (KPI names of alerts.kpis, cross-key rules)
 *  for --check-config. 0 or -EINVAL with a message naming the key. */
int ccd_ops_check(const CcdConfig *cfg, const CcHparams *hp, char *err, size_t errlen);

/** After the cell table and engine exist, before the scheduler and Kafka: alert settings
 *  (alerts.*), the alert sink, notifications, the journal; restores the snapshot (a
 *  refused one is logged and the daemon rebuilds from Kafka). argv is kept for reloads
 *  (--set overrides are re-applied). 0 or -errno with a message (bad alerts.* keys). */
int ccd_ops_open(Ccd *d, int argc, char **argv, char *err, size_t errlen);
void ccd_ops_close(Ccd *d);

/** Scheduler hook (worker thread; CcdSteppedFn with cookie = Ccd). */
void ccd_ops_on_stepped(void *cookie, CcdCell *c, int64_t step, const float *values,
                        int imputed, const CcForecast *fc);

/** Kafka batches ≤ id were stepped (from on_done and the idle ack): stores their offsets
 *  now, or at the next snapshot when snapshots are on. */
void ccd_ops_ack(Ccd *d, uint64_t id);

/** After a batch completed (loop thread): produces the queued transitions. */
void ccd_ops_batch_done(Ccd *d);

/** Once per second from the cron: transitions, missing-data ticks, periodic snapshot,
 *  STATUS= and WATCHDOG=1. */
void ccd_ops_cron(Ccd *d);

/** READY=1 (after Kafka is subscribed). */
void ccd_ops_ready(Ccd *d);

/** First thing on SIGTERM/SIGINT: STOPPING=1. */
void ccd_ops_stopping(Ccd *d);

/** After the scheduler drained on shutdown: produce the last transitions, write the
 *  snapshot, store the offsets (the caller commits and closes Kafka, which flushes). */
void ccd_ops_shutdown(Ccd *d);

/** Reload (SIGHUP, POST /v1/admin/reload): re-reads the configuration file (and the
 *  --set overrides) and the model file; a broken file or model is refused and everything
 *  stays as it was. Applies the reloadable keys, swaps the model (cells keep their
 *  history; a model of another shape rebinds them, logged). Non-reloadable keys that
 *  changed are reported (they need a restart). Returns 0 or -errno with a message; fills
 *  *report (a JSON object, caller owns) when given. */
int ccd_ops_reload(Ccd *d, json_t **report, char *err, size_t errlen);

/** Frees a cell's ops state (CcdCell.anomaly); loop thread, the cell not busy. */
void ccd_ops_cell_free(Ccd *d, CcdCell *c);
/** The same as CcdCells.free_anomaly (cookie = Ccd). */
void ccd_ops_cell_free_hook(void *cookie, CcdCell *c);

/* ---- alerts.c ------------------------------------------------------------------------- */

/** Prometheus series of alerts, snapshots and reloads (appended to /metrics). */
void ccd_ops_metrics(Ccd *d, struct evbuffer *out);

/** Adds "scores" and "alerts" (active) to the GET /v1/cells/{id} object. */
void ccd_ops_cell_json(Ccd *d, CcdCell *c, json_t *o);

/* HTTP handlers (routes in api.c). */
int ccd_h_alerts(CcdReq *r);       ///< GET /v1/alerts[?state=&since=&cell=&kind=&after=&limit=]
int ccd_h_cell_alerts(CcdReq *r);  ///< GET /v1/cells/{id}/alerts
int ccd_h_cell_scores(CcdReq *r);  ///< GET /v1/cells/{id}/scores
int ccd_h_admin_reload(CcdReq *r); ///< POST /v1/admin/reload (Authorization: Bearer <admin.token>)

#endif
