/* http.c — the evhttp server and the one chokepoint every request goes through; see
 * http.h. Routes and handlers are in api.c. */
#include "http.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/http_struct.h>
#include <event2/listener.h>

#include "http_cache.h"
#include "log.h"
#include "utf8.h"

/* The statuses counted by code; any other is counted as "other" (the last slot). */
#define N_STATUS 16
static const int status_codes[N_STATUS - 1] = {200, 202, 304, 307, 400, 401, 403, 404,
                                               405, 408, 413, 422, 500, 501, 503};

/*
 * The deadline of a connection's request head (http.header_timeout_s, as nginx's
 * client_header_timeout). evhttp's own timeout (http.timeout_s) is per read: one byte per
 * read held a connection, hence a slot of http.max_connections, for ever. A guard watches
 * the bytes that arrive on the connection (a callback on its bufferevent's input) and ends
 * the connection when the blank line that closes the head has not come by the deadline:
 * armed at accept and at the first byte of each next request, cleared at the blank line
 * (or when the request reaches its handler); an idle keep-alive connection has no
 * deadline (http.timeout_s closes it).
 */
enum { HEAD_IDLE, HEAD_READING, HEAD_DONE };
typedef struct HeadGuard {
    struct CcdHttp *h;
    struct evhttp_connection *evcon;
    struct evbuffer *in;
    struct evbuffer_cb_entry *cb;
    struct event *timer;
    int state;    /* HEAD_* */
    int newlines; /* line ends in a row (a CR is skipped): 2 end the head */
    int started;  /* a byte other than CR/LF seen: the empty lines before a request line are
                     not its end */
} HeadGuard;

static void guard_arm(HeadGuard *g);
static void guard_scan_tail(HeadGuard *g, size_t n);

struct CcdHttp {
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    int port;
    struct evhttp_connection **conns;
    HeadGuard **guards; /* guards[i]: of conns[i], NULL if none could be made */
    int n_conns, cap_conns;
    uint64_t header_timeouts; /* connections closed by http.header_timeout_s */
    int header_timeout_s;
    uint64_t refused_conns, requests;
    /* connections accepted but not yet adopted (see adopt_conns), each with a reference */
    struct bufferevent **fresh;
    int n_fresh, cap_fresh;
    struct event *adopt_ev, *accept_ev; /* adopt_conns; re-enables accept after EMFILE */
    uint64_t shed_conns, accept_errors;
    uint64_t reads_refused[CCD_READ_N_REASONS]; /* ccd_http_count_refused_read */
    CcdRateLimit accept_rl;
    CcdReq *deferred;
    int n_deferred;
    uint64_t *counts; /* (n_routes + 1, N_STATUS): last row = no route; status "other" last */
    CcdHist *dur;     /* (n_routes + 1) */
    CcdReq *pool;     /* finished requests kept for reuse (with their evbuffer) */
    int n_pool;
    int64_t date_s;    /* the second `date` was formatted for */
    char date[40];     /* RFC 7231 IMF-fixdate of date_s */
    CcdReplyCache *rc; /* gzip and the reply cache (http_cache.h) */
};

/* Descriptors kept for other than HTTP clients (Kafka's broker sockets and wake-up pipes,
 * the snapshot, the log, the listener) when http.max_connections is compared with
 * RLIMIT_NOFILE. */
#define HTTP_FD_MARGIN 64

static int conn_index(const struct CcdHttp *h, const struct evhttp_connection *evcon);

/* Requests kept for reuse: a request costs a 1.4 KB calloc and an evbuffer otherwise. */
#define POOL_MAX 64

/* Bytes one write may carry (libevent's default is 16 KiB); the socket's send buffer is the
 * real bound. */
#define HTTP_MAX_SINGLE_WRITE (1 << 20)

static const double dur_le[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                0.01,    0.025,  0.05,    0.1,    0.25,  1};

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    }
    return "Unknown";
}

static int status_index(int status)
{
    for (int i = 0; i < N_STATUS - 1; i++)
        if (status_codes[i] == status)
            return i;
    return N_STATUS - 1;
}

/* ---- replies ---- */

int ccd_json(CcdReq *r, int status, json_t *o)
{
    if (!o)
        return ccd_problem(r, 500, "internal", "out of memory building the reply");
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!s)
        return ccd_problem(r, 500, "internal", "out of memory building the reply");
    evbuffer_drain(r->out, evbuffer_get_length(r->out));
    evbuffer_add(r->out, s, strlen(s));
    evbuffer_add(r->out, "\n", 1);
    free(s);
    r->content_type = "application/json";
    return status;
}

static int problem_v(CcdReq *r, int status, const char *slug, json_t *extra, const char *fmt,
                     va_list ap)
{
    char detail[1024];
    vsnprintf(detail, sizeof detail, fmt, ap);
    json_t *o = json_object();
    char type[128];
    snprintf(type, sizeof type, "https://cellcast.invalid/problems/%s", slug);
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "title", json_string(reason_phrase(status)));
    json_object_set_new(o, "status", json_integer(status));
    /* both may quote a request's bytes (a decoded path segment, a cut piece of a body) that
     * are not UTF-8, for which json_string gives NULL: the field was dropped */
    json_object_set_new(o, "detail", ccd_json_text(detail, NULL));
    json_object_set_new(o, "instance", ccd_json_text(r->path, NULL));
    if (extra) {
        json_object_update_missing(o, extra);
        json_decref(extra);
    }
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    evbuffer_drain(r->out, evbuffer_get_length(r->out));
    if (s) {
        evbuffer_add(r->out, s, strlen(s));
        evbuffer_add(r->out, "\n", 1);
        free(s);
    }
    r->content_type = "application/problem+json";
    return status;
}

