/* test_incidents.c — daemon/incidents (alerts grouped into incidents by site) and
 * daemon/topology (the topology file): two sites of three cells; a site-wide outage (every
 * cell of S1 all_zero, one step apart) is one site incident, a lone cell's spike in S2 a
 * cell incident, each resolving with its last alert; batching (one emitted transition for
 * the cells of one flush); region grouping; the summary line; the JSON; the topology's
 * parsing, labels, filters and errors; the paging rule (a lone cell's warning stays an alert;
 * critical, outage, persistence and a second cell of the site open); the resolve hold (an
 * alert of the group within resolve_hold_steps of the incident's resolution joins it again). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "incidents.h"
#include "topology.h"

/* incidents.profile_persist_steps' default */
#define PROFILE_PERSIST_WANT 24
/* incidents.stuck_persist_steps' default */
#define STUCK_PERSIST_WANT 24

static const char TOPO[] = "# two sites of three cells, one region\n"
                           "cell,site,region,sector,lat,lon,vendor\n"
                           "A1,S1,R1,1,41.38,2.17,acme\n"
                           "A2,S1,R1,2,41.38,2.17,acme\n"
                           "A3,S1,R1,3,41.38,2.17,acme\n"
                           "B1,S2,R1,1,41.40,2.19,\n"
                           "B2,S2,R1,2,41.40,2.19,\n"
                           "B3,S2,R1,3,41.40,2.19,\n";

#define S 900         /* step seconds */
#define T0 1767225600 /* 2026-01-01T00:00:00Z */

/* The emitted transitions of one flush, as copies of their JSON. */
typedef struct Emitted {
    json_t *v[16];
    int n;
} Emitted;

static void on_emit(void *cookie, const CcdIncident *inc)
{
    Emitted *e = cookie;
    size_t len;
    char *s = ccd_incident_json(inc, &len);
    assert_non_null(s);
    assert_true(e->n < 16);
    e->v[e->n] = json_loads(s, 0, NULL);
    assert_non_null(e->v[e->n]);
    e->n++;
    free(s);
}

static void emitted_clear(Emitted *e)
{
    for (int i = 0; i < e->n; i++)
        json_decref(e->v[i]);
    e->n = 0;
}

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* One alert transition of cell c, id `id`, with the topology's labels. */
static void add_alert(CcdIncidents *g, const CcdTopology *t, const char *id, const char *c,
                      const char *reason, const char *kpi, int critical, int firing,
                      int64_t onset_step, int64_t step)
{
    const char *site = ccd_topology_label(t, c, "site");
    CcdIncAlert a = {.id = id,
                     .cell = c,
                     .site = site,
                     .region = ccd_topology_label(t, c, "region"),
                     .reason = reason,
                     .kpi = kpi,
                     .firing = firing,
                     .critical = critical,
                     .step = step,
                     .ts = step * S,
                     .start_ts = onset_step * S,
                     .group_cells = ccd_topology_site_cells(t, site)};
    assert_int_equal(ccd_incidents_add(g, &a), 0);
}

/* One alert transition of cell c: no KPI, critical when all_zero. */
static void add(CcdIncidents *g, const CcdTopology *t, const char *c, const char *reason,
                int firing, int64_t onset_step, int64_t step)
{
    char id[128];
    snprintf(id, sizeof id, "%s:%s:%lld", c, reason, (long long)onset_step);
    add_alert(g, t, id, c, reason, NULL, !strcmp(reason, "all_zero"), firing, onset_step, step);
}

/* One alert transition with every field said: severity and KPI (add() derives them). */
static void add_full(CcdIncidents *g, const CcdTopology *t, const char *c, const char *reason,
                     const char *kpi, int critical, int firing, int64_t onset_step, int64_t step)
{
    char id[128];
    snprintf(id, sizeof id, "%s:%s:%s:%lld", c, reason, kpi ? kpi : "-", (long long)onset_step);
    add_alert(g, t, id, c, reason, kpi, critical, firing, onset_step, step);
}

/* The same transition of each cell of site S1 (A1, A2, A3), as add(). */
static void add_s1(CcdIncidents *g, const CcdTopology *t, const char *reason, int firing,
                   int64_t onset_step, int64_t step)
{
    static const char *const cells[] = {"A1", "A2", "A3"};
    for (int i = 0; i < 3; i++)
        add(g, t, cells[i], reason, firing, onset_step, step);
}

/* The state of the tests of the two sites: TOPO parsed afresh for each (cmocka's setup),
 * freed after it. */
static int topo_setup(void **state)
{
    CcdTopology *t;
    char err[256];
    assert_int_equal(ccd_topology_parse(&t, TOPO, strlen(TOPO), "t.csv", err, sizeof err), 0);
    *state = t;
    return 0;
}

static int topo_teardown(void **state)
{
    CcdTopology *t = *state;
    ccd_topology_free(&t);
    return 0;
}

/* The settings of the tests of the grouping alone: the defaults with every alert opening
 * an incident (the paging rule off: test_paging_rule) that resolves with its last alert
 * (the hold off: test_resolve_hold). */
static void grouping_settings(CcdIncidentSettings *s)
{
    ccd_incident_default_settings(s);
    s->cell_persist_steps = 0;
    s->resolve_hold_steps = 0;
}

/* The incidents of settings s. */
static CcdIncidents *incidents(const CcdIncidentSettings *s)
{
    CcdIncidents *g = NULL;
    assert_int_equal(ccd_incidents_open(&g, s), 0);
    return g;
}

static CcdIncidentStats stats(const CcdIncidents *g)
{
    CcdIncidentStats st;
    ccd_incidents_stats(g, &st);
    return st;
}

static size_t n_firing(const CcdIncidents *g) { return stats(g).firing; }

