/*
 * reload.h — reloading the configuration and the model while serving (SIGHUP, POST
 * /v1/admin/reload). See reload.c.
 */
#ifndef CCD_RELOAD_H
#define CCD_RELOAD_H

#include <jansson.h>

#include "cellcastd.h"

typedef struct CcdReq CcdReq;

/** Re-reads the configuration file (and the --set overrides) and the model file; a broken
 *  file or model is refused and everything stays as it was. Applies the reloadable keys,
 *  swaps the model, reports the non-reloadable keys that changed. Loop thread. Returns 0
 *  or -errno with a message; fills *report (a JSON object, caller owns) when given. */
int ccd_reload(Ccd *d, json_t **report, char *err, size_t errlen);

/** POST /v1/admin/reload (Authorization: Bearer <admin.token>; route in api.c). */
int ccd_h_admin_reload(CcdReq *r);

#endif
