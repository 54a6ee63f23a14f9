/* api.c — the routes of cellcastd's HTTP API and their handlers (documented in
 * proto/openapi.yaml). Every handler validates its parameters, runs, fills the reply and
 * returns the status; http.c's chokepoint does the rest. Loop thread only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "ingest.h"
#include "alerts.h"
#include "alertmanager.h"
#include "api_feedback.h"
#include "feedback.h"
#include "incidents.h"
#include "silences.h"
#include "topology.h"
#include "auth.h"
#include "api_forecast.h"
#include "api_info.h"
#include "api_metrics.h"
#include "api_series.h"
#include "api_util.h"
#include "http_cache.h"
#include "dashboard.h"
#include "cluster.h"
#include "models.h"
#include "reload.h"
#include "utf8.h"

/* ---- helpers ---- */

static int64_t S_of(const Ccd *d) { return d->model->hp.step_seconds; }

/* ---- routes ---- */

static int h_healthz(CcdReq *r)
{
    evbuffer_add_printf(r->out, "{\"status\":\"ok\"}\n");
    return ccd_text(r, 200, "application/json");
}

static int h_readyz(CcdReq *r)
{
    Ccd *d = r->d;
    if (!d->model || !d->engine)
        return ccd_problem(r, 503, "not-ready", "no model loaded");
    if (d->stopping)
        return ccd_problem(r, 503, "not-ready", "shutting down");
    if (d->kafka) {
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        if (ks.lost_partitions > 0) { /* handover.c: kept, not fetched */
            r->retry_after = 1;
            return ccd_problem(r, 503, "not-ready",
                               "partitions lost (the brokers were unreachable longer than "
                               "session.timeout.ms): their cells are kept, unassigned, until "
                               "the group assigns the partitions again");
        }
        if (ks.assigned_partitions <= 0) {
            r->retry_after = 1;
            return ccd_problem(r, 503, "not-ready",
                               "the Kafka consumer has no partition assigned yet");
        }
    }
    json_t *o = json_pack("{s:s, s:s}", "status", "ready", "model", d->model_name);
    return ccd_json(r, 200, o);
}

static int h_config(CcdReq *r)
{
    json_t *o = ccd_config_to_json(&r->d->cfg), *lim = json_object_get(o, "limits");
    if (lim) /* limits.kv_budget_mb 0 = automatic: what it came to */
        json_object_set_new(lim, "kv_budget_effective_mb",
                            json_integer((json_int_t)(r->d->cells->s.kv_budget_bytes >> 20)));
    return ccd_json(r, 200, o);
}

static int h_model(CcdReq *r)
{
    const CcHparams *hp = &r->d->model->hp;
    json_t *f = json_array(), *meta = json_object();
    for (int i = 0; i < hp->n_features; i++)
        json_array_append_new(f, json_string(hp->features[i]));
    /* the trainer's record (command, seed, validation scores such as val_mae_vs_last and
     * val_cover80): what a dashboard shows beside the forecasts */
    for (int i = 0; i < hp->n_extra; i++)
        json_object_set_new(meta, hp->extra[i].key, json_string(hp->extra[i].value));
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, "
        "s:I, s:I, s:o, s:o}",
        "format", cc_hparams_format(hp), "name", hp->name, "version", hp->version, "trained_on",
        hp->trained_on, "created_at", hp->created_at, "features", f, "patch_len", hp->patch_len,
        "n_patches", hp->n_patches, "norm_window", hp->norm_window, "d_model", hp->d_model,
        "n_heads", hp->n_heads, "n_layers", hp->n_layers, "d_ff", hp->d_ff, "horizon", hp->horizon,
        "linear_window", hp->linear_window, "step_seconds", (json_int_t)hp->step_seconds,
        "tz_offset_s", (json_int_t)hp->tz_offset_s, "n_params", (json_int_t)r->d->model->n_params,
        "kv_bytes_per_cell", (json_int_t)cc_engine_kv_bytes_per_cell(r->d->engine), "path",
        ccd_json_text(r->d->cfg.model_path, NULL), "metadata", meta); /* the operator's bytes */
    json_object_set_new(o, "serving", ccd_models_json(r->d));         /* hash, learner's record */
    return ccd_json(r, 200, o);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct ListCtx {
    const char *after;
    const char **ids;
    size_t n;
    const CcdTopology *topo; /* label filters (topology.h) */
    CcdTopoFilter f;
    size_t matched;
} ListCtx;