static void test_site_outage_and_lone_spike(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    grouping_settings(&s);
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;

    /* step k: A1 and A2 lose traffic (one flush): one incident, both cells */
    add(g, t, "A1", "all_zero", 1, k, k + 4);
    add(g, t, "A2", "all_zero", 1, k, k + 4);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "id"), "site:S1:1963588"); /* k + 4 */
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_string_equal(jstr(e.v[0], "scope"), "site");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 2);
    assert_string_equal(jstr(e.v[0], "severity"), "critical");
    emitted_clear(&e);

    /* the lone spike of B2 (the other site) while S1 is down: its own cell incident */
    add(g, t, "B2", "anomaly", 1, k + 4, k + 5);
    /* A3 follows one step later: it joins S1's incident (same id), now 3 of 3 */
    add(g, t, "A3", "all_zero", 1, k + 1, k + 5);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 2);
    json_t *b = !strcmp(jstr(e.v[0], "scope"), "cell") ? e.v[0] : e.v[1];
    json_t *a = b == e.v[0] ? e.v[1] : e.v[0];
    assert_string_equal(jstr(b, "id"), "site:S2:1963589");
    assert_string_equal(jstr(b, "scope"), "cell");
    assert_string_equal(jstr(b, "site"), "S2");
    assert_string_equal(jstr(b, "severity"), "warning");
    assert_string_equal(jstr(b, "summary"),
                        "cell B2 (site S2): deviating from forecast since 2026-01-01 01:00 UTC");
    assert_string_equal(jstr(a, "id"), "site:S1:1963588");
    assert_int_equal(json_array_size(json_object_get(a, "cells")), 3);
    assert_int_equal(json_integer_value(json_object_get(a, "cells_total")), 3);
    assert_string_equal(jstr(a, "summary"),
                        "site S1: 3 of 3 cells lost traffic since 2026-01-01 00:00 UTC");
    assert_int_equal(json_array_size(json_object_get(a, "alerts")), 3);
    assert_int_equal(n_firing(g), 2);
    emitted_clear(&e);

    /* S1 recovers cell by cell: firing until its last alert resolves */
    add(g, t, "A1", "all_zero", 0, k, k + 8);
    add(g, t, "A2", "all_zero", 0, k, k + 8);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "firing_alerts")), 1);
    emitted_clear(&e);
    add(g, t, "A3", "all_zero", 0, k + 1, k + 9);
    add(g, t, "B2", "anomaly", 0, k + 4, k + 9);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(jstr(e.v[i], "state"), "resolved");
        assert_true(json_is_string(json_object_get(e.v[i], "end_time")));
        assert_int_equal(json_array_size(json_object_get(e.v[i], "firing_alerts")), 0);
    }
    assert_int_equal(n_firing(g), 0);
    emitted_clear(&e);

    /* both kept among the recent, newest first; a new alert of S1 opens a new incident */
    size_t n;
    const CcdIncident **v = ccd_incidents_list(g, &n);
    assert_int_equal(n, 2);
    assert_false(v[0]->firing || v[1]->firing);
    free(v);
    add(g, t, "A1", "anomaly", 1, k + 20, k + 20);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "id"), "site:S1:1963604");
    assert_string_equal(jstr(e.v[0], "scope"), "cell");
    emitted_clear(&e);

    CcdIncidentStats st = stats(g);
    assert_int_equal(st.opened, 3);
    assert_int_equal(st.resolved, 2);
    assert_int_equal(st.updated, 2);
    assert_int_equal(st.alerts_grouped, 5);
    ccd_incidents_close(&g);
}

/* Group by region: the two sites' alerts are one region incident; an alert without labels
 * is its own cell incident; a resolution never seen is counted, not grouped. */
static void test_region_and_unlabelled(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    grouping_settings(&s);
    s.group_by = CCD_INC_BY_REGION;
    s.keep = 1; /* the ring keeps one resolved incident */
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    add(g, t, "A1", "anomaly", 1, 100, 100);
    add(g, t, "B3", "anomaly", 1, 100, 101);
    add(g, t, "X9", "missing", 1, 99, 101); /* not in the topology */
    add(g, t, "Q1", "missing", 0, 50, 101); /* resolution of an alert held by none */
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 2);
    assert_string_equal(jstr(e.v[0], "id"), "region:R1:100");
    assert_string_equal(jstr(e.v[0], "scope"), "region");
    assert_string_equal(jstr(e.v[1], "id"), "cell:X9:101");
    assert_string_equal(jstr(e.v[1], "scope"), "cell");
    assert_true(json_is_null(json_object_get(e.v[1], "site")));
    emitted_clear(&e);
    add(g, t, "A1", "anomaly", 0, 100, 102);
    add(g, t, "B3", "anomaly", 0, 100, 102);
    add(g, t, "X9", "missing", 0, 99, 103);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 2);
    emitted_clear(&e);
    CcdIncidentStats st = stats(g);
    assert_int_equal(st.alerts_unknown, 1);
    assert_int_equal(st.recent, 1);
    assert_int_equal(st.firing, 0);
    ccd_incidents_close(&g);
}

/* An incident opened and resolved within one flush is emitted once, resolved; closing
 * with incidents open, resolved-not-emitted and recent frees them all (ASan). */
static void test_open_resolve_one_flush(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    grouping_settings(&s);
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    add(g, t, "A1", "stuck", 1, 10, 10);
    add(g, t, "A1", "stuck", 0, 10, 10);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    emitted_clear(&e);
    add(g, t, "B1", "bounds", 1, 20, 20);
    add(g, t, "A2", "bounds", 1, 20, 20);
    add(g, t, "A2", "bounds", 0, 20, 21); /* resolved, not emitted */
    ccd_incidents_close(&g);
}

static void test_topology_file(void **state)
{
    CcdTopology *t = *state;
    assert_int_equal(ccd_topology_n_cells(t), 6);
    assert_int_equal(ccd_topology_site_cells(t, "S1"), 3);
    assert_int_equal(ccd_topology_region_cells(t, "R1"), 6);
    assert_int_equal(ccd_topology_site_cells(t, "S9"), 0);
    const CcdTopoCell *c = ccd_topology_cell(t, "A2");
    assert_non_null(c);
    assert_string_equal(c->sector, "2");
    assert_true(fabs(c->lat - 41.38) < 1e-12 && fabs(c->lon - 2.17) < 1e-12);
    assert_string_equal(ccd_topology_label(t, "A2", "vendor"), "acme");
    assert_null(ccd_topology_label(t, "B2", "vendor")); /* empty value: no label */
    assert_null(ccd_topology_label(t, "A2", "lat"));    /* an attribute, not a label */
    assert_true(ccd_topology_has_label(t, "vendor"));
    assert_null(ccd_topology_cell(t, "Z"));

    char lb[CCD_TOPO_LABELS_JSON_MAX];
    int k = ccd_topology_labels_json(t, "A1", lb, sizeof lb);
    assert_string_equal(lb,
                        "{\"site\":\"S1\",\"region\":\"R1\",\"sector\":\"1\",\"vendor\":\"acme\"}");
    assert_int_equal(k, (int)strlen(lb));
    assert_int_equal(ccd_topology_labels_json(t, "nope", lb, sizeof lb), 2);
    assert_string_equal(lb, "{}");
    assert_int_equal(ccd_topology_labels_json(t, "A1", lb, 10), -ENOSPC);

    char buf[256] = "{\"id\":\"x\"}";
    int n = ccd_topology_splice_labels(t, "B1", buf, (int)strlen(buf), sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_string_equal(
        buf, "{\"id\":\"x\",\"labels\":{\"site\":\"S2\",\"region\":\"R1\",\"sector\":\"1\"}}");
    char small[24] = "{\"id\":\"x\"}";
    assert_int_equal(ccd_topology_splice_labels(t, "B1", small, 10, sizeof small), 10);
    assert_string_equal(small, "{\"id\":\"x\"}"); /* no room: unchanged */

    CcdTopoFilter f = {"S1", NULL, NULL};
    assert_true(ccd_topology_filter_match(t, &f, "A3"));
    assert_false(ccd_topology_filter_match(t, &f, "B3"));
    f = (CcdTopoFilter){NULL, "R1", "2"};
    assert_true(ccd_topology_filter_match(t, &f, "B2"));
    assert_false(ccd_topology_filter_match(t, &f, "B1"));
    assert_false(ccd_topology_filter_match(t, &f, "unknown"));
}

static void expect_bad(const char *text, const char *what)
{
    CcdTopology *t = (CcdTopology *)1;
    char err[256] = "";
    assert_int_equal(ccd_topology_parse(&t, text, strlen(text), "t.csv", err, sizeof err), -EINVAL);
    assert_null(t);
    if (!strstr(err, what))
        fail_msg("error '%s' lacks '%s'", err, what);
}

static void test_topology_errors(void **state)
{
    (void)state;
    expect_bad("site,region\nS1,R1\n", "t.csv:1: no 'cell' column");
    expect_bad("cell,site\nA,S1\nA,S2\n", "t.csv:3: cell 'A' listed twice");
    expect_bad("cell,site\nA,S1,extra\n", "t.csv:2: 3 value(s) for 2 column(s)");
    expect_bad("cell,lat\nA,91\n", "t.csv:2: lat '91'");
    expect_bad("cell,site\n,S1\n", "t.csv:2: no cell id");
    expect_bad("cell,site,site\n", "column 'site' named twice");
    expect_bad("cell,\"site\"\n", "quotes");
    expect_bad("# only a comment\n", "no header line");
    CcdTopology *t;
    char err[64];
    assert_int_equal(ccd_topology_load(&t, "/nonexistent/topo.csv", err, sizeof err), -ENOENT);
    /* no trailing newline, CRLF, spaces around values, a blank line: all fine */
    const char ok[] = "cell , site\r\n\r\n A , S1 \r\nB,S1";
    assert_int_equal(ccd_topology_parse(&t, ok, strlen(ok), "t.csv", err, sizeof err), 0);
    assert_string_equal(ccd_topology_label(t, "A", "site"), "S1");
    assert_int_equal(ccd_topology_site_cells(t, "S1"), 2);
    ccd_topology_free(&t);
}

/* The string map behind both: inserts, deletes with tombstones, growth. */
static void test_strhash(void **state)
{
    (void)state;
    CcdStrHash m = {0};
    char k[32];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 1000; i++) {
            snprintf(k, sizeof k, "k%d", i);
            assert_int_equal(ccd_strhash_put(&m, k, (void *)(uintptr_t)(i + 1)), 0);
        }
        assert_int_equal(m.n, 1000);
        for (int i = 0; i < 1000; i += 2) {
            snprintf(k, sizeof k, "k%d", i);
            assert_int_equal((uintptr_t)ccd_strhash_del(&m, k), (uintptr_t)(i + 1));
        }
        for (int i = 0; i < 1000; i++) {
            snprintf(k, sizeof k, "k%d", i);
            assert_int_equal((uintptr_t)ccd_strhash_get(&m, k), i % 2 ? (uintptr_t)(i + 1) : 0);
        }
        for (int i = 1; i < 1000; i += 2) {
            snprintf(k, sizeof k, "k%d", i);
            ccd_strhash_del(&m, k);
        }
        assert_int_equal(m.n, 0);
    }
    assert_true(m.cap <= 4096); /* churn does not grow it without bound */
    ccd_strhash_free(&m);
}

