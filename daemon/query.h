/*
 * query.h — the HTTP API's query-string parser and the parameter parsers that need no
 * daemon state, kept free of libevent so that tests/fuzz/fuzz_query.c drives exactly the code the
 * API runs.
 *
 * A query string is split at '&' into key[=value] pairs, each percent-decoded ('+' is a
 * space); a key without '=' has the value "" (`?active`). Refused (-EINVAL): an empty key,
 * a decoded NUL (%00, which would cut the string short), more than CCD_QUERY_MAX pairs.
 * Empty pairs ("a=1&&b=2") are skipped; the first of repeated keys wins; names match
 * without regard to case (as libevent's evhttp_find_header, which this replaced).
 */
#ifndef CCD_QUERY_H
#define CCD_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "cc_model.h"

#define CCD_QUERY_MAX 32

typedef struct CcdQuery {
    char *buf; ///< decoded keys and values, NUL-separated (owned)
    int n;
    const char *key[CCD_QUERY_MAX];
    const char *val[CCD_QUERY_MAX];
} CcdQuery;

/** Parses qs (without the '?') into q (zeroed by the caller or by a previous free).
 *  0, -EINVAL (malformed, see above; q is left empty) or -ENOMEM. */
int ccd_query_parse(CcdQuery *q, const char *qs);
/** Frees the pairs; q can be parsed into again. */
void ccd_query_free(CcdQuery *q);
/** The index of name's pair (the first), or -1. */
int ccd_query_index(const CcdQuery *q, const char *name);
/** The decoded value of name, or NULL. */
const char *ccd_query_find(const CcdQuery *q, const char *name);

/** Percent-decodes s[0..n) into out (room for n + 1 bytes), '+' as space when plus; a '%'
 *  not followed by two hex digits is kept as is. Returns the decoded length, or -EINVAL
 *  if it decodes a NUL. */
int ccd_percent_decode(const char *s, size_t n, char *out, int plus);

/** kpis=a,b,...: the mask of the named model features. 0, -ENOENT (a name the model does
 *  not have, or an empty list; its name in bad), -ENAMETOOLONG. */
int ccd_parse_kpis(const char *s, const CcHparams *hp, uint64_t *mask, char *bad, size_t badlen);

#endif
