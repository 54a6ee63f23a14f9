/* http_cache.c — shared reply bodies, gzip of replies and the reply cache; see
 * http_cache.h. */
#include "http_cache.h"

#include "cc_common.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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
    (*out)->boot = cc_fnv1a(CC_FNV1A_SEED, &ts, sizeof ts);
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

/* The gzip of p[0..n) as a new body (zlib's fastest level: the replies are repetitive and
 * this runs on the event loop), or NULL. */
CcdBody *ccd_rc_gzip(CcdReplyCache *rc, const void *p, size_t n)
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

uint64_t ccd_rc_key(const char *text, size_t n, uint64_t version)
{
    /* FNV-1a of the request's text, then the version */
    uint64_t h = cc_fnv1a(CC_FNV1A_SEED, text, n);
    return cc_fnv1a(h, &version, sizeof version);
}

static int same_req(const RcSlot *s, const char *text, size_t n)
{
    return s->req && s->req_len == n && !memcmp(s->req, text, n);
}

/* The weak ETag of the reply under `key` (weak: the same for its gzip), on the reply with
 * Cache-Control no-cache so that a browser keeps it and asks again with If-None-Match. */
void ccd_rc_etag(const CcdReplyCache *rc, uint64_t key, char *buf, size_t n)
{
    snprintf(buf, n, "W/\"%016llx\"", (unsigned long long)(key ^ rc->boot));
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

CcdBody *ccd_rc_lookup(CcdReplyCache *rc, uint64_t key, uint64_t version, const char *text,
                       size_t n, int want_gz, int *is_gz)
{
    RcSlot *s = &rc->slots[key % CCD_RC_SLOTS];
    *is_gz = 0;
    if (!s->plain || s->key != key || s->version != version || !same_req(s, text, n)) {
        rc->misses++;
        return NULL;
    }
    rc->hits++;
    if (want_gz && s->plain->len >= CCD_GZIP_MIN_BYTES && !s->gz &&
        rc->bytes + s->plain->len <= CCD_RC_MAX_TOTAL &&
        (s->gz = ccd_rc_gzip(rc, s->plain->data, s->plain->len)))
        rc->bytes += s->gz->len;
    *is_gz = want_gz && s->plain->len >= CCD_GZIP_MIN_BYTES && s->gz;
    return *is_gz ? s->gz : s->plain;
}

void ccd_rc_count_hit(CcdReplyCache *rc) { rc->hits++; }

void ccd_rc_keep(CcdReplyCache *rc, uint64_t key, uint64_t version, const char *text, size_t n,
                 CcdBody *plain, CcdBody *gz)
{
    RcSlot *s = &rc->slots[key % CCD_RC_SLOTS];
    size_t need = plain->len + (gz ? gz->len : 0);
    slot_clear(rc, s);
    if (plain->len > CCD_RC_MAX_BODY || rc->bytes + need > CCD_RC_MAX_TOTAL ||
        !(s->req = malloc(n)))
        return;
    memcpy(s->req, text, n);
    s->req_len = n;
    s->key = key;
    s->version = version;
    s->plain = plain;
    plain->refs++;
    if (gz) {
        s->gz = gz;
        gz->refs++;
    }
    rc->bytes += need;
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
