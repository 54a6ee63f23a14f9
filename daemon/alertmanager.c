/*
 * alertmanager.c — incidents and (optionally) cell alerts sent to Alertmanager's v2 API on
 * the daemon's event base: the items and their labels, the batches of each second and the
 * periodic resend, a bounded queue of requests per URL with retries and backoff. See
 * alertmanager.h for what is sent and when.
 */
#include "alertmanager.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/http.h>
#include <jansson.h>

#include "cc_anomaly.h"
#include "cc_common.h"
#include "cc_time.h"
#include "cellcastd.h"
#include "incidents.h"
#include "log.h"
#include "strmap.h"
#include "topology.h"
#include "utf8.h"

#define BACKOFF_FIRST_S 1
#define BACKOFF_MAX_S 60
#define ENDS_AHEAD 4 /* a firing item's endsAt: this many resend periods ahead */

/* One request's body, queued for one URL. */
typedef struct AmBatch {
    char *body;
    size_t len;
    int n_alerts;
    int attempts;
    int64_t next_ns; /* not before (backoff) */
    struct AmBatch *next;
} AmBatch;

typedef struct AmTarget {
    struct CcdAm *am;
    char *url; /* as configured, for messages */
    char *host, *path, *hosthdr;
    int port;
    struct evhttp_connection *conn;
    AmBatch *head, *tail;
    size_t queued; /* alerts in the queue */
    int in_flight; /* the head is being sent */
} AmTarget;

/* An alert as Alertmanager knows it: firing until sent resolved. */
typedef struct AmItem {
    json_t *labels, *annotations;
    char *gen_url;
    int64_t starts_s;
    int dirty; /* changed since the last batch */
} AmItem;

typedef struct CcdAm {
    Ccd *d;
    AmTarget *t;
    int nt;
    CcdStrHash items; /* key (incident:<id> or alert:<id>) -> AmItem */
    json_t *out;      /* postable alerts of the next batch (resolved ones, old label sets) */
    int64_t last_resend_ns;
    char base[512]; /* the dashboard's URL, no trailing slash */
    char instance[256];
    struct evdns_base *dns;
    uint64_t sent, failed, dropped;
    uint64_t replaced; /* values sent with U+FFFD for bytes that were not UTF-8 */
} CcdAm;

/* ---- helpers ---------------------------------------------------------------------- */

