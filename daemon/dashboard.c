/* dashboard.c — serves the embedded dashboard (index.html and /assets/<name>) with its
 * caching headers and gzip; see dashboard.h. Loop thread only. */
#include "dashboard.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "http_cache.h"

const CcdAsset *ccd_asset_find(const char *name)
{
    for (int i = 0; i < ccd_n_assets; i++)
        if (!strcmp(ccd_assets[i].name, name))
            return &ccd_assets[i];
    return NULL;
}

static int serve(CcdReq *r, const CcdAsset *a, const char *cache_control)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(r->req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(r->req);
    r->cache_control = cache_control;
    evhttp_add_header(out, "ETag", a->etag);
    evhttp_add_header(out, "Vary", "Accept-Encoding");
    evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
    if (ccd_etag_matches(evhttp_find_header(in, "If-None-Match"), a->etag))
        return ccd_text(r, 304, a->ctype);
    if (ccd_accepts_gzip_value(evhttp_find_header(in, "Accept-Encoding"))) {
        evhttp_add_header(out, "Content-Encoding", "gzip");
        evbuffer_add_reference(r->out, a->gz, a->gz_len, NULL, NULL);
    } else {
        evbuffer_add_reference(r->out, a->raw, a->raw_len, NULL, NULL);
    }
    return ccd_text(r, 200, a->ctype);
}

int ccd_h_dashboard_index(CcdReq *r) { return serve(r, &ccd_assets[0], "no-cache"); }

int ccd_h_dashboard_asset(CcdReq *r)
{
    const CcdAsset *a = ccd_asset_find(r->id);
    /* index.html is only served by its own routes, where it is revalidated */
    if (!a || a == &ccd_assets[0])
        return ccd_problem(r, 404, "not-found", "no asset %s (asset names change with each build)",
                           r->id);
    return serve(r, a, "public, max-age=31536000, immutable");
}
