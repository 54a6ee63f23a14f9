/*
 * cc_engine.c — incremental, batched inference of cellcast-tx/2 (see cc_engine.h).
 *
 * Per step, for the cells given:
 *   1. push the new values into each cell's ring;
 *   2. REBUILD the cells whose newest complete patch e differs from the one their cache was
 *      built on: new normalisation (mu, sigma over the last M values up to e), the n ≤ N
 *      patch tokens ending at e, e-P, ... as one batch through every layer with the causal
 *      mask, keeping each layer's keys and values (the last layer needs only K and V);
 *   3. CURRENT: the token ending at t of every channel of every cell, as one batch through
 *      the layers, each attending to its cache plus itself, then the head.
 * Dense parts are one sgemm per batch; attention runs per channel and head.
 *
 * Letters: B channel rows in a batch, T tokens in a rebuild batch, others as cc_model.h.
 */
#include "cc_engine.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc_gemm.h"
#include "cc_kernels.h"

/* Tokens per rebuild sub-batch: bounds its scratch, and keeps the activations of one
 * sub-batch (~1.6 MB at d=64, dff=128) in L2; 8192 was ~10% slower at 1024 cells, f16. */
#define REBUILD_TOKENS_MAX 1024

/* 16-bit KV conversion kernels, chosen per CPU (see kv_convert_select). */
typedef void (*Attend16)(float *out, float *w, int ldw, const float *q, const void *Kt,
                         size_t ksh, int ldk, const void *V, size_t vsh, int ldv,
                         const float *k_self, const float *v_self, int n, int H, float scale);
#define ATTEND16_MAX_N 63 /* the register kernels hold n + 1 ≤ 64 scores */
typedef struct KvConvert {
    void (*f16_load)(float *dst, const uint16_t *src, int n);
    void (*f16_store)(uint16_t *dst, const float *src, int n);
    /* DK = 16 attention in registers, reading caches of each element type directly
     * (AVX-512), indexed by CcKvType; NULL = the portable kernels (16-bit caches widened
     * to f32 first) */
    Attend16 attend16[3];
} KvConvert;

typedef struct Workspace {
    float *x;              // (rows, IN)  token inputs
    float *z;              // (rows, D)   residual stream
    float *qkv;            // (rows, 3D)
    float *a;              // (rows, D)   attention output, then projection
    float *h;              // (rows, FF)
    float *y;              // (rows, 2HZ)
    float *pe;             // (rows, D)   positional encoding per token (shared by channels)
    float *tau;            // (N, 4)      time features of a rebuild's tokens
    float *scores;         // (H, N+1)    one token's attention weights, every head (+ slack)
    float *kvbuf;          // (2, N, D)   rebuild: (H, DK, nc) keys transposed + one head's values;
                           //             else one head's keys/values widened to f32 (+ slack)
    CcCell **cells;        // (max_batch_cells) cells of the chunk being processed
    const char **kv_blocks; // (max_batch_cells, F, L) the step's KV blocks, in stream order
    CcGemmStream stream;   ///< kv_blocks, asked for while the dense kernels run
    int sub_cells, n_ready; ///< current-token sub-batch size and cells of this chunk
    int *rows_of;          // (max_batch_cells) first row of each cell in a batch
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
    CcHparams hp;          ///< shapes cells are laid out for
    CcEngineSettings s;
    uint32_t gen;          ///< bumped by set_model: caches built before are stale
    int R;                 ///< ring length in steps
    double *pe_div;        // (D/2) 10000^(2i/D), the PE's divisors
    KvConvert cv;          ///< 16-bit conversion kernels for this CPU
    DenseW dw;             ///< m's dense weights, packed
    int kblk;              ///< keys in the blocked layout, AVX-512 DK = 16 kernels (see
                           ///< kblock_width); else plain (DK, N) and the portable kernels
    size_t kv_elem;        ///< bytes per KV element
    int n_threads;
    Workspace *ws;         // (n_threads)
    pthread_t *threads;    // (n_threads - 1)
    Job *jobs;             // (n_threads)
    struct WorkerArg {
        CcEngine *e;
        int idx;
    } *args;               // (n_threads)
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    uint64_t round;
    int pending, quit, failed;
    CcCell **list;         ///< cells of the current step, validated
    int list_cap;
    uint64_t batch_mark;
    CcEngineStats stats;
};

struct CcCell {
    const CcEngine *e;
    int F, R, N, L, H, DK, HZ;  ///< shapes this cell was laid out for
    int64_t p0;            ///< first step of the sequence, -1 empty
    int64_t last;          ///< newest step, -1 empty
    int64_t cache_e;       ///< e the caches were built for; -1 none
    uint32_t cache_gen;
    int n_cached;
    uint64_t mark;         ///< batch mark: detects a cell given twice in one step
    int fc_valid;
    int64_t fc_step;
    float *ring;           // (R, F)  row p % R holds step p
    float *mu, *sigma;     // (F)
    void *kv;              // (F, L, 2, H, N, DK) of kv_type
    float *y;              // (F, 2HZ)
    float *att;            // (F, L, H, N+1) if keep_attention, else NULL
    void *mem;
};

void cc_engine_default_settings(CcEngineSettings *s)
{
    memset(s, 0, sizeof *s);
    s->n_threads = 1;
    s->kv_type = CC_KV_F32;
    s->max_batch_cells = 512;
}

static int ring_len(const CcHparams *hp)
{
    /* Spec: max(N·P + P, M). An off-boundary rebuild (restore, model swap, no-cache) needs
     * the M values up to e while t may be P-1 steps past e, hence M + P - 1. */
    int a = hp->n_patches * hp->patch_len + hp->patch_len, b = hp->norm_window + hp->patch_len - 1;
    return a > b ? a : b;
}

