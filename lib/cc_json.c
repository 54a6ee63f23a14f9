/* cc_json.c — the bounded JSON writer (see cc_json.h). */
#include "cc_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cc_time.h"

CcJsonBuf cc_json_buf(char *buf, size_t cap)
{
    if (buf && cap)
        buf[0] = 0;
    return (CcJsonBuf){buf, buf ? cap : 0, 0};
}

static void vput(CcJsonBuf *j, const char *fmt, va_list ap)
{
    size_t room = j->len < j->cap ? j->cap - j->len : 0;
    int n = vsnprintf(room ? j->p + j->len : NULL, room, fmt, ap);
    if (n > 0)
        j->len += (size_t)n;
}

void cc_json_printf(CcJsonBuf *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vput(j, fmt, ap);
    va_end(ap);
}

size_t cc_json_escape(char *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c < 0x20) {
            memcpy(p, "\\u00", 4);
            p[4] = hex[c >> 4];
            p[5] = hex[c & 15];
            p += 6;
        } else {
            *p++ = (char)c;
        }
    }
    return (size_t)(p - out);
}

void cc_json_strn(CcJsonBuf *j, const char *s, size_t n)
{
    cc_json_printf(j, "\"");
    size_t room = j->len < j->cap ? j->cap - j->len : 0;
    if (room > CC_JSON_ESCAPED_MAX(n)) { /* it fits with its NUL: escaped in place */
        j->len += cc_json_escape(j->p + j->len, s, n);
        j->p[j->len] = 0;
    } else { /* near the end: in pieces, counting what it would have needed */
        char tmp[CC_JSON_ESCAPED_MAX(32)];
        for (size_t i = 0; i < n; i += 32) {
            size_t k = cc_json_escape(tmp, s + i, n - i < 32 ? n - i : 32);
            cc_json_printf(j, "%.*s", (int)k, tmp);
        }
    }
    cc_json_printf(j, "\"");
}

void cc_json_str(CcJsonBuf *j, const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    cc_json_strn(j, s, n);
}

void cc_json_num(CcJsonBuf *j, double v)
{
    if (isfinite(v))
        cc_json_printf(j, "%.9g", v);
    else
        cc_json_printf(j, "null");
}

void cc_json_time(CcJsonBuf *j, int64_t unix_s)
{
    char b[CC_RFC3339_LEN];
    if (cc_time_format_rfc3339(unix_s, b, sizeof b) == 0)
        cc_json_printf(j, "\"%s\"", b);
    else
        cc_json_printf(j, "null");
}

int cc_json_fits(const CcJsonBuf *j) { return j->len < j->cap; }
