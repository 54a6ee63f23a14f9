/* cells.c — the cell table and the ingest rules (dedupe, late, combine, gaps, LRU
 * eviction, partition release). See cells.h; loop thread only, except the CcdPub copies
 * the worker writes under pub_lock. */
#include "cells.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "interval.h"
#include "log.h"
#include "model_watch.h"
#include "scheduler.h"

static uint64_t hash_id(const char *s) { return cc_fnv1a_str(s); }

static size_t imputed_words(int ring) { return (size_t)(ring + 63) / 64; }

/* Bytes per cell (the engine's, the record, the published arrays, last_values, the
 * imputed flags, the interval scales when on) and the resident cells the limits allow. */
static void size_budget(CcdCells *t)
{
    size_t F = (size_t)t->n_features, HZ = (size_t)t->horizon;
    t->cell_bytes = cc_engine_cell_bytes(t->engine) + sizeof(CcdCell) +
                    sizeof(float) * (F * HZ * 2 + 6 * F) + imputed_words(t->ring) * 8;
    if (t->s.interval_adapt) /* every live cell gets one: counted up front */
        t->cell_bytes += ccd_interval_cell_bytes((int)F, (int)HZ);
    /* the rollback watch's scale (model_watch.h), a cell's once a learned model is watched:
     * counted whether or not one is (8 F bytes, against the tens of KB of the rest) */
    t->cell_bytes += ccd_watch_scale_bytes((int)F);
    const int64_t S = cc_engine_model(t->engine)->hp.step_seconds;
    int64_t depth = S > 0 ? (t->s.history_depth_s + S - 1) / S : 0;
    depth = depth > (1 << 24) ? 1 << 24 : depth;
    if (t->hist_depth != (int)depth) /* the worker reads it: written only when it changes */
        t->hist_depth = (int)depth;
    int64_t by_budget = t->s.kv_budget_bytes / (int64_t)t->cell_bytes;
    t->max_resident = t->s.max_cells < by_budget ? t->s.max_cells : by_budget;
    if (t->max_resident < 1)
        t->max_resident = 1;
}

int ccd_cells_open(CcdCells **out, const CcEngine *e, const CcdCellsSettings *s)
{
    CcdCells *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t)
        return -ENOMEM;
    const CcHparams *hp = &cc_engine_model(e)->hp;
    t->s = *s;
    t->engine = e;
    t->n_features = hp->n_features;
    t->horizon = hp->horizon;
    t->ring = cc_engine_ring_steps(e);
    t->n_buckets = 1024;
    t->buckets = calloc(t->n_buckets, sizeof *t->buckets);
    if (!t->buckets) {
        free(t);
        return -ENOMEM;
    }
    size_budget(t);
    pthread_mutex_init(&t->pub_lock, NULL);
    *out = t;
    return 0;
}

static void cell_free(CcdCells *t, CcdCell *c)
{
    if (!c)
        return;
    if (c->anomaly && t->free_anomaly)
        t->free_anomaly(t->free_cookie, c);
    cc_cell_close(&c->cell);
    cc_history_close(&c->hist);
    t->hist_bytes -= c->hist_bytes;
    ccd_watch_scale_close(&c->watch_scale);
    cc_online_calib_close(&c->calib);
    free(c->last_values);
    free(c->imputed_bits);
    ccd_pub_free(&c->pub);
    free(c);
}

void ccd_cells_close(CcdCells **pt)
{
    CcdCells *t = *pt;
    if (!t)
        return;
    for (size_t i = 0; i < t->n_buckets; i++)
        for (CcdCell *c = t->buckets[i], *next; c; c = next) {
            next = c->hnext;
            cell_free(t, c);
        }
    free(t->buckets);
    free(t->interval_buf);
    ccd_watch_close(&t->watch); /* after the worker: the table outlives it */
    pthread_mutex_destroy(&t->pub_lock);
    free(t);
    *pt = NULL;
}

CcdCell *ccd_cells_get(CcdCells *t, const char *id)
{
    for (CcdCell *c = t->buckets[hash_id(id) & (t->n_buckets - 1)]; c; c = c->hnext)
        if (!strcmp(c->id, id))
            return c;
    return NULL;
}

static void lru_unlink(CcdCells *t, CcdCell *c)
{
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else
        t->lru_head = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else
        t->lru_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
}

static void lru_append(CcdCells *t, CcdCell *c)
{
    c->lru_prev = t->lru_tail;
    c->lru_next = NULL;
    if (t->lru_tail)
        t->lru_tail->lru_next = c;
    else
        t->lru_head = c;
    t->lru_tail = c;
}

