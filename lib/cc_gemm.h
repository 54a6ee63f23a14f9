/*
 * cc_gemm.h — the engine's dense layers on pre-packed weights.
 *
 * Every dense layer of the step is C (M, N) = A (M, K) · W^T (W is (N, K), the
 * model's layout) with M in the thousands and N, K ≤ a few hundred. OpenBLAS
 * repacks A on every call and reaches about half of this CPU's FMA peak on such
 * shapes; an AVX-512 kernel on weights packed once (panels of 64 output
 * columns, k-major) keeps 6 rows × 64 columns of C in registers and reaches
 * ~1.5× that, and its epilogue applies the bias, a ReLU, or the residual add +
 * LayerNorm of a post-LN block while the rows are still in registers.
 *
 * On a CPU without AVX-512 the same calls fall back to OpenBLAS (cc_linear)
 * plus the plain epilogue kernels, so results are equal up to float rounding
 * everywhere.
 *
 * Each row of C depends only on the same row of A: results do not depend on M
 * or on a row's position in the batch (the engine's batch invariance relies on
 * it).
 */
#ifndef CC_GEMM_H
#define CC_GEMM_H

#include "cc_common.h"

/** Weights (N, K) packed for cc_gemm; owns its memory, keeps a pointer to W
 * (not a copy) for the fallback path, so W must outlive it. */
typedef struct CcGemmW CcGemmW;

/** Packs W (N, K) row-major. force_fallback = 1 skips packing and always uses
 * OpenBLAS (tests compare both paths). Returns 0, -EINVAL or -ENOMEM. */
int cc_gemm_open(CcGemmW **out, const float *W, int N, int K, int force_fallback);
void cc_gemm_close(CcGemmW **pw);
/** 1 when the packed AVX-512 kernel serves this matrix. */
int cc_gemm_is_packed(const CcGemmW *w);

/** Cache lines to request while a dense kernel runs, one per inner iteration (per 24
 *  FMAs: about the rate one core's memory system delivers at FMA pace), so memory works
 *  while the FMAs do. The engine streams the KV caches the next attention will read.
 *  Lines are issued in order from `next` while next < limit, over `blocks`, each
 *  block_lines lines of 64 bytes (limit ≤ all their lines); the kernels advance `next`.
 *  Prefetch goes to L2 (prefetcht2). Ignored by the OpenBLAS fallback. */
typedef struct CcGemmStream {
    const char *const *blocks;
    size_t block_lines;
    size_t next, limit; ///< line indices over all blocks
    int per_iter;       ///< lines per inner iteration: 1 (0 means 1) or 2
} CcGemmStream;

typedef enum CcGemmEpilogue {
    CC_GEMM_STORE = 0, ///< C = A·W^T (+ bias)
    CC_GEMM_RELU,      ///< C = max(0, A·W^T + bias)
} CcGemmEpilogue;

/** C (M, N) rows strided by ldc; A (M, K) strided by lda; bias (N) or NULL. */
void cc_gemm(float *C, int ldc, const float *A, int lda, const CcGemmW *W, const float *bias, int M,
             CcGemmEpilogue epi, CcGemmStream *stream);

/** The post-LN residual: Z (M, N) = LayerNorm(Z + A·W^T + bias) with gain g and
 * shift b (N), eps 1e-5, biased variance. N = d_model. */
void cc_gemm_residual_ln(float *Z, int ldz, const float *A, int lda, const CcGemmW *W,
                         const float *bias, const float *g, const float *b, int M,
                         CcGemmStream *stream);

/** Reference twins: double accumulation, naive loops. */
void cc_gemm_ref(float *C, int ldc, const float *A, int lda, const float *W, int N, int K,
                 const float *bias, int M, CcGemmEpilogue epi);
void cc_gemm_residual_ln_ref(float *Z, int ldz, const float *A, int lda, const float *W, int N,
                             int K, const float *bias, const float *g, const float *b, int M);

#endif
