/* api_info.h — GET /v1/info (api_info.c), served by api.c's route table. Loop thread only. */
#ifndef CCD_API_INFO_H
#define CCD_API_INFO_H

#include <stdint.h>

#include "http.h"

/** GET /v1/info: JSON, or redis INFO-style text with format=text. */
int ccd_h_info(CcdReq *r);

#endif
