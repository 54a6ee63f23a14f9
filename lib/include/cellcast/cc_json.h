/*
 * cc_json.h — the one hand-written JSON writer: a bounded buffer that never overflows and
 * counts what it would have needed (snprintf-style), for the hot paths that do not build
 * jansson trees (alert events, the forecast reply, history rows). Everything else uses
 * jansson.
 */
#ifndef CC_JSON_H
#define CC_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct CcJsonBuf {
    char *p;    ///< output; may be NULL with cap 0 to measure
    size_t cap; ///< bytes at p
    size_t len; ///< bytes written or needed so far; > cap - 1 means it did not fit
} CcJsonBuf;

/** The most bytes cc_json_escape writes for n bytes of input. */
#define CC_JSON_ESCAPED_MAX(n) (6 * (size_t)(n))

/** The one JSON string escaping of the tree: s[0..n) into out, which has room for
 *  CC_JSON_ESCAPED_MAX(n) bytes, without the quotes and without a NUL; `"`, `\` and the
 *  control characters are escaped (\u00XX), UTF-8 passes through. Returns the length. */
size_t cc_json_escape(char *out, const char *s, size_t n);

/** A writer over buf[cap]; buf[0] is set to "" when cap > 0. */
CcJsonBuf cc_json_buf(char *buf, size_t cap);

/** printf into the buffer (for punctuation, keys and integers). */
void cc_json_printf(CcJsonBuf *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** A quoted, escaped string (`"`, `\` and control characters; UTF-8 passes through). */
void cc_json_str(CcJsonBuf *j, const char *s);

/** Like cc_json_str for n bytes of s (no NUL needed). */
void cc_json_strn(CcJsonBuf *j, const char *s, size_t n);

/** A number with 9 significant digits, or null when not finite. */
void cc_json_num(CcJsonBuf *j, double v);

/** A quoted RFC 3339 UTC time of unix seconds, or null outside years 0..9999. */
void cc_json_time(CcJsonBuf *j, int64_t unix_s);

/** 1 when everything written so far fit (with its NUL). */
int cc_json_fits(const CcJsonBuf *j);

#endif
