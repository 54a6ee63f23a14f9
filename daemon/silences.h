/*
 * silences.h — silences, the Alertmanager way: a silence is a set of matchers on an alert's
 * labels (cell, site, region, sector, kind, reason, kpi; the site, region and sector from
 * the topology, topology.h), each an exact value or an anchored POSIX extended regex, equal
 * or not, and a time range [startsAt, endsAt) on the wall clock, optionally narrowed to
 * weekly windows (a recurrence: days of the week, a start and an end time of day, at UTC or
 * a fixed UTC offset). While a silence matches it, an alert does not fire: its firing
 * transition is held back (not produced, not in GET /v1/alerts, /v1/alerts/firing or any
 * incident), and its resolution too if it resolves while silenced. When no silence matches
 * it any more (expired, deleted, out of its window) and the alert is still firing, its
 * firing transition goes out then, as held.
 *
 * A silence flagged "maintenance" is also a maintenance window: the steps of the cells its
 * cell-level matchers (cell, site, region, sector) match, stamped within it (the data's
 * time), are kept out of what the detector learns (cc_anomaly_cell_freeze_learning).
 *
 * Silences come from two places. The API (POST, GET, DELETE /v1/silences; admin token):
 * kept in the file silences.path (JSON, rewritten atomically at each change, read at start),
 * so they survive a restart, and shared by the members through the compacted topic
 * silences.topic (ccd_silences_merge: the later updatedAt wins). The configuration (silences.file,
 * a JSON file read at start and at each reload): the same on every member that shares the
 * configuration, read-only through the API (ids "cfg-<id>"). Expired silences are kept for GET
 * (state "expired") for 5 days.
 *
 * The first part (CcdSilences) is pure: matchers, windows, the list, its JSON and files; the
 * second hosts it in cellcastd (the alerts' flush and tick, the HTTP handlers). Loop thread.
 */
#ifndef CCD_SILENCES_H
#define CCD_SILENCES_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define CCD_SILENCE_MAX_MATCHERS 8
#define CCD_SILENCES_MAX 10000
#define CCD_SILENCE_KEEP_EXPIRED_S (5 * 86400)
#define CCD_SILENCE_MAX_WINDOWS 16                /* weekly windows of a recurrence */
#define CCD_SILENCE_FOREVER INT64_C(253402300799) /* 9999-12-31T23:59:59Z: no endsAt */
#define CCD_SILENCE_ID_MAX 40                     /* bytes of an id, its NUL included */
#define CCD_SILENCE_RECORD_MAX 65536              /* bytes of a record of the topic */

/**
 * A weekly recurrence, as JSON {"weekly": [{"days": ["mon", ...], "start": "HH:MM", "end":
 * "HH:MM"}, ...], "timezone": "UTC" | "+HH:MM" | "-HH:MM"}: each entry a window on each of
 * its days (mon..sun or monday..sunday; absent: every day) from start (00:00..23:59) to end
 * (00:01..24:00); an end at or before the start ends the next day (a window across
 * midnight, Sunday's into Monday). The times are of the day at the timezone's fixed offset
 * (default UTC; named zones, whose offset changes with daylight saving, are refused).
 * Held as intervals [a, b) of seconds from Monday 00:00 at that offset (b ≤ a + 1 day).
 */
typedef struct CcdRecurrence {
    int n;
    int32_t a[7 * CCD_SILENCE_MAX_WINDOWS], b[7 * CCD_SILENCE_MAX_WINDOWS];
    int32_t offset_s;
} CcdRecurrence;

/** Parses a recurrence (above). 0 or -EINVAL with a message naming the field
 *  ("recurrence.weekly[0].start"). */
int ccd_recurrence_parse(CcdRecurrence *r, json_t *j, char *err, size_t errlen);
/** The window of r in effect at t, or else the next one: [*ws, *we) with *we > t (*ws ≤ t
 *  when t is in it), windows that overlap or touch merged. 0, or -ENOENT (no window). */
int ccd_recurrence_window(const CcdRecurrence *r, int64_t t, int64_t *ws, int64_t *we);

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
 *  endsAt, recurrence, maintenance, createdBy, comment}; startsAt default now; endsAt
 *  required unless there is a recurrence, then default never) and saves the file. Its id
 *  into id (CCD_SILENCE_ID_MAX bytes). 0, -EINVAL (message naming the field), -ENOSPC
 *  (CCD_SILENCES_MAX active or pending), -EIO (not saved: not added), -ENOMEM. */
int ccd_silences_add(CcdSilences *s, json_t *body, int64_t now, char *id, char *err, size_t errlen);
/** Expires a silence now (as Alertmanager's DELETE) and saves. 0, -ENOENT, -EPERM (one
 *  of the configuration's), -EIO. */
int ccd_silences_expire(CcdSilences *s, const char *id, int64_t now);
/** The id of the first silence active at now (in its range and, with a recurrence, in one
 *  of its windows) that matches l, or NULL. */
