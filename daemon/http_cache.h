/*
 * http_cache.h — immutable reply bodies shared by reference, gzip of replies, and a small
 * cache of rendered replies keyed by request and state version, for the HTTP chokepoint
 * (http.c) and the handlers (api.c, api_series.c).
 *
 * A handler whose reply depends only on its request (path and query) and on a version of
 * the state it reads (e.g. the cells' publish sequence numbers) calls ccd_reply_cached:
 * when the cache holds the reply of that request at that version it is served by reference
 * (already gzipped when the client takes gzip: the compression runs once per version, not
 * per request); otherwise the handler renders as usual and the chokepoint keeps what it
 * rendered. Direct-mapped (CCD_RC_SLOTS), bodies up to CCD_RC_MAX_BODY, at most
 * CCD_RC_MAX_TOTAL bytes in all. Loop thread only.
 *
 * Such a reply carries a weak ETag (request, version and the daemon's start) and
 * Cache-Control: no-cache, so a client that polls asks with If-None-Match and gets a 304
 * without a body while the version has not moved: what a dashboard's refresh that finds
 * nothing new costs is then the request's parsing and headers.
 */
#ifndef CCD_HTTP_CACHE_H
#define CCD_HTTP_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "http.h"

#define CCD_RC_SLOTS 256
#define CCD_RC_MAX_BODY (4u << 20)
#define CCD_RC_MAX_TOTAL (64u << 20)
/* JSON bodies at least this long are gzipped for a client that accepts it: below, the
 * header and the CPU cost more than the bytes saved. */
#define CCD_GZIP_MIN_BYTES 1024

/** An immutable, reference-counted body. */
typedef struct CcdBody {
    int refs;
    size_t len;
    char data[];
} CcdBody;

/** A body holding a copy of p[0..n) (one reference), or NULL. */
CcdBody *ccd_body_new(const void *p, size_t n);
void ccd_body_unref(CcdBody *b);
/** Adds b[0..len) to out by reference (a copy when libevent refuses); len ≤ b->len. */
void ccd_body_add(struct evbuffer *out, CcdBody *b, size_t len);

typedef struct CcdReplyCache CcdReplyCache;
int ccd_rc_open(CcdReplyCache **out);
void ccd_rc_close(CcdReplyCache **rc);

/** Whether the request's client takes gzip (Accept-Encoding: gzip, not q=0). */
int ccd_accepts_gzip(CcdReq *r);
/** 1 if an Accept-Encoding value accepts gzip (a token "gzip" or "*" without q=0). */
int ccd_accepts_gzip_value(const char *accept_encoding);

/** Whether an If-None-Match value (NULL: none) names the quoted etag or is "*", by the weak
 *  comparison of RFC 9110 13.1.2 (W/"x" matches "x"). */
int ccd_etag_matches(const char *if_none_match, const char *etag);

/** Serves the request from the cache when it holds its reply at `version`: returns 200 (the
 *  handler returns it), or 304 when the client's If-None-Match names that reply (a GET,
 *  cached or not), else 0 and the chokepoint keeps the reply the handler renders. */
int ccd_reply_cached(CcdReq *r, uint64_t version);

/** For the chokepoint, before the reply goes: gzips a JSON body for a client that takes it
 *  and keeps a 200 reply of a request that asked (ccd_reply_cached). Returns 1 when the body
 *  is gzipped (Content-Encoding: gzip to add). */
int ccd_rc_finish(CcdReplyCache *rc, CcdReq *r, int status);

/** The chokepoint's cache (http.c). */
CcdReplyCache *ccd_http_rc(const Ccd *d);

/** Counters for /metrics. */
void ccd_rc_stats(const CcdReplyCache *rc, uint64_t *gzipped, uint64_t *gzip_in, uint64_t *gzip_out,
                  uint64_t *hits, uint64_t *misses);

#endif