static void table_remove(CcdCells *t, CcdCell *c)
{
    CcdCell **pp = &t->buckets[hash_id(c->id) & (t->n_buckets - 1)];
    while (*pp && *pp != c)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = c->hnext;
    lru_unlink(t, c);
    t->n_cells--;
    t->version++;
    if (c->doomed)
        t->n_doomed--;
    /* the HTTP readers run on this thread: nobody else can hold c now */
    cell_free(t, c);
}

static int grow(CcdCells *t)
{
    size_t nb = t->n_buckets * 2;
    CcdCell **b = calloc(nb, sizeof *b);
    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < t->n_buckets; i++)
        for (CcdCell *c = t->buckets[i], *next; c; c = next) {
            next = c->hnext;
            size_t h = hash_id(c->id) & (nb - 1);
            c->hnext = b[h];
            b[h] = c;
        }
    free(t->buckets);
    t->buckets = b;
    t->n_buckets = nb;
    return 0;
}

/* Evicts the least recently updated idle cell; -ENOSPC when every cell is busy. */
static int evict_one(CcdCells *t)
{
    for (CcdCell *c = t->lru_head; c; c = c->lru_next)
        if (!c->busy && !c->open_items) {
            LOG_DEBUG("cells", "evicting cell %s (least recently updated)", c->id);
            table_remove(t, c);
            t->st.evictions++;
            return 0;
        }
    return -ENOSPC;
}

static CcdCell *cell_new(CcdCells *t, const char *id)
{
    const int F = t->n_features, HZ = t->horizon;
    CcdCell *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->last_step = c->first_step = -1;
    c->open_last = -1;
    c->topic = -1;
    c->partition = -1;
    c->last_values = calloc((size_t)F, sizeof(float));
    c->imputed_bits = calloc(imputed_words(t->ring), sizeof(uint64_t));
    if (!c->last_values || !c->imputed_bits || ccd_pub_init(&c->pub, (int)F, (int)HZ) ||
        cc_cell_open(&c->cell, t->engine)) {
        cell_free(t, c);
        return NULL;
    }
    return c;
}

static void set_imputed_bit(CcdCells *t, CcdCell *c, int64_t step, int on)
{
    uint64_t i = (uint64_t)(step % t->ring);
    if (on)
        c->imputed_bits[i / 64] |= 1ULL << (i % 64);
    else
        c->imputed_bits[i / 64] &= ~(1ULL << (i % 64));
}

static int push_item(CcdBatch *b, CcdCell *c, int64_t step, int imputed, int reset)
{
    int i = ccd_batch_push(b, c, step);
    if (i < 0)
        return i;
    b->items[i].imputed = imputed;
    b->items[i].reset_before = reset;
    c->open_items++;
    c->open_last = i;
    c->last_step = step;
    return i;
}

/* Whether one more cell would take the cells' bytes past the budget. */
static int budget_full(const CcdCells *t)
{
    return t->n_cells && (int64_t)(ccd_cells_bytes(t) + t->cell_bytes) > t->s.kv_budget_bytes;
}

static int add_cell(CcdCells *t, const char *id, CcdCell **out)
{
    CcdCell *c;
    while ((int64_t)t->n_cells >= t->max_resident || budget_full(t))
        if (evict_one(t)) {
            t->st.rejected_full++;
            return -ENOSPC;
        }
    if (t->n_cells >= t->n_buckets && grow(t))
        return -ENOMEM;
    if (!(c = cell_new(t, id)))
        return -ENOMEM;
    size_t h = hash_id(c->id) & (t->n_buckets - 1);
    c->hnext = t->buckets[h];
    t->buckets[h] = c;
    t->n_cells++;
    t->version++;
    c->serial = ++t->st.created;
    lru_append(t, c);
    *out = c;
    return 0;
}

CcdCell *ccd_cells_add(CcdCells *t, const char *id)
{
    CcdCell *c = ccd_cells_get(t, id);
    if (!c && add_cell(t, id, &c))
        return NULL;
    return c;
}

