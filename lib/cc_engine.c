/*
 * cc_engine.c — incremental, batched inference of cellcast-tx/3 and tx/2 (see cc_engine.h).
 *
 * Per step, for the cells given:
 *   1. push the new values into each cell's ring;
 *   2. REBUILD the cells whose newest complete patch e differs from the one their cache was
 *      built on: new normalisation (mu, sigma over the last M values up to e), the n ≤ N
 *      patch tokens ending at e, e-P, ... as one batch through every layer with the causal
 *      mask, keeping each layer's keys and values (the last layer needs only K and V);
 *   3. CURRENT: the token ending at t of every channel of every cell, as one batch through
 *      the layers, each attending to its cache plus itself, then the head; tx/3 adds the
 *      linear path of every channel as one more product over the same rows.
 * Dense parts are one sgemm per batch (cc_gemm); attention runs per channel and head
 * (cc_attention); a cell's memory is cc_cell.c's, the worker threads cc_pool's.
 *
 * Letters: B channel rows in a batch, T tokens in a rebuild batch, others as cc_model.h.
 */
#include "cc_engine.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc_attention.h"
#include "cc_cell_internal.h"
#include "cc_gemm.h"
#include "cc_kernels.h"
#include "cc_pool.h"

/* Tokens per rebuild sub-batch: bounds its scratch, and keeps the activations of one
 * sub-batch (~1.6 MB at d=64, dff=128) in L2; 8192 was ~10% slower at 1024 cells, f16. */
#define REBUILD_TOKENS_MAX 1024

typedef struct Workspace {
    float *x;               // (rows, IN)  token inputs
    float *z;               // (rows, D)   residual stream
    float *qkv;             // (rows, 3D)
    float *a;               // (rows, D)   attention output, then projection
    float *h;               // (rows, FF)
    float *y;               // (rows, 2HZ)
    float *lin;             // (RL, rows)  tx/3: r = xn_{t-RL+1..t} - xn_t; NULL in tx/2
    float *ylin;            // (rows, HZ)  tx/3: W_lin · r + b_lin
    float *xnt;             // (rows)      tx/3: xn_t
    float *pe;              // (rows, D)   positional encoding per token (shared by channels)
    float *tau;             // (N, 4)      time features of a rebuild's tokens
    float *scores;          // (H, N+1)    one token's attention weights, every head (+ slack)
    float *kvbuf;           // (2, N, D)   rebuild: (H, DK, nc) keys transposed + one head's values;
                            //             else one head's keys/values widened to f32 (+ slack)
    CcCell **cells;         // (max_batch_cells) cells of the chunk being processed
    const char **kv_blocks; // (max_batch_cells, F, L) the step's KV blocks, in stream order
    CcGemmStream stream;    ///< kv_blocks, asked for while the dense kernels run
    int sub_cells, n_ready; ///< current-token sub-batch size and cells of this chunk
    int *rows_of;           // (max_batch_cells) first row of each cell in a batch
    CcEngineStats stats;
} Workspace;

/* The model's dense weights packed for cc_gemm, per layer. kv_last is the last layer's
 * K and V rows of qkv_w: a rebuild needs only those. */
typedef struct DenseW {
    int L;
    CcGemmW *embed, *head, *kv_last;
    CcGemmW **qkv, **o, **up, **down; // (L) each
} DenseW;

typedef struct Job {
    CcCell **cells;
    int n;
} Job;

struct CcEngine {
    const CcModel *m;
    CcHparams hp; ///< m's, compared with the next model's at a swap
    CcEngineSettings s;
    uint32_t gen;       ///< bumped by set_model: caches built before are stale
    CcCellShape cs;     ///< what cells are laid out for (R: ring length in steps)
    double *pe_div;     // (D/2) 10000^(2i/D), the PE's divisors
    CcHalfDsp half;     ///< fp16 row conversions for this CPU
    CcAttentionDsp att; ///< AVX-512 attention kernels, unless absent or portable_attention
    DenseW dw;          ///< m's dense weights, packed
    int kblk;           ///< keys in the blocked layout, AVX-512 DK = 16 kernels (see
                        ///< cc_kblock_width); else plain (DK, N) and the portable kernels
    int n_threads;
    Workspace *ws; // (n_threads)
    Job *jobs;     // (n_threads) the current step's share of each thread
    CcPool *pool;  ///< n_threads - 1 workers; NULL for one thread
    CcCell **list; ///< cells of the current step, validated
    int list_cap;
    uint64_t batch_mark;
    CcEngineStats stats;
};

void cc_engine_default_settings(CcEngineSettings *s)
{
    memset(s, 0, sizeof *s);
    s->n_threads = 1;
    s->kv_type = CC_KV_F32;
    s->max_batch_cells = 512;
}

static void ws_free(Workspace *w)
{
    free(w->x);
    free(w->z);
    free(w->qkv);
    free(w->a);
    free(w->h);
    free(w->y);
    free(w->lin);
    free(w->ylin);
    free(w->xnt);
    free(w->pe);
    free(w->scores);
    free(w->tau);
    free(w->kvbuf);
    free(w->cells);
    free(w->kv_blocks);
    free(w->rows_of);
    memset(w, 0, sizeof *w);
}

