/*
 * feedback.h — the operator's word on an alert (issue 32): POST /v1/alerts/{id}/feedback
 * with {"verdict": "false_alarm" | "confirmed", "comment"?, "user"?} (admin token).
 *
 * Each verdict is journaled: one JSON line appended to feedback.path (default
 * <snapshot.path>.feedback; in memory only without snapshots) and fsync'ed before the reply,
 * read back at start. The newest verdict of an alert is shown on it in GET /v1/alerts
 * ("feedback"); GET /v1/feedback lists the recent ones (the last CCD_FB_KEEP), newest first;
 * /metrics counts them (cellcast_alert_feedback_total{verdict}).
 *
 * A false alarm on an anomaly alert raises the evidence bar of each KPI the alert names
 * (its attribution): cc_anomaly_cell_feedback (×1.25 a verdict, at most ×2, decaying back
 * with alerts.feedback_half_life_s of data time; cc_anomaly.h). The factor lives in the
 * cell's anomaly state (snapshots, the state topic). A verdict on a data-quality alert, or
 * `confirmed`, is journaled and shown and changes no bar. Loop thread only.
 */
#ifndef CCD_FEEDBACK_H
#define CCD_FEEDBACK_H

#include <stdint.h>

#include <jansson.h>

#define CCD_FB_KEEP 1000

typedef struct Ccd Ccd;
typedef struct CcdReq CcdReq;
struct evbuffer;
typedef struct CcdSb CcdSb; /* api_util.h */

/** Opens d->feedback: path "" = in memory; the journal's lines are read back (a line that
 *  does not parse is skipped, logged and counted). 0, -EIO (message), -ENOMEM. */
int ccd_fb_open(Ccd *d, const char *path, char *err, size_t errlen);
void ccd_fb_close(Ccd *d);
/** Adds "feedback": {verdict, comment, user, time} to the alert object j when the alert has
 *  a verdict. */
void ccd_fb_annotate(Ccd *d, const char *alert_id, json_t *j);
/** Appends `,"feedback":{...}` (as ccd_fb_annotate's) to b when the alert has a verdict: for
 *  the replies written without jansson (GET /v1/alerts/firing, ?active). */
void ccd_fb_write(Ccd *d, const char *alert_id, CcdSb *b);
/** Moves with every verdict (part of the versions of GET /v1/alerts and /v1/alerts/firing). */
uint64_t ccd_fb_version(const Ccd *d);
void ccd_fb_metrics(Ccd *d, struct evbuffer *b);

int ccd_h_feedback(CcdReq *r); ///< GET /v1/feedback[?limit=]

enum { CCD_FB_FALSE_ALARM, CCD_FB_CONFIRMED };
/** The verdict named s (CCD_FB_*), -1 for none; its name. */
int ccd_fb_verdict(const char *s);
const char *ccd_fb_verdict_name(int v);
/** Journals the verdict entry e (an object: alert, cell, verdict, …; fsync'ed) and keeps it
 *  as the alert's newest. 0, or -errno (logged, counted as refused; e is the caller's). */
int ccd_fb_record(Ccd *d, json_t *e);
/** Counts a refused verdict (bad request, unknown alert). */
void ccd_fb_refused(Ccd *d);

#endif
