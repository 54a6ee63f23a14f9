/*
 * cc_gemm.c — dense layers on pre-packed weights (see cc_gemm.h).
 *
 * Packed layout: ceil(N/64) panels; panel p is (K, 64) k-major, column j
 * holding output p·64 + j, zero past N. The kernel holds MR = 6 rows × 64
 * columns of C in 24 zmm accumulators; per k it loads the panel's 64 weights
 * once (4 aligned loads) and broadcasts one A value per row: 24 FMAs for 10
 * loads, so it runs at the FMA ports' pace.
 */
#include "cc_gemm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_kernels.h"
#include "cc_model.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CC_GEMM_X86 1
#include <immintrin.h>
#else
#define CC_GEMM_X86 0
#endif

#define NR 64 /* output columns per panel: 4 zmm */
#define MR 6  /* rows per register block */

struct CcGemmW {
    const float *w; // (N, K) the caller's weights, for the fallback
    float *packed;  // (ceil(N/64), K, 64) or NULL: fallback
    int N, K;
};

static int have_avx512(void)
{
#if CC_GEMM_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

int cc_gemm_open(CcGemmW **out, const float *W, int N, int K, int force_fallback)
{
    CcGemmW *g = NULL;
    int ret = -EINVAL;
    *out = NULL;
    if (!W || N <= 0 || K <= 0)
        goto fail;
    ret = -ENOMEM;
    g = calloc(1, sizeof *g);
    if (!g)
        goto fail;
    g->w = W;
    g->N = N;
    g->K = K;
    if (!force_fallback && have_avx512()) {
        size_t panels = ((size_t)N + NR - 1) / NR;
        size_t bytes = panels * (size_t)K * NR * sizeof(float);
        void *mem = NULL;
        if (posix_memalign(&mem, 64, bytes))
            goto fail;
        g->packed = mem;
        for (size_t p = 0; p < panels; p++)
            for (int k = 0; k < K; k++)
                for (int j = 0; j < NR; j++) {
                    size_t n = p * NR + (size_t)j;
                    g->packed[(p * K + (size_t)k) * NR + (size_t)j] =
                        n < (size_t)N ? W[n * (size_t)K + (size_t)k] : 0.0f;
                }
    }
    *out = g;
    return 0;
fail:
    free(g);
    return ret;
}

void cc_gemm_close(CcGemmW **pw)
{
    if (!pw || !*pw)
        return;
    free((*pw)->packed);
    free(*pw);
    *pw = NULL;
}

int cc_gemm_is_packed(const CcGemmW *w) { return w && w->packed; }

/* ---- AVX-512 kernels
 * ------------------------------------------------------------------- */

#if CC_GEMM_X86
#define AVX512 __attribute__((target("avx512f")))

static inline AVX512 __mmask16 lane_mask(int width, int q)
{
    int n = width - 16 * q;
    n = n < 0 ? 0 : (n > 16 ? 16 : n);
    return (__mmask16)((1u << n) - 1u);
}

/* A CcGemmStream's position while a kernel runs, in locals the compiler keeps in
 * registers (the kernels are inlined into one function). */
typedef struct Pf {
    const char *const *blocks;
    const char *p;   // next line
    size_t left;     // lines still to issue in this call
    size_t in_block; // lines left in the current block
    size_t block_lines, blk;
    int two; // two lines per iteration
} Pf;

static inline void pf_open(Pf *pf, const CcGemmStream *s)
{
    memset(pf, 0, sizeof *pf);
    if (!s || s->next >= s->limit || !s->block_lines)
        return;
    pf->blocks = s->blocks;
    pf->block_lines = s->block_lines;
    pf->blk = s->next / s->block_lines;
    size_t off = s->next % s->block_lines;
    pf->p = s->blocks[pf->blk] + off * 64;
    pf->in_block = s->block_lines - off;
    pf->left = s->limit - s->next;
    pf->two = s->per_iter == 2;
}

static inline void pf_close(const Pf *pf, CcGemmStream *s)
{
    if (s && s->next < s->limit)
        s->next = s->limit - pf->left;
}

static inline __attribute__((always_inline)) void pf_step(Pf *pf)
{
    if (pf->left) {
        _mm_prefetch(pf->p, _MM_HINT_T2);
        pf->p += 64;
        if (--pf->left && !--pf->in_block) {
            pf->p = pf->blocks[++pf->blk];
            pf->in_block = pf->block_lines;
        }
    }
}

/* acc[r][q] = bias + A[r]·panel for R ≤ MR rows; R is a constant at every call
 * site so the loops unroll and acc stays in registers. One stream line per k. */
static inline __attribute__((always_inline)) AVX512 void
panel_block(__m512 acc[MR][4], int R, const float *A, int lda, const float *bp, int K,
            const float *bias, int width, Pf *pf)
{
    for (int q = 0; q < 4; q++) {
        __m512 b0 =
            bias ? _mm512_maskz_loadu_ps(lane_mask(width, q), bias + 16 * q) : _mm512_setzero_ps();
#pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            acc[r][q] = b0;
    }
    for (int k = 0; k < K; k++) {
        pf_step(pf);
        if (pf->two)
            pf_step(pf);
        const float *b = bp + (size_t)k * NR;
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
        __m512 b2 = _mm512_load_ps(b + 32), b3 = _mm512_load_ps(b + 48);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_set1_ps(A[(size_t)r * lda + k]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(a, b2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(a, b3, acc[r][3]);
        }
    }
}

static inline __attribute__((always_inline)) AVX512 void
gemm_rows(int R, float *C, int ldc, const float *A, int lda, const CcGemmW *W, const float *bias,
          CcGemmEpilogue epi, Pf *pf)
{
    const int N = W->N, K = W->K;
    for (int p = 0; p * NR < N; p++) {
        const int width = N - p * NR < NR ? N - p * NR : NR;
        __m512 acc[MR][4];
        panel_block(acc, R, A, lda, W->packed + (size_t)p * K * NR, K, bias ? bias + p * NR : NULL,
                    width, pf);
        const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            for (int q = 0; q < 4; q++) {
                __m512 v = epi == CC_GEMM_RELU ? _mm512_max_ps(acc[r][q], zero) : acc[r][q];
                float *c = C + (size_t)r * ldc + p * NR + 16 * q;
                if (width == NR)
                    _mm512_storeu_ps(c, v);
                else
                    _mm512_mask_storeu_ps(c, lane_mask(width, q), v);
            }
    }
}

static AVX512 void gemm_avx512(float *C, int ldc, const float *A, int lda, const CcGemmW *W,
                               const float *bias, int M, CcGemmEpilogue epi, CcGemmStream *stream)
{
    Pf pf;
    pf_open(&pf, stream);
    int i = 0;
    for (; i + MR <= M; i += MR)
        gemm_rows(MR, C + (size_t)i * ldc, ldc, A + (size_t)i * lda, lda, W, bias, epi, &pf);
    const float *a = A + (size_t)i * lda;
    float *c = C + (size_t)i * ldc;
    switch (M - i) {
    case 5: gemm_rows(5, c, ldc, a, lda, W, bias, epi, &pf); break;
    case 4: gemm_rows(4, c, ldc, a, lda, W, bias, epi, &pf); break;
    case 3: gemm_rows(3, c, ldc, a, lda, W, bias, epi, &pf); break;
    case 2: gemm_rows(2, c, ldc, a, lda, W, bias, epi, &pf); break;
    case 1: gemm_rows(1, c, ldc, a, lda, W, bias, epi, &pf); break;
    default: break;
    }
    pf_close(&pf, stream);
}

/* Z = LN(Z + A·W^T + bias) for N ≤ 64: a row's N outputs are all in its 4
 * accumulators, lanes past N exactly zero (zero-padded panel, masked bias and Z
 * loads), so the row sums need no masking; the centred values do. */
static inline __attribute__((always_inline)) AVX512 void
residual_ln_rows(int R, float *Z, int ldz, const float *A, int lda, const CcGemmW *W,
                 const float *bias, const float *g, const float *b, Pf *pf)
{
    const int N = W->N;
    __m512 acc[MR][4];
    panel_block(acc, R, A, lda, W->packed, W->K, bias, N, pf);
    __mmask16 m[4];
    __m512 gv[4], bv[4];
    for (int q = 0; q < 4; q++) {
        m[q] = lane_mask(N, q);
        gv[q] = _mm512_maskz_loadu_ps(m[q], g + 16 * q);
        bv[q] = _mm512_maskz_loadu_ps(m[q], b + 16 * q);
    }
    const float invN = 1.0f / (float)N;
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        float *z = Z + (size_t)r * ldz;
        __m512 s[4];
        for (int q = 0; q < 4; q++)
            s[q] = _mm512_add_ps(_mm512_maskz_loadu_ps(m[q], z + 16 * q), acc[r][q]);
        const float mean = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]),
                                                              _mm512_add_ps(s[2], s[3]))) *
                           invN;
        const __m512 mv = _mm512_set1_ps(mean);
        __m512 sq = _mm512_setzero_ps();
        for (int q = 0; q < 4; q++) {
            s[q] = _mm512_maskz_sub_ps(m[q], s[q], mv);
            sq = _mm512_fmadd_ps(s[q], s[q], sq);
        }
        const __m512 rstd =
            _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(sq) * invN + CC_LN_EPS));
        for (int q = 0; q < 4; q++)
            _mm512_mask_storeu_ps(z + 16 * q, m[q],
                                  _mm512_fmadd_ps(gv[q], _mm512_mul_ps(s[q], rstd), bv[q]));
    }
}

