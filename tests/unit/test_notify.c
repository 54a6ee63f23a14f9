/* test_notify.c — daemon/notify: the sd_notify datagrams arrive on a real AF_UNIX socket
 * (filesystem path and abstract name) with the documented assignments; unset
 * NOTIFY_SOCKET is a no-op; WATCHDOG_USEC/WATCHDOG_PID are honoured; bad values refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "notify.h"

/* Binds a datagram socket to `name` (path, or @abstract) and returns its fd. */
static int listen_on(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t len = strlen(name);
    memcpy(a.sun_path, name, len);
    if (name[0] == '@')
        a.sun_path[0] = 0;
    socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] == '/'));
    assert_int_equal(bind(fd, (struct sockaddr *)&a, al), 0);
    return fd;
}

static void recv_eq(int fd, const char *want)
{
    char buf[600];
    ssize_t k = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    assert_true(k > 0);
    buf[k] = 0;
    assert_string_equal(buf, want);
}

static void exercise(const char *name)
{
    int fd = listen_on(name);
    setenv("NOTIFY_SOCKET", name, 1);
    CcdNotify *n = NULL;
    char err[256] = "";
    assert_int_equal(ccd_notify_open(&n, err, sizeof err), 0);
    assert_true(ccd_notify_enabled(n));
    assert_int_equal(ccd_notify_ready(n, "serving 3 cells\nok"), 0);
    recv_eq(fd, "READY=1\nSTATUS=serving 3 cells ok");
    assert_int_equal(ccd_notify_status(n, "lag %d", 42), 0);
    recv_eq(fd, "STATUS=lag 42");
    assert_int_equal(ccd_notify_watchdog(n), 0);
    recv_eq(fd, "WATCHDOG=1");
    assert_int_equal(ccd_notify_stopping(n), 0);
    recv_eq(fd, "STOPPING=1");
    assert_int_equal(ccd_notify_reloading(n), 0);
    char buf[200];
    ssize_t k = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    assert_true(k > 0);
    buf[k] = 0;
    assert_true(!strncmp(buf, "RELOADING=1\nMONOTONIC_USEC=", 27));
    ccd_notify_close(&n);
    assert_null(n);
    close(fd);
}

static void test_path_socket(void **state)
{
    (void)state;
    char dir[] = "/tmp/ccd_notify_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[100];
    snprintf(path, sizeof path, "%s/notify", dir);
    exercise(path);
    unlink(path);
    rmdir(dir);
}

static void test_abstract_socket(void **state)
{
    (void)state;
    char name[64];
    snprintf(name, sizeof name, "@cellcast-test-notify-%ld", (long)getpid());
    exercise(name);
}

static void test_unset_is_noop(void **state)
{
    (void)state;
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    CcdNotify *n = NULL;
    assert_int_equal(ccd_notify_open(&n, NULL, 0), 0);
    assert_false(ccd_notify_enabled(n));
    assert_int_equal(ccd_notify_ready(n, "x"), 0);
    assert_int_equal(ccd_notify_watchdog(n), 0);
    assert_int_equal(ccd_notify_watchdog_usec(n), 0);
    ccd_notify_close(&n);
    /* a listener that went away: an error, not a crash or a block */
    setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1);
    assert_int_equal(ccd_notify_open(&n, NULL, 0), 0);
    assert_true(ccd_notify_ready(n, NULL) < 0);
    ccd_notify_close(&n);
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    char err[200];
    assert_int_equal(ccd_notify_open(&n, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "NOTIFY_SOCKET"));
    assert_false(ccd_notify_enabled(n));
    ccd_notify_close(&n);
    unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog_env(void **state)
{
    (void)state;
    CcdNotify *n = NULL;
    setenv("WATCHDOG_USEC", "30000000", 1);
    unsetenv("WATCHDOG_PID");
    assert_int_equal(ccd_notify_open(&n, NULL, 0), 0);
    assert_int_equal(ccd_notify_watchdog_usec(n), 30000000);
    ccd_notify_close(&n);
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid() + 1);
    setenv("WATCHDOG_PID", pid, 1); /* meant for another process */
    assert_int_equal(ccd_notify_open(&n, NULL, 0), 0);
    assert_int_equal(ccd_notify_watchdog_usec(n), 0);
    ccd_notify_close(&n);
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    assert_int_equal(ccd_notify_open(&n, NULL, 0), 0);
    assert_int_equal(ccd_notify_watchdog_usec(n), 30000000);
    ccd_notify_close(&n);
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_socket),
        cmocka_unit_test(test_abstract_socket),
        cmocka_unit_test(test_unset_is_noop),
        cmocka_unit_test(test_watchdog_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