static int ws_alloc(Workspace *w, const CcHparams *hp, int max_cells)
{
    size_t D = hp->d_model, F = hp->n_features, IN = hp->patch_len + 4;
    size_t cur = (size_t)max_cells * F;
    size_t reb = (size_t)F * hp->n_patches > REBUILD_TOKENS_MAX ? (size_t)F * hp->n_patches
                                                                : REBUILD_TOKENS_MAX;
    size_t rows = cur > reb ? cur : reb;
    memset(w, 0, sizeof *w);
    w->x = malloc(rows * IN * sizeof(float));
    w->z = malloc(rows * D * sizeof(float));
    w->qkv = malloc(rows * 3 * D * sizeof(float));
    w->a = malloc(rows * D * sizeof(float));
    w->h = malloc(rows * hp->d_ff * sizeof(float));
    w->y = malloc(rows * 2 * hp->horizon * sizeof(float));
    w->pe = malloc(rows * D * sizeof(float));
    if (hp->linear_window > 0) {
        /* only a sub-batch's rows are touched: the rest stays untouched virtual memory */
        w->lin = malloc(rows * hp->linear_window * sizeof(float));
        w->ylin = malloc(rows * hp->horizon * sizeof(float));
        w->xnt = malloc(rows * sizeof(float));
        if (!w->lin || !w->ylin || !w->xnt) {
            ws_free(w);
            return -ENOMEM;
        }
    }
    /* one token's weights for every head; slack for whole 16-lane blocks */
    w->scores =
        malloc(((size_t)hp->n_heads * (hp->n_patches + 1) + hp->n_patches + 64) * sizeof(float));
    /* keys transposed for every head, (H, DK, N), or one head's keys and values widened;
     * slack for whole 16-token blocks */
    w->kvbuf = calloc(2 * (size_t)hp->n_patches * D + 64, sizeof(float));
    w->tau = malloc((size_t)hp->n_patches * 4 * sizeof(float));
    w->cells = malloc((size_t)max_cells * sizeof(CcCell *));
    w->kv_blocks = malloc((size_t)max_cells * F * hp->n_layers * sizeof(char *));
    w->rows_of = malloc(((size_t)max_cells + 1) * sizeof(int));
    if (!w->x || !w->z || !w->qkv || !w->a || !w->h || !w->y || !w->pe || !w->scores || !w->kvbuf ||
        !w->tau || !w->cells || !w->kv_blocks || !w->rows_of) {
        ws_free(w);
        return -ENOMEM;
    }
    return 0;
}

/* Asks for one head's keys and values (2·N·DK elements) ahead of use. The caches of a
 * large batch live in DRAM and each head's block is only ~2.7 KB, too short for the
 * hardware prefetcher to ramp up: fetching the next head's block while this one is
 * computed saves ~10% of a step at 1024 cells. rw = 1 when it will be written. */
static inline void prefetch_head(const CcCell *c, size_t elem, int f, int l, int h, int rw)
{
    const char *k = cc_cell_kv(c, elem, f, l, 0, h), *v = cc_cell_kv(c, elem, f, l, 1, h);
    size_t bytes = (size_t)c->N * c->DK * elem;
    for (size_t off = 0; off < bytes; off += 64) {
        if (rw) {
            __builtin_prefetch(k + off, 1);
            __builtin_prefetch(v + off, 1);
        } else {
            /* into L2 only (prefetcht2): measured ~15% faster steps at 1024 cells than
             * prefetcht0, which stalls once the L1 miss buffers are full */
            __builtin_prefetch(k + off, 0, 1);
            __builtin_prefetch(v + off, 0, 1);
        }
    }
}

/* The head after (c, f, h) in the order the step visits them, within layer l. */
static inline void prefetch_next_head(CcCell *const *cells, int ci, int n, int f, int F, int h,
                                      int H, int l, size_t elem, int rw)
{
    if (h + 1 < H)
        prefetch_head(cells[ci], elem, f, l, h + 1, rw);
    else if (f + 1 < F)
        prefetch_head(cells[ci], elem, f + 1, l, 0, rw);
    else if (ci + 1 < n)
        prefetch_head(cells[ci + 1], elem, 0, l, 0, rw);
}

/* ---- engine lifecycle ------------------------------------------------------------------ */

static void run_job(void *ctx, int idx);

size_t cc_engine_cell_bytes(const CcEngine *e)
{
    return sizeof(CcCell) + cc_cell_mem_bytes(&e->cs);
}

/* A cell points to the engine's shape (e->cs), which cc_engine_set_model keeps current. */
int cc_cell_open(CcCell **out, const CcEngine *e) { return cc_cell_open_shape(out, &e->cs); }

int cc_cell_rebind(CcCell *c, const CcEngine *e) { return cc_cell_rebind_shape(c, &e->cs); }

int cc_engine_ring_steps(const CcEngine *e) { return e->cs.R; }

size_t cc_engine_kv_bytes_per_cell(const CcEngine *e)
{
    const CcHparams *hp = &e->hp;
    return (size_t)hp->n_features * hp->n_layers * 2 * hp->n_patches * hp->d_model * e->cs.kv_elem;
}

const CcModel *cc_engine_model(const CcEngine *e) { return e->m; }

const char *cc_engine_attention_path(const CcEngine *e) { return e->kblk ? "avx512" : "portable"; }

static void dense_free(DenseW *d)
{
    cc_gemm_close(&d->embed);
    cc_gemm_close(&d->head);
    cc_gemm_close(&d->kv_last);
    for (int l = 0; l < d->L; l++) {
        if (d->qkv)
            cc_gemm_close(&d->qkv[l]);
        if (d->o)
            cc_gemm_close(&d->o[l]);
        if (d->up)
            cc_gemm_close(&d->up[l]);
        if (d->down)
            cc_gemm_close(&d->down[l]);
    }
    free(d->qkv);
    free(d->o);
    free(d->up);
    free(d->down);
    memset(d, 0, sizeof *d);
}