/* One evidence report of cell c: class cls at share frac of its bar at step, forecast_frac of
 * it the forecast's own (a KPI class; the rest the seasonal profile's sum). */
static void evid_of(CcdIncidents *g, const CcdTopology *t, const char *c, const char *cls,
                    double frac, double forecast_frac, int64_t step)
{
    const char *site = ccd_topology_label(t, c, "site");
    char kpi[32] = ""; /* a KPI class's KPI: "<kpi>:<direction>" */
    if (strchr(cls, ':'))
        snprintf(kpi, sizeof kpi, "%.*s", (int)(strchr(cls, ':') - cls), cls);
    CcdIncEvidence ev = {.cell = c,
                         .site = site,
                         .region = ccd_topology_label(t, c, "region"),
                         .cls = cls,
                         .kpi = kpi[0] ? kpi : NULL,
                         .frac = frac,
                         .step = step,
                         .ts = step * S,
                         .group_cells = ccd_topology_site_cells(t, site),
                         .forecast_frac = strchr(cls, ':') ? forecast_frac : 0};
    assert_int_equal(ccd_incidents_evidence(g, &ev), 0);
}

/* One evidence report, on a KPI class the seasonal profile's sum's (no forecast share). */
static void evid(CcdIncidents *g, const CcdTopology *t, const char *c, const char *cls, double frac,
                 int64_t step)
{
    evid_of(g, t, c, cls, frac, 0, step);
}

/* Cells together as evidence: two cells of one site past half their bars at one step, on one
 * class, open the site incident before either fires; one cell alone does not, nor two on
 * different classes, steps or sites; a later alert joins the same incident; the evidence
 * members resolve once no longer reported. */
static void test_site_evidence(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    assert_int_equal(s.evidence_cells, 2);
    assert_true(s.evidence_frac == 0.5);
    s.resolve_hold_steps = 0; /* resolves with its last alert (test_resolve_hold) */
    s.evidence_forecast = 0;  /* the whole share, at once (test_evidence_forecast_missing) */
    s.evidence_missing_steps = 1;
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;

    evid(g, t, "A1", "thr:down", 0.5, k);     /* a lone cell at half its bar */
    evid(g, t, "B1", "thr:down", 0.9, k);     /* another site */
    evid(g, t, "A2", "thr:down", 0.49, k);    /* under the share */
    evid(g, t, "A2", "thr:up", 0.8, k);       /* the other direction */
    evid(g, t, "A3", "thr:down", 0.8, k - 1); /* another step */
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    assert_int_equal(n_firing(g), 0);

    /* a second cell of S1 at half its bar on the same class and step: the site incident */
    evid(g, t, "A2", "thr:down", 0.5, k);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    char want[64];
    snprintf(want, sizeof want, "site:S1:%lld", (long long)k);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "scope"), "site");
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 2);
    assert_string_equal(jstr(e.v[0], "summary"),
                        "site S1: 2 of 3 cells deviating from forecast since 2026-01-01 "
                        "00:00 UTC");
    snprintf(want, sizeof want, "A1:evidence:thr:down:%lld", (long long)k);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(e.v[0], "firing_alerts"), 0)), want);
    emitted_clear(&e);

    /* next step: both still past it, A3 too: A3 joins (three cells) */
    ccd_incidents_evidence_expire(g, k + 1);
    evid(g, t, "A1", "thr:down", 0.7, k + 1);
    evid(g, t, "A2", "thr:down", 0.9, k + 1);
    evid(g, t, "A3", "thr:down", 0.6, k + 1);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 3);
    emitted_clear(&e);

    /* A1's own alert fires at k + 2: it joins the same incident */
    ccd_incidents_evidence_expire(g, k + 2);
    add(g, t, "A1", "anomaly", 1, k + 2, k + 2);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    snprintf(want, sizeof want, "site:S1:%lld", (long long)k);
    assert_string_equal(jstr(e.v[0], "id"), want);
    emitted_clear(&e);
    assert_int_equal(n_firing(g), 1);

    /* no report since k + 1: at k + 3 the evidence members resolve, the alert holds it */
    ccd_incidents_evidence_expire(g, k + 3);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "firing_alerts")), 1);
    emitted_clear(&e);
    add(g, t, "A1", "anomaly", 0, k + 2, k + 8);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    emitted_clear(&e);
    assert_int_equal(n_firing(g), 0);

    /* evidence alone also resolves its incident; a share of the site can ask for more */
    evid(g, t, "B1", "all_zero", 0.5, k + 9);
    evid(g, t, "B2", "all_zero", 0.5, k + 9);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "summary"),
                        "site S2: 2 of 3 cells lost traffic since 2026-01-01 02:15 UTC");
    emitted_clear(&e);
    ccd_incidents_evidence_expire(g, k + 11);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    emitted_clear(&e);
    CcdIncidentStats st = stats(g);
    assert_int_equal(st.evidence_opened, 2);
    assert_int_equal(st.evidence_members, 5);

    s.evidence_share = 1.0; /* every cell of the site */
    ccd_incidents_set_settings(g, &s);
    evid(g, t, "B1", "missing", 1.0, k + 20);
    evid(g, t, "B2", "missing", 1.0, k + 20);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    evid(g, t, "B3", "missing", 0.5, k + 20);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 3);
    emitted_clear(&e);

    s.evidence_cells = 0; /* off */
    s.evidence_share = 0;
    ccd_incidents_set_settings(g, &s);
    ccd_incidents_evidence_expire(g, k + 30);
    ccd_incidents_emit(g, on_emit, &e);
    emitted_clear(&e);
    evid(g, t, "A1", "thr:up", 2, k + 31);
    evid(g, t, "A2", "thr:up", 2, k + 31);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    assert_int_equal(n_firing(g), 0);
    ccd_incidents_close(&g);
}