static void ws_free(Workspace *w)
{
    free(w->x);
    free(w->z);
    free(w->qkv);
    free(w->a);
    free(w->h);
    free(w->y);
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
    /* one token's weights for every head; slack for whole 16-lane blocks */
    w->scores = malloc(((size_t)hp->n_heads * (hp->n_patches + 1) + hp->n_patches + 64) *
                       sizeof(float));
    /* keys transposed for every head, (H, DK, N), or one head's keys and values widened;
     * slack for whole 16-token blocks */
    w->kvbuf = calloc(2 * (size_t)hp->n_patches * D + 64, sizeof(float));
    w->tau = malloc((size_t)hp->n_patches * 4 * sizeof(float));
    w->cells = malloc((size_t)max_cells * sizeof(CcCell *));
    w->kv_blocks = malloc((size_t)max_cells * F * hp->n_layers * sizeof(char *));
    w->rows_of = malloc(((size_t)max_cells + 1) * sizeof(int));
    if (!w->x || !w->z || !w->qkv || !w->a || !w->h || !w->y || !w->pe || !w->scores ||
        !w->kvbuf || !w->tau || !w->cells || !w->kv_blocks || !w->rows_of) {
        ws_free(w);
        return -ENOMEM;
    }
    return 0;
}

/* ---- KV element access --------------------------------------------------------------- */

/* 16-bit conversions of whole rows. A table of function pointers starting with the C
 * versions (dav1d style); cc_engine_open switches to F16C/AVX-512 ones when the CPU has
 * them. bf16 needs no special instructions: a shift, which the compiler vectorises. */

static void f16_load_c(float *dst, const uint16_t *src, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = cc_f16_to_f32(src[i]);
}

static void f16_store_c(uint16_t *dst, const float *src, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = cc_f32_to_f16(src[i]);
}

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static void f16_load_f16c(float *dst, const uint16_t *src,
                                                              int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    if (i < n) {
        uint16_t h[8] = {0};
        float tmp[8];
        memcpy(h, src + i, (size_t)(n - i) * sizeof(uint16_t));
        _mm256_storeu_ps(tmp, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
        memcpy(dst + i, tmp, (size_t)(n - i) * sizeof(float));
    }
}

/* The blocked key layout of the AVX-512 path (DK = 16): a head's keys for cap tokens are
 * blocks of 16 tokens, block b holding (16 dims, w_b tokens) with w_b = 16 for full
 * blocks and cap mod 16 for the tail; dim c of token j is at 256·b + c·w_b + j mod 16.
 * Rows of full blocks are whole aligned vectors (rows of a plain (16, N) transpose start
 * at 4N-byte offsets, so nearly every 16-lane load of them split a cache line), and the
 * layout needs no more memory than the plain one. */
static inline int kblock_width(int cap, int b) { return 16 * (b + 1) <= cap ? 16 : cap - 16 * b; }

/* dst (16, 16) = the transpose of 16 rows of 16 floats strided by ld: a rebuild's full
 * 16-token key block, in registers (unpack, then 128- and 256-bit lane shuffles). */
__attribute__((target("avx512f"))) static void transpose16(float *restrict dst,
                                                          const float *restrict src, size_t ld)
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(src + (size_t)i * ld);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
    }
    for (int i = 0; i < 16; i++)
        _mm512_storeu_ps(dst + 16 * i, r[i]);
}

/* exp on 16 lanes: cc_expf_fast's range reduction and polynomial, 2^k by vscalefps. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 exp16(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, k);
}

/* 16 elements of a KV row as floats; T is a constant at every call site. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 load16(int T, const void *p,
                                                                            size_t i)
{
    if (T == CC_KV_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    if (T == CC_KV_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))),
            16));
    return _mm512_loadu_ps((const float *)p + i);
}

/* DK = 16 attention of one token for G heads at once, everything in zmm registers: the
 * query of head g against n cached tokens plus itself. n + 1 ≤ 16·NB scores per head in NB
 * vectors, token n (the query's own key) in the lane after the last cached one; the masks
 * depend only on n, so all heads share them. One head alone is a chain of dependent steps
 * (scores, max, exp, sum, weighted sum: ~200 cycles of latency for ~100 instructions);
 * G heads interleaved fill those cycles with independent work. The weighted sum runs on
 * the unnormalised exponentials and is scaled by 1/sum at the end, so the sum and the
 * division are off the critical path.
 *
 * Head g reads keys Kt + g·ksh in the blocked layout for ldk tokens (see kblock_width)
 * and values V + g·vsh, rows strided by ldv, both of element type T, and writes out + 16g
 * and its n + 1 weights to w + g·ldw. In the tail block it reads whole 16-lane rows, up
 * to 16 elements past the block (the caches' next block or the scratch's slack); lanes
 * past n are masked out before the softmax, so whatever they held never matters. */
