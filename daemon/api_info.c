/* api_info.c — GET /v1/info: the human-oriented status (version, model, Kafka, ingest
 * rates, batching, cells, memory, HTTP), as JSON or as redis INFO-style text. Loop thread
 * only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_info.h"
#include "api_util.h"
#include "cc_build_info.h"
#include "cc_time.h"
#include "host.h"
#include "http_cache.h"
#include "models.h"
#include "utf8.h"
#include "settings.h"

/* s in a key:value line of the text form: a control character (a newline in a model's name,
 * from a model file anyone may publish) as \xNN, so that it cannot start a line of its own */
static void text_value(struct evbuffer *out, const char *s)
{
    for (;;) {
        size_t run = 0;
        while (s[run] && (unsigned char)s[run] >= 0x20 && s[run] != 0x7f)
            run++;
        evbuffer_add(out, s, run);
        s += run;
        if (!*s)
            return;
        evbuffer_add_printf(out, "\\x%02x", (unsigned char)*s++);
    }
}

int ccd_h_info(CcdReq *r)
{
    Ccd *d = r->d;
    const char *fmt = ccd_query(r, "format");
    int rc;
    /* a snapshot per update of the ingest rates (the 1 s cron): figures at most 1 s old */
    if ((!fmt || !strcmp(fmt, "json")) &&
        (rc = ccd_reply_cached(r, ccd_fold(ccd_version_seed(d), (uint64_t)d->in.last_rate_ns))))
        return rc;
    const CcdSchedStats *ss = ccd_sched_stats(d->sched);
    uint64_t reqs;
    int conns, deferred;
    ccd_http_counts(d, &reqs, &conns, &deferred);
    json_t *o = json_object();
    json_object_set_new(o, "version", json_string(CC_VERSION));
    json_object_set_new(o, "uptime_s", json_real((double)(cc_now_ns() - d->start_ns) * 1e-9));
    /* paths are the operator's bytes, not always UTF-8 (--set): json_string would give NULL,
     * and json_pack fail on the whole model section */
    json_object_set_new(o, "config_file",
                        ccd_json_text(d->config_path ? d->config_path : "", NULL));
    json_t *mo = json_pack("{s:o, s:o, s:i, s:I, s:i}", "name", ccd_json_text(d->model_name, NULL),
                           "path", ccd_json_text(d->cfg.model_path, NULL), "features",
                           d->model->hp.n_features, "step_seconds",
                           (json_int_t)d->model->hp.step_seconds, "horizon", d->model->hp.horizon);
    /* the trainer's verdict against the last value, for the dashboard's model tile */
    double vs_last = ccd_model_vs_last(&d->model->hp, "mae", -1);
    if (mo && !isnan(vs_last))
        json_object_set_new(mo, "val_mae_vs_last", json_real(vs_last));
    if (mo) /* the dashboard's learning / serving / history panel (models.h) */
        json_object_set_new(mo, "serving", ccd_models_json(d));
    json_object_set_new(o, "model", mo);
    json_t *k = json_object();
    json_object_set_new(k, "brokers", json_string(d->cfg.kafka_brokers));
    if (d->kafka) {
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        json_object_set_new(k, "bootstrap", json_string(ccd_kafka_bootstrap(d->kafka)));
        json_object_set_new(k, "assigned_partitions", json_integer(ks.assigned_partitions));
        json_object_set_new(k, "lag", json_integer(ks.lag));
        json_object_set_new(k, "commits", json_integer((json_int_t)ks.commits));
    }
    json_object_set_new(o, "kafka", k);
    uint64_t invalid = 0;
    for (int i = 1; i < CC_KPI_N_REASONS; i++)
        invalid += d->in.invalid[i];
    json_object_set_new(
        o, "ingest",
        json_pack("{s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:I}", "messages_per_s", d->in.rate_messages,
                  "records_per_s", d->in.rate_records, "steps_per_s", d->in.rate_steps, "records",
                  (json_int_t)d->in.records, "invalid", (json_int_t)invalid, "duplicates",
                  (json_int_t)d->cells->st.duplicates, "late", (json_int_t)d->cells->st.late,
                  "imputed", (json_int_t)d->cells->st.imputed));
    json_object_set_new(o, "batching",
                        json_pack("{s:I, s:f, s:f, s:i}", "batches", (json_int_t)ss->batches,
                                  "mean_batch",
                                  ss->batches ? (double)ss->items / (double)ss->batches : 0.0,
                                  "step_p99_s", ccd_hist_quantile(&ss->step_seconds, 0.99),
                                  "pending", ccd_sched_pending(d->sched)));
    json_object_set_new(
        o, "cells",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "resident", (json_int_t)d->cells->n_cells,
                  "max_resident", (json_int_t)d->cells->max_resident, "bytes_per_cell",
                  (json_int_t)d->cells->cell_bytes, "evicted", (json_int_t)d->cells->st.evictions,
                  "history_steps", (json_int_t)d->cells->hist_depth, "history_bytes_per_cell_full",
                  (json_int_t)ccd_cells_history_full_bytes(d->cells), "history_bytes",
                  (json_int_t)d->cells->hist_bytes));
    json_object_set_new(o, "memory",
                        json_pack("{s:I, s:s}", "rss_bytes", (json_int_t)cc_host_rss_bytes(),
                                  "blas", cc_host_blas_core()));
    json_object_set_new(o, "http",
                        json_pack("{s:I, s:i, s:i}", "requests", (json_int_t)reqs, "connections",
                                  conns, "parked", deferred));
    if (fmt && strcmp(fmt, "json") && strcmp(fmt, "text")) {
        json_decref(o);
        return ccd_problem(r, 422, "bad-parameter", "format must be json or text");
    }
    if (!fmt || !strcmp(fmt, "json"))
        return ccd_json(r, 200, o);
    /* redis INFO style: "# section" then "key:value" lines */
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (!json_is_object(v))
            continue;
        evbuffer_add_printf(r->out, "# %s\n", key);
        const char *k2;
        json_t *v2;
        json_object_foreach(v, k2, v2)
        {
            char *t = json_is_string(v2) ? NULL
                                         : json_dumps(v2, JSON_ENCODE_ANY | JSON_REAL_PRECISION(6));
            text_value(r->out, k2);
            evbuffer_add(r->out, ":", 1);
            text_value(r->out, t ? t : json_string_value(v2));
            evbuffer_add(r->out, "\n", 1);
            free(t);
        }
        evbuffer_add(r->out, "\n", 1);
    }
    json_object_foreach(o, key, v)
    {
        if (json_is_object(v))
            continue;
        char *t =
            json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(6));
        text_value(r->out, key);
        evbuffer_add(r->out, ":", 1);
        text_value(r->out, t ? t : json_string_value(v));
        evbuffer_add(r->out, "\n", 1);
        free(t);
    }
    json_decref(o);
    return ccd_text(r, 200, "text/plain; charset=utf-8");
}
