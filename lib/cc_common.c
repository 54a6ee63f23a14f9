/* cc_common.c — error formatting, logging and the clock shared by lib/ modules. */
#include "cc_common.h"

#include <stdio.h>
#include <time.h>

int cc_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void cc_logf(const CcLogger *log, enum CcLogLevel level, const char *fmt, ...)
{
    if (!log || !log->callback)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log->callback(log->cookie, level, buf);
}

int64_t cc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