__attribute__((target("avx512f"), always_inline)) static inline void
attend16_body(const int G, const int NB, const int T, float *restrict out, float *restrict w,
              int ldw, const float *restrict q, const void *restrict Kt, size_t ksh, int ldk,
              const void *restrict V, size_t vsh, int ldv, const float *restrict k_self,
              const float *restrict v_self, int n, float scale)
{
    __m512 sc[4][4];
    __mmask16 m[4];
    float mx[4], inv[4];
    const __m512 ninf = _mm512_set1_ps(-INFINITY), vs = _mm512_set1_ps(scale);
    for (int b = 0; b < NB; b++) {
        int lanes = n + 1 - 16 * b;
        lanes = lanes < 0 ? 0 : lanes > 16 ? 16 : lanes;
        m[b] = (__mmask16)((1u << lanes) - 1u);
    }
    for (int g = 0; g < G; g++)
        for (int b = 0; b < NB; b++)
            sc[g][b] = _mm512_setzero_ps();
    for (int b = 0; b < NB; b++) {
        if (16 * b >= n)
            break;
        __m512 acc[4][2];
        const int wb = kblock_width(ldk, b);
        const size_t kb = (size_t)b * 256;
        for (int g = 0; g < G; g++)
            acc[g][0] = acc[g][1] = _mm512_setzero_ps();
        for (int c = 0; c < 16; c += 2)
            for (int g = 0; g < G; g++) {
                const void *kt = (const char *)Kt + g * ksh * (T == CC_KV_F32 ? 4 : 2);
                acc[g][0] = _mm512_fmadd_ps(_mm512_set1_ps(q[16 * g + c]),
                                            load16(T, kt, kb + (size_t)c * wb), acc[g][0]);
                acc[g][1] = _mm512_fmadd_ps(_mm512_set1_ps(q[16 * g + c + 1]),
                                            load16(T, kt, kb + (size_t)(c + 1) * wb), acc[g][1]);
            }
        for (int g = 0; g < G; g++)
            sc[g][b] = _mm512_mul_ps(_mm512_add_ps(acc[g][0], acc[g][1]), vs);
    }
    for (int g = 0; g < G; g++) {
        float self = _mm512_reduce_add_ps(
            _mm512_mul_ps(_mm512_loadu_ps(q + 16 * g), _mm512_loadu_ps(k_self + 16 * g)));
        int b = n / 16;
        sc[g][b] = _mm512_mask_mov_ps(sc[g][b], (__mmask16)(1u << (n - 16 * b)),
                                      _mm512_set1_ps(self * scale));
    }
    for (int g = 0; g < G; g++) {
        __m512 v = _mm512_mask_mov_ps(ninf, m[0], sc[g][0]);
        for (int b = 1; b < NB; b++)
            v = _mm512_max_ps(v, _mm512_mask_mov_ps(ninf, m[b], sc[g][b]));
        mx[g] = _mm512_reduce_max_ps(v);
    }
    /* the exponentials go through a local buffer with whole-vector stores: a masked store
     * does not forward to the broadcast loads that follow, which then wait for it to
     * reach L1 (tens of cycles per head) */
    float ex[4][64] __attribute__((aligned(64)));
    for (int g = 0; g < G; g++) {
        __m512 sum = _mm512_setzero_ps();
        for (int b = 0; b < NB; b++) {
            sc[g][b] = _mm512_maskz_mov_ps(m[b], exp16(_mm512_sub_ps(sc[g][b], _mm512_set1_ps(mx[g]))));
            sum = _mm512_add_ps(sum, sc[g][b]);
            _mm512_store_ps(ex[g] + 16 * b, sc[g][b]);
        }
        inv[g] = 1.0f / _mm512_reduce_add_ps(sum);
    }
    __m512 o[4][2];
    for (int g = 0; g < G; g++) {
        o[g][0] = _mm512_mul_ps(_mm512_set1_ps(ex[g][n]), _mm512_loadu_ps(v_self + 16 * g));
        o[g][1] = _mm512_setzero_ps();
    }
    int j = 0;
    for (; j + 1 < n; j += 2)
        for (int g = 0; g < G; g++) {
            const void *vg = (const char *)V + g * vsh * (T == CC_KV_F32 ? 4 : 2);
            o[g][0] = _mm512_fmadd_ps(_mm512_set1_ps(ex[g][j]), load16(T, vg, (size_t)j * ldv), o[g][0]);
            o[g][1] = _mm512_fmadd_ps(_mm512_set1_ps(ex[g][j + 1]),
                                      load16(T, vg, (size_t)(j + 1) * ldv), o[g][1]);
        }
    if (j < n)
        for (int g = 0; g < G; g++) {
            const void *vg = (const char *)V + g * vsh * (T == CC_KV_F32 ? 4 : 2);
            o[g][0] = _mm512_fmadd_ps(_mm512_set1_ps(ex[g][j]), load16(T, vg, (size_t)j * ldv),
                                      o[g][0]);
        }
    for (int g = 0; g < G; g++) {
        const __m512 iv = _mm512_set1_ps(inv[g]);
        _mm512_storeu_ps(out + 16 * g, _mm512_mul_ps(_mm512_add_ps(o[g][0], o[g][1]), iv));
        for (int b = 0; b < NB; b++)
            _mm512_mask_storeu_ps(w + (size_t)g * ldw + 16 * b, m[b], _mm512_mul_ps(sc[g][b], iv));
    }
}

/* Instances per element type: heads in groups of 4, then one at a time; the number of
 * score vectors by n. */
#define ATTEND16_REG(NAME, T)                                                                 \
    __attribute__((target("avx512f"))) static void NAME(                                     \
        float *restrict out, float *restrict w, int ldw, const float *restrict q,             \
        const void *restrict Kt, size_t ksh, int ldk, const void *restrict V, size_t vsh,     \
        int ldv, const float *restrict k_self, const float *restrict v_self, int n, int H,    \
        float scale)                                                                          \
    {                                                                                         \
        const size_t el = T == CC_KV_F32 ? 4 : 2;                                             \
        for (int h = 0; h < H;) {                                                             \
            const int G = H - h >= 4 ? 4 : 1;                                                 \
            float *o = out + 16 * h, *wh = w + (size_t)h * ldw;                               \
            const float *qh = q + 16 * h, *ks = k_self + 16 * h, *vs = v_self + 16 * h;       \
            const void *kt = (const char *)Kt + h * ksh * el, *vh = (const char *)V + h * vsh * el; \
            if (G == 4 && n < 16)                                                             \
                attend16_body(4, 1, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n, scale); \
            else if (G == 4 && n < 32)                                                        \
                attend16_body(4, 2, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n, scale); \
            else if (G == 4)                                                                  \
                attend16_body(4, 4, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n, scale); \
            else if (n < 16)                                                                  \
                attend16_body(1, 1, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n, scale); \
            else if (n < 32)                                                                  \
                attend16_body(1, 2, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n, scale); \
            else                                                                              \
                attend16_body(1, 4, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n, scale); \
            h += G;                                                                           \
        }                                                                                     \
    }
ATTEND16_REG(attend16_f32_avx512, CC_KV_F32)
ATTEND16_REG(attend16_f16_avx512, CC_KV_F16)
ATTEND16_REG(attend16_bf16_avx512, CC_KV_BF16)

__attribute__((target("avx,f16c"))) static void f16_store_f16c(uint16_t *dst, const float *src,
                                                               int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) { /* the tail through a padded block: same instruction, same rounding */
        float tmp[8] = {0};
        uint16_t h[8];
        memcpy(tmp, src + i, (size_t)(n - i) * sizeof(float));
        _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(_mm256_loadu_ps(tmp), _MM_FROUND_TO_NEAREST_INT));
        memcpy(dst + i, h, (size_t)(n - i) * sizeof(uint16_t));
    }
}
#endif

static KvConvert kv_convert_select(void)
{
    KvConvert k = {f16_load_c, f16_store_c, {NULL, NULL, NULL}};
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) {
        k.f16_load = f16_load_f16c;
        k.f16_store = f16_store_f16c;
    }
    if (__builtin_cpu_supports("avx512f")) {
        k.attend16[CC_KV_F32] = attend16_f32_avx512;
        k.attend16[CC_KV_F16] = attend16_f16_avx512;
        k.attend16[CC_KV_BF16] = attend16_bf16_avx512;
    }