int ccd_cells_ingest(CcdCells *t, CcdBatch *open, const CcKpiRecord *rec, int topic,
                     int32_t partition)
{
    const int F = t->n_features;
    CcdCell *c = ccd_cells_get(t, rec->cell_id);
    t->st.records++;
    t->version++;
    if (!c) {
        int rc = add_cell(t, rec->cell_id, &c);
        if (rc)
            return rc;
    }
    if (topic >= 0) {
        c->topic = topic;
        c->partition = partition;
    }
    if (c->doomed) { /* a message for it arrived after all: keep it */
        c->doomed = 0;
        t->n_doomed--;
    }

    int64_t s = rec->step;
    int idx;
    if (c->last_step >= 0 && s == c->last_step) {
        if (c->open_last < 0) { /* already dispatched */
            c->n_duplicates++;
            t->st.duplicates++;
            return 0;
        }
        idx = c->open_last; /* combine */
        if (open->items[idx].imputed)
            return 0; /* cannot happen: imputed items are never the newest */
        /* a KPI the open item already has: a duplicate, merged (the latest value wins) */
        if (open->items[idx].present & rec->present) {
            c->n_duplicates++;
            t->st.duplicates++;
        }
    } else if (c->last_step >= 0 && s < c->last_step) {
        c->n_late++;
        t->st.late++;
        return 0;
    } else {
        int reset = 0;
        if (c->last_step >= 0 && s > c->last_step + 1) {
            int64_t gap = s - c->last_step - 1;
            if (t->s.gap_policy == CCD_GAP_IMPUTE && gap <= t->s.max_gap) {
                for (int64_t g = c->last_step + 1; g < s; g++) {
                    if (push_item(open, c, g, 1, 0) < 0)
                        return -ENOMEM;
                    c->n_imputed++;
                    t->st.imputed++;
                    t->st.steps_queued++;
                }
            } else {
                reset = 1;
                c->n_restarts++;
                t->st.restarts++;
                LOG_DEBUG("cells", "cell %s: gap of %lld steps, sequence restarts", c->id,
                          (long long)gap);
            }
        }
        if (c->first_step < 0)
            c->first_step = s;
        if ((idx = push_item(open, c, s, 0, reset)) < 0)
            return -ENOMEM;
        t->st.steps_queued++;
    }
    /* counted once applied: a record redelivered after a restart (a replay from the last
     * commit) is a duplicate or late above, and counting it made the count grow at each
     * restart */
    c->n_records++;
    CcdItem *it = &open->items[idx];
    float *v = open->values + (size_t)idx * (size_t)F;
    for (int f = 0; f < F; f++)
        if (rec->present >> f & 1)
            v[f] = rec->values[f];
    it->present |= rec->present;
    if (rec->ts > c->last_ts)
        c->last_ts = rec->ts;
    c->last_update_ns = cc_now_ns();
    lru_unlink(t, c);
    lru_append(t, c);
    return 0;
}

/* Called by the scheduler when it seals a batch: resolves values, flags, busy marks. */
void ccd_cells_seal(CcdCells *t, CcdBatch *b)
{
    const int F = t->n_features;
    for (int i = 0; i < b->n; i++) {
        CcdItem *it = &b->items[i];
        CcdCell *c = it->cell;
        float *v = b->values + (size_t)i * (size_t)F;
        if (it->reset_before)
            memset(c->imputed_bits, 0, imputed_words(t->ring) * sizeof(uint64_t));
        if (it->imputed) {
            memcpy(v, c->last_values, (size_t)F * sizeof(float));
        } else {
            for (int f = 0; f < F; f++)
                if (!(it->present >> f & 1)) {
                    v[f] = c->have_values ? c->last_values[f] : 0.0f;
                    c->n_filled++;
                    t->st.filled++;
                }
        }
        memcpy(c->last_values, v, (size_t)F * sizeof(float));
        c->have_values = 1;
        set_imputed_bit(t, c, it->step, it->imputed);
        it->round = c->busy; /* busy counts this cell's items while sealing */
        c->busy++;
        c->open_items = 0;
        c->open_last = -1;
        if (it->round + 1 > b->n_rounds)
            b->n_rounds = it->round + 1;
    }
}

/* Called by the scheduler on the loop thread when a batch is done. */
void ccd_cells_unbusy(CcdCells *t, CcdBatch *b)
{
    t->version++; /* steps counted, forecasts published */
    for (int i = 0; i < b->n; i++) {
        CcdItem *it = &b->items[i];
        CcdCell *c = it->cell;
        c->busy = 0;
        if (c->hist_bytes != cc_history_bytes(c->hist)) { /* it grew on the worker */
            t->hist_bytes += cc_history_bytes(c->hist) - c->hist_bytes;
            c->hist_bytes = cc_history_bytes(c->hist);
        }
        if (it->status == 0)
            c->n_steps++;
        else
            c->n_refused++;
        if (it->held) { /* the engine's window (history.depth 0) shows what the model got */
            set_imputed_bit(t, c, it->step, 1);
            c->n_held++;
            t->st.held++;
        }
    }
}

