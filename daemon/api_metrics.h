/* api_metrics.h — GET /metrics (api_metrics.c), served by api.c's route table. Loop thread only. */
#ifndef CCD_API_METRICS_H
#define CCD_API_METRICS_H

#include <stdint.h>

#include "http.h"

/** GET /metrics: Prometheus text. */
int ccd_h_metrics(CcdReq *r);

#endif
