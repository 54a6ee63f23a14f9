/*
 * failalloc.h — a failing allocator for out-of-memory tests: the k-th allocation fails.
 * Link the test with failalloc.c and
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign, so
 * every allocation made by code linked statically into it (lib/) goes through the wrappers;
 * shared libraries (jansson, libc itself) are not wrapped. Typical loop:
 *     for (k = 0;; k++) { failalloc_arm(k); r = f(); failalloc_disarm();
 *                         if (!failalloc_failed()) break; assert r == -ENOMEM; }
 */
#ifndef CC_TEST_FAILALLOC_H
#define CC_TEST_FAILALLOC_H

/** Counts allocations from now on; the k-th (0-based) returns NULL. */
void failalloc_arm(long k);
/** Stops counting: every allocation succeeds again. */
void failalloc_disarm(void);
/** Suspends counting (for allocations not under test); returns what resume needs. */
long failalloc_pause(void);
void failalloc_resume(long saved);
/** Whether the armed allocation was reached (and failed) since the last arm. */
int failalloc_failed(void);

#endif