/* The paging rule (incidents.h; docs/design/incident-paging.md): a lone cell's warning
 * anomaly stays an alert (held, counted), and its resolution emits nothing; a critical one,
 * a cell outage (all_zero, or missing of the whole cell) open an incident at once; a per-KPI
 * gap does not; a second cell of the site makes the site incident, the held alert of the
 * first joining it; an anomaly whose cell stays past cell_persist_frac of a bar for
 * cell_persist_steps steps opens one, and so does another alert firing that long. */
static void test_paging_rule(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    assert_int_equal(s.cell_persist_steps, 2);
    assert_true(s.cell_persist_frac == 0.5);
    s.resolve_hold_steps = 0; /* resolves with its last alert (test_resolve_hold) */
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;
    char want[96];

    /* a lone warning anomaly: no incident, held below paging; it resolves: nothing */
    add_full(g, t, "B2", "anomaly", "thr", 0, 1, k, k);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    assert_int_equal(stats(g).alerts_below_paging, 1);
    assert_int_equal(stats(g).held, 1);
    add_full(g, t, "B2", "anomaly", "thr", 0, 0, k, k + 1);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    assert_int_equal(stats(g).held, 0);
    assert_int_equal(stats(g).alerts_unknown, 0);

    /* a critical anomaly of a lone cell: its incident at once */
    add_full(g, t, "A1", "anomaly", "thr", 1, 1, k + 2, k + 2);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "scope"), "cell");
    assert_string_equal(jstr(e.v[0], "severity"), "critical");
    emitted_clear(&e);
    add_full(g, t, "A1", "anomaly", "thr", 1, 0, k + 2, k + 3);
    ccd_incidents_emit(g, on_emit, &e);
    emitted_clear(&e);

    /* a lone cell outage, warning: its whole cell silent opens one; a KPI's gap does not */
    add_full(g, t, "A2", "missing", "thr", 0, 1, k + 4, k + 4);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    add_full(g, t, "B1", "missing", NULL, 0, 1, k + 4, k + 4);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    snprintf(want, sizeof want, "site:S2:%lld", (long long)(k + 4));
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "scope"), "cell");
    emitted_clear(&e);
    add_full(g, t, "B1", "missing", NULL, 0, 0, k + 4, k + 5);
    add_full(g, t, "A2", "missing", "thr", 0, 0, k + 4, k + 5);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    emitted_clear(&e);

    /* B2 warns (held), then B3 of the same site: the site incident with both, B2's first */
    add_full(g, t, "B2", "anomaly", "thr", 0, 1, k + 10, k + 10);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    add_full(g, t, "B3", "anomaly", "thr", 0, 1, k + 11, k + 11);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "scope"), "site");
    assert_string_equal(jstr(e.v[0], "severity"), "warning");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 2);
    json_t *alerts = json_object_get(e.v[0], "firing_alerts");
    assert_int_equal(json_array_size(alerts), 2);
    snprintf(want, sizeof want, "B2:anomaly:thr:%lld", (long long)(k + 10));
    assert_true(!strcmp(json_string_value(json_array_get(alerts, 0)), want) ||
                !strcmp(json_string_value(json_array_get(alerts, 1)), want));
    char since[40];
    snprintf(since, sizeof since, "2026-01-01T02:30:00Z"); /* k + 10: B2's onset */
    assert_string_equal(jstr(e.v[0], "start_time"), since);
    assert_int_equal(stats(g).held, 0);
    emitted_clear(&e);
    add_full(g, t, "B2", "anomaly", "thr", 0, 0, k + 10, k + 14);
    add_full(g, t, "B3", "anomaly", "thr", 0, 0, k + 11, k + 14);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    emitted_clear(&e);

    /* two cells on different KPIs (incidents.site_same_kpi): each waits for its own
     * evidence; with the setting off they open the site's incident */
    add_full(g, t, "B2", "anomaly", "thr", 0, 1, k + 15, k + 15);
    add_full(g, t, "B3", "anomaly", "prb", 0, 1, k + 15, k + 15);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    assert_int_equal(stats(g).held, 2);
    add_full(g, t, "B2", "anomaly", "thr", 0, 0, k + 15, k + 16);
    add_full(g, t, "B3", "anomaly", "prb", 0, 0, k + 15, k + 16);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    s.site_same_kpi = 0;
    ccd_incidents_set_settings(g, &s);
    add_full(g, t, "B2", "anomaly", "thr", 0, 1, k + 17, k + 17);
    add_full(g, t, "B3", "anomaly", "prb", 0, 1, k + 17, k + 17);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    emitted_clear(&e);
    add_full(g, t, "B2", "anomaly", "thr", 0, 0, k + 17, k + 18);
    add_full(g, t, "B3", "anomaly", "prb", 0, 0, k + 17, k + 18);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    emitted_clear(&e);
    s.site_same_kpi = 1;
    ccd_incidents_set_settings(g, &s);

    /* persistence of an anomaly: A3 past half a bar at one more step (under it: no count) */
    add_full(g, t, "A3", "anomaly", "thr", 0, 1, k + 20, k + 20);
    evid(g, t, "A3", "thr:down", 0.9, k + 20); /* its firing step: counted already */
    evid(g, t, "A3", "thr:down", 0.3, k + 21); /* under cell_persist_frac */
    ccd_incidents_evidence_expire(g, k + 22);  /* an anomaly persists by evidence only */
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    evid(g, t, "A3", "thr:down", 0.5, k + 22);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "scope"), "cell");
    assert_int_equal(stats(g).alerts_persisted, 1); /* A3 */
    emitted_clear(&e);
    add_full(g, t, "A3", "anomaly", "thr", 0, 0, k + 20, k + 24);
    ccd_incidents_emit(g, on_emit, &e);
    emitted_clear(&e);

    /* ... on its own KPI (incidents.cell_persist_own_kpi): another KPI's share does not count */
    assert_int_equal(s.cell_persist_own_kpi, 1);
    add_full(g, t, "A3", "anomaly", "thr", 0, 1, k + 25, k + 25);
    evid(g, t, "A3", "prb:up", 0.9, k + 26);
    evid(g, t, "A3", "prb:up", 0.9, k + 27);
    ccd_incidents_evidence_expire(g, k + 28);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    assert_int_equal(stats(g).persist_other_kpi, 2);
    evid(g, t, "A3", "thr:down", 0.6, k + 28);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_int_equal(stats(g).alerts_persisted, 2);
    emitted_clear(&e);
    add_full(g, t, "A3", "anomaly", "thr", 0, 0, k + 25, k + 29);
    ccd_incidents_emit(g, on_emit, &e);
    emitted_clear(&e);

    /* a cell without topology (no site): its anomaly persists by its own evidence too */
    add_full(g, t, "X9", "anomaly", "thr", 0, 1, k + 25, k + 25);
    evid(g, t, "X9", "thr:up", 0.7, k + 26);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    snprintf(want, sizeof want, "cell:X9:%lld", (long long)(k + 25));
    assert_string_equal(jstr(e.v[0], "id"), want);
    emitted_clear(&e);
    add_full(g, t, "X9", "anomaly", "thr", 0, 0, k + 25, k + 27);
    ccd_incidents_emit(g, on_emit, &e);
    emitted_clear(&e);

    /* persistence of another alert: still firing cell_persist_steps steps after it fired
     * (stuck: test_stuck_paging) */
    add_full(g, t, "A1", "bounds", "cqi", 0, 1, k + 30, k + 30);
    ccd_incidents_evidence_expire(g, k + 31);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    ccd_incidents_evidence_expire(g, k + 32);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    emitted_clear(&e);
    add_full(g, t, "A1", "bounds", "cqi", 0, 0, k + 30, k + 33);
    ccd_incidents_emit(g, on_emit, &e);
    emitted_clear(&e);

    /* a held alert whose severity rises to critical opens its incident */
    add_full(g, t, "B1", "anomaly", "thr", 0, 1, k + 40, k + 40);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 0);
    add_full(g, t, "B1", "anomaly", "thr", 1, 1, k + 40, k + 41);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(jstr(e.v[0], "severity"), "critical");
    emitted_clear(&e);

    /* a reload to 0 (the rule off): a held alert opens at the next step, a new one at once */
    add_full(g, t, "A2", "anomaly", "thr", 0, 1, k + 42, k + 42);
    assert_int_equal(stats(g).held, 1);
    s.cell_persist_steps = 0;
    ccd_incidents_set_settings(g, &s);
    ccd_incidents_evidence_expire(g, k + 43);
    ccd_incidents_emit(g, on_emit, &e);
    assert_int_equal(e.n, 1);
    assert_int_equal(stats(g).held, 0);
    emitted_clear(&e);
    ccd_incidents_close(&g); /* open incidents freed (ASan) */
}

