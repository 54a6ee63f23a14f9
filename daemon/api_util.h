/*
 * api_util.h — the reply builders every handler uses (api_util.c), whatever file it is
 * in: number and time formatting, a growable string for replies built
 * piece by piece, and the common query parameters. Loop thread only.
 */
#ifndef CCD_API_UTIL_H
#define CCD_API_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "cc_common.h"
#include "http.h"

/** Inverse standard normal CDF. */
double ccd_probit(double p);
/** RFC 3339 UTC of unix seconds (the number itself outside years 0..9999). */
void ccd_rfc3339(int64_t unix_s, char *buf, size_t n);
/** A finite number with 7 significant digits, or null. Returns its length. */
int ccd_fmt_num(char *buf, size_t n, double v);

/** A growable string for replies built piece by piece (one evbuffer_add at the end);
 *  oom is set (and later additions dropped) when it cannot grow. */
typedef struct CcdSb {
    char *p;
    size_t n, cap;
    int oom;
} CcdSb;

char *ccd_sb_room(CcdSb *b, size_t need);
void ccd_sb_add(CcdSb *b, const char *s, size_t len);
void ccd_sb_str(CcdSb *b, const char *s);
void ccd_sb_num(CcdSb *b, double v);
void ccd_sb_int(CcdSb *b, long long v);
/** A quoted RFC 3339 time. */
void ccd_sb_ts(CcdSb *b, int64_t unix_s);
/** A quoted, escaped JSON string. */
void ccd_sb_jstr(CcdSb *b, const char *s);
/** A quoted, escaped JSON string into an evbuffer (names: cut at CC_FEATURE_NAME_MAX). */
void ccd_evbuffer_jstr(struct evbuffer *b, const char *s);
/** Loop-thread scratch for copies of published forecasts: n floats, NULL without memory. */
float *ccd_scratch_floats(size_t n);
/** The loop thread's reply buffer, emptied (one reply at a time). */
CcdSb *ccd_reply_sb(void);
/** Replies 200 with b and a newline as the JSON body (500 when b could not grow). */
int ccd_sb_reply(CcdReq *r, CcdSb *b);

/** Looks up {id}: 1 found, else fills a 400/404 and returns its status as negative. */
int ccd_find_cell(CcdReq *r, CcdCell **out);
/** since=: unix seconds or RFC 3339 (cc_time); 0 ok (absent: INT64_MIN), or a problem
 *  status. */
int ccd_query_since(CcdReq *r, int64_t *since);
/** Integer parameter: 0 ok, -1 absent, -2 malformed. */
int ccd_query_int(CcdReq *r, const char *name, long long *out);
/** kpis=a,b into a feature mask (all when absent); 0 or a problem status. */
int ccd_query_kpis(CcdReq *r, uint64_t *mask);

/** The z of a central interval of `level` in (0, 1): finite up to 1 - 2^-53. */
double ccd_level_z(double level);
/** The KPI's physical bounds from alerts.kpis (<kpi>.min / <kpi>.max, used when
 *  min < max): lo, hi (F), -inf / +inf when not given. */
void ccd_kpi_bounds(const Ccd *d, double *lo, double *hi);

/** A time parameter (unix seconds or RFC 3339) into *out (absent: `absent`); 0 or a
 *  problem status. */
int ccd_query_time(CcdReq *r, const char *name, int64_t absent, int64_t *out);
/** level=: 0 (absent: forecast.level) or a problem status. */
int ccd_query_level(CcdReq *r, double *level);

/** Folds v into the version h (cc_fnv1a over its bytes). */
static inline uint64_t ccd_fold(uint64_t h, uint64_t v) { return cc_fnv1a(h, &v, sizeof v); }
/** The version of what replies about cell c show (http_cache.h): folds its serial and
 *  publish sequence into h (start from ccd_version_seed). */
uint64_t ccd_cell_version(Ccd *d, const CcdCell *c, uint64_t h);
/** The start of a version: the daemon's reloads (KPI bounds, model). */
uint64_t ccd_version_seed(const Ccd *d);

#endif