static AVX512 void residual_ln_avx512(float *Z, int ldz, const float *A, int lda, const CcGemmW *W,
                                      const float *bias, const float *g, const float *b, int M,
                                      CcGemmStream *stream)
{
    Pf pf;
    pf_open(&pf, stream);
    int i = 0;
    for (; i + MR <= M; i += MR)
        residual_ln_rows(MR, Z + (size_t)i * ldz, ldz, A + (size_t)i * lda, lda, W, bias, g, b,
                         &pf);
    const float *a = A + (size_t)i * lda;
    float *z = Z + (size_t)i * ldz;
    switch (M - i) {
    case 5: residual_ln_rows(5, z, ldz, a, lda, W, bias, g, b, &pf); break;
    case 4: residual_ln_rows(4, z, ldz, a, lda, W, bias, g, b, &pf); break;
    case 3: residual_ln_rows(3, z, ldz, a, lda, W, bias, g, b, &pf); break;
    case 2: residual_ln_rows(2, z, ldz, a, lda, W, bias, g, b, &pf); break;
    case 1: residual_ln_rows(1, z, ldz, a, lda, W, bias, g, b, &pf); break;
    default: break;
    }
    pf_close(&pf, stream);
}
#endif

/* ---- entry points
 * ---------------------------------------------------------------------- */