/* One data step of cellcastd's flush as the resolve hold sees it: the data reach `step`
 * (ccd_incidents_evidence_expire: holds past their end resolve), then the step's alerts
 * (the caller's), then the emit. */
static void reach(CcdIncidents *g, int64_t step) { ccd_incidents_evidence_expire(g, step); }

static int emit_n(CcdIncidents *g, Emitted *e)
{
    emitted_clear(e);
    ccd_incidents_emit(g, on_emit, e);
    return e->n;
}

/* A profile-only anomaly (fired by the seasonal profile's CUSUM alone) of cell c, firing or
 * resolved at step; the KPI "thr". */
static void add_profile(CcdIncidents *g, const CcdTopology *t, const char *c, int critical,
                        int firing, int64_t onset_step, int64_t step)
{
    char id[128];
    snprintf(id, sizeof id, "%s:anomaly:profile:%lld", c, (long long)onset_step);
    const char *site = ccd_topology_label(t, c, "site");
    CcdIncAlert a = {.id = id,
                     .cell = c,
                     .site = site,
                     .region = ccd_topology_label(t, c, "region"),
                     .reason = "anomaly",
                     .kpi = "thr",
                     .firing = firing,
                     .critical = critical,
                     .step = step,
                     .ts = step * S,
                     .start_ts = onset_step * S,
                     .group_cells = ccd_topology_site_cells(t, site),
                     .profile_only = 1};
    assert_int_equal(ccd_incidents_add(g, &a), 0);
}

/* One evidence report of cell c on KPI "thr" upward: frac of its bar, forecast_frac of it
 * without the profile's sum. */
static void evid_fc(CcdIncidents *g, const CcdTopology *t, const char *c, double frac,
                    double forecast_frac, int64_t step)
{
    const char *site = ccd_topology_label(t, c, "site");
    CcdIncEvidence ev = {.cell = c,
                         .site = site,
                         .region = ccd_topology_label(t, c, "region"),
                         .cls = "thr:up",
                         .kpi = "thr",
                         .frac = frac,
                         .forecast_frac = forecast_frac,
                         .step = step,
                         .ts = step * S,
                         .group_cells = ccd_topology_site_cells(t, site)};
    assert_int_equal(ccd_incidents_evidence(g, &ev), 0);
}

/* The paging rule for a profile-only anomaly (incidents.profile_persist_steps): its cell's
 * evidence (the profile sum it fired on, past half its bar at every step) does not open its
 * incident at cell_persist_steps; it opens one once it has fired profile_persist_steps steps,
 * at cell_persist_steps steps of its forecast's own evidence (forecast_frac), and at once
 * when it turns critical; it joins an open incident of its site at once; one that resolves
 * first pages nothing. With the setting 0 it persists by evidence as any. */