static int dense_pack(DenseW *d, const CcModel *m, int blas)
{
    const CcHparams *hp = &m->hp;
    const CcParams *p = &m->w;
    const int D = hp->d_model, FF = hp->d_ff, L = hp->n_layers, IN = hp->patch_len + 4;
    int ret = -ENOMEM;
    memset(d, 0, sizeof *d);
    d->L = L;
    d->qkv = calloc((size_t)L, sizeof *d->qkv);
    d->o = calloc((size_t)L, sizeof *d->o);
    d->up = calloc((size_t)L, sizeof *d->up);
    d->down = calloc((size_t)L, sizeof *d->down);
    if (!d->qkv || !d->o || !d->up || !d->down)
        goto fail;
    if ((ret = cc_gemm_open(&d->embed, p->embed_w, D, IN, blas)) < 0 ||
        (ret = cc_gemm_open(&d->head, p->head_w, 2 * hp->horizon, D, blas)) < 0 ||
        (ret = cc_gemm_open(&d->kv_last, p->qkv_w + ((size_t)(L - 1) * 3 + 1) * D * D, 2 * D, D,
                            blas)) < 0)
        goto fail;
    for (int l = 0; l < L; l++)
        if ((ret = cc_gemm_open(&d->qkv[l], p->qkv_w + (size_t)l * 3 * D * D, 3 * D, D, blas)) <
                0 ||
            (ret = cc_gemm_open(&d->o[l], p->o_w + (size_t)l * D * D, D, D, blas)) < 0 ||
            (ret = cc_gemm_open(&d->up[l], p->up_w + (size_t)l * FF * D, FF, D, blas)) < 0 ||
            (ret = cc_gemm_open(&d->down[l], p->down_w + (size_t)l * D * FF, D, FF, blas)) < 0)
            goto fail;
    return 0;
fail:
    dense_free(d);
    return ret;
}

static int use_kblk(const CcEngine *e)
{
    return e->hp.d_model / e->hp.n_heads == 16 && e->hp.n_patches <= CC_ATTEND16_MAX_N &&
           e->att.attend16[CC_KV_F32] != NULL;
}

static int same_shapes(const CcHparams *a, const CcHparams *b)
{
    return a->n_features == b->n_features && a->patch_len == b->patch_len &&
           a->n_patches == b->n_patches && a->norm_window == b->norm_window &&
           a->d_model == b->d_model && a->n_heads == b->n_heads && a->n_layers == b->n_layers &&
           a->horizon == b->horizon && a->linear_window == b->linear_window;
}

int cc_engine_set_model(CcEngine *e, const CcModel *m)
{
    if (!m || cc_hparams_validate(&m->hp, NULL, 0) < 0)
        return -EINVAL;
    int reshape = !same_shapes(&e->hp, &m->hp) || m->hp.d_ff != e->hp.d_ff;
    DenseW dw;
    if (dense_pack(&dw, m, e->s.blas_dense) < 0)
        return -ENOMEM;
    if (reshape) {
        /* scratch sized for the new shapes; cells follow through cc_cell_rebind */
        Workspace *nws = calloc((size_t)e->n_threads, sizeof *nws);
        if (!nws) {
            dense_free(&dw);
            return -ENOMEM;
        }
        for (int i = 0; i < e->n_threads; i++)
            if (ws_alloc(&nws[i], &m->hp, e->s.max_batch_cells) < 0) {
                for (int j = 0; j < i; j++)
                    ws_free(&nws[j]);
                free(nws);
                dense_free(&dw);
                return -ENOMEM;
            }
        for (int i = 0; i < e->n_threads; i++)
            ws_free(&e->ws[i]);
        free(e->ws);
        e->ws = nws;
    }
    if (m->hp.d_model != e->hp.d_model) {
        double *div = malloc((size_t)m->hp.d_model / 2 * sizeof *div);
        if (!div) {
            dense_free(&dw);
            return -ENOMEM;
        }
        free(e->pe_div);
        e->pe_div = div;
    }
    cc_pos_encoding_divisors(e->pe_div, m->hp.d_model);
    dense_free(&e->dw);
    e->dw = dw;
    e->m = m;
    e->hp = m->hp;
    cc_cell_shape_init(&e->cs, m, e->s.kv_type, e->s.keep_attention);
    e->kblk = use_kblk(e);
    e->gen++;
    return 0;
}

int cc_engine_open(CcEngine **out, const CcModel *m, const CcEngineSettings *s, char *err,
                   size_t errlen)
{
    CcEngineSettings def;
    int ret = -EINVAL;
    CcEngine *e = NULL;
    if (!s) {
        cc_engine_default_settings(&def);
        s = &def;
    }
    if (!m) {
        cc_errf(err, errlen, 0, "engine: no model");
        goto error;
    }
    if (cc_hparams_validate(&m->hp, err, errlen) < 0)
        goto error;
    if (s->n_threads < 0 || s->n_threads > 256) {
        cc_errf(err, errlen, 0, "engine: n_threads %d outside 0..256", s->n_threads);
        goto error;
    }
    if (s->max_batch_cells < 1) {
        cc_errf(err, errlen, 0, "engine: max_batch_cells %d < 1", s->max_batch_cells);
        goto error;
    }
    if (s->kv_type < CC_KV_F32 || s->kv_type > CC_KV_BF16) {
        cc_errf(err, errlen, 0, "engine: unknown kv_type %d", (int)s->kv_type);
        goto error;
    }
    ret = -ENOMEM;
    if (!(e = calloc(1, sizeof *e)))
        goto error;
    e->m = m;
    e->hp = m->hp;
    e->s = *s;
    e->gen = 1;
    cc_cell_shape_init(&e->cs, m, s->kv_type, s->keep_attention);
    cc_half_dsp_init(&e->half);
    cc_attention_dsp_init(&e->att, s->portable_attention);
    e->kblk = use_kblk(e);
    e->n_threads = s->n_threads ? s->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (e->n_threads < 1)
        e->n_threads = 1;
    e->ws = calloc((size_t)e->n_threads, sizeof *e->ws);
    e->jobs = calloc((size_t)e->n_threads, sizeof *e->jobs);
    e->pe_div = malloc((size_t)m->hp.d_model / 2 * sizeof *e->pe_div);
    if (!e->ws || !e->jobs || !e->pe_div)
        goto error;
    cc_pos_encoding_divisors(e->pe_div, m->hp.d_model);
    if ((ret = dense_pack(&e->dw, m, s->blas_dense)) < 0)
        goto error;
    ret = -ENOMEM;
    for (int i = 0; i < e->n_threads; i++)
        if (ws_alloc(&e->ws[i], &m->hp, s->max_batch_cells) < 0)
            goto error;
    if (e->n_threads > 1 && (ret = cc_pool_open(&e->pool, e->n_threads, run_job, e)) < 0)
        goto error;
    *out = e;
    return 0;
error:
    if (ret == -ENOMEM)
        cc_errf(err, errlen, 0, "engine: out of memory");
    else if (ret != -EINVAL)
        cc_errf(err, errlen, 0, "engine: cannot start a worker thread");
    cc_engine_close(&e);
    return ret;
}