int ccd_problem(CcdReq *r, int status, const char *slug, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = problem_v(r, status, slug, NULL, fmt, ap);
    va_end(ap);
    return st;
}

int ccd_problem_ext(CcdReq *r, int status, const char *slug, json_t *extra, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = problem_v(r, status, slug, extra, fmt, ap);
    va_end(ap);
    return st;
}

int ccd_request_body(CcdReq *r, const char **body, size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
    *len = evbuffer_get_length(in);
    if ((int64_t)*len > r->d->cfg.http_max_body_bytes)
        return ccd_problem(r, 413, "body-too-large",
                           "the body has %zu bytes; http.max_body_bytes is %lld", *len,
                           (long long)r->d->cfg.http_max_body_bytes);
    *body = *len ? (const char *)evbuffer_pullup(in, -1) : "";
    return 0;
}

int ccd_text(CcdReq *r, int status, const char *ctype)
{
    r->content_type = ctype;
    return status;
}

const char *ccd_query(CcdReq *r, const char *name)
{
    int i = ccd_query_index(&r->query, name);
    if (i < 0)
        return NULL;
    r->query_used |= 1u << i;
    return r->query.val[i];
}

/* ---- routing ---- */

/* Matches path against pattern; {id} captures one segment. 1 on match. */
static int match(const char *pattern, const char *path, char *id, size_t idlen)
{
    while (*pattern && *path) {
        if (*pattern == '{' && !strncmp(pattern, "{id}", 4)) {
            const char *slash = strchr(path, '/');
            size_t n = slash ? (size_t)(slash - path) : strlen(path);
            if (!n || n >= idlen)
                return 0;
            memcpy(id, path, n);
            id[n] = 0;
            path += n;
            pattern += 4;
            continue;
        }
        if (*pattern++ != *path++)
            return 0;
    }
    return !*pattern && !*path;
}

static const char *method_name(int m)
{
    switch (m) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "?";
}

/* The Access-Control-Allow-Origin for the request's Origin under http.cors_origins: "*",
 * the origin itself when listed, or NULL (no CORS header). */
static const char *cors_origin(CcdReq *r)
{
    const CcdStrList *l = &r->d->cfg.http_cors_origins;
    if (!l->n)
        return NULL;
    const char *o = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Origin");
    if (!o)
        return NULL;
    for (int i = 0; i < l->n; i++) {
        if (!strcmp(l->items[i], "*"))
            return "*";
        if (!strcmp(l->items[i], o))
            return o;
    }
    return NULL;
}

static void methods_of(int methods, char *buf, size_t n)
{
    buf[0] = 0;
    for (int m = 1; m <= EVHTTP_REQ_PATCH; m <<= 1)
        if (methods & m) {
            if (buf[0])
                strncat(buf, ", ", n - strlen(buf) - 1);
            strncat(buf, method_name(m), n - strlen(buf) - 1);
            if (m == EVHTTP_REQ_GET) /* HEAD is answered wherever GET is */
                strncat(buf, ", HEAD", n - strlen(buf) - 1);
        }
}

static int route_and_run(CcdReq *r)
{
    static char allow[128];
    int path_matched = -1;
    /* HEAD runs the GET handler; finish() sends its headers without the body */
    int method = r->method == EVHTTP_REQ_HEAD ? EVHTTP_REQ_GET : (int)r->method;
    r->cors = cors_origin(r);
    if (r->cors && r->method == EVHTTP_REQ_OPTIONS) /* a CORS preflight: what is allowed */
        for (int i = 0; i < ccd_n_routes; i++) {
            char id[sizeof r->id];
            if (!match(ccd_routes[i].pattern, r->path, id, sizeof id))
                continue;
            r->route = i;
            r->preflight = 1;
            methods_of(ccd_routes[i].methods, allow, sizeof allow);
            r->allow = allow;
            return ccd_text(r, 200, "text/plain");
        }
    for (int i = 0; i < ccd_n_routes; i++) {
        char id[sizeof r->id];
        if (!match(ccd_routes[i].pattern, r->path, id, sizeof id))
            continue;
        if (!(ccd_routes[i].methods & method)) {
            path_matched = i;
            continue;
        }
        r->route = i;
        /* match on the raw path, decode the capture: "enb-17%2F3" is the id "enb-17/3" */
        char *dec = strchr(id, '%') ? evhttp_uridecode(id, 0, NULL) : NULL;
        snprintf(r->id, sizeof r->id, "%s", dec ? dec : id);
        free(dec);
        return ccd_routes[i].fn(r);
    }
    if (path_matched >= 0) {
        r->route = path_matched;
        methods_of(ccd_routes[path_matched].methods, allow, sizeof allow);
        r->allow = allow;
        return ccd_problem(r, 405, "method-not-allowed", "%s is not allowed on %s (allowed: %s)",
                           method_name((int)r->method), r->path, allow);
    }
    return ccd_problem(r, 404, "not-found", "no route %s", r->path);
}

static void req_free(CcdReq *r)
{
    CcdHttp *h = r->d->http;
    ccd_query_free(&r->query);
    if (h && h->n_pool < POOL_MAX && !evbuffer_drain(r->out, evbuffer_get_length(r->out))) {
        r->next = h->pool;
        h->pool = r;
        h->n_pool++;
        return;
    }
    evbuffer_free(r->out);
    free(r);
}