#endif
    return k;
}

static inline void bf16_load(float *restrict dst, const uint16_t *restrict src, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

/* Round to nearest even, as cc_f32_to_bf16, branch-free so it vectorises; NaN stays NaN. */
static inline void bf16_store(uint16_t *restrict dst, const float *restrict src, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
        dst[i] = (uint16_t)(nan ? (u >> 16) | 0x40 : r);
    }
}

static inline void kv_store(const KvConvert *cv, void *dst, const float *src, int n,
                            enum CcKvType t)
{
    if (t == CC_KV_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else if (t == CC_KV_F16)
        cv->f16_store(dst, src, n);
    else
        bf16_store(dst, src, n);
}

static inline void kv_load(const KvConvert *cv, float *dst, const void *src, int n,
                           enum CcKvType t)
{
    if (t == CC_KV_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else if (t == CC_KV_F16)
        cv->f16_load(dst, src, n);
    else
        bf16_load(dst, src, n);
}

/* Channel f, layer l, head h: which = 0 → keys transposed (DK, N), so the scores of one
 * query vectorise over tokens (blocked by 16 tokens if e->kblk, see kblock_width); which = 1 → values (N, DK). Both N·DK elements. */
static inline void *kv_at(const CcCell *c, size_t elem, int f, int l, int which, int h)
{
    size_t idx = ((((size_t)f * c->L + l) * 2 + which) * c->H + h) * (size_t)c->N * c->DK;
    return (char *)c->kv + idx * elem;
}

/* Asks for one head's keys and values (2·N·DK elements) ahead of use. The caches of a
 * large batch live in DRAM and each head's block is only ~2.7 KB, too short for the
 * hardware prefetcher to ramp up: fetching the next head's block while this one is
 * computed saves ~10% of a step at 1024 cells. rw = 1 when it will be written. */
static inline void prefetch_head(const CcCell *c, size_t elem, int f, int l, int h, int rw)
{
    const char *k = kv_at(c, elem, f, l, 0, h), *v = kv_at(c, elem, f, l, 1, h);
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

/* ---- attention kernels ----------------------------------------------------------------- */

/* One query against n cached tokens plus itself. Kt is the head's keys transposed,
 * (DK, ldk) with token j in column j, so the scores vectorise over tokens; V is (n, DK) so
 * the weighted sum vectorises over channels. out (DK); w (n+1) receives the weights. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
attend_cached(float *restrict out, float *restrict w, const float *restrict q,
              const float *restrict Kt, int ldk, const float *restrict V,
              const float *restrict k_self, const float *restrict v_self, int n, int DK,
              float scale)
{
    float self = 0;
    for (int j = 0; j < n; j++)
        w[j] = 0;
    for (int c = 0; c < DK; c++) {
        const float qc = q[c], *row = Kt + (size_t)c * ldk;
        for (int j = 0; j < n; j++)
            w[j] += qc * row[j];
        self += qc * k_self[c];
    }
    for (int j = 0; j < n; j++)
        w[j] *= scale;
    w[n] = self * scale;
    cc_softmax_inline(w, n + 1);
    for (int c = 0; c < DK; c++)
        out[c] = w[n] * v_self[c];
    for (int j = 0; j < n; j++) {
        const float wj = w[j], *v = V + (size_t)j * DK;
        for (int c = 0; c < DK; c++)
            out[c] += wj * v[c];
    }
}

/* The same for DK = 16 (the default shape) with 16-lane vectors held in registers: scores
 * for 16 tokens per FMA chain, the weighted sum in two accumulators. It reads whole
 * 16-token blocks of Kt: columns past n in the last block are garbage that only lands in
 * lanes that are discarded, and the reads stay inside the allocation because every key
 * block is followed by its value block (N·DK ≥ 16 floats) and kvbuf has 16 floats of slack. */
typedef float v16f __attribute__((vector_size(64), aligned(4)));

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
attend_cached16(float *restrict out, float *restrict w, const float *restrict q,
                const float *restrict Kt, int ldk, const float *restrict V,
                const float *restrict k_self, const float *restrict v_self, int n, float scale)
{
    for (int j0 = 0; j0 < n; j0 += 16) {
        v16f acc = {0};
        for (int c = 0; c < 16; c++)
            acc += q[c] * *(const v16f *)(Kt + (size_t)c * ldk + j0);
        acc *= scale;
        if (n - j0 >= 16)
            *(v16f *)(w + j0) = acc;
        else
            for (int j = 0; j < n - j0; j++)
                w[j0 + j] = acc[j];
    }
    w[n] = cc_dot16(q, k_self) * scale;
    cc_softmax_inline(w, n + 1);
    v16f o0 = w[n] * *(const v16f *)v_self, o1 = {0};
    int j = 0;
    for (; j + 1 < n; j += 2) {
        o0 += w[j] * *(const v16f *)(V + (size_t)j * 16);
        o1 += w[j + 1] * *(const v16f *)(V + (size_t)(j + 1) * 16);
    }
    if (j < n)
        o0 += w[j] * *(const v16f *)(V + (size_t)j * 16);
    *(v16f *)out = o0 + o1;
}

/* Causal self-attention of one channel's n cached tokens for one head: token i attends to
 * tokens 0..i. q/k/v rows are strided by ld (the qkv matrix); Kt (DK, n) and s (n) are
 * scratch. out rows strided by ldo. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
attend_causal(float *restrict out, int ldo, const float *restrict q, const float *restrict k,
              const float *restrict v, int ld, int n, int DK, float scale, float *restrict Kt,
              float *restrict s)
{
    for (int j = 0; j < n; j++)
        for (int c = 0; c < DK; c++)
            Kt[(size_t)c * n + j] = k[(size_t)j * ld + c];
    for (int i = 0; i < n; i++) {
        const float *qi = q + (size_t)i * ld;
        for (int j = 0; j <= i; j++)
            s[j] = 0;
        for (int c = 0; c < DK; c++) {
            const float qc = qi[c], *row = Kt + (size_t)c * n;
            for (int j = 0; j <= i; j++)
                s[j] += qc * row[j];
        }
        for (int j = 0; j <= i; j++)
            s[j] *= scale;
        cc_softmax_inline(s, i + 1);
        float *o = out + (size_t)i * ldo;
        for (int c = 0; c < DK; c++)
            o[c] = 0;
        for (int j = 0; j <= i; j++) {
            const float sj = s[j], *vj = v + (size_t)j * ld;
            for (int c = 0; c < DK; c++)
                o[c] += sj * vj[c];
        }
    }
}

/* attend_causal for DK = 16 with 16-lane vectors (see attend_cached16). Kt needs 16
 * floats of slack past (16, n). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
attend_causal16(float *restrict out, int ldo, const float *restrict q, const float *restrict k,
                const float *restrict v, int ld, int n, float scale, float *restrict Kt,
                float *restrict s)
{
    for (int j = 0; j < n; j++)
        for (int c = 0; c < 16; c++)
            Kt[(size_t)c * n + j] = k[(size_t)j * ld + c];
    for (int i = 0; i < n; i++) {
        const float *qi = q + (size_t)i * ld;
        for (int j0 = 0; j0 <= i; j0 += 16) {
            v16f acc = {0};
            for (int c = 0; c < 16; c++)
                acc += qi[c] * *(const v16f *)(Kt + (size_t)c * n + j0);
            *(v16f *)(s + j0) = acc * scale; /* s has 16 floats of slack */
        }
        cc_softmax_inline(s, i + 1);
        v16f o0 = {0}, o1 = {0};
        int j = 0;
        for (; j + 1 <= i; j += 2) {
            o0 += s[j] * *(const v16f *)(v + (size_t)j * ld);
            o1 += s[j + 1] * *(const v16f *)(v + (size_t)(j + 1) * ld);
        }
        if (j <= i)
            o0 += s[j] * *(const v16f *)(v + (size_t)j * ld);
        *(v16f *)(out + (size_t)i * ldo) = o0 + o1;
    }
}