static void collect(void *cookie, CcdCell *c)
{
    ListCtx *l = cookie;
    if (ccd_topology_filter_on(&l->f) && !ccd_topology_filter_match(l->topo, &l->f, c->id))
        return;
    l->matched++;
    if (!l->after || strcmp(c->id, l->after) > 0)
        l->ids[l->n++] = c->id;
}

static int h_cells(CcdReq *r)
{
    Ccd *d = r->d;
    long long limit = 100;
    int q = ccd_query_int(r, "limit", &limit);
    if (q == -2)
        return ccd_problem(r, 400, "bad-parameter", "limit must be an integer");
    if (limit < 1 || limit > 10000)
        return ccd_problem(r, 422, "bad-parameter", "limit must be in [1, 10000], got %lld", limit);
    /* every parameter is read before the cache is asked: its key is the pairs read so far,
     * so a filtered or later page is not the cached reply of the first, unfiltered one */
    ListCtx l = {.after = ccd_query(r, "after"), .topo = d->topology};
    l.f = (CcdTopoFilter){ccd_query(r, "site"), ccd_query(r, "region"), ccd_query(r, "sector")};
    /* the same reply until a record, a step or the cell set moves the table's version; a
     * page that polls gets a 304 between (a live feed moves it at every record) */
    int rc = ccd_reply_cached(
        r, ccd_fold(ccd_fold(ccd_version_seed(d), d->cells->version), d->topology_loads));
    if (rc)
        return rc;
    l.ids = malloc((d->cells->n_cells + 1) * sizeof *l.ids);
    if (!l.ids)
        return ccd_problem(r, 500, "internal", "out of memory");
    ccd_cells_foreach(d->cells, collect, &l);
    qsort(l.ids, l.n, sizeof *l.ids, cmp_str);
    size_t n = l.n < (size_t)limit ? l.n : (size_t)limit;
    /* written directly: the whole table's rows at each version, no jansson tree */
    static char labels[CCD_TOPO_LABELS_JSON_MAX];
    CcdSb *sb = ccd_reply_sb();
    ccd_sb_str(sb, "{\"cells\":[");
    for (size_t i = 0; i < n; i++) {
        CcdCell *c = ccd_cells_get(d->cells, l.ids[i]);
        ccd_sb_str(sb, i ? ",{\"id\":" : "{\"id\":");
        ccd_sb_jstr(sb, c->id);
        ccd_sb_str(sb, ",\"last_step\":");
        ccd_sb_int(sb, c->last_step);
        ccd_sb_str(sb, ",\"last_ts\":");
        ccd_sb_ts(sb, c->last_ts);
        ccd_sb_str(sb, c->pub.valid ? ",\"state\":\"live\",\"steps\":"
                                    : ",\"state\":\"cold\",\"steps\":");
        ccd_sb_int(sb, (long long)c->n_steps);
        ccd_sb_str(sb, ",\"labels\":");
        int k = ccd_topology_labels_json(d->topology, c->id, labels, sizeof labels);
        ccd_sb_add(sb, k > 0 ? labels : "{}", k > 0 ? (size_t)k : 2);
        ccd_sb_add(sb, "}", 1);
    }
    ccd_sb_str(sb, "],\"total\":");
    ccd_sb_int(sb, (long long)l.matched);
    ccd_sb_str(sb, ",\"next\":");
    if (n < l.n && n)
        ccd_sb_jstr(sb, l.ids[n - 1]);
    else
        ccd_sb_str(sb, "null");
    ccd_sb_add(sb, "}", 1);
    free(l.ids);
    return ccd_sb_reply(r, sb);
}

/* The version of GET /v1/cells/{id}: every member it shows that moves without a publish
 * (its counts, pending steps, state), its publish sequence and its alert scores'. */
static uint64_t cell_reply_version(Ccd *d, const CcdCell *c)
{
    /* the members themselves rather than a counter bumped wherever one changes: exact by
     * construction, and a few dozen cycles */
    const uint64_t m[] = {(uint64_t)c->doomed,
                          (uint64_t)c->topic,
                          (uint64_t)c->partition,
                          (uint64_t)c->first_step,
                          (uint64_t)c->last_step,
                          (uint64_t)c->last_ts,
                          c->n_records,
                          c->n_steps,
                          c->n_duplicates,
                          c->n_late,
                          c->n_imputed,
                          c->n_restarts,
                          c->n_filled,
                          c->n_held,
                          (uint64_t)c->open_items};
    uint64_t h = ccd_cell_version(d, c, ccd_version_seed(d));
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        h = ccd_fold(h, m[i]);
    return ccd_fold(h, ccd_alerts_cell_version(d, c));
}

