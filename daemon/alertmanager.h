/*
 * alertmanager.h — incidents (and, optionally, cell alerts) sent to Prometheus
 * Alertmanager's v2 API (POST <url>/api/v2/alerts, a JSON array of {labels, annotations,
 * startsAt, endsAt, generatorURL}), so that the operator's routes, grouping, inhibitions,
 * silences and receivers apply to them.
 *
 * What is sent. Each incident transition (incidents.h) updates an item: its labels
 * (alertname CellcastIncident, incident, scope, severity, group, site, region, cell for scope
 * cell, kind, reason and kpi of its first alert, instance), its annotations (summary,
 * description) and its times. With alertmanager.send_cell_alerts, each alert transition is an
 * item too (alertname CellcastAlert, alert, cell, kind, reason, kpi, severity, the cell's
 * topology labels). Labels identify an alert in Alertmanager: when they change (a warning
 * incident turning critical, a cell incident growing to its site) the old label set is sent
 * resolved and the new one firing. startsAt is the onset (the data's time, at most the wall
 * clock); a firing item's endsAt is now + 4 × alertmanager.resend_s and it is sent again every
 * resend_s (Alertmanager resolves an alert whose endsAt passed: a daemon that stops leaves
 * nothing firing for longer than that); a resolved item is sent once with endsAt = its end
 * (at most the wall clock) and forgotten.
 *
 * How. Non-blocking, on the daemon's event base (libevent's evhttp client, one keep-alive
 * connection per URL, one request in flight per URL, at most 500 alerts a request). Changes
 * are batched each second by the cron (ccd_am_cron). Each URL has a bounded queue
 * (alertmanager.queue_max alerts; the oldest requests are dropped to make room); a request
 * that fails (no connection, timeout alertmanager.timeout_s, 5xx, 429) is retried with
 * backoff (1 s, doubling, at most 60 s) up to alertmanager.retries times, then dropped; one
 * refused with another 4xx is dropped at once. Counted in alerts:
 * cellcast_alertmanager_sent_total, _dropped_total, and in requests: _failed_total.
 *
 * In memory only: after a restart the incidents open before it are not resent, and
 * Alertmanager resolves them when their endsAt passes. Loop thread only.
 */
#ifndef CCD_ALERTMANAGER_H
#define CCD_ALERTMANAGER_H

#include <stddef.h>
#include <stdint.h>

typedef struct Ccd Ccd;
typedef struct CcdIncident CcdIncident;
typedef struct CcAlertEvent CcAlertEvent;
struct evbuffer;

#define CCD_AM_BATCH_MAX 500 /* alerts per POST */

typedef struct CcdAmStats {
    uint64_t sent;     ///< alerts Alertmanager accepted (2xx)
    uint64_t failed;   ///< requests that failed (each try)
    uint64_t dropped;  ///< alerts given up: retries spent, refused (4xx), or the queue full
    size_t queued;     ///< alerts waiting over every URL
    size_t firing;     ///< items firing (resent every resend_s)
    uint64_t replaced; ///< label or annotation values not UTF-8, sent with U+FFFD
} CcdAmStats;

/** Opens d->am from alertmanager.* (nothing when alertmanager.urls is empty). 0, -EINVAL
 *  (a URL that is not http://host[:port][/path]: message), -ENOMEM. */
int ccd_am_open(Ccd *d, char *err, size_t errlen);
/** Frees everything; requests in flight are abandoned. */
void ccd_am_close(Ccd *d);
/** An incident transition (incidents_daemon.c, when it is emitted). */
void ccd_am_incident(Ccd *d, const CcdIncident *inc);
/** An alert transition (alerts.c's flush); ignored unless alertmanager.send_cell_alerts. */
void ccd_am_alert(Ccd *d, const CcAlertEvent *ev);
/** Once a second: the changes and the periodic resend into the queues, and the sends. */
void ccd_am_cron(Ccd *d);
void ccd_am_stats(const Ccd *d, CcdAmStats *st);
/** The lines of /metrics (none when off). */
void ccd_am_metrics(Ccd *d, struct evbuffer *b);

#endif
