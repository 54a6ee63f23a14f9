/* test_membudget.c — the automatic cell budget's sources (daemon/membudget.c): MemAvailable,
 * a cgroup v2 or v1 limit minus its usage when smaller, "max" and v1's huge "no limit",
 * nothing readable. Fake /proc and /sys trees under a temporary root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "membudget.h"

static char root[64];

static void put(const char *path, const char *text)
{
    char p[256], dir[256];
    snprintf(p, sizeof p, "%s%s", root, path);
    for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        snprintf(dir, sizeof dir, "%.*s", (int)(s - p), p);
        mkdir(dir, 0700);
    }
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/cc-membudget.XXXXXX");
    assert_non_null(mkdtemp(root));
    put("/proc/meminfo", "MemTotal:       16000000 kB\nMemFree: 1000 kB\n"
                         "MemAvailable:    8000000 kB\nBuffers: 1 kB\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

static void test_sources(void **state)
{
    (void)state;
    const char *from;
    assert_int_equal(ccd_mem_available(root, &from), 8000000LL * 1024);
    assert_string_equal(from, "MemAvailable");
    /* cgroup v2: 4 GiB limit, 1 GiB used: 3 GiB of room, smaller than MemAvailable */
    put("/sys/fs/cgroup/memory.max", "4294967296\n");
    put("/sys/fs/cgroup/memory.current", "1073741824\n");
    assert_int_equal(ccd_mem_available(root, &from), 3LL << 30);
    assert_non_null(strstr(from, "cgroup"));
    /* no limit */
    put("/sys/fs/cgroup/memory.max", "max\n");
    assert_int_equal(ccd_mem_available(root, &from), 8000000LL * 1024);
    /* a limit above MemAvailable does not raise it */
    put("/sys/fs/cgroup/memory.max", "68719476736\n");
    assert_int_equal(ccd_mem_available(root, &from), 8000000LL * 1024);
    /* cgroup v1 */
    char p[128];
    snprintf(p, sizeof p, "%s/sys/fs/cgroup/memory.max", root);
    unlink(p);
    put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "2147483648\n");
    put("/sys/fs/cgroup/memory/memory.usage_in_bytes", "1073741824\n");
    assert_int_equal(ccd_mem_available(root, &from), 1LL << 30);
    put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(ccd_mem_available(root, &from), 8000000LL * 1024);
    /* nothing readable */
    snprintf(p, sizeof p, "%s/proc/meminfo", root);
    unlink(p);
    assert_int_equal(ccd_mem_available(root, &from), -1);
}

static void test_auto_is_half_and_stable(void **state)
{
    (void)state;
    const char *from, *f2;
    int64_t avail = ccd_mem_available("", &from);
    int64_t b = ccd_membudget_auto(&f2);
    assert_true(b >= (64LL << 20));
    if (avail > 0) /* half of what was available at the first call (this process grows) */
        assert_true(b <= avail / 2 + (64LL << 20) && b >= avail / 4);
    void *hog = malloc(64 << 20);
    memset(hog, 1, 64 << 20);
    assert_int_equal(ccd_membudget_auto(&f2), b); /* computed once */
    free(hog);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sources, setup, teardown),
        cmocka_unit_test(test_auto_is_half_and_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