/* The Date header, formatted once per second (evhttp would format it for every reply). */
static const char *http_date(CcdHttp *h)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != h->date_s || !h->date[0]) {
        struct tm tm;
        time_t t = ts.tv_sec;
        gmtime_r(&t, &tm);
        snprintf(h->date, sizeof h->date, "%s, %02d %s %04d %02d:%02d:%02d GMT",
                 days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900,
                 tm.tm_hour, tm.tm_min, tm.tm_sec);
        h->date_s = ts.tv_sec;
    }
    return h->date;
}

/* ---- the reply cache at the chokepoint (http_cache.h keeps the bodies) ---- */

int ccd_accepts_gzip(CcdReq *r)
{
    return ccd_accepts_gzip_value(
        evhttp_find_header(evhttp_request_get_input_headers(r->req), "Accept-Encoding"));
}

/*
 * The request as the cache knows it: the path and the query pairs the handler read (by
 * name, names in lower case, each name and value length-prefixed so that no two
 * sets of pairs spell the same key). A parameter no handler reads (`&x=1`, a changing
 * `&_=<time>`), the order of the pairs, the case of a name and its percent-encoding change
 * nothing in a reply, so they no longer make a request miss the cache. Loop thread only:
 * the string is kept in a buffer of this file. NULL when out of memory.
 */
