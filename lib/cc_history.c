/*
 * cc_history.c — a cell's long history: a ring of fixed-size rows in lazily allocated
 * chunks; see cc_history.h.
 */
#include "cc_history.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_half.h"

enum { F_OBSERVED = 1, F_IMPUTED = 2, F_FC0 = 4 }; /* F_FC0 << kind */

struct CcHistory {
    int F, depth, horizon, cap, n_chunks;
    size_t stride;          /* bytes per row: 4 + 16 F */
    int64_t head;           /* newest step recorded, -1 */
    int64_t oldest;         /* oldest step recorded since the last clear, -1 */
    int64_t last_obs;       /* newest observed step, -1 */
    unsigned char **chunks; /* n_chunks, NULL until a step lands in one */
    size_t bytes;
};

static size_t row_stride(int F) { return 4 + 16 * (size_t)F; }

int cc_history_open(CcHistory **out, int F, int depth, int horizon)
{
    *out = NULL;
    if (F < 1 || F > CC_HISTORY_MAX_F || depth < 1 || horizon < 1 || depth > (1 << 28) ||
        horizon > (1 << 20))
        return -EINVAL;
    CcHistory *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->F = F;
    h->depth = depth;
    h->horizon = horizon;
    h->cap = depth + horizon;
    h->n_chunks = (h->cap + CC_HISTORY_CHUNK - 1) / CC_HISTORY_CHUNK;
    h->stride = row_stride(F);
    h->head = h->oldest = h->last_obs = -1;
    if (!(h->chunks = calloc((size_t)h->n_chunks, sizeof *h->chunks))) {
        free(h);
        return -ENOMEM;
    }
    h->bytes = sizeof *h + (size_t)h->n_chunks * sizeof *h->chunks;
    *out = h;
    return 0;
}

void cc_history_close(CcHistory **ph)
{
    CcHistory *h = *ph;
    if (!h)
        return;
    for (int i = 0; i < h->n_chunks; i++)
        free(h->chunks[i]);
    free(h->chunks);
    free(h);
    *ph = NULL;
}

size_t cc_history_bytes(const CcHistory *h) { return h ? h->bytes : 0; }

size_t cc_history_full_bytes(int F, int depth, int horizon)
{
    size_t n_chunks = ((size_t)depth + (size_t)horizon + CC_HISTORY_CHUNK - 1) / CC_HISTORY_CHUNK;
    return sizeof(CcHistory) +
           n_chunks * (sizeof(unsigned char *) + CC_HISTORY_CHUNK * row_stride(F));
}

void cc_history_shape(const CcHistory *h, int *F, int *depth, int *horizon)
{
    *F = h->F;
    *depth = h->depth;
    *horizon = h->horizon;
}

void cc_history_clear(CcHistory *h)
{
    for (int i = 0; i < h->n_chunks; i++)
        if (h->chunks[i])
            memset(h->chunks[i], 0, CC_HISTORY_CHUNK * h->stride);
    h->head = h->oldest = h->last_obs = -1;
}

static int64_t span_first(const CcHistory *h)
{
    int64_t f = h->head - h->cap + 1;
    return f > h->oldest ? f : h->oldest;
}

/* The row of step p, or NULL when its chunk is not allocated. */
static unsigned char *row_at(const CcHistory *h, int64_t p)
{
    int64_t i = p % h->cap;
    unsigned char *c = h->chunks[i / CC_HISTORY_CHUNK];
    return c ? c + (size_t)(i % CC_HISTORY_CHUNK) * h->stride : NULL;
}

static uint32_t row_flags(const unsigned char *r)
{
    uint32_t f;
    memcpy(&f, r, 4);
    return f;
}

static void row_set_flags(unsigned char *r, uint32_t f) { memcpy(r, &f, 4); }

/* The row step p is written to (allocating its chunk), moving the head past the steps it
 * skips (their rows are forgotten); NULL when p is older than the span (*err 0) or a chunk
 * cannot be allocated (*err -ENOMEM). */