static int h_cell(CcdReq *r)
{
    Ccd *d = r->d;
    CcdCell *c;
    int rc = ccd_find_cell(r, &c);
    if (rc < 0)
        return -rc;
    if ((rc = ccd_reply_cached(r, cell_reply_version(d, c))))
        return rc; /* nothing it shows moved: its counts, state, last publish, scores */
    const int F = d->model->hp.n_features;
    float obs[CC_MAX_FEATURES], em[CC_MAX_FEATURES], es[CC_MAX_FEATURES];
    int valid, have_exp;
    int64_t pstep;
    pthread_mutex_lock(&d->cells->pub_lock);
    valid = c->pub.valid;
    pstep = c->pub.step;
    have_exp = c->pub.have_expected;
    memcpy(obs, c->pub.obs, (size_t)F * sizeof(float));
    memcpy(em, c->pub.exp_mean, (size_t)F * sizeof(float));
    memcpy(es, c->pub.exp_sd, (size_t)F * sizeof(float));
    pthread_mutex_unlock(&d->cells->pub_lock);
    /* written directly (no jansson tree): a live cell's counts move at each of its
     * records, so a dashboard's read of a row is mostly a render, not a cache hit */
    CcdSb *sb = ccd_reply_sb();
    static const char *const counts[] = {"records", "steps",    "duplicates",  "late",
                                         "imputed", "restarts", "filled_kpis", "outage_held"};
    const uint64_t nc[] = {c->n_records, c->n_steps,    c->n_duplicates, c->n_late,
                           c->n_imputed, c->n_restarts, c->n_filled,     c->n_held};
    ccd_sb_str(sb, "{\"id\":");
    ccd_sb_jstr(sb, c->id);
    ccd_sb_str(sb, c->doomed ? ",\"state\":\"released\",\"topic\":"
                   : valid   ? ",\"state\":\"live\",\"topic\":"
                             : ",\"state\":\"cold\",\"topic\":");
    ccd_sb_jstr(sb, c->topic >= 0 ? d->cfg.kafka_topics.items[c->topic] : "http");
    ccd_sb_str(sb, ",\"partition\":");
    ccd_sb_int(sb, c->partition);
    ccd_sb_str(sb, ",\"first_step\":");
    ccd_sb_int(sb, c->first_step);
    ccd_sb_str(sb, ",\"last_step\":");
    ccd_sb_int(sb, c->last_step);
    ccd_sb_str(sb, ",\"last_ts\":");
    ccd_sb_ts(sb, c->last_ts);
    ccd_sb_str(sb, ",\"forecast_step\":");
    if (valid)
        ccd_sb_int(sb, pstep);
    else
        ccd_sb_str(sb, "null");
    for (size_t i = 0; i < sizeof nc / sizeof *nc; i++) {
        ccd_sb_str(sb, i ? ",\"" : ",\"counts\":{\"");
        ccd_sb_str(sb, counts[i]);
        ccd_sb_str(sb, "\":");
        ccd_sb_int(sb, (long long)nc[i]);
    }
    ccd_sb_str(sb, "},\"pending_steps\":");
    ccd_sb_int(sb, c->open_items);
    if (c->n_steps) {
        ccd_sb_str(sb, ",\"last_observation\":{\"step\":");
        ccd_sb_int(sb, pstep);
        ccd_sb_str(sb, ",\"ts\":");
        ccd_sb_ts(sb, pstep * S_of(d));
        ccd_sb_str(sb, ",\"kpis\":{");
        for (int f = 0; f < F; f++) {
            /* a KPI no record of the step gave is null (issue 15), not the value filled in */
            ccd_sb_str(sb, f ? "," : "");
            ccd_sb_jstr(sb, d->model->hp.features[f]);
            ccd_sb_str(sb, ":{\"observed\":");
            ccd_sb_num(sb, obs[f]);
            if (have_exp) {
                ccd_sb_str(sb, ",\"expected\":");
                ccd_sb_num(sb, em[f]);
                ccd_sb_str(sb, ",\"sd\":");
                ccd_sb_num(sb, es[f]);
                ccd_sb_str(sb, ",\"z\":");
                ccd_sb_num(sb, !isfinite(obs[f]) ? NAN
                               : es[f] > 0       ? (obs[f] - em[f]) / es[f]
                                                 : 0.0);
            }
            ccd_sb_add(sb, "}", 1);
        }
        ccd_sb_str(sb, "}}");
    }
    ccd_alerts_cell_write(d, c, sb);
    ccd_sb_add(sb, "}", 1);
    return ccd_sb_reply(r, sb);
}

