/* query.c — the API's query-string and KPI-list parsers; see query.h. */
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ccd_percent_decode(const char *s, size_t n, char *out, int plus)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            c = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        if (!c)
            return -EINVAL;
        out[o++] = c;
    }
    out[o] = 0;
    return (int)o;
}

void ccd_query_free(CcdQuery *q)
{
    free(q->buf);
    q->buf = NULL;
    q->n = 0;
}

int ccd_query_parse(CcdQuery *q, const char *qs)
{
    size_t len = strlen(qs);
    q->n = 0;
    /* a decoded key or value is no longer than its source; each pair adds at most one byte
     * over its source and its '&' (key NUL, value NUL; a bare key's "" value), so pairs
     * (at most CCD_QUERY_MAX) + 1 bytes more (the fuzz target found len + 2 short) */
    q->buf = malloc(len + CCD_QUERY_MAX + 2);
    if (!q->buf)
        return -ENOMEM;
    char *o = q->buf;
    const char *p = qs, *end = qs + len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if (stop > p) {
            const char *eq = memchr(p, '=', (size_t)(stop - p));
            const char *kend = eq ? eq : stop;
            if (kend == p || q->n == CCD_QUERY_MAX)
                goto fail;
            int kn = ccd_percent_decode(p, (size_t)(kend - p), o, 1);
            if (kn <= 0)
                goto fail;
            q->key[q->n] = o;
            o += kn + 1;
            int vn = eq ? ccd_percent_decode(eq + 1, (size_t)(stop - eq - 1), o, 1) : 0;
            if (vn < 0)
                goto fail;
            if (!eq)
                *o = 0;
            q->val[q->n++] = o;
            o += vn + 1;
        }
        p = stop + 1;
    }
    return 0;
fail:
    ccd_query_free(q);
    return -EINVAL;
}

int ccd_query_index(const CcdQuery *q, const char *name)
{
    for (int i = 0; i < q->n; i++)
        if (!strcasecmp(q->key[i], name))
            return i;
    return -1;
}

const char *ccd_query_find(const CcdQuery *q, const char *name)
{
    int i = ccd_query_index(q, name);
    return i >= 0 ? q->val[i] : NULL;
}

int ccd_parse_kpis(const char *s, const CcHparams *hp, uint64_t *mask, char *bad, size_t badlen)
{
    *mask = 0;
    if (badlen)
        bad[0] = 0;
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        char name[CC_FEATURE_NAME_MAX];
        if (n >= sizeof name)
            return -ENAMETOOLONG;
        memcpy(name, s, n);
        name[n] = 0;
        int f = cc_hparams_feature_index(hp, name);
        if (f < 0 || f >= 64) {
            if (badlen)
                snprintf(bad, badlen, "%s", name);
            return -ENOENT;
        }
        *mask |= 1ULL << f;
        s += n;
        if (*s == ',')
            s++;
    }
    return *mask ? 0 : -ENOENT;
}