static const char *req_text(CcdReq *r, uint32_t used, size_t *len)
{
    static char *buf;
    static size_t cap;
    size_t need = strlen(r->path) + 2;
    for (int i = 0; i < r->query.n; i++)
        if (used >> i & 1)
            need += strlen(r->query.key[i]) + strlen(r->query.val[i]) + 44;
    if (need > cap) {
        char *p = realloc(buf, need);
        if (!p)
            return NULL;
        buf = p;
        cap = need;
    }
    /* the pairs read by name: their order in the query changes nothing (a name is read
     * once, the first of its pairs, so the names read differ) */
    int order[CCD_QUERY_MAX], m = 0;
    for (int i = 0; i < r->query.n; i++) {
        if (!(used >> i & 1))
            continue;
        int j = m++;
        for (; j > 0 && strcasecmp(r->query.key[order[j - 1]], r->query.key[i]) > 0; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    size_t n = (size_t)snprintf(buf, cap, "%s?", r->path);
    for (int o = 0; o < m; o++) {
        const char *k = r->query.key[order[o]], *v = r->query.val[order[o]];
        n += (size_t)snprintf(buf + n, cap - n, "%zu:", strlen(k));
        for (; *k; k++)
            buf[n++] = (char)tolower((unsigned char)*k);
        n += (size_t)snprintf(buf + n, cap - n, "%zu:%s", strlen(v), v);
    }
    *len = n;
    return buf;
}

static void add_etag(CcdReq *r, const char *etag)
{
    evhttp_add_header(evhttp_request_get_output_headers(r->req), "ETag", etag);
    r->cache_control = "no-cache";
}

int ccd_reply_cached(CcdReq *r, uint64_t version)
{
    CcdReplyCache *rc = r->d->http ? r->d->http->rc : NULL;
    char etag[24];
    size_t tlen;
    const char *text = rc ? req_text(r, r->query_used, &tlen) : NULL;
    if (!text)
        return 0;
    uint64_t key = ccd_rc_key(text, tlen, version);
    ccd_rc_etag(rc, key, etag, sizeof etag);
    if (r->method == EVHTTP_REQ_GET &&
        ccd_etag_matches(
            evhttp_find_header(evhttp_request_get_input_headers(r->req), "If-None-Match"),
            etag + 2 /* past W/ */)) {
        /* the client holds this reply: the key names request and version, so no need for
         * the body to be in the cache */
        ccd_rc_count_hit(rc);
        add_etag(r, etag);
        return ccd_text(r, 304, "application/json");
    }
    int gz;
    CcdBody *b = ccd_rc_lookup(rc, key, version, text, tlen, ccd_accepts_gzip(r), &gz);
    if (!b) {
        r->rc_want = 1;
        r->rc_query_used = r->query_used;
        r->rc_key = key;
        r->rc_version = version;
        return 0;
    }
    add_etag(r, etag);
    ccd_body_add(r->out, b, b->len);
    r->gz_ready = gz;
    return ccd_text(r, 200, "application/json");
}

/* Before the reply goes: gzips a JSON body for a client that takes it and keeps a 200 reply
 * of a request that asked (ccd_reply_cached). 1 when the body is gzipped (Content-Encoding:
 * gzip to add). */
static int reply_finish(CcdReplyCache *rc, CcdReq *r, int status)
{
    const char *ct = r->content_type ? r->content_type : "";
    if (r->gz_ready)
        return 1;
    if (!rc || (strncmp(ct, "application/json", 16) && strncmp(ct, "application/problem+json", 24)))
        return 0;
    size_t n = evbuffer_get_length(r->out);
    int want_gz = n >= CCD_GZIP_MIN_BYTES && ccd_accepts_gzip(r);
    /* a handler that read a parameter after the lookup made a reply its key does not
     * name: not kept (none does; this keeps the cache sound if one ever does) */
    int keep_it = r->rc_want && status == 200 && r->query_used == r->rc_query_used;
    if (keep_it) {
        char etag[24];
        ccd_rc_etag(rc, r->rc_key, etag, sizeof etag);
        add_etag(r, etag);
    }
    if (!want_gz && !keep_it)
        return 0;
    const unsigned char *p = evbuffer_pullup(r->out, -1);
    if (!p)
        return 0;
    CcdBody *plain = keep_it ? ccd_body_new(p, n) : NULL;
    CcdBody *gz = want_gz ? ccd_rc_gzip(rc, p, n) : NULL;
    size_t tlen;
    const char *text = plain ? req_text(r, r->rc_query_used, &tlen) : NULL;
    if (text)
        ccd_rc_keep(rc, r->rc_key, r->rc_version, text, tlen, plain, gz);
    if (gz) {
        evbuffer_drain(r->out, n);
        ccd_body_add(r->out, gz, gz->len);
    }
    ccd_body_unref(plain);
    ccd_body_unref(gz);
    return gz != NULL;
}

static void finish(CcdReq *r, int status)
{
    CcdHttp *h = r->d->http;
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(r->req);
    const char *ct = r->content_type ? r->content_type : "text/plain";
    int json = !strncmp(ct, "application/json", 16) || !strncmp(ct, "application/problem+json", 24);
    if (json && r->method != EVHTTP_REQ_HEAD) {
        evhttp_add_header(hdr, "Vary", "Accept-Encoding");
        if (reply_finish(h->rc, r, status))
            evhttp_add_header(hdr, "Content-Encoding", "gzip");
    }
    if (r->cors) {
        evhttp_add_header(hdr, "Access-Control-Allow-Origin", r->cors);
        if (strcmp(r->cors, "*"))
            evhttp_add_header(hdr, "Vary", "Origin");
        if (r->preflight) {
            evhttp_add_header(hdr, "Access-Control-Allow-Methods", r->allow);
            evhttp_add_header(hdr, "Access-Control-Allow-Headers", "Authorization, Content-Type");
            evhttp_add_header(hdr, "Access-Control-Max-Age", "600");
            r->allow = NULL;
        }
    }
    evhttp_add_header(hdr, "Content-Type", ct);
    evhttp_add_header(hdr, "Cache-Control", r->cache_control ? r->cache_control : "no-store");
    evhttp_add_header(hdr, "Date", http_date(h));
    if (r->allow)
        evhttp_add_header(hdr, "Allow", r->allow);
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        evhttp_add_header(hdr, "Retry-After", ra);
    }
    if (r->close_conn)
        evhttp_add_header(hdr, "Connection", "close");
    if (r->method == EVHTTP_REQ_HEAD) {
        /* as GET, without the body: the length is the one GET would send */
        char len[24];
        snprintf(len, sizeof len, "%zu", evbuffer_get_length(r->out));
        evhttp_add_header(hdr, "Content-Length", len);
        evbuffer_drain(r->out, evbuffer_get_length(r->out));
    }
    /* the next request's head has its deadline from its first byte (some may be here) */
    int ci = conn_index(h, evhttp_request_get_connection(r->req));
    HeadGuard *g = ci >= 0 ? h->guards[ci] : NULL;
    if (g) {
        g->state = HEAD_IDLE;
        evtimer_del(g->timer);
        if (evbuffer_get_length(g->in)) {
            guard_arm(g);
            guard_scan_tail(g, evbuffer_get_length(g->in));
        }
    }
    evhttp_send_reply(r->req, status, reason_phrase(status), r->out);
    int row = r->route >= 0 ? r->route : ccd_n_routes;
    h->counts[row * N_STATUS + status_index(status)]++;
    ccd_hist_add(&h->dur[row], (double)(cc_now_ns() - r->t0_ns) * 1e-9);
    h->requests++;
    if (status >= 500)
        CCD_LOG_RL(CC_LOG_WARN, "http", "%s %s -> %d", method_name((int)r->method), r->path,
                   status);
    else
        LOG_DEBUG("http", "%s %s -> %d", method_name((int)r->method), r->path, status);
    req_free(r);
}

static void run(CcdReq *r)
{
    int status = route_and_run(r);
    if (status == CCD_DEFER) {
        CcdHttp *h = r->d->http;
        r->deferrals++;
        r->next = h->deferred;
        h->deferred = r;
        h->n_deferred++;
        return;
    }
    finish(r, status);
}

void ccd_http_retry_deferred(Ccd *d)
{
    CcdHttp *h = d->http;
    if (!h || !h->deferred)
        return;
    CcdReq *list = h->deferred;
    h->deferred = NULL;
    h->n_deferred = 0;
    while (list) {
        CcdReq *r = list;
        list = r->next;
        r->next = NULL;
        run(r);
    }
}

/* ---- libevent's own error replies ---- */

/*
 * libevent answers some requests itself, before any callback of ours runs: a malformed
 * request line or header (400), a body past evhttp_set_max_body_size (413), a method
 * outside evhttp_set_allowed_methods (501). It does so through evhttp_send_error, which
 * writes an HTML page; libevent 2.1 (Debian 12: 2.1.12) has no error callback
 * (evhttp_set_errorcb is 2.2 only). libevent calls evhttp_send_error through its PLT, so
 * this definition in the executable takes its place (ELF symbol interposition) and every
 * such reply is problem+json like ours, counted under the route "unmatched". What it does
 * besides the body is what libevent's does: HTTP/1.1, Connection: close.
 */
static Ccd *http_owner; /* the one server of the process (also the listener's error path) */

void evhttp_send_error(struct evhttp_request *req, int error, const char *reason)
{
    struct evbuffer *buf = evbuffer_new();
    if (!buf) { /* as libevent's: out of memory, the connection is dropped */
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        if (evcon)
            evhttp_connection_free(evcon);
        return;
    }
    if (!req->major || !req->minor) {
        req->major = 1;
        req->minor = 1;
    }
    const char *uri = evhttp_request_get_uri(req);
    json_t *o =
        json_pack("{s:s, s:s, s:i, s:s, s:s}", "type",
                  error == 413   ? "https://cellcast.invalid/problems/too-large"
                  : error == 501 ? "https://cellcast.invalid/problems/not-implemented"
                                 : "https://cellcast.invalid/problems/bad-request",
                  "title", reason_phrase(error), "status", error, "detail",
                  reason         ? reason
                  : error == 413 ? "the request body is larger than twice http.max_body_bytes"
                  : error == 501 ? "the server does not implement this method"
                                 : "the request could not be parsed (request line, "
                                   "headers or body framing)",
                  "instance", uri ? uri : "");
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s) {
        evbuffer_add(buf, s, strlen(s));
        evbuffer_add(buf, "\n", 1);
        free(s);
    }
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
    evhttp_clear_headers(hdr);
    evhttp_add_header(hdr, "Content-Type", "application/problem+json");
    evhttp_add_header(hdr, "Connection", "close");
    CcdHttp *h = http_owner ? http_owner->http : NULL;
    if (h) {
        h->counts[ccd_n_routes * N_STATUS + status_index(error)]++;
        h->requests++;
    }
    evhttp_send_reply(req, error, reason_phrase(error), buf);
    evbuffer_free(buf);
}

