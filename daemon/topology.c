/*
 * topology.c — the topology file (topology.h): parsing, the lookups by cell and site, the
 * labels' JSON, and the daemon's copy reloaded from topology.path.
 */
#include "topology.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "cc_common.h"
#include "cc_json.h"
#include "cellcastd.h"
#include "log.h"
#include "msg_labels.h"
#include "strmap.h"
#include "utf8.h"

/* The fixed columns; any other is an operator's label. */
enum { COL_CELL, COL_SITE, COL_REGION, COL_SECTOR, COL_NEIGHBOURS, COL_LAT, COL_LON, COL_LABEL };

struct CcdTopology {
    char *text;                      /* the file, its separators turned into NULs */
    int n_cols;                      /* columns of the header */
    int col_kind[CCD_TOPO_MAX_COLS]; /* COL_* of each column */
    const char *col_name[CCD_TOPO_MAX_COLS];
    CcdTopoCell *cells;
    size_t n_cells;
    CcdStrHash by_cell; /* id -> CcdTopoCell */
    CcdStrHash sites;   /* site -> (void *)(uintptr_t) its count of cells */
    CcdStrHash regions; /* region -> the same */
    CcdMsgLabels *msg;  /* labels from the KPI messages (ingest.labels), NULL: none */
};

static const char *const fixed_names[COL_LABEL] = {"cell",       "site", "region", "sector",
                                                   "neighbours", "lat",  "lon"};

void ccd_topology_free(CcdTopology **tp)
{
    CcdTopology *t = *tp;
    if (!t)
        return;
    ccd_strhash_free(&t->by_cell);
    ccd_strhash_free(&t->sites);
    ccd_strhash_free(&t->regions);
    ccd_msg_labels_close(&t->msg);
    free(t->cells);
    free(t->text);
    free(t);
    *tp = NULL;
}

/* Why s cannot be a name or value, NULL when it can: it goes into JSON on Kafka (the alerts,
 * the incidents), into Alertmanager's labels and into log lines, which all want UTF-8 text
 * (a Latin-1 export of a spreadsheet is not), and no control character (but a tab where
 * tabs_ok). */
static const char *text_problem(const char *s, int tabs_ok)
{
    size_t n = strlen(s);
    if (!ccd_utf8_valid(s, n))
        return "is not UTF-8 (save the file as UTF-8)";
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] < 0x20 && !(tabs_ok && s[i] == '\t')) || s[i] == 0x7f)
            return "holds a control character";
    return NULL;
}

/* Splits line (NUL-terminated, modified) at commas into at most max fields, each trimmed
 * of spaces; the count, or -1 when there are more. */
