/*
 * incidents.c — alerts grouped into incidents by site or region (incidents.h): the
 * grouping (pure logic: no sockets, no daemon) and the incident's JSON; its hosting in
 * cellcastd (fed by the
 * alerts' flush, produced to Kafka, GET /v1/incidents, /metrics: incidents_daemon.c).
 */
#include "incidents.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cc_anomaly.h"
#include "utf8.h"

/* Longest "<cell>:evidence:<class>" key: a cell id, a KPI name and a direction. */
#define CC_INC_KEY_MAX (CC_ANOMALY_CELL_ID_MAX + 96)

/* A cell past evidence_frac on one class at one step, waiting for others of its group. */
typedef struct Pend {
    char *cell, *cls, *kpi;
    int64_t step, ts;
    int joined; /* already an evidence member of the group's incident */
    int streak; /* consecutive steps the cell was reported on the class, this one included */
} Pend;

typedef struct PendGroup {
    Pend *v;
    size_t n, cap;
} PendGroup;

/* An evidence member: its incident, its member id, the last step it was reported at. */
typedef struct EvidMember {
    CcdIncident *inc;
    char *alert_id;
    int64_t seen_step, seen_ts;
} EvidMember;

/* An alert held below the paging rule: a copy of its firing, and its group's key. */
typedef struct Held {
    CcdIncAlert a; /* strings owned */
    char *gkey;
    int strong_steps;    /* anomaly: steps its cell was past a full bar (its firing: 1) */
    int64_t last_strong; /* the last of them */
} Held;

struct CcdIncidents {
    CcdIncidentSettings s;
    CcdStrHash held; /* alert id -> Held: firing, no incident of its group open, below the rule */
    CcdStrHash held_cell; /* cell -> its held anomaly (Held, owned by held) */
    CcdStrHash pending;   /* group key -> PendGroup: evidence reports of the last steps */
    CcdStrHash evid;      /* "<cell>:evidence:<class>" -> EvidMember while it is firing */
    int64_t expired_step;
    CcdStrHash open;      /* group key ("<scope>:<group>") -> open CcdIncident */
    CcdStrHash resolving; /* group key -> open CcdIncident in the resolve hold */
    CcdStrHash alerts;    /* firing alert id -> its CcdIncident */
    CcdIncident **dirty;  /* changed since the last emit, in order of first change */
    size_t n_dirty, cap_dirty;
    CcdIncident **recent; /* ring of resolved incidents, oldest at head */
    size_t n_recent, head;
    CcdIncidentStats st;
};

const char *ccd_inc_scope_name(int scope)
{
    return scope == CCD_INC_SITE ? "site" : scope == CCD_INC_REGION ? "region" : "cell";
}

void ccd_incident_default_settings(CcdIncidentSettings *s)
{
    s->group_by = CCD_INC_BY_SITE;
    s->keep = 1000;
    s->evidence_cells = 2;
    s->evidence_share = 0;
    s->evidence_frac = 0.5;
    s->cell_persist_steps = 2;
    s->cell_persist_frac = 0.5;
    s->resolve_hold_steps = 6;
    s->profile_persist_steps = 24;
    s->evidence_missing_steps = 2;
    s->evidence_forecast = 1;
    s->site_same_kpi = 1;
    s->stuck_persist_steps = 24;
    s->site_forecast = 1;
    s->cell_persist_own_kpi = 1;
}

static void incident_free(CcdIncident *inc)
{
    if (!inc)
        return;
    for (size_t i = 0; i < inc->n_m; i++) {
        free(inc->m[i].alert_id);
        free(inc->m[i].cell);
        free(inc->m[i].kpi);
    }
    for (size_t i = 0; i < inc->n_cells; i++)
        free(inc->cells[i]);
    free(inc->m);
    free(inc->cells);
    ccd_strhash_free(&inc->cell_set);
    ccd_strhash_free(&inc->alert_ix);
    free(inc->id);
    free(inc->group);
    free(inc->site);
    free(inc->region);
    free(inc);
}

int ccd_incidents_open(CcdIncidents **out, const CcdIncidentSettings *s)
{
    CcdIncidents *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g)
        return -ENOMEM;
    g->s = *s;
    g->expired_step = INT64_MIN;
    if (g->s.keep < 1)
        g->s.keep = 1;
    if (!(g->recent = calloc((size_t)g->s.keep, sizeof *g->recent))) {
        free(g);
        return -ENOMEM;
    }
    *out = g;
    return 0;
}

static void free_open(void *cookie, const char *key, void *val)
{
    (void)cookie;
    (void)key;
    incident_free(val);
}

static void pend_clear(Pend *p)
{
    free(p->cell);
    free(p->cls);
    free(p->kpi);
}

static void free_pending(void *cookie, const char *key, void *val)
{
    (void)cookie;
    (void)key;
    PendGroup *pg = val;
    for (size_t i = 0; i < pg->n; i++)
        pend_clear(&pg->v[i]);
    free(pg->v);
    free(pg);
}

static void held_free(Held *h)
{
    if (!h)
        return;
    free((char *)h->a.id);
    free((char *)h->a.cell);
    free((char *)h->a.site);
    free((char *)h->a.region);
    free((char *)h->a.reason);
    free((char *)h->a.kpi);
    free(h->gkey);
    free(h);
}

static void free_held(void *cookie, const char *key, void *val)
{
    (void)cookie;
    (void)key;
    held_free(val);
}

static void free_evid(void *cookie, const char *key, void *val)
{
    (void)cookie;
    (void)key;
    EvidMember *em = val;
    free(em->alert_id);
    free(em);
}

