/*
 * auth.c — the admin token check (auth.h).
 */
#include "auth.h"

#include <string.h>
#include <strings.h>

#include "http.h"

int ccd_require_admin(CcdReq *r)
{
    const char *tok = r->d->cfg.admin_token;
    const char *auth =
        evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
    if (!tok || !tok[0])
        return ccd_problem(r, 403, "admin-disabled",
                           "this route needs the admin token: set admin.token in the "
                           "configuration");
    if (!auth || strncasecmp(auth, "Bearer ", 7)) {
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "WWW-Authenticate",
                          "Bearer realm=\"cellcastd admin\"");
        return ccd_problem(r, 401, "unauthorized", "send Authorization: Bearer <admin.token>");
    }
    const char *given = auth + 7;
    size_t lt = strlen(tok), lg = strlen(given);
    unsigned diff = (unsigned)(lt ^ lg);
    for (size_t i = 0; i < lg; i++)
        diff |= (unsigned char)given[i] ^ (unsigned char)tok[i % (lt ? lt : 1)];
    if (diff)
        return ccd_problem(r, 403, "forbidden", "wrong admin token");
    return 0;
}