static int split(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line;;) {
        if (n == max)
            return -1;
        char *comma = strchr(p, ',');
        if (comma)
            *comma = 0;
        while (*p == ' ' || *p == '\t')
            p++;
        char *e = p + strlen(p);
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            *--e = 0;
        f[n++] = p;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

static int parse_header(CcdTopology *t, char *line, const char *name, int lineno, char *err,
                        size_t errlen)
{
    char *f[CCD_TOPO_MAX_COLS];
    int n = split(line, f, CCD_TOPO_MAX_COLS), have_cell = 0;
    if (n < 0)
        return cc_errf(err, errlen, -EINVAL, "%s:%d: more than %d columns", name, lineno,
                       CCD_TOPO_MAX_COLS);
    for (int i = 0; i < n; i++) {
        const char *why;
        if (!f[i][0])
            return cc_errf(err, errlen, -EINVAL, "%s:%d: column %d has no name", name, lineno,
                           i + 1);
        if ((why = text_problem(f[i], 0)))
            return cc_errf(err, errlen, -EINVAL, "%s:%d: column %d name %s", name, lineno, i + 1,
                           why);
        for (int j = 0; j < i; j++)
            if (!strcmp(f[i], f[j]))
                return cc_errf(err, errlen, -EINVAL, "%s:%d: column '%s' named twice", name, lineno,
                               f[i]);
        if (strlen(f[i]) > CCD_TOPO_MAX_VALUE)
            return cc_errf(err, errlen, -EINVAL, "%s:%d: column name longer than %d bytes", name,
                           lineno, CCD_TOPO_MAX_VALUE);
        t->col_kind[i] = COL_LABEL;
        for (int k = 0; k < COL_LABEL; k++)
            if (!strcmp(f[i], fixed_names[k]))
                t->col_kind[i] = k;
        if (!strcmp(f[i], "neighbors"))
            t->col_kind[i] = COL_NEIGHBOURS;
        have_cell |= t->col_kind[i] == COL_CELL;
        t->col_name[i] = f[i];
    }
    t->n_cols = n;
    if (!have_cell)
        return cc_errf(err, errlen, -EINVAL, "%s:%d: no 'cell' column in the header", name, lineno);
    return 0;
}

/* One more cell for name's count in m (name NULL: none). 0 or -ENOMEM. */
static int count(CcdStrHash *m, const char *name)
{
    if (!name)
        return 0;
    uintptr_t k = (uintptr_t)ccd_strhash_get(m, name);
    return ccd_strhash_put(m, name, (void *)(k + 1));
}

static int parse_row(CcdTopology *t, char *line, const char *name, int lineno, char *err,
                     size_t errlen)
{
    char *f[CCD_TOPO_MAX_COLS];
    int n = split(line, f, CCD_TOPO_MAX_COLS);
    if (n != t->n_cols)
        return cc_errf(err, errlen, -EINVAL, "%s:%d: %d value(s) for %d column(s)", name, lineno,
                       n < 0 ? CCD_TOPO_MAX_COLS + 1 : n, t->n_cols);
    CcdTopoCell *c = &t->cells[t->n_cells];
    memset(c, 0, sizeof *c);
    c->lat = c->lon = NAN;
    for (int i = 0; i < n; i++) {
        const char *v = f[i];
        c->labels[i] = v;
        const char *why;
        if (!v[0])
            continue;
        if ((why = text_problem(v, t->col_kind[i] == COL_NEIGHBOURS))) /* ids apart by blanks */
            return cc_errf(err, errlen, -EINVAL, "%s:%d: %s value %s", name, lineno, t->col_name[i],
                           why);
        if (strlen(v) > CCD_TOPO_MAX_VALUE && t->col_kind[i] != COL_NEIGHBOURS)
            return cc_errf(err, errlen, -EINVAL, "%s:%d: %s value longer than %d bytes", name,
                           lineno, t->col_name[i], CCD_TOPO_MAX_VALUE);
        char *end;
        switch (t->col_kind[i]) {
        case COL_CELL: c->id = v; break;
        case COL_SITE: c->site = v; break;
        case COL_REGION: c->region = v; break;
        case COL_SECTOR: c->sector = v; break;
        case COL_NEIGHBOURS: c->neighbours = v; break;
        case COL_LAT:
        case COL_LON: {
            double x = strtod(v, &end);
            double lim = t->col_kind[i] == COL_LAT ? 90 : 180;
            if (*end || !isfinite(x) || fabs(x) > lim)
                return cc_errf(err, errlen, -EINVAL, "%s:%d: %s '%s' is not a number in [-%g, %g]",
                               name, lineno, t->col_name[i], v, lim, lim);
            if (t->col_kind[i] == COL_LAT)
                c->lat = x;
            else
                c->lon = x;
            break;
        }
        default: break;
        }
    }
    if (!c->id)
        return cc_errf(err, errlen, -EINVAL, "%s:%d: no cell id", name, lineno);
    if (strlen(c->id) > 64)
        return cc_errf(err, errlen, -EINVAL, "%s:%d: cell id longer than 64 characters", name,
                       lineno);
    if (ccd_strhash_get(&t->by_cell, c->id))
        return cc_errf(err, errlen, -EINVAL, "%s:%d: cell '%s' listed twice", name, lineno, c->id);
    if (ccd_strhash_put(&t->by_cell, c->id, c))
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    if (count(&t->sites, c->site) || count(&t->regions, c->region))
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    t->n_cells++;
    return 0;
}

int ccd_topology_parse(CcdTopology **out, const char *text, size_t len, const char *name, char *err,
                       size_t errlen)
{
    *out = NULL;
    CcdTopology *t = calloc(1, sizeof *t);
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (!t || !(t->text = malloc(len + 1)) || !(t->cells = calloc(lines, sizeof *t->cells))) {
        ccd_topology_free(&t);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    memcpy(t->text, text, len);
    t->text[len] = 0;
    if (memchr(text, 0, len)) {
        ccd_topology_free(&t);
        return cc_errf(err, errlen, -EINVAL, "%s: a NUL byte (not a text file)", name);
    }
    int rc = 0, lineno = 0, have_header = 0;
    for (char *p = t->text; p && !rc;) {
        char *nl = strchr(p, '\n'), *line = p;
        if (nl)
            *nl = 0;
        p = nl ? nl + 1 : NULL;
        lineno++;
        const char *s = line;
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (!*s || *s == '#')
            continue;
        if (strchr(line, '"'))
            rc = cc_errf(err, errlen, -EINVAL,
                         "%s:%d: quotes are not supported (no value holds "
                         "a comma)",
                         name, lineno);
        else if (!have_header)
            rc = parse_header(t, line, name, lineno, err, errlen), have_header = 1;
        else
            rc = parse_row(t, line, name, lineno, err, errlen);
    }
    if (!rc && !have_header)
        rc = cc_errf(err, errlen, -EINVAL, "%s: no header line (cell,site,region,...)", name);
    if (rc) {
        ccd_topology_free(&t);
        return rc;
    }
    *out = t;
    return 0;
}

int ccd_topology_load(CcdTopology **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return cc_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len + 65536 > cap) {
            char *nb = realloc(buf, cap = 2 * cap + 65536);
            if (!nb) {
                rc = cc_errf(err, errlen, -ENOMEM, "out of memory");
                break;
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) {
            if (ferror(f))
                rc = cc_errf(err, errlen, -EIO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (!rc)
        rc = ccd_topology_parse(out, buf ? buf : "", len, path, err, errlen);
    free(buf);
    return rc;
}

const CcdTopoCell *ccd_topology_cell(const CcdTopology *t, const char *cell)
{
    return t && cell ? ccd_strhash_get(&t->by_cell, cell) : NULL;
}

/* Whether column i is a label (written in "labels"): site, region, sector, the operator's.
 * lat, lon and neighbours are attributes of the cell, not labels to match on. */
static int is_label(const CcdTopology *t, int i)
{
    int k = t->col_kind[i];
    return k == COL_SITE || k == COL_REGION || k == COL_SECTOR || k == COL_LABEL;
}

/* The file's value of the cell's label `name`, NULL when none. */
static const char *file_label(const CcdTopology *t, const CcdTopoCell *c, const char *name)
{
    for (int i = 0; c && i < t->n_cols; i++)
        if (is_label(t, i) && !strcmp(t->col_name[i], name))
            return c->labels[i][0] ? c->labels[i] : NULL;
    return NULL;
}

const char *ccd_topology_label(const CcdTopology *t, const char *cell, const char *name)
{
    if (!t || !cell)
        return NULL;
    const char *v = file_label(t, ccd_topology_cell(t, cell), name);
    return v ? v : ccd_msg_labels_get(t->msg, cell, name); /* the file's wins */
}

int ccd_topology_has_label(const CcdTopology *t, const char *name)
{
    for (int i = 0; t && i < t->n_cols; i++)
        if (is_label(t, i) && !strcmp(t->col_name[i], name))
            return 1;
    for (int i = 0; t && i < ccd_msg_labels_n(t->msg); i++)
        if (!strcmp(ccd_msg_labels_name(t->msg, i), name))
            return 1;
    return 0;
}

int ccd_topology_site_cells(const CcdTopology *t, const char *site)
{
    if (!t || !site)
        return 0;
    int n = (int)(uintptr_t)ccd_strhash_get(&t->sites, site);
    return n ? n : ccd_msg_labels_count(t->msg, "site", site);
}

int ccd_topology_region_cells(const CcdTopology *t, const char *region)
{
    if (!t || !region)
        return 0;
    int n = (int)(uintptr_t)ccd_strhash_get(&t->regions, region);
    return n ? n : ccd_msg_labels_count(t->msg, "region", region);
}

CcdMsgLabels *ccd_topology_msg_labels(const CcdTopology *t) { return t ? t->msg : NULL; }

/* The file gives the cell this label (the messages' does not count for its site). */
static int file_gives(const void *cookie, const char *cell, const char *name)
{
    const CcdTopology *t = cookie;
    return file_label(t, ccd_topology_cell(t, cell), name) != NULL;
}

void ccd_topology_set_msg_labels(CcdTopology *t, CcdMsgLabels *m)
{
    if (t->msg != m)
        ccd_msg_labels_close(&t->msg);
    t->msg = m;
    if (m)
        ccd_msg_labels_shadow(m, file_gives, t);
}

size_t ccd_topology_n_cells(const CcdTopology *t) { return t ? t->n_cells : 0; }

static void json_label(CcJsonBuf *j, int *first, const char *name, const char *value)
{
    if (!*first)
        cc_json_printf(j, ",");
    cc_json_str(j, name);
    cc_json_printf(j, ":");
    cc_json_str(j, value);
    *first = 0;
}

static int is_fixed_label(const char *name)
{
    return !strcmp(name, "site") || !strcmp(name, "region") || !strcmp(name, "sector");
}

int ccd_topology_labels_json(const CcdTopology *t, const char *cell, char *buf, size_t cap)
{
    const CcdTopoCell *c = ccd_topology_cell(t, cell);
    CcJsonBuf j = cc_json_buf(buf, cap);
    int first = 1;
    cc_json_printf(&j, "{");
    /* site, region, sector first, from the file or the messages: a reader finds them at
     * once; then the file's other columns, then the messages' other labels */
    static const char *const fixed[] = {"site", "region", "sector"};
    for (int k = 0; t && k < 3; k++) {
        const char *v = ccd_topology_label(t, cell, fixed[k]);
        if (v)
            json_label(&j, &first, fixed[k], v);
    }
    for (int i = 0; c && i < t->n_cols; i++)
        if (t->col_kind[i] == COL_LABEL && c->labels[i][0])
            json_label(&j, &first, t->col_name[i], c->labels[i]);
    for (int i = 0; t && i < ccd_msg_labels_n(t->msg); i++) {
        const char *name = ccd_msg_labels_name(t->msg, i),
                   *v = ccd_msg_labels_value(t->msg, cell, i);
        if (v && !is_fixed_label(name) && !file_label(t, c, name))
            json_label(&j, &first, name, v);
    }
    cc_json_printf(&j, "}");
    return cc_json_fits(&j) ? (int)j.len : -ENOSPC;
}

int ccd_topology_splice_labels(const CcdTopology *t, const char *cell, char *buf, int n, size_t cap)
{
    if (n < 2 || buf[n - 1] != '}')
        return n;
    static const char key[] = ",\"labels\":";
    const size_t kl = sizeof key - 1;
    if ((size_t)n + kl + 2 > cap)
        return n;
    /* the labels go where the closing brace was, then the brace again */
    int k = ccd_topology_labels_json(t, cell, buf + n - 1 + kl, cap - (size_t)n + 1 - kl - 1);
    if (k < 0) {
        buf[n] = 0; /* the labels' writer may have overwritten the NUL */
        return n;
    }
    memcpy(buf + n - 1, key, kl);
    buf[n - 1 + kl + (size_t)k] = '}';
    buf[n + kl + (size_t)k] = 0;
    return n + (int)kl + k;
}

int ccd_topology_filter_on(const CcdTopoFilter *f) { return f->site || f->region || f->sector; }

static int label_is(const CcdTopology *t, const char *cell, const char *name, const char *want)
{
    const char *v;
    return !want || ((v = ccd_topology_label(t, cell, name)) && !strcmp(v, want));
}

int ccd_topology_filter_match(const CcdTopology *t, const CcdTopoFilter *f, const char *cell)
{
    return label_is(t, cell, "site", f->site) && label_is(t, cell, "region", f->region) &&
           label_is(t, cell, "sector", f->sector);
}

/* ---- the daemon's topology ---- */

/* The store of ingest.labels for the new topology: the previous one when the labels are
 * the same (the cells keep what their messages said), a new one, or NULL (none set). */
static int msg_labels_for(Ccd *d, CcdMsgLabels **out)
{
    const CcdStrMap *l = &d->cfg.ingest_labels;
    const char *names[CCD_MSG_LABELS_MAX], *fields[CCD_MSG_LABELS_MAX];
    int n = l->n < CCD_MSG_LABELS_MAX ? l->n : CCD_MSG_LABELS_MAX; /* the config checks it */
    *out = NULL;
    for (int i = 0; i < n; i++) {
        names[i] = l->items[i].key;
        fields[i] = l->items[i].value;
    }
    CcdMsgLabels *old = d->topology ? d->topology->msg : NULL;
    if (!n)
        return 0;
    if (ccd_msg_labels_same(old, names, fields, n)) {
        *out = old;
        d->topology->msg = NULL; /* moved */
        return 0;
    }
    return ccd_msg_labels_open(out, names, fields, n);
}

int ccd_topology_reload(Ccd *d)
{
    const char *path = d->cfg.topology_path;
    char err[512];
    CcdTopology *t = NULL;
    int rc;
    if (path && path[0] && (rc = ccd_topology_load(&t, path, err, sizeof err))) {
        d->topology_errors++;
        LOG_ERROR("topology", "%s (%s)", err,
                  d->topology ? "the previous topology stays" : "cells have no labels");
        return rc;
    }
    CcdMsgLabels *msg;
    if ((rc = msg_labels_for(d, &msg))) {
        LOG_ERROR("topology", "ingest.labels: %s", strerror(-rc));
        ccd_topology_free(&t);
        return rc;
    }
    if (!t && msg) { /* no file: an empty topology holds the messages' labels */
        static const char header[] = "cell\n";
        if ((rc = ccd_topology_parse(&t, header, sizeof header - 1, "ingest.labels", err,
                                     sizeof err))) {
            ccd_msg_labels_close(&msg);
            return rc;
        }
    }
    if (t)
        ccd_topology_set_msg_labels(t, msg);
    ccd_topology_free(&d->topology);
    d->topology = t;
    if (path && path[0]) {
        d->topology_loads++;
        LOG_INFO("topology", "%zu cell(s) in %zu site(s) from %s", t->n_cells, t->sites.n, path);
    }
    return 0;
}

void ccd_topology_close(Ccd *d) { ccd_topology_free(&d->topology); }

void ccd_topology_metrics(Ccd *d, struct evbuffer *b)
{
    evbuffer_add_printf(
        b,
        "# HELP cellcast_topology_cells Cells listed in the topology file (topology.path).\n"
        "# TYPE cellcast_topology_cells gauge\ncellcast_topology_cells %zu\n"
        "# HELP cellcast_topology_sites Sites of the topology file.\n"
        "# TYPE cellcast_topology_sites gauge\ncellcast_topology_sites %zu\n"
        "# HELP cellcast_topology_loads_total Topology files read (start and reloads).\n"
        "# TYPE cellcast_topology_loads_total counter\ncellcast_topology_loads_total %llu\n"
        "# HELP cellcast_topology_errors_total Topology files refused (the previous one stays).\n"
        "# TYPE cellcast_topology_errors_total counter\ncellcast_topology_errors_total %llu\n",
        ccd_topology_n_cells(d->topology), d->topology ? d->topology->sites.n : (size_t)0,
        (unsigned long long)d->topology_loads, (unsigned long long)d->topology_errors);
    CcdMsgLabelStats st;
    if (!ccd_topology_msg_labels(d->topology))
        return;
    ccd_msg_labels_stats(ccd_topology_msg_labels(d->topology), &st);
    evbuffer_add_printf(
        b,
        "# HELP cellcast_ingest_label_cells Cells with a label from their KPI messages "
        "(ingest.labels).\n"
        "# TYPE cellcast_ingest_label_cells gauge\ncellcast_ingest_label_cells %zu\n"
        "# HELP cellcast_ingest_label_changes_total Label values set or cleared from KPI "
        "messages.\n"
        "# TYPE cellcast_ingest_label_changes_total counter\n"
        "cellcast_ingest_label_changes_total %llu\n"
        "# HELP cellcast_ingest_labels_refused_total Label values of KPI messages refused "
        "(too_long: over 64 bytes; bad_value: not a string or integer, a control character; "
        "not_json, oom).\n"
        "# TYPE cellcast_ingest_labels_refused_total counter\n"
        "cellcast_ingest_labels_refused_total{reason=\"too_long\"} %llu\n"
        "cellcast_ingest_labels_refused_total{reason=\"bad_value\"} %llu\n"
        "cellcast_ingest_labels_refused_total{reason=\"not_json\"} %llu\n"
        "cellcast_ingest_labels_refused_total{reason=\"oom\"} %llu\n",
        st.cells, (unsigned long long)st.changes, (unsigned long long)st.too_long,
        (unsigned long long)st.bad_value, (unsigned long long)st.not_json,
        (unsigned long long)st.oom);
}