static void ts_rfc3339(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A postable alert: the item's labels and annotations with startsAt and endsAt. */
static json_t *postable(const AmItem *it, int64_t ends_s)
{
    char s[32], e[32];
    ts_rfc3339(it->starts_s, s, sizeof s);
    ts_rfc3339(ends_s < it->starts_s ? it->starts_s : ends_s, e, sizeof e);
    return json_pack("{s:O, s:O, s:s, s:s, s:o}", "labels", it->labels, "annotations",
                     it->annotations, "startsAt", s, "endsAt", e, "generatorURL",
                     ccd_json_text(it->gen_url, NULL));
}

static void item_free(AmItem *it)
{
    if (!it)
        return;
    json_decref(it->labels);
    json_decref(it->annotations);
    free(it->gen_url);
    free(it);
}

/* Sets o[k] to the value v ("" or NULL: none). Alertmanager, as JSON, takes UTF-8 only, and
 * jansson's json_string gives NULL for anything else: the label was dropped, and in an
 * annotation (json_pack) the whole alert. Bytes that are not UTF-8 go as U+FFFD, counted. */
static void set_text(CcdAm *am, json_t *o, const char *k, const char *v)
{
    size_t bad;
    if (!v || !*v)
        return;
    json_object_set_new(o, k, ccd_json_text(v, &bad));
    am->replaced += bad > 0;
}

static int64_t clamp_now(int64_t t, int64_t now) { return t > now ? now : t; }

/* The item at key becomes (labels, annotations, gen_url, starts) firing, or is sent
 * resolved at ends_s (firing 0). Takes the references of labels and annotations. */
static void item_update(CcdAm *am, const char *key, json_t *labels, json_t *annotations,
                        const char *gen_url, int64_t starts_s, int firing, int64_t ends_s)
{
    int64_t now = (int64_t)time(NULL);
    if (!labels || !annotations) {
        json_decref(labels);
        json_decref(annotations);
        am->dropped++;
        LOG_ERROR("alertmanager", "out of memory: %s not sent", key);
        return;
    }
    AmItem *it = ccd_strhash_get(&am->items, key);
    if (it && !json_equal(it->labels, labels)) { /* a new identity: the old one ends now */
        json_array_append_new(am->out, postable(it, now));
        ccd_strhash_del(&am->items, key);
        item_free(it);
        it = NULL;
    }
    if (!it) {
        it = calloc(1, sizeof *it);
        if (!it || ccd_strhash_put(&am->items, key, it)) {
            free(it);
            json_decref(labels);
            json_decref(annotations);
            am->dropped++;
            LOG_ERROR("alertmanager", "out of memory: %s not sent", key);
            return;
        }
    } else {
        json_decref(it->labels);
        json_decref(it->annotations);
        free(it->gen_url);
    }
    it->labels = labels;
    it->annotations = annotations;
    it->gen_url = strdup(gen_url);
    it->starts_s = clamp_now(starts_s, now);
    it->dirty = 1;
    if (!it->gen_url)
        it->gen_url = strdup("");
    if (!firing) {
        json_array_append_new(am->out, postable(it, clamp_now(ends_s, now)));
        ccd_strhash_del(&am->items, key);
        item_free(it);
    }
}

/* ---- what is sent ----------------------------------------------------------------- */

void ccd_am_incident(Ccd *d, const CcdIncident *inc)
{
    CcdAm *am = d->am;
    if (!am)
        return;
    char key[512], url[1024], desc[1024];
    snprintf(key, sizeof key, "incident:%s", inc->id);
    char *enc = evhttp_encode_uri(inc->id);
    snprintf(url, sizeof url, "%s/#/incidents/%s", am->base, enc ? enc : inc->id);
    free(enc);
    json_t *l = json_object();
    set_text(am, l, "alertname", "CellcastIncident");
    set_text(am, l, "incident", inc->id);
    set_text(am, l, "scope", ccd_inc_scope_name(inc->scope));
    set_text(am, l, "severity", inc->critical ? "critical" : "warning");
    set_text(am, l, "group", inc->group);
    set_text(am, l, "site", inc->site);
    set_text(am, l, "region", inc->region);
    if (inc->scope == CCD_INC_CELL && inc->n_cells)
        set_text(am, l, "cell", inc->cells[0]);
    if (inc->n_m) { /* of its first alert: stable while the incident grows */
        const CcdIncMember *m = &inc->m[0];
        set_text(am, l, "kind", strcmp(m->reason, "anomaly") ? "data_quality" : "anomaly");
        set_text(am, l, "reason", m->reason);
        set_text(am, l, "kpi", m->kpi);
    }
    set_text(am, l, "instance", am->instance);
    /* the description: its cells and KPIs, cut to a line */
    size_t n = (size_t)snprintf(desc, sizeof desc, "%zu cell(s)", inc->n_cells);
    for (size_t i = 0; i < inc->n_cells && n < sizeof desc; i++)
        n += (size_t)snprintf(desc + n, sizeof desc - n, "%s%s", i ? ", " : ": ", inc->cells[i]);
    if (n < sizeof desc)
        snprintf(desc + n, sizeof desc - n, "; %zu alert(s), %zu firing", inc->n_m, inc->n_firing);
    json_t *a = json_object();
    set_text(am, a, "summary", inc->summary);
    set_text(am, a, "description", desc);
    item_update(am, key, l, a, url, inc->start_ts, inc->firing, inc->end_ts);
}

void ccd_am_alert(Ccd *d, const CcAlertEvent *ev)
{
    CcdAm *am = d->am;
    if (!am || !d->cfg.alertmanager_send_cell_alerts)
        return;
    const CcHparams *hp = &d->model->hp;
    char key[512], url[1024], summary[512];
    snprintf(key, sizeof key, "alert:%s", ev->id);
    char *enc = evhttp_encode_uri(ev->cell_id);
    snprintf(url, sizeof url, "%s/#/cells/%s", am->base, enc ? enc : ev->cell_id);
    free(enc);
    int kpi = ev->kpi >= 0                                 ? ev->kpi
              : ev->kind == CC_ALERT_ANOMALY && ev->n_attr ? ev->attr[0].kpi
                                                           : -1;
    const char *kname = kpi >= 0 && kpi < hp->n_features ? hp->features[kpi] : NULL;
    const char *reason = ev->kind == CC_ALERT_ANOMALY ? "anomaly" : cc_dq_reason_name(ev->reason);
    json_t *l = json_object();
    set_text(am, l, "alertname", "CellcastAlert");
    set_text(am, l, "alert", ev->id);
    set_text(am, l, "cell", ev->cell_id);
    set_text(am, l, "kind", cc_alert_kind_name(ev->kind));
    set_text(am, l, "reason", reason);
    set_text(am, l, "kpi", kname);
    set_text(am, l, "severity", cc_alert_severity_name(ev->severity));
    set_text(am, l, "site", ccd_topology_label(d->topology, ev->cell_id, "site"));
    set_text(am, l, "region", ccd_topology_label(d->topology, ev->cell_id, "region"));
    set_text(am, l, "sector", ccd_topology_label(d->topology, ev->cell_id, "sector"));
    set_text(am, l, "instance", am->instance);
    snprintf(summary, sizeof summary, "cell %s: %s%s%s (score %.2f)", ev->cell_id, reason,
             kname ? " of " : "", kname ? kname : "", ev->score);
    json_t *a = json_object();
    set_text(am, a, "summary", summary);
    set_text(am, a, "description", ev->id);
    item_update(am, key, l, a, url, ev->start_ts, ev->state == CC_ALERT_FIRING, ev->ts);
}

/* ---- the queues ------------------------------------------------------------------- */

static void batch_pop(AmTarget *t)
{
    AmBatch *b = t->head;
    t->head = b->next;
    if (!t->head)
        t->tail = NULL;
    t->queued -= (size_t)b->n_alerts;
    free(b->body);
    free(b);
}

/* Queues a copy of body for t, dropping the oldest requests not in flight to make room. */
static void enqueue(CcdAm *am, AmTarget *t, const char *body, size_t len, int n_alerts)
{
    size_t max = (size_t)am->d->cfg.alertmanager_queue_max;
    while (t->queued + (size_t)n_alerts > max && t->head && !(t->in_flight && !t->head->next)) {
        AmBatch **pp = t->in_flight ? &t->head->next : &t->head; /* the oldest not in flight */
        AmBatch *b = *pp;
        *pp = b->next;
        if (t->tail == b)
            t->tail = t->in_flight ? t->head : NULL;
        t->queued -= (size_t)b->n_alerts;
        am->dropped += (uint64_t)b->n_alerts;
        LOG_WARN("alertmanager", "%s: queue full (alertmanager.queue_max %zu): %d alert(s) dropped",
                 t->url, max, b->n_alerts);
        free(b->body);
        free(b);
    }
    AmBatch *b = t->queued + (size_t)n_alerts <= max ? calloc(1, sizeof *b) : NULL;
    if (b && !(b->body = malloc(len))) {
        free(b);
        b = NULL;
    }
    if (!b) {
        am->dropped += (uint64_t)n_alerts;
        LOG_WARN("alertmanager", "%s: %d alert(s) dropped (queue full or out of memory)", t->url,
                 n_alerts);
        return;
    }
    memcpy(b->body, body, len);
    b->len = len;
    b->n_alerts = n_alerts;
    if (t->tail)
        t->tail->next = b;
    else
        t->head = b;
    t->tail = b;
    t->queued += (size_t)n_alerts;
}

static void send_head(AmTarget *t);

static void on_response(struct evhttp_request *req, void *arg)
{
    AmTarget *t = arg;
    CcdAm *am = t->am;
    AmBatch *b = t->head;
    t->in_flight = 0;
    if (!b)
        return;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    if (code >= 200 && code < 300) {
        am->sent += (uint64_t)b->n_alerts;
        batch_pop(t);
        send_head(t);
        return;
    }
    am->failed++;
    char why[160] = "no connection or timeout";
    if (code) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t n = in ? evbuffer_get_length(in) : 0;
        snprintf(why, sizeof why, "HTTP %d %.*s", code, (int)(n < 100 ? n : 100),
                 n ? (const char *)evbuffer_pullup(in, (ssize_t)(n < 100 ? n : 100)) : "");
    }
    int refused = code >= 400 && code < 500 && code != 429;
    if (refused || ++b->attempts > am->d->cfg.alertmanager_retries) {
        am->dropped += (uint64_t)b->n_alerts;
        LOG_WARN("alertmanager", "%s: %d alert(s) dropped after %d tr%s: %s", t->url, b->n_alerts,
                 b->attempts + refused, b->attempts + refused == 1 ? "y" : "ies", why);
        batch_pop(t);
        return;
    }
    int64_t back = BACKOFF_FIRST_S << (b->attempts - 1 < 6 ? b->attempts - 1 : 6);
    if (back > BACKOFF_MAX_S)
        back = BACKOFF_MAX_S;
    b->next_ns = cc_now_ns() + back * 1000000000LL;
    LOG_WARN("alertmanager", "%s: POST failed (%s); retry %d in %llds", t->url, why, b->attempts,
             (long long)back);
}

