/* api.c — the routes of cellcastd's HTTP API and their handlers (documented in
 * proto/openapi.yaml). Every handler validates its parameters, runs, fills the reply and
 * returns the status; http.c's chokepoint does the rest. Loop thread only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc_build_info.h"
#include "cc_time.h"
#include "host.h"
#include "http.h"
#include "ingest.h"
#include "alerts.h"
#include "incidents.h"
#include "silences.h"
#include "topology.h"
#include "auth.h"
#include "api_util.h"
#include "http_cache.h"
#include "dashboard.h"
#include "cluster.h"
#include "handover.h"
#include "log.h"
#include "models.h"
#include "procmetrics.h"
#include "settings.h"
#include "reload.h"
#include "state.h"

/* ---- helpers ---- */

static int64_t S_of(const Ccd *d) { return d->model->hp.step_seconds; }

/* ---- forecast reply cache ----
 *
 * Dashboards poll GET /v1/cells/{id}/forecast much more often than a cell steps (one step
 * per step_seconds), and rendering the full reply (~16 KB, ~800 numbers) costs ~10x more
 * than serving it. The reply with the default parameters (all KPIs, the model's horizon,
 * forecast.level) is therefore rendered once per published forecast and kept as an
 * immutable, reference-counted body that every reply adds by reference (no copy):
 * evbuffer_add_reference, released when the connection has written it. The cache is
 * direct-mapped by cell serial (CCD_FC_CACHE slots, at most one body per slot: ~16 MiB for
 * the default shape), so its memory is bounded whatever the number of cells. An entry is
 * valid for (cell serial, publish sequence, level, model name, KPI bounds, online
 * intervals on): a new step, a new cell with the same id, a reload that changes the level,
 * the model name, the bounds or forecast.interval_adapt all miss and re-render (the
 * interval scales change only with a publish, also when the rate changes: interval.h).
 * Requests with other parameters are rendered every time. Loop thread only. */
#define CCD_FC_CACHE 1024

typedef struct FcSlot {
    uint64_t serial, seq;
    double level;
    int adapt;       /* forecast.interval_adapt it was rendered with */
    uint64_t bounds; /* key of the KPI bounds the body was clamped to */
    char model[sizeof((Ccd *)0)->model_name];
    CcdBody *body;
} FcSlot;

static FcSlot fc_cache[CCD_FC_CACHE];

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

static void metric(struct evbuffer *b, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A counter the scheduler's worker adds to (atomically, relaxed). */
static void atomic_counter(struct evbuffer *b, const char *name, const char *help,
                           const uint64_t *v)
{
    metric(b, name, "counter", help);
    evbuffer_add_printf(b, "%s %llu\n", name,
                        (unsigned long long)__atomic_load_n(v, __ATOMIC_RELAXED));
}

static void hist_out(struct evbuffer *b, const char *name, const CcdHist *h)
{
    uint64_t acc = 0;
    for (int i = 0; i < h->n; i++) {
        acc += h->counts[i];
        evbuffer_add_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i],
                            (unsigned long long)acc);
    }
    evbuffer_add_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
                        (unsigned long long)h->count, name, h->sum, name,
                        (unsigned long long)h->count);
}

