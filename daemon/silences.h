/*
 * silences.h — silences, the Alertmanager way: a silence is a set of matchers on an alert's
 * labels (cell, site, region, sector, kind, reason, kpi; the site, region and sector from
 * the topology, topology.h), each an exact value or an anchored POSIX extended regex, equal
 * or not, and a time range [startsAt, endsAt) on the wall clock. While a silence matches
 * it, an alert does not fire: its firing transition is held back (not produced, not in
 * GET /v1/alerts, /v1/alerts/firing or any incident), and its resolution too if it
 * resolves while silenced. When no silence matches it any more (expired, deleted) and the
 * alert is still firing, its firing transition goes out then, as held.
 *
 * Silences come from the API (POST, GET, DELETE /v1/silences; admin token) and are kept
 * in the file silences.path (JSON, rewritten atomically at each change, read at start), so
 * they survive a restart; each member of a cluster keeps its own (not shared through the
 * state topic). Expired silences are kept for GET (state "expired") for 5 days.
 *
 * The first part (CcdSilences) is pure: matchers, the list, its JSON and file; the second
 * hosts it in cellcastd (the alerts' flush and tick, the HTTP handlers). Loop thread only.
 */
#ifndef CCD_SILENCES_H
#define CCD_SILENCES_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define CCD_SILENCE_MAX_MATCHERS 8
#define CCD_SILENCES_MAX 10000
#define CCD_SILENCE_KEEP_EXPIRED_S (5 * 86400)

typedef struct CcdSilences CcdSilences;
typedef struct CcdSilenceHost CcdSilenceHost; /* the list hosted in cellcastd (d->silences) */

/** The labels an alert is matched on (NULL: the label is absent, matched as ""). */
typedef struct CcdSilenceLabels {
    const char *cell, *site, *region, *sector, *kind, *reason, *kpi;
} CcdSilenceLabels;

/** Opens the list, reading path when it exists ("" or NULL: in memory only). 0, -EINVAL
 *  (a file that does not parse: message), -EIO, -ENOMEM. */
int ccd_silences_open(CcdSilences **out, const char *path, char *err, size_t errlen);
void ccd_silences_close(CcdSilences **s);

/** Adds a silence from its JSON ({matchers: [{name, value, isRegex, isEqual}], startsAt,
 *  endsAt, createdBy, comment}; startsAt default now) and saves the file. Its id into id
 *  (≥ 40 bytes). 0, -EINVAL (message naming the field), -ENOSPC (CCD_SILENCES_MAX active
 *  or pending), -EIO (not saved: not added), -ENOMEM. */
int ccd_silences_add(CcdSilences *s, json_t *body, int64_t now, char *id, char *err, size_t errlen);
/** Expires a silence now (as Alertmanager's DELETE) and saves. 0, -ENOENT, -EIO. */
int ccd_silences_expire(CcdSilences *s, const char *id, int64_t now);
/** The id of the first silence active at now that matches l, or NULL. */
const char *ccd_silences_match(const CcdSilences *s, const CcdSilenceLabels *l, int64_t now);
/** Every silence as {silences: [...]} (with status.state pending, active or expired). */
json_t *ccd_silences_json(const CcdSilences *s, int64_t now);
/** Active silences at now. */
size_t ccd_silences_active(const CcdSilences *s, int64_t now);

/* ---- hosted in cellcastd ------------------------------------------------------------ */

typedef struct Ccd Ccd;
typedef struct CcAlertEvent CcAlertEvent;
typedef struct CcAlertSink CcAlertSink;
typedef struct CcdReq CcdReq;
struct evbuffer;

/** Opens d->silences from silences.path (a file that does not parse: an error); "auto" is
 *  the snapshot file state_path (ccd_state_path) + ".silences", or none when it is "". */
int ccd_silences_start(Ccd *d, const char *state_path, char *err, size_t errlen);
void ccd_silences_stop(Ccd *d);
/** The id of a silence active now that matches these labels (an alert a cell would raise:
 *  the incidents' evidence rule asks before counting a cell), NULL: none. */
const char *ccd_silences_matching(Ccd *d, const CcdSilenceLabels *l);
/** The alerts' flush, for each transition: 1 when it is held back (silenced), 0 when it goes
 *  on. */
int ccd_silences_hold(Ccd *d, const CcAlertEvent *ev);
/** Whether the alert (its id) is held back now (for the listings of firing alerts). */
int ccd_silences_held(Ccd *d, const char *alert_id);
/** The alerts' tick: the held alerts no silence matches any more go to sink as firing. */
void ccd_silences_release(Ccd *d, const CcAlertSink *sink);
void ccd_silences_metrics(Ccd *d, struct evbuffer *b);

int ccd_h_silences(CcdReq *r);       ///< GET, POST /v1/silences
int ccd_h_silence_delete(CcdReq *r); ///< DELETE /v1/silences/{id}

#endif