static void send_head(AmTarget *t)
{
    CcdAm *am = t->am;
    AmBatch *b = t->head;
    if (t->in_flight || !b || cc_now_ns() < b->next_ns)
        return;
    if (!t->conn) {
        t->conn =
            evhttp_connection_base_new(am->d->base, am->dns, t->host, (unsigned short)t->port);
        if (!t->conn)
            return; /* the next cron */
        evhttp_connection_set_timeout(t->conn, am->d->cfg.alertmanager_timeout_s);
        evhttp_connection_set_retries(t->conn, 0); /* ours, with backoff */
    }
    struct evhttp_request *req = evhttp_request_new(on_response, t);
    if (!req)
        return;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", t->hosthdr);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "User-Agent", "cellcastd");
    evbuffer_add(evhttp_request_get_output_buffer(req), b->body, b->len);
    t->in_flight = 1;
    if (evhttp_make_request(t->conn, req, EVHTTP_REQ_POST, t->path)) {
        t->in_flight = 0; /* the request is freed by libevent; try again at the next cron */
        am->failed++;
    }
}

/* Cuts arr into requests of at most CCD_AM_BATCH_MAX alerts, queued for every URL. */
static void enqueue_all(CcdAm *am, json_t *arr)
{
    size_t n = json_array_size(arr);
    for (size_t i0 = 0; i0 < n; i0 += CCD_AM_BATCH_MAX) {
        size_t k = n - i0 < CCD_AM_BATCH_MAX ? n - i0 : CCD_AM_BATCH_MAX;
        json_t *part = json_array();
        for (size_t i = i0; i < i0 + k; i++)
            json_array_append(part, json_array_get(arr, i));
        char *s = json_dumps(part, JSON_COMPACT);
        json_decref(part);
        if (!s) {
            am->dropped += (uint64_t)k * (uint64_t)am->nt;
            continue;
        }
        for (int j = 0; j < am->nt; j++)
            enqueue(am, &am->t[j], s, strlen(s), (int)k);
        free(s);
    }
}