void ccd_incidents_close(CcdIncidents **gp)
{
    CcdIncidents *g = *gp;
    if (!g)
        return;
    ccd_strhash_foreach(&g->pending, free_pending, NULL);
    ccd_strhash_foreach(&g->evid, free_evid, NULL);
    ccd_strhash_foreach(&g->held, free_held, NULL);
    ccd_strhash_free(&g->held);
    ccd_strhash_free(&g->held_cell);
    ccd_strhash_free(&g->pending);
    ccd_strhash_free(&g->evid);
    /* an incident is in open, or in recent, or (resolved, not yet emitted) only in dirty */
    /* the dirty ones first: a firing one there is also open, and is freed with open's */
    for (size_t i = 0; i < g->n_dirty; i++)
        if (!g->dirty[i]->firing)
            incident_free(g->dirty[i]);
    ccd_strhash_foreach(&g->open, free_open, NULL);
    for (size_t i = 0; i < g->n_recent; i++)
        incident_free(g->recent[(g->head + i) % (size_t)g->s.keep]);
    ccd_strhash_free(&g->open);
    ccd_strhash_free(&g->resolving); /* its incidents are open's */
    ccd_strhash_free(&g->alerts);
    free(g->dirty);
    free(g->recent);
    free(g);
    *gp = NULL;
}

void ccd_incidents_set_settings(CcdIncidents *g, const CcdIncidentSettings *s)
{
    g->s.group_by = s->group_by; /* keep: the ring's size is set at open */
    g->s.evidence_cells = s->evidence_cells;
    g->s.evidence_share = s->evidence_share;
    g->s.evidence_frac = s->evidence_frac;
    g->s.cell_persist_steps = s->cell_persist_steps; /* held alerts: at the next step */
    g->s.cell_persist_frac = s->cell_persist_frac;
    g->s.resolve_hold_steps = s->resolve_hold_steps;       /* the holds running: at the next step */
    g->s.profile_persist_steps = s->profile_persist_steps; /* held alerts: at the next step */
    g->s.evidence_missing_steps = s->evidence_missing_steps; /* the streaks already counted */
    g->s.evidence_forecast = s->evidence_forecast;
    g->s.site_same_kpi = s->site_same_kpi;
    g->s.stuck_persist_steps = s->stuck_persist_steps; /* held alerts: at the next step */
    g->s.site_forecast = s->site_forecast;
    g->s.cell_persist_own_kpi = s->cell_persist_own_kpi;
}

