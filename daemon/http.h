/*
 * http.h — cellcastd's HTTP server (libevent evhttp) and its ONE chokepoint per request:
 *
 *   accept → connection limit → query string (query.h) → route (path pattern, then method:
 *   404 / 405 + Allow; HEAD runs the GET handler and its reply goes without the body) →
 *   handler (validates its parameters, runs, fills the body) → reply exactly once →
 *   count by route and status, time by route.
 *
 * Every error is `application/problem+json` (RFC 9457): {"type", "title", "status",
 * "detail", "instance"}. A handler returns the HTTP status it filled (ccd_json,
 * ccd_problem, ccd_text), or CCD_DEFER when it needs a cell the worker is stepping right
 * now: the request is parked and re-run after the batch completes (ccd_http_retry_deferred;
 * libevent keeps a parked request valid even if its client goes away).
 *
 * Also there, for every route: CORS (http.cors_origins: Access-Control-Allow-Origin on the
 * replies to a listed Origin, OPTIONS preflights answered) and gzip of JSON replies of 1 KB
 * or more to a client that sends Accept-Encoding: gzip (zlib).
 *
 * Limits (config http.*): body size (a larger POST gets 413; libevent itself refuses
 * bodies past 2 × the limit with a 413, problem+json too: see evhttp_send_error in http.c),
 * header block size, connections (a request
 * arriving on a connection past the limit gets 503 and the connection is closed),
 * read/write timeouts. Binds 127.0.0.1 by default.
 */
#ifndef CCD_HTTP_H
#define CCD_HTTP_H

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "cellcastd.h"
#include "query.h"

#define CCD_DEFER (-1)

typedef struct CcdReq CcdReq;
typedef int (*CcdHandler)(CcdReq *r);

typedef struct CcdRoute {
    const char *pattern; ///< "/v1/cells/{id}/forecast": {id} matches one path segment
    int methods;         ///< EVHTTP_REQ_GET | ...
    CcdHandler fn;
    const char *summary;
} CcdRoute;

struct CcdReq {
    Ccd *d;
    struct evhttp_request *req;
    enum evhttp_cmd_type method;
    int route;       ///< index in ccd_routes, -1 none
    char path[1024]; ///< path as sent (percent-encoded)
    char id[256];    ///< {id} capture, decoded
    CcdQuery query;  ///< the decoded query string (query.h)
    /* bit i: pair i of query was read by the handler (ccd_query); the reply cache keys a
     * reply by the pairs read, so that parameters no handler reads are no cache bypass */
    uint32_t query_used, rc_query_used;
    struct evbuffer *out;
    const char *content_type;
    const char *allow; ///< Allow header for 405
    int retry_after;   ///< Retry-After seconds for 503, 0 none
    const char *cors;  ///< Access-Control-Allow-Origin to send (http.cors_origins), NULL none
    int preflight;     ///< an OPTIONS preflight answered by the chokepoint
    int rc_want;       ///< keep this reply in the reply cache (http_cache.h) under:
    uint64_t rc_key, rc_version;
    int gz_ready; ///< the body is gzipped already (served from the reply cache)
    int close_conn;
    const char *cache_control; ///< Cache-Control, NULL: no-store (dashboard.c sets its own)
    int64_t t0_ns;
    int deferrals;
    CcdReq *next;
};

/* Defined in api.c. */
extern const CcdRoute ccd_routes[];
extern const int ccd_n_routes;

/** Replies (to be returned by the handler): JSON (steals o), problem+json, plain text. */
int ccd_json(CcdReq *r, int status, json_t *o);
int ccd_problem(CcdReq *r, int status, const char *slug, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/** A problem+json with extension members (RFC 9457 3.2): those of `extra` (stolen, may be
 *  NULL) besides type, title, status, detail and instance. */
int ccd_problem_ext(CcdReq *r, int status, const char *slug, json_t *extra, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int ccd_text(CcdReq *r, int status, const char *ctype);

/** The request's body (contiguous, owned by the request) into *body, *len: 0, or the 413
 *  problem's status (returned by the handler) when it is longer than http.max_body_bytes. */
int ccd_request_body(CcdReq *r, const char **body, size_t *len);

/** Whether the request's client takes gzip (Accept-Encoding: gzip, not q=0). */
int ccd_accepts_gzip(CcdReq *r);

/** The reply cache for a handler whose reply depends only on its request (path and the query
 *  parameters it read) and on a version of the state it reads (e.g. the cells' publish
 *  sequence numbers): when the cache holds that reply at that version it is served by
 *  reference (already gzipped for a client that takes gzip): returns 200, which the handler
 *  returns; 304 when the client's If-None-Match names that reply (a GET, cached or not);
 *  else 0: the handler renders as usual and the chokepoint keeps what it rendered. Such a
 *  reply carries a weak ETag (request, version, the daemon's start) and Cache-Control:
 *  no-cache, so a polling client that finds nothing new costs the request's parsing. */
int ccd_reply_cached(CcdReq *r, uint64_t version);

/** Query parameter (decoded) or NULL. */
const char *ccd_query(CcdReq *r, const char *name);

/** Writes the HTTP metrics (requests by route/status, durations) in Prometheus text. */
void ccd_http_metrics(Ccd *d, struct evbuffer *out);
/** Requests served, connections open, requests parked. */
void ccd_http_counts(const Ccd *d, uint64_t *requests, int *connections, int *deferred);

/** Why a series read was refused (cellcast_http_reads_refused_total{reason}). */
enum { CCD_READ_BAD_CELL_ID, CCD_READ_MAX_VALUES, CCD_READ_N_REASONS };
/** Counts a refused read. */
void ccd_http_count_refused_read(Ccd *d, int reason);

#endif
