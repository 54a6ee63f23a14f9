/*
 * cc_cell_internal.h — a cell's memory, shared by cc_cell.c (layout, history, restore,
 * readers) and cc_engine.c (the step, which fills it). A cell knows its engine only by the
 * shape the engine keeps for its cells (CcCellShape: the model's shapes, the model served
 * now, the KV settings). Not for callers of the library: they see CcCell as opaque through
 * cc_cell.h.
 */
#ifndef CC_CELL_INTERNAL_H
#define CC_CELL_INTERNAL_H

#include <string.h>

#include "cc_cell.h"
#include "cc_half.h"
#include "cc_model.h"

/** What a cell is laid out for: the engine's model shapes and settings. The engine keeps
 *  one (cc_engine.c) and its cells point to it. */
typedef struct CcCellShape {
    int F, R, N, L, H, DK, HZ; ///< as cc_model.h; R steps of raw history (the ring)
    size_t kv_elem;            ///< bytes per KV element
    int keep_attention;
    const CcModel *m; ///< the model served now: its patch length, its sd calibration
} CcCellShape;

void cc_cell_shape_init(CcCellShape *cs, const CcModel *m, enum CcKvType kv, int keep_attention);
/** Bytes of a cell's block (ring, caches, forecast, attention if kept), slack included. */
size_t cc_cell_mem_bytes(const CcCellShape *cs);
/** Opens a cell laid out for cs, which must outlive it (cc_cell_open gives its engine's).
 *  0 or -ENOMEM. */
int cc_cell_open_shape(CcCell **out, const CcCellShape *cs);

/** Re-lays c out for cs (see cc_cell_rebind). 0, -EINVAL, -ENOMEM. */
int cc_cell_rebind_shape(CcCell *c, const CcCellShape *cs);

struct CcCell {
    const CcCellShape *cs;     ///< the engine's shape for its cells (current across swaps)
    int F, R, N, L, H, DK, HZ; ///< shapes this cell was laid out for
    int64_t p0;                ///< first step of the sequence, -1 empty
    int64_t last;              ///< newest step, -1 empty
    int64_t cache_e;           ///< e the caches were built for; -1 none
    uint32_t cache_gen;
    int n_cached;
    uint64_t mark; ///< batch mark: detects a cell given twice in one step
    int fc_valid;
    int64_t fc_step;
    int RC;            ///< rows of the ring allocated: grows (to R) with the history, so a
                       ///< cell with a few records costs a few KB
    float *ring;       // (RC, F)  row p % RC holds step p
    float *mu, *sigma; // (F)
    void *kv;          // (F, L, 2, H, N, DK) of kv_type; NULL until the first complete patch
    float *y;          // (F, 2HZ)
    float *att;        // (F, L, H, N+1) if keep_attention (with kv), else NULL
    void *mem;         // mu, sigma, y
    void *kvmem;       // kv, att (cc_cell_prepare)
};

/** Makes c ready to hold steps [p0, last] (the ring grows, by doubling, up to R rows) and,
 *  when they contain a complete patch, to be forecast (the KV caches and attention are
 *  allocated at the first one): cc_engine_step calls it before pushing a step. 0 or
 *  -ENOMEM (c unchanged). */
int cc_cell_prepare(CcCell *c, int64_t p0, int64_t last);

/** 1 when c is laid out for cs (else the step refuses it: -ESTALE). */
static inline int cc_cell_fits(const CcCell *c, const CcCellShape *cs)
{
    return c->F == cs->F && c->R == cs->R && c->N == cs->N && c->L == cs->L && c->H == cs->H &&
           c->HZ == cs->HZ && c->DK == cs->DK;
}

/* Channel f, layer l, head h: which = 0 → keys transposed (DK, N), so the scores of one
 * query vectorise over tokens (in the blocked layout of cc_attention.h when the engine
 * uses the AVX-512 kernels); which = 1 → values (N, DK). Both N·DK elements. */
static inline void *cc_cell_kv(const CcCell *c, size_t elem, int f, int l, int which, int h)
{
    size_t idx = ((((size_t)f * c->L + l) * 2 + which) * c->H + h) * (size_t)c->N * c->DK;
    return (char *)c->kv + idx * elem;
}

/* Copies channel f of steps [from, from+n) out of the ring, normalised: one modulo per
 * call, not per element. */
static inline void cc_cell_ring_read_norm(float *dst, const CcCell *c, int f, int64_t from, int n,
                                          float mu, float inv)
{
    int r = (int)(from % c->RC), F = c->F;
    for (int j = 0; j < n; j++) {
        dst[j] = (c->ring[(size_t)r * F + f] - mu) * inv;
        if (++r == c->RC)
            r = 0;
    }
}

/** Mean and scale of every channel over steps [lo, hi] of the ring into mu, sigma (F):
 *  tx/2 (floor NULL) sigma = sd + 1e-5(1 + |mu|), as cc_norm_stats; tx/3 sigma =
 *  sqrt(sd² + floor[f]²) + 1e-5(1 + |mu|) with norm.floor (F). */
void cc_cell_ring_stats(const CcCell *c, int64_t lo, int64_t hi, float *mu, float *sigma,
                        const float *floor);

/** Appends step p's values (F); the caller has checked p is the cell's next step and
 *  prepared the cell for it (cc_cell_prepare). */
static inline void cc_cell_push(CcCell *c, int64_t p, const float *values)
{
    if (c->last < 0)
        c->p0 = p;
    c->last = p;
    memcpy(&c->ring[(size_t)(c->last % c->RC) * c->F], values, (size_t)c->F * sizeof(float));
}

#endif
