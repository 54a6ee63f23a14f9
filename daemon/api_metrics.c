/* api_metrics.c — GET /metrics: every counter, gauge and histogram of the daemon in
 * Prometheus text (version 0.0.4). The modules that keep their own figures write their own
 * lines (ccd_*_metrics); the rest are read here from their stats structs. Loop thread only. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alertmanager.h"
#include "alerts.h"
#include "api_metrics.h"
#include "cc_build_info.h"
#include "cc_time.h"
#include "cluster.h"
#include "feedback.h"
#include "handover.h"
#include "histogram.h"
#include "host.h"
#include "incidents.h"
#include "models.h"
#include "procmetrics.h"
#include "prom.h"
#include "settings.h"
#include "silences.h"
#include "state.h"
#include "topology.h"

/* A counter the scheduler's worker adds to (atomically, relaxed). */
static void atomic_counter(struct evbuffer *b, const char *name, const char *help,
                           const uint64_t *v)
{
    ccd_prom_metric(b, name, "counter", help);
    evbuffer_add_printf(b, "%s %llu\n", name,
                        (unsigned long long)__atomic_load_n(v, __ATOMIC_RELAXED));
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
    ccd_prom_metric(
        b, "cellcast_model_validation_vs_last", "gauge",
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
            ccd_prom_metric(
                b, "cellcast_model_validation_mae_vs_last", "gauge",
                "The model's validation MAE divided by the last value's, by KPI (cellcast "
                "train; above 1.02 the trainer and the start log warn).");
        evbuffer_add_printf(b, "cellcast_model_validation_mae_vs_last{kpi=\"");
        ccd_prom_label(b, hp->features[f]);
        evbuffer_add_printf(b, "\"} %.6g\n", r);
    }
}

/* The interval counts by KPI of the model in service: the target (0.8) holds per KPI, not
 * only pooled, and a KPI whose scale cannot follow its errors shows here first. */
static void interval_kpi_metrics(struct evbuffer *b, const CcdCells *t, const CcHparams *hp)
{
    static const char *const names[2] = {"cellcast_interval_kpi_scored_total",
                                         "cellcast_interval_kpi_missed_total"};
    static const char *const help[2] = {
        "Matured forecasts (horizon steps) scored against their served P10-P90 interval, by "
        "KPI (the model in service's).",
        "Of those, the truths outside the interval, by KPI."};
    const int F = t->n_features < hp->n_features ? t->n_features : hp->n_features;
    for (int v = 0; v < 2; v++) {
        const uint64_t *n = v ? t->interval_kpi_missed : t->interval_kpi_scored;
        ccd_prom_metric(b, names[v], "counter", help[v]);
        for (int f = 0; f < F; f++) {
            evbuffer_add_printf(b, "%s{kpi=\"", names[v]);
            ccd_prom_label(b, hp->features[f]);
            evbuffer_add_printf(b, "\"} %llu\n",
                                (unsigned long long)__atomic_load_n(&n[f], __ATOMIC_RELAXED));
        }
    }
}

