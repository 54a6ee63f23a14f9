/*
 * cellcastd.c — the cellcast daemon: KPIs in from Kafka (or POST /v1/kpis), per-cell
 * incremental forecasts out over a JSON HTTP API.
 *
 * Lifecycle: parse the configuration (config.h) → OpenBLAS setup (may re-exec) → one
 * event base → model, engine, KPI decoder, cell table, scheduler (worker thread) → HTTP →
 * Kafka (embedded broker by default) → demo feed → run. Everything periodic lives in one
 * cron timer (CRON_MS) as run_with_period blocks; signals come through evsignal_new.
 * SIGTERM/SIGINT: stop polling, step everything pending (drain), ack and commit offsets,
 * close and exit 0 (also the last snapshot, state.h). SIGHUP: reload (reload.h). The
 * configuration becomes the modules' settings in settings.c, at start and at reload.
 *
 * The walk of a KPI from Kafka to forecast to alert, and the way back: ingest.h.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "handover.h"
#include "alerts.h"
#include "alertmanager.h"
#include "embedded_port.h"
#include "feedback.h"
#include "cc_build_info.h"
#include "cellcastd.h"
#include "cluster.h"
#include "host.h"
#include "http.h"
#include "incidents.h"
#include "ingest.h"
#include "opts.h"
#include "log.h"
#include "models.h"
#include "notify.h"
#include "reload.h"
#include "settings.h"
#include "silences.h"
#include "state.h"
#include "topology.h"
#include "utf8.h"

#define CRON_MS 10
#define run_with_period(ms) if ((ms) <= CRON_MS || !(d->cronloops % (uint64_t)((ms) / CRON_MS)))

static uint64_t restored_cells(const Ccd *d)
{
    CcdStateStats ss;
    ccd_state_stats(d, &ss);
    return ss.restored_cells;
}

/* ---- cron ---- */

static void update_rates(Ccd *d)
{
    int64_t now = cc_now_ns();
    uint64_t msgs = d->in.kafka_messages + d->in.http_messages, recs = d->in.records,
             steps = ccd_sched_stats(d->sched)->items;
    if (d->in.last_rate_ns) {
        double dt = (double)(now - d->in.last_rate_ns) * 1e-9;
        d->in.rate_messages = (double)(msgs - d->in.last_messages) / dt;
        d->in.rate_records = (double)(recs - d->in.last_records) / dt;
        d->in.rate_steps = (double)(steps - d->in.last_steps) / dt;
    }
    d->in.last_rate_ns = now;
    d->in.last_messages = msgs;
    d->in.last_records = recs;
    d->in.last_steps = steps;
}

/* systemd: WATCHDOG=1 only while the loop runs (we are in its cron) and the worker makes
 * progress; STATUS= every 10 s. */
static void notify_cron(Ccd *d)
{
    int64_t now_ns = cc_now_ns();
    if (!ccd_sched_busy(d->sched))
        d->busy_since_ns = 0;
    else if (!d->busy_since_ns)
        d->busy_since_ns = now_ns;
    if (!ccd_notify_enabled(d->notify))
        return;
    uint64_t wd = ccd_notify_watchdog_usec(d->notify);
    int stuck = d->busy_since_ns && now_ns - d->busy_since_ns > (int64_t)(wd / 2) * 1000;
    if (wd && !stuck && now_ns - d->last_wd_ns >= (int64_t)(wd / 2) * 1000 - 500000000LL) {
        ccd_notify_watchdog(d->notify);
        d->last_wd_ns = now_ns;
    }
    if (now_ns - d->last_status_ns >= 10000000000LL) {
        CcdKafkaStats ks = {0};
        if (d->kafka)
            ccd_kafka_stats(d->kafka, &ks);
        ccd_notify_status(d->notify, "%zu cells, %.0f steps/s, lag %lld, %d alerts firing",
                          d->cells->n_cells, d->in.rate_steps, d->kafka ? (long long)ks.lag : 0LL,
                          ccd_alerts_firing(d));
        d->last_status_ns = now_ns;
    }
}

