/* api_forecast.h — a cell's forecast (api_forecast.c): the route, served by api.c's route
 * table, and the forecast object the batch read (api_series.c) composes. Loop thread only. */
#ifndef CCD_API_FORECAST_H
#define CCD_API_FORECAST_H

#include <stdint.h>

#include "http.h"

/** GET /v1/cells/{id}/forecast. */
int ccd_h_forecast(CcdReq *r);
/** The forecast object of c into out after sep (rendered; the replies are cached whole);
 *  sep NULL: none, and a newline after it. 0, 1 no forecast yet (nothing written),
 *  -ENOMEM. */
int ccd_forecast_into(CcdReq *r, CcdCell *c, long long horizon, double level, uint64_t mask,
                      const char *sep, struct evbuffer *out);

#endif