void cc_gemm(float *C, int ldc, const float *A, int lda, const CcGemmW *W, const float *bias, int M,
             CcGemmEpilogue epi, CcGemmStream *stream)
{
    if (M <= 0)
        return;
#if CC_GEMM_X86
    if (W->packed) {
        gemm_avx512(C, ldc, A, lda, W, bias, M, epi, stream);
        return;
    }
#endif
    cc_linear(C, ldc, A, lda, W->w, W->K, bias, M, W->N, W->K, 0);
    if (epi == CC_GEMM_RELU)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < W->N; j++) {
                float *c = &C[(size_t)i * ldc + j];
                *c = *c > 0 ? *c : 0;
            }
}

void cc_gemm_residual_ln(float *Z, int ldz, const float *A, int lda, const CcGemmW *W,
                         const float *bias, const float *g, const float *b, int M,
                         CcGemmStream *stream)
{
    if (M <= 0)
        return;
#if CC_GEMM_X86
    if (W->packed && W->N <= NR) {
        residual_ln_avx512(Z, ldz, A, lda, W, bias, g, b, M, stream);
        return;
    }
#endif
    /* through a bounded scratch: rows of A·W^T, then the existing residual
     * LayerNorm */
    enum { SCRATCH = 16384 };
    float tmp[SCRATCH];
    const int N = W->N, chunk = SCRATCH / N > 0 ? SCRATCH / N : 1;
    for (int i = 0; i < M; i += chunk) {
        int rows = M - i < chunk ? M - i : chunk;
        if (N > SCRATCH) { /* d_model is bounded far below this; kept total anyway */
            for (int r = 0; r < rows; r++)
                cc_gemm_residual_ln_ref(Z + (size_t)(i + r) * ldz, ldz, A + (size_t)(i + r) * lda,
                                        lda, W->w, N, W->K, bias, g, b, 1);
            continue;
        }
        cc_gemm(tmp, N, A + (size_t)i * lda, lda, W, NULL, rows, CC_GEMM_STORE, NULL);
        for (int r = 0; r < rows; r++) {
            float *z = Z + (size_t)(i + r) * ldz;
            cc_add_bias_layernorm(z, z, tmp + (size_t)r * N, bias, g, b, 1, N);
        }
    }
}

void cc_gemm_ref(float *C, int ldc, const float *A, int lda, const float *W, int N, int K,
                 const float *bias, int M, CcGemmEpilogue epi)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = bias ? bias[j] : 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)A[(size_t)i * lda + k] * W[(size_t)j * K + k];
            if (epi == CC_GEMM_RELU && acc < 0)
                acc = 0;
            C[(size_t)i * ldc + j] = (float)acc;
        }
}

void cc_gemm_residual_ln_ref(float *Z, int ldz, const float *A, int lda, const float *W, int N,
                             int K, const float *bias, const float *g, const float *b, int M)
{
    for (int i = 0; i < M; i++) {
        double s[CC_MAX_D_MODEL], mean = 0, var = 0;
        float *z = Z + (size_t)i * ldz;
        for (int j = 0; j < N; j++) {
            double acc = bias ? bias[j] : 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)A[(size_t)i * lda + k] * W[(size_t)j * K + k];
            s[j] = z[j] + acc;
            mean += s[j];
        }
        mean /= N;
        for (int j = 0; j < N; j++)
            var += (s[j] - mean) * (s[j] - mean);
        var /= N;
        for (int j = 0; j < N; j++)
            z[j] = (float)(g[j] * ((s[j] - mean) / sqrt(var + CC_LN_EPS)) + b[j]);
    }
}
