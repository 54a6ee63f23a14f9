/* cc_json.c — the bounded JSON writer (see cc_json.h). */
#include "cc_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

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

void cc_json_strn(CcJsonBuf *j, const char *s, size_t n)
{
    cc_json_printf(j, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            cc_json_printf(j, "\\%c", c);
        else if (c < 0x20)
            cc_json_printf(j, "\\u%04x", c);
        else
            cc_json_printf(j, "%c", c);
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