/* ---- cells ----------------------------------------------------------------------------- */

static size_t cell_mem_bytes(const CcEngine *e)
{
    const CcHparams *hp = &e->hp;
    size_t F = hp->n_features, D = hp->d_model;
    size_t b = (size_t)e->R * F * sizeof(float) + 2 * F * sizeof(float);
    b += F * hp->n_layers * 2 * (size_t)hp->n_patches * D * e->kv_elem;
    b += F * 2 * (size_t)hp->horizon * sizeof(float);
    if (e->s.keep_attention)
        b += F * hp->n_layers * hp->n_heads * ((size_t)hp->n_patches + 1) * sizeof(float);
    return b + 64 * 6; /* alignment slack */
}

static void *carve(char **p, size_t bytes)
{
    void *r = *p;
    *p += (bytes + 63) & ~(size_t)63;
    return r;
}

static int cell_layout(CcCell *c, const CcEngine *e)
{
    const CcHparams *hp = &e->hp;
    size_t F = hp->n_features, D = hp->d_model;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, cell_mem_bytes(e)))
        return -ENOMEM;
    memset(mem, 0, cell_mem_bytes(e)); /* the attention kernels read whole 16-lane blocks */
    char *p = mem;
    c->e = e;
    c->F = hp->n_features;
    c->R = e->R;
    c->N = hp->n_patches;
    c->L = hp->n_layers;
    c->H = hp->n_heads;
    c->DK = hp->d_model / hp->n_heads;
    c->HZ = hp->horizon;
    c->mem = mem;
    c->ring = carve(&p, (size_t)e->R * F * sizeof(float));
    c->mu = carve(&p, F * sizeof(float));
    c->sigma = carve(&p, F * sizeof(float));
    c->kv = carve(&p, F * hp->n_layers * 2 * (size_t)hp->n_patches * D * e->kv_elem);
    c->y = carve(&p, F * 2 * (size_t)hp->horizon * sizeof(float));
    c->att = e->s.keep_attention
                 ? carve(&p, F * hp->n_layers * hp->n_heads * ((size_t)hp->n_patches + 1) *
                                 sizeof(float))
                 : NULL;
    return 0;
}

int cc_cell_open(CcCell **out, const CcEngine *e)
{
    CcCell *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    if (cell_layout(c, e) < 0) {
        free(c);
        return -ENOMEM;
    }
    cc_cell_reset(c);
    *out = c;
    return 0;
}

void cc_cell_close(CcCell **pc)
{
    if (!pc || !*pc)
        return;
    free((*pc)->mem);
    free(*pc);
    *pc = NULL;
}

void cc_cell_reset(CcCell *c)
{
    c->p0 = c->last = c->cache_e = -1;
    c->n_cached = 0;
    c->fc_valid = 0;
    c->fc_step = -1;
}

int cc_cell_rebind(CcCell *c, const CcEngine *e)
{
    if (c->F != e->hp.n_features)
        return -EINVAL;
    CcCell tmp = *c;
    int ret = cell_layout(c, e);
    if (ret < 0)
        return ret;
    /* keep the newest min(R_old, R_new) steps */
    int64_t first = tmp.last < 0 ? 0 : tmp.last - tmp.R + 1;
    if (first < tmp.p0)
        first = tmp.p0;
    if (tmp.last >= 0 && tmp.last - first + 1 > c->R)
        first = tmp.last - c->R + 1;
    for (int64_t p = first; tmp.last >= 0 && p <= tmp.last; p++)
        memcpy(&c->ring[(size_t)(p % c->R) * c->F], &tmp.ring[(size_t)(p % tmp.R) * tmp.F],
               (size_t)c->F * sizeof(float));
    c->p0 = tmp.p0;
    c->last = tmp.last;
    /* a sequence start older than what is kept is fine only if the window is full */
    if (c->last >= 0 && first > c->p0 && c->last - first + 1 < c->R)
        c->p0 = first;
    c->cache_e = -1;
    c->fc_valid = 0;
    free(tmp.mem);
    return 0;
}

void cc_cell_span(const CcCell *c, int64_t *first, int64_t *last)
{
    if (c->last < 0) {
        *first = *last = -1;
        return;
    }
    int64_t f = c->last - c->R + 1;
    *first = f > c->p0 ? f : c->p0;
    *last = c->last;
}

int64_t cc_cell_seq_start(const CcCell *c) { return c->p0; }