void cc_engine_close(CcEngine **pe)
{
    if (!pe || !*pe)
        return;
    CcEngine *e = *pe;
    cc_pool_close(&e->pool);
    if (e->ws)
        for (int i = 0; i < e->n_threads; i++)
            ws_free(&e->ws[i]);
    free(e->ws);
    free(e->jobs);
    free(e->pe_div);
    dense_free(&e->dw);
    free(e->list);
    free(e);
    *pe = NULL;
}

void cc_engine_stats(const CcEngine *e, CcEngineStats *out) { *out = e->stats; }

void cc_engine_reset_stats(CcEngine *e) { memset(&e->stats, 0, sizeof e->stats); }

/* ---- the batched computation ----------------------------------------------------------- */

static inline int64_t boundary_of(int64_t t, int P) { return ((t + 1) / P) * P - 1; }

/* One post-LN block's tail for rows of z given the attention output in a:
 * z = LN(z + a·Wo^T + bo); z = LN(z + W2·relu(W1·z + c1) + c2). Biases, ReLU and the
 * residual LayerNorms run in the epilogues of the dense kernels. */
static void block_tail(const CcEngine *e, int l, Workspace *w, int rows, CcGemmStream *st)
{
    const CcHparams *hp = &e->m->hp;
    const CcParams *p = &e->m->w;
    const int D = hp->d_model, FF = hp->d_ff;
    cc_gemm_residual_ln(w->z, D, w->a, D, e->dw.o[l], p->o_b + (size_t)l * D,
                        p->ln1_g + (size_t)l * D, p->ln1_b + (size_t)l * D, rows, st);
    cc_gemm(w->h, FF, w->z, D, e->dw.up[l], p->up_b + (size_t)l * FF, rows, CC_GEMM_RELU, st);
    cc_gemm_residual_ln(w->z, D, w->h, FF, e->dw.down[l], p->down_b + (size_t)l * D,
                        p->ln2_g + (size_t)l * D, p->ln2_b + (size_t)l * D, rows, st);
}

/* z rows = embed_w · x rows; the callers add embed_b + chan[f] + pe[token] in one pass. */
static void embed_rows(const CcEngine *e, Workspace *w, int rows, CcGemmStream *st)
{
    cc_gemm(w->z, e->m->hp.d_model, w->x, e->m->hp.patch_len + 4, e->dw.embed, NULL, rows,
            CC_GEMM_STORE, st);
}

