/* labels.c — an operator's labelled windows (see labels.h). */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_data.h"
#include "labels.h"

void cct_labels_free(CctLabelSet *ls)
{
    for (int i = 0; i < ls->n; i++) {
        free(ls->w[i].key);
        free(ls->w[i].kpi);
    }
    free(ls->w);
    *ls = (CctLabelSet){0};
}

/* A copy of s[0, len) with blanks trimmed; NULL for an empty field (*oom on ENOMEM). */
static char *field_dup(const char *s, size_t len, int *oom)
{
    while (len && isspace((unsigned char)*s)) {
        s++;
        len--;
    }
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (!len)
        return NULL;
    char *d = strndup(s, len);
    if (!d)
        *oom = 1;
    return d;
}

static int parse_ts(const char *s, const char *fmt, double *out)
{
    return s ? cc_data_parse_time(s, strlen(s), fmt, out) : -EINVAL;
}

/* Appends one window (takes key and kpi). */
static int add_win(CctLabelSet *ls, char *key, char *kpi, const char *start, const char *end,
                   const char *fmt, int line, char *err, size_t errlen)
{
    CctLabelWin w = {key, kpi, 0, 0, line, 0};
    int rc = 0;
    if (parse_ts(start, fmt, &w.start) || parse_ts(end, fmt, &w.end)) {
        snprintf(err, errlen, "entry %d: start/end '%s'/'%s' is not a timestamp", line,
                 start ? start : "", end ? end : "");
        rc = -EINVAL;
    } else if (w.end < w.start) {
        snprintf(err, errlen, "entry %d: end before start", line);
        rc = -EINVAL;
    } else if (ls->n == ls->cap) {
        int cap = ls->cap ? 2 * ls->cap : 16;
        CctLabelWin *p = realloc(ls->w, (size_t)cap * sizeof *p);
        if (!p) {
            snprintf(err, errlen, "out of memory");
            rc = -ENOMEM;
        } else {
            ls->w = p;
            ls->cap = cap;
        }
    }
    if (rc) {
        free(key);
        free(kpi);
        return rc;
    }
    ls->w[ls->n++] = w;
    return 0;
}

/* A JSON timestamp: a string, or a number of unix seconds (printed for the one parser). */
static const char *json_ts(json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_number(v)) {
        snprintf(buf, cap, "%.17g", json_number_value(v));
        return buf;
    }
    return NULL;
}