int cc_cell_history(const CcCell *c, int64_t from, int count, float *out)
{
    int64_t first, last;
    cc_cell_span(c, &first, &last);
    if (count < 0 || last < 0 || from < first || from + count - 1 > last)
        return -ERANGE;
    for (int i = 0; i < count; i++)
        memcpy(out + (size_t)i * c->F, &c->ring[(size_t)((from + i) % c->R) * c->F],
               (size_t)c->F * sizeof(float));
    return 0;
}

int cc_cell_restore(CcCell *c, int64_t seq_start, int64_t first, int count, const float *values)
{
    if (count <= 0 || first < 0 || seq_start < 0 || seq_start > first)
        return -EINVAL;
    for (size_t i = 0; i < (size_t)count * c->F; i++)
        if (!isfinite(values[i]))
            return -ERANGE;
    /* values before `first` are unknown: only acceptable when the ring is full anyway */
    if (seq_start < first && count < c->R)
        return -EINVAL;
    cc_cell_reset(c);
    int skip = count > c->R ? count - c->R : 0;
    for (int i = skip; i < count; i++)
        memcpy(&c->ring[(size_t)((first + i) % c->R) * c->F], values + (size_t)i * c->F,
               (size_t)c->F * sizeof(float));
    c->p0 = seq_start;
    c->last = first + count - 1;
    return 0;
}

/* ---- engine lifecycle ------------------------------------------------------------------ */

static void *worker_main(void *arg);


size_t cc_engine_cell_bytes(const CcEngine *e) { return sizeof(CcCell) + cell_mem_bytes(e); }

int cc_engine_ring_steps(const CcEngine *e) { return e->R; }

size_t cc_engine_kv_bytes_per_cell(const CcEngine *e)
{
    const CcHparams *hp = &e->hp;
    return (size_t)hp->n_features * hp->n_layers * 2 * hp->n_patches * hp->d_model * e->kv_elem;
}

const CcModel *cc_engine_model(const CcEngine *e) { return e->m; }

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
        if ((ret = cc_gemm_open(&d->qkv[l], p->qkv_w + (size_t)l * 3 * D * D, 3 * D, D, blas)) < 0 ||
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
    return e->hp.d_model / e->hp.n_heads == 16 && e->hp.n_patches <= ATTEND16_MAX_N &&
           e->cv.attend16[CC_KV_F32] != NULL;
}

static int same_shapes(const CcHparams *a, const CcHparams *b)
{
    return a->n_features == b->n_features && a->patch_len == b->patch_len &&
           a->n_patches == b->n_patches && a->norm_window == b->norm_window &&
           a->d_model == b->d_model && a->n_heads == b->n_heads && a->n_layers == b->n_layers &&
           a->horizon == b->horizon;
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
    e->R = ring_len(&m->hp);
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
    e->R = ring_len(&m->hp);
    e->kv_elem = s->kv_type == CC_KV_F32 ? 4 : 2;
    e->cv = kv_convert_select();
    e->kblk = use_kblk(e);
    e->n_threads = s->n_threads ? s->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (e->n_threads < 1)
        e->n_threads = 1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv_start, NULL);
    pthread_cond_init(&e->cv_done, NULL);
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
    if (e->n_threads > 1) {
        e->threads = calloc((size_t)e->n_threads - 1, sizeof *e->threads);
        e->args = calloc((size_t)e->n_threads, sizeof *e->args);
        if (!e->threads || !e->args)
            goto error;
        for (int i = 1; i < e->n_threads; i++) {
            e->args[i].e = e;
            e->args[i].idx = i;
            if (pthread_create(&e->threads[i - 1], NULL, worker_main, &e->args[i])) {
                e->n_threads = i; /* only i-1 workers exist: close joins those */
                ret = -EAGAIN;
                goto error;
            }
        }
    }
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
    if (e->threads) {
        pthread_mutex_lock(&e->mu);
        e->quit = 1;
        pthread_cond_broadcast(&e->cv_start);
        pthread_mutex_unlock(&e->mu);
        for (int i = 1; i < e->n_threads; i++)
            pthread_join(e->threads[i - 1], NULL);
        free(e->threads);
    }
    if (e->ws)
        for (int i = 0; i < e->n_threads; i++)
            ws_free(&e->ws[i]);
    free(e->ws);
    free(e->jobs);
    free(e->args);
    free(e->pe_div);
    dense_free(&e->dw);
    free(e->list);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv_start);
    pthread_cond_destroy(&e->cv_done);
    free(e);
    *pe = NULL;
}

void cc_engine_stats(const CcEngine *e, CcEngineStats *out) { *out = e->stats; }

void cc_engine_reset_stats(CcEngine *e) { memset(&e->stats, 0, sizeof e->stats); }

/* ---- the batched computation ----------------------------------------------------------- */

static inline int64_t boundary_of(int64_t t, int P) { return ((t + 1) / P) * P - 1; }

/* Copies channel f of steps [from, from+n) out of the ring, normalised: one modulo per
 * call, not per element. */
static void ring_read_norm(float *dst, const CcCell *c, int f, int64_t from, int n, float mu,
                           float inv)
{
    int r = (int)(from % c->R), F = c->F;
    for (int j = 0; j < n; j++) {
        dst[j] = (c->ring[(size_t)r * F + f] - mu) * inv;
        if (++r == c->R)
            r = 0;
    }
}

/* Mean and population sd (double) of every channel over steps [lo, hi] of the ring, in
 * one pass over its rows per moment (the ring is (R, F): one channel alone would stride
 * through it). Each channel's sums run in step order, as a per-channel loop would. */
