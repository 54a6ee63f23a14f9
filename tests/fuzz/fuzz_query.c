/*
 * fuzz_query.c — libFuzzer target for the HTTP API's query parsing (daemon/query.c: the
 * query string, percent-decoding, kpis=) and the time parser behind since= (cc_time's RFC
 * 3339 reader). Built with `-Dfuzz=true` and clang (CC=clang). The input is a query string
 * as it follows '?'. Beyond "no crash, no leak, no UB" it checks on every input:
 *  - the parser accepts it or refuses it with -EINVAL, never anything else;
 *  - accepted: at most CCD_QUERY_MAX pairs, every key non-empty, every key findable (its
 *    first case-insensitive occurrence wins), no decoded string longer than the input;
 *  - percent-decoding round-trips: each decoded value, percent-encoded again and decoded,
 *    is itself;
 *  - kpis=: a mask only of the model's features, non-empty on success; a refused name is
 *    not one of them;
 *  - since=/until=: an RFC 3339 time that parses formats back to a time that parses to the
 *    same second.
 *
 * Run: ./fuzz_query -max_total_time=60 corpus/   (seeds: tests/data/query_corpus)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc_time.h"
#include "query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_kpis(const CcHparams *hp, const char *s)
{
    uint64_t mask;
    char bad[CC_FEATURE_NAME_MAX];
    int rc = ccd_parse_kpis(s, hp, &mask, bad, sizeof bad);
    if (!rc && (!mask || mask >> hp->n_features))
        abort();
    if (rc && rc != -ENOENT && rc != -ENAMETOOLONG)
        abort();
    if (rc == -ENOENT && bad[0] && cc_hparams_feature_index(hp, bad) >= 0)
        abort();
}

static void check_time(const char *s)
{
    int64_t u, u2;
    char buf[CC_RFC3339_LEN];
    if (cc_time_parse_rfc3339(s, strlen(s), &u))
        return;
    if (cc_time_format_rfc3339(u, buf, sizeof buf))
        return; /* outside the years the formatter writes */
    if (cc_time_parse_rfc3339(buf, strlen(buf), &u2) || u2 != u)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static CcHparams hp;
    if (!hp.n_features) {
        hp.n_features = 3;
        snprintf(hp.features[0], sizeof hp.features[0], "prb");
        snprintf(hp.features[1], sizeof hp.features[1], "thr");
        snprintf(hp.features[2], sizeof hp.features[2], "users");
    }
    if (size > 1 << 16)
        return 0;
    char *qs = malloc(size + 1);
    if (!qs)
        return 0;
    memcpy(qs, data, size);
    qs[size] = 0; /* libevent hands the query over as a C string: a NUL ends it */
    size_t len = strlen(qs);
    CcdQuery q = {0};
    int rc = ccd_query_parse(&q, qs);
    if (rc && rc != -EINVAL)
        abort();
    if (rc && (q.n || q.buf))
        abort();
    if (q.n > CCD_QUERY_MAX)
        abort();
    char *enc = malloc(3 * len + 1), *dec = malloc(3 * len + 2);
    if (!enc || !dec)
        abort();
    for (int i = 0; i < q.n; i++) {
        const char *k = q.key[i], *v = q.val[i];
        if (!k[0] || strlen(k) > len || strlen(v) > len)
            abort();
        const char *found = ccd_query_find(&q, k);
        int first = i;
        for (int j = 0; j < i; j++)
            if (!strcasecmp(q.key[j], k)) {
                first = j;
                break;
            }
        if (found != q.val[first])
            abort();
        /* percent-encode every byte of v, decode: v again */
        size_t e = 0;
        for (const char *p = v; *p; p++)
            e += (size_t)sprintf(enc + e, "%%%02X", (unsigned char)*p);
        int n = ccd_percent_decode(enc, e, dec, 1);
        if (n != (int)strlen(v) || strcmp(dec, v))
            abort();
        if (!strcasecmp(k, "kpis") || !strcasecmp(k, "kpi"))
            check_kpis(&hp, v);
        if (!strcasecmp(k, "since") || !strcasecmp(k, "until"))
            check_time(v);
    }
    free(enc);
    free(dec);
    ccd_query_free(&q);
    free(qs);
    return 0;
}
