/* failalloc.c — see failalloc.h. */
#include "failalloc.h"

#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);

static long alloc_count = -1; /* counting when >= 0 */
static long fail_at = -1;     /* the allocation (0-based) that fails */
static int failed;

static int should_fail(void)
{
    if (alloc_count < 0)
        return 0;
    if (alloc_count++ == fail_at) {
        failed = 1;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return should_fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    return should_fail() ? 12 /* ENOMEM */ : __real_posix_memalign(p, align, n);
}

void failalloc_arm(long k)
{
    alloc_count = 0;
    fail_at = k;
    failed = 0;
}

void failalloc_disarm(void) { alloc_count = -1; }

int failalloc_failed(void) { return failed; }

long failalloc_pause(void)
{
    long saved = alloc_count;
    alloc_count = -1;
    return saved;
}

void failalloc_resume(long saved) { alloc_count = saved; }