/* Alerts (alerts.h), snapshots (state.h), reloads and the producer. */
static void alerts_metrics(Ccd *d, struct evbuffer *b)
{
    static const char *const states[] = {"", "firing", "resolved"};
    static const char *const sevs[] = {"", "warning", "critical"};
    CcdAlertsStats as, *o = &as;
    CcdStateStats ss, *so = &ss;
    if (!d->alerts || !d->state)
        return;
    ccd_alerts_stats(d, &as);
    ccd_state_stats(d, &ss);
    evbuffer_add_printf(b, "# HELP cellcast_alert_transitions_total Alert transitions by kind, "
                           "reason, state and severity.\n"
                           "# TYPE cellcast_alert_transitions_total counter\n");
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 5; r++)
            for (int s = 1; s < 3; s++)
                for (int v = 1; v < 3; v++)
                    if (o->trans[k][r][s][v] || (r == (k ? 1 : 0) && v == 1))
                        evbuffer_add_printf(b,
                                            "cellcast_alert_transitions_total{kind=\"%s\",reason="
                                            "\"%s\",state=\"%s\",severity=\"%s\"} %llu\n",
                                            cc_alert_kind_name((enum CcAlertKind)k),
                                            cc_dq_reason_name((enum CcDqReason)r), states[s],
                                            sevs[v], (unsigned long long)o->trans[k][r][s][v]);
    evbuffer_add_printf(b,
                        "# HELP cellcast_alerts_firing Alerts firing now, by kind and severity.\n"
                        "# TYPE cellcast_alerts_firing gauge\n"
                        "cellcast_alerts_firing{kind=\"anomaly\",severity=\"warning\"} %d\n"
                        "cellcast_alerts_firing{kind=\"anomaly\",severity=\"critical\"} %d\n"
                        "cellcast_alerts_firing{kind=\"data_quality\",severity=\"warning\"} %d\n"
                        "cellcast_alerts_firing{kind=\"data_quality\",severity=\"critical\"} %d\n",
                        o->firing_anomaly - o->firing_anomaly_critical, o->firing_anomaly_critical,
                        o->firing_dq - o->firing_dq_critical, o->firing_dq_critical);
    evbuffer_add_printf(
        b,
        "# HELP cellcast_alerts_quiet_total Transitions recomputed by a replay after a restart and "
        "not produced again.\n"
        "# TYPE cellcast_alerts_quiet_total counter\ncellcast_alerts_quiet_total %llu\n",
        (unsigned long long)o->quiet);
    evbuffer_add_printf(
        b,
        "# HELP cellcast_alerts_produced_total Alert transitions handed to the Kafka producer.\n"
        "# TYPE cellcast_alerts_produced_total counter\ncellcast_alerts_produced_total %llu\n"
        "# HELP cellcast_alerts_produce_refused_total Produce attempts refused (queue full); "
        "retried.\n"
        "# TYPE cellcast_alerts_produce_refused_total "
        "counter\ncellcast_alerts_produce_refused_total %llu\n"
        "# HELP cellcast_alerts_waiting Transitions journaled and not yet confirmed by Kafka.\n"
        "# TYPE cellcast_alerts_waiting gauge\ncellcast_alerts_waiting %zu\n"
        "# HELP cellcast_alerts_redelivered_total Transitions produced again: unconfirmed in "
        "the journal at start (recovered), or given up by the producer (failed).\n"
        "# TYPE cellcast_alerts_redelivered_total counter\n"
        "cellcast_alerts_redelivered_total{cause=\"recovered\"} %llu\n"
        "cellcast_alerts_redelivered_total{cause=\"failed\"} %llu\n",
        (unsigned long long)o->produced, (unsigned long long)o->produce_refused, o->waiting,
        (unsigned long long)o->recovered, (unsigned long long)o->delivery_failed);
    if (d->kafka) {
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        evbuffer_add_printf(b,
                            "# HELP cellcast_kafka_produce_total Producer outcomes (alerts and "
                            "dead letters): delivered, retried, failed.\n"
                            "# TYPE cellcast_kafka_produce_total counter\n"
                            "cellcast_kafka_produce_total{result=\"delivered\"} %llu\n"
                            "cellcast_kafka_produce_total{result=\"retried\"} %llu\n"
                            "cellcast_kafka_produce_total{result=\"failed\"} %llu\n",
                            (unsigned long long)ks.produced, (unsigned long long)ks.produce_retries,
                            (unsigned long long)ks.produce_failed);
        if (!strcmp(d->cfg.kafka_brokers, "embedded"))
            evbuffer_add_printf(b,
                                "# HELP cellcast_kafka_embedded_dropped_total Messages the "
                                "embedded broker deleted before they were consumed (its "
                                "retention: the newest ~5 MiB per partition).\n"
                                "# TYPE cellcast_kafka_embedded_dropped_total counter\n"
                                "cellcast_kafka_embedded_dropped_total %llu\n",
                                (unsigned long long)ks.embedded_dropped);
    }
    evbuffer_add_printf(
        b,
        "# HELP cellcast_snapshots_total Snapshots written, by result.\n# TYPE "
        "cellcast_snapshots_total counter\n"
        "cellcast_snapshots_total{result=\"ok\"} %llu\ncellcast_snapshots_total{result=\"error\"} "
        "%llu\n"
        "# HELP cellcast_snapshot_bytes Size of the last snapshot.\n# TYPE cellcast_snapshot_bytes "
        "gauge\n"
        "cellcast_snapshot_bytes %lld\n"
        "# HELP cellcast_snapshot_duration_seconds Time the last snapshot took.\n"
        "# TYPE cellcast_snapshot_duration_seconds gauge\ncellcast_snapshot_duration_seconds %.6f\n"
        "# HELP cellcast_snapshot_restored_cells Cells restored from the snapshot at start.\n"
        "# TYPE cellcast_snapshot_restored_cells gauge\ncellcast_snapshot_restored_cells %llu\n"
        "# HELP cellcast_snapshot_refused_cells Cell records of the snapshot refused at start "
        "(invalid fields, or a restore that failed); those cells start empty.\n"
        "# TYPE cellcast_snapshot_refused_cells gauge\ncellcast_snapshot_refused_cells %llu\n"
        "# HELP cellcast_snapshot_refused_positions Positions records of the snapshot refused at "
        "start (the offsets come from the group's committed ones).\n"
        "# TYPE cellcast_snapshot_refused_positions gauge\ncellcast_snapshot_refused_positions "
        "%llu\n"
        "# HELP cellcast_reloads_total Reloads (SIGHUP, POST /v1/admin/reload), by result.\n"
        "# TYPE cellcast_reloads_total counter\ncellcast_reloads_total{result=\"ok\"} %llu\n"
        "cellcast_reloads_total{result=\"refused\"} %llu\n",
        (unsigned long long)so->snapshots, (unsigned long long)so->snapshot_errors,
        (long long)so->snapshot_bytes, so->snapshot_seconds, (unsigned long long)so->restored_cells,
        (unsigned long long)so->restore_failed, (unsigned long long)so->positions_refused,
        (unsigned long long)d->reloads_ok, (unsigned long long)d->reloads_failed);
    /* unknown until the first snapshot: no sample rather than a made-up value */
    if (so->snapshot_unix)
        evbuffer_add_printf(b,
                            "# HELP cellcast_snapshot_age_seconds Seconds since the last snapshot "
                            "(absent before the first).\n"
                            "# TYPE cellcast_snapshot_age_seconds gauge\n"
                            "cellcast_snapshot_age_seconds %lld\n",
                            (long long)((int64_t)time(NULL) - so->snapshot_unix));
}