static void test_profile_paging(void **state)
{
    CcdTopology *t = *state;
    CcdIncidents *g;
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    assert_int_equal(s.profile_persist_steps, PROFILE_PERSIST_WANT);
    s.profile_persist_steps = 8;
    s.resolve_hold_steps = 0; /* resolves with its last alert (test_resolve_hold) */
    assert_int_equal(ccd_incidents_open(&g, &s), 0);
    Emitted e = {0};
    const int64_t k = T0 / S;

    /* fires at k, its cell past its bar at every step: held until k + 8 */
    add_profile(g, t, "A1", 0, 1, k, k);
    for (int64_t p = k; p < k + 8; p++) {
        reach(g, p);
        evid(g, t, "A1", "thr:up", 1.2, p);
        assert_int_equal(emit_n(g, &e), 0);
    }
    assert_int_equal(stats(g).held, 1);
    assert_int_equal(stats(g).profile_held, 1);
    reach(g, k + 8);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "scope"), "cell");
    assert_int_equal(stats(g).alerts_persisted, 1);
    assert_int_equal(stats(g).profile_persisted, 1);
    add_profile(g, t, "A1", 0, 0, k, k + 9);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");

    /* its forecast's own evidence at half its bar: the firing step and one more open it; a
     * step under it does not count */
    add_profile(g, t, "B1", 0, 1, k + 10, k + 10);
    reach(g, k + 10);
    evid_fc(g, t, "B1", 1.5, 0.2, k + 10);
    reach(g, k + 11);
    evid_fc(g, t, "B1", 1.5, 0.49, k + 11);
    assert_int_equal(emit_n(g, &e), 0);
    reach(g, k + 12);
    evid_fc(g, t, "B1", 1.5, 0.5, k + 12);
    assert_int_equal(emit_n(g, &e), 1);
    assert_int_equal(stats(g).alerts_persisted, 2);
    assert_int_equal(stats(g).profile_persisted, 2); /* A1 by firing, B1 by its forecast */
    add_profile(g, t, "B1", 0, 0, k + 10, k + 13);
    assert_int_equal(emit_n(g, &e), 1);

    /* one that resolves before profile_persist_steps: nothing emitted */
    add_profile(g, t, "A2", 0, 1, k + 20, k + 20);
    for (int64_t p = k + 20; p < k + 27; p++) {
        reach(g, p);
        evid(g, t, "A2", "thr:up", 1.0, p);
    }
    add_profile(g, t, "A2", 0, 0, k + 20, k + 27);
    assert_int_equal(emit_n(g, &e), 0);
    assert_int_equal(stats(g).held, 0);

    /* one that turns critical (its forecast z past the critical bar) opens at once */
    add_profile(g, t, "A3", 0, 1, k + 30, k + 30);
    assert_int_equal(emit_n(g, &e), 0);
    add_profile(g, t, "A3", 1, 1, k + 30, k + 31);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "severity"), "critical");
    add_profile(g, t, "A3", 1, 0, k + 30, k + 32);
    assert_int_equal(emit_n(g, &e), 1);

    /* an incident of S2 open (B1's outage): B2's profile-only anomaly joins it at once */
    add(g, t, "B1", "all_zero", 1, k + 40, k + 40);
    assert_int_equal(emit_n(g, &e), 1);
    add_profile(g, t, "B2", 0, 1, k + 41, k + 41);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "scope"), "site");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 2);
    add(g, t, "B1", "all_zero", 0, k + 40, k + 42);
    add_profile(g, t, "B2", 0, 0, k + 41, k + 42);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");

    /* two cells (incidents.site_forecast): a profile-only anomaly of A1 and a forecast's
     * anomaly of A2 on the same KPI do not open S1's incident at once (counted), nor does
     * the profile-only one firing second; with the setting off they do */
    assert_int_equal(s.site_forecast, 1);
    uint64_t refused = stats(g).pair_refused;
    add_profile(g, t, "A1", 0, 1, k + 45, k + 45);
    add_full(g, t, "A2", "anomaly", "thr", 0, 1, k + 45, k + 45);
    add_profile(g, t, "A3", 0, 1, k + 45, k + 45);
    assert_int_equal(emit_n(g, &e), 0);
    assert_int_equal(stats(g).held, 3);
    assert_int_equal(stats(g).pair_refused, refused + 2);
    add_profile(g, t, "A1", 0, 0, k + 45, k + 46);
    add_full(g, t, "A2", "anomaly", "thr", 0, 0, k + 45, k + 46);
    add_profile(g, t, "A3", 0, 0, k + 45, k + 46);
    assert_int_equal(emit_n(g, &e), 0);
    s.site_forecast = 0;
    ccd_incidents_set_settings(g, &s);
    add_profile(g, t, "A1", 0, 1, k + 47, k + 47);
    add_full(g, t, "A2", "anomaly", "thr", 0, 1, k + 47, k + 47);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "scope"), "site");
    add_profile(g, t, "A1", 0, 0, k + 47, k + 48);
    add_full(g, t, "A2", "anomaly", "thr", 0, 0, k + 47, k + 48);
    assert_int_equal(emit_n(g, &e), 1);
    s.site_forecast = 1;
    ccd_incidents_set_settings(g, &s);

    /* the setting 0: a profile-only anomaly persists by its cell's evidence, as any */
    s.profile_persist_steps = 0;
    ccd_incidents_set_settings(g, &s);
    add_profile(g, t, "B3", 0, 1, k + 50, k + 50);
    reach(g, k + 50);
    evid(g, t, "B3", "thr:up", 1.0, k + 50);
    reach(g, k + 51);
    evid(g, t, "B3", "thr:up", 1.0, k + 51);
    assert_int_equal(emit_n(g, &e), 1);
    emitted_clear(&e);
    ccd_incidents_close(&g);
}

/* A transport loss of S1 (its three cells' whole-cell missing-data alerts, which page alone,
 * fire at k and resolve when the rows return at k + 6), then a warning anomaly of A1 (a load
 * burst, which alone the paging rule holds) at k + 6 + gap. Returns the incidents opened;
 * *held the alerts held below paging. */
static int transport_loss_then_burst(const CcdTopology *t, int hold, int persist, int gap,
                                     int *held)
{
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    s.resolve_hold_steps = hold;
    s.cell_persist_steps = persist;
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;
    reach(g, k);
    add_s1(g, t, "missing", 1, k, k);
    assert_int_equal(emit_n(g, &e), 1);
    reach(g, k + 6);
    add_s1(g, t, "missing", 0, k, k + 6);
    emit_n(g, &e);
    for (int64_t q = k + 7; q <= k + 6 + gap; q++) {
        reach(g, q);
        emit_n(g, &e);
    }
    add_full(g, t, "A1", "anomaly", "thr", 0, 1, k + 6 + gap, k + 6 + gap);
    emit_n(g, &e);
    emitted_clear(&e);
    CcdIncidentStats st = stats(g);
    *held = (int)st.held;
    ccd_incidents_close(&g); /* open, resolving and held ones freed (ASan) */
    return (int)st.opened;
}

/* The resolve hold (incidents.h): an incident whose last alert resolved stays open,
 * resolving, for resolve_hold_steps data steps, emitting nothing; an alert of its group in
 * that time joins it again (same id, no new page, the paging rule not asked); at the hold's
 * end it is emitted resolved with end_time = its last alert's resolution; after it, a new
 * alert opens a new incident. Hold 0: it resolves with its last alert (the split it makes). */