static int h_attention(CcdReq *r)
{
    Ccd *d = r->d;
    const CcHparams *hp = &d->model->hp;
    const int F = hp->n_features, L = hp->n_layers, H = hp->n_heads, NT = hp->n_patches + 1;
    const int64_t S = hp->step_seconds;
    CcdCell *c;
    int rc = ccd_find_cell(r, &c);
    if (rc < 0)
        return -rc;
    uint64_t mask;
    if ((rc = ccd_query_kpis(r, &mask)))
        return rc;
    if (!d->cfg.engine_keep_attention)
        return ccd_problem(r, 404, "attention-not-kept",
                           "attention weights are not kept (engine.keep_attention: false)");
    if (c->busy)
        return CCD_DEFER;
    /* the page reads it once per step (~0.5 ms to render, most of it printing floats): cached
     * per published step, with an ETag for the 304 */
    if ((rc = ccd_reply_cached(r, ccd_cell_version(d, c, ccd_version_seed(d)))))
        return rc;
    float *w = ccd_scratch_floats((size_t)L * H * NT);
    int64_t *tok = malloc((size_t)NT * sizeof *tok);
    if (!w || !tok) {
        free(tok);
        return ccd_problem(r, 500, "internal", "out of memory");
    }
    struct evbuffer *b = r->out;
    char ts[32], num[32];
    int any = 0, nt = 0;
    evbuffer_add_printf(b, "{\"cell\":\"%s\",\"layers\":%d,\"heads\":%d,\"kpis\":{", c->id, L, H);
    for (int f = 0; f < F; f++) {
        if (!(mask >> f & 1))
            continue;
        rc = cc_cell_attention(c->cell, f, w, tok, &nt);
        if (rc == -EAGAIN)
            break;
        if (rc) {
            free(tok);
            evbuffer_drain(b, evbuffer_get_length(b));
            return ccd_problem(r, 500, "internal", "attention unavailable (%d)", rc);
        }
        if (any)
            evbuffer_add(b, ",", 1);
        ccd_evbuffer_jstr(b, hp->features[f]);
        evbuffer_add(b, ":[", 2);
        for (int l = 0; l < L; l++) {
            evbuffer_add_printf(b, "%s[", l ? "," : "");
            for (int h = 0; h < H; h++) {
                evbuffer_add_printf(b, "%s[", h ? "," : "");
                for (int j = 0; j < nt; j++) {
                    snprintf(num, sizeof num, "%.5g", w[((size_t)l * H + h) * nt + j]);
                    evbuffer_add_printf(b, "%s%s", j ? "," : "", num);
                }
                evbuffer_add(b, "]", 1);
            }
            evbuffer_add(b, "]", 1);
        }
        evbuffer_add(b, "]", 1);
        any = 1;
    }
    if (rc == -EAGAIN) {
        free(tok);
        evbuffer_drain(b, evbuffer_get_length(b));
        r->retry_after = 5;
        return ccd_problem(r, 503, "no-forecast-yet",
                           "cell '%s' has no forecast (and attention) yet", c->id);
    }
    evbuffer_add_printf(b, "},\"tokens\":[");
    for (int j = 0; j < nt; j++) {
        ccd_rfc3339(tok[j] * S, ts, sizeof ts);
        evbuffer_add_printf(b, "%s{\"end_step\":%lld,\"end_ts\":\"%s\",\"current\":%s}",
                            j ? "," : "", (long long)tok[j], ts, j == nt - 1 ? "true" : "false");
    }
    evbuffer_add(b, "]}\n", 3);
    free(tok);
    return ccd_text(r, 200, "application/json");
}

