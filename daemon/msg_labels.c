/*
 * msg_labels.c — a cell's labels from fields of its KPI messages (msg_labels.h): the label
 * pass over accepted messages, the interned values and the per-cell arrays.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem (the build defines it) */
#endif
#include "msg_labels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Distinct values kept at most: a feed that invents a value per message cannot take the
 * memory (each refused one is counted as oom). */
#define INTERN_MAX 1000000

struct CcdMsgLabels {
    int n;
    char *name[CCD_MSG_LABELS_MAX], *field[CCD_MSG_LABELS_MAX];
    char *quoted[CCD_MSG_LABELS_MAX];     /* "\"<field>\"": a message without any is skipped */
    CcdStrHash intern;                    /* value -> its one copy */
    CcdStrHash by_cell;                   /* cell -> (n) interned values, NULL: none */
    CcdStrHash count[CCD_MSG_LABELS_MAX]; /* value -> cells with it, per label (those the
                                            shadow does not give the label) */
    int (*shadowed)(const void *cookie, const char *cell, const char *name);
    const void *shadow;
    CcdMsgLabelStats st;
};

static void free_val(void *cookie, const char *key, void *val)
{
    (void)cookie;
    (void)key;
    free(val);
}

void ccd_msg_labels_close(CcdMsgLabels **mp)
{
    CcdMsgLabels *m = *mp;
    if (!m)
        return;
    ccd_strhash_foreach(&m->intern, free_val, NULL);
    ccd_strhash_foreach(&m->by_cell, free_val, NULL);
    ccd_strhash_free(&m->intern);
    ccd_strhash_free(&m->by_cell);
    for (int i = 0; i < CCD_MSG_LABELS_MAX; i++) {
        ccd_strhash_free(&m->count[i]);
        free(m->name[i]);
        free(m->field[i]);
        free(m->quoted[i]);
    }
    free(m);
    *mp = NULL;
}

int ccd_msg_labels_open(CcdMsgLabels **out, const char *const *names, const char *const *fields,
                        int n)
{
    *out = NULL;
    if (n < 1 || n > CCD_MSG_LABELS_MAX)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (!names[i] || !names[i][0] || !fields[i] || !fields[i][0])
            return -EINVAL;
    CcdMsgLabels *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->n = n;
    for (int i = 0; i < n; i++) {
        size_t fl = strlen(fields[i]);
        m->name[i] = strdup(names[i]);
        m->field[i] = strdup(fields[i]);
        m->quoted[i] = malloc(fl + 3);
        if (!m->name[i] || !m->field[i] || !m->quoted[i]) {
            ccd_msg_labels_close(&m);
            return -ENOMEM;
        }
        snprintf(m->quoted[i], fl + 3, "\"%s\"", fields[i]);
    }
    *out = m;
    return 0;
}

int ccd_msg_labels_same(const CcdMsgLabels *m, const char *const *names, const char *const *fields,
                        int n)
{
    if (!m || m->n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(m->name[i], names[i]) || strcmp(m->field[i], fields[i]))
            return 0;
    return 1;
}

/* The one copy of value (NULL: out of memory or over INTERN_MAX). */
static const char *intern(CcdMsgLabels *m, const char *value)
{
    char *p = ccd_strhash_get(&m->intern, value);
    if (p)
        return p;
    if (m->intern.n >= INTERN_MAX || !(p = strdup(value)))
        return NULL;
    if (ccd_strhash_put(&m->intern, value, p)) {
        free(p);
        return NULL;
    }
    return p;
}

static void count_add(CcdStrHash *c, const char *value, int d)
{
    uintptr_t k = (uintptr_t)ccd_strhash_get(c, value);
    if (d < 0 && k <= 1)
        ccd_strhash_del(c, value);
    else if (d < 0)
        ccd_strhash_put(c, value, (void *)(k - 1)); /* an existing key: no allocation */
    else
        ccd_strhash_put(c, value, (void *)(k + 1)); /* out of memory: the count is short */
}

static int is_shadowed(const CcdMsgLabels *m, const char *cell, int i)
{
    return m->shadowed && m->shadowed(m->shadow, cell, m->name[i]);
}

/* Sets label i of cell to value (NULL: none). 1 changed, 0 the same, -ENOMEM. */
static int label_set(CcdMsgLabels *m, const char *cell, int i, const char *value)
{
    const char **v = ccd_strhash_get(&m->by_cell, cell);
    if (!v) {
        if (!value)
            return 0;
        if (!(v = calloc((size_t)m->n, sizeof *v)))
            return -ENOMEM;
        if (ccd_strhash_put(&m->by_cell, cell, v)) {
            free(v);
            return -ENOMEM;
        }
    }
    if (v[i] == value || (v[i] && value && !strcmp(v[i], value)))
        return 0; /* the common case: what the cell has, nothing allocated */
    const char *p = value ? intern(m, value) : NULL;
    if (value && !p)
        return -ENOMEM;
    if (!is_shadowed(m, cell, i)) {
        if (v[i])
            count_add(&m->count[i], v[i], -1);
        if (p)
            count_add(&m->count[i], p, +1);
    }
    v[i] = p;
    return 1;
}

