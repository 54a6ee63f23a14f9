/*
 * cellcastd.h — the daemon's context, shared by its modules (cellcastd.c owns it): one
 * event base, the model and engine, the cell table, the scheduler, the Kafka module, the
 * alerts (alerts.h), the snapshots (state.h), the HTTP server, the demo feed, systemd
 * notifications, and the counters /metrics and /v1/info report.
 *
 * Threads: the event-loop thread runs everything here except the scheduler's worker
 * (which steps the engine; see scheduler.h and cells.h for the handoff).
 */
#ifndef CCD_CELLCASTD_H
#define CCD_CELLCASTD_H

#include <event2/event.h>
#include <stdint.h>

#include "cc_engine.h"
#include "cc_kpi.h"
#include "cc_model.h"
#include "cells.h"
#include "config.h"
#include "histogram.h"
#include "kafka.h"
#include "scheduler.h"

typedef struct CcdHttp CcdHttp;
typedef struct CcdDemo CcdDemo;
typedef struct CcdAlerts CcdAlerts;
typedef struct CcdState CcdState;
typedef struct CcdHandover CcdHandover;
typedef struct CcdNotify CcdNotify;
typedef struct CcdEmbeddedPort CcdEmbeddedPort;

/** The data time of the records of one KPI topic: all of them, and those refused because
 *  the model in service has none of their KPIs (the learner learns from both; models.c
 *  shows how much data there is while cellcastd waits for a learned model). */
#define CCD_INGEST_TOPICS 16
typedef struct CcdIngestSeen {
    uint64_t records, unknown_records;   ///< records seen; of them, with no KPI of the model
    int64_t first, last;                 ///< data time of all (when records > 0)
    int64_t unknown_first, unknown_last; ///< of the unknown ones (when unknown_records > 0)
} CcdIngestSeen;

typedef struct CcdIngestStats {
    uint64_t kafka_messages, kafka_bytes, http_messages, http_bytes;
    uint64_t records, invalid_elements, dead_letters, refused_full;
    uint64_t invalid[CC_KPI_N_REASONS]; ///< by reason, Kafka and HTTP together
    uint64_t future_ts, past_ts;        ///< records refused by ingest.max_future_s / max_past_s
    uint64_t unmapped_fields;           ///< message fields no ingest.fields entry names (dropped)
    int64_t ns_parse, ns_state;         ///< loop time decoding / applying records
    /* rates over the last few seconds (cron) */
    double rate_messages, rate_records, rate_steps;
    uint64_t last_messages, last_records, last_steps;
    int64_t last_rate_ns;
    CcdIngestSeen seen[CCD_INGEST_TOPICS]; ///< per KPI topic (kafka.topics order)
} CcdIngestStats;

typedef struct Ccd {
    CcdConfig cfg;
    const char *config_path;
    const char **sets; ///< the --set overrides of the command line, in order (a reload
    int n_sets;        ///< applies them again); point into argv
    struct event_base *base;
    CcModel *model;
    CcEngine *engine;
    CcKpiDecoder *kpi;
    CcdKafka *kafka;
    struct CcdCluster *cluster; ///< daemon/cluster.c; NULL without Kafka
    CcdCells *cells;
    CcdSched *sched;
    CcdHttp *http;
    CcdDemo *demo;
    CcdAlerts *alerts;
    struct CcdTopology *topology;    ///< cells' labels (topology.h), NULL: none
    struct CcdIncidents *incidents;  ///< alerts grouped (incidents.h), NULL: alerts off
    struct CcdSilenceHost *silences; ///< silences and the alerts they hold (silences.h)
    struct CcdAm *am;                ///< Alertmanager sender (alertmanager.h), NULL: off
    struct CcdFeedback *feedback;    ///< operators' verdicts on alerts (feedback.h)
    uint64_t topology_loads, topology_errors, incidents_refused;
    CcdState *state;
    CcdHandover *handover;          ///< cell state across members (handover.h)
    CcdNotify *notify;              ///< NULL when not run by systemd
    CcdEmbeddedPort *embedded_port; ///< kafka.embedded_port forwarder, NULL none
    uint64_t reloads_ok, reloads_failed;
    int64_t last_status_ns, last_wd_ns;
    int64_t busy_since_ns; ///< the worker has been busy since (0: idle at the last cron)
    struct event *cron_ev, *poll_ev, *repoll_ev, *sig_term, *sig_int, *sig_hup;
    int64_t start_ns;
    int64_t start_unix;
    uint64_t cronloops;
    int stopping;
    int kafka_paused;         ///< backpressure: too much pending
    struct CcdModels *models; ///< the models topic followed (models.h); NULL: model.source file
    int reexec;               ///< stop, then execute again (models.h: a model of other KPIs)
    CcdHist loop_lag;         ///< how late the cron ran: event-loop stalls (seconds)
    int64_t last_cron_ns;
    CcdIngestStats in;
    char model_name[160];
} Ccd;

/* http.c / api.c */
int ccd_http_open(Ccd *d, char *err, size_t errlen);
void ccd_http_close(Ccd *d);
/** Re-runs requests that waited for busy cells (after a batch completes). */
void ccd_http_retry_deferred(Ccd *d);
/** The port actually bound. */
int ccd_http_port(const Ccd *d);

/* demo.c */
int ccd_demo_open(Ccd *d, char *err, size_t errlen);
void ccd_demo_tick(Ccd *d);
void ccd_demo_close(Ccd *d);

#endif