static unsigned char *row_for_write(CcHistory *h, int64_t p, int *err)
{
    *err = 0;
    if (h->head >= 0 && p <= h->head - h->cap)
        return NULL;
    int64_t i = p % h->cap, ci = i / CC_HISTORY_CHUNK;
    if (!h->chunks[ci]) {
        if (!(h->chunks[ci] = calloc(CC_HISTORY_CHUNK, h->stride))) {
            *err = -ENOMEM;
            return NULL;
        }
        h->bytes += CC_HISTORY_CHUNK * h->stride;
    }
    if (h->head < 0) {
        h->head = h->oldest = p;
    } else if (p > h->head) {
        if (p - h->head >= h->cap) { /* every row is older than the new span */
            for (int c = 0; c < h->n_chunks; c++)
                if (h->chunks[c])
                    for (int j = 0; j < CC_HISTORY_CHUNK; j++)
                        row_set_flags(h->chunks[c] + (size_t)j * h->stride, 0);
        } else {
            for (int64_t q = h->head + 1; q <= p; q++) {
                unsigned char *r = row_at(h, q);
                if (r)
                    row_set_flags(r, 0);
            }
        }
        h->head = p;
    }
    if (p < h->oldest)
        h->oldest = p;
    return row_at(h, p);
}

int cc_history_observe(CcHistory *h, int64_t p, const float *values, int imputed)
{
    int err;
    if (p < 0)
        return -EINVAL;
    unsigned char *r = row_for_write(h, p, &err);
    if (!r)
        return err;
    uint32_t fl = row_flags(r) | F_OBSERVED;
    fl = imputed ? fl | F_IMPUTED : fl & ~(uint32_t)F_IMPUTED;
    row_set_flags(r, fl);
    memcpy(r + 4, values, (size_t)h->F * sizeof(float));
    if (p > h->last_obs)
        h->last_obs = p;
    return 0;
}

int cc_history_forecast(CcHistory *h, int64_t p, enum CcHistoryFc kind, const float *mean,
                        const float *sd)
{
    int err;
    if (p < 0 || (kind != CC_HISTORY_ONE_STEP && kind != CC_HISTORY_HORIZON_END))
        return -EINVAL;
    unsigned char *r = row_for_write(h, p, &err);
    if (!r)
        return err;
    const size_t F = (size_t)h->F;
    row_set_flags(r, row_flags(r) | (uint32_t)F_FC0 << kind);
    memcpy(r + 4 + (1 + (size_t)kind) * F * sizeof(float), mean, F * sizeof(float));
    uint16_t tmp[CC_HISTORY_MAX_F];
    cc_bf16_store(tmp, sd, (int)F);
    memcpy(r + 4 + 3 * F * sizeof(float) + (size_t)kind * F * 2, tmp, F * 2);
    return 0;
}

void cc_history_span(const CcHistory *h, int64_t *first, int64_t *last, int64_t *last_observed)
{
    *first = h->head < 0 ? -1 : span_first(h);
    *last = h->head;
    *last_observed = h->last_obs >= *first ? h->last_obs : -1;
}

int cc_history_get(const CcHistory *h, int64_t p, CcHistoryRow *row)
{
    const int F = h->F;
    const unsigned char *r = h->head < 0 || p > h->head || p < span_first(h) ? NULL : row_at(h, p);
    uint32_t fl = r ? row_flags(r) : 0;
    row->observed = !!(fl & F_OBSERVED);
    row->imputed = !!(fl & F_IMPUTED);
    if (row->observed)
        memcpy(row->values, r + 4, (size_t)F * sizeof(float));
    else
        for (int f = 0; f < F; f++)
            row->values[f] = NAN;
    for (int k = 0; k < 2; k++) {
        row->have_fc[k] = !!(fl & (uint32_t)F_FC0 << k);
        if (row->have_fc[k]) {
            uint16_t tmp[CC_HISTORY_MAX_F];
            memcpy(row->mean[k], r + 4 + (1 + (size_t)k) * F * sizeof(float), (size_t)F * 4);
            memcpy(tmp, r + 4 + 3 * (size_t)F * sizeof(float) + (size_t)k * F * 2, (size_t)F * 2);
            cc_bf16_load(row->sd[k], tmp, F);
        } else {
            for (int f = 0; f < F; f++)
                row->mean[k][f] = row->sd[k][f] = NAN;
        }
    }
    return fl != 0;
}