static int h_post_kpis(CcdReq *r)
{
    Ccd *d = r->d;
    if (d->cfg.http_post_kpis == CCD_POST_KPIS_OFF)
        return ccd_problem(r, 403, "post-kpis-disabled",
                           "POST /v1/kpis is off (http.post_kpis: token or open enables it)");
    int st = d->cfg.http_post_kpis == CCD_POST_KPIS_TOKEN ? ccd_require_admin(r) : 0;
    if (st)
        return st;
    const char *buf;
    size_t len;
    if ((st = ccd_request_body(r, &buf, &len)))
        return st;
    if (!len)
        return ccd_problem(r, 400, "empty-body", "POST a KPI message (proto/kpi.schema.json)");
    if (d->stopping || ccd_sched_pending(d->sched) >= ccd_backpressure(d)) {
        r->retry_after = 1;
        return ccd_problem(r, 503, "overloaded", "ingest queue full (%d pending steps); retry",
                           ccd_sched_pending(d->sched));
    }
    CcKpiBatch kb;
    d->in.http_messages++;
    d->in.http_bytes += len;
    uint64_t oor0 = d->in.future_ts + d->in.past_ts;
    int rc = ccd_ingest_message(d, buf, len, -1, -1, &kb);
    int oor = (int)(d->in.future_ts + d->in.past_ts - oor0); /* ingest.max_future_s */
    if (rc == -ENOMEM)
        return ccd_problem(r, 500, "internal", "out of memory");
    if (rc == -ENOSPC) {
        r->retry_after = 1;
        return ccd_problem(r, 503, "cells-full",
                           "no room for new cells (limits.max_cells, every cell busy)");
    }
    /* every refusal with its reason: the decoder's (invalid elements) and the records
     * refused for their time (which used to be counted in "rejected" and named nowhere) */
    const CcdTsRefusal *tr;
    int n_tr = ccd_ingest_ts_refusals(&tr);
    json_t *errs = json_array();
    for (int i = 0; i < kb.n_errors && json_array_size(errs) < 100; i++)
        /* the message quotes a cut piece of the record (a cell id up to 40 bytes), maybe in
         * the middle of a UTF-8 character: json_pack's "s" refused it, and the entry was lost */
        json_array_append_new(errs,
                              json_pack("{s:i, s:s, s:o}", "element", kb.errors[i].element,
                                        "reason", cc_kpi_reason_name(kb.errors[i].reason),
                                        "message", ccd_json_text(kb.errors[i].message, NULL)));
    for (int i = 0; i < n_tr && json_array_size(errs) < 100; i++) {
        char ts[40], msg[160];
        ccd_rfc3339(tr[i].ts, ts, sizeof ts);
        snprintf(msg, sizeof msg, "its time %s is %lld s %s the clock (%s = %lld)", ts,
                 (long long)tr[i].off_s, tr[i].future ? "ahead of" : "behind",
                 tr[i].future ? "ingest.max_future_s" : "ingest.max_past_s",
                 (long long)(tr[i].future ? d->cfg.ingest_max_future_s : d->cfg.ingest_max_past_s));
        json_array_append_new(errs,
                              json_pack("{s:i, s:s, s:s}", "element", tr[i].element, "reason",
                                        tr[i].future ? "future_ts" : "past_ts", "message", msg));
    }
    if (kb.n_records - oor == 0 && (kb.n_errors || oor)) {
        /* nothing accepted: 422 (400 not JSON, 413 too large), the first refusal in the
         * detail and every one in "errors", as a 202's */
        const CcKpiError *e = kb.n_errors ? &kb.errors[0] : NULL;
        int status = !e                             ? 422
                     : e->reason == CC_KPI_NOT_JSON ? 400
                     : e->reason == CC_KPI_OVERSIZE ? 413
                                                    : 422;
        json_t *first = json_array_get(errs, 0);
        const char *reason = json_string_value(json_object_get(first, "reason"));
        const char *message = json_string_value(json_object_get(first, "message"));
        json_t *extra = json_pack("{s:i, s:i, s:o}", "accepted", 0, "rejected", kb.n_errors + oor,
                                  "errors", errs);
        if (e && e->element < 0)
            return ccd_problem_ext(r, status, reason, extra, "%s: %s", reason, message);
        return ccd_problem_ext(
            r, status, reason, extra, "no record accepted (%d refused); element %d: %s: %s",
            kb.n_errors + oor, (int)json_integer_value(json_object_get(first, "element")), reason,
            message);
    }
    ccd_sched_maybe_flush(d->sched, 0);
    return ccd_json(r, 202,
                    json_pack("{s:i, s:i, s:o}", "accepted", kb.n_records - oor, "rejected",
                              kb.n_errors + oor, "errors", errs));
}