/* A label's value in a message: a string of 1..CCD_MSG_LABEL_VALUE_MAX bytes without
 * control characters ("" clears), or an integer (|v| ≤ 2^53). Writes it to buf (NUL-terminated); 1
 * a value, 0 clear, -1 none (null), or a refusal counted: -2. */
static int label_value(CcdMsgLabels *m, json_t *v, char *buf, size_t cap)
{
    if (json_is_null(v))
        return -1;
    if (json_is_real(v)) { /* read as the decoder reads numbers: integers as reals */
        double x = json_real_value(v);
        if (x != floor(x) || fabs(x) > 9007199254740992.0) { /* not an integer, or past 2^53 */
            m->st.bad_value++;
            return -2;
        }
        snprintf(buf, cap, "%.0f", x);
        return 1;
    }
    if (!json_is_string(v)) {
        m->st.bad_value++;
        return -2;
    }
    size_t n = json_string_length(v);
    const unsigned char *s = (const unsigned char *)json_string_value(v);
    if (n > CCD_MSG_LABEL_VALUE_MAX) {
        m->st.too_long++;
        return -2;
    }
    for (size_t k = 0; k < n; k++)
        if (s[k] < 0x20 || s[k] == 0x7f) { /* NUL included: "\u0000" */
            m->st.bad_value++;
            return -2;
        }
    memcpy(buf, s, n);
    buf[n] = 0;
    return n > 0;
}

int ccd_msg_labels_read(CcdMsgLabels *m, const char *buf, size_t len, const CcKpiBatch *kb)
{
    if (!m || !kb->n_records)
        return 0;
    int named = 0;
    for (int i = 0; i < m->n && !named; i++)
        named = memmem(buf, len, m->quoted[i], strlen(m->quoted[i])) != NULL;
    if (!named) /* the common case of a feed without labels: no second parse */
        return 0;
    m->st.messages++;
    json_t *root = json_loadb(buf, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
    if (!root) {
        m->st.not_json++;
        return 0;
    }
    int changes = 0, last = -1;
    for (int r = 0; r < kb->n_records; r++) {
        const CcKpiRecord *rec = &kb->records[r];
        if (rec->element == last) /* one element is one record */
            continue;
        last = rec->element;
        json_t *obj = json_is_array(root) ? json_array_get(root, (size_t)rec->element) : root;
        if (!json_is_object(obj))
            continue;
        for (int i = 0; i < m->n; i++) {
            char val[CCD_MSG_LABEL_VALUE_MAX + 1];
            json_t *v = json_object_get(obj, m->field[i]);
            int k = v ? label_value(m, v, val, sizeof val) : -1;
            if (k < 0)
                continue;
            int rc = label_set(m, rec->cell_id, i, k ? val : NULL);
            if (rc < 0)
                m->st.oom++;
            else
                changes += rc;
        }
    }
    json_decref(root);
    m->st.changes += (uint64_t)changes;
    return changes;
}

static int label_index(const CcdMsgLabels *m, const char *name)
{
    for (int i = 0; m && i < m->n; i++)
        if (!strcmp(m->name[i], name))
            return i;
    return -1;
}

const char *ccd_msg_labels_value(const CcdMsgLabels *m, const char *cell, int i)
{
    if (!m || !cell || i < 0 || i >= m->n)
        return NULL;
    const char **v = ccd_strhash_get(&m->by_cell, cell);
    return v ? v[i] : NULL;
}

const char *ccd_msg_labels_get(const CcdMsgLabels *m, const char *cell, const char *name)
{
    return ccd_msg_labels_value(m, cell, label_index(m, name));
}

int ccd_msg_labels_n(const CcdMsgLabels *m) { return m ? m->n : 0; }

const char *ccd_msg_labels_name(const CcdMsgLabels *m, int i)
{
    return m && i >= 0 && i < m->n ? m->name[i] : NULL;
}

int ccd_msg_labels_count(const CcdMsgLabels *m, const char *name, const char *value)
{
    int i = label_index(m, name);
    return i >= 0 && value ? (int)(uintptr_t)ccd_strhash_get(&m->count[i], value) : 0;
}

static void recount_cell(void *cookie, const char *cell, void *val)
{
    CcdMsgLabels *m = cookie;
    const char **v = val;
    for (int i = 0; i < m->n; i++)
        if (v[i] && !is_shadowed(m, cell, i))
            count_add(&m->count[i], v[i], +1);
}

void ccd_msg_labels_shadow(CcdMsgLabels *m,
                           int (*shadowed)(const void *cookie, const char *cell, const char *name),
                           const void *cookie)
{
    m->shadowed = shadowed;
    m->shadow = cookie;
    for (int i = 0; i < m->n; i++)
        ccd_strhash_free(&m->count[i]);
    ccd_strhash_foreach(&m->by_cell, recount_cell, m);
}

void ccd_msg_labels_stats(const CcdMsgLabels *m, CcdMsgLabelStats *st)
{
    memset(st, 0, sizeof *st);
    if (!m)
        return;
    *st = m->st;
    st->cells = m->by_cell.n;
    st->values = m->intern.n;
}
