/* labels.c — an operator's labelled windows (see labels.h). */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc_data.h"
#include "cc_time.h"
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

const char *cct_labels_where(const CctLabelWin *w, char *buf, size_t cap)
{
    if (w->line > 0)
        snprintf(buf, cap, "line %d", w->line);
    else
        snprintf(buf, cap, "\"%s\" window %d", w->key ? w->key : "", w->index);
    return buf;
}

static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

/* A copy of s[0, len) with blanks and one pair of enclosing double quotes (spreadsheet
 * exports quote every field) trimmed; NULL for an empty field (*oom on ENOMEM). */
static char *field_dup(const char *s, size_t len, int *oom)
{
    trim(&s, &len);
    if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
        s++;
        len -= 2;
        trim(&s, &len);
    }
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

/* "YYYY-MM-DD" alone: as an end, a labelled day runs to its last second (inclusive), not
 * to its first. */
static int date_only(const char *s)
{
    static const char pat[] = "dddd-dd-dd";
    for (int i = 0; i < 10; i++)
        if (pat[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != pat[i])
            return 0;
    return !s[10];
}

/* Appends one window read at `line` (CSV) or as window `index` of its key (JSON); takes
 * key and kpi. */
static int add_win(CctLabelSet *ls, char *key, char *kpi, const char *start, const char *end,
                   const char *fmt, int line, int index, char *err, size_t errlen)
{
    CctLabelWin w = {key, kpi, 0, 0, line, index, 0, 0, 0, 0};
    char where[160];
    cct_labels_where(&w, where, sizeof where);
    int rc = 0;
    const char *bad = parse_ts(start, fmt, &w.start) ? "start" : NULL;
    if (!bad && parse_ts(end, fmt, &w.end))
        bad = "end";
    if (!bad && !(fmt && *fmt) && date_only(end))
        w.end += 86399;
    if (bad) {
        const char *v = *bad == 's' ? start : end;
        if (!v)
            snprintf(err, errlen, "%s: no %s", where, bad);
        else
            snprintf(err, errlen,
                     "%s: %s '%.64s' is not a timestamp (RFC 3339 as 2024-01-08T07:00:00Z or "
                     "with an offset, YYYY-MM-DD HH:MM:SS[.ffffff] in UTC, unix seconds or "
                     "milliseconds%s%s)",
                     where, bad, v, fmt && *fmt ? ", or --time-format " : "",
                     fmt && *fmt ? fmt : "");
        rc = -EINVAL;
    } else if (w.end < w.start) {
        snprintf(err, errlen, "%s: end before start (%s, %s)", where, start, end);
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
    int rc = 0;
    if (!json_is_object(root)) {
        snprintf(err, errlen,
                 "the top level is %s, not an object {\"KEY\": [[start, end], ...], ...} "
                 "(KEY: a cell id or a --data file; \"\" = every cell)",
                 json_is_array(root) ? "a list" : "not an object");
        return -EINVAL;
    }
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
            if (json_is_string(e) || json_is_number(e)) {
                snprintf(err, errlen,
                         "\"%s\" window %zu is a single timestamp, not [start, end]: a key's "
                         "windows are a list of pairs, {\"KEY\": [[start, end], ...]} (point "
                         "labels, as NAB's combined_labels.json, are not windows)",
                         key, k + 1);
                return -EINVAL;
            }
            if (!json_is_array(e) || json_array_size(e) < 2 || json_array_size(e) > 3 ||
                (kj && !json_is_string(kj))) {
                snprintf(err, errlen,
                         "\"%s\" window %zu: not [start, end] or [start, end, kpi] (a list of "
                         "such windows per key)",
                         key, k + 1);
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
                         json_ts(json_array_get(e, 1), b1, sizeof b1), fmt, 0, (int)k + 1, err,
                         errlen);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* Splits line at delim into at most max fields (start, length). */
static int split(const char *line, char delim, const char **fs, size_t *fl, int max)
{
    int n = 0;
    for (const char *p = line;; p++) {
        const char *c = strchr(p, delim);
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

/* The next line into buf; 1, 0 at the end, -EINVAL for a line too long for buf. */
static int read_line(FILE *fp, char *buf, int cap, int lineno, char *err, size_t errlen)
{
    if (!fgets(buf, cap, fp))
        return 0;
    if (!strchr(buf, '\n') && !feof(fp)) {
        snprintf(err, errlen, "line %d: longer than %d characters", lineno, cap - 2);
        return -EINVAL;
    }
    return 1;
}

static int load_csv(CctLabelSet *ls, FILE *fp, const char *fmt, char *err, size_t errlen)
{
    char line[4096];
    const char *fs[MAX_FIELDS];
    size_t fl[MAX_FIELDS];
    int col[N_COLS] = {-1, -1, -1, -1}, lineno = 0, rl;
    while ((rl = read_line(fp, line, sizeof line, ++lineno, err, errlen)) > 0 &&
           !line[strspn(line, " \t\r\n")])
        ; /* blank lines before the header */
    if (rl <= 0) {
        if (!rl)
            snprintf(err, errlen,
                     "empty file (want a CSV header start,end[,cell_id][,kpi] and one "
                     "window per line, or a JSON object)");
        return -EINVAL;
    }
    /* European spreadsheets write ';', some tools tabs: the header says which */
    char delim = strchr(line, ',')    ? ','
                 : strchr(line, ';')  ? ';'
                 : strchr(line, '\t') ? '\t'
                                      : ',';
    int nh = split(line, delim, fs, fl, MAX_FIELDS);
    for (int i = 0; i < nh && i < MAX_FIELDS; i++) {
        int oom = 0;
        char *name = field_dup(fs[i], fl[i], &oom);
        if (oom)
            return -ENOMEM;
        if (!name)
            continue;
        int c = !strcasecmp(name, "start")                                  ? COL_START
                : !strcasecmp(name, "end")                                  ? COL_END
                : !strcasecmp(name, "cell_id") || !strcasecmp(name, "cell") ? COL_CELL
                : !strcasecmp(name, "kpi")                                  ? COL_KPI
                                                                            : -1;
        free(name);
        if (c >= 0)
            col[c] = i;
    }
    if (col[COL_START] < 0 || col[COL_END] < 0) {
        size_t hl = strcspn(line, "\r\n");
        /* the other common shape: a 0/1 flag per data row (Yahoo's is_anomaly, NAB's label) */
        int flags = strcasestr(line, "label") || strcasestr(line, "anomal");
        snprintf(err, errlen,
                 "line %d: the header needs `start` and `end` columns (and may name `cell_id`, "
                 "`kpi`); it is '%.*s'%s",
                 lineno, (int)(hl > 200 ? 200 : hl), line,
                 flags ? " (a 0/1 flag per row? write each run of 1s as one start,end row)" : "");
        return -EINVAL;
    }
    while ((rl = read_line(fp, line, sizeof line, lineno + 1, err, errlen)) > 0) {
        lineno++;
        if (!line[strspn(line, " \t\r\n")])
            continue;
        int n = split(line, delim, fs, fl, MAX_FIELDS), oom = 0;
        char *v[N_COLS] = {NULL};
        for (int c = 0; c < N_COLS; c++)
            if (col[c] >= 0 && col[c] < n && col[c] < MAX_FIELDS)
                v[c] = field_dup(fs[col[c]], fl[col[c]], &oom);
        int rc = oom ? -ENOMEM
                     : add_win(ls, v[COL_CELL], v[COL_KPI], v[COL_START], v[COL_END], fmt, lineno,
                               0, err, errlen);
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
    if (!rl && !ls->n) {
        snprintf(err, errlen, "no windows (a header and no rows)");
        return -EINVAL;
    }
    return rl;
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
    /* a UTF-8 byte order mark (Windows editors write one) is not part of the text */
    unsigned char bom[3];
    long text0 = fread(bom, 1, 3, fp) == 3 && !memcmp(bom, "\xef\xbb\xbf", 3) ? 3 : 0;
    fseek(fp, text0, SEEK_SET);
    int ch;
    while ((ch = getc(fp)) != EOF && isspace(ch))
        ;
    fseek(fp, text0, SEEK_SET);
    int rc;
    if (ch == '{' || ch == '[') {
        json_error_t je;
        /* a key given twice (two files pasted together) would silently keep one list */
        json_t *root = json_loadf(fp, JSON_REJECT_DUPLICATES, &je);
        if (!root) {
            snprintf(msg, sizeof msg, "line %d: %s", je.line, je.text);
            rc = -EINVAL;
        } else {
            rc = load_json(ls, root, time_format, msg, sizeof msg);
            json_decref(root);
        }
    } else {
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

int cct_labels_check(const CctLabelSet *ls, const CcHparams *hp, char *err, size_t errlen)
{
    for (int i = 0; i < ls->n; i++) {
        const CctLabelWin *w = &ls->w[i];
        if (!w->kpi || cc_hparams_feature_index(hp, w->kpi) >= 0)
            continue;
        char where[160], names[CC_MAX_FEATURES * (CC_FEATURE_NAME_MAX + 2)] = "";
        for (int f = 0; f < hp->n_features; f++) {
            if (f)
                strcat(names, ", ");
            strcat(names, hp->features[f]);
        }
        snprintf(err, errlen, "%s: '%s' is not a model KPI (the model's: %s)",
                 cct_labels_where(w, where, sizeof where), w->kpi, names);
        return -EINVAL;
    }
    return 0;
}

/* Merges the labelled windows of c that share a row with label j (same KPI) into j. */
static void merge_overlaps(CctInjectSeries *c, int j)
{
    for (int k = 0; k < c->n_lab;) {
        CctLabel *a = &c->lab[j], *b = &c->lab[k];
        if (k == j || b->type != CCT_INJ_LABELLED || b->kpi != a->kpi || b->start >= a->end ||
            a->start >= b->end) {
            k++;
            continue;
        }
        if (b->start < a->start)
            a->start = b->start;
        if (b->end > a->end)
            a->end = b->end;
        memmove(b, b + 1, (size_t)(c->n_lab - k - 1) * sizeof *b);
        c->n_lab--;
        if (k < j)
            j--;
        k = 0; /* the wider window may now reach one already passed */
    }
}

/* KEY selects cell_id of data_path (labels.h). */
static int selects(const char *key, const char *data_path, const char *cell_id)
{
    if (!key || !strcmp(key, cell_id))
        return 1;
    /* "./x.csv" names the file x.csv does, on either side */
    while (!strncmp(key, "./", 2))
        key += 2;
    while (!strncmp(data_path, "./", 2))
        data_path += 2;
    if (!strcmp(key, data_path))
        return 1;
    size_t kl = strlen(key), pl = strlen(data_path);
    return pl > kl && data_path[pl - kl - 1] == '/' && !strcmp(data_path + pl - kl, key);
}

int cct_labels_apply(CctLabelSet *ls, const char *data_path, const char *cell_id, int64_t p0,
                     int64_t step_seconds, const CcHparams *hp, CctInjectSeries *ser, int *n_added,
                     char *err, size_t errlen)
{
    int n0 = ser->n_lab;
    for (int i = 0; i < ls->n; i++) {
        CctLabelWin *w = &ls->w[i];
        if (!selects(w->key, data_path, cell_id))
            continue;
        w->matched++;
        int kpi = -1;
        if (w->kpi && (kpi = cc_hparams_feature_index(hp, w->kpi)) < 0) {
            char where[160];
            snprintf(err, errlen, "labels %s: '%s' is not a model KPI",
                     cct_labels_where(w, where, sizeof where), w->kpi);
            return -EINVAL;
        }
        double S = (double)step_seconds;
        int64_t a = (int64_t)ceil(w->start / S), b = (int64_t)floor(w->end / S) + 1;
        if (a >= b) /* no step starts inside it: the step it lies in */
            b = (a = (int64_t)floor(w->start / S)) + 1;
        a -= p0;
        b -= p0;
        int cut = a < ser->test0 || b > ser->T;
        if (a < ser->test0)
            a = ser->test0;
        if (b > ser->T)
            b = ser->T;
        if (a >= b)
            continue;
        w->cut += cut;
        CctLabel l = {CCT_INJ_LABELLED, kpi, (int)a, (int)b, 0};
        if (cct_inject_add_label(ser, l)) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        int n = ser->n_lab;
        merge_overlaps(ser, n - 1);
        w->merged += ser->n_lab < n;
        w->applied++;
    }
    if (n_added)
        *n_added = ser->n_lab - n0;
    return 0;
}

int cct_labels_report(const CctLabelSet *ls, FILE *out)
{
    int used = 0, unused = 0, no_key = 0, keys = 0;
    char where[160], t0[CC_RFC3339_LEN], t1[CC_RFC3339_LEN], named[256] = "";
    for (int i = 0; i < ls->n; i++) {
        const CctLabelWin *w = &ls->w[i];
        used += w->applied > 0;
        unused += !w->applied;
        cct_labels_where(w, where, sizeof where);
        cc_time_format_rfc3339((int64_t)floor(w->start), t0, sizeof t0);
        cc_time_format_rfc3339((int64_t)floor(w->end), t1, sizeof t1);
        if (!w->matched) {
            /* a corpus-wide file (NAB's) on a few of its files: one line, not hundreds */
            no_key++;
            int first = 1;
            for (int k = 0; k < i && first; k++)
                first = ls->w[k].matched || strcmp(ls->w[k].key, w->key);
            if (first && ++keys <= 3 && strlen(named) + strlen(w->key) + 8 < sizeof named)
                snprintf(named + strlen(named), sizeof named - strlen(named), "%s\"%s\"",
                         keys > 1 ? ", " : "", w->key);
        } else if (!w->applied) {
            fprintf(out, "anomaly-eval: --labels %s (%s to %s): outside the test rows of %s\n",
                    where, t0, t1, w->key ? w->key : "every cell");
        } else {
            if (w->cut)
                fprintf(out,
                        "anomaly-eval: --labels %s (%s to %s): cut to the test rows (%d "
                        "cell(s)); only the alerts of its test rows count\n",
                        where, t0, t1, w->cut);
            if (w->merged)
                fprintf(out,
                        "anomaly-eval: --labels %s (%s to %s): overlaps an earlier window "
                        "of the same cell and KPI (%d cell(s)): scored as one event\n",
                        where, t0, t1, w->merged);
        }
    }
    if (no_key)
        fprintf(out,
                "anomaly-eval: --labels: %d window(s) under %d key(s) name no cell or --data "
                "file (%s%s)\n",
                no_key, keys, named, keys > 3 ? ", ..." : "");
    if (unused)
        fprintf(out, "anomaly-eval: %d of %d labelled windows unused\n", unused, ls->n);
    return used;
}