int ccd_h_metrics(CcdReq *r)
{
    Ccd *d = r->d;
    struct evbuffer *b = r->out;
    const CcdSchedStats *ss = ccd_sched_stats(d->sched);
    const CcdCellsStats *cs = &d->cells->st;
    ccd_prom_metric(b, "cellcast_build_info", "gauge",
                    "Version of cellcastd and the model served.");
    evbuffer_add_printf(b, "cellcast_build_info{version=\"%s\",model=\"", CC_VERSION);
    ccd_prom_label(b, d->model_name);
    evbuffer_add_printf(b, "\",blas=\"%s\"} 1\n", cc_host_blas_core());
    model_quality_metrics(b, &d->model->hp);
    ccd_prom_metric(b, "cellcast_uptime_seconds", "gauge", "Seconds since start.");
    evbuffer_add_printf(b, "cellcast_uptime_seconds %.3f\n",
                        (double)(cc_now_ns() - d->start_ns) * 1e-9);
    ccd_prom_metric(b, "cellcast_ingest_messages_total", "counter",
                    "KPI messages received, by source.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_messages_total{source=\"kafka\"} %llu\n"
                        "cellcast_ingest_messages_total{source=\"http\"} %llu\n",
                        (unsigned long long)d->in.kafka_messages,
                        (unsigned long long)d->in.http_messages);
    ccd_prom_metric(b, "cellcast_ingest_bytes_total", "counter",
                    "Bytes of KPI messages, by source.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_bytes_total{source=\"kafka\"} %llu\n"
                        "cellcast_ingest_bytes_total{source=\"http\"} %llu\n",
                        (unsigned long long)d->in.kafka_bytes,
                        (unsigned long long)d->in.http_bytes);
    ccd_prom_metric(b, "cellcast_ingest_records_total", "counter", "Valid records decoded.");
    evbuffer_add_printf(b, "cellcast_ingest_records_total %llu\n",
                        (unsigned long long)d->in.records);
    ccd_prom_metric(b, "cellcast_ingest_invalid_total", "counter",
                    "Refused messages or array elements, by reason (proto/kpi.schema.json).");
    for (int i = 1; i < CC_KPI_N_REASONS; i++)
        evbuffer_add_printf(b, "cellcast_ingest_invalid_total{reason=\"%s\"} %llu\n",
                            cc_kpi_reason_name((enum CcKpiReason)i),
                            (unsigned long long)d->in.invalid[i]);
    ccd_prom_metric(
        b, "cellcast_ingest_unmapped_fields_total", "counter",
        "Message fields that no ingest.fields entry (or model KPI name) maps: dropped.");
    evbuffer_add_printf(b, "cellcast_ingest_unmapped_fields_total %llu\n",
                        (unsigned long long)d->in.unmapped_fields);
    ccd_prom_metric(b, "cellcast_ingest_out_of_range_total", "counter",
                    "Valid records refused for a time too far from the clock (ingest.max_future_s, "
                    "ingest.max_past_s), by reason.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_out_of_range_total{reason=\"future_ts\"} %llu\n"
                        "cellcast_ingest_out_of_range_total{reason=\"past_ts\"} %llu\n",
                        (unsigned long long)d->in.future_ts, (unsigned long long)d->in.past_ts);
    ccd_prom_metric(b, "cellcast_ingest_steps_total", "counter",
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
    ccd_prom_metric(
        b, "cellcast_ingest_outage_held_steps_total", "counter",
        "Steps of an outage at which the model was fed the cell's last values instead of "
        "the observed zeros (ingest.outage_hold_steps).");
    evbuffer_add_printf(b, "cellcast_ingest_outage_held_steps_total %llu\n",
                        (unsigned long long)cs->held);
    ccd_prom_metric(b, "cellcast_ingest_filled_kpis_total", "counter",
                    "KPI values absent from a step's messages, filled with the previous value.");
    evbuffer_add_printf(b, "cellcast_ingest_filled_kpis_total %llu\n",
                        (unsigned long long)cs->filled);
    ccd_prom_metric(b, "cellcast_ingest_seconds_total", "counter",
                    "Event-loop time spent on ingest, by part.");
    evbuffer_add_printf(b,
                        "cellcast_ingest_seconds_total{part=\"parse\"} %.6f\n"
                        "cellcast_ingest_seconds_total{part=\"state\"} %.6f\n",
                        (double)d->in.ns_parse * 1e-9, (double)d->in.ns_state * 1e-9);
    if (d->kafka) {
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        if (ks.lag >= 0) { /* unknown (no watermark yet): no sample */
            ccd_prom_metric(b, "cellcast_kafka_lag_messages", "gauge",
                            "Sum of partition lags (absent while unknown).");
            evbuffer_add_printf(b, "cellcast_kafka_lag_messages %lld\n", (long long)ks.lag);
        }
        ccd_prom_metric(b, "cellcast_kafka_assigned_partitions", "gauge",
                        "Partitions assigned to this daemon.");
        evbuffer_add_printf(b, "cellcast_kafka_assigned_partitions %d\n", ks.assigned_partitions);
        ccd_prom_metric(
            b, "cellcast_kafka_lost_partitions", "gauge",
            "Partitions lost (session expired, e.g. brokers away) whose cells are kept, "
            "unassigned, until the group assigns them again.");
        evbuffer_add_printf(b, "cellcast_kafka_lost_partitions %d\n", ks.lost_partitions);
        ccd_prom_metric(b, "cellcast_kafka_events_total", "counter",
                        "Kafka consumer events, by kind.");
        evbuffer_add_printf(b,
                            "cellcast_kafka_events_total{kind=\"commit\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"commit_error\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"rebalance\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"dead_letter\"} %llu\n"
                            "cellcast_kafka_events_total{kind=\"dead_letter_error\"} %llu\n",
                            (unsigned long long)ks.commits, (unsigned long long)ks.commit_errors,
                            (unsigned long long)ks.rebalances, (unsigned long long)ks.dead_letters,
                            (unsigned long long)ks.dead_letter_errors);
        ccd_prom_metric(b, "cellcast_kafka_consumer_errors_total", "counter",
                        "Consumer and broker errors librdkafka reported, by error code (its name; "
                        "\"other\" past the first 16 codes).");
        for (int i = 0; i < ks.n_error_codes; i++)
            evbuffer_add_printf(b, "cellcast_kafka_consumer_errors_total{code=\"%s\"} %llu\n",
                                ks.errors[i].name, (unsigned long long)ks.errors[i].n);
        if (ks.errors_other)
            evbuffer_add_printf(b, "cellcast_kafka_consumer_errors_total{code=\"other\"} %llu\n",
                                (unsigned long long)ks.errors_other);
    }
    ccd_prom_metric(b, "cellcast_batch_size", "histogram", "Cell-steps per stepped batch.");
    ccd_hist_write(b, "cellcast_batch_size", &ss->batch_size);
    ccd_prom_metric(b, "cellcast_step_latency_seconds", "histogram",
                    "Worker time to step and publish one batch.");
    ccd_hist_write(b, "cellcast_step_latency_seconds", &ss->step_seconds);
    ccd_prom_metric(b, "cellcast_forecast_delay_seconds", "histogram",
                    "From the first record of a batch to its forecasts published.");
    ccd_hist_write(b, "cellcast_forecast_delay_seconds", &ss->delay_seconds);
    ccd_prom_metric(b, "cellcast_loop_lag_seconds", "histogram",
                    "How late the 10 ms cron ran: stalls of the event loop (HTTP waits as long).");
    ccd_hist_write(b, "cellcast_loop_lag_seconds", &d->loop_lag);
    ccd_prom_metric(b, "cellcast_engine_seconds_total", "counter",
                    "Engine time by part (cc_engine_stats).");
    evbuffer_add_printf(b,
                        "cellcast_engine_seconds_total{part=\"dense\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"attention\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"rebuild\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"other\"} %.6f\n"
                        "cellcast_engine_seconds_total{part=\"publish\"} %.6f\n",
                        ss->engine.ns_dense * 1e-9, ss->engine.ns_attention * 1e-9,
                        ss->engine.ns_rebuild * 1e-9, ss->engine.ns_other * 1e-9,
                        ss->ns_publish * 1e-9);
    ccd_prom_metric(b, "cellcast_steps_total", "counter", "Cell-steps run by the engine.");
    evbuffer_add_printf(b, "cellcast_steps_total %llu\n", (unsigned long long)ss->items);
    ccd_prom_metric(b, "cellcast_steps_refused_total", "counter",
                    "Cell-steps the engine refused or lost to ENOMEM.");
    evbuffer_add_printf(b, "cellcast_steps_refused_total %llu\n",
                        (unsigned long long)(ss->refused + ss->enomem));
    ccd_prom_metric(b, "cellcast_pending_steps", "gauge", "Cell-steps waiting in the open batch.");
    evbuffer_add_printf(b, "cellcast_pending_steps %d\n", ccd_sched_pending(d->sched));
    ccd_prom_metric(b, "cellcast_cells", "gauge", "Resident cells.");
    evbuffer_add_printf(b, "cellcast_cells %zu\n", d->cells->n_cells);
    ccd_prom_metric(b, "cellcast_cells_events_total", "counter", "Cell table events, by kind.");
    evbuffer_add_printf(b,
                        "cellcast_cells_events_total{kind=\"created\"} %llu\n"
                        "cellcast_cells_events_total{kind=\"evicted\"} %llu\n"
                        "cellcast_cells_events_total{kind=\"released\"} %llu\n",
                        (unsigned long long)cs->created, (unsigned long long)cs->evictions,
                        (unsigned long long)cs->released);
    CcdHandoverStats hs;
    ccd_handover_stats(d, &hs);
    ccd_prom_metric(
        b, "cellcast_handover_cells_total", "counter",
        "Cells released because their partition went to another member, by whether their "
        "state went with them on the state topic (handover.h).");
    evbuffer_add_printf(b,
                        "cellcast_handover_cells_total{how=\"state_topic\"} %llu\n"
                        "cellcast_handover_cells_total{how=\"older_state\"} %llu\n"
                        "cellcast_handover_cells_total{how=\"cold\"} %llu\n",
                        (unsigned long long)hs.cells_sent, (unsigned long long)hs.cells_behind,
                        (unsigned long long)hs.cells_cold);
    /* records anyone with write access to these topics can forge (docs/operations.md) */
    ccd_prom_metric(
        b, "cellcast_state_records_refused_total", "counter",
        "State-topic records refused at a takeover (malformed, another model, a key that is "
        "not their cell, another partition, steps ahead of the clock); those cells start "
        "from the KPI topic.");
    evbuffer_add_printf(b, "cellcast_state_records_refused_total %llu\n",
                        (unsigned long long)hs.records_refused);
    ccd_prom_metric(
        b, "cellcast_state_records_misplaced_total", "counter",
        "State-topic records restored from a partition kafka.partitioner does not map their "
        "cell to (the KPI producers use another partitioner, or the record is forged).");
    evbuffer_add_printf(b, "cellcast_state_records_misplaced_total %llu\n",
                        (unsigned long long)hs.records_misplaced);
    CcdClusterStats cls;
    ccd_cluster_stats(d->cluster, &cls);
    ccd_prom_metric(
        b, "cellcast_cluster_member_records_invalid_total", "counter",
        "Members-topic records refused (malformed, an address not of the advertised form, "
        "ts_ms ahead of the clock, a key that is not their client id).");
    evbuffer_add_printf(b, "cellcast_cluster_member_records_invalid_total %llu\n",
                        (unsigned long long)cls.invalid);
    ccd_prom_metric(b, "cellcast_kv_bytes", "gauge", "KV cache bytes of the resident cells.");
    evbuffer_add_printf(b, "cellcast_kv_bytes %zu\n",
                        d->cells->n_cells * cc_engine_kv_bytes_per_cell(d->engine));
    ccd_prom_metric(
        b, "cellcast_cell_state_bytes", "gauge",
        "All per-cell state bytes (rings, KV, ours, long histories); limits.kv_budget_mb.");
    evbuffer_add_printf(b, "cellcast_cell_state_bytes %zu\n", ccd_cells_bytes(d->cells));
    ccd_prom_metric(
        b, "cellcast_cell_history_bytes", "gauge",
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
    interval_kpi_metrics(b, d->cells, &d->model->hp);
    atomic_counter(b, "cellcast_interval_scales_refused_total",
                   "Cell records (snapshot file, state topic) whose interval scales were refused "
                   "(not finite, outside the clamp, another KPI x horizon shape): the cell was "
                   "restored at scale 1.",
                   &d->cells->interval_refused);
    ccd_prom_metric(b, "cellcast_rss_bytes", "gauge", "Resident set size of the process.");
    evbuffer_add_printf(b, "cellcast_rss_bytes %lld\n", cc_host_rss_bytes());
    alerts_metrics(d, b);
    ccd_topology_metrics(d, b);
    ccd_incidents_metrics(d, b);
    ccd_silences_metrics(d, b);
    ccd_am_metrics(d, b);
    ccd_fb_metrics(d, b);
    ccd_http_metrics(d, b);
    ccd_models_metrics(d, b);
    ccd_process_metrics(b);
    return ccd_text(r, 200, "text/plain; version=0.0.4; charset=utf-8");
}