/* The trainer's validation error of the model's mean against the last value's, as the
 * model file records it (absent for a file that does not): a model that loses to the last
 * value is something to alert on before its forecasts are used. */
static void model_quality_metrics(struct evbuffer *b, const CcHparams *hp)
{
    double mae = ccd_model_vs_last(hp, "mae", -1), mse = ccd_model_vs_last(hp, "mse", -1);
    if (isnan(mae) && isnan(mse))
        return;
    metric(b, "cellcast_model_validation_vs_last", "gauge",
           "The model's validation error divided by the last value's (cellcast train; below "
           "1 = better), geometric mean over series and KPIs, by metric.");
    if (!isnan(mae))
        evbuffer_add_printf(b, "cellcast_model_validation_vs_last{metric=\"mae\"} %.6g\n", mae);
    if (!isnan(mse))
        evbuffer_add_printf(b, "cellcast_model_validation_vs_last{metric=\"mse\"} %.6g\n", mse);
    int header = 0;
    for (int f = 0; f < hp->n_features; f++) {
        double r = ccd_model_vs_last(hp, "mae", f);
        if (isnan(r))
            continue;
        if (!header++)
            metric(b, "cellcast_model_validation_mae_vs_last", "gauge",
                   "The model's validation MAE divided by the last value's, by KPI (cellcast "
                   "train; above 1.02 the trainer and the start log warn).");
        evbuffer_add_printf(b, "cellcast_model_validation_mae_vs_last{kpi=\"%s\"} %.6g\n",
                            hp->features[f], r);
    }
}