/* Rebuilds the caches of cells[0..n): every channel's n_c patch tokens as one batch. */
static void rebuild(const CcEngine *e, Workspace *w, CcCell **cells, int n)
{
    const CcModel *m = e->m;
    const CcHparams *hp = &m->hp;
    const CcParams *p = &m->w;
    const int F = hp->n_features, P = hp->patch_len, N = hp->n_patches, M = hp->norm_window;
    const int D = hp->d_model, H = hp->n_heads, DK = D / H, L = hp->n_layers, IN = P + 4;
    const float scale = 1.0f / sqrtf((float)DK);
    int64_t t0 = cc_now_ns();
    int rows = 0;

    for (int ci = 0; ci < n; ci++) {
        CcCell *c = cells[ci];
        int64_t t = c->last, e_ = boundary_of(t, P);
        int64_t lo = e_ - M + 1 > c->p0 ? e_ - M + 1 : c->p0;
        int64_t avail = (e_ - P + 1 - c->p0) / P + 1;
        int nc = avail < N ? (int)avail : N;
        c->cache_e = e_;
        c->n_cached = nc;
        c->cache_gen = e->gen;
        w->rows_of[ci] = rows;
        cc_cell_ring_stats(c, lo, e_, c->mu, c->sigma,
                           hp->linear_window > 0 ? p->norm_floor : NULL);
        /* time features and PE depend only on the token's end step: once per cell, and
         * cells stepping together share them (same e_, same nc): computed once */
        float *pe = &w->pe[(size_t)rows / F * D];
        const int same = ci > 0 && cells[ci - 1]->cache_e == e_ && cells[ci - 1]->n_cached == nc;
        if (same)
            memcpy(pe, &w->pe[(size_t)w->rows_of[ci - 1] / F * D], (size_t)nc * D * sizeof(float));
        for (int i = 0; i < nc; i++) {
            int64_t q = e_ - (int64_t)(nc - 1 - i) * P;
            if (!same) {
                cc_time_features(w->tau + (size_t)i * 4, q, hp->step_seconds, hp->tz_offset_s);
                cc_pos_encoding_tab(pe + (size_t)i * D, (double)q / P, D, e->pe_div);
            }
            for (int f = 0; f < F; f++) {
                float *x = &w->x[(size_t)(rows + f * nc + i) * IN];
                cc_cell_ring_read_norm(x, c, f, q - P + 1, P, c->mu[f], 1.0f / c->sigma[f]);
                memcpy(x + P, w->tau + (size_t)i * 4, 4 * sizeof(float));
            }
        }
        rows += F * nc;
    }
    w->rows_of[n] = rows;
    embed_rows(e, w, rows, NULL);
    for (int ci = 0; ci < n; ci++) {
        CcCell *c = cells[ci];
        int nc = c->n_cached, r0 = w->rows_of[ci];
        const float *pe = &w->pe[(size_t)r0 / F * D]; /* (nc, D) of this cell */
        for (int f = 0; f < F; f++)
            for (int i = 0; i < nc; i++) {
                float *z = &w->z[(size_t)(r0 + f * nc + i) * D];
                const float *ch = &p->chan[(size_t)f * D], *pi = &pe[(size_t)i * D];
                for (int d = 0; d < D; d++)
                    z[d] += (p->embed_b[d] + ch[d]) + pi[d];
            }
    }
    for (int l = 0; l < L; l++) {
        const float *bqkv = p->qkv_b + (size_t)l * 3 * D;
        int last = l == L - 1;
        /* the last layer's cached outputs are never used: only its keys and values */
        if (last)
            cc_gemm(w->qkv + D, 3 * D, w->z, D, e->dw.kv_last, bqkv + D, rows, CC_GEMM_STORE, NULL);
        else
            cc_gemm(w->qkv, 3 * D, w->z, D, e->dw.qkv[l], bqkv, rows, CC_GEMM_STORE, NULL);
        for (int ci = 0; ci < n; ci++) {
            CcCell *c = cells[ci];
            int nc = c->n_cached, r0 = w->rows_of[ci];
            CcAttend16 reg = e->kblk ? e->att.attend16[CC_KV_F32] : NULL;
            for (int f = 0; f < F; f++) {
                const float *q0 = &w->qkv[(size_t)(r0 + f * nc) * 3 * D]; /* token 0's q */
                float *o = &w->a[(size_t)(r0 + f * nc) * D];
                for (int h = 0; h < H; h++) {
                    prefetch_next_head(cells, ci, n, f, F, h, H, l, e->cs.kv_elem, 1);
                    char *K = cc_cell_kv(c, e->cs.kv_elem, f, l, 0, h);
                    char *V = cc_cell_kv(c, e->cs.kv_elem, f, l, 1, h);
                    /* head h's keys transposed into its part of (H, DK, nc), blocked for
                     * nc tokens if kblk, then stored row by row in the cache's layout */
                    float *kt = w->kvbuf + (size_t)h * DK * nc;
                    float *vrows = w->kvbuf + (size_t)N * D; /* (nc, DK) after all heads' keys */
                    cc_attention_keys_t(kt, q0 + D + h * DK, (size_t)3 * D, nc, DK, reg != NULL);
                    for (int i = 0; i < nc; i++)
                        memcpy(vrows + (size_t)i * DK, q0 + (size_t)i * 3 * D + 2 * D + h * DK,
                               DK * sizeof(float));
                    /* the cache's value rows are contiguous: one conversion call */
                    cc_kv_store(&e->half, V, vrows, nc * DK, e->s.kv_type);
                    if (reg)
                        for (int b = 0; 16 * b < nc; b++) {
                            int cnt = nc - 16 * b < 16 ? nc - 16 * b : 16;
                            int w_nc = cc_kblock_width(nc, b), w_cap = cc_kblock_width(c->N, b);
                            if (w_nc == w_cap) /* same block shape (always, once warm): one call */
                                cc_kv_store(&e->half, K + (size_t)b * 256 * e->cs.kv_elem,
                                            kt + (size_t)b * 256, DK * w_nc, e->s.kv_type);
                            else
                                for (int cc = 0; cc < DK; cc++)
                                    cc_kv_store(&e->half,
                                                K + ((size_t)b * 256 + (size_t)cc * w_cap) *
                                                        e->cs.kv_elem,
                                                kt + (size_t)b * 256 + (size_t)cc * w_nc, cnt,
                                                e->s.kv_type);
                        }
                    else
                        for (int cc = 0; cc < DK; cc++)
                            cc_kv_store(&e->half, K + (size_t)cc * c->N * e->cs.kv_elem,
                                        kt + (size_t)cc * nc, nc, e->s.kv_type);
                    if (last || reg)
                        continue;
                    if (DK == 16)
                        cc_attend_causal16(o + h * DK, D, q0 + h * DK, q0 + D + h * DK,
                                           q0 + 2 * D + h * DK, 3 * D, nc, scale, kt, w->scores);
                    else
                        cc_attend_causal(o + h * DK, D, q0 + h * DK, q0 + D + h * DK,
                                         q0 + 2 * D + h * DK, 3 * D, nc, DK, scale, kt, w->scores);
                }
                if (last || !reg)
                    continue;
                /* token i of every head: tokens 0..i-1 as the cache, itself as self */
                for (int i = 0; i < nc; i++) {
                    const float *qi = q0 + (size_t)i * 3 * D;
                    reg(o + (size_t)i * D, w->scores, nc + 1, qi, w->kvbuf, (size_t)DK * nc, nc,
                        q0 + 2 * D, DK, 3 * D, qi + D, qi + 2 * D, i, H, scale);
                }
            }
        }
        if (!last)
            block_tail(e, l, w, rows, NULL);
    }
    w->stats.rebuilds += (uint64_t)n * F;
    w->stats.rebuild_tokens += (uint64_t)rows;
    w->stats.ns_rebuild += cc_now_ns() - t0;
}

