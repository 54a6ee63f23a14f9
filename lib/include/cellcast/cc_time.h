/*
 * cc_time.h — civil dates and RFC 3339, the one copy used by the lib parsers, the alert
 * JSON, the daemon's API and its query parameters. Proleptic Gregorian, UTC, unix seconds;
 * no gmtime/timegm (no locale, no time_t range, no TZ), after H. Hinnant's algorithms.
 */
#ifndef CC_TIME_H
#define CC_TIME_H

#include <stddef.h>
#include <stdint.h>

/** Days since 1970-01-01 of year y, month m (1..12), day d (1..31). */
int64_t cc_days_from_civil(int64_t y, int m, int d);

/** The civil date of a day count since 1970-01-01. */
void cc_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

/** 1 when y-m-d is a real date (month length and leap years checked). */
int cc_civil_valid(int64_t y, int m, int d);

/**
 * Parses an RFC 3339 date-time of exactly len bytes: `YYYY-MM-DD[Tt ]hh:mm:ss[.frac]`
 * then `Z`, `z` or `±hh:mm`. The fraction is dropped (whole seconds). 0 or -EINVAL.
 */
int cc_time_parse_rfc3339(const char *s, size_t len, int64_t *out);

/** Size of a buffer that holds any cc_time_format_rfc3339 output. */
#define CC_RFC3339_LEN 21

/**
 * Writes `YYYY-MM-DDThh:mm:ssZ` (NUL-terminated, 20 characters) into buf (cap bytes,
 * ≥ CC_RFC3339_LEN). Returns 0, or -ERANGE (years outside 0..9999, or cap too small:
 * buf then holds "" if cap > 0).
 */
int cc_time_format_rfc3339(int64_t unix_s, char *buf, size_t cap);

#endif
