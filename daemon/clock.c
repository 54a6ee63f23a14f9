/* clock.c — the daemon's clock (clock.h). */
#include "clock.h"

#include <time.h>

/* From the start exactly the demo's clock is an upper bound of the demo's: the demo starts a
 * little later. */
int64_t ccd_clock_unix(const Ccd *d)
{
    int64_t now = (int64_t)time(NULL);
    if (d->cfg.demo_enabled && now > d->start_unix)
        now = d->start_unix + (int64_t)((double)(now - d->start_unix) * d->cfg.demo_speedup);
    return now;
}

int64_t ccd_clock_max_ts(const Ccd *d) { return ccd_clock_unix(d) + d->cfg.ingest_max_future_s; }
