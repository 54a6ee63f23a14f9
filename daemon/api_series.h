/* api_series.h — the dashboard's reads (api_series.c, issue 15), served by api.c's route
 * table. Loop thread only. */
#ifndef CCD_API_SERIES_H
#define CCD_API_SERIES_H

#include <stdint.h>

#include "http.h"

int ccd_h_history(CcdReq *r);        ///< GET /v1/cells/{id}/history
int ccd_h_forecasts(CcdReq *r);      ///< GET /v1/cells/{id}/forecasts
int ccd_h_batch_forecast(CcdReq *r); ///< GET /v1/forecast
int ccd_h_batch_history(CcdReq *r);  ///< GET /v1/history

#endif