typedef struct Collect {
    json_t *arr;
    int64_t ends_s;
    int all;
} Collect;

static void collect(void *cookie, const char *key, void *val)
{
    (void)key;
    Collect *c = cookie;
    AmItem *it = val;
    if (c->all || it->dirty)
        json_array_append_new(c->arr, postable(it, c->ends_s));
    it->dirty = 0;
}

void ccd_am_cron(Ccd *d)
{
    CcdAm *am = d->am;
    if (!am)
        return;
    int64_t now_ns = cc_now_ns();
    int all = now_ns - am->last_resend_ns >= (int64_t)d->cfg.alertmanager_resend_s * 1000000000LL;
    if (all)
        am->last_resend_ns = now_ns;
    Collect c = {am->out, (int64_t)time(NULL) + ENDS_AHEAD * (int64_t)d->cfg.alertmanager_resend_s,
                 all};
    ccd_strhash_foreach(&am->items, collect, &c);
    if (json_array_size(am->out)) {
        enqueue_all(am, am->out);
        json_array_clear(am->out);
    }
    for (int j = 0; j < am->nt; j++)
        send_head(&am->t[j]);
}

/* ---- lifecycle -------------------------------------------------------------------- */

/* t from "http://host[:port][/path]": the POST path is path + /api/v2/alerts. */
static int target_parse(AmTarget *t, const char *url, char *err, size_t errlen)
{
    struct evhttp_uri *u = evhttp_uri_parse(url);
    const char *scheme = u ? evhttp_uri_get_scheme(u) : NULL;
    const char *host = u ? evhttp_uri_get_host(u) : NULL;
    if (!u || !scheme || strcmp(scheme, "http") || !host || !*host) {
        evhttp_uri_free(u);
        return cc_errf(err, errlen, -EINVAL,
                       "key 'alertmanager.urls': '%s' is not an http://host[:port][/path] URL "
                       "(https is not supported: put a proxy in front)",
                       url);
    }
    int port = evhttp_uri_get_port(u);
    const char *path = evhttp_uri_get_path(u);
    size_t pl = path ? strlen(path) : 0;
    while (pl && path[pl - 1] == '/')
        pl--;
    char buf[1024], hh[300];
    snprintf(buf, sizeof buf, "%.*s/api/v2/alerts", (int)pl, path ? path : "");
    t->port = port > 0 ? port : 80;
    snprintf(hh, sizeof hh, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, t->port);
    t->url = strdup(url);
    t->host = strdup(host);
    t->path = strdup(buf);
    t->hosthdr = strdup(hh);
    evhttp_uri_free(u);
    if (!t->url || !t->host || !t->path || !t->hosthdr)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    return 0;
}

