/*
 * silences_daemon.c — the silences (silences.h) hosted in cellcastd: the list from
 * silences.path, the alerts they hold back (taken out of the alerts' flush, let go by the
 * tick when no silence matches them any more), the HTTP routes and /metrics. Loop thread.
 */
#include "silences.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "alerts.h"
#include "api_util.h"
#include "auth.h"
#include "cellcastd.h"
#include "http.h"
#include "log.h"
#include "strmap.h"
#include "topology.h"

/* A firing transition held back, with its cell id (CcAlertEvent.cell_id points at cell). */
typedef struct Held {
    CcAlertEvent ev;
    char cell[CC_ANOMALY_CELL_ID_MAX + 1];
} Held;

struct CcdSilenceHost {
    CcdSilences *list;
    CcdStrHash held;                        /* alert id -> Held */
    uint64_t held_total, released, dropped; /* firings held; let go; resolved while held */
};

int ccd_silences_start(Ccd *d, const char *state_path, char *err, size_t errlen)
{
    char path[4096 + 16] = "";
    const char *p = d->cfg.silences_path;
    if (p && !strcmp(p, "auto")) {
        if (state_path[0])
            snprintf(path, sizeof path, "%s.silences", state_path);
    } else if (p) {
        snprintf(path, sizeof path, "%s", p);
    }
    CcdSilenceHost *h = calloc(1, sizeof *h);
    if (!h)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    int rc = ccd_silences_open(&h->list, path, err, errlen);
    if (rc) {
        free(h);
        return rc;
    }
    d->silences = h;
    if (path[0])
        LOG_INFO("silences", "%zu silence(s) active, kept in %s",
                 ccd_silences_active(h->list, (int64_t)time(NULL)), path);
    return 0;
}

static void free_held(void *cookie, const char *key, void *val)
{
    (void)cookie;
    (void)key;
    free(val);
}

void ccd_silences_stop(Ccd *d)
{
    CcdSilenceHost *h = d->silences;
    if (!h)
        return;
    ccd_strhash_foreach(&h->held, free_held, NULL);
    ccd_strhash_free(&h->held);
    ccd_silences_close(&h->list);
    free(h);
    d->silences = NULL;
}

static const char *matched_by(Ccd *d, const CcAlertEvent *ev)
{
    const CcHparams *hp = &d->model->hp;
    const CcdTopology *t = d->topology;
    CcdSilenceLabels l = {
        .cell = ev->cell_id,
        .site = ccd_topology_label(t, ev->cell_id, "site"),
        .region = ccd_topology_label(t, ev->cell_id, "region"),
        .sector = ccd_topology_label(t, ev->cell_id, "sector"),
        .kind = cc_alert_kind_name(ev->kind),
        .reason = cc_dq_reason_name(ev->reason),
        .kpi = ev->kpi >= 0 && ev->kpi < hp->n_features ? hp->features[ev->kpi] : NULL,
    };
    return ccd_silences_match(d->silences->list, &l, (int64_t)time(NULL));
}

const char *ccd_silences_matching(Ccd *d, const CcdSilenceLabels *l)
{
    return d->silences ? ccd_silences_match(d->silences->list, l, (int64_t)time(NULL)) : NULL;
}

int ccd_silences_hold(Ccd *d, const CcAlertEvent *ev)
{
    CcdSilenceHost *h = d->silences;
    if (!h)
        return 0;
    Held *x = ccd_strhash_get(&h->held, ev->id);
    if (ev->state == CC_ALERT_RESOLVED) {
        if (!x)
            return 0;
        free(ccd_strhash_del(&h->held, ev->id)); /* never seen firing: nothing to resolve */
        h->dropped++;
        return 1;
    }
    if (!x) {
        const char *sid = matched_by(d, ev);
        if (!sid)
            return 0;
        if (!(x = malloc(sizeof *x)) || ccd_strhash_put(&h->held, ev->id, x)) {
            free(x);
            LOG_ERROR("silences", "out of memory holding alert %s: it fires", ev->id);
            return 0;
        }
        h->held_total++;
        LOG_INFO("silences", "%s held back by silence %s", ev->id, sid);
    }
    x->ev = *ev; /* the latest firing (a severity that rose) */
    snprintf(x->cell, sizeof x->cell, "%s", ev->cell_id);
    x->ev.cell_id = x->cell;
    return 1;
}

int ccd_silences_held(Ccd *d, const char *alert_id)
{
    return d->silences && ccd_strhash_get(&d->silences->held, alert_id) != NULL;
}

