/* http_cache.c — shared reply bodies, gzip of replies and the reply cache; see
 * http_cache.h. */
#include "http_cache.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/http.h>
#include <zlib.h>

typedef struct RcSlot {
    uint64_t key, version;
    char *req; /* req_text, checked on a hit (the key is a hash) */
    size_t req_len;
    CcdBody *plain, *gz; /* gz made at the first hit that takes gzip */
} RcSlot;

struct CcdReplyCache {
    z_stream z; /* reset per reply: its 256 KB of state made once */
    int z_ready;
    RcSlot slots[CCD_RC_SLOTS];
    size_t bytes;
    uint64_t gzipped, gzip_in, gzip_out, hits, misses;
    uint64_t boot; /* in every ETag: a restarted daemon's versions start again */
};

CcdBody *ccd_body_new(const void *p, size_t n)
{
    CcdBody *b = malloc(sizeof *b + n);
    if (!b)
        return NULL;
    b->refs = 1;
    b->len = n;
    memcpy(b->data, p, n);
    return b;
}

void ccd_body_unref(CcdBody *b)
{
    if (b && !--b->refs)
        free(b);
}

static void body_release(const void *data, size_t len, void *arg)
{
    (void)data, (void)len;
    ccd_body_unref(arg);
}

void ccd_body_add(struct evbuffer *out, CcdBody *b, size_t len)
{
    b->refs++;
    if (evbuffer_add_reference(out, b->data, len, body_release, b)) {
        b->refs--;
        evbuffer_add(out, b->data, len);
    }
}

int ccd_rc_open(CcdReplyCache **out)
{
    struct timespec ts;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return -ENOMEM;
    clock_gettime(CLOCK_REALTIME, &ts);
    (*out)->boot = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) * 1099511628211ULL;
    return 0;
}

static void slot_clear(CcdReplyCache *rc, RcSlot *s)
{
    rc->bytes -= (s->plain ? s->plain->len : 0) + (s->gz ? s->gz->len : 0);
    ccd_body_unref(s->plain);
    ccd_body_unref(s->gz);
    free(s->req);
    memset(s, 0, sizeof *s);
}

void ccd_rc_close(CcdReplyCache **prc)
{
    CcdReplyCache *rc = *prc;
    if (!rc)
        return;
    for (int i = 0; i < CCD_RC_SLOTS; i++)
        slot_clear(rc, &rc->slots[i]);
    if (rc->z_ready)
        deflateEnd(&rc->z);
    free(rc);
    *prc = NULL;
}

/* A q value of zero ("q=0", "q=0.0", "q=0.000") refuses the coding (RFC 9110 12.4.2). */
static int q_is_zero(const char *p, const char *end)
{
    while (p < end && *p != ';')
        p++;
    while (p < end) {
        p++; /* past ';' */
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            double q = strtod(p + 2, NULL);
            return q <= 0.0;
        }
        while (p < end && *p != ';')
            p++;
    }
    return 0;
}

int ccd_accepts_gzip_value(const char *ae)
{
    if (!ae)
        return 0;
    const char *p = ae;
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        const char *tok = p;
        while (*p && *p != ',' && *p != ';' && !isspace((unsigned char)*p))
            p++;
        size_t n = (size_t)(p - tok);
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (((n == 4 && !strncasecmp(tok, "gzip", 4)) || (n == 1 && *tok == '*')) &&
            !q_is_zero(p, end))
            return 1;
        p = end;
    }
    return 0;
}

int ccd_accepts_gzip(CcdReq *r)
{
    return ccd_accepts_gzip_value(
        evhttp_find_header(evhttp_request_get_input_headers(r->req), "Accept-Encoding"));
}

/* The gzip of p[0..n) as a new body (zlib's fastest level: the replies are repetitive and
 * this runs on the event loop), or NULL. */
