/*
 * cc_kernels.h — the numerical building blocks of the model, each fast kernel with its
 * naive reference twin (suffix _ref) that the tests use as oracle.
 * Shapes: row-major; "nt" = second operand is (N, K), i.e. PyTorch Linear weights.
 */
#ifndef CC_KERNELS_H
#define CC_KERNELS_H

#include "cc_common.h"

#define CC_LN_EPS 1e-5f

/** C (M,N) = A (M,K) · B^T with B (N,K), plus bias (N) per row if not NULL; accumulate=1
 *  adds into C instead of overwriting. OpenBLAS sgemm. */
CC_API void cc_linear(float *C, int ldc, const float *A, int lda, const float *B, int ldb,
                      const float *bias, int M, int N, int K, int accumulate);
CC_API void cc_linear_ref(float *C, int ldc, const float *A, int lda, const float *B, int ldb,
                          const float *bias, int M, int N, int K, int accumulate);

/** out (rows, D) = LayerNorm(a + b) with gain g, bias beta (b may be NULL). out may alias a. */
CC_API void cc_add_layernorm(float *out, const float *a, const float *b, const float *g,
                             const float *beta, int rows, int D);
CC_API void cc_add_layernorm_ref(float *out, const float *a, const float *b, const float *g,
                                 const float *beta, int rows, int D);

/** In-place ReLU. */
CC_API void cc_relu(float *x, size_t n);

/** In-place softmax of x[0..n); returns nothing, rows sum to 1 up to rounding. */
CC_API void cc_softmax(float *x, int n);
CC_API void cc_softmax_ref(float *x, int n);

/** The paper's sinusoidal encoding at a real-valued position, in double, cast to float. */
CC_API void cc_pos_encoding(float *out, double pos, int D);

/** tau(p) of the spec: [sin 2π·pd, cos 2π·pd, sin 2π·pw, cos 2π·pw]. */
CC_API void cc_time_features(float out[4], int64_t step, int64_t step_seconds,
                             int64_t tz_offset_s);

/** Mean and population sd of x[0..n) in double; sigma = sd + 1e-5(1+|mu|). */
CC_API void cc_norm_stats(const float *x, int n, float *mu, float *sigma);

/* 16-bit conversions (round to nearest even; NaN/Inf preserved). */
CC_API uint16_t cc_f32_to_f16(float f);
CC_API float cc_f16_to_f32(uint16_t h);
CC_API uint16_t cc_f32_to_bf16(float f);
CC_API float cc_bf16_to_f32(uint16_t h);

#endif
