/*
 * cc_common.h — what every lib/ module shares: the logger callback, the error-message
 * convention and the export macro.
 *
 * Conventions of lib/ (the engine):
 *  - functions return 0 or a negative errno (-EINVAL bad argument or data, -ENOMEM out of
 *    memory, -EIO file error, -ERANGE value out of range); -EAGAIN is flow control;
 *  - human-readable detail goes into a caller-owned buffer (`char *err, size_t errlen`,
 *    either may be NULL/0) or to the logger passed in the settings;
 *  - no global state, no sockets; out of memory is never fatal: it is returned as -ENOMEM.
 */
#ifndef CC_COMMON_H
#define CC_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum CcLogLevel { CC_LOG_ERROR = 0, CC_LOG_WARN = 1, CC_LOG_INFO = 2, CC_LOG_DEBUG = 3 };

/** Formats into the caller's error buffer (if any); returns `code` for tail calls. */
int cc_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/**
 * fsyncs the directory that holds path, so that a rename into it is durable.
 * 0, -ENAMETOOLONG, or the -errno of open/fsync (some file systems refuse it).
 */
int cc_fsync_dir_of(const char *path);

/** Monotonic clock in nanoseconds. */
int64_t cc_now_ns(void);

/* FNV-1a, 64-bit: the one hash of cell ids, KPI names and model layouts (hash tables,
 * snapshot model hashes, reply versions). Fold bytes into h, starting from CC_FNV1A_SEED. */
#define CC_FNV1A_SEED 0xcbf29ce484222325ull
static inline uint64_t cc_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
static inline uint64_t cc_fnv1a_str(const char *s)
{
    uint64_t h = CC_FNV1A_SEED;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

#endif