/* The dashboard's base URL and the instance label: http.advertise, else the bound address
 * (the host name for a wildcard), as GET /v1/cluster says. */
static void base_url(CcdAm *am, const Ccd *d)
{
    const char *adv = d->cfg.http_advertise ? d->cfg.http_advertise : "";
    const char *bind = d->cfg.http_bind ? d->cfg.http_bind : "";
    int port = ccd_http_port(d);
    char host[256] = "localhost";
    if (*adv)
        snprintf(am->base, sizeof am->base, "%s", adv);
    else if (!*bind || !strcmp(bind, "0.0.0.0") || !strcmp(bind, "::")) {
        gethostname(host, sizeof host - 1);
        snprintf(am->base, sizeof am->base, "http://%s:%d", host, port);
    } else
        snprintf(am->base, sizeof am->base, strchr(bind, ':') ? "http://[%s]:%d" : "http://%s:%d",
                 bind, port);
    size_t l = strlen(am->base);
    while (l && am->base[l - 1] == '/')
        am->base[--l] = 0;
    const char *p = strstr(am->base, "://");
    snprintf(am->instance, sizeof am->instance, "%s", p ? p + 3 : am->base);
}

int ccd_am_open(Ccd *d, char *err, size_t errlen)
{
    const CcdStrList *urls = &d->cfg.alertmanager_urls;
    if (urls->n == 0)
        return 0;
    CcdAm *am = calloc(1, sizeof *am);
    if (!am || !(am->t = calloc((size_t)urls->n, sizeof *am->t)) || !(am->out = json_array())) {
        if (am)
            free(am->t);
        free(am);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    am->d = d;
    d->am = am;
    for (int i = 0; i < urls->n; i++) {
        am->t[i].am = am;
        am->nt = i + 1;
        int rc = target_parse(&am->t[i], urls->items[i], err, errlen);
        if (rc)
            return rc;
    }
    base_url(am, d);
    /* names resolved without blocking the loop; NULL (libevent's blocking lookup) if the
     * resolver cannot be set up */
    am->dns = evdns_base_new(d->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
    am->last_resend_ns = cc_now_ns();
    LOG_INFO("alertmanager", "sending incidents%s to %d Alertmanager(s), first %s (resend %ds)",
             d->cfg.alertmanager_send_cell_alerts ? " and cell alerts" : "", am->nt, am->t[0].url,
             d->cfg.alertmanager_resend_s);
    return 0;
}

static void free_item(void *cookie, const char *key, void *val)
{
    (void)cookie, (void)key;
    item_free(val);
}

void ccd_am_close(Ccd *d)
{
    CcdAm *am = d->am;
    if (!am)
        return;
    for (int j = 0; j < am->nt; j++) {
        AmTarget *t = &am->t[j];
        if (t->conn)
            evhttp_connection_free(t->conn); /* requests in flight are freed, no callback */
        while (t->head)
            batch_pop(t);
        free(t->url);
        free(t->host);
        free(t->path);
        free(t->hosthdr);
    }
    if (am->dns)
        evdns_base_free(am->dns, 0);
    ccd_strhash_foreach(&am->items, free_item, NULL);
    ccd_strhash_free(&am->items);
    json_decref(am->out);
    free(am->t);
    free(am);
    d->am = NULL;
}

void ccd_am_stats(const Ccd *d, CcdAmStats *st)
{
    const CcdAm *am = d->am;
    memset(st, 0, sizeof *st);
    if (!am)
        return;
    st->sent = am->sent;
    st->failed = am->failed;
    st->dropped = am->dropped;
    st->replaced = am->replaced;
    st->firing = am->items.n;
    for (int j = 0; j < am->nt; j++)
        st->queued += am->t[j].queued;
}

void ccd_am_metrics(Ccd *d, struct evbuffer *b)
{
    CcdAmStats st;
    if (!d->am)
        return;
    ccd_am_stats(d, &st);
    evbuffer_add_printf(
        b,
        "# HELP cellcast_alertmanager_sent_total Alerts Alertmanager accepted (each resend "
        "counts).\n# TYPE cellcast_alertmanager_sent_total counter\n"
        "cellcast_alertmanager_sent_total %llu\n"
        "# HELP cellcast_alertmanager_failed_total POSTs to Alertmanager that failed (no "
        "connection, timeout, an error status), each try.\n"
        "# TYPE cellcast_alertmanager_failed_total counter\n"
        "cellcast_alertmanager_failed_total %llu\n"
        "# HELP cellcast_alertmanager_dropped_total Alerts given up: retries spent, refused by "
        "Alertmanager (4xx), or the queue full.\n"
        "# TYPE cellcast_alertmanager_dropped_total counter\n"
        "cellcast_alertmanager_dropped_total %llu\n"
        "# HELP cellcast_alertmanager_queued Alerts waiting to be sent, over every URL.\n"
        "# TYPE cellcast_alertmanager_queued gauge\ncellcast_alertmanager_queued %zu\n"
        "# HELP cellcast_alertmanager_firing Alerts firing in Alertmanager (resent every "
        "alertmanager.resend_s).\n"
        "# TYPE cellcast_alertmanager_firing gauge\ncellcast_alertmanager_firing %zu\n"
        "# HELP cellcast_alertmanager_values_replaced_total Label or annotation values with "
        "bytes that are not UTF-8 (Alertmanager takes UTF-8 only), sent with U+FFFD in their "
        "place.\n# TYPE cellcast_alertmanager_values_replaced_total counter\n"
        "cellcast_alertmanager_values_replaced_total %llu\n",
        (unsigned long long)st.sent, (unsigned long long)st.failed, (unsigned long long)st.dropped,
        st.queued, st.firing, (unsigned long long)st.replaced);
}
