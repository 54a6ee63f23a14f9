/*
 * api_feedback.h — POST /v1/alerts/{id}/feedback (api_feedback.c; the verdicts' journal and
 * GET /v1/feedback: feedback.h).
 */
#ifndef CCD_API_FEEDBACK_H
#define CCD_API_FEEDBACK_H

typedef struct CcdReq CcdReq;

/** POST /v1/alerts/{id}/feedback {"verdict": "false_alarm"|"confirmed", "comment"?, "user"?}
 *  (admin token): 200 with the journaled entry; 401/403, 404 (no such recent alert), 400
 *  (not JSON), 413, 422 (bad verdict or fields), 500 (the journal could not be written). */
int ccd_h_alert_feedback(CcdReq *r);

#endif