/* ---- connections ---- */

static void guard_free(HeadGuard *g)
{
    if (!g)
        return;
    if (g->cb)
        evbuffer_remove_cb_entry(g->in, g->cb);
    if (g->timer)
        event_free(g->timer);
    free(g);
}

static void guard_arm(HeadGuard *g)
{
    const struct timeval tv = {g->h->header_timeout_s, 0};
    g->state = HEAD_READING;
    g->newlines = g->started = 0;
    evtimer_add(g->timer, &tv);
}

/* Scans n bytes of the head for its end (an empty line); HEAD_DONE there. */
static void guard_scan(HeadGuard *g, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n && g->state == HEAD_READING; i++) {
        if (p[i] == '\n') {
            if (g->started && ++g->newlines == 2) {
                g->state = HEAD_DONE;
                evtimer_del(g->timer);
            }
        } else if (p[i] != '\r') {
            g->started = 1;
            g->newlines = 0;
        }
    }
}

/* Scans the input's last n bytes (those just added). */
static void guard_scan_tail(HeadGuard *g, size_t n)
{
    size_t len = evbuffer_get_length(g->in);
    struct evbuffer_ptr at;
    struct evbuffer_iovec v[8];
    if (evbuffer_ptr_set(g->in, &at, len - n, EVBUFFER_PTR_SET))
        return;
    while (n && g->state == HEAD_READING) {
        int k = evbuffer_peek(g->in, (ev_ssize_t)n, &at, v, 8);
        if (k <= 0)
            return;
        size_t done = 0;
        for (int i = 0; i < k && i < 8 && done < n; i++) {
            size_t take = v[i].iov_len < n - done ? v[i].iov_len : n - done;
            guard_scan(g, v[i].iov_base, take);
            done += take;
        }
        if (evbuffer_ptr_set(g->in, &at, done, EVBUFFER_PTR_ADD))
            return;
        n -= done;
    }
}

static void guard_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
    HeadGuard *g = arg;
    (void)in;
    if (!info->n_added || g->state == HEAD_DONE)
        return;
    if (g->state == HEAD_IDLE) /* the first byte of the next request */
        guard_arm(g);
    guard_scan_tail(g, info->n_added);
}

static void guard_expired(evutil_socket_t fd, short what, void *arg)
{
    HeadGuard *g = arg;
    CcdHttp *h = g->h;
    (void)fd, (void)what;
    h->header_timeouts++;
    CCD_LOG_RL_AT(&h->accept_rl, CC_LOG_WARN, "http",
                  "connection closed: no complete request head within http.header_timeout_s "
                  "= %d s",
                  h->header_timeout_s);
    evhttp_connection_free(g->evcon); /* conn_closed frees g */
}

/* A guard for evcon, armed (its head's deadline runs from now), or NULL. */
static HeadGuard *guard_new(CcdHttp *h, struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    HeadGuard *g = bev ? calloc(1, sizeof *g) : NULL;
    if (!g)
        return NULL;
    g->h = h;
    g->evcon = evcon;
    g->in = bufferevent_get_input(bev);
    if (!(g->timer = evtimer_new(bufferevent_get_base(bev), guard_expired, g)) ||
        !(g->cb = evbuffer_add_cb(g->in, guard_input, g))) {
        guard_free(g);
        return NULL;
    }
    guard_arm(g);
    guard_scan_tail(g, evbuffer_get_length(g->in));
    return g;
}

static int conn_index(const CcdHttp *h, const struct evhttp_connection *evcon)
{
    for (int i = 0; i < h->n_conns; i++)
        if (h->conns[i] == evcon)
            return i;
    return -1;
}

static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
    CcdHttp *h = arg;
    int i = conn_index(h, evcon);
    if (i < 0)
        return;
    guard_free(h->guards[i]);
    h->n_conns--;
    h->conns[i] = h->conns[h->n_conns];
    h->guards[i] = h->guards[h->n_conns];
}

/* Tracks a connection (counted until its close callback) with its head's guard; 0, or
 * -ENOMEM. */
static int conn_track(CcdHttp *h, struct evhttp_connection *evcon)
{
    if (h->n_conns == h->cap_conns) {
        int cap = h->cap_conns ? h->cap_conns * 2 : 64;
        struct evhttp_connection **c = realloc(h->conns, (size_t)cap * sizeof *c);
        if (!c)
            return -ENOMEM;
        h->conns = c;
        HeadGuard **g = realloc(h->guards, (size_t)cap * sizeof *g);
        if (!g)
            return -ENOMEM;
        h->guards = g;
        h->cap_conns = cap;
    }
    h->guards[h->n_conns] = guard_new(h, evcon);
    h->conns[h->n_conns++] = evcon;
    evhttp_connection_set_closecb(evcon, conn_closed, h);
    return 0;
}