static void cron(evutil_socket_t fd, short what, void *arg)
{
    Ccd *d = arg;
    (void)fd, (void)what;
    int64_t now = cc_now_ns();
    if (d->last_cron_ns) { /* lateness of this tick: what a request waited behind other work */
        /* a tick can come early against our clock (libevent's cached time, timer slack):
         * that is no lateness, and a negative observation would make the _sum go down */
        int64_t late = now - d->last_cron_ns - CRON_MS * 1000000LL;
        ccd_hist_add(&d->loop_lag, (double)(late > 0 ? late : 0) * 1e-9);
    }
    d->last_cron_ns = now;
    run_with_period(CRON_MS)
    {
        ccd_sched_maybe_flush(d->sched, 0);
        ccd_ingest_backpressure(d);
        ccd_demo_tick(d);
    }
    run_with_period(100)
    {
        if (d->kafka) {
            ccd_kafka_service(d->kafka);
            ccd_ingest_poll(d); /* also when the wake-up fd stays quiet */
        }
        ccd_cluster_cron(d->cluster); /* member records in and out */
        ccd_models_cron(d);           /* models published by the learner */
        ccd_silences_cron(d);         /* the other members' silences */
    }
    run_with_period(1000)
    {
        update_rates(d);
        ccd_cells_reap(d->cells);
        ccd_alerts_tick(d); /* transitions, missing-data checks */
        ccd_am_cron(d);     /* incidents to Alertmanager */
        ccd_state_cron(d);  /* periodic snapshot */
        notify_cron(d);     /* WATCHDOG=1, STATUS= */
    }
    run_with_period(60000)
    {
        LOG_INFO("stats", "%zu cells, %.0f msg/s, %.0f steps/s, %llu invalid, %d pending",
                 d->cells->n_cells, d->in.rate_messages, d->in.rate_steps,
                 (unsigned long long)d->in.invalid_elements, ccd_sched_pending(d->sched));
    }
    d->cronloops++;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    Ccd *d = arg;
    (void)what;
    if (sig == SIGHUP) {
        char err[768];
        LOG_INFO("main", "SIGHUP: reloading the configuration and the model");
        ccd_reload(d, NULL, err, sizeof err); /* logs the outcome */
        return;
    }
    ccd_notify_stopping(d->notify);
    ccd_notify_send(d->notify, "EXTEND_TIMEOUT_USEC=60000000");
    LOG_INFO("main", "%s: draining and shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    d->stopping = 1;
    event_base_loopbreak(d->base);
}

/* ---- setup ---- */

enum { RUN, CHECK, PRINT, EXIT_OK, EXIT_USAGE };

/* --set KEY=VALUE: kept in order for ccd_config_read (at start and at every reload). */
static int take_set(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    Ccd *d = opt->target;
    d->sets[d->n_sets++] = value;
    return 0;
}

static void print_routes(void)
{
    for (int r = 0; r < ccd_n_routes; r++) {
        int get = ccd_routes[r].methods & EVHTTP_REQ_GET,
            post = ccd_routes[r].methods & EVHTTP_REQ_POST,
            del = ccd_routes[r].methods & EVHTTP_REQ_DELETE;
        printf("%s%s%s%s%s %s\n", get ? "GET" : "", get && post ? "," : "", post ? "POST" : "",
               (get || post) && del ? "," : "", del ? "DELETE" : "", ccd_routes[r].pattern);
    }
}

/* The command line: what to do. d->sets must hold room for argc pointers. */
static int parse_args(Ccd *d, int argc, char **argv)
{
    int check = 0, print = 0, routes = 0, version = 0;
    CcOpt opts[] = {
        CC_OPTS_STR("config", &d->config_path, "FILE",
                    "YAML configuration (conf/cellcast.yaml documents every key)",
                    .short_name = 'c'),
        CC_OPTS_CALL("set", take_set, d, "KEY=VALUE",
                     "override one key after the file (repeatable), e.g.\n"
                     "--set http.port=9090 --set kafka.properties.debug=broker",
                     .short_name = 's'),
        CC_OPTS_FLAG("check-config", &check,
                     "validate the configuration (and the model file), then exit"),
        CC_OPTS_FLAG("print-config", &print,
                     "print the configuration in effect as commented YAML\n"
                     "(without -c: the defaults, i.e. conf/cellcast.yaml)"),
        CC_OPTS_FLAG("print-default-config", &print, "the same as --print-config"),
        CC_OPTS_FLAG("routes", &routes, "list the HTTP routes (method pattern) and exit"),
        CC_OPTS_FLAG("version", &version, "print the version and exit"),
    };
    CcOptsSpec spec = {
        .prog = "cellcastd",
        .usage = "cellcastd [-c FILE] [--set key=value]... [--check-config] [--print-config]",
        CC_OPTS_TABLE(opts),
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc == CC_OPTS_HELP)
        return EXIT_OK;
    if (rc < 0)
        return EXIT_USAGE;
    if (routes) {
        print_routes();
        return EXIT_OK;
    }
    if (version) {
        printf("cellcastd %s\n", CC_VERSION);
        return EXIT_OK;
    }
    return print ? PRINT : check ? CHECK : RUN;
}

int main(int argc, char **argv)
{
    Ccd dd, *d = &dd;
    CcdSettings st;
    char err[1024];
    int rc = 1, have_st = 0;
    memset(d, 0, sizeof *d);
    if (!(d->sets = calloc((size_t)argc, sizeof *d->sets))) {
        fprintf(stderr, "cellcastd: out of memory\n");
        return 1;
    }
    int what = parse_args(d, argc, argv);
    if (what == EXIT_OK || what == EXIT_USAGE) {
        free(d->sets);
        return what == EXIT_OK ? 0 : 2;
    }
    const char *config = d->config_path;
    if (ccd_config_read(&d->cfg, d->config_path, d->sets, d->n_sets, err, sizeof err)) {
        fprintf(stderr, "cellcastd: %s\n", err);
        goto out_cfg;
    }
    if (ccd_config_validate(&d->cfg, err, sizeof err)) {
        fprintf(stderr, "cellcastd: %s%s%s\n", config ? config : "", config ? ": " : "", err);
        goto out_cfg;
    }
    ccd_log_level = d->cfg.log_level;
    if (what == PRINT) {
        rc = ccd_config_write_yaml(&d->cfg, stdout) ? 1 : 0;
        goto out_cfg;
    }

    cc_host_setup_blas(argc, argv, d->cfg.engine_blas_coretype, ccd_log_level >= CC_LOG_DEBUG);
    char model_path[4096], learned[4096];
    /* model.source kafka: the learned file once there is one (models.h) */
    if ((rc = ccd_model_open(&d->model, ccd_model_serve_path(&d->cfg, learned, sizeof learned),
                             model_path, sizeof model_path, err, sizeof err))) {
        LOG_ERROR("main",
                  "model.path '%s': %s (a relative path that does not exist is also "
                  "looked up under $CELLCAST_HOME and %s)",
                  model_path, err, CC_DATADIR);
        rc = 1;
        goto out;
    }
    snprintf(d->model_name, sizeof d->model_name, "%s",
             d->model->hp.name[0] ? d->model->hp.name : d->cfg.model_path);
    ccd_utf8_fix(d->model_name); /* a path cut in a character, or not UTF-8: JSON wants it */
    rc = ccd_settings_from_config(&st, &d->cfg, &d->model->hp, err, sizeof err);
    have_st = !rc;
    if (what == CHECK) {
        if (rc) {
            fprintf(stderr, "cellcastd: %s%s%s\n", config ? config : "", config ? ": " : "", err);
            rc = 1;
            goto out;
        }
        /* The topics cellcastd would create or refuse at start (kafka.c), when the brokers
         * can be reached; nothing is created here. */
        if (strcmp(d->cfg.kafka_brokers, "none") && strcmp(d->cfg.kafka_brokers, "embedded")) {
            char msg[2048];
            int tr = ccd_kafka_check_topics(&st.kafka, 0, msg, sizeof msg);
            if (tr == -EINVAL) {
                fprintf(stderr, "cellcastd: %s%s%s: cellcastd would refuse to start: %s\n",
                        config ? config : "", config ? ": " : "", "kafka topics", msg);
                rc = 1;
                goto out;
            }
            if (tr || msg[0])
                printf("cellcastd: kafka topics%s: %s\n", tr ? " not all checked" : "", msg);
        }
        printf("cellcastd: configuration OK%s%s; model '%s': %d KPIs, step %llds, horizon %d\n",
               config ? " in " : "", config ? config : "", d->model_name, d->model->hp.n_features,
               (long long)d->model->hp.step_seconds, d->model->hp.horizon);
        rc = 0;
        goto out;
    }
    if (rc) {
        LOG_ERROR("main", "%s", err);
        rc = 1;
        goto out;
    }
    rc = 1;
    signal(SIGPIPE, SIG_IGN);
    /* No evthread locking: only the event loop's thread touches libevent (the engine
     * worker wakes it through the scheduler's self-pipe). */
    ccd_log_route_libevent();
    /* The changelist folds the add/delete/modify calls one loop iteration makes on a
     * socket into one epoll_ctl: evhttp disables and re-enables reading around each
     * request, four epoll_ctl calls per request without it. No fd is ever dup()ed here,
     * the case the changelist cannot follow. */
    struct event_config *ecfg = event_config_new();
    if (ecfg)
        event_config_set_flag(ecfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    d->base = ecfg ? event_base_new_with_config(ecfg) : NULL;
    if (ecfg)
        event_config_free(ecfg);
    if (!d->base) {
        LOG_ERROR("main", "cannot create the event base");
        goto out;
    }
    d->start_ns = cc_now_ns();
    static const double lag_le[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                    0.05,   0.1,   0.25,  0.5,   1};
    ccd_hist_init(&d->loop_lag, lag_le, (int)(sizeof lag_le / sizeof lag_le[0]));
    d->start_unix = (int64_t)time(NULL);

    if (cc_engine_open(&d->engine, d->model, &st.engine, err, sizeof err)) {
        LOG_ERROR("main", "cannot open the engine: %s", err);
        goto out;
    }
    if (ccd_reopen_decoder(d, &st.kpi, err, sizeof err)) {
        LOG_ERROR("main", "ingest field mapping: %s", err);
        goto out;
    }
    const CcHparams *hp = &d->model->hp;
    if (ccd_cells_open(&d->cells, d->engine, &st.cells)) {
        LOG_ERROR("main", "out of memory");
        goto out;
    }
    d->cells->free_anomaly = ccd_handover_cell_gone; /* tombstone, then the alert state */
    d->cells->free_cookie = d;
    if (ccd_state_open(d, err, sizeof err)) {
        LOG_ERROR("main", "%s", err);
        goto out;
    }
    char journal[4096 + 16] = "";
    if (ccd_state_path(d)[0])
        snprintf(journal, sizeof journal, "%s.alerts", ccd_state_path(d));
    if (ccd_alerts_open(d, &st.anomaly, journal, err, sizeof err)) {
        LOG_ERROR("main", "%s", err);
        goto out;
    }
    char fb_path[4096 + 16] = ""; /* the verdicts' journal beside the snapshot */
    if (ccd_state_path(d)[0])
        snprintf(fb_path, sizeof fb_path, "%s.feedback", ccd_state_path(d));
    if (ccd_fb_open(d, fb_path, err, sizeof err)) {
        LOG_ERROR("feedback", "%s", err);
        goto out;
    }
    ccd_topology_reload(d); /* a file that does not parse is logged: cells have no labels */
    if (ccd_incidents_start(d)) {
        LOG_ERROR("main", "out of memory");
        goto out;
    }
    if (ccd_silences_start(d, ccd_state_path(d), err, sizeof err)) {
        LOG_ERROR("silences", "%s", err);
        goto out;
    }
    if ((rc = ccd_notify_open(&d->notify, err, sizeof err)))
        LOG_WARN("notify", "%s (systemd notifications off)", err);
    rc = 1;
    ccd_state_restore(d);
    d->last_status_ns = d->last_wd_ns = cc_now_ns();
    CcdSchedSettings ss = {
        .batch_steps = st.batch_steps, .batch_ms = st.batch_ms, .worker_nice = st.worker_nice};
    ccd_ingest_sched_hooks(d, &ss);
    if (ccd_sched_open(&d->sched, d->base, d->engine, &ss)) {
        LOG_ERROR("main", "cannot start the worker");
        goto out;
    }
    if (ccd_http_open(d, err, sizeof err)) {
        LOG_ERROR("http", "%s", err);
        goto out;
    }
    LOG_INFO("http", "listening on http://%s:%d/ (try /v1/info)", d->cfg.http_bind,
             ccd_http_port(d));
    if (ccd_am_open(d, err, sizeof err)) { /* after HTTP: its URL is the dashboard's */
        LOG_ERROR("alertmanager", "%s", err);
        goto out;
    }
    if (strcmp(d->cfg.kafka_brokers, "none")) {
        if (ccd_cluster_open(&d->cluster, &d->cfg, ccd_http_port(d), &st.kafka, err, sizeof err) ||
            ccd_ingest_open_kafka(d, &st.kafka, err, sizeof err) ||
            ccd_handover_open(d, err, sizeof err) ||
            ccd_cluster_start(d->cluster, d->kafka, err, sizeof err)) {
            LOG_ERROR("kafka", "%s", err);
            goto out;
        }
        if (!strcmp(d->cfg.kafka_brokers, "embedded") && d->cfg.kafka_embedded_port > 0) {
            if (ccd_embedded_port_open(&d->embedded_port, d->base, d->cfg.kafka_embedded_port,
                                       ccd_kafka_bootstrap(d->kafka), err, sizeof err)) {
                LOG_ERROR("kafka", "%s", err);
                goto out;
            }
            LOG_INFO("kafka",
                     "embedded broker's stable address 127.0.0.1:%d (kafka.embedded_port): "
                     "produce with kcat -b 127.0.0.1:%d -P -t %s",
                     d->cfg.kafka_embedded_port, d->cfg.kafka_embedded_port,
                     d->cfg.kafka_topics.items[0]);
        }
        if (ccd_models_open(d, model_path, err, sizeof err)) {
            LOG_ERROR("models", "%s", err);
            goto out;
        }
        LOG_INFO("kafka", "consuming %s from %s%s (group %s)", d->cfg.kafka_topics.items[0],
                 ccd_kafka_bootstrap(d->kafka),
                 !strcmp(d->cfg.kafka_brokers, "embedded")
                     ? " (embedded broker: kcat -b <that> -P -t <topic>)"
                     : "",
                 d->cfg.kafka_group_id);
    } else {
        LOG_INFO("kafka", "kafka.brokers is \"none\": ingest through POST /v1/kpis only");
    }
    if (d->cfg.demo_enabled) {
        if (!d->kafka)
            LOG_WARN("demo", "the demo feed needs Kafka (kafka.brokers); demo disabled");
        else if (ccd_demo_open(d, err, sizeof err)) {
            LOG_ERROR("demo", "%s", err);
            goto out;
        }
    }
    d->sig_term = evsignal_new(d->base, SIGTERM, on_signal, d);
    d->sig_int = evsignal_new(d->base, SIGINT, on_signal, d);
    d->sig_hup = evsignal_new(d->base, SIGHUP, on_signal, d);
    d->cron_ev = event_new(d->base, -1, EV_PERSIST, cron, d);
    struct timeval tv = {0, CRON_MS * 1000};
    if (!d->sig_term || !d->sig_int || !d->sig_hup || !d->cron_ev || event_add(d->sig_term, NULL) ||
        event_add(d->sig_int, NULL) || event_add(d->sig_hup, NULL) || event_add(d->cron_ev, &tv)) {
        LOG_ERROR("main", "cannot register signals and the cron");
        goto out;
    }
    LOG_INFO("main",
             "cellcastd %s ready: model '%s' (%d KPIs, step %llds, horizon %d, %.1f KB/cell)",
             CC_VERSION, d->model_name, hp->n_features, (long long)hp->step_seconds, hp->horizon,
             (double)d->cells->cell_bytes / 1024.0);
    ccd_model_quality_log(hp, "main");
    LOG_INFO("cells",
             "memory budget %lld MiB (%s): at most %zu resident cells of ≤ %.1f KB (a cell with "
             "less than one patch of history takes a few KB)",
             (long long)(d->cells->s.kv_budget_bytes >> 20),
             st.cells_budget_from ? st.cells_budget_from : "limits.kv_budget_mb",
             d->cells->max_resident, (double)d->cells->cell_bytes / 1024.0);
    {
        char status[256];
        snprintf(status, sizeof status, "serving model '%s': %zu cells (%llu restored)",
                 d->model_name, d->cells->n_cells, (unsigned long long)restored_cells(d));
        ccd_notify_ready(d->notify, status);
    }
    event_base_dispatch(d->base);

    /* drain: nothing new comes in; step what is pending; ack; commit */
    if (d->poll_ev)
        event_del(d->poll_ev);
    if (d->repoll_ev)
        event_del(d->repoll_ev);
    ccd_sched_drain(d->sched);
    ccd_ingest_ack_idle(d);
    ccd_alerts_flush(d);    /* the last transitions */
    ccd_state_shutdown(d);  /* snapshot, offsets of what it holds */
    ccd_alerts_shutdown(d); /* transitions the producer refused so far */
    if (d->kafka) {
        int crc = ccd_kafka_commit(d->kafka);
        LOG_INFO("kafka", "offsets committed%s", crc ? " (commit reported an error)" : "");
    }
    /* the alert producer is flushed by ccd_kafka_close below */
    rc = 0;
out:
    ccd_models_close(d);
    ccd_http_close(d);
    ccd_demo_close(d);
    if (d->poll_ev)
        event_free(d->poll_ev);
    if (d->repoll_ev)
        event_free(d->repoll_ev);
    ccd_embedded_port_close(&d->embedded_port);
    ccd_cluster_close(&d->cluster, 1000); /* tombstone: stop redirects to us */
    ccd_kafka_close(&d->kafka, 5000);
    ccd_handover_close(d);
    ccd_sched_close(&d->sched);
    ccd_alerts_close(d);
    ccd_am_close(d);
    ccd_fb_close(d);
    ccd_incidents_stop(d);
    ccd_silences_stop(d);
    ccd_topology_close(d);
    ccd_notify_close(&d->notify);
    ccd_state_close(d);
    ccd_cells_close(&d->cells);
    cc_kpi_close(&d->kpi);
    cc_engine_close(&d->engine);
    cc_model_close(&d->model);
    if (d->cron_ev)
        event_free(d->cron_ev);
    if (d->sig_term)
        event_free(d->sig_term);
    if (d->sig_int)
        event_free(d->sig_int);
    if (d->sig_hup)
        event_free(d->sig_hup);
    if (d->base) {
        event_base_free(d->base);
        if (!rc)
            LOG_INFO("main", "stopped cleanly");
    }
out_cfg:
    if (have_st)
        ccd_settings_free(&st);
    ccd_config_free(&d->cfg);
    free(d->sets);
    if (d->reexec && rc == 0) { /* a learned model of other KPIs (models.h): start over on it */
        LOG_INFO("main", "executing again on the learned model");
        execv("/proc/self/exe", argv);
        LOG_ERROR("main", "re-executing: %s", strerror(errno));
        return 1;
    }
    return rc;
}