/* ---- the KV stream ---------------------------------------------------------------------
 * At 1024 cells the KV caches live in DRAM, and one core streams them at ~10 GB/s: left
 * to the attention phase, the step waits on memory while the FMA units idle, then the
 * dense kernels run while memory idles. So the ready cells of a chunk are processed in
 * sub-batches of sub_cells whose caches fit in L2 twice, and the dense kernels ask for
 * the caches the next attention phases read (one line per inner iteration) as they run.
 * Groups (sub-batch s, layer l) are streamed in attention order; while the attention of
 * group g is next, lines up to the end of group g + 1 may be asked for. */

static void stream_setup(const CcEngine *e, Workspace *w, CcCell **cells, int n)
{
    const int F = e->hp.n_features, L = e->hp.n_layers, sub = w->sub_cells;
    size_t k = 0;
    for (int s0 = 0; s0 < n; s0 += sub) {
        int cnt = n - s0 < sub ? n - s0 : sub;
        for (int l = 0; l < L; l++)
            for (int ci = s0; ci < s0 + cnt; ci++)
                for (int f = 0; f < F; f++)
                    w->kv_blocks[k++] = cc_cell_kv(cells[ci], e->cs.kv_elem, f, l, 0, 0);
    }
    w->n_ready = n;
    w->stream.blocks = w->kv_blocks;
    w->stream.block_lines = (2 * (size_t)e->hp.d_model * e->hp.n_patches * e->cs.kv_elem + 63) / 64;
    w->stream.next = w->stream.limit = 0;
    /* f32 caches are twice the lines for the same FMAs: two per iteration keeps the
     * stream level with the dense work (measured ~5% faster at 1024 cells; with 16-bit
     * caches one is enough) */
    w->stream.per_iter = e->cs.kv_elem == 4 ? 2 : 1;
}

/* Lets the stream run to the end of the group after (s, l), l possibly ≥ L. */
static void stream_allow(const CcEngine *e, Workspace *w, int s, int l)
{
    const int F = e->hp.n_features, L = e->hp.n_layers, sub = w->sub_cells, n = w->n_ready;
    l++;
    s += l / L;
    l %= L;
    size_t blocks;
    if ((int64_t)s * sub >= n) {
        blocks = (size_t)n * F * L;
    } else {
        int cnt = n - s * sub < sub ? n - s * sub : sub;
        blocks = (size_t)s * sub * F * L + (size_t)(l + 1) * cnt * F;
    }
    size_t lim = blocks * w->stream.block_lines;
    if (lim > w->stream.limit)
        w->stream.limit = lim;
}

/* tx/3: y[k][0] += W_lin · r + b_lin + xn_t for every row of cells[0..n), as one product.
 * r_i = xn_{t-RL+1+i} - xn_t = (x_{t-RL+1+i} - x_t) / sigma: mu cancels; steps before the
 * sequence's first step p0 take x_{p0}. The inputs are built transposed, (RL, rows): a ring
 * row (one step, F channels) is then F contiguous inputs, a vector operation; built as
 * (rows, RL) for cc_gemm the same data cost ~2x the product (~200 ns per channel-step at
 * the default shape, 1024 cells), and the packed kernel would fill only HZ = 24 of its 64
 * columns: OpenBLAS on the transposed inputs is the fastest measured. */
static void linear_path(const CcEngine *e, Workspace *w, CcCell **cells, int n)
{
    const CcHparams *hp = &e->m->hp;
    const CcParams *p = &e->m->w;
    const int F = hp->n_features, RL = hp->linear_window, HZ = hp->horizon, rows = n * F;
    for (int ci = 0; ci < n; ci++) {
        const CcCell *c = cells[ci];
        const int64_t t = c->last, first = t - RL + 1;
        const float *xt = &c->ring[(size_t)(t % c->RC) * F];
        float inv[CC_MAX_FEATURES];
        float *At = &w->lin[(size_t)ci * F]; /* column ci·F + f, row i: r_i of channel f */
        for (int f = 0; f < F; f++) {
            inv[f] = 1.0f / c->sigma[f];
            w->xnt[ci * F + f] = (xt[f] - c->mu[f]) * inv[f];
        }
        int64_t r = first < c->p0 ? c->p0 : first; /* cold start: x_{p0} stands in */
        int ri = (int)(r % c->RC);
        /* the rings of many cells live in DRAM: the next cell's is asked for meanwhile, one
         * line per row, into L2 (the inputs written meanwhile would evict it from L1):
         * measured 5.6% -> 3.4% of the step's profile at 1024 cells */
        const char *next = ci + 1 < n ? (const char *)cells[ci + 1]->ring : NULL;
        const int next_lines =
            next ? (int)(((size_t)cells[ci + 1]->RC * F * sizeof(float) + 63) / 64) : 0;
        for (int i = 0; i < RL; i++) {
            const float *row = &c->ring[(size_t)ri * F];
            if (next && i < next_lines)
                __builtin_prefetch(next + (size_t)i * 64, 0, 1);
            float *dst = At + (size_t)i * rows;
            for (int f = 0; f < F; f++)
                dst[f] = (row[f] - xt[f]) * inv[f];
            if (first + i >= c->p0 && ++ri == c->RC)
                ri = 0;
        }
    }
    cc_linear_at(w->ylin, HZ, w->lin, rows, p->lin_w, RL, rows, HZ, RL);
    for (int j = 0; j < rows; j++)
        for (int k = 0; k < HZ; k++)
            w->y[(size_t)j * 2 * HZ + 2 * k] +=
                w->ylin[(size_t)j * HZ + k] + p->lin_b[k] + w->xnt[j];
}

/* Current tokens of every channel of cells[0..n) (all with a complete patch and a fresh
 * cache) as one batch; writes each cell's forecast. */
