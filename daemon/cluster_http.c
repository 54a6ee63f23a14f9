/* cluster_http.c — the HTTP side of daemon/cluster.c (see cluster.h): the redirect of a
 * per-cell route to the member that owns the cell, and GET /v1/cluster. Apart from
 * cluster.c so that the module links without the HTTP server (tests/unit/test_cluster.c). */
#include <string.h>

#include "cc_kpi.h"
#include "cluster.h"
#include "http.h"
#include "utf8.h"

int ccd_cluster_redirect(CcdReq *r)
{
    CcdCluster *c = r->d->cluster;
    if (!c)
        return 0;
    int32_t p;
    const char *addr;
    enum CcdOwner o = ccd_cluster_owner(c, r->id, &p, &addr);
    CcdClusterInfo ci = ccd_cluster_info(c);
    if (o == CCD_OWNER_SELF || o == CCD_OWNER_ALONE)
        return 0;
    if (o == CCD_OWNER_UNKNOWN) {
        r->retry_after = 1;
        if (p < 0)
            return ccd_problem(r, 503, "cell-owner-unknown",
                               "no cell '%s' on this daemon, and the partition count of %s is "
                               "not known yet (broker unreachable?): cannot tell which member "
                               "serves it; retry",
                               r->id, ci.topic);
        return ccd_problem(r, 503, "cell-owner-unknown",
                           "no cell '%s' on this daemon; its partition %d of %s (partitioner "
                           "%s) has no owner in group %s right now (rebalance in progress, "
                           "or a member gone); retry",
                           r->id, (int)p, ci.topic, ci.partitioner, ci.group_id);
    }
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(r->req);
    const char *q = u ? evhttp_uri_get_query(u) : NULL;
    char loc[4096];
    int n = snprintf(loc, sizeof loc, "%s%s%s%s", addr, r->path, q && *q ? "?" : "", q ? q : "");
    if (n < 0 || (size_t)n >= sizeof loc)
        return ccd_problem(r, 500, "internal", "redirect location too long");
    evhttp_add_header(evhttp_request_get_output_headers(r->req), "Location", loc);
    /* the query is the client's raw bytes, not always UTF-8: json_pack refused it (500) */
    return ccd_json(r, 307,
                    json_pack("{s:s, s:i, s:o}", "cell", r->id, "partition", (int)p, "location",
                              ccd_json_text(loc, NULL)));
}

int ccd_h_cluster(CcdReq *r)
{
    CcdCluster *c = r->d->cluster;
    if (!c)
        return ccd_problem(r, 404, "no-cluster",
                           "this daemon consumes no Kafka group (kafka.brokers is \"none\"): it "
                           "serves every cell it holds and is its own only member");
    json_t *o = ccd_cluster_json(c);
    const char *cell = ccd_query(r, "cell");
    if (o && cell) {
        if (!cc_kpi_valid_cell_id(cell, strlen(cell))) {
            json_decref(o);
            return ccd_problem(r, 400, "bad-cell-id", "'%s' is not a valid cell id", cell);
        }
        int32_t p;
        const char *addr;
        enum CcdOwner w = ccd_cluster_owner(c, cell, &p, &addr);
        json_object_set_new(
            o, "cell",
            json_pack("{s:s, s:i, s:s, s:s?}", "id", cell, "partition", (int)p, "owner",
                      w == CCD_OWNER_SELF    ? "self"
                      : w == CCD_OWNER_OTHER ? "other"
                                             : "unknown",
                      "address", w == CCD_OWNER_SELF ? ccd_cluster_info(c).advertise : addr));
    }
    return ccd_json(r, 200, o);
}