typedef struct Release {
    Ccd *d;
    Held **v;
    size_t n;
} Release;

static void collect_unsilenced(void *cookie, const char *key, void *val)
{
    (void)key;
    Release *r = cookie;
    Held *x = val;
    x->ev.cell_id = x->cell;
    if (!matched_by(r->d, &x->ev))
        r->v[r->n++] = x;
}

void ccd_silences_release(Ccd *d, const CcAlertSink *sink)
{
    CcdSilenceHost *h = d->silences;
    if (!h || !h->held.n)
        return;
    Release r = {d, malloc(h->held.n * sizeof *r.v), 0};
    if (!r.v)
        return; /* next tick */
    ccd_strhash_foreach(&h->held, collect_unsilenced, &r);
    for (size_t i = 0; i < r.n; i++) {
        Held *x = r.v[i];
        ccd_strhash_del(&h->held, x->ev.id);
        LOG_INFO("silences", "%s no longer silenced: it fires", x->ev.id);
        sink->emit(sink->cookie, &x->ev); /* copied by the sink */
        h->released++;
        free(x);
    }
    free(r.v);
}

void ccd_silences_metrics(Ccd *d, struct evbuffer *b)
{
    CcdSilenceHost *h = d->silences;
    if (!h)
        return;
    evbuffer_add_printf(
        b,
        "# HELP cellcast_silences_active Silences active now.\n"
        "# TYPE cellcast_silences_active gauge\ncellcast_silences_active %zu\n"
        "# HELP cellcast_silences_held_alerts Alerts firing now and held back by a silence.\n"
        "# TYPE cellcast_silences_held_alerts gauge\ncellcast_silences_held_alerts %zu\n"
        "# HELP cellcast_silences_alerts_total Alert firings held back by a silence, by outcome "
        "(held: at all; released: fired when the silence ended; resolved: resolved while "
        "held, never fired).\n"
        "# TYPE cellcast_silences_alerts_total counter\n"
        "cellcast_silences_alerts_total{outcome=\"held\"} %llu\n"
        "cellcast_silences_alerts_total{outcome=\"released\"} %llu\n"
        "cellcast_silences_alerts_total{outcome=\"resolved\"} %llu\n",
        ccd_silences_active(h->list, (int64_t)time(NULL)), h->held.n,
        (unsigned long long)h->held_total, (unsigned long long)h->released,
        (unsigned long long)h->dropped);
}

int ccd_h_silences(CcdReq *r)
{
    Ccd *d = r->d;
    int64_t now = (int64_t)time(NULL);
    if (!d->silences)
        return ccd_problem(r, 404, "not-found", "alerts are off: no silences");
    if (r->method != EVHTTP_REQ_POST)
        return ccd_json(r, 200, ccd_silences_json(d->silences->list, now));
    int st = ccd_require_admin(r);
    if (st)
        return st;
    const char *text;
    size_t len;
    if ((st = ccd_request_body(r, &text, &len)))
        return st;
    json_error_t je;
    json_t *body = json_loadb(text, len, 0, &je);
    if (!body)
        return ccd_problem(r, 400, "bad-json", "the body is not JSON: %s", je.text);
    char id[40], err[512];
    int rc = ccd_silences_add(d->silences->list, body, now, id, err, sizeof err);
    json_decref(body);
    if (rc == -EINVAL)
        return ccd_problem(r, 422, "bad-silence", "%s", err);
    if (rc)
        return ccd_problem(r, rc == -ENOSPC ? 409 : 500, rc == -ENOSPC ? "too-many" : "internal",
                           "%s", err);
    LOG_INFO("silences", "silence %s added", id);
    return ccd_json(r, 200, json_pack("{s:s}", "silenceID", id));
}

int ccd_h_silence_delete(CcdReq *r)
{
    Ccd *d = r->d;
    if (!d->silences)
        return ccd_problem(r, 404, "not-found", "alerts are off: no silences");
    int st = ccd_require_admin(r);
    if (st)
        return st;
    int rc = ccd_silences_expire(d->silences->list, r->id, (int64_t)time(NULL));
    if (rc == -ENOENT)
        return ccd_problem(r, 404, "not-found", "no silence '%s'", r->id);
    if (rc)
        return ccd_problem(r, 500, "internal", "cannot write the silences file");
    LOG_INFO("silences", "silence %s expired", r->id);
    return ccd_json(r, 200, json_pack("{s:s, s:s}", "silenceID", r->id, "state", "expired"));
}