const char *ccd_silences_match(const CcdSilences *s, const CcdSilenceLabels *l, int64_t now);
/** The id of the first maintenance silence active at t whose matchers on the cell's labels
 *  (cell, site, region, sector; those on kind, reason and kpi are not the cell's and are
 *  passed over) match l, or NULL. */
const char *ccd_silences_maintenance(const CcdSilences *s, const CcdSilenceLabels *l, int64_t t);
/** The maintenance silences whose matchers on the cell's labels match l (as
 *  ccd_silences_maintenance, at any time): their positions into idx (at most max); how
 *  many. For a reader of many steps of one cell (cellcast learn --silences). */
int ccd_silences_maintenance_of(const CcdSilences *s, const CcdSilenceLabels *l, size_t *idx,
                                int max);
/** The window of the silence at position i in effect at t or else the next one, within its
 *  range ([startsAt, endsAt) itself without a recurrence): 0, or -ENOENT (none left). */
int ccd_silences_window_at(const CcdSilences *s, size_t i, int64_t t, int64_t *ws, int64_t *we);
/** Maintenance silences not yet expired at now (0: no cell can be in a window). */
size_t ccd_silences_maintenance_live(const CcdSilences *s, int64_t now);
/** Every silence as {silences: [...]} (with status.state pending, active or expired, and
 *  status.nextWindow, the window in effect or next, while there is one). */
json_t *ccd_silences_json(const CcdSilences *s, int64_t now);
/** Active silences at now. */
size_t ccd_silences_active(const CcdSilences *s, int64_t now);

/** One silence as JSON (as in ccd_silences_json), or NULL: no such id. */
json_t *ccd_silences_get(const CcdSilences *s, const char *id, int64_t now);

/**
 * A record of the silences topic (key: the id; value: the silence as GET lists it, from
 * another member or from ourselves) merged into s: added, or replacing the silence of that
 * id when its updatedAt is later than ours (or the same with an earlier endsAt: an expiry
 * in the second it was made), and saved. 1 applied; 0 nothing to do (a
 * tombstone, not newer, expired for longer than CCD_SILENCE_KEEP_EXPIRED_S); refused with
 * a message: -EINVAL (a key that is no API id, over CCD_SILENCE_RECORD_MAX bytes, not JSON,
 * an id that is not its key, source config, no updatedAt or startsAt, updatedAt more than
 * an hour ahead of now, a silence POST would refuse), -ENOSPC (CCD_SILENCES_MAX live),
 * -EIO (not saved: not applied), -ENOMEM. A configuration's silence is never replaced.
 */
int ccd_silences_merge(CcdSilences *s, const void *key, size_t key_len, const void *payload,
                       size_t len, int64_t now, char *err, size_t errlen);

/** Reads the configuration's silences from path (JSON: {"silences": [...]} or [...], each
 *  as POST's body with an "id" of 1 to 32 letters, digits, '.', '_', '-', unique, and
 *  startsAt default always, not the time of the read; "" or NULL: none) into a list of its own
 * (*out). The whole file is checked first: 0, or -EINVAL / -EIO / -ENOMEM with a message naming the
 * file and the entry, *out NULL. */
int ccd_silences_config_read(CcdSilences **out, const char *path, int64_t now, char *err,
                             size_t errlen);
/** Replaces the configuration's silences of s with those of *cfg (consumed, NULL after).
 *  0, or -ENOMEM: s keeps the API's silences and has none of the configuration's. */
int ccd_silences_config_swap(CcdSilences *s, CcdSilences **cfg);

/* ---- hosted in cellcastd ------------------------------------------------------------ */

typedef struct Ccd Ccd;
typedef struct CcAlertEvent CcAlertEvent;
typedef struct CcAlertSink CcAlertSink;
typedef struct CcdReq CcdReq;
struct evbuffer;

/** Opens d->silences from silences.path (a file that does not parse: an error); "auto" is
 *  the snapshot file state_path (ccd_state_path) + ".silences", or none when it is "";
 *  and silences.file (a file that does not parse: an error). */
int ccd_silences_start(Ccd *d, const char *state_path, char *err, size_t errlen);
void ccd_silences_stop(Ccd *d);
/** Reload: reads the configuration's silences of file (the reloaded silences.file) into
 *  *pending (a bad file: an error, the reload is refused); then ccd_silences_reload_apply
 *  swaps them in once the reload goes ahead (or frees them when pending is not applied:
 *  apply 0). */
int ccd_silences_reload_check(Ccd *d, const char *file, CcdSilences **pending, char *err,
                              size_t errlen);
void ccd_silences_reload_apply(Ccd *d, CcdSilences **pending, int apply);
/** Whether the cell's step at step_time (unix seconds) is in a maintenance window: its
 *  learning is frozen for that step (cc_anomaly_cell_freeze_learning). Counted. */
int ccd_silences_in_maintenance(Ccd *d, const char *cell, int64_t step_time);
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
/** The cron (100 ms): the silences topic's records of the other members merged in. */
void ccd_silences_cron(Ccd *d);

int ccd_h_silences(CcdReq *r);       ///< GET, POST /v1/silences
int ccd_h_silence_delete(CcdReq *r); ///< DELETE /v1/silences/{id}

#endif
