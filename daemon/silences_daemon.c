/*
 * silences_daemon.c — the silences (silences.h) hosted in cellcastd: the list from
 * silences.path and silences.file, the alerts they hold back (taken out of the alerts'
 * flush, let go by the tick when no silence matches them any more), the maintenance windows
 * of each cell step (the detector's learning frozen), the HTTP routes and /metrics. Loop
 * thread.
 */
#include "silences.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <librdkafka/rdkafka.h>

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
    size_t n_maintenance;  /* maintenance silences in the list (0: no step looks) */
    uint64_t frozen_steps; /* cell steps in a maintenance window: nothing learnt */
    /* the silences topic (silences.topic): the API's silences shared by the members */
    char topic[512];     /* "": not shared */
    rd_kafka_t *rk;      /* its consumer (assign only, every partition from the start) */
    int assigned;        /* its partitions assigned */
    int64_t next_try_ns; /* the next look for the topic */
    uint64_t rec_applied, rec_stale, rec_refused, produce_failed;
};

/* After each change of the list: the maintenance silences (expired ones too: they go when
 * pruned) that cell steps must be matched against. */
static void recount(CcdSilenceHost *h)
{
    h->n_maintenance = ccd_silences_maintenance_live(h->list, INT64_MIN);
}

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
    CcdSilences *cfg = NULL;
    if (!rc && (rc = ccd_silences_config_read(&cfg, d->cfg.silences_file, (int64_t)time(NULL), err,
                                              errlen)))
        ccd_silences_close(&h->list);
    if (rc) {
        free(h);
        return rc;
    }
    if (ccd_silences_config_swap(h->list, &cfg)) {
        ccd_silences_close(&h->list);
        free(h);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    recount(h);
    const char *t = d->cfg.silences_topic;
    if (t && !strcmp(t, "auto")) {
        if (d->cfg.kafka_topics.n && strcmp(d->cfg.kafka_brokers, "none"))
            snprintf(h->topic, sizeof h->topic, "%s.silences", d->cfg.kafka_topics.items[0]);
    } else if (t) {
        snprintf(h->topic, sizeof h->topic, "%s", t);
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
    if (h->rk) {
        rd_kafka_consumer_close(h->rk);
        rd_kafka_destroy(h->rk);
    }
    ccd_strhash_foreach(&h->held, free_held, NULL);
    ccd_strhash_free(&h->held);
    ccd_silences_close(&h->list);
    free(h);
    d->silences = NULL;
}

/* ---- the silences topic ----------------------------------------------------------- */

/* The consumer of the topic, once the daemon's Kafka client is up (assign only: it never
 * joins a group nor commits; every member reads every partition from the beginning). */
static int open_topic(Ccd *d, CcdSilenceHost *h)
{
    char e[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    for (int i = 0; i < d->cfg.kafka_properties.n; i++)
        rd_kafka_conf_set(c, d->cfg.kafka_properties.items[i].key,
                          d->cfg.kafka_properties.items[i].value, e, sizeof e);
    if (rd_kafka_conf_set(c, "bootstrap.servers", ccd_kafka_bootstrap(d->kafka), e, sizeof e) ||
        rd_kafka_conf_set(c, "group.id", "cellcastd-silences", e, sizeof e) ||
        rd_kafka_conf_set(c, "enable.auto.commit", "false", e, sizeof e) ||
        rd_kafka_conf_set(c, "log_level", "3", e, sizeof e) ||
        !(h->rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, e, sizeof e))) {
        if (!h->rk)
            rd_kafka_conf_destroy(c);
        LOG_ERROR("silences", "silences topic '%s': %s (the API's silences are not shared)",
                  h->topic, e);
        h->topic[0] = 0;
        return -EIO;
    }
    LOG_INFO("silences", "sharing the API's silences through '%s'", h->topic);
    return 0;
}

/* Assigns every partition from the beginning once the topic exists (looked for every 2 s:
 * the first silence produced creates it where the brokers create topics). */
static void try_assign(CcdSilenceHost *h)
{
    int64_t now = cc_now_ns();
    if (now < h->next_try_ns)
        return;
    h->next_try_ns = now + 2000000000LL;
    rd_kafka_topic_t *t = rd_kafka_topic_new(h->rk, h->topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    if (!t)
        return;
    if (!rd_kafka_metadata(h->rk, 0, t, &md, 200) && md->topic_cnt == 1 && !md->topics[0].err &&
        md->topics[0].partition_cnt > 0) {
        rd_kafka_topic_partition_list_t *pl =
            rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
        for (int i = 0; i < md->topics[0].partition_cnt; i++)
            rd_kafka_topic_partition_list_add(pl, h->topic, md->topics[0].partitions[i].id)
                ->offset = RD_KAFKA_OFFSET_BEGINNING;
        if (!rd_kafka_assign(h->rk, pl))
            h->assigned = 1;
        rd_kafka_topic_partition_list_destroy(pl);
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
}

/* Produces the silence id as it is now (added or expired) for the other members. */
static void share(Ccd *d, const char *id)
{
    CcdSilenceHost *h = d->silences;
    if (!h->topic[0] || !d->kafka)
        return;
    json_t *j = ccd_silences_get(h->list, id, (int64_t)time(NULL));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text || ccd_kafka_produce_to(d->kafka, h->topic, -1, id, strlen(id), text, strlen(text))) {
        h->produce_failed++;
        LOG_WARN("silences", "silence %s not produced to '%s': the other members do not see it", id,
                 h->topic);
    }
    free(text);
}

void ccd_silences_cron(Ccd *d)
{
    CcdSilenceHost *h = d->silences;
    if (!h || !h->topic[0] || !d->kafka || d->stopping)
        return;
    if (!h->rk && open_topic(d, h))
        return;
    if (!h->assigned) {
        try_assign(h);
        if (!h->assigned)
            return;
    }
    int changed = 0;
    for (int i = 0; i < 256; i++) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(h->rk, 0);
        if (!msg)
            break;
        if (msg->err) {
            if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                CCD_LOG_RL(CC_LOG_WARN, "silences", "'%s': %s", h->topic,
                           rd_kafka_message_errstr(msg));
        } else {
            char err[512];
            int rc =
                ccd_silences_merge(h->list, msg->key, msg->key ? msg->key_len : 0, msg->payload,
                                   msg->len, (int64_t)time(NULL), err, sizeof err);
            if (rc > 0) {
                h->rec_applied++;
                changed = 1;
            } else if (rc == 0) {
                h->rec_stale++;
            } else {
                h->rec_refused++;
                CCD_LOG_RL(CC_LOG_WARN, "silences",
                           "a record of '%s' (partition %d, offset %lld) refused: %s", h->topic,
                           (int)msg->partition, (long long)msg->offset, err);
            }
        }
        rd_kafka_message_destroy(msg);
    }
    if (changed)
        recount(h);
}

int ccd_silences_reload_check(Ccd *d, const char *file, CcdSilences **pending, char *err,
                              size_t errlen)
{
    *pending = NULL;
    if (!d->silences)
        return 0;
    return ccd_silences_config_read(pending, file, (int64_t)time(NULL), err, errlen);
}

void ccd_silences_reload_apply(Ccd *d, CcdSilences **pending, int apply)
{
    CcdSilenceHost *h = d->silences;
    if (!h || !*pending || !apply) {
        ccd_silences_close(pending);
        return;
    }
    if (ccd_silences_config_swap(h->list, pending))
        LOG_ERROR("silences", "out of memory: the configuration's silences are not in effect");
    recount(h);
}

int ccd_silences_in_maintenance(Ccd *d, const char *cell, int64_t step_time)
{
    CcdSilenceHost *h = d->silences;
    if (!h || !h->n_maintenance)
        return 0;
    const CcdTopology *t = d->topology;
    CcdSilenceLabels l = {
        .cell = cell,
        .site = ccd_topology_label(t, cell, "site"),
        .region = ccd_topology_label(t, cell, "region"),
        .sector = ccd_topology_label(t, cell, "sector"),
    };
    if (!ccd_silences_maintenance(h->list, &l, step_time))
        return 0;
    h->frozen_steps++;
    return 1;
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
        "cellcast_silences_alerts_total{outcome=\"resolved\"} %llu\n"
        "# HELP cellcast_silences_maintenance_steps_total Cell steps in a maintenance window: "
        "scored, learnt from by nothing (profiles, calibrations, training rows).\n"
        "# TYPE cellcast_silences_maintenance_steps_total counter\n"
        "cellcast_silences_maintenance_steps_total %llu\n"
        "# HELP cellcast_silences_topic_records_total Records of the silences topic (the API's "
        "silences of every member), by result (applied; stale: an echo, not newer, a "
        "tombstone; refused: hostile or malformed, logged with the reason; unproduced: ours "
        "that could not be produced).\n"
        "# TYPE cellcast_silences_topic_records_total counter\n"
        "cellcast_silences_topic_records_total{result=\"applied\"} %llu\n"
        "cellcast_silences_topic_records_total{result=\"stale\"} %llu\n"
        "cellcast_silences_topic_records_total{result=\"refused\"} %llu\n"
        "cellcast_silences_topic_records_total{result=\"unproduced\"} %llu\n",
        ccd_silences_active(h->list, (int64_t)time(NULL)), h->held.n,
        (unsigned long long)h->held_total, (unsigned long long)h->released,
        (unsigned long long)h->dropped, (unsigned long long)h->frozen_steps,
        (unsigned long long)h->rec_applied, (unsigned long long)h->rec_stale,
        (unsigned long long)h->rec_refused, (unsigned long long)h->produce_failed);
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
    recount(d->silences);
    share(d, id);
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
    if (rc == -EPERM)
        return ccd_problem(r, 409, "from-config",
                           "silence '%s' comes from the configuration (silences.file): remove it "
                           "there and reload",
                           r->id);
    if (rc)
        return ccd_problem(r, 500, "internal", "cannot write the silences file");
    share(d, r->id);
    LOG_INFO("silences", "silence %s expired", r->id);
    return ccd_json(r, 200, json_pack("{s:s, s:s}", "silenceID", r->id, "state", "expired"));
}
