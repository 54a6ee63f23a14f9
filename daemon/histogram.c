/* daemon/histogram.c — a Prometheus histogram with fixed upper bounds (histogram.h). */
#include "histogram.h"

#include <math.h>
#include <string.h>

#include <event2/buffer.h>

void ccd_hist_init(CcdHist *h, const double *le, int n)
{
    memset(h, 0, sizeof *h);
    h->le = le;
    h->n = n < CCD_HIST_MAX ? n : CCD_HIST_MAX;
}

void ccd_hist_add(CcdHist *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->le[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

double ccd_hist_quantile(const CcdHist *h, double q)
{
    uint64_t want = (uint64_t)ceil(q * (double)h->count), acc = 0;
    for (int i = 0; i <= h->n; i++) {
        acc += h->counts[i];
        if (acc >= want && acc)
            return i < h->n ? h->le[i] : INFINITY;
    }
    return 0;
}

void ccd_hist_write(struct evbuffer *b, const char *name, const CcdHist *h)
{
    uint64_t acc = 0;
    for (int i = 0; i < h->n; i++) {
        acc += h->counts[i];
        evbuffer_add_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i],
                            (unsigned long long)acc);
    }
    evbuffer_add_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
                        (unsigned long long)h->count, name, h->sum, name,
                        (unsigned long long)h->count);
}
