/* clock.h — the daemon's clock, which record times are bounded against: the wall clock, or
 * under demo.enabled the demo's simulated one. Used by ingest (a record's time) and by the
 * restore of cell records (cell_record.h). Loop thread only. */
#ifndef CCD_CLOCK_H
#define CCD_CLOCK_H

#include <stdint.h>

#include "cellcastd.h"

/** Unix seconds now: the wall clock, or the demo's clock, which runs demo.speedup times
 *  faster from about the start. */
int64_t ccd_clock_unix(const Ccd *d);

/** The newest record time (unix s) ingest accepts now: the clock (the demo's when it runs)
 *  + ingest.max_future_s. Restored state is bounded by it too (cell_record.h). */
int64_t ccd_clock_max_ts(const Ccd *d);

#endif
