/* api.h — the handlers api.c's route table serves from the api_*.c files beside it (each
 * file one group of routes). Loop thread only. */
#ifndef CCD_API_H
#define CCD_API_H

#include "http.h"

/* api_metrics.c */
/** GET /metrics: Prometheus text. */
int ccd_h_metrics(CcdReq *r);

/* api_forecast.c */
/** GET /v1/cells/{id}/forecast. */
int ccd_h_forecast(CcdReq *r);
/** The forecast object of c into out after sep (rendered; the replies are cached whole);
 *  sep NULL: none, and a newline after it. 0, 1 no forecast yet (nothing written),
 *  -ENOMEM. */
int ccd_forecast_into(CcdReq *r, CcdCell *c, long long horizon, double level, uint64_t mask,
                      const char *sep, struct evbuffer *out);

/* api_info.c */
/** GET /v1/info: JSON, or redis INFO-style text with format=text. */
int ccd_h_info(CcdReq *r);

/* api_series.c: the dashboard's reads (issue 15) */
int ccd_h_history(CcdReq *r);
int ccd_h_forecasts(CcdReq *r);
int ccd_h_batch_forecast(CcdReq *r);
int ccd_h_batch_history(CcdReq *r);

#endif