static int mark_dirty(CcdIncidents *g, CcdIncident *inc)
{
    if (inc->dirty)
        return 0;
    if (g->n_dirty == g->cap_dirty) {
        size_t cap = g->cap_dirty ? 2 * g->cap_dirty : 64;
        CcdIncident **p = realloc(g->dirty, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        g->dirty = p;
        g->cap_dirty = cap;
    }
    g->dirty[g->n_dirty++] = inc;
    inc->dirty = 1;
    return 0;
}

/* The group of an alert's cell: its site (region with group_by region), else the other
 * label, else the cell itself. */
static void alert_group(const CcdIncidents *g, const CcdIncAlert *a, const char **name, int *scope)
{
    const char *first = g->s.group_by == CCD_INC_BY_REGION ? a->region : a->site;
    const char *second = g->s.group_by == CCD_INC_BY_REGION ? a->site : a->region;
    int s1 = g->s.group_by == CCD_INC_BY_REGION ? CCD_INC_REGION : CCD_INC_SITE;
    if (first && first[0]) {
        *name = first;
        *scope = s1;
    } else if (second && second[0]) {
        *name = second;
        *scope = s1 == CCD_INC_SITE ? CCD_INC_REGION : CCD_INC_SITE;
    } else {
        *name = a->cell;
        *scope = CCD_INC_CELL;
    }
}

static char *dupn(const char *s) { return s ? strdup(s) : NULL; }

/* The key of an incident's group in open and resolving. */
static void incident_key(const CcdIncident *inc, char *key, size_t n)
{
    snprintf(key, n, "%s:%s", ccd_inc_scope_name(inc->group_scope), inc->group);
}

static CcdIncident *incident_new(const CcdIncAlert *a, const char *group, int group_scope)
{
    CcdIncident *inc = calloc(1, sizeof *inc);
    if (!inc)
        return NULL;
    size_t n = strlen(group) + 48;
    inc->id = malloc(n);
    inc->group = strdup(group);
    inc->site = dupn(a->site);
    inc->region = dupn(a->region);
    if (!inc->id || !inc->group || (a->site && !inc->site) || (a->region && !inc->region)) {
        incident_free(inc);
        return NULL;
    }
    snprintf(inc->id, n, "%s:%s:%lld", ccd_inc_scope_name(group_scope), group, (long long)a->step);
    inc->group_scope = group_scope;
    inc->scope = CCD_INC_CELL;
    inc->firing = 1;
    inc->start_ts = a->start_ts;
    inc->group_cells = group_scope == CCD_INC_CELL ? 1 : a->group_cells;
    return inc;
}

/* Adds the alert as a member (its cell to the cells). 0 or -ENOMEM (inc unchanged). */
static int member_add(CcdIncident *inc, const CcdIncAlert *a)
{
    if (inc->n_m == inc->cap_m) {
        size_t cap = inc->cap_m ? 2 * inc->cap_m : 8;
        CcdIncMember *p = realloc(inc->m, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        inc->m = p;
        inc->cap_m = cap;
    }
    int new_cell = !ccd_strhash_get(&inc->cell_set, a->cell);
    if (new_cell && inc->n_cells == inc->cap_cells) {
        size_t cap = inc->cap_cells ? 2 * inc->cap_cells : 8;
        char **p = realloc(inc->cells, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        inc->cells = p;
        inc->cap_cells = cap;
    }
    CcdIncMember m = {strdup(a->id), strdup(a->cell), dupn(a->kpi), "", 1, a->critical};
    char *cell = new_cell ? strdup(a->cell) : NULL;
    snprintf(m.reason, sizeof m.reason, "%s", a->reason ? a->reason : "anomaly");
    if (!m.alert_id || !m.cell || (a->kpi && !m.kpi) || (new_cell && !cell) ||
        ccd_strhash_put(&inc->alert_ix, a->id, (void *)(uintptr_t)(inc->n_m + 1)) ||
        (new_cell && ccd_strhash_put(&inc->cell_set, a->cell, (void *)1))) {
        ccd_strhash_del(&inc->alert_ix, a->id);
        free(m.alert_id);
        free(m.cell);
        free(m.kpi);
        free(cell);
        return -ENOMEM;
    }
    inc->m[inc->n_m++] = m;
    inc->n_firing++;
    if (new_cell)
        inc->cells[inc->n_cells++] = cell;
    if (inc->n_cells >= 2)
        inc->scope = inc->group_scope;
    if (a->start_ts < inc->start_ts)
        inc->start_ts = a->start_ts;
    inc->critical |= a->critical;
    return 0;
}

/* A profile-only anomaly under the paging rule's own persistence (profile_persist_steps). */
static int profile_rule(const CcdIncidents *g, const CcdIncAlert *a)
{
    return a->profile_only && g->s.profile_persist_steps > 0 && g->s.cell_persist_steps > 0;
}

/* A stuck alert under the paging rule's own persistence (stuck_persist_steps). */
static int stuck_rule(const CcdIncidents *g, const CcdIncAlert *a)
{
    return a->reason && !strcmp(a->reason, "stuck") && g->s.stuck_persist_steps > 0 &&
           g->s.cell_persist_steps > 0;
}

/* The paging rule's own evidence of a cell: what opens an incident of one cell. */
static int pages_alone(const CcdIncidents *g, const CcdIncAlert *a)
{
    /* critical: a profile-only anomaly too (it turns critical by its forecast z) */
    if (g->s.cell_persist_steps <= 0 || a->critical)
        return 1;
    const char *r = a->reason ? a->reason : "anomaly";
    return !strcmp(r, "all_zero") || (!strcmp(r, "missing") && !a->kpi);
}

typedef struct HeldScan {
    const char *gkey, *cell; /* the group; a cell to skip (NULL: none) */
    int other;               /* a held alert of the group from another cell (the pair's) */
    int any;                 /* with cell: a held alert of the group from another cell */
    int same_kpi;            /* with cell: the other's alert on kpi only */
    int no_profile;          /* with cell: the other's alert not profile-only */
    const char *kpi;         /* (NULL: a cell-level alert) */
    char **ids;              /* with collect: the held alerts of the group */
    size_t n, cap;
    int oom;
} HeldScan;

static void scan_held(void *cookie, const char *key, void *val)
{
    HeldScan *x = cookie;
    const Held *h = val;
    if (strcmp(h->gkey, x->gkey))
        return;
    x->any |= x->cell && strcmp(h->a.cell, x->cell);
    if (x->cell && strcmp(h->a.cell, x->cell) &&
        (!x->same_kpi || (x->kpi && h->a.kpi ? !strcmp(x->kpi, h->a.kpi) : x->kpi == h->a.kpi)) &&
        (!x->no_profile || !h->a.profile_only))
        x->other = 1;
    if (!x->ids && x->cap == 0)
        return; /* only looking */
    if (x->n == x->cap) {
        size_t cap = 2 * x->cap;
        char **p = realloc(x->ids, cap * sizeof *p);
        if (!p) {
            x->oom = 1;
            return;
        }
        x->ids = p;
        x->cap = cap;
    }
    if (!(x->ids[x->n] = strdup(key)))
        x->oom = 1;
    else
        x->n++;
}

static Held *held_new(const CcdIncAlert *a, const char *gkey)
{
    Held *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->a = *a;
    h->a.id = strdup(a->id);
    h->a.cell = strdup(a->cell);
    h->a.site = dupn(a->site);
    h->a.region = dupn(a->region);
    h->a.reason = dupn(a->reason);
    h->a.kpi = dupn(a->kpi);
    h->gkey = strdup(gkey);
    h->strong_steps = 1;
    h->last_strong = a->step;
    if (!h->a.id || !h->a.cell || (a->site && !h->a.site) || (a->region && !h->a.region) ||
        (a->reason && !h->a.reason) || (a->kpi && !h->a.kpi) || !h->gkey) {
        held_free(h);
        return NULL;
    }
    return h;
}

static int add_firing_as(CcdIncidents *g, const CcdIncAlert *a, int force);

static int is_anomaly(const CcdIncAlert *a) { return !a->reason || !strcmp(a->reason, "anomaly"); }

/* Takes the held alert id out of the held (NULL: none). */
static Held *held_take(CcdIncidents *g, const char *id)
{
    Held *h = ccd_strhash_del(&g->held, id);
    if (h && ccd_strhash_get(&g->held_cell, h->a.cell) == h)
        ccd_strhash_del(&g->held_cell, h->a.cell);
    return h;
}

/* Puts h in the held. 0 or -ENOMEM (h not held). */
static int held_put(CcdIncidents *g, Held *h)
{
    if (ccd_strhash_put(&g->held, h->a.id, h))
        return -ENOMEM;
    if (is_anomaly(&h->a) && ccd_strhash_put(&g->held_cell, h->a.cell, h)) {
        ccd_strhash_del(&g->held, h->a.id);
        return -ENOMEM;
    }
    return 0;
}

/* The alerts held for the group gkey join its incident, just opened. 0 or -ENOMEM (those
 * not joined stay held). */
static int held_join(CcdIncidents *g, const char *gkey)
{
    if (!g->held.n)
        return 0;
    HeldScan x = {gkey, NULL, 0, 0, 0, 0, NULL, malloc(8 * sizeof(char *)), 0, 8, 0};
    if (!x.ids)
        return -ENOMEM;
    ccd_strhash_foreach(&g->held, scan_held, &x);
    int rc = x.oom ? -ENOMEM : 0;
    for (size_t i = 0; i < x.n; i++) {
        Held *h = held_take(g, x.ids[i]);
        if (h && add_firing_as(g, &h->a, 1)) {
            if (held_put(g, h)) /* kept held if it cannot join */
                held_free(h);
            rc = -ENOMEM;
        } else {
            held_free(h);
        }
        free(x.ids[i]);
    }
    free(x.ids);
    return rc;
}

/* Holds a firing below the rule, unless another cell of its site (region) is held: then the
 * two cells open the group's incident. */
static int hold_or_open(CcdIncidents *g, const CcdIncAlert *a, const char *key, int scope,
                        int *open)
{
    *open = 0;
    Held *h = ccd_strhash_get(&g->held, a->id);
    if (h) { /* fired again: a severity that rose */
        if (!a->critical)
            return 0;
        h->a.critical = 1;
        *open = 1;
        return 0;
    }
    /* two cells of the site open its incident at once: on one KPI (site_same_kpi), neither a
     * profile-only anomaly under profile_persist_steps (site_forecast) */
    const int no_profile =
        g->s.site_forecast && g->s.profile_persist_steps > 0 && g->s.cell_persist_steps > 0;
    if (scope != CCD_INC_CELL) {
        HeldScan x = {key, a->cell, 0, 0, g->s.site_same_kpi, no_profile, a->kpi, NULL, 0, 0, 0};
        ccd_strhash_foreach(&g->held, scan_held, &x);
        if (x.other && !(no_profile && a->profile_only)) {
            *open = 1;
            return 0;
        }
        g->st.pair_refused += (uint64_t)x.any; /* another cell held, not a pair */
    }
    if (!(h = held_new(a, key)))
        return -ENOMEM;
    if (held_put(g, h)) {
        held_free(h);
        return -ENOMEM;
    }
    g->st.alerts_below_paging++;
    g->st.profile_held += (uint64_t)profile_rule(g, a);
    g->st.stuck_held += (uint64_t)stuck_rule(g, a);
    return 0;
}

static int add_firing(CcdIncidents *g, const CcdIncAlert *a) { return add_firing_as(g, a, 0); }

/* force: open the group's incident whatever the paging rule says (evidence, held alerts). */
static int add_firing_as(CcdIncidents *g, const CcdIncAlert *a, int force)
{
    CcdIncident *inc = ccd_strhash_get(&g->alerts, a->id);
    if (inc) { /* fired again: a severity that rose */
        CcdIncMember *m = &inc->m[(uintptr_t)ccd_strhash_get(&inc->alert_ix, a->id) - 1];
        if (a->critical && !m->critical) {
            m->critical = inc->critical = 1;
            inc->time = a->ts;
            return mark_dirty(g, inc);
        }
        return 0;
    }
    const char *group;
    int scope;
    char key[256];
    alert_group(g, a, &group, &scope);
    snprintf(key, sizeof key, "%s:%s", ccd_inc_scope_name(scope), group);
    int created = 0;
    if (!(inc = ccd_strhash_get(&g->open, key))) {
        if (!force && !pages_alone(g, a)) {
            int open, rc = hold_or_open(g, a, key, scope, &open);
            if (rc || !open)
                return rc;
            Held *h = held_take(g, a->id); /* it opens now: not held */
            held_free(h);
        }
        if (!(inc = incident_new(a, group, scope)))
            return -ENOMEM;
        if (ccd_strhash_put(&g->open, key, inc)) {
            incident_free(inc);
            return -ENOMEM;
        }
        created = 1;
    }
    if (member_add(inc, a) || ccd_strhash_put(&g->alerts, a->id, inc) || mark_dirty(g, inc)) {
        if (created) { /* nothing else refers to it yet */
            ccd_strhash_del(&g->open, key);
            ccd_strhash_del(&g->alerts, a->id);
            incident_free(inc);
        }
        return -ENOMEM;
    }
    if (a->group_cells > inc->group_cells && inc->group_scope != CCD_INC_CELL)
        inc->group_cells = a->group_cells; /* a topology reloaded with more cells */
    inc->time = a->ts > inc->time ? a->ts : inc->time;
    if (inc->resolving) { /* in its resolve hold: open again, as if it had not resolved */
        ccd_strhash_del(&g->resolving, key);
        inc->resolving = 0;
        inc->end_ts = 0;
        g->st.hold_rejoined++;
    }
    g->st.alerts_grouped++;
    return created ? held_join(g, key) : 0;
}

static int add_resolved(CcdIncidents *g, const CcdIncAlert *a)
{
    CcdIncident *inc = ccd_strhash_del(&g->alerts, a->id);
    Held *h = inc ? NULL : held_take(g, a->id);
    if (h) { /* held below the rule: it ends an alert, no incident */
        held_free(h);
        return 0;
    }
    if (!inc) {
        g->st.alerts_unknown++;
        return 0;
    }
    CcdIncMember *m = &inc->m[(uintptr_t)ccd_strhash_get(&inc->alert_ix, a->id) - 1];
    m->firing = 0;
    inc->n_firing--;
    inc->time = a->ts;
    if (!inc->n_firing) { /* its last alert: the incident resolves */
        char key[256];
        incident_key(inc, key, sizeof key);
        inc->end_ts = a->ts;
        if (g->s.resolve_hold_steps > 0 && !ccd_strhash_put(&g->resolving, key, inc)) {
            /* open, resolving, until the hold expires (ccd_incidents_evidence_expire): emitted
             * firing with no firing alert, as any member's resolution (out of memory: it
             * resolves at once) */
            inc->resolving = 1;
            inc->resolve_step = a->step;
        } else {
            ccd_strhash_del(&g->open, key);
            inc->firing = 0;
        }
    }
    /* a resolved incident must reach the emit (which keeps or frees it): its dirty slot
     * was taken when it fired in this flush, or is taken now */
    if (mark_dirty(g, inc)) {
        if (!inc->firing) { /* cannot be emitted: dropped, counted */
            incident_free(inc);
        }
        return -ENOMEM;
    }
    return 0;
}

int ccd_incidents_add(CcdIncidents *g, const CcdIncAlert *a)
{
    if (!a->id || !a->cell)
        return -EINVAL;
    int rc = a->firing ? add_firing(g, a) : add_resolved(g, a);
    if (rc == -ENOMEM)
        g->st.oom++;
    return rc;
}

/* ---- cells together as evidence (incidents.h; docs/design/site-evidence.md) ---------- */

/* The cells of its group a class needs at one step: evidence_cells, or the share of the
 * group's cells when that is more. */
static int evidence_need(const CcdIncidentSettings *s, int group_cells)
{
    int need = s->evidence_cells;
    if (s->evidence_share > 0 && group_cells > 0) {
        double share = s->evidence_share * group_cells;
        int n = (int)share;
        n += (double)n < share;
        need = n > need ? n : need;
    }
    return need < 2 ? 2 : need; /* a lone cell needs its own alert */
}

/* What the member stands for in the summary: what its class is evidence of. */
static const char *evidence_reason(const char *cls)
{
    return !strcmp(cls, "all_zero") ? "all_zero" : !strcmp(cls, "missing") ? "missing" : "anomaly";
}

/* Adds the pending report p of group (labels of e) to the group's incident as an evidence
 * member. 0 or -ENOMEM. */
static int evidence_join(CcdIncidents *g, const CcdIncEvidence *e, const char *gkey, Pend *p)
{
    char key[CC_INC_KEY_MAX], id[CC_INC_KEY_MAX + 24];
    snprintf(key, sizeof key, "%s:evidence:%s", p->cell, p->cls);
    snprintf(id, sizeof id, "%s:%lld", key, (long long)p->step);
    EvidMember *em = ccd_strhash_get(&g->evid, key);
    if (em) { /* already a member (a report of this step came twice) */
        p->joined = 1;
        return 0;
    }
    CcdIncAlert a = {
        .id = id,
        .cell = p->cell,
        .site = e->site,
        .region = e->region,
        .reason = evidence_reason(p->cls),
        .kpi = p->kpi,
        .firing = 1,
        .step = p->step,
        .ts = p->ts,
        .start_ts = p->ts,
        .group_cells = e->group_cells,
    };
    int opened = !ccd_strhash_get(&g->open, gkey);
    if (!(em = calloc(1, sizeof *em)) || !(em->alert_id = strdup(id))) {
        free(em);
        return -ENOMEM;
    }
    int rc = add_firing_as(g, &a, 1);
    if (!rc && !(em->inc = ccd_strhash_get(&g->alerts, id)))
        rc = -ENOMEM;
    if (!rc && ccd_strhash_put(&g->evid, key, em)) {
        /* the member cannot be tracked: resolve it at once rather than hold the incident */
        add_resolved(g, &a);
        rc = -ENOMEM;
    }
    if (rc) {
        free(em->alert_id);
        free(em);
        return rc;
    }
    em->seen_step = p->step;
    em->seen_ts = p->ts;
    p->joined = 1;
    g->st.evidence_members++;
    g->st.evidence_opened += opened;
    return 0;
}

static PendGroup *pend_group(CcdIncidents *g, const char *gkey)
{
    PendGroup *pg = ccd_strhash_get(&g->pending, gkey);
    if (pg)
        return pg;
    if (!(pg = calloc(1, sizeof *pg)))
        return NULL;
    if (ccd_strhash_put(&g->pending, gkey, pg)) {
        free(pg);
        return NULL;
    }
    return pg;
}

/* Drops the reports of steps before `step` − 1 from a group's pending list. */
static void pend_prune(PendGroup *pg, int64_t step)
{
    size_t w = 0;
    for (size_t i = 0; i < pg->n; i++) {
        if (pg->v[i].step < step - 1)
            pend_clear(&pg->v[i]);
        else
            pg->v[w++] = pg->v[i];
    }
    pg->n = w;
}

static int evidence_add(CcdIncidents *g, const CcdIncEvidence *e)
{
    const char *group;
    int scope;
    char gkey[256], key[CC_INC_KEY_MAX];
    CcdIncAlert ga = {.cell = e->cell, .site = e->site, .region = e->region};
    alert_group(g, &ga, &group, &scope);
    if (scope == CCD_INC_CELL) /* no site, no region: a lone cell */
        return 0;
    snprintf(gkey, sizeof gkey, "%s:%s", ccd_inc_scope_name(scope), group);
    snprintf(key, sizeof key, "%s:evidence:%s", e->cell, e->cls);
    EvidMember *em = ccd_strhash_get(&g->evid, key);
    if (em && e->step > em->seen_step) {
        em->seen_step = e->step;
        em->seen_ts = e->ts;
    }
    PendGroup *pg = pend_group(g, gkey);
    if (!pg)
        return -ENOMEM;
    pend_prune(pg, e->step);
    /* with no incident of the group open, a cell counts on a KPI class by the forecast's own
     * share (evidence_forecast: the profile's sum drains for hours after a wobble), on the
     * missing class once its silence was reported at evidence_missing_steps consecutive
     * steps (its streak: one late row is 1.5-2 steps of silence); it joins an open one at
     * once */
    const int open = ccd_strhash_get(&g->open, gkey) != NULL;
    const int persist = !strcmp(e->cls, "missing") && g->s.evidence_missing_steps > 1
                            ? g->s.evidence_missing_steps
                            : 1;
    const int counts = !e->kpi || !g->s.evidence_forecast || e->forecast_frac >= g->s.evidence_frac;
    size_t n_same = 0, n_persisted = 0, i;
    int streak = counts;
    for (i = 0; i < pg->n; i++) {
        const Pend *p = &pg->v[i];
        if (strcmp(p->cls, e->cls))
            continue;
        if (p->step == e->step - 1 && !strcmp(p->cell, e->cell))
            streak = counts ? p->streak + 1 : 0; /* its report of the step before */
        if (p->step != e->step)
            continue;
        if (!strcmp(p->cell, e->cell))
            break; /* reported twice at one step */
        n_same++;
        n_persisted += p->streak >= persist;
    }
    if (i < pg->n)
        return 0;
    if (pg->n == pg->cap) {
        size_t cap = pg->cap ? 2 * pg->cap : 8;
        Pend *v = realloc(pg->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        pg->v = v;
        pg->cap = cap;
    }
    Pend p = {strdup(e->cell), strdup(e->cls), dupn(e->kpi), e->step, e->ts, em != NULL, streak};
    if (!p.cell || !p.cls || (e->kpi && !p.kpi)) {
        pend_clear(&p);
        return -ENOMEM;
    }
    pg->v[pg->n++] = p;
    const int need = evidence_need(&g->s, e->group_cells);
    if ((int)(n_same + 1) < need)
        return 0;
    if (!open && (int)(n_persisted + (streak >= persist)) < need) {
        /* enough cells at this step, too few by the forecast or the silence's persistence:
         * counted once a step a class */
        g->st.evidence_refused += (int)(n_same + 1) == need;
        return 0;
    }
    /* enough cells of the group at this step on this class: each joins */
    for (i = 0; i < pg->n; i++) {
        Pend *q = &pg->v[i];
        if (q->joined || q->step != e->step || strcmp(q->cls, e->cls))
            continue;
        int rc = evidence_join(g, e, gkey, q);
        if (rc)
            return rc;
    }
    return 0;
}

/* The paging rule's persistence of a held anomaly: its cell past a full bar on a KPI at
 * cell_persist_steps distinct steps opens its incident. 0 or -ENOMEM (counted). */
static void held_evidence(CcdIncidents *g, const CcdIncEvidence *e)
{
    Held *h = ccd_strhash_get(&g->held_cell, e->cell);
    if (!h || !e->kpi || e->step <= h->last_strong)
        return;
    /* a profile-only anomaly by its forecast's share alone: the profile sum it fired on stays
     * past any share while it drains */
    if (!((profile_rule(g, &h->a) ? e->forecast_frac : e->frac) >= g->s.cell_persist_frac))
        return;
    /* cell_persist_own_kpi: the alert's own deviation persisting, not another KPI's */
    if (g->s.cell_persist_own_kpi && h->a.kpi && strcmp(e->kpi, h->a.kpi)) {
        g->st.persist_other_kpi++;
        return;
    }
    h->last_strong = e->step;
    if (++h->strong_steps < g->s.cell_persist_steps)
        return;
    held_take(g, h->a.id);
    if (add_firing_as(g, &h->a, 1)) {
        if (held_put(g, h))
            held_free(h);
        g->st.oom++;
        return;
    }
    g->st.alerts_persisted++;
    g->st.profile_persisted += (uint64_t)profile_rule(g, &h->a);
    held_free(h);
}

int ccd_incidents_evidence(CcdIncidents *g, const CcdIncEvidence *e)
{
    if (g->held_cell.n && e->cell)
        held_evidence(g, e);
    if (g->s.evidence_cells <= 0 || !e->cell || !e->cls || !(e->frac >= g->s.evidence_frac))
        return 0;
    g->st.evidence_reports++;
    int rc = evidence_add(g, e);
    if (rc == -ENOMEM)
        g->st.oom++;
    return rc;
}

typedef struct Expire {
    int64_t before;
    char **keys;
    size_t n, cap;
    int oom;
} Expire;

static void collect_stale(void *cookie, const char *key, void *val)
{
    Expire *x = cookie;
    const EvidMember *em = val;
    if (em->seen_step >= x->before || x->oom)
        return;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 16;
        char **k = realloc(x->keys, cap * sizeof *k);
        if (!k) {
            x->oom = 1;
            return;
        }
        x->keys = k;
        x->cap = cap;
    }
    if (!(x->keys[x->n] = strdup(key)))
        x->oom = 1;
    else
        x->n++;
}

static void prune_group(void *cookie, const char *key, void *val)
{
    (void)key;
    pend_prune(val, *(const int64_t *)cookie);
}

typedef struct CellScan {
    const Held *h; /* looking for another held alert of h's cell */
    int found;
} CellScan;

static void scan_cell(void *cookie, const char *key, void *val)
{
    (void)key;
    CellScan *x = cookie;
    const Held *o = val;
    x->found |= o != x->h && !strcmp(o->a.cell, x->h->a.cell);
}

/* Another alert of h's cell is held. O(held). */
static int other_of_cell(const CcdStrHash *held, const Held *h)
{
    CellScan x = {h, 0};
    ccd_strhash_foreach(held, scan_cell, &x);
    return x.found;
}

typedef struct Persisted {
    const CcdStrHash *held; /* the held alerts (a stuck one looks for another of its cell) */
    int64_t by;             /* fired at or before this step */
    int64_t stuck_by;       /* a stuck alert alone of its cell: fired at or before this step */
    int64_t profile_by;     /* a profile-only anomaly: fired at or before this step */
    char **ids;
    size_t n, cap;
    int oom;
} Persisted;

static void collect_persisted(void *cookie, const char *key, void *val)
{
    Persisted *x = cookie;
    const Held *h = val;
    /* an anomaly persists by its evidence (held_evidence), a profile-only one and the
     * others by firing */
    int profile = x->profile_by != INT64_MIN && h->a.profile_only && is_anomaly(&h->a);
    /* a stuck alert by firing cell_persist_steps with another alert of its cell held (a
     * frozen cell: several KPIs at once), alone by firing stuck_persist_steps */
    int stuck = x->stuck_by != x->by && h->a.reason && !strcmp(h->a.reason, "stuck");
    if (x->oom ||
        (profile ? h->a.step > x->profile_by
         : stuck ? h->a.step > x->by || (h->a.step > x->stuck_by && !other_of_cell(x->held, h))
                 : (is_anomaly(&h->a) && x->by != INT64_MAX) || h->a.step > x->by))
        return;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 16;
        char **k = realloc(x->ids, cap * sizeof *k);
        if (!k) {
            x->oom = 1;
            return;
        }
        x->ids = k;
        x->cap = cap;
    }
    if (!(x->ids[x->n] = strdup(key)))
        x->oom = 1;
    else
        x->n++;
}

/* Held alerts that fired cell_persist_steps or more steps before `step` and still fire open
 * their group's incident (the others of the group join it). */
static void held_persist(CcdIncidents *g, int64_t step)
{
    if (!g->held.n)
        return;
    Persisted x = {.by = g->s.cell_persist_steps > 0 ? step - g->s.cell_persist_steps : INT64_MAX,
                   .profile_by = INT64_MIN};
    if (g->s.cell_persist_steps > 0 && g->s.profile_persist_steps > 0)
        x.profile_by = step - g->s.profile_persist_steps;
    x.held = &g->held;
    x.stuck_by = g->s.cell_persist_steps > 0 && g->s.stuck_persist_steps > 0
                     ? step - g->s.stuck_persist_steps
                     : x.by;
    ccd_strhash_foreach(&g->held, collect_persisted, &x);
    for (size_t i = 0; i < x.n; i++) {
        Held *h = held_take(g, x.ids[i]);
        if (h) { /* NULL: it joined with an earlier one of its group */
            if (add_firing_as(g, &h->a, 1)) {
                if (held_put(g, h)) /* tried again at the next step */
                    held_free(h);
                g->st.oom++;
            } else {
                g->st.alerts_persisted++;
                g->st.profile_persisted += (uint64_t)profile_rule(g, &h->a);
                g->st.stuck_persisted += (uint64_t)stuck_rule(g, &h->a);
                held_free(h);
            }
        }
        free(x.ids[i]);
    }
    free(x.ids);
    if (x.oom)
        g->st.oom++;
}

/* Evidence members last reported before step − 1 resolve. */
static void evidence_resolve(CcdIncidents *g, int64_t step)
{
    Expire x = {step - 1, NULL, 0, 0, 0};
    ccd_strhash_foreach(&g->evid, collect_stale, &x);
    for (size_t i = 0; i < x.n; i++) {
        EvidMember *em = ccd_strhash_del(&g->evid, x.keys[i]);
        /* resolved as of its last report; a resolve hold counts from the step it is found */
        CcdIncAlert a = {.id = em->alert_id, .cell = "", .step = step, .ts = em->seen_ts};
        ccd_incidents_add(g, &a);
        free_evid(NULL, NULL, em);
        free(x.keys[i]);
    }
    free(x.keys);
    if (x.oom)
        g->st.oom++; /* those left are expired at the next step */
}

typedef struct HoldScan {
    int64_t before; /* the holds of incidents whose last alert resolved before this step end */
    CcdIncident **v;
    size_t n, cap;
    int oom;
} HoldScan;

static void collect_hold_ended(void *cookie, const char *key, void *val)
{
    (void)key;
    HoldScan *x = cookie;
    CcdIncident *inc = val;
    if (inc->resolve_step >= x->before || x->oom)
        return;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 16;
        CcdIncident **v = realloc(x->v, cap * sizeof *v);
        if (!v) {
            x->oom = 1;
            return;
        }
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = inc;
}

/* Incidents whose last alert resolved resolve_hold_steps or more steps before `step` resolve,
 * end_ts the last alert's resolution (set when it resolved). */
static void hold_expire(CcdIncidents *g, int64_t step)
{
    HoldScan x = {step - g->s.resolve_hold_steps, NULL, 0, 0, 0};
    ccd_strhash_foreach(&g->resolving, collect_hold_ended, &x);
    for (size_t i = 0; i < x.n; i++) {
        CcdIncident *inc = x.v[i];
        if (mark_dirty(g, inc)) { /* cannot be emitted yet: tried again at the next step */
            x.oom = 1;
            continue;
        }
        char key[256];
        incident_key(inc, key, sizeof key);
        ccd_strhash_del(&g->resolving, key);
        ccd_strhash_del(&g->open, key);
        inc->resolving = 0;
        inc->firing = 0;
        g->st.hold_expired++;
    }
    free(x.v);
    if (x.oom)
        g->st.oom++;
}

void ccd_incidents_evidence_expire(CcdIncidents *g, int64_t step)
{
    if (step <= g->expired_step)
        return;
    g->expired_step = step;
    held_persist(g, step);
    ccd_strhash_foreach(&g->pending, prune_group, &step);
    if (g->evid.n)
        evidence_resolve(g, step);
    if (g->resolving.n) /* after the evidence: a member resolved now starts its hold now */
        hold_expire(g, step);
}

/* What the cell's member alerts say it has: 0 lost traffic (all_zero), 1 stopped
 * reporting (missing, cell-level), 2 deviating (anomaly), 3 suspect data (the others). */
static int cell_category(const CcdIncident *inc, const char *cell)
{
    int best = 3;
    for (size_t i = 0; i < inc->n_m; i++) {
        const CcdIncMember *m = &inc->m[i];
        if (strcmp(m->cell, cell))
            continue;
        int c = !strcmp(m->reason, "all_zero")             ? 0
                : !strcmp(m->reason, "missing") && !m->kpi ? 1
                : !strcmp(m->reason, "anomaly")            ? 2
                                                           : 3;
        best = c < best ? c : best;
    }
    return best;
}

static void hhmm(int64_t ts, char *buf, size_t n)
{
    time_t t = (time_t)ts;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M", &tm);
}

/* "site S-0042: 5 of 6 cells lost traffic since 2026-01-02 10:15 UTC" */
static void summarize(CcdIncident *inc)
{
    static const char *const what[] = {"lost traffic", "stopped reporting",
                                       "deviating from forecast", "sending suspect data"};
    int cat = -1;
    for (size_t i = 0; i < inc->n_cells; i++) {
        int c = cell_category(inc, inc->cells[i]);
        cat = cat < 0 || cat == c ? c : 4;
    }
    const char *verb = cat >= 0 && cat < 4 ? what[cat] : "alerting";
    char since[32], end[48] = "";
    hhmm(inc->start_ts, since, sizeof since);
    if (!inc->firing) {
        char e[32];
        hhmm(inc->end_ts, e, sizeof e);
        snprintf(end, sizeof end, "; resolved %s", e);
    }
    if (inc->scope == CCD_INC_CELL) {
        char where[160] = "";
        if (inc->group_scope != CCD_INC_CELL)
            snprintf(where, sizeof where, " (%s %s)", ccd_inc_scope_name(inc->group_scope),
                     inc->group);
        snprintf(inc->summary, sizeof inc->summary, "cell %s%s: %s since %s UTC%s",
                 inc->n_cells ? inc->cells[0] : inc->group, where, verb, since, end);
    } else if (inc->group_cells >= (int)inc->n_cells) {
        snprintf(inc->summary, sizeof inc->summary, "%s %s: %zu of %d cells %s since %s UTC%s",
                 ccd_inc_scope_name(inc->scope), inc->group, inc->n_cells, inc->group_cells, verb,
                 since, end);
    } else {
        snprintf(inc->summary, sizeof inc->summary, "%s %s: %zu cells %s since %s UTC%s",
                 ccd_inc_scope_name(inc->scope), inc->group, inc->n_cells, verb, since, end);
    }
}

void ccd_incidents_emit(CcdIncidents *g, void (*fn)(void *cookie, const CcdIncident *inc),
                        void *cookie)
{
    for (size_t i = 0; i < g->n_dirty; i++) {
        CcdIncident *inc = g->dirty[i];
        inc->dirty = 0;
        summarize(inc);
        if (!inc->firing)
            g->st.resolved++;
        else if (inc->seq == 0)
            g->st.opened++;
        else
            g->st.updated++;
        inc->seq++;
        if (fn)
            fn(cookie, inc);
        if (inc->firing)
            continue;
        size_t keep = (size_t)g->s.keep;
        if (g->n_recent == keep) { /* the oldest resolved one goes */
            incident_free(g->recent[g->head]);
            g->recent[g->head] = inc;
            g->head = (g->head + 1) % keep;
        } else {
            g->recent[(g->head + g->n_recent++) % keep] = inc;
        }
    }
    g->n_dirty = 0;
}

typedef struct Collect {
    const CcdIncident **v;
    size_t n;
} Collect;

static void collect_open(void *cookie, const char *key, void *val)
{
    (void)key;
    Collect *c = cookie;
    c->v[c->n++] = val;
}

static int cmp_start(const void *a, const void *b)
{
    const CcdIncident *x = *(const CcdIncident *const *)a, *y = *(const CcdIncident *const *)b;
    if (x->start_ts != y->start_ts)
        return x->start_ts < y->start_ts ? -1 : 1;
    return strcmp(x->id, y->id);
}

const CcdIncident **ccd_incidents_list(const CcdIncidents *g, size_t *n)
{
    Collect c = {malloc((g->open.n + g->n_recent + 1) * sizeof *c.v), 0};
    *n = 0;
    if (!c.v)
        return NULL;
    ccd_strhash_foreach(&g->open, collect_open, &c);
    qsort(c.v, c.n, sizeof *c.v, cmp_start);
    for (size_t i = g->n_recent; i-- > 0;)
        c.v[c.n++] = g->recent[(g->head + i) % (size_t)g->s.keep];
    *n = c.n;
    return c.v;
}

static void count_scope(void *cookie, const char *key, void *val)
{
    (void)key;
    CcdIncidentStats *st = cookie;
    const CcdIncident *inc = val;
    st->firing_site += inc->scope == CCD_INC_SITE;
    st->firing_region += inc->scope == CCD_INC_REGION;
}

void ccd_incidents_stats(const CcdIncidents *g, CcdIncidentStats *st)
{
    *st = g->st;
    st->firing = g->open.n;
    st->held = g->held.n;
    st->resolving = g->resolving.n;
    st->recent = g->n_recent;
    st->firing_site = st->firing_region = 0;
    ccd_strhash_foreach(&g->open, count_scope, st);
}

static json_t *str_or_null(const char *s) { return s ? ccd_json_text(s, NULL) : json_null(); }

static json_t *time_json(int64_t ts)
{
    char buf[40];
    time_t t = (time_t)ts;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

char *ccd_incident_json(const CcdIncident *inc, size_t *len)
{
    /* labels, ids and KPI names as JSON text with U+FFFD for bytes that are not UTF-8
     * (json_string gave NULL for them, and json_pack then failed: the incident was lost) */
    json_t *cells = json_array(), *kpis = json_array(), *alerts = json_array(),
           *firing = json_array();
    for (size_t i = 0; i < inc->n_cells; i++)
        json_array_append_new(cells, ccd_json_text(inc->cells[i], NULL));
    for (size_t i = 0; i < inc->n_m; i++) {
        const CcdIncMember *m = &inc->m[i];
        json_array_append_new(alerts, ccd_json_text(m->alert_id, NULL));
        if (m->firing)
            json_array_append_new(firing, ccd_json_text(m->alert_id, NULL));
        json_t *kpi = m->kpi ? ccd_json_text(m->kpi, NULL) : NULL;
        for (size_t k = 0; kpi && k < json_array_size(kpis); k++)
            if (json_equal(json_array_get(kpis, k), kpi)) {
                json_decref(kpi);
                kpi = NULL;
            }
        if (kpi)
            json_array_append_new(kpis, kpi);
    }
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
        "schema", "cellcast.incident/1", "id", inc->id, "state",
        inc->firing ? "firing" : "resolved", "scope", ccd_inc_scope_name(inc->scope), "site",
        str_or_null(inc->site), "region", str_or_null(inc->region), "cells", cells, "cells_total",
        inc->group_cells > 0 ? json_integer(inc->group_cells) : json_null(), "kpis", kpis, "alerts",
        alerts, "firing_alerts", firing, "severity",
        json_string(inc->critical ? "critical" : "warning"), "summary",
        ccd_json_text(inc->summary, NULL), "start_time", time_json(inc->start_ts), "end_time",
        inc->firing ? json_null() : time_json(inc->end_ts), "time", time_json(inc->time), "group",
        ccd_json_text(inc->group, NULL));
    if (!j)
        return NULL;
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (s && len)
        *len = strlen(s);
    return s;
}