static int h_metrics(CcdReq *r)
{
    Ccd *d = r->d;
    struct evbuffer *b = r->out;
    const CcdSchedStats *ss = ccd_sched_stats(d->sched);
    const CcdCellsStats *cs = &d->cells->st;
    metric(b, "cellcast_build_info", "gauge", "Version of cellcastd and the model served.");
    evbuffer_add_printf(b, "cellcast_build_info{version=\"%s\",model=\"%s\",blas=\"%s\"} 1\n",
                        CC_VERSION, d->model_name, ccd_host_blas_core());
    model_quality_metrics(b, &d->model->hp);
    metric(b, "cellcast_uptime_seconds", "gauge", "Seconds since start.");
    evbuffer_add_printf(b, "cellcast_uptime_seconds %.3f\n",
                        (double)(cc_now_ns() - d->start_ns) * 1e-9);
    metric(b, "cellcast_ingest_messages_total", "counter", "KPI messages received, by source.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_messages_total{source=\"kafka\"} %llu\n"
                        "cellcast_ingest_messages_total{source=\"http\"} %llu\n",
                        (unsigned long long)d->in.kafka_messages,
                        (unsigned long long)d->in.http_messages);
    metric(b, "cellcast_ingest_bytes_total", "counter", "Bytes of KPI messages, by source.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_bytes_total{source=\"kafka\"} %llu\n"
                        "cellcast_ingest_bytes_total{source=\"http\"} %llu\n",
                        (unsigned long long)d->in.kafka_bytes,
                        (unsigned long long)d->in.http_bytes);
    metric(b, "cellcast_ingest_records_total", "counter", "Valid records decoded.");
    evbuffer_add_printf(b, "cellcast_ingest_records_total %llu\n",
                        (unsigned long long)d->in.records);
    metric(b, "cellcast_ingest_invalid_total", "counter",
           "Refused messages or array elements, by reason (proto/kpi.schema.json).");
    for (int i = 1; i < CC_KPI_N_REASONS; i++)
        evbuffer_add_printf(b, "cellcast_ingest_invalid_total{reason=\"%s\"} %llu\n",
                            cc_kpi_reason_name((enum CcKpiReason)i),
                            (unsigned long long)d->in.invalid[i]);
    metric(b, "cellcast_ingest_unmapped_fields_total", "counter",
           "Message fields that no ingest.fields entry (or model KPI name) maps: dropped.");
    evbuffer_add_printf(b, "cellcast_ingest_unmapped_fields_total %llu\n",
                        (unsigned long long)d->in.unmapped_fields);
    metric(b, "cellcast_ingest_out_of_range_total", "counter",
           "Valid records refused for a time too far from the clock (ingest.max_future_s, "
           "ingest.max_past_s), by reason.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_out_of_range_total{reason=\"future_ts\"} %llu\n"
                        "cellcast_ingest_out_of_range_total{reason=\"past_ts\"} %llu\n",
                        (unsigned long long)d->in.future_ts, (unsigned long long)d->in.past_ts);
    metric(b, "cellcast_ingest_steps_total", "counter",
           "What became of records, by outcome (cells.h ingest rules).");
    evbuffer_add_printf(b,
                        "cellcast_ingest_steps_total{outcome=\"queued\"} %llu\n"
                        "cellcast_ingest_steps_total{outcome=\"duplicate\"} %llu\n"
                        "cellcast_ingest_steps_total{outcome=\"late\"} %llu\n"
                        "cellcast_ingest_steps_total{outcome=\"imputed\"} %llu\n"
                        "cellcast_ingest_steps_total{outcome=\"restart\"} %llu\n"
                        "cellcast_ingest_steps_total{outcome=\"refused_full\"} %llu\n",
                        (unsigned long long)cs->steps_queued, (unsigned long long)cs->duplicates,
                        (unsigned long long)cs->late, (unsigned long long)cs->imputed,
                        (unsigned long long)cs->restarts, (unsigned long long)cs->rejected_full);
    metric(b, "cellcast_ingest_outage_held_steps_total", "counter",
           "Steps of an outage at which the model was fed the cell's last values instead of "
           "the observed zeros (ingest.outage_hold_steps).");
    evbuffer_add_printf(b, "cellcast_ingest_outage_held_steps_total %llu\n",
                        (unsigned long long)cs->held);
    metric(b, "cellcast_ingest_filled_kpis_total", "counter",
           "KPI values absent from a step's messages, filled with the previous value.");
    evbuffer_add_printf(b, "cellcast_ingest_filled_kpis_total %llu\n",
                        (unsigned long long)cs->filled);
    metric(b, "cellcast_ingest_seconds_total", "counter",
           "Event-loop time spent on ingest, by part.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_seconds_total{part=\"parse\"} %.6f\n"
                        "cellcast_ingest_seconds_total{part=\"state\"} %.6f\n",
                        (double)d->in.ns_parse * 1e-9, (double)d->in.ns_state * 1e-9);
    if (d->kafka) {
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        if (ks.lag >= 0) { /* unknown (no watermark yet): no sample */
            metric(b, "cellcast_kafka_lag_messages", "gauge",
                   "Sum of partition lags (absent while unknown).");
            evbuffer_add_printf(b, "cellcast_kafka_lag_messages %lld\n", (long long)ks.lag);
        }
        metric(b, "cellcast_kafka_assigned_partitions", "gauge",
               "Partitions assigned to this daemon.");
        evbuffer_add_printf(b, "cellcast_kafka_assigned_partitions %d\n", ks.assigned_partitions);
        metric(b, "cellcast_kafka_lost_partitions", "gauge",
               "Partitions lost (session expired, e.g. brokers away) whose cells are kept, "
               "unassigned, until the group assigns them again.");
        evbuffer_add_printf(b, "cellcast_kafka_lost_partitions %d\n", ks.lost_partitions);
        metric(b, "cellcast_kafka_events_total", "counter", "Kafka consumer events, by kind.");
        evbuffer_add_printf(b,
                            "cellcast_kafka_events_total{kind=\"commit\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"commit_error\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"rebalance\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"dead_letter\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"dead_letter_error\"} %llu\n",
                            (unsigned long long)ks.commits, (unsigned long long)ks.commit_errors,
                            (unsigned long long)ks.rebalances, (unsigned long long)ks.dead_letters,
                            (unsigned long long)ks.dead_letter_errors);
        metric(b, "cellcast_kafka_consumer_errors_total", "counter",
               "Consumer and broker errors librdkafka reported, by error code (its name; "
               "\"other\" past the first 16 codes).");
        for (int i = 0; i < ks.n_error_codes; i++)
            evbuffer_add_printf(b, "cellcast_kafka_consumer_errors_total{code=\"%s\"} %llu\n",
                                ks.errors[i].name, (unsigned long long)ks.errors[i].n);
        if (ks.errors_other)
            evbuffer_add_printf(b, "cellcast_kafka_consumer_errors_total{code=\"other\"} %llu\n",
                                (unsigned long long)ks.errors_other);
    }
    metric(b, "cellcast_batch_size", "histogram", "Cell-steps per stepped batch.");
    hist_out(b, "cellcast_batch_size", &ss->batch_size);
    metric(b, "cellcast_step_latency_seconds", "histogram",
           "Worker time to step and publish one batch.");
    hist_out(b, "cellcast_step_latency_seconds", &ss->step_seconds);
    metric(b, "cellcast_forecast_delay_seconds", "histogram",
           "From the first record of a batch to its forecasts published.");
    hist_out(b, "cellcast_forecast_delay_seconds", &ss->delay_seconds);
    metric(b, "cellcast_loop_lag_seconds", "histogram",
           "How late the 10 ms cron ran: stalls of the event loop (HTTP waits as long).");
    hist_out(b, "cellcast_loop_lag_seconds", &d->loop_lag);
    metric(b, "cellcast_engine_seconds_total", "counter", "Engine time by part (cc_engine_stats).");
    evbuffer_add_printf(b,
                        "cellcast_engine_seconds_total{part=\"dense\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"attention\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"rebuild\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"other\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"publish\"} %.6f\n",
                        ss->engine.ns_dense * 1e-9, ss->engine.ns_attention * 1e-9,
                        ss->engine.ns_rebuild * 1e-9, ss->engine.ns_other * 1e-9,
                        ss->ns_publish * 1e-9);
    metric(b, "cellcast_steps_total", "counter", "Cell-steps run by the engine.");
    evbuffer_add_printf(b, "cellcast_steps_total %llu\n", (unsigned long long)ss->items);
    metric(b, "cellcast_steps_refused_total", "counter",
           "Cell-steps the engine refused or lost to ENOMEM.");
    evbuffer_add_printf(b, "cellcast_steps_refused_total %llu\n",
                        (unsigned long long)(ss->refused + ss->enomem));
    metric(b, "cellcast_pending_steps", "gauge", "Cell-steps waiting in the open batch.");
    evbuffer_add_printf(b, "cellcast_pending_steps %d\n", ccd_sched_pending(d->sched));
    metric(b, "cellcast_cells", "gauge", "Resident cells.");
    evbuffer_add_printf(b, "cellcast_cells %zu\n", d->cells->n_cells);
    metric(b, "cellcast_cells_events_total", "counter", "Cell table events, by kind.");
    evbuffer_add_printf(b,
                        "cellcast_cells_events_total{kind=\"created\"} %llu\n"
                        "cellcast_cells_events_total{kind=\"evicted\"} %llu\n"
                        "cellcast_cells_events_total{kind=\"released\"} %llu\n",
                        (unsigned long long)cs->created, (unsigned long long)cs->evictions,
                        (unsigned long long)cs->released);
    CcdHandoverStats hs;
    ccd_handover_stats(d, &hs);
    metric(b, "cellcast_handover_cells_total", "counter",
           "Cells released because their partition went to another member, by whether their "
           "state went with them on the state topic (handover.h).");
    evbuffer_add_printf(b,
                        "cellcast_handover_cells_total{how=\"state_topic\"} %llu\n"
                        "cellcast_handover_cells_total{how=\"older_state\"} %llu\n"
                        "cellcast_handover_cells_total{how=\"cold\"} %llu\n",
                        (unsigned long long)hs.cells_sent, (unsigned long long)hs.cells_behind,
                        (unsigned long long)hs.cells_cold);
    /* records anyone with write access to these topics can forge (docs/operations.md) */
    metric(b, "cellcast_state_records_refused_total", "counter",
           "State-topic records refused at a takeover (malformed, another model, a key that is "
           "not their cell, another partition, steps ahead of the clock); those cells start "
           "from the KPI topic.");
    evbuffer_add_printf(b, "cellcast_state_records_refused_total %llu\n",
                        (unsigned long long)hs.records_refused);
    metric(b, "cellcast_state_records_misplaced_total", "counter",
           "State-topic records restored from a partition kafka.partitioner does not map their "
           "cell to (the KPI producers use another partitioner, or the record is forged).");
    evbuffer_add_printf(b, "cellcast_state_records_misplaced_total %llu\n",
                        (unsigned long long)hs.records_misplaced);
    CcdClusterStats cls;
    ccd_cluster_stats(d->cluster, &cls);
    metric(b, "cellcast_cluster_member_records_invalid_total", "counter",
           "Members-topic records refused (malformed, an address not of the advertised form, "
           "ts_ms ahead of the clock, a key that is not their client id).");
    evbuffer_add_printf(b, "cellcast_cluster_member_records_invalid_total %llu\n",
                        (unsigned long long)cls.invalid);
    metric(b, "cellcast_kv_bytes", "gauge", "KV cache bytes of the resident cells.");
    evbuffer_add_printf(b, "cellcast_kv_bytes %zu\n",
                        d->cells->n_cells * cc_engine_kv_bytes_per_cell(d->engine));
    metric(b, "cellcast_cell_state_bytes", "gauge",
           "All per-cell state bytes (rings, KV, ours, long histories); limits.kv_budget_mb.");
    evbuffer_add_printf(b, "cellcast_cell_state_bytes %zu\n", ccd_cells_bytes(d->cells));
    metric(b, "cellcast_cell_history_bytes", "gauge",
           "Bytes of the cells' long histories (history.depth), included in the state bytes.");
    evbuffer_add_printf(b, "cellcast_cell_history_bytes %zu\n", d->cells->hist_bytes);
    atomic_counter(b, "cellcast_cell_history_failed_total",
                   "Steps not recorded in a long history for want of memory.",
                   &d->cells->hist_failed);
    atomic_counter(b, "cellcast_interval_scored_total",
                   "Matured forecasts (KPI, horizon step) scored against their served P10-P90 "
                   "interval while forecast.interval_adapt is on.",
                   &d->cells->interval_scored);
    atomic_counter(b, "cellcast_interval_missed_total",
                   "Of those, the truths outside the interval: the realised coverage is 1 - "
                   "missed / scored (target 0.8).",
                   &d->cells->interval_missed);
    metric(b, "cellcast_rss_bytes", "gauge", "Resident set size of the process.");
    evbuffer_add_printf(b, "cellcast_rss_bytes %lld\n", ccd_host_rss_bytes());
    alerts_metrics(d, b);
    ccd_topology_metrics(d, b);
    ccd_incidents_metrics(d, b);
    ccd_silences_metrics(d, b);
    ccd_http_metrics(d, b);
    ccd_models_metrics(d, b);
    ccd_process_metrics(b);
    return ccd_text(r, 200, "text/plain; version=0.0.4; charset=utf-8");
}

