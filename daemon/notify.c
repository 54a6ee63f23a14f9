/* notify.c — sd_notify by the documented datagram protocol; see notify.h. */
#include "notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cc_common.h"

struct CcdNotify {
    int fd; ///< -1 when disabled
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_usec;
};

int ccd_notify_open(CcdNotify **out, char *err, size_t errlen)
{
    CcdNotify *n = calloc(1, sizeof *n);
    *out = n;
    if (!n)
        return cc_errf(err, errlen, -ENOMEM, "notify: out of memory");
    n->fd = -1;
    const char *wd = getenv("WATCHDOG_USEC"), *wpid = getenv("WATCHDOG_PID");
    if (wd && (!wpid || strtol(wpid, NULL, 10) == (long)getpid())) {
        char *end;
        unsigned long long v = strtoull(wd, &end, 10);
        if (*wd && !*end && v > 0)
            n->watchdog_usec = v;
    }
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof n->addr.sun_path)
        return cc_errf(err, errlen, -EINVAL,
                       "notify: NOTIFY_SOCKET='%s' is not an absolute path or @abstract name "
                       "(notifications off)",
                       path);
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@')
        n->addr.sun_path[0] = 0; /* abstract namespace: leading NUL, no terminator */
    n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (n->fd < 0)
        return cc_errf(err, errlen, -errno, "notify: socket: %s", strerror(errno));
    return 0;
}

void ccd_notify_close(CcdNotify **n)
{
    if (n && *n) {
        if ((*n)->fd >= 0)
            close((*n)->fd);
        free(*n);
        *n = NULL;
    }
}

int ccd_notify_enabled(const CcdNotify *n) { return n && n->fd >= 0; }

int ccd_notify_send(CcdNotify *n, const char *msg)
{
    if (!ccd_notify_enabled(n))
        return 0;
    ssize_t k = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&n->addr,
                       n->addr_len);
    return k < 0 ? -errno : 0;
}

int ccd_notify_status(CcdNotify *n, const char *fmt, ...)
{
    if (!ccd_notify_enabled(n))
        return 0;
    char buf[512] = "STATUS=";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + 7, sizeof buf - 7, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return ccd_notify_send(n, buf);
}

int ccd_notify_ready(CcdNotify *n, const char *status)
{
    if (!ccd_notify_enabled(n))
        return 0;
    char buf[512] = "READY=1";
    if (status) {
        size_t o = strlen(buf);
        snprintf(buf + o, sizeof buf - o, "\nSTATUS=%s", status);
        for (char *p = buf + o + 1; *p; p++)
            if (*p == '\n')
                *p = ' ';
    }
    return ccd_notify_send(n, buf);
}

int ccd_notify_reloading(CcdNotify *n)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char buf[96];
    snprintf(buf, sizeof buf, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
    return ccd_notify_send(n, buf);
}

int ccd_notify_stopping(CcdNotify *n) { return ccd_notify_send(n, "STOPPING=1"); }

int ccd_notify_watchdog(CcdNotify *n) { return ccd_notify_send(n, "WATCHDOG=1"); }

uint64_t ccd_notify_watchdog_usec(const CcdNotify *n) { return n ? n->watchdog_usec : 0; }