static void current(const CcEngine *e, Workspace *w, CcCell **cells, int n, int sub)
{
    const CcModel *m = e->m;
    const CcHparams *hp = &m->hp;
    const CcParams *p = &m->w;
    const int F = hp->n_features, P = hp->patch_len, D = hp->d_model, H = hp->n_heads;
    const int DK = D / H, L = hp->n_layers, IN = P + 4, HZ2 = 2 * hp->horizon;
    const float scale = 1.0f / sqrtf((float)DK);
    const int rows = n * F;
    int64_t t0 = cc_now_ns(), t1, ta = 0;

    float tau[4];
    for (int ci = 0; ci < n; ci++) {
        CcCell *c = cells[ci];
        int64_t t = c->last;
        if (ci > 0 && cells[ci - 1]->last == t) { /* cells stepping together: same t */
            memcpy(&w->pe[(size_t)ci * D], &w->pe[(size_t)(ci - 1) * D], (size_t)D * sizeof(float));
        } else {
            cc_time_features(tau, t, hp->step_seconds, hp->tz_offset_s);
            cc_pos_encoding_tab(&w->pe[(size_t)ci * D], (double)t / P, D, e->pe_div);
        }
        for (int f = 0; f < F; f++) {
            float *x = &w->x[(size_t)(ci * F + f) * IN];
            cc_cell_ring_read_norm(x, c, f, t - P + 1, P, c->mu[f], 1.0f / c->sigma[f]);
            memcpy(x + P, tau, sizeof tau);
        }
    }
    t1 = cc_now_ns();
    w->stats.ns_other += t1 - t0;
    stream_allow(e, w, sub, 0);
    embed_rows(e, w, rows, &w->stream);
    for (int ci = 0; ci < n; ci++)
        for (int f = 0; f < F; f++) {
            float *z = &w->z[(size_t)(ci * F + f) * D];
            const float *ch = &p->chan[(size_t)f * D], *pe = &w->pe[(size_t)ci * D];
            for (int d = 0; d < D; d++)
                z[d] += (p->embed_b[d] + ch[d]) + pe[d];
        }
    for (int l = 0; l < L; l++) {
        stream_allow(e, w, sub, l);
        cc_gemm(w->qkv, 3 * D, w->z, D, e->dw.qkv[l], p->qkv_b + (size_t)l * 3 * D, rows,
                CC_GEMM_STORE, &w->stream);
        int64_t s0 = cc_now_ns();
        for (int ci = 0; ci < n; ci++) {
            CcCell *c = cells[ci];
            int nc = c->n_cached;
            CcAttend16 direct = e->kblk ? e->att.attend16[e->s.kv_type] : NULL;
            for (int f = 0; f < F; f++) {
                const float *row = &w->qkv[(size_t)(ci * F + f) * 3 * D];
                if (direct) { /* all heads of the channel at once */
                    /* heads 1.. of this channel and head 0 of the next: measured best
                     * (the whole next channel, or the one after, ahead was slower) */
                    for (int hh = 0; hh < H; hh++)
                        prefetch_next_head(cells, ci, n, f, F, hh, H, l, e->cs.kv_elem, 0);
                    float *wts = c->att ? &c->att[((size_t)f * L + l) * H * (c->N + 1)] : w->scores;
                    direct(&w->a[(size_t)(ci * F + f) * D], wts, c->N + 1, row,
                           cc_cell_kv(c, e->cs.kv_elem, f, l, 0, 0), (size_t)c->N * DK, c->N,
                           cc_cell_kv(c, e->cs.kv_elem, f, l, 1, 0), (size_t)c->N * DK, DK, row + D,
                           row + 2 * D, nc, H, scale);
                    continue;
                }
                for (int h = 0; h < H; h++) {
                    prefetch_next_head(cells, ci, n, f, F, h, H, l, e->cs.kv_elem, 0);
                    const void *K = cc_cell_kv(c, e->cs.kv_elem, f, l, 0, h);
                    const void *V = cc_cell_kv(c, e->cs.kv_elem, f, l, 1, h);
                    float *wts =
                        c->att ? &c->att[(((size_t)f * L + l) * H + h) * (c->N + 1)] : w->scores;
                    int ldk = c->N;
                    float *o = &w->a[(size_t)(ci * F + f) * D + h * DK];
                    if (e->s.kv_type != CC_KV_F32) { /* widen the n valid columns/rows */
                        for (int cc = 0; cc < DK; cc++)
                            cc_kv_load(&e->half, w->kvbuf + (size_t)cc * nc,
                                       (const char *)K + (size_t)cc * c->N * e->cs.kv_elem, nc,
                                       e->s.kv_type);
                        cc_kv_load(&e->half, w->kvbuf + (size_t)nc * DK, V, nc * DK, e->s.kv_type);
                        K = w->kvbuf;
                        V = w->kvbuf + (size_t)nc * DK;
                        ldk = nc;
                    }
                    if (DK == 16)
                        cc_attend_cached16(o, wts, row + h * DK, K, ldk, V, row + D + h * DK,
                                           row + 2 * D + h * DK, nc, scale);
                    else
                        cc_attend_cached(o, wts, row + h * DK, K, ldk, V, row + D + h * DK,
                                         row + 2 * D + h * DK, nc, DK, scale);
                }
            }
        }
        ta += cc_now_ns() - s0;
        stream_allow(e, w, sub, l + 1); /* the attention after (sub, l) is next */
        block_tail(e, l, w, rows, &w->stream);
    }
    cc_gemm(w->y, HZ2, w->z, D, e->dw.head, p->head_b, rows, CC_GEMM_STORE, &w->stream);
    if (hp->linear_window > 0)
        linear_path(e, w, cells, n);
    for (int ci = 0; ci < n; ci++) {
        CcCell *c = cells[ci];
        memcpy(c->y, &w->y[(size_t)ci * F * HZ2], (size_t)F * HZ2 * sizeof(float));
        c->fc_valid = 1;
        c->fc_step = c->last;
    }
    w->stats.channel_steps += (uint64_t)rows;
    w->stats.ns_attention += ta;
    w->stats.ns_dense += cc_now_ns() - t1 - ta;
}