/* 1 if the connection may be served (tracking it), 0 if over the limit. Connections are
 * adopted at accept (adopt_conns); this catches one that could not be. */
static int conn_admit(Ccd *d, struct evhttp_connection *evcon)
{
    CcdHttp *h = d->http;
    int i = conn_index(h, evcon);
    if (i < 0) {
        if (h->n_conns >= d->cfg.http_max_connections) {
            h->refused_conns++;
            return 0;
        }
        if (conn_track(h, evcon))
            return 1; /* out of memory: served, untracked (as it was) */
        i = h->n_conns - 1;
    }
    HeadGuard *g = h->guards[i];
    if (g && g->state != HEAD_DONE) { /* the request is here: its head is complete */
        g->state = HEAD_DONE;
        evtimer_del(g->timer);
    }
    return 1;
}

/*
 * Every connection counts against http.max_connections from accept to close, also one that
 * never sends a complete request (libevent 2.1 has no hook at accept: an idle connection
 * was not counted, and idle connections filled every descriptor). evhttp asks
 * new_conn_bufferevent for each accepted connection's bufferevent before it builds the
 * connection: the bufferevent is kept here (with a reference, so it outlives a connection
 * evhttp frees at once) and adopt_conns, run right after the accept callback, finds its
 * connection (evhttp's callback argument, checked against the connection's bufferevent)
 * and tracks it, or closes it at once, counted, when the limit is reached.
 */
static void adopt_conns(evutil_socket_t fd, short what, void *arg)
{
    Ccd *d = arg;
    CcdHttp *h = d->http;
    (void)fd, (void)what;
    for (int i = 0; i < h->n_fresh; i++) {
        struct bufferevent *bev = h->fresh[i];
        bufferevent_event_cb ecb = NULL;
        void *cbarg = NULL;
        bufferevent_getcb(bev, NULL, NULL, &ecb, &cbarg);
        struct evhttp_connection *evcon = cbarg;
        /* a bufferevent evhttp already freed has no callbacks left */
        if (ecb && evcon && evhttp_connection_get_bufferevent(evcon) == bev) {
            if (h->n_conns >= d->cfg.http_max_connections || conn_track(h, evcon)) {
                h->shed_conns++;
                CCD_LOG_RL_AT(&h->accept_rl, CC_LOG_WARN, "http",
                              "connection closed at accept: http.max_connections = %d "
                              "connections open",
                              d->cfg.http_max_connections);
                evhttp_connection_free(evcon);
            }
        }
        bufferevent_decref(bev);
    }
    h->n_fresh = 0;
}

/* accept() failed: out of descriptors (EMFILE, ENFILE) or memory. The listening socket stays
 * readable, so accept is paused for a moment instead of retried at once (which spun). */
static void accept_error(struct evconnlistener *lev, void *arg)
{
    Ccd *d = http_owner; /* the listener's argument is evhttp's */
    CcdHttp *h = d->http;
    (void)arg;
    int e = EVUTIL_SOCKET_ERROR();
    h->accept_errors++;
    CCD_LOG_RL_AT(&h->accept_rl, CC_LOG_WARN, "http",
                  "accept failed: %s; pausing accept for 250 ms (%d connections open)", strerror(e),
                  h->n_conns);
    static const struct timeval pause = {0, 250000};
    if (!evconnlistener_disable(lev) && evtimer_add(h->accept_ev, &pause))
        evconnlistener_enable(lev);
}

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
    CcdHttp *h = arg;
    (void)fd, (void)what;
    evconnlistener_enable(evhttp_bound_socket_get_listener(h->sock));
}

static void gencb(struct evhttp_request *req, void *arg)
{
    Ccd *d = arg;
    CcdHttp *h = d->http;
    CcdReq *r = h->pool;
    if (r) {
        h->pool = r->next;
        h->n_pool--;
        struct evbuffer *out = r->out;        /* drained when pooled */
        memset(r, 0, offsetof(CcdReq, path)); /* path and id are written before use */
        r->path[0] = r->id[0] = 0;
        memset(&r->query, 0, sizeof *r - offsetof(CcdReq, query));
        r->out = out;
    } else {
        r = calloc(1, sizeof *r);
        if (!r || !(r->out = evbuffer_new())) {
            free(r);
            evhttp_send_error(req, 500, "out of memory");
            return;
        }
    }
    r->d = d;
    r->req = req;
    r->route = -1;
    r->t0_ns = cc_now_ns();
    r->method = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    snprintf(r->path, sizeof r->path, "%s", path && *path ? path : "/");
    if (!conn_admit(d, evhttp_request_get_connection(req))) {
        r->close_conn = 1;
        r->retry_after = 1;
        finish(r, ccd_problem(r, 503, "too-many-connections",
                              "more than http.max_connections = %d connections",
                              d->cfg.http_max_connections));
        return;
    }
    if (query) {
        int rc = ccd_query_parse(&r->query, query);
        if (rc) {
            finish(r, rc == -ENOMEM ? ccd_problem(r, 500, "internal", "out of memory")
                                    : ccd_problem(r, 400, "bad-query",
                                                  "the query string cannot be parsed (an empty "
                                                  "name, %%00, or more than %d parameters)",
                                                  CCD_QUERY_MAX));
            return;
        }
    }
    run(r);
}

/* Each connection's bufferevent, made here so that a reply leaves in one write: libevent
 * caps a single write at 16 KiB by default, which split the default forecast reply (~16.5
 * KB) into two writev calls — two loopback transmits, two client wake-ups and an extra
 * epoll round per request. */
