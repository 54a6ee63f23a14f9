/*
 * strmap.h — a string-keyed hash map (open addressing, FNV-1a, linear probing, tombstones)
 * holding a pointer per key: the topology's cells and sites (topology.c) and the open
 * incidents and their alerts (incidents.c). Keys are copied; values are the caller's.
 * Lookups, inserts and deletes are O(1) expected; it grows at 1/2 load (tombstones
 * included), so a map that churns (alerts firing and resolving) stays short.
 */
#ifndef CCD_STRMAP_H
#define CCD_STRMAP_H

#include <stddef.h>

typedef struct CcdStrMapSlot {
    char *key; /* NULL: empty; CCD_STRMAP_TOMB: deleted */
    void *val;
} CcdStrMapSlot;

typedef struct CcdStrHash {
    CcdStrMapSlot *slots;
    size_t cap;  /* a power of two, or 0 */
    size_t n;    /* live keys */
    size_t used; /* live keys and tombstones */
} CcdStrHash;

/** The value of key, or NULL. */
void *ccd_strhash_get(const CcdStrHash *m, const char *key);
/** Sets key's value (inserting a copy of key). 0 or -ENOMEM (the map unchanged). */
int ccd_strhash_put(CcdStrHash *m, const char *key, void *val);
/** Removes key; its value, or NULL when it was absent. */
void *ccd_strhash_del(CcdStrHash *m, const char *key);
/** Calls fn on every live entry (any order). */
void ccd_strhash_foreach(const CcdStrHash *m, void (*fn)(void *cookie, const char *key, void *val),
                         void *cookie);
/** Frees the keys and the table (not the values); the map is empty after. */
void ccd_strhash_free(CcdStrHash *m);

#endif