static void ring_stats_all(const CcCell *c, int64_t lo, int64_t hi, float *mu, float *sigma)
{
    const int n = (int)(hi - lo + 1), r0 = (int)(lo % c->R), F = c->F;
    double s[CC_MAX_FEATURES] = {0}, ss[CC_MAX_FEATURES] = {0}, m[CC_MAX_FEATURES];
    for (int j = 0, r = r0; j < n; j++) {
        const float *row = &c->ring[(size_t)r * F];
        for (int f = 0; f < F; f++)
            s[f] += row[f];
        if (++r == c->R)
            r = 0;
    }
    for (int f = 0; f < F; f++)
        m[f] = s[f] / n;
    for (int j = 0, r = r0; j < n; j++) {
        const float *row = &c->ring[(size_t)r * F];
        for (int f = 0; f < F; f++) {
            double d = row[f] - m[f];
            ss[f] += d * d;
        }
        if (++r == c->R)
            r = 0;
    }
    for (int f = 0; f < F; f++) {
        mu[f] = (float)m[f];
        sigma[f] = (float)(sqrt(ss[f] / n) + 1e-5 * (1.0 + fabs(m[f])));
    }
}

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
        ring_stats_all(c, lo, e_, c->mu, c->sigma);
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
                ring_read_norm(x, c, f, q - P + 1, P, c->mu[f], 1.0f / c->sigma[f]);
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
            Attend16 reg = e->kblk ? e->cv.attend16[CC_KV_F32] : NULL;
            for (int f = 0; f < F; f++) {
                const float *q0 = &w->qkv[(size_t)(r0 + f * nc) * 3 * D]; /* token 0's q */
                float *o = &w->a[(size_t)(r0 + f * nc) * D];
                for (int h = 0; h < H; h++) {
                    prefetch_next_head(cells, ci, n, f, F, h, H, l, e->kv_elem, 1);
                    char *K = kv_at(c, e->kv_elem, f, l, 0, h), *V = kv_at(c, e->kv_elem, f, l, 1, h);
                    /* head h's keys transposed into its part of (H, DK, nc), blocked for
                     * nc tokens if kblk, then stored row by row in the cache's layout */
                    float *kt = w->kvbuf + (size_t)h * DK * nc;
                    float *vrows = w->kvbuf + (size_t)N * D; /* (nc, DK) after all heads' keys */
#if defined(__x86_64__) /* reg is non-NULL only there */
                    const int full = reg ? nc / 16 * 16 : 0; /* tokens in full blocks */
                    for (int b = 0; 16 * b < full; b++)
                        transpose16(kt + (size_t)b * 256, q0 + (size_t)16 * b * 3 * D + D + h * DK,
                                    (size_t)3 * D);
#else
                    const int full = 0;
#endif
                    for (int i = 0; i < nc; i++) {
                        const float *row = q0 + (size_t)i * 3 * D;
                        memcpy(vrows + (size_t)i * DK, row + 2 * D + h * DK, DK * sizeof(float));
                        if (i < full)
                            continue;
                        size_t at = reg ? (size_t)(i / 16) * 256 + i % 16 : (size_t)i;
                        int wb = reg ? kblock_width(nc, i / 16) : nc;
                        for (int cc = 0; cc < DK; cc++)
                            kt[at + (size_t)cc * wb] = row[D + h * DK + cc];
                    }
                    /* the cache's value rows are contiguous: one conversion call */
                    kv_store(&e->cv, V, vrows, nc * DK, e->s.kv_type);
                    if (reg)
                        for (int b = 0; 16 * b < nc; b++) {
                            int cnt = nc - 16 * b < 16 ? nc - 16 * b : 16;
                            int w_nc = kblock_width(nc, b), w_cap = kblock_width(c->N, b);
                            if (w_nc == w_cap) /* same block shape (always, once warm): one call */
                                kv_store(&e->cv, K + (size_t)b * 256 * e->kv_elem,
                                         kt + (size_t)b * 256, DK * w_nc, e->s.kv_type);
                            else
                                for (int cc = 0; cc < DK; cc++)
                                    kv_store(&e->cv,
                                             K + ((size_t)b * 256 + (size_t)cc * w_cap) * e->kv_elem,
                                             kt + (size_t)b * 256 + (size_t)cc * w_nc, cnt,
                                             e->s.kv_type);
                        }
                    else
                        for (int cc = 0; cc < DK; cc++)
                            kv_store(&e->cv, K + (size_t)cc * c->N * e->kv_elem, kt + (size_t)cc * nc,
                                     nc, e->s.kv_type);
                    if (last || reg)
                        continue;
                    if (DK == 16)
                        attend_causal16(o + h * DK, D, q0 + h * DK, q0 + D + h * DK,
                                        q0 + 2 * D + h * DK, 3 * D, nc, scale, kt, w->scores);
                    else
                        attend_causal(o + h * DK, D, q0 + h * DK, q0 + D + h * DK,
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
                    w->kv_blocks[k++] = kv_at(cells[ci], e->kv_elem, f, l, 0, 0);
    }
    w->n_ready = n;
    w->stream.blocks = w->kv_blocks;
    w->stream.block_lines = (2 * (size_t)e->hp.d_model * e->hp.n_patches * e->kv_elem + 63) / 64;
    w->stream.next = w->stream.limit = 0;
    /* f32 caches are twice the lines for the same FMAs: two per iteration keeps the
     * stream level with the dense work (measured ~5% faster at 1024 cells; with 16-bit
     * caches one is enough) */
    w->stream.per_iter = e->kv_elem == 4 ? 2 : 1;
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
            ring_read_norm(x, c, f, t - P + 1, P, c->mu[f], 1.0f / c->sigma[f]);
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
            Attend16 direct = e->kblk ? e->cv.attend16[e->s.kv_type] : NULL;
            for (int f = 0; f < F; f++) {
                const float *row = &w->qkv[(size_t)(ci * F + f) * 3 * D];
                if (direct) { /* all heads of the channel at once */
                    /* heads 1.. of this channel and head 0 of the next: measured best
                     * (the whole next channel, or the one after, ahead was slower) */
                    for (int hh = 0; hh < H; hh++)
                        prefetch_next_head(cells, ci, n, f, F, hh, H, l, e->kv_elem, 0);
                    float *wts = c->att ? &c->att[((size_t)f * L + l) * H * (c->N + 1)]
                                        : w->scores;
                    direct(&w->a[(size_t)(ci * F + f) * D], wts, c->N + 1, row,
                           kv_at(c, e->kv_elem, f, l, 0, 0), (size_t)c->N * DK, c->N,
                           kv_at(c, e->kv_elem, f, l, 1, 0), (size_t)c->N * DK, DK, row + D,
                           row + 2 * D, nc, H, scale);
                    continue;
                }
                for (int h = 0; h < H; h++) {
                    prefetch_next_head(cells, ci, n, f, F, h, H, l, e->kv_elem, 0);
                    const void *K = kv_at(c, e->kv_elem, f, l, 0, h);
                    const void *V = kv_at(c, e->kv_elem, f, l, 1, h);
                    float *wts = c->att ? &c->att[(((size_t)f * L + l) * H + h) * (c->N + 1)]
                                        : w->scores;
                    int ldk = c->N;
                    float *o = &w->a[(size_t)(ci * F + f) * D + h * DK];
                    if (e->s.kv_type != CC_KV_F32) { /* widen the n valid columns/rows */
                        for (int cc = 0; cc < DK; cc++)
                            kv_load(&e->cv, w->kvbuf + (size_t)cc * nc,
                                    (const char *)K + (size_t)cc * c->N * e->kv_elem, nc,
                                    e->s.kv_type);
                        kv_load(&e->cv, w->kvbuf + (size_t)nc * DK, V, nc * DK, e->s.kv_type);
                        K = w->kvbuf;
                        V = w->kvbuf + (size_t)nc * DK;
                        ldk = nc;
                    }
                    if (DK == 16)
                        attend_cached16(o, wts, row + h * DK, K, ldk, V, row + D + h * DK,
                                        row + 2 * D + h * DK, nc, scale);
                    else
                        attend_cached(o, wts, row + h * DK, K, ldk, V, row + D + h * DK,
                                      row + 2 * D + h * DK, nc, DK, scale);
                }
            }
        }
        ta += cc_now_ns() - s0;
        stream_allow(e, w, sub, l + 1); /* the attention after (sub, l) is next */
        block_tail(e, l, w, rows, &w->stream);
    }
    cc_gemm(w->y, HZ2, w->z, D, e->dw.head, p->head_b, rows, CC_GEMM_STORE, &w->stream);
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
    const int reb_cells = REBUILD_TOKENS_MAX / (F * hp->n_patches) > 0
                              ? REBUILD_TOKENS_MAX / (F * hp->n_patches)
                              : 1;
    /* two groups of KV (sub-batch × one layer) in ~1.25 MB of L2, with the activations */
    const size_t group_cell = (size_t)F * 2 * hp->d_model * hp->n_patches * e->kv_elem;
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