static CcdBody *gzip_new(CcdReplyCache *rc, const void *p, size_t n)
{
    if (!rc->z_ready) {
        if (deflateInit2(&rc->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return NULL;
        rc->z_ready = 1;
    } else if (deflateReset(&rc->z) != Z_OK) {
        return NULL;
    }
    size_t cap = deflateBound(&rc->z, (uLong)n);
    CcdBody *b = malloc(sizeof *b + cap);
    if (!b)
        return NULL;
    rc->z.next_in = (Bytef *)(uintptr_t)p;
    rc->z.avail_in = (uInt)n;
    rc->z.next_out = (Bytef *)b->data;
    rc->z.avail_out = (uInt)cap;
    if (deflate(&rc->z, Z_FINISH) != Z_STREAM_END) {
        free(b);
        return NULL;
    }
    b->refs = 1;
    b->len = cap - rc->z.avail_out;
    rc->gzipped++;
    rc->gzip_in += n;
    rc->gzip_out += b->len;
    return b;
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

static uint64_t req_key(const char *text, size_t n, uint64_t version)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a of the request's text, then the version */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)text[i]) * 1099511628211ULL;
    return (h ^ version) * 1099511628211ULL;
}

static int same_req(const RcSlot *s, const char *text, size_t n)
{
    return s->req && s->req_len == n && !memcmp(s->req, text, n);
}

/* The weak ETag of the reply under `key` (weak: the same for its gzip), on the reply with
 * Cache-Control no-cache so that a browser keeps it and asks again with If-None-Match. */
static void etag_of(const CcdReplyCache *rc, uint64_t key, char *buf, size_t n)
{
    snprintf(buf, n, "W/\"%016llx\"", (unsigned long long)(key ^ rc->boot));
}

static void add_etag(CcdReq *r, const char *etag)
{
    evhttp_add_header(evhttp_request_get_output_headers(r->req), "ETag", etag);
    r->cache_control = "no-cache";
}

int ccd_etag_matches(const char *inm, const char *etag)
{
    size_t n = strlen(etag);
    while (inm && *inm) {
        while (*inm == ',' || isspace((unsigned char)*inm))
            inm++;
        if (*inm == '*')
            return 1;
        if (!strncmp(inm, "W/", 2))
            inm += 2;
        if (!strncmp(inm, etag, n)) /* quoted: "ab" is no prefix of "abc" */
            return 1;
        while (*inm && *inm != ',')
            inm++;
    }
    return 0;
}

int ccd_reply_cached(CcdReq *r, uint64_t version)
{
    CcdReplyCache *rc = ccd_http_rc(r->d);
    char etag[24];
    size_t tlen;
    const char *text = rc ? req_text(r, r->query_used, &tlen) : NULL;
    if (!text)
        return 0;
    uint64_t key = req_key(text, tlen, version);
    RcSlot *s = &rc->slots[key % CCD_RC_SLOTS];
    etag_of(rc, key, etag, sizeof etag);
    if (r->method == EVHTTP_REQ_GET &&
        ccd_etag_matches(
            evhttp_find_header(evhttp_request_get_input_headers(r->req), "If-None-Match"),
            etag + 2 /* past W/ */)) {
        /* the client holds this reply: the key names request and version, so no need for
         * the body to be in the cache */
        rc->hits++; /* a 304 counts as a hit */
        add_etag(r, etag);
        return ccd_text(r, 304, "application/json");
    }
    if (!s->plain || s->key != key || s->version != version || !same_req(s, text, tlen)) {
        rc->misses++;
        r->rc_want = 1;
        r->rc_query_used = r->query_used;
        r->rc_key = key;
        r->rc_version = version;
        return 0;
    }
    rc->hits++;
    add_etag(r, etag);
    int gz = s->plain->len >= CCD_GZIP_MIN_BYTES && ccd_accepts_gzip(r);
    if (gz && !s->gz && rc->bytes + s->plain->len <= CCD_RC_MAX_TOTAL &&
        (s->gz = gzip_new(rc, s->plain->data, s->plain->len)))
        rc->bytes += s->gz->len;
    gz = gz && s->gz;
    ccd_body_add(r->out, gz ? s->gz : s->plain, gz ? s->gz->len : s->plain->len);
    r->gz_ready = gz;
    return ccd_text(r, 200, "application/json");
}

/* Keeps the reply's body (plain, and gz when made) in its slot. */
static void keep(CcdReplyCache *rc, CcdReq *r, CcdBody *plain, CcdBody *gz)
{
    RcSlot *s = &rc->slots[r->rc_key % CCD_RC_SLOTS];
    size_t need = plain->len + (gz ? gz->len : 0), tlen;
    const char *text = req_text(r, r->rc_query_used, &tlen);
    slot_clear(rc, s);
    if (!text || plain->len > CCD_RC_MAX_BODY || rc->bytes + need > CCD_RC_MAX_TOTAL ||
        !(s->req = malloc(tlen)))
        return;
    memcpy(s->req, text, tlen);
    s->req_len = tlen;
    s->key = r->rc_key;
    s->version = r->rc_version;
    s->plain = plain;
    plain->refs++;
    if (gz) {
        s->gz = gz;
        gz->refs++;
    }
    rc->bytes += need;
}

int ccd_rc_finish(CcdReplyCache *rc, CcdReq *r, int status)
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
        etag_of(rc, r->rc_key, etag, sizeof etag);
        add_etag(r, etag);
    }
    if (!want_gz && !keep_it)
        return 0;
    const unsigned char *p = evbuffer_pullup(r->out, -1);
    if (!p)
        return 0;
    CcdBody *plain = keep_it ? ccd_body_new(p, n) : NULL;
    CcdBody *gz = want_gz ? gzip_new(rc, p, n) : NULL;
    if (plain)
        keep(rc, r, plain, gz);
    if (gz) {
        evbuffer_drain(r->out, n);
        ccd_body_add(r->out, gz, gz->len);
    }
    ccd_body_unref(plain);
    ccd_body_unref(gz);
    return gz != NULL;
}

void ccd_rc_stats(const CcdReplyCache *rc, uint64_t *gzipped, uint64_t *gzip_in, uint64_t *gzip_out,
                  uint64_t *hits, uint64_t *misses)
{
    *gzipped = rc ? rc->gzipped : 0;
    *gzip_in = rc ? rc->gzip_in : 0;
    *gzip_out = rc ? rc->gzip_out : 0;
    *hits = rc ? rc->hits : 0;
    *misses = rc ? rc->misses : 0;
}