/* Saved form: magic, F, depth, horizon (u32), head, oldest, last_obs (i64), rows (u32),
 * then per row its step (i64) and its stride bytes, steps ascending. */
#define SAVE_MAGIC 0x31484343u /* "CCH1" */
#define SAVE_HEAD (4 * 4 + 3 * 8 + 4)

static int64_t saved_rows(const CcHistory *h)
{
    int64_t n = 0;
    for (int64_t p = h->head < 0 ? 0 : span_first(h); h->head >= 0 && p <= h->head; p++) {
        const unsigned char *r = row_at(h, p);
        n += r && row_flags(r);
    }
    return n;
}

size_t cc_history_save_size(const CcHistory *h)
{
    return SAVE_HEAD + (size_t)saved_rows(h) * (8 + h->stride);
}

static unsigned char *put(unsigned char *o, const void *v, size_t n)
{
    memcpy(o, v, n);
    return o + n;
}

size_t cc_history_save(const CcHistory *h, uint8_t *buf, size_t n)
{
    if (n < cc_history_save_size(h))
        return 0;
    uint32_t hd[4] = {SAVE_MAGIC, (uint32_t)h->F, (uint32_t)h->depth, (uint32_t)h->horizon};
    uint32_t rows = (uint32_t)saved_rows(h);
    unsigned char *o = put(buf, hd, sizeof hd);
    o = put(o, &h->head, 8);
    o = put(o, &h->oldest, 8);
    o = put(o, &h->last_obs, 8);
    o = put(o, &rows, 4);
    for (int64_t p = h->head < 0 ? 0 : span_first(h); h->head >= 0 && p <= h->head; p++) {
        const unsigned char *r = row_at(h, p);
        if (r && row_flags(r)) {
            o = put(o, &p, 8);
            o = put(o, r, h->stride);
        }
    }
    return (size_t)(o - buf);
}

int cc_history_load(CcHistory *h, const uint8_t *buf, size_t n)
{
    uint32_t hd[4], rows;
    int64_t head, oldest, last_obs, prev = -1;
    int err = 0;
    cc_history_clear(h);
    if (n < SAVE_HEAD)
        return -EINVAL;
    memcpy(hd, buf, sizeof hd);
    memcpy(&head, buf + 16, 8);
    memcpy(&oldest, buf + 24, 8);
    memcpy(&last_obs, buf + 32, 8);
    memcpy(&rows, buf + 40, 4);
    if (hd[0] != SAVE_MAGIC || hd[1] != (uint32_t)h->F || hd[2] != (uint32_t)h->depth ||
        hd[3] != (uint32_t)h->horizon || rows > (uint32_t)h->cap ||
        n != SAVE_HEAD + (size_t)rows * (8 + h->stride) || head < 0 || head > ((int64_t)1 << 40) ||
        oldest < 0 || oldest > head || last_obs < -1 || last_obs > head)
        return -EINVAL;
    const unsigned char *in = buf + SAVE_HEAD;
    for (uint32_t i = 0; i < rows; i++, in += 8 + h->stride) {
        int64_t p;
        uint32_t fl;
        memcpy(&p, in, 8);
        memcpy(&fl, in + 8, 4);
        /* ascending, inside the saved span, only known flags */
        if (p <= prev || p > head || p <= head - h->cap || p < oldest || !fl ||
            (fl & ~(uint32_t)(F_OBSERVED | F_IMPUTED | F_FC0 | F_FC0 << 1))) {
            cc_history_clear(h);
            return -EINVAL;
        }
        unsigned char *r = row_for_write(h, p, &err);
        if (!r) {
            cc_history_clear(h);
            return err ? err : -EINVAL;
        }
        memcpy(r, in + 8, h->stride);
        prev = p;
    }
    if (rows) { /* the span as saved (rows may not reach its ends) */
        h->head = head;
        h->oldest = oldest;
        h->last_obs = last_obs;
    }
    return 0;
}