static int h_info(CcdReq *r)
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
    json_object_set_new(o, "config_file", json_string(d->config_path ? d->config_path : ""));
    json_t *mo = json_pack("{s:s, s:s, s:i, s:I, s:i}", "name", d->model_name, "path",
                           d->cfg.model_path, "features", d->model->hp.n_features, "step_seconds",
                           (json_int_t)S_of(d), "horizon", d->model->hp.horizon);
    /* the trainer's verdict against the last value, for the dashboard's model tile */
    double vs_last = ccd_model_vs_last(&d->model->hp, "mae", -1);
    if (mo && !isnan(vs_last))
        json_object_set_new(mo, "val_mae_vs_last", json_real(vs_last));
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
                        json_pack("{s:I, s:s}", "rss_bytes", (json_int_t)ccd_host_rss_bytes(),
                                  "blas", ccd_host_blas_core()));
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
            evbuffer_add_printf(r->out, "%s:%s\n", k2, t ? t : json_string_value(v2));
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
        evbuffer_add_printf(r->out, "%s:%s\n", key, t ? t : json_string_value(v));
        free(t);
    }
    json_decref(o);
    return ccd_text(r, 200, "text/plain; charset=utf-8");
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
        "s:I, s:I, s:s, s:o}",
        "format", cc_hparams_format(hp), "name", hp->name, "version", hp->version, "trained_on",
        hp->trained_on, "created_at", hp->created_at, "features", f, "patch_len", hp->patch_len,
        "n_patches", hp->n_patches, "norm_window", hp->norm_window, "d_model", hp->d_model,
        "n_heads", hp->n_heads, "n_layers", hp->n_layers, "d_ff", hp->d_ff, "horizon", hp->horizon,
        "linear_window", hp->linear_window, "step_seconds", (json_int_t)hp->step_seconds,
        "tz_offset_s", (json_int_t)hp->tz_offset_s, "n_params", (json_int_t)r->d->model->n_params,
        "kv_bytes_per_cell", (json_int_t)cc_engine_kv_bytes_per_cell(r->d->engine), "path",
        r->d->cfg.model_path, "metadata", meta);
    json_object_set_new(o, "serving", ccd_models_json(r->d)); /* hash, learner's record */
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
    /* the same reply until a record, a step or the cell set moves the table's version; a
     * page that polls gets a 304 between (a live feed moves it at every record) */
    int rc = ccd_reply_cached(
        r, ccd_fold(ccd_fold(ccd_version_seed(d), d->cells->version), d->topology_loads));
    if (rc)
        return rc;
    ListCtx l = {.after = ccd_query(r, "after"), .topo = d->topology};
    l.f = (CcdTopoFilter){ccd_query(r, "site"), ccd_query(r, "region"), ccd_query(r, "sector")};
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