int ccd_cells_release_partitions(CcdCells *t, int topic, const int32_t *parts, int n)
{
    int marked = 0;
    for (CcdCell *c = t->lru_head; c; c = c->lru_next)
        for (int i = 0; i < n; i++)
            if (c->topic == topic && c->partition == parts[i]) {
                if (!c->doomed)
                    t->n_doomed++;
                c->doomed = 1;
                marked++;
                break;
            }
    return marked;
}

int ccd_cells_reap(CcdCells *t)
{
    int n = 0;
    /* histories grow without new cells: evict while over the budget (one cell stays) */
    while (t->n_cells > 1 && (int64_t)ccd_cells_bytes(t) > t->s.kv_budget_bytes && !evict_one(t))
        ;
    if (!t->n_doomed)
        return 0; /* the common case: no walk over every cell each second */
    for (CcdCell *c = t->lru_head, *next; c; c = next) {
        next = c->lru_next;
        if (c->doomed && !c->busy && !c->open_items) {
            table_remove(t, c);
            t->st.released++;
            n++;
        }
    }
    return n;
}

void ccd_cells_foreach(CcdCells *t, void (*fn)(void *, CcdCell *), void *cookie)
{
    for (CcdCell *c = t->lru_head, *next; c; c = next) {
        next = c->lru_next;
        fn(cookie, c);
    }
}

int ccd_cells_imputed(const CcdCells *t, const CcdCell *c, int64_t step)
{
    uint64_t i = (uint64_t)(step % t->ring);
    return (int)(c->imputed_bits[i / 64] >> (i % 64) & 1);
}

void ccd_cells_set_settings(CcdCells *t, const CcdCellsSettings *s)
{
    const CcdCellsSettings old = t->s;
    t->s = *s;
    ccd_interval_apply(t, &old);
    size_budget(t);
}

int ccd_cells_rebind(CcdCells *t, int *failed)
{
    const int ring = cc_engine_ring_steps(t->engine);
    int rebound = 0;
    *failed = 0;
    t->version++;
    /* the new rings first, so that running out of memory changes nothing */
    uint64_t **bits = calloc(t->n_cells + 1, sizeof *bits);
    size_t n = 0;
    if (!bits)
        return -ENOMEM;
    for (CcdCell *c = t->lru_head; c; c = c->lru_next, n++)
        if (!(bits[n] = calloc(imputed_words(ring), sizeof(uint64_t)))) {
            while (n)
                free(bits[--n]);
            free(bits);
            return -ENOMEM;
        }
    n = 0;
    for (CcdCell *c = t->lru_head; c; c = c->lru_next, n++) {
        /* the flags of the steps both rings hold */
        int keep = ring < t->ring ? ring : t->ring;
        for (int64_t p = c->last_step; p >= 0 && p > c->last_step - keep; p--)
            if (ccd_cells_imputed(t, c, p))
                bits[n][(uint64_t)(p % ring) / 64] |= 1ULL << ((uint64_t)(p % ring) % 64);
        free(c->imputed_bits);
        c->imputed_bits = bits[n];
        if (cc_cell_rebind(c->cell, t->engine)) {
            cc_cell_reset(c->cell);
            (*failed)++;
        } else {
            rebound++;
        }
    }
    free(bits);
    t->ring = ring;
    size_budget(t);
    /* a history of another shape (step length, KPIs, horizon) would misplace its steps */
    for (CcdCell *c = t->lru_head; c; c = c->lru_next) {
        int hf, hd, hh;
        if (!c->hist)
            continue;
        cc_history_shape(c->hist, &hf, &hd, &hh);
        if (hf != t->n_features || hd != t->hist_depth || hh != t->horizon) {
            cc_history_close(&c->hist);
            ccd_watch_scale_close(&c->watch_scale); /* its day, its KPIs: learnt anew */
            t->hist_bytes -= c->hist_bytes;
            c->hist_bytes = 0;
        }
    }
    return rebound;
}

size_t ccd_cells_bytes(const CcdCells *t) { return t->n_cells * t->cell_bytes + t->hist_bytes; }

int ccd_cells_history_restore(CcdCells *t, CcdCell *c, const uint8_t *p, size_t n)
{
    int rc;
    if (!t->hist_depth)
        return 0;
    if (!c->hist && (rc = cc_history_open(&c->hist, t->n_features, t->hist_depth, t->horizon)))
        return rc;
    rc = cc_history_load(c->hist, p, n);
    t->hist_bytes += cc_history_bytes(c->hist) - c->hist_bytes;
    c->hist_bytes = cc_history_bytes(c->hist);
    return rc;
}

size_t ccd_cells_history_full_bytes(const CcdCells *t)
{
    return t->hist_depth ? cc_history_full_bytes(t->n_features, t->hist_depth, t->horizon) : 0;
}
