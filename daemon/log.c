/* log.c — one line shape to stderr for cellcastd; see log.h. */
#include "log.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc_time.h"
#include "utf8.h"

int ccd_log_level = CC_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const int syslog_prio[] = {3, 4, 6, 7};
static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;

int ccd_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, level_names[i]))
            return i;
    if (!strcmp(name, "warning"))
        return CC_LOG_WARN;
    return -1;
}

const char *ccd_log_level_name(int level)
{
    return level >= 0 && level < 4 ? level_names[level] : "?";
}

static void emit(int level, const char *sys, const char *msg)
{
    static int journal = -1;
    if (journal < 0)
        journal = getenv("JOURNAL_STREAM") != NULL;
    if (level < 0)
        level = 0;
    if (level > 3)
        level = 3;
    char line[2048];
    size_t n = 0;
    if (journal) {
        n = (size_t)snprintf(line, sizeof line, "<%d>%-5s %s: ", syslog_prio[level],
                             level_names[level], sys);
    } else {
        /* cc_time's seconds with the milliseconds in front of its Z */
        struct timespec ts;
        char sec[CC_RFC3339_LEN];
        clock_gettime(CLOCK_REALTIME, &ts);
        cc_time_format_rfc3339((int64_t)ts.tv_sec, sec, sizeof sec);
        n = (size_t)snprintf(line, sizeof line, "%.19s.%03dZ %-5s %s: ", sec,
                             (int)(ts.tv_nsec / 1000000), level_names[level], sys);
    }
    /* One line of UTF-8 text: control characters escaped (a message carrying user data stays
     * one line) and so is each byte that is not UTF-8 (journald keeps a line that is not as
     * a blob that journalctl does not print); a backslash is written \\, so that the text
     * "\x0a" in a name does not read as an escaped newline. */
    size_t left = strlen(msg);
    for (const char *p = msg; *p && n + 5 < sizeof line;) {
        unsigned char c = (unsigned char)*p;
        size_t k = ccd_utf8_seq_len(p, left);
        if (c < 0x20 || c == 0x7f || !k) {
            n += (size_t)snprintf(line + n, sizeof line - n, "\\x%02x", c);
            k = 1;
        } else if (c == '\\') {
            line[n++] = '\\';
            line[n++] = '\\';
        } else if (n + k + 1 < sizeof line) {
            memcpy(line + n, p, k);
            n += k;
        } else
            break; /* no room for the whole character */
        p += k;
        left -= k;
    }
    line[n++] = '\n';
    fwrite(line, 1, n, stderr); /* stderr is unbuffered: one write per line */
}

void ccd_log_write(int level, const char *sys, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emit(level, sys, msg);
}

int ccd_log_rl_allow(CcdRateLimit *rl, int level, const char *sys)
{
    const int burst = 5;
    const int64_t period = 10 * 1000000000LL;
    int64_t now = cc_now_ns();
    int allow, flushed = 0;
    pthread_mutex_lock(&rl_lock);
    if (!rl->window_start_ns || now - rl->window_start_ns >= period) {
        flushed = rl->suppressed;
        rl->window_start_ns = now;
        rl->printed = 0;
        rl->suppressed = 0;
    }
    allow = rl->printed < burst;
    if (allow)
        rl->printed++;
    else
        rl->suppressed++;
    pthread_mutex_unlock(&rl_lock);
    if (flushed)
        ccd_log_write(level, sys, "(%d similar messages suppressed)", flushed);
    return allow;
}

static void libevent_callback(int severity, const char *msg)
{
    int level = severity >= EVENT_LOG_ERR    ? CC_LOG_ERROR
                : severity == EVENT_LOG_WARN ? CC_LOG_WARN
                : severity == EVENT_LOG_MSG  ? CC_LOG_INFO
                                             : CC_LOG_DEBUG;
    if (level <= ccd_log_level)
        emit(level, "libevent", msg);
}

void ccd_log_route_libevent(void) { event_set_log_callback(libevent_callback); }