/* The forecast object of cell c into out, after sep, with a newline after it when sep is
 * NULL: from the reply cache when the parameters are the defaults, else rendered. 0, 1 when
 * the cell has no forecast yet (nothing written), or -ENOMEM. */
int ccd_forecast_into(CcdReq *r, CcdCell *c, long long horizon, double level, uint64_t mask,
                      const char *sep, struct evbuffer *out)
{
    Ccd *d = r->d;
    const CcHparams *hp = &d->model->hp;
    const int F = hp->n_features, HZ = hp->horizon;
    const int nl = !sep;
    const uint64_t all = F >= 64 ? ~0ULL : (1ULL << F) - 1;
    double blo[CC_MAX_FEATURES], bhi[CC_MAX_FEATURES];
    ccd_kpi_bounds(d, blo, bhi);
    uint64_t bkey = 1469598103934665603ULL; /* FNV-1a of the bounds: a reload changes them */
    for (int f = 0; f < F; f++) {
        uint64_t u[2];
        memcpy(&u[0], &blo[f], 8);
        memcpy(&u[1], &bhi[f], 8);
        bkey = ccd_fold(ccd_fold(bkey, u[0]), u[1]);
    }
    const int cacheable = horizon == HZ && mask == all && level == d->cfg.forecast_level;
    const int adapt = d->cfg.forecast_interval_adapt;
    FcSlot *slot = &fc_cache[c->serial % CCD_FC_CACHE];
    float *y = ccd_scratch_floats((size_t)F * (size_t)HZ * 3 + 2 * (size_t)F);
    if (!y)
        return -ENOMEM;
    float *mu = y + (size_t)F * HZ * 2, *sigma = mu + F, *scale = sigma + F;
    int valid, have_scale = 0;
    int64_t t;
    uint64_t seq;
    pthread_mutex_lock(&d->cells->pub_lock);
    valid = c->pub.valid;
    t = c->pub.step;
    seq = c->pub.seq;
    if (valid && cacheable && slot->body && slot->serial == c->serial && slot->seq == seq &&
        slot->level == level && slot->adapt == adapt && slot->bounds == bkey &&
        !strcmp(slot->model, d->model_name)) {
        pthread_mutex_unlock(&d->cells->pub_lock);
        if (sep)
            evbuffer_add(out, sep, strlen(sep));
        ccd_body_add(out, slot->body, slot->body->len - !nl);
        return 0;
    }
    if (valid) {
        memcpy(y, c->pub.y, (size_t)F * HZ * 2 * sizeof(float));
        memcpy(mu, c->pub.mu, (size_t)F * sizeof(float));
        memcpy(sigma, c->pub.sigma, (size_t)F * sizeof(float));
        if ((have_scale = adapt && c->pub.scale))
            memcpy(scale, c->pub.scale, (size_t)F * HZ * sizeof(float));
    }
    pthread_mutex_unlock(&d->cells->pub_lock);
    if (!valid)
        return 1;
    CcForecast fc = {.valid = 1,
                     .step = t,
                     .n_features = F,
                     .horizon = HZ,
                     .y = y,
                     .mu = mu,
                     .sigma = sigma,
                     .sd_scale =
                         cc_model_sd_scale(d->model)}; /* tx/3 calibration of the served sd */
    const double z = ccd_level_z(level);
    const int64_t S = hp->step_seconds;
    /* built by hand: this is the hot route (dashboards poll it), so no jansson tree */
    static CcdSb sb;
    sb.n = 0;
    sb.oom = 0;
    ccd_sb_str(&sb, "{\"cell\":");
    ccd_sb_jstr(&sb, c->id);
    ccd_sb_str(&sb, ",\"model\":");
    ccd_sb_jstr(&sb, d->model_name);
    ccd_sb_str(&sb, ",\"step_seconds\":");
    ccd_sb_int(&sb, S);
    ccd_sb_str(&sb, ",\"observed_step\":");
    ccd_sb_int(&sb, t);
    ccd_sb_str(&sb, ",\"observed_ts\":");
    ccd_sb_ts(&sb, t * S);
    ccd_sb_str(&sb, ",\"level\":");
    ccd_sb_num(&sb, level);
    ccd_sb_str(&sb, ",\"z\":");
    ccd_sb_num(&sb, z);
    ccd_sb_str(&sb, ",\"horizon\":");
    ccd_sb_int(&sb, horizon);
    ccd_sb_str(&sb, ",\"kpis\":[");
    int first = 1;
    for (int f = 0; f < F; f++)
        if (mask >> f & 1) {
            if (!first)
                ccd_sb_add(&sb, ",", 1);
            ccd_sb_jstr(&sb, hp->features[f]);
            first = 0;
        }
    ccd_sb_str(&sb, "],\"forecast\":[");
    for (int k = 0; k < horizon; k++) {
        ccd_sb_str(&sb, k ? ",{\"step\":" : "{\"step\":");
        ccd_sb_int(&sb, t + 1 + k);
        ccd_sb_str(&sb, ",\"ts\":");
        ccd_sb_ts(&sb, (t + 1 + k) * S);
        ccd_sb_str(&sb, ",\"values\":{");
        first = 1;
        for (int f = 0; f < F; f++) {
            if (!(mask >> f & 1))
                continue;
            double mean, sd;
            cc_forecast_point(&fc, f, k, &mean, &sd);
            /* sd stays the model's (cellcast forward compares with it); the band is the
             * served one (interval.h) */
            const double w = z * sd * (have_scale ? scale[(size_t)f * HZ + k] : 1.0);
            if (!first)
                ccd_sb_add(&sb, ",", 1);
            ccd_sb_jstr(&sb, hp->features[f]);
            ccd_sb_str(&sb, ":{\"mean\":");
            ccd_sb_num(&sb, fmin(fmax(mean, blo[f]), bhi[f]));
            ccd_sb_str(&sb, ",\"lower\":");
            ccd_sb_num(&sb, fmin(fmax(mean - w, blo[f]), bhi[f]));
            ccd_sb_str(&sb, ",\"upper\":");
            ccd_sb_num(&sb, fmin(fmax(mean + w, blo[f]), bhi[f]));
            ccd_sb_str(&sb, ",\"sd\":");
            ccd_sb_num(&sb, sd);
            if (adapt) {
                ccd_sb_str(&sb, ",\"interval_scale\":");
                ccd_sb_num(&sb, have_scale ? scale[(size_t)f * HZ + k] : 1.0);
            }
            ccd_sb_add(&sb, "}", 1);
            first = 0;
        }
        ccd_sb_add(&sb, "}}", 2);
    }
    ccd_sb_add(&sb, "]}\n", 3);
    if (sb.oom)
        return -ENOMEM;
    if (sep)
        evbuffer_add(out, sep, strlen(sep));
    CcdBody *body = cacheable ? ccd_body_new(sb.p, sb.n) : NULL; /* the slot's reference */
    if (!body) { /* not the default reply (or no memory for the cache): reply with a copy */
        evbuffer_add(out, sb.p, sb.n - !nl);
        return 0;
    }
    ccd_body_unref(slot->body);
    slot->body = body;
    slot->serial = c->serial;
    slot->seq = seq;
    slot->level = level;
    slot->adapt = adapt;
    slot->bounds = bkey;
    snprintf(slot->model, sizeof slot->model, "%s", d->model_name);
    ccd_body_add(out, body, body->len - !nl);
    return 0;
}