static void *worker_main(void *arg)
{
    struct WorkerArg *a = arg;
    CcEngine *e = a->e;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->quit && e->round == seen)
            pthread_cond_wait(&e->cv_start, &e->mu);
        if (e->quit) {
            pthread_mutex_unlock(&e->mu);
            return NULL;
        }
        seen = e->round;
        Job job = e->jobs[a->idx];
        pthread_mutex_unlock(&e->mu);
        process(e, &e->ws[a->idx], job.cells, job.n);
        pthread_mutex_lock(&e->mu);
        if (--e->pending == 0)
            pthread_cond_signal(&e->cv_done);
        pthread_mutex_unlock(&e->mu);
    }
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
        else if (c->F != F || c->R != e->R || c->N != e->hp.n_patches || c->L != e->hp.n_layers ||
                 c->H != e->hp.n_heads || c->HZ != e->hp.horizon ||
                 c->DK != e->hp.d_model / e->hp.n_heads)
            st = -ESTALE;
        else if (in[i].values) {
            if (c->last >= 0 && in[i].step != c->last + 1)
                st = -EINVAL;
            for (int f = 0; f < F && !st; f++)
                if (!isfinite(in[i].values[f]))
                    st = -ERANGE;
        } else if (c->last < 0 || in[i].step != c->last)
            st = -EINVAL;
        if (status)
            status[i] = st;
        if (st)
            continue;
        c->mark = e->batch_mark;
        if (in[i].values) {
            if (c->last < 0)
                c->p0 = in[i].step;
            c->last = in[i].step;
            memcpy(&c->ring[(size_t)(c->last % c->R) * F], in[i].values, (size_t)F * sizeof(float));
        }
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
        pthread_mutex_lock(&e->mu);
        for (int i = 0; i < nt; i++) {
            int a = (int)((int64_t)count * i / nt), b = (int)((int64_t)count * (i + 1) / nt);
            e->jobs[i].cells = e->list + a;
            e->jobs[i].n = b - a;
        }
        for (int i = nt; i < e->n_threads; i++)
            e->jobs[i].n = 0;
        e->pending = e->n_threads - 1;
        e->round++;
        pthread_cond_broadcast(&e->cv_start);
        pthread_mutex_unlock(&e->mu);
        process(e, &e->ws[0], e->jobs[0].cells, e->jobs[0].n);
        pthread_mutex_lock(&e->mu);
        while (e->pending)
            pthread_cond_wait(&e->cv_done, &e->mu);
        pthread_mutex_unlock(&e->mu);
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

void cc_cell_forecast(const CcCell *c, CcForecast *out)
{
    out->valid = c->fc_valid && c->fc_step == c->last;
    out->step = c->last;
    out->n_features = c->F;
    out->horizon = c->HZ;
    out->y = c->y;
    out->mu = c->mu;
    out->sigma = c->sigma;
    out->seq_start = c->p0;
}

void cc_forecast_point(const CcForecast *fc, int f, int k, double *mean, double *sd)
{
    const float *y = &fc->y[((size_t)f * fc->horizon + k) * 2];
    *mean = (double)y[0] * fc->sigma[f] + fc->mu[f];
    *sd = exp((double)y[1]) * fc->sigma[f];
}

int cc_cell_attention(const CcCell *c, int f, float *weights, int64_t *token_end, int *n_tokens)
{
    if (!c->att)
        return -EINVAL;
    if (!c->fc_valid || f < 0 || f >= c->F)
        return c->fc_valid ? -EINVAL : -EAGAIN;
    int n = c->n_cached, T = n + 1, P = c->e->hp.patch_len;
    for (int l = 0; l < c->L; l++)
        for (int h = 0; h < c->H; h++)
            memcpy(&weights[((size_t)l * c->H + h) * T],
                   &c->att[(((size_t)f * c->L + l) * c->H + h) * (c->N + 1)], (size_t)T * sizeof(float));
    for (int i = 0; i < n; i++)
        token_end[i] = c->cache_e - (int64_t)(n - 1 - i) * P;
    token_end[n] = c->fc_step;
    *n_tokens = T;
    return 0;
}
