/*
 * learn_windows.c — maintenance windows kept out of `cellcast learn`'s training rows
 * (learn_windows.h): the topology CSV's labels, the silences' windows per sampled cell.
 */
#include "learn_windows.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_common.h"
#include "silences.h"

#define MAX_MATCHED 64 /* maintenance silences of one cell, per file */

/* The topology CSV reduced to what matchers see: one row per cell, its site, region and
 * sector (NULL where the file has no such column or the value is empty). */
typedef struct Topo {
    char *text; /* the file, cut into the fields below */
    char **cell, **site, **region, **sector;
    size_t n;
} Topo;

static void topo_free(Topo *t)
{
    free(t->text);
    free(t->cell);
    free(t->site);
    free(t->region);
    free(t->sector);
    memset(t, 0, sizeof *t);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t k; b && (k = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *p = realloc(b, cap *= 2);
            if (!p)
                free(b);
            b = p;
        }
    }
    if (b)
        b[n] = 0;
    fclose(f);
    return b;
}

/* Splits line (NUL-terminated) at commas in place: at most max fields. */
static int split(char *line, char **field, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        field[n++] = p;
        p = strchr(p, ',');
        if (!p)
            break;
        *p++ = 0;
    }
    return n;
}

static int topo_read(Topo *t, const char *path, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (!(t->text = read_all(path)))
        return cc_errf(err, errlen, -EIO, "--topology %s: %s", path, strerror(errno));
    size_t lines = 1;
    for (const char *p = t->text; *p; p++)
        lines += *p == '\n';
    t->cell = calloc(lines, sizeof *t->cell);
    t->site = calloc(lines, sizeof *t->site);
    t->region = calloc(lines, sizeof *t->region);
    t->sector = calloc(lines, sizeof *t->sector);
    if (!t->cell || !t->site || !t->region || !t->sector) {
        topo_free(t);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    int col[4] = {-1, -1, -1, -1}; /* cell, site, region, sector */
    static const char *const names[4] = {"cell", "site", "region", "sector"};
    char *save = NULL, *f[256];
    int header = 1;
    for (char *line = strtok_r(t->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[len - 1] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        int nf = split(line, f, 256);
        if (header) {
            for (int i = 0; i < nf; i++)
                for (int k = 0; k < 4; k++)
                    if (!strcmp(f[i], names[k]))
                        col[k] = i;
            if (col[0] < 0) {
                topo_free(t);
                return cc_errf(err, errlen, -EINVAL,
                               "--topology %s: no column 'cell' in the header", path);
            }
            header = 0;
            continue;
        }
        char **dst[4] = {t->cell, t->site, t->region, t->sector};
        for (int k = 0; k < 4; k++)
            dst[k][t->n] = col[k] >= 0 && col[k] < nf && f[col[k]][0] ? f[col[k]] : NULL;
        if (t->cell[t->n])
            t->n++;
    }
    return 0;
}

/* A maintenance silence of the cell being walked, and its window computed at from:
 * [ws, we) is in effect at from or next (ws = we = INT64_MAX: none from then on). */
typedef struct Matched {
    int list;
    size_t idx;
    int64_t from, ws, we;
} Matched;

typedef struct Exclude {
    CcdSilences *list[CCT_WINDOWS_MAX_FILES];
    int n_lists;
    const Topo *topo;
    /* the cell being walked: its maintenance silences and a cached window of each */
    char cell[CC_CELL_ID_MAX + 1];
    int have_cell;
    int n_m;
    Matched m[CCT_WINDOWS_MAX_FILES * MAX_MATCHED];
} Exclude;

static void enter_cell(Exclude *x, const char *cell)
{
    snprintf(x->cell, sizeof x->cell, "%s", cell);
    x->have_cell = 1;
    CcdSilenceLabels l = {.cell = cell};
    for (size_t i = 0; x->topo && i < x->topo->n; i++)
        if (!strcmp(x->topo->cell[i], cell)) {
            l.site = x->topo->site[i], l.region = x->topo->region[i], l.sector = x->topo->sector[i];
            break;
        }
    x->n_m = 0;
    for (int k = 0; k < x->n_lists; k++) {
        size_t idx[MAX_MATCHED];
        int n = ccd_silences_maintenance_of(x->list[k], &l, idx, MAX_MATCHED);
        for (int i = 0; i < n; i++) {
            x->m[x->n_m].list = k;
            x->m[x->n_m].idx = idx[i];
            x->m[x->n_m].from = INT64_MAX; /* nothing cached */
            x->n_m++;
        }
    }
}

/* cc_learn_exclude's question: whether the record of cell at ts is in a window. A cell's
 * records come in slot order (roughly time order): a window, once computed, answers every
 * record until it ends. */
static int excluded(void *cookie, const char *cell, int64_t ts)
{
    Exclude *x = cookie;
    if (!x->have_cell || strcmp(x->cell, cell))
        enter_cell(x, cell);
    for (int i = 0; i < x->n_m; i++) {
        Matched *m = &x->m[i];
        if (!(m->from <= ts && ts < m->we)) {
            m->from = ts;
            if (ccd_silences_window_at(x->list[m->list], m->idx, ts, &m->ws, &m->we))
                m->ws = m->we = INT64_MAX; /* none from ts on */
        }
        if (m->ws <= ts && ts < m->we)
            return 1;
    }
    return 0;
}

int64_t cct_windows_exclude(CcLearn *l, const char *const *silence_files, int n,
                            const char *topology, char *err, size_t errlen)
{
    Topo topo = {0};
    Exclude *x = calloc(1, sizeof *x);
    int64_t rc = 0;
    if (!x)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    if (n > CCT_WINDOWS_MAX_FILES)
        rc = cc_errf(err, errlen, -EINVAL, "at most %d --silences", CCT_WINDOWS_MAX_FILES);
    if (!rc && topology && topology[0])
        rc = topo_read(&topo, topology, err, errlen);
    x->topo = topology && topology[0] ? &topo : NULL;
    for (int i = 0; !rc && i < n; i++) {
        char e2[512];
        rc = ccd_silences_config_read(&x->list[i], silence_files[i], 0, e2, sizeof e2);
        if (rc)
            cc_errf(err, errlen, (int)rc, "--silences: %s", e2);
        else
            x->n_lists++;
    }
    if (!rc)
        rc = cc_learn_exclude(l, excluded, x);
    for (int i = 0; i < x->n_lists; i++)
        ccd_silences_close(&x->list[i]);
    free(x);
    topo_free(&topo);
    return rc;
}
