/*
 * membudget.h — the default memory budget of the cells (limits.kv_budget_mb: 0 = auto):
 * a fraction of the memory this process may still use when it starts, the smaller of
 * /proc/meminfo's MemAvailable and its cgroup's limit minus usage (cgroup v2 memory.max /
 * memory.current, or v1 memory.limit_in_bytes / memory.usage_in_bytes).
 */
#ifndef CCD_MEMBUDGET_H
#define CCD_MEMBUDGET_H

#include <stddef.h>
#include <stdint.h>

/** Share of the available memory the automatic budget takes: the rest is for the anomaly
 *  state, HTTP and Kafka buffers and the other processes of the machine. */
#define CCD_MEMBUDGET_SHARE 0.5

/** The automatic budget in bytes (computed at the first call, then the same: a reload must
 *  not count the daemon's own cells as unavailable); 1 GiB when nothing can be read.
 *  from: where it came from, for the log. */
int64_t ccd_membudget_auto(const char **from);

/** Bytes available now (the smaller of the sources above), -1 unknown; from as above.
 *  root: the filesystem root to read /proc and /sys under ("" = /; for tests). */
int64_t ccd_mem_available(const char *root, const char **from);

#endif