/* GET /v1/incidents: what the worker queued so far grouped first (incidents_daemon.c is fed
 * by the alerts' flush and does not call back into them). */
static int h_incidents(CcdReq *r)
{
    ccd_alerts_flush(r->d);
    return ccd_h_incidents(r);
}

/* clang-format off */
const CcdRoute ccd_routes[] = {
    {"/healthz", EVHTTP_REQ_GET, h_healthz, "liveness"},
    {"/", EVHTTP_REQ_GET, ccd_h_dashboard_index, "the dashboard (web/)"},
    {"/index.html", EVHTTP_REQ_GET, ccd_h_dashboard_index, "the dashboard (web/)"},
    {"/assets/{id}", EVHTTP_REQ_GET, ccd_h_dashboard_asset, "the dashboard's hashed assets"},
    {"/readyz", EVHTTP_REQ_GET, h_readyz, "readiness: model loaded, consumer assigned"},
    {"/metrics", EVHTTP_REQ_GET, ccd_h_metrics, "Prometheus metrics"},
    {"/v1/info", EVHTTP_REQ_GET, ccd_h_info, "human-oriented status"},
    {"/v1/config", EVHTTP_REQ_GET, h_config, "the configuration in effect"},
    {"/v1/model", EVHTTP_REQ_GET, h_model, "the model served"},
    {"/v1/cells", EVHTTP_REQ_GET, h_cells, "cells, paged"},
    {"/v1/cells/{id}", EVHTTP_REQ_GET, h_cell, "one cell"},
    {"/v1/cells/{id}/forecast", EVHTTP_REQ_GET, ccd_h_forecast, "the cell's forecast"},
    {"/v1/cells/{id}/history", EVHTTP_REQ_GET, ccd_h_history, "the cell's stored raw steps"},
    {"/v1/cells/{id}/attention", EVHTTP_REQ_GET, h_attention, "the last step's attention"},
    {"/v1/kpis", EVHTTP_REQ_POST, h_post_kpis, "KPI messages without Kafka"},
    {"/v1/alerts", EVHTTP_REQ_GET, ccd_h_alerts, "alert transitions, paged"},
    {"/v1/alerts/firing", EVHTTP_REQ_GET, ccd_h_alerts_firing, "alerts firing now, all cells, paged"},
    {"/v1/alerts/{id}/feedback", EVHTTP_REQ_POST, ccd_h_alert_feedback, "an operator's verdict on an alert (token)"},
    {"/v1/feedback", EVHTTP_REQ_GET, ccd_h_feedback, "operators' recent verdicts on alerts"},
    {"/v1/cells/{id}/alerts", EVHTTP_REQ_GET, ccd_h_cell_alerts, "the cell's alert transitions"},
    {"/v1/cells/{id}/scores", EVHTTP_REQ_GET, ccd_h_cell_scores, "the cell's anomaly scores"},
    {"/v1/incidents", EVHTTP_REQ_GET, h_incidents, "incidents (alerts grouped by site), firing and recent"},
    {"/v1/silences", EVHTTP_REQ_GET | EVHTTP_REQ_POST, ccd_h_silences, "silences: list, add (token)"},
    {"/v1/silences/{id}", EVHTTP_REQ_DELETE, ccd_h_silence_delete, "expire a silence (token)"},
    {"/v1/cluster", EVHTTP_REQ_GET, ccd_h_cluster, "members of the consumer group, who serves what"},
    {"/v1/admin/reload", EVHTTP_REQ_POST, ccd_h_admin_reload, "reload model and config (token)"},
    /* issue 15: the dashboard's reads (api_series.c) */
    {"/v1/cells/{id}/forecasts", EVHTTP_REQ_GET, ccd_h_forecasts, "past forecasts vs actuals"},
    {"/v1/forecast", EVHTTP_REQ_GET, ccd_h_batch_forecast, "forecasts of several cells"},
    {"/v1/history", EVHTTP_REQ_GET, ccd_h_batch_history, "histories of several cells"},
};
/* clang-format on */
const int ccd_n_routes = (int)(sizeof ccd_routes / sizeof ccd_routes[0]);
