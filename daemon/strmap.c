/*
 * strmap.c — the string-keyed hash map of strmap.h.
 */
#include "strmap.h"
#include "cc_common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char tomb_mark;
#define TOMB (&tomb_mark)

/* The slot holding key, or the first empty one of its probe sequence (NULL: no table). */
static CcdStrMapSlot *find(const CcdStrHash *m, const char *key, CcdStrMapSlot **free_slot)
{
    *free_slot = NULL;
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = cc_fnv1a_str(key) & mask;; i = (i + 1) & mask) {
        CcdStrMapSlot *s = &m->slots[i];
        if (!s->key) {
            if (!*free_slot)
                *free_slot = s;
            return NULL;
        }
        if (s->key == TOMB) {
            if (!*free_slot)
                *free_slot = s;
        } else if (!strcmp(s->key, key)) {
            return s;
        }
    }
}

static int grow(CcdStrHash *m)
{
    size_t cap = m->cap ? m->cap : 16;
    while (2 * (m->n + 1) > cap) /* live keys at most half; mostly tombstones: same size */
        cap *= 2;
    CcdStrMapSlot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        CcdStrMapSlot *s = &m->slots[i];
        if (!s->key || s->key == TOMB)
            continue;
        size_t j = cc_fnv1a_str(s->key) & (cap - 1);
        while (slots[j].key)
            j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    m->used = m->n;
    return 0;
}

void *ccd_strhash_get(const CcdStrHash *m, const char *key)
{
    CcdStrMapSlot *fs, *s = find(m, key, &fs);
    return s ? s->val : NULL;
}

int ccd_strhash_put(CcdStrHash *m, const char *key, void *val)
{
    CcdStrMapSlot *fs, *s = find(m, key, &fs);
    if (s) {
        s->val = val;
        return 0;
    }
    if (2 * (m->used + 1) > m->cap) {
        if (grow(m))
            return -ENOMEM;
        find(m, key, &fs);
    }
    char *k = strdup(key);
    if (!k)
        return -ENOMEM;
    if (!fs->key)
        m->used++;
    fs->key = k;
    fs->val = val;
    m->n++;
    return 0;
}

void *ccd_strhash_del(CcdStrHash *m, const char *key)
{
    CcdStrMapSlot *fs, *s = find(m, key, &fs);
    if (!s)
        return NULL;
    void *v = s->val;
    free(s->key);
    s->key = TOMB;
    s->val = NULL;
    m->n--;
    return v;
}

void ccd_strhash_foreach(const CcdStrHash *m, void (*fn)(void *cookie, const char *key, void *val),
                         void *cookie)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key && m->slots[i].key != TOMB)
            fn(cookie, m->slots[i].key, m->slots[i].val);
}

void ccd_strhash_free(CcdStrHash *m)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != TOMB)
            free(m->slots[i].key);
    free(m->slots);
    memset(m, 0, sizeof *m);
}