static void test_resolve_hold(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    assert_int_equal(s.resolve_hold_steps, 6);
    assert_int_equal(s.cell_persist_steps, 2); /* the paging rule on */
    s.resolve_hold_steps = 4;                  /* the steps below count on 4 */
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;
    char want[64];
    snprintf(want, sizeof want, "site:S1:%lld", (long long)k);

    /* a transport loss of S1: the three cells' missing-data alerts at k, one site incident */
    reach(g, k);
    add_s1(g, t, "missing", 1, k, k);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "scope"), "site");

    /* the rows return at k + 6: every alert resolves; the incident holds, emitted firing
     * with no firing alert (as a member's resolution is), end_time not yet set */
    reach(g, k + 6);
    add_s1(g, t, "missing", 0, k, k + 6);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "firing_alerts")), 0);
    assert_true(json_is_null(json_object_get(e.v[0], "end_time")));
    assert_int_equal(stats(g).firing, 1);
    assert_int_equal(stats(g).resolving, 1);

    /* a load burst of A1 three steps later (a warning anomaly the paging rule alone would
     * hold): it joins the incident again, one transition of the same incident, firing */
    reach(g, k + 7);
    reach(g, k + 8);
    reach(g, k + 9);
    add_full(g, t, "A1", "anomaly", "thr", 0, 1, k + 9, k + 9);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_true(json_is_null(json_object_get(e.v[0], "end_time")));
    assert_int_equal(json_array_size(json_object_get(e.v[0], "alerts")), 4);
    assert_int_equal(json_array_size(json_object_get(e.v[0], "firing_alerts")), 1);
    assert_int_equal(stats(g).resolving, 0);
    assert_int_equal(stats(g).hold_rejoined, 1);
    assert_int_equal(stats(g).alerts_below_paging, 0);
    assert_int_equal(stats(g).opened, 1);

    /* the burst ends at k + 11: the hold again, through the data of step k + 15 */
    reach(g, k + 11);
    add_full(g, t, "A1", "anomaly", "thr", 0, 0, k + 9, k + 11);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    for (int64_t q = k + 12; q <= k + 11 + 4; q++) {
        reach(g, q);
        assert_int_equal(emit_n(g, &e), 0);
        assert_int_equal(stats(g).resolving, 1);
    }
    /* the data reach k + 16: resolved, end = the burst's resolution at k + 11 (02:45) */
    reach(g, k + 16);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    assert_string_equal(jstr(e.v[0], "end_time"), "2026-01-01T02:45:00Z");
    assert_string_equal(jstr(e.v[0], "start_time"), "2026-01-01T00:00:00Z");
    assert_string_equal(jstr(e.v[0], "summary"), "site S1: 3 of 3 cells stopped reporting since "
                                                 "2026-01-01 00:00 UTC; resolved 2026-01-01 02:45");
    assert_int_equal(stats(g).firing, 0);
    assert_int_equal(stats(g).resolving, 0);
    assert_int_equal(stats(g).hold_expired, 1);

    /* after the hold: an alert of the site opens a new incident */
    reach(g, k + 17);
    add(g, t, "A2", "all_zero", 1, k + 17, k + 17);
    assert_int_equal(emit_n(g, &e), 1);
    snprintf(want, sizeof want, "site:S1:%lld", (long long)k + 17);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "alerts")), 1);
    assert_int_equal(stats(g).opened, 2);

    /* a lone cell's incident (B1 of S2, scope cell) resolves at k + 22; at the hold's last
     * step (k + 26) a second cell of S2 joins it again: the same incident, now the site's */
    reach(g, k + 20);
    add(g, t, "B1", "all_zero", 1, k + 20, k + 20);
    assert_int_equal(emit_n(g, &e), 1);
    snprintf(want, sizeof want, "site:S2:%lld", (long long)k + 20);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "scope"), "cell");
    reach(g, k + 22);
    add(g, t, "B1", "all_zero", 0, k + 20, k + 22);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    for (int64_t q = k + 23; q <= k + 26; q++)
        reach(g, q);
    add_full(g, t, "B2", "anomaly", "thr", 0, 1, k + 26, k + 26);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "scope"), "site");
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 2);
    assert_int_equal(stats(g).hold_rejoined, 2);

    /* a reload to hold 0 while B2's resolution holds it: it resolves at the next step */
    reach(g, k + 27);
    add_full(g, t, "B2", "anomaly", "thr", 0, 0, k + 26, k + 27);
    assert_int_equal(emit_n(g, &e), 1);
    s.resolve_hold_steps = 0;
    ccd_incidents_set_settings(g, &s);
    reach(g, k + 28);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    assert_string_equal(jstr(e.v[0], "end_time"), "2026-01-01T06:45:00Z"); /* k + 27 */
    emitted_clear(&e);
    ccd_incidents_close(&g);

    /* the burst at 3 steps after the rows return: one incident with the hold; hold 0 (as
     * before the hold) with every alert paging: two (the split); with the paging rule: one,
     * the burst held below paging */
    int held;
    assert_int_equal(transport_loss_then_burst(t, 4, 0, 3, &held), 1);
    assert_int_equal(transport_loss_then_burst(t, 4, 2, 3, &held), 1);
    assert_int_equal(held, 0);
    assert_int_equal(transport_loss_then_burst(t, 0, 0, 3, &held), 2);
    assert_int_equal(transport_loss_then_burst(t, 0, 2, 3, &held), 1);
    assert_int_equal(held, 1);
    /* the hold's bounds: the burst at 4 steps joins, at 5 opens a second incident */
    assert_int_equal(transport_loss_then_burst(t, 4, 0, 4, &held), 1);
    assert_int_equal(transport_loss_then_burst(t, 4, 0, 5, &held), 2);
}

/* Evidence members under the resolve hold: they resolve once no longer reported, the hold
 * counting from that step and the end being their last report; new evidence of the site in
 * the hold joins the incident again (new member ids, same incident). */
static void test_resolve_hold_evidence(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    s.resolve_hold_steps = 3;
    s.evidence_forecast = 0; /* the whole share, at once (test_evidence_forecast_missing) */
    s.evidence_missing_steps = 1;
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;
    char want[64];
    snprintf(want, sizeof want, "site:S1:%lld", (long long)k);

    reach(g, k);
    evid(g, t, "A1", "thr:down", 0.8, k);
    evid(g, t, "A2", "thr:down", 0.8, k);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "id"), want);
    reach(g, k + 1);
    evid(g, t, "A1", "thr:down", 0.8, k + 1);
    evid(g, t, "A2", "thr:down", 0.8, k + 1);
    emit_n(g, &e);
    /* last reported at k + 1: the members resolve when the data reach k + 3, the hold
     * starting there (emitted firing, no firing alert) */
    reach(g, k + 2);
    assert_int_equal(emit_n(g, &e), 0);
    reach(g, k + 3);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "firing_alerts")), 0);
    assert_int_equal(stats(g).resolving, 1);
    /* the two cells past the bar again at k + 5: they join the same incident again */
    reach(g, k + 5);
    evid(g, t, "A1", "thr:down", 0.9, k + 5);
    evid(g, t, "A2", "thr:down", 0.9, k + 5);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_string_equal(jstr(e.v[0], "state"), "firing");
    assert_int_equal(json_array_size(json_object_get(e.v[0], "firing_alerts")), 2);
    assert_int_equal(json_array_size(json_object_get(e.v[0], "alerts")), 4);
    assert_int_equal(stats(g).evidence_opened, 1); /* not a new incident */
    assert_int_equal(stats(g).hold_rejoined, 1);
    /* last reported at k + 5: resolve at k + 7, hold through k + 10, resolved at k + 11 with
     * end = the last report (k + 5: 01:15) */
    for (int64_t q = k + 6; q <= k + 10; q++) {
        reach(g, q);
        assert_int_equal(emit_n(g, &e), q == k + 7); /* the members' resolution */
        assert_int_equal(stats(g).resolving, q >= k + 7);
    }
    reach(g, k + 11);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");
    assert_string_equal(jstr(e.v[0], "end_time"), "2026-01-01T01:15:00Z");
    emitted_clear(&e);
    ccd_incidents_close(&g);
}

/* The evidence rule with no incident of the site open (incidents.evidence_forecast,
 * evidence_missing_steps): two cells past the share on a KPI's class by the seasonal profile's
 * sum alone open nothing (refused, counted), by the forecast's own share they do at once; two
 * cells' silence at one step opens nothing, at the default's two consecutive steps it does (a
 * cell with a gap starts its streak again); all_zero at once; once the incident is open a
 * cell's profile share or first silent step joins it at once; the settings off restore the
 * cells' whole share at once. */