static int load_json(CctLabelSet *ls, json_t *root, const char *fmt, char *err, size_t errlen)
{
    const char *key;
    json_t *list;
    int entry = 0, rc = 0;
    json_object_foreach(root, key, list)
    {
        if (!json_is_array(list)) {
            snprintf(err, errlen, "\"%s\" is not a list of [start, end] windows", key);
            return -EINVAL;
        }
        for (size_t k = 0; k < json_array_size(list) && !rc; k++) {
            json_t *e = json_array_get(list, k);
            json_t *kj = json_array_get(e, 2);
            char b0[64], b1[64];
            entry++;
            if (!json_is_array(e) || json_array_size(e) < 2 || json_array_size(e) > 3 ||
                (kj && !json_is_string(kj))) {
                snprintf(err, errlen, "\"%s\" entry %zu: not [start, end] or [start, end, kpi]",
                         key, k);
                return -EINVAL;
            }
            int oom = 0;
            char *kd = field_dup(key, strlen(key), &oom);
            char *pd =
                kj ? field_dup(json_string_value(kj), strlen(json_string_value(kj)), &oom) : NULL;
            if (oom) {
                free(kd);
                free(pd);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
            }
            rc = add_win(ls, kd, pd, json_ts(json_array_get(e, 0), b0, sizeof b0),
                         json_ts(json_array_get(e, 1), b1, sizeof b1), fmt, entry, err, errlen);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* Splits line at commas into at most max fields (start, length). */
static int split(const char *line, const char **fs, size_t *fl, int max)
{
    int n = 0;
    for (const char *p = line;; p++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strcspn(p, "\r\n");
        if (n < max) {
            fs[n] = p;
            fl[n] = len;
        }
        n++;
        if (!c)
            break;
        p = c;
    }
    return n;
}

enum { COL_START, COL_END, COL_CELL, COL_KPI, N_COLS, MAX_FIELDS = 32 };

static int load_csv(CctLabelSet *ls, FILE *fp, const char *fmt, char *err, size_t errlen)
{
    char line[4096];
    const char *fs[MAX_FIELDS];
    size_t fl[MAX_FIELDS];
    int col[N_COLS] = {-1, -1, -1, -1}, lineno = 1;
    if (!fgets(line, sizeof line, fp)) {
        snprintf(err, errlen, "empty");
        return -EINVAL;
    }
    int nh = split(line, fs, fl, MAX_FIELDS);
    for (int i = 0; i < nh && i < MAX_FIELDS; i++) {
        int oom = 0;
        char *name = field_dup(fs[i], fl[i], &oom);
        if (oom)
            return -ENOMEM;
        if (!name)
            continue;
        int c = !strcmp(name, "start")                              ? COL_START
                : !strcmp(name, "end")                              ? COL_END
                : !strcmp(name, "cell_id") || !strcmp(name, "cell") ? COL_CELL
                : !strcmp(name, "kpi")                              ? COL_KPI
                                                                    : -1;
        free(name);
        if (c >= 0)
            col[c] = i;
    }
    if (col[COL_START] < 0 || col[COL_END] < 0) {
        snprintf(err, errlen, "line 1: the header needs `start` and `end` columns");
        return -EINVAL;
    }
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        if (!line[strspn(line, " \t\r\n")])
            continue;
        int n = split(line, fs, fl, MAX_FIELDS), oom = 0;
        char *v[N_COLS] = {NULL};
        for (int c = 0; c < N_COLS; c++)
            if (col[c] >= 0 && col[c] < n && col[c] < MAX_FIELDS)
                v[c] = field_dup(fs[col[c]], fl[col[c]], &oom);
        int rc = oom ? -ENOMEM
                     : add_win(ls, v[COL_CELL], v[COL_KPI], v[COL_START], v[COL_END], fmt, lineno,
                               err, errlen);
        free(v[COL_START]);
        free(v[COL_END]);
        if (oom) {
            free(v[COL_CELL]);
            free(v[COL_KPI]);
            snprintf(err, errlen, "out of memory");
        }
        if (rc)
            return rc;
    }
    return 0;
}

int cct_labels_load(CctLabelSet *ls, const char *path, const char *time_format, char *err,
                    size_t errlen)
{
    char msg[512] = "";
    *ls = (CctLabelSet){0};
    FILE *fp = fopen(path, "r");
    if (!fp) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    int ch;
    while ((ch = getc(fp)) != EOF && isspace(ch))
        ;
    int rc;
    if (ch == '{') {
        rewind(fp);
        json_error_t je;
        json_t *root = json_loadf(fp, 0, &je);
        if (!root) {
            snprintf(msg, sizeof msg, "line %d: %s", je.line, je.text);
            rc = -EINVAL;
        } else {
            rc = load_json(ls, root, time_format, msg, sizeof msg);
            json_decref(root);
        }
    } else {
        rewind(fp);
        rc = load_csv(ls, fp, time_format, msg, sizeof msg);
    }
    fclose(fp);
    if (!rc && !ls->n) {
        snprintf(msg, sizeof msg, "no windows");
        rc = -EINVAL;
    }
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, msg);
        cct_labels_free(ls);
    }
    return rc;
}

/* KEY selects cell_id of data_path (labels.h). */
static int selects(const char *key, const char *data_path, const char *cell_id)
{
    if (!key || !strcmp(key, cell_id) || !strcmp(key, data_path))
        return 1;
    size_t kl = strlen(key), pl = strlen(data_path);
    return pl > kl && data_path[pl - kl - 1] == '/' && !strcmp(data_path + pl - kl, key);
}

int cct_labels_apply(CctLabelSet *ls, const char *data_path, const char *cell_id, int64_t p0,
                     int64_t step_seconds, const CcHparams *hp, CctInjectSeries *ser, int *n_added,
                     char *err, size_t errlen)
{
    int added = 0;
    for (int i = 0; i < ls->n; i++) {
        CctLabelWin *w = &ls->w[i];
        if (!selects(w->key, data_path, cell_id))
            continue;
        int kpi = -1;
        if (w->kpi && (kpi = cc_hparams_feature_index(hp, w->kpi)) < 0) {
            snprintf(err, errlen, "labels entry %d: '%s' is not a model KPI", w->line, w->kpi);
            return -EINVAL;
        }
        double S = (double)step_seconds;
        int64_t a = (int64_t)ceil(w->start / S) - p0, b = (int64_t)floor(w->end / S) - p0 + 1;
        if (a < ser->test0)
            a = ser->test0;
        if (b > ser->T)
            b = ser->T;
        if (a >= b)
            continue;
        CctLabel l = {CCT_INJ_LABELLED, kpi, (int)a, (int)b, 0};
        if (cct_inject_add_label(ser, l)) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        w->applied++;
        added++;
    }
    if (n_added)
        *n_added = added;
    return 0;
}
