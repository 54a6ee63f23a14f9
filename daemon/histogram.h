/* daemon/histogram.h — a Prometheus histogram with fixed upper bounds: the loop's lag, the
 * HTTP routes' durations and the scheduler's batch sizes and times are each one of these. */
#ifndef CCD_HISTOGRAM_H
#define CCD_HISTOGRAM_H

#include <stdint.h>

#define CCD_HIST_MAX 24
typedef struct CcdHist {
    int n;
    const double *le; ///< (n) increasing upper bounds; +Inf is implicit
    uint64_t counts[CCD_HIST_MAX + 1];
    double sum;
    uint64_t count;
} CcdHist;

/** Empties h and gives it the bounds le[0..n) (at most CCD_HIST_MAX; le is not copied). */
void ccd_hist_init(CcdHist *h, const double *le, int n);
void ccd_hist_add(CcdHist *h, double v);
/** Quantile estimate: the upper bound of the bucket holding it (+Inf past the last bound;
 *  0 when empty). */
double ccd_hist_quantile(const CcdHist *h, double q);

struct evbuffer;
/** Writes h's samples (name_bucket{le=...}, name_sum, name_count) in Prometheus text; the
 *  HELP and TYPE lines are the caller's. */
void ccd_hist_write(struct evbuffer *b, const char *name, const CcdHist *h);

#endif