/* Processes cells[0..n) on one thread, in chunks bounded by the workspace. */
static void process(const CcEngine *e, Workspace *w, CcCell **cells, int n)
{
    const CcHparams *hp = &e->m->hp;
    const int P = hp->patch_len, F = hp->n_features;
    const int reb_cells =
        REBUILD_TOKENS_MAX / (F * hp->n_patches) > 0 ? REBUILD_TOKENS_MAX / (F * hp->n_patches) : 1;
    /* two groups of KV (sub-batch × one layer) in ~1.25 MB of L2, with the activations */
    const size_t group_cell = (size_t)F * 2 * hp->d_model * hp->n_patches * e->cs.kv_elem;
    w->sub_cells = (int)((5u << 18) / (2 * group_cell)); /* default shape: 14 (f16), 7 (f32) */
    if (w->sub_cells < 1)
        w->sub_cells = 1;
    for (int start = 0; start < n; start += e->s.max_batch_cells) {
        int cnt = n - start < e->s.max_batch_cells ? n - start : e->s.max_batch_cells;
        int nr = 0, nf = 0;
        CcCell **ready = w->cells;
        /* cells needing a rebuild first go to the front of w->cells */
        for (int i = 0; i < cnt; i++) {
            CcCell *c = cells[start + i];
            int64_t eb = boundary_of(c->last, P);
            if (eb - P + 1 < c->p0) {
                c->fc_valid = 0; /* cold start: no complete patch yet */
                continue;
            }
            if (e->s.no_cache || c->cache_e != eb || c->cache_gen != e->gen)
                ready[nr++] = c;
        }
        for (int i = 0; i < nr; i += reb_cells)
            rebuild(e, w, ready + i, nr - i < reb_cells ? nr - i : reb_cells);
        for (int i = 0; i < cnt; i++) {
            CcCell *c = cells[start + i];
            if (boundary_of(c->last, P) - P + 1 >= c->p0)
                ready[nf++] = c;
        }
        if (nf)
            stream_setup(e, w, ready, nf);
        for (int s0 = 0, sub = 0; s0 < nf; s0 += w->sub_cells, sub++)
            current(e, w, ready + s0, nf - s0 < w->sub_cells ? nf - s0 : w->sub_cells, sub);
        w->stats.steps += (uint64_t)cnt;
    }
}

static void run_job(void *ctx, int idx)
{
    CcEngine *e = ctx;
    process(e, &e->ws[idx], e->jobs[idx].cells, e->jobs[idx].n);
}

int cc_engine_step(CcEngine *e, const CcStepInput *in, int n, int *status)
{
    const int F = e->hp.n_features;
    int count = 0;
    if (n < 0)
        return -EINVAL;
    if (n > e->list_cap) {
        CcCell **l = realloc(e->list, (size_t)n * sizeof *l);
        if (!l)
            return -ENOMEM;
        e->list = l;
        e->list_cap = n;
    }
    int64_t t0 = cc_now_ns();
    e->batch_mark++;
    for (int i = 0; i < n; i++) {
        CcCell *c = in[i].cell;
        int st = 0;
        if (!c || c->mark == e->batch_mark || in[i].step < 0)
            st = -EINVAL;
        else if (!cc_cell_fits(c, &e->cs))
            st = -ESTALE;
        else if (in[i].values) {
            if (c->last >= 0 && in[i].step != c->last + 1)
                st = -EINVAL;
            for (int f = 0; f < F && !st; f++)
                if (!isfinite(in[i].values[f]))
                    st = -ERANGE;
        } else if (c->last < 0 || in[i].step != c->last)
            st = -EINVAL;
        /* room for the step: the ring grows, the caches come with the first patch */
        if (!st && cc_cell_prepare(c, c->last < 0 ? in[i].step : c->p0, in[i].step))
            st = -ENOMEM;
        if (status)
            status[i] = st;
        if (st)
            continue;
        c->mark = e->batch_mark;
        if (in[i].values)
            cc_cell_push(c, in[i].step, in[i].values);
        e->list[count++] = c;
    }
    e->stats.ns_other += cc_now_ns() - t0;

    int nt = e->n_threads;
    if (nt > 1 && count < 2 * nt)
        nt = 1;
    for (int i = 0; i < e->n_threads; i++)
        memset(&e->ws[i].stats, 0, sizeof e->ws[i].stats);
    if (nt == 1) {
        process(e, &e->ws[0], e->list, count);
    } else {
        for (int i = 0; i < nt; i++) {
            int a = (int)((int64_t)count * i / nt), b = (int)((int64_t)count * (i + 1) / nt);
            e->jobs[i].cells = e->list + a;
            e->jobs[i].n = b - a;
        }
        for (int i = nt; i < e->n_threads; i++)
            e->jobs[i].n = 0;
        cc_pool_run(e->pool);
    }
    for (int i = 0; i < e->n_threads; i++) {
        const CcEngineStats *s = &e->ws[i].stats;
        e->stats.steps += s->steps;
        e->stats.channel_steps += s->channel_steps;
        e->stats.rebuilds += s->rebuilds;
        e->stats.rebuild_tokens += s->rebuild_tokens;
        e->stats.ns_dense += s->ns_dense;
        e->stats.ns_attention += s->ns_attention;
        e->stats.ns_rebuild += s->ns_rebuild;
        e->stats.ns_other += s->ns_other;
    }
    return 0;
}
