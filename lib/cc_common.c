/* cc_common.c — error formatting, logging, the clock and directory fsync shared by lib/ modules. */
#include "cc_common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int64_t cc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int cc_fsync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int n;
    if (!slash)
        n = snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        n = snprintf(dir, sizeof dir, "/");
    else
        n = snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (n < 0 || (size_t)n >= sizeof dir)
        return -ENAMETOOLONG;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}