static int h_forecast(CcdReq *r)
{
    Ccd *d = r->d;
    const CcHparams *hp = &d->model->hp;
    const int HZ = hp->horizon;
    CcdCell *c;
    int rc = ccd_find_cell(r, &c);
    if (rc < 0)
        return -rc;
    long long horizon = HZ;
    if ((rc = ccd_query_int(r, "horizon", &horizon)) == -2)
        return ccd_problem(r, 400, "bad-parameter", "horizon must be an integer");
    if (horizon < 1 || horizon > HZ)
        return ccd_problem(r, 422, "bad-parameter", "horizon must be in [1, %d], got %lld", HZ,
                           horizon);
    double level;
    if ((rc = ccd_query_level(r, &level)))
        return rc;
    uint64_t mask;
    if ((rc = ccd_query_kpis(r, &mask)))
        return rc;
    /* gzip costs ~8x the cached reply: gzipped replies are cached per published forecast */
    if (ccd_accepts_gzip(r) &&
        (rc = ccd_reply_cached(r, ccd_cell_version(d, c, ccd_version_seed(d)))))
        return rc;
    rc = ccd_forecast_into(r, c, horizon, level, mask, NULL, r->out);
    if (rc < 0)
        return ccd_problem(r, 500, "internal", "out of memory");
    if (rc == 1) {
        r->retry_after = 5;
        return ccd_problem(r, 503, "no-forecast-yet",
                           "cell '%s' has no forecast yet: it needs %d consecutive steps (it has "
                           "%llu)",
                           c->id, hp->patch_len, (unsigned long long)c->n_steps);
    }
    return ccd_text(r, 200, "application/json");
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
    struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
    size_t len = evbuffer_get_length(in);
    if ((int64_t)len > d->cfg.http_max_body_bytes)
        return ccd_problem(r, 413, "body-too-large",
                           "the body has %zu bytes; http.max_body_bytes is %lld", len,
                           (long long)d->cfg.http_max_body_bytes);
    if (!len)
        return ccd_problem(r, 400, "empty-body", "POST a KPI message (proto/kpi.schema.json)");
    if (d->stopping || ccd_sched_pending(d->sched) >= ccd_backpressure(d)) {
        r->retry_after = 1;
        return ccd_problem(r, 503, "overloaded", "ingest queue full (%d pending steps); retry",
                           ccd_sched_pending(d->sched));
    }
    const unsigned char *buf = evbuffer_pullup(in, -1);
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
        json_array_append_new(errs, json_pack("{s:i, s:s, s:s}", "element", kb.errors[i].element,
                                              "reason", cc_kpi_reason_name(kb.errors[i].reason),
                                              "message", kb.errors[i].message));
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

/* clang-format off */
const CcdRoute ccd_routes[] = {
    {"/healthz", EVHTTP_REQ_GET, h_healthz, "liveness"},
    {"/", EVHTTP_REQ_GET, ccd_h_dashboard_index, "the dashboard (web/)"},
    {"/index.html", EVHTTP_REQ_GET, ccd_h_dashboard_index, "the dashboard (web/)"},
    {"/assets/{id}", EVHTTP_REQ_GET, ccd_h_dashboard_asset, "the dashboard's hashed assets"},
    {"/readyz", EVHTTP_REQ_GET, h_readyz, "readiness: model loaded, consumer assigned"},
    {"/metrics", EVHTTP_REQ_GET, h_metrics, "Prometheus metrics"},
    {"/v1/info", EVHTTP_REQ_GET, h_info, "human-oriented status"},
    {"/v1/config", EVHTTP_REQ_GET, h_config, "the configuration in effect"},
    {"/v1/model", EVHTTP_REQ_GET, h_model, "the model served"},
    {"/v1/cells", EVHTTP_REQ_GET, h_cells, "cells, paged"},
    {"/v1/cells/{id}", EVHTTP_REQ_GET, h_cell, "one cell"},
    {"/v1/cells/{id}/forecast", EVHTTP_REQ_GET, h_forecast, "the cell's forecast"},
    {"/v1/cells/{id}/history", EVHTTP_REQ_GET, ccd_h_history, "the cell's stored raw steps"},
    {"/v1/cells/{id}/attention", EVHTTP_REQ_GET, h_attention, "the last step's attention"},
    {"/v1/kpis", EVHTTP_REQ_POST, h_post_kpis, "KPI messages without Kafka"},
    {"/v1/alerts", EVHTTP_REQ_GET, ccd_h_alerts, "alert transitions, paged"},
    {"/v1/alerts/firing", EVHTTP_REQ_GET, ccd_h_alerts_firing, "alerts firing now, all cells, paged"},
    {"/v1/cells/{id}/alerts", EVHTTP_REQ_GET, ccd_h_cell_alerts, "the cell's alert transitions"},
    {"/v1/cells/{id}/scores", EVHTTP_REQ_GET, ccd_h_cell_scores, "the cell's anomaly scores"},
    {"/v1/incidents", EVHTTP_REQ_GET, ccd_h_incidents, "incidents (alerts grouped by site), firing and recent"},
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