static void test_evidence_forecast_missing(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    assert_int_equal(s.evidence_forecast, 1);
    assert_int_equal(s.evidence_missing_steps, 2);
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;
    char want[64];

    /* the profile's sum: two cells past the share at two steps, nothing */
    for (int64_t q = k; q < k + 2; q++) {
        reach(g, q);
        evid_of(g, t, "A1", "thr:down", 0.9, 0.3, q);
        evid_of(g, t, "A2", "thr:down", 0.9, 0.49, q);
        assert_int_equal(emit_n(g, &e), 0);
    }
    assert_int_equal(stats(g).evidence_refused, 2);
    /* A2 by its forecast at k + 2, A1 still by the profile: one cell, nothing; A3's
     * forecast makes two */
    reach(g, k + 2);
    evid_of(g, t, "A1", "thr:down", 0.9, 0.3, k + 2);
    evid_of(g, t, "A2", "thr:down", 0.9, 0.5, k + 2);
    assert_int_equal(emit_n(g, &e), 0);
    assert_int_equal(stats(g).evidence_refused, 3);
    evid_of(g, t, "A3", "thr:down", 0.6, 0.6, k + 2);
    assert_int_equal(emit_n(g, &e), 1);
    snprintf(want, sizeof want, "site:S1:%lld", (long long)(k + 2));
    assert_string_equal(jstr(e.v[0], "id"), want);
    /* A1's profile share of this step joins: the incident is open */
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 3);
    assert_int_equal(stats(g).evidence_opened, 1);
    ccd_incidents_close(&g);

    /* silence: B1 and B2 at k + 3, B1 alone at k + 4, B2 again at k + 5 (its streak starts
     * again), nothing; B1 and B2 both at k + 6 (streaks 3 and 2): S2's incident, B3's first
     * silent step joining it */
    g = incidents(&s);
    reach(g, k + 3);
    evid(g, t, "B1", "missing", 0.5, k + 3);
    evid(g, t, "B2", "missing", 0.6, k + 3);
    reach(g, k + 4);
    evid(g, t, "B1", "missing", 0.8, k + 4);
    evid(g, t, "B3", "missing", 0.5, k + 4);
    reach(g, k + 5);
    evid(g, t, "B1", "missing", 1.0, k + 5);
    evid(g, t, "B2", "missing", 0.5, k + 5);
    assert_int_equal(emit_n(g, &e), 0);
    assert_int_equal(stats(g).evidence_refused, 3);
    reach(g, k + 6);
    evid(g, t, "B2", "missing", 0.8, k + 6);
    evid(g, t, "B1", "missing", 1.2, k + 6);
    evid(g, t, "B3", "missing", 0.5, k + 6); /* after k + 4, not k + 5: its streak is 1 */
    assert_int_equal(emit_n(g, &e), 1);
    snprintf(want, sizeof want, "site:S2:%lld", (long long)(k + 6));
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_int_equal(json_array_size(json_object_get(e.v[0], "cells")), 3);
    assert_int_equal(stats(g).evidence_opened, 1);
    ccd_incidents_close(&g);

    /* all_zero at once; with the settings off the profile's share and one silent step do */
    g = incidents(&s);
    reach(g, k);
    evid(g, t, "A1", "all_zero", 0.67, k);
    evid(g, t, "A2", "all_zero", 0.67, k);
    assert_int_equal(emit_n(g, &e), 1);
    s.evidence_forecast = 0;
    s.evidence_missing_steps = 1;
    ccd_incidents_set_settings(g, &s);
    evid_of(g, t, "B1", "thr:up", 0.9, 0, k);
    evid_of(g, t, "B2", "thr:up", 0.9, 0, k);
    assert_int_equal(emit_n(g, &e), 1);
    snprintf(want, sizeof want, "site:S2:%lld", (long long)k);
    assert_string_equal(jstr(e.v[0], "id"), want);
    assert_int_equal(stats(g).evidence_refused, 0);
    emitted_clear(&e);
    ccd_incidents_close(&g);
}

/* A lone cell's stuck alert (incidents.stuck_persist_steps): alone of its cell it opens an
 * incident only once it has fired stuck_persist_steps steps (one flat KPI: what a quiet KPI
 * does at night); with another alert of its cell held (several KPIs frozen: a cell outage)
 * at cell_persist_steps, the other joining; one that resolves first pages nothing; 0: as any
 * alert. */
static void test_stuck_paging(void **state)
{
    CcdTopology *t = *state;
    CcdIncidentSettings s;
    ccd_incident_default_settings(&s);
    assert_int_equal(s.stuck_persist_steps, STUCK_PERSIST_WANT);
    s.resolve_hold_steps = 0;
    CcdIncidents *g = incidents(&s);
    Emitted e = {0};
    const int64_t k = T0 / S;

    /* alone: held until k + stuck_persist_steps */
    add_full(g, t, "A1", "stuck", "users", 0, 1, k, k);
    for (int64_t q = k + 1; q < k + STUCK_PERSIST_WANT; q++) {
        reach(g, q);
        assert_int_equal(emit_n(g, &e), 0);
    }
    assert_int_equal(stats(g).held, 1);
    reach(g, k + STUCK_PERSIST_WANT);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "scope"), "cell");
    add_full(g, t, "A1", "stuck", "users", 0, 0, k, k + STUCK_PERSIST_WANT + 1);
    assert_int_equal(emit_n(g, &e), 1);
    assert_string_equal(jstr(e.v[0], "state"), "resolved");

    /* alone, resolving after 4 steps: nothing */
    const int64_t k2 = k + 40;
    add_full(g, t, "B1", "stuck", "users", 0, 1, k2, k2);
    for (int64_t q = k2 + 1; q <= k2 + 4; q++) {
        reach(g, q);
        assert_int_equal(emit_n(g, &e), 0);
    }
    add_full(g, t, "B1", "stuck", "users", 0, 0, k2, k2 + 4);
    assert_int_equal(emit_n(g, &e), 0);
    assert_int_equal(stats(g).held, 0);

    /* with a second alert of its cell held (another KPI frozen): at cell_persist_steps */
    const int64_t k3 = k + 60;
    add_full(g, t, "B2", "stuck", "users", 0, 1, k3, k3);
    add_full(g, t, "B2", "stuck", "thr", 0, 1, k3 + 1, k3 + 1);
    reach(g, k3 + 1);
    assert_int_equal(emit_n(g, &e), 0);
    reach(g, k3 + 2);
    assert_int_equal(emit_n(g, &e), 1);
    assert_int_equal(json_array_size(json_object_get(e.v[0], "firing_alerts")), 2);
    add_full(g, t, "B2", "stuck", "users", 0, 0, k3, k3 + 3);
    add_full(g, t, "B2", "stuck", "thr", 0, 0, k3 + 1, k3 + 3);
    assert_int_equal(emit_n(g, &e), 1);

    /* 0: as any alert, at cell_persist_steps */
    s.stuck_persist_steps = 0;
    ccd_incidents_set_settings(g, &s);
    const int64_t k4 = k + 80;
    add_full(g, t, "A3", "stuck", "users", 0, 1, k4, k4);
    reach(g, k4 + 1);
    assert_int_equal(emit_n(g, &e), 0);
    reach(g, k4 + 2);
    assert_int_equal(emit_n(g, &e), 1);
    emitted_clear(&e);
    ccd_incidents_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_site_outage_and_lone_spike, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_region_and_unlabelled, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_open_resolve_one_flush, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_topology_file, topo_setup, topo_teardown),
        cmocka_unit_test(test_topology_errors),
        cmocka_unit_test(test_strhash),
        cmocka_unit_test_setup_teardown(test_site_evidence, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_paging_rule, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_resolve_hold, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_resolve_hold_evidence, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_profile_paging, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_evidence_forecast_missing, topo_setup, topo_teardown),
        cmocka_unit_test_setup_teardown(test_stuck_paging, topo_setup, topo_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
