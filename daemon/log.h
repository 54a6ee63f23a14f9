/*
 * log.h — cellcastd's one log line shape, to stderr:
 *
 *   2026-11-21T19:04:05.123Z info  http: listening on 127.0.0.1:8080
 *
 * (UTC time, level, subsystem, message; one line of UTF-8 text: control characters and
 * bytes that are not UTF-8 escaped as \xNN, so an id from outside cannot forge a line). Under
 * systemd (JOURNAL_STREAM set) the time is left to journald and the line starts with the
 * sd-daemon priority prefix instead (`<6>info  http: ...`), so `journalctl -p warning`
 * filters by level. A level filter is checked before anything is formatted.
 *
 * The rate-limited variants print at most 5 lines per 10 seconds per call site
 * (CCD_LOG_RL) or per limiter the caller keeps (CCD_LOG_RL_AT: one per kind of message),
 * and then one summary line "(N similar messages suppressed)". libevent's own logs are
 * routed here (ccd_log_route_libevent).
 */
#ifndef CCD_LOG_H
#define CCD_LOG_H

#include <stdint.h>

#include "cc_common.h"

/* Levels are lib's: CC_LOG_ERROR < CC_LOG_WARN < CC_LOG_INFO < CC_LOG_DEBUG. */
extern int ccd_log_level;

/** "error", "warn", "info", "debug" → level; -1 if unknown. */
int ccd_log_level_parse(const char *name);
const char *ccd_log_level_name(int level);

void ccd_log_write(int level, const char *sys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CCD_LOG(level, sys, ...)                                                                   \
    do {                                                                                           \
        if ((level) <= ccd_log_level)                                                              \
            ccd_log_write((level), (sys), __VA_ARGS__);                                            \
    } while (0)
#define LOG_ERROR(sys, ...) CCD_LOG(CC_LOG_ERROR, sys, __VA_ARGS__)
#define LOG_WARN(sys, ...) CCD_LOG(CC_LOG_WARN, sys, __VA_ARGS__)
#define LOG_INFO(sys, ...) CCD_LOG(CC_LOG_INFO, sys, __VA_ARGS__)
#define LOG_DEBUG(sys, ...) CCD_LOG(CC_LOG_DEBUG, sys, __VA_ARGS__)

/** Per-call-site state of the rate limiter. */
typedef struct CcdRateLimit {
    int64_t window_start_ns;
    int printed, suppressed;
} CcdRateLimit;

/** Returns 1 if a line may be printed now (and prints the pending "suppressed" summary). */
int ccd_log_rl_allow(CcdRateLimit *rl, int level, const char *sys);

/** At most 5 lines per 10 s per limiter rl (a CcdRateLimit *). */
#define CCD_LOG_RL_AT(rl, level, sys, ...)                                                         \
    do {                                                                                           \
        if ((level) <= ccd_log_level && ccd_log_rl_allow((rl), (level), (sys)))                    \
            ccd_log_write((level), (sys), __VA_ARGS__);                                            \
    } while (0)

/** At most 5 lines per 10 s per call site. */
#define CCD_LOG_RL(level, sys, ...)                                                                \
    do {                                                                                           \
        static CcdRateLimit ccd_rl_;                                                               \
        CCD_LOG_RL_AT(&ccd_rl_, (level), (sys), __VA_ARGS__);                                      \
    } while (0)

/** Sends libevent's internal messages through this logger. */
void ccd_log_route_libevent(void);

#endif
