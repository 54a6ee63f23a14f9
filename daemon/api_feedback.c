/*
 * api_feedback.c — POST /v1/alerts/{id}/feedback: an operator's verdict on a recent alert,
 * journaled by feedback.c; a false alarm on an anomaly raises the bar of the KPIs it names
 * (alerts.c, cc_anomaly_cell_feedback). Above both: neither calls back here.
 */
#include "api_feedback.h"

#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>

#include "alerts.h"
#include "auth.h"
#include "cellcastd.h"
#include "feedback.h"
#include "http.h"
#include "log.h"

static const char *opt_string(json_t *body, const char *k, int *bad)
{
    json_t *v = json_object_get(body, k);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v) || strlen(json_string_value(v)) > 1024)
        *bad = 1;
    return json_string_value(v);
}

int ccd_h_alert_feedback(CcdReq *r)
{
    Ccd *d = r->d;
    if (!d->feedback || !d->alerts)
        return ccd_problem(r, 404, "not-found", "alerts are off: no feedback");
    int st = ccd_require_admin(r);
    if (st)
        return st;
    CcAlertEvent ev;
    char cell[CC_ANOMALY_CELL_ID_MAX + 1];
    if (ccd_alerts_lookup(d, r->id, &ev, cell)) {
        ccd_fb_refused(d);
        return ccd_problem(r, 404, "not-found", "no alert '%s' among the recent alerts", r->id);
    }
    CcdCell *c = ccd_cells_get(d->cells, cell);
    if (c && c->busy)
        return CCD_DEFER; /* its anomaly state is the worker's while it is stepped */
    const char *text;
    size_t len;
    if ((st = ccd_request_body(r, &text, &len)))
        return st;
    json_error_t je;
    json_t *body = json_loadb(text, len, 0, &je);
    if (!body) {
        ccd_fb_refused(d);
        return ccd_problem(r, 400, "bad-json", "the body is not JSON: %s", je.text);
    }
    int bad = 0;
    int v = ccd_fb_verdict(json_string_value(json_object_get(body, "verdict")));
    const char *comment = opt_string(body, "comment", &bad), *user = opt_string(body, "user", &bad);
    if (v < 0 || bad || !json_is_object(body)) {
        json_decref(body);
        ccd_fb_refused(d);
        return ccd_problem(r, 422, "bad-feedback",
                           v < 0 ? "verdict must be false_alarm or confirmed"
                                 : "comment and user must be strings of at most 1024 bytes");
    }
    /* a false alarm on an anomaly: each KPI it names gets a higher bar */
    const CcHparams *hp = &d->model->hp;
    json_t *kpis = json_array();
    double bar = 1;
    if (v == CCD_FB_FALSE_ALARM && ev.kind == CC_ALERT_ANOMALY && c)
        for (int i = 0; i < ev.n_attr; i++) {
            int f = ev.attr[i].kpi;
            double m = ccd_alerts_raise_bar(d, c, f);
            if (m >= 1 && f < hp->n_features) {
                json_array_append_new(kpis, json_string(hp->features[f]));
                bar = m > bar ? m : bar;
            }
        }
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:s, s:o, s:f}", "alert", r->id, "cell",
                          cell, "verdict", ccd_fb_verdict_name(v), "comment", comment, "user", user,
                          "time", ts, "kpis", kpis, "bar", bar);
    json_decref(body);
    if (!e)
        return ccd_problem(r, 500, "internal", "out of memory");
    if (!json_object_get(e, "comment"))
        json_object_set_new(e, "comment", json_null());
    if (!json_object_get(e, "user"))
        json_object_set_new(e, "user", json_null());
    if (ccd_fb_record(d, e)) {
        json_decref(e);
        return ccd_problem(r, 500, "internal", "the verdict could not be journaled");
    }
    LOG_INFO("feedback", "%s: %s%s", r->id, ccd_fb_verdict_name(v),
             json_array_size(kpis) ? " (bar raised)" : "");
    return ccd_json(r, 200, e); /* takes the reference */
}