static struct bufferevent *new_conn_bufferevent(struct event_base *base, void *arg)
{
    CcdHttp *h = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    bufferevent_set_max_single_write(bev, HTTP_MAX_SINGLE_WRITE);
    if (h->n_fresh == h->cap_fresh) {
        int cap = h->cap_fresh ? h->cap_fresh * 2 : 16;
        struct bufferevent **f = realloc(h->fresh, (size_t)cap * sizeof *f);
        if (!f)
            return bev; /* untracked until its first request (conn_admit) */
        h->fresh = f;
        h->cap_fresh = cap;
    }
    bufferevent_incref(bev);
    h->fresh[h->n_fresh++] = bev;
    event_active(h->adopt_ev, EV_TIMEOUT, 1);
    return bev;
}

int ccd_http_open(Ccd *d, char *err, size_t errlen)
{
    CcdHttp *h = calloc(1, sizeof *h);
    if (!h)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    d->http = h;
    h->counts = calloc((size_t)(ccd_n_routes + 1) * N_STATUS, sizeof *h->counts);
    h->dur = calloc((size_t)(ccd_n_routes + 1), sizeof *h->dur);
    if (!h->counts || !h->dur || ccd_rc_open(&h->rc))
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    for (int i = 0; i <= ccd_n_routes; i++)
        ccd_hist_init(&h->dur[i], dur_le, (int)(sizeof dur_le / sizeof dur_le[0]));
    if (!(h->http = evhttp_new(d->base)))
        return cc_errf(err, errlen, -ENOMEM, "evhttp_new failed");
    int64_t body = d->cfg.http_max_body_bytes;
    evhttp_set_max_body_size(h->http, body * 2 + 1024);
    evhttp_set_max_headers_size(h->http, d->cfg.http_max_headers_bytes);
    struct timeval tv = {d->cfg.http_timeout_s, 0};
    evhttp_set_timeout_tv(h->http, &tv);
    h->header_timeout_s = d->cfg.http_header_timeout_s;
    /* each connection holds a descriptor: past the limit, accept fails (EMFILE) before
     * http.max_connections sheds anything, and Kafka's sockets and the snapshot's file
     * fail with it */
    struct rlimit nofile;
    if (!getrlimit(RLIMIT_NOFILE, &nofile) && nofile.rlim_cur != RLIM_INFINITY &&
        (rlim_t)d->cfg.http_max_connections + HTTP_FD_MARGIN > nofile.rlim_cur)
        LOG_WARN("http",
                 "http.max_connections = %d is above the descriptor limit (RLIMIT_NOFILE %llu) "
                 "less %d for Kafka, the snapshot and logs: raise LimitNOFILE / ulimit -n, or "
                 "lower http.max_connections",
                 d->cfg.http_max_connections, (unsigned long long)nofile.rlim_cur, HTTP_FD_MARGIN);
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(h->http, gencb, d);
    if (!(h->adopt_ev = event_new(d->base, -1, 0, adopt_conns, d)) ||
        !(h->accept_ev = evtimer_new(d->base, accept_resume, h)))
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    evhttp_set_bevcb(h->http, new_conn_bufferevent, h);
    h->sock =
        evhttp_bind_socket_with_handle(h->http, d->cfg.http_bind, (ev_uint16_t)d->cfg.http_port);
    if (!h->sock) {
        int e = errno ? errno : EADDRINUSE; /* bind/listen's, kept by libevent's cleanup */
        return cc_errf(err, errlen, -e, "cannot listen on %s:%d: %s%s", d->cfg.http_bind,
                       d->cfg.http_port, strerror(e),
                       e == EADDRINUSE ? " (another cellcastd? change http.bind or http.port)"
                       : e == EACCES   ? " (a port below 1024 needs privileges: http.port)"
                                       : " (http.bind, http.port)");
    }
    http_owner = d;
    evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(h->sock), accept_error);
    /* Replies go out in one write; without TCP_NODELAY a reply larger than one segment
     * meets the client's delayed ACK (40 ms per request). Accepted sockets inherit it. */
    int one = 1;
    setsockopt(evhttp_bound_socket_get_fd(h->sock), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_storage ss;
    ev_socklen_t sl = sizeof ss;
    h->port = d->cfg.http_port;
    if (!getsockname(evhttp_bound_socket_get_fd(h->sock), (struct sockaddr *)&ss, &sl)) {
        if (ss.ss_family == AF_INET)
            h->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            h->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return 0;
}

int ccd_http_port(const Ccd *d) { return d->http ? d->http->port : 0; }

void ccd_http_close(Ccd *d)
{
    CcdHttp *h = d->http;
    if (!h)
        return;
    /* parked requests get their answer now (the cells are idle after the drain) */
    ccd_http_retry_deferred(d);
    while (h->deferred) {
        CcdReq *r = h->deferred;
        h->deferred = r->next;
        r->retry_after = 1;
        finish(r, ccd_problem(r, 503, "shutting-down", "the daemon is shutting down"));
    }
    adopt_conns(-1, 0, d); /* drops the references */
    if (h->http)
        evhttp_free(h->http);
    if (h->adopt_ev)
        event_free(h->adopt_ev);
    if (h->accept_ev)
        event_free(h->accept_ev);
    free(h->fresh);
    while (h->pool) {
        CcdReq *r = h->pool;
        h->pool = r->next;
        evbuffer_free(r->out);
        free(r);
    }
    ccd_rc_close(&h->rc);
    free(h->conns);
    free(h->guards);
    free(h->counts);
    free(h->dur);
    free(h);
    d->http = NULL;
    if (http_owner == d)
        http_owner = NULL;
}

void ccd_http_counts(const Ccd *d, uint64_t *requests, int *connections, int *deferred)
{
    const CcdHttp *h = d->http;
    *requests = h ? h->requests : 0;
    *connections = h ? h->n_conns : 0;
    *deferred = h ? h->n_deferred : 0;
}

void ccd_http_count_refused_read(Ccd *d, int reason)
{
    if (d->http && reason >= 0 && reason < CCD_READ_N_REASONS)
        d->http->reads_refused[reason]++;
}

void ccd_http_metrics(Ccd *d, struct evbuffer *out)
{
    CcdHttp *h = d->http;
    uint64_t gzipped, gz_in, gz_out, hits, misses;
    ccd_rc_stats(h->rc, &gzipped, &gz_in, &gz_out, &hits, &misses);
    evbuffer_add_printf(out,
                        "# HELP cellcast_http_requests_total HTTP requests by route and status "
                        "code (route \"unmatched\": no route, or refused by libevent before "
                        "routing).\n"
                        "# TYPE cellcast_http_requests_total counter\n");
    for (int i = 0; i <= ccd_n_routes; i++)
        for (int s = 0; s < N_STATUS; s++) {
            uint64_t n = h->counts[i * N_STATUS + s];
            if (!n)
                continue;
            char code[8];
            if (s < N_STATUS - 1)
                snprintf(code, sizeof code, "%d", status_codes[s]);
            else
                snprintf(code, sizeof code, "other");
            evbuffer_add_printf(out,
                                "cellcast_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
                                i < ccd_n_routes ? ccd_routes[i].pattern : "unmatched", code,
                                (unsigned long long)n);
        }
    evbuffer_add_printf(out, "# HELP cellcast_http_request_duration_seconds Time from request "
                             "to reply, by route.\n"
                             "# TYPE cellcast_http_request_duration_seconds histogram\n");
    for (int i = 0; i <= ccd_n_routes; i++) {
        const CcdHist *hh = &h->dur[i];
        if (!hh->count)
            continue;
        const char *route = i < ccd_n_routes ? ccd_routes[i].pattern : "unmatched";
        uint64_t acc = 0;
        for (int b = 0; b < hh->n; b++) {
            acc += hh->counts[b];
            evbuffer_add_printf(
                out, "cellcast_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                route, hh->le[b], (unsigned long long)acc);
        }
        evbuffer_add_printf(
            out,
            "cellcast_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
            "cellcast_http_request_duration_seconds_sum{route=\"%s\"} %.9g\n"
            "cellcast_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
            route, (unsigned long long)hh->count, route, hh->sum, route,
            (unsigned long long)hh->count);
    }
    evbuffer_add_printf(out,
                        "# HELP cellcast_http_connections Open client connections.\n"
                        "# TYPE cellcast_http_connections gauge\ncellcast_http_connections %d\n"
                        "# HELP cellcast_http_connections_refused_total Connections closed "
                        "at accept or refused with 503 by http.max_connections.\n"
                        "# TYPE cellcast_http_connections_refused_total counter\n"
                        "cellcast_http_connections_refused_total %llu\n"
                        "# HELP cellcast_http_accept_errors_total Failed accept() calls (out "
                        "of descriptors: accept pauses 250 ms).\n"
                        "# TYPE cellcast_http_accept_errors_total counter\n"
                        "cellcast_http_accept_errors_total %llu\n"
                        "# HELP cellcast_http_header_timeouts_total Connections closed because "
                        "their request head was not complete within http.header_timeout_s.\n"
                        "# TYPE cellcast_http_header_timeouts_total counter\n"
                        "cellcast_http_header_timeouts_total %llu\n",
                        h->n_conns, (unsigned long long)(h->refused_conns + h->shed_conns),
                        (unsigned long long)h->accept_errors,
                        (unsigned long long)h->header_timeouts);
    evbuffer_add_printf(out,
                        "# HELP cellcast_http_gzip_replies_total Replies sent gzipped.\n"
                        "# TYPE cellcast_http_gzip_replies_total counter\n"
                        "cellcast_http_gzip_replies_total %llu\n"
                        "# HELP cellcast_http_gzip_bytes_total Bytes of gzipped replies before "
                        "(in) and after (out) compression.\n"
                        "# TYPE cellcast_http_gzip_bytes_total counter\n"
                        "cellcast_http_gzip_bytes_total{dir=\"in\"} %llu\n"
                        "cellcast_http_gzip_bytes_total{dir=\"out\"} %llu\n",
                        (unsigned long long)gzipped, (unsigned long long)gz_in,
                        (unsigned long long)gz_out);
    evbuffer_add_printf(out,
                        "# HELP cellcast_http_reply_cache_total Lookups of the reply cache "
                        "(history, past forecasts, batch reads, gzipped forecasts).\n"
                        "# TYPE cellcast_http_reply_cache_total counter\n"
                        "cellcast_http_reply_cache_total{result=\"hit\"} %llu\n"
                        "cellcast_http_reply_cache_total{result=\"miss\"} %llu\n",
                        (unsigned long long)hits, (unsigned long long)misses);
    evbuffer_add_printf(out,
                        "# HELP cellcast_http_reads_refused_total Series and batch reads "
                        "refused: an invalid cell id (400), more values than "
                        "http.max_read_values (413).\n"
                        "# TYPE cellcast_http_reads_refused_total counter\n"
                        "cellcast_http_reads_refused_total{reason=\"bad_cell_id\"} %llu\n"
                        "cellcast_http_reads_refused_total{reason=\"max_read_values\"} %llu\n",
                        (unsigned long long)h->reads_refused[CCD_READ_BAD_CELL_ID],
                        (unsigned long long)h->reads_refused[CCD_READ_MAX_VALUES]);
}
