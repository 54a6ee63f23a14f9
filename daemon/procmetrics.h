/*
 * procmetrics.h — the standard Prometheus process metrics (the names and units of the
 * client libraries' process collector) for GET /metrics, read from /proc (Linux):
 * process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds, process_start_time_seconds. A value that cannot be
 * read is left out (no sample), never given as a placeholder.
 */
#ifndef CCD_PROCMETRICS_H
#define CCD_PROCMETRICS_H

#include <event2/buffer.h>

void ccd_process_metrics(struct evbuffer *out);

#endif
