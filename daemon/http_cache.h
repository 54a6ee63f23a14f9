/*
 * http_cache.h — immutable reply bodies shared by reference, gzip of replies, and a small
 * cache of rendered replies keyed by a request's text and a state version. It knows
 * nothing of requests: the HTTP chokepoint (http.c: ccd_reply_cached, the reply's finish)
 * turns a request into its text and key and serves or keeps what this file holds.
 *
 * Direct-mapped (CCD_RC_SLOTS), bodies up to CCD_RC_MAX_BODY, at most CCD_RC_MAX_TOTAL
 * bytes in all; a hit is checked against the request text kept in the slot (the key is a
 * hash). A gzip is made once per cached body, at its first hit that takes gzip, so the
 * compression runs once per version, not per request. Loop thread only.
 */
#ifndef CCD_HTTP_CACHE_H
#define CCD_HTTP_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

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

/** 1 if an Accept-Encoding value accepts gzip (a token "gzip" or "*" without q=0). */
int ccd_accepts_gzip_value(const char *accept_encoding);

/** Whether an If-None-Match value (NULL: none) names the quoted etag or is "*", by the weak
 *  comparison of RFC 9110 13.1.2 (W/"x" matches "x"). */
int ccd_etag_matches(const char *if_none_match, const char *etag);

/** The key of the reply to a request of text[0..n) at `version`. */
uint64_t ccd_rc_key(const char *text, size_t n, uint64_t version);
/** The weak ETag of the reply under `key` (the same for its gzip; the daemon's start is in
 *  it, so a restarted daemon's versions do not match a client's old ones) into buf. */
void ccd_rc_etag(const CcdReplyCache *rc, uint64_t key, char *buf, size_t n);
/** The body cached under key for that version and request text, or NULL (a miss; counted).
 *  With want_gz, its gzip when the body is long enough (made and kept at the first such
 *  hit): *is_gz says which was returned. The cache keeps its reference. */
CcdBody *ccd_rc_lookup(CcdReplyCache *rc, uint64_t key, uint64_t version, const char *text,
                       size_t n, int want_gz, int *is_gz);
/** Counts a hit served without a body (a 304). */
void ccd_rc_count_hit(CcdReplyCache *rc);
/** Keeps plain (and its gzip, may be NULL) under key, replacing the slot's reply; the
 *  cache takes its own references. Too large a body is not kept. */
void ccd_rc_keep(CcdReplyCache *rc, uint64_t key, uint64_t version, const char *text, size_t n,
                 CcdBody *plain, CcdBody *gz);
/** The gzip of p[0..n) as a new body (one reference; counted), or NULL. */
CcdBody *ccd_rc_gzip(CcdReplyCache *rc, const void *p, size_t n);

/** Counters for /metrics. */
void ccd_rc_stats(const CcdReplyCache *rc, uint64_t *gzipped, uint64_t *gzip_in, uint64_t *gzip_out,
                  uint64_t *hits, uint64_t *misses);

#endif
