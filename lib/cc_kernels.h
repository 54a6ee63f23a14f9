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
void cc_linear(float *C, int ldc, const float *A, int lda, const float *B, int ldb,
               const float *bias, int M, int N, int K, int accumulate);
void cc_linear_ref(float *C, int ldc, const float *A, int lda, const float *B, int ldb,
                   const float *bias, int M, int N, int K, int accumulate);

/** C (M,N) = At^T · B^T with At (K,M) (the inputs stored one column per row of C) and
 *  B (N,K). OpenBLAS sgemm. The engine's tx/3 linear path builds its inputs this way:
 *  one ring row of a cell is F contiguous inputs. */
void cc_linear_at(float *C, int ldc, const float *At, int ldat, const float *B, int ldb, int M,
                  int N, int K);

/** out (rows, D) = LayerNorm(a + b) with gain g, bias beta (b may be NULL). out may alias a. */
void cc_add_layernorm(float *out, const float *a, const float *b, const float *g, const float *beta,
                      int rows, int D);
void cc_add_layernorm_ref(float *out, const float *a, const float *b, const float *g,
                          const float *beta, int rows, int D);

/** out (rows, D) = LayerNorm(a + b + bias) (bias (D) broadcast over rows): the bias of
 *  the linear that produced b, folded in so that linear needs no pass of its own. */
void cc_add_bias_layernorm(float *out, const float *a, const float *b, const float *bias,
                           const float *g, const float *beta, int rows, int D);

/** In-place ReLU. */
void cc_relu(float *x, size_t n);

/** In-place x (rows, N) = relu(x + bias), bias (N) broadcast over rows. */
void cc_bias_relu(float *x, const float *bias, int rows, int N);

/* exp(x), branch-free so loops over it vectorise with any ISA (no floor/round calls):
 * x = k·ln2 + r with k rounded by the 1.5·2^23 trick, |r| ≤ ln2/2, degree-6 polynomial for
 * e^r (rel. error < 2e-7), 2^k through the exponent bits; x clamped to [-87, 88]. */
static inline float cc_expf_fast(float x)
{
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        float f;
        int32_t i;
    } u = {.i = ((int32_t)k + 127) << 23};
    return p * u.f;
}

/* Softmax in place, inlinable so callers compiled for AVX2/AVX-512 vectorise it. Rows are
 * short (≤ N+1 keys), so latency matters more than width: the max and the sum run in
 * several independent lanes folded in a fixed order (deterministic, no fast-math needed),
 * and the exp loop carries no reduction so it vectorises. */
static inline void cc_softmax_inline(float *x, int n)
{
    float m[8], s[8] = {0};
    int i;
    for (int k = 0; k < 8; k++)
        m[k] = x[0];
    for (i = 0; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
    for (int k = 0; i < n; i++, k++)
        m[k] = x[i] > m[k] ? x[i] : m[k];
    for (int w = 4; w; w >>= 1)
        for (int k = 0; k < w; k++)
            m[k] = m[k + w] > m[k] ? m[k + w] : m[k];
    const float mx = m[0];
    for (i = 0; i < n; i++)
        x[i] = cc_expf_fast(x[i] - mx);
    for (i = 0; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += x[i + k];
    for (int k = 0; i < n; i++, k++)
        s[k] += x[i];
    for (int w = 4; w; w >>= 1)
        for (int k = 0; k < w; k++)
            s[k] += s[k + w];
    const float inv = 1.0f / s[0];
    for (i = 0; i < n; i++)
        x[i] *= inv;
}

/* Dot product of 16 floats as a product vector folded in halves: 4 dependent adds
 * instead of a 16-long FMA chain. */
static inline float cc_dot16(const float *a, const float *b)
{
    float p[16];
    for (int k = 0; k < 16; k++)
        p[k] = a[k] * b[k];
    for (int w = 8; w; w >>= 1)
        for (int k = 0; k < w; k++)
            p[k] += p[k + w];
    return p[0];
}

/** In-place softmax of x[0..n); rows sum to 1 up to rounding. */
void cc_softmax(float *x, int n);
void cc_softmax_ref(float *x, int n);

/** The paper's sinusoidal encoding at a real-valued position, in double, cast to float. */
void cc_pos_encoding(float *out, double pos, int D);

/** div[i] = 10000^(2i/D), i < D/2: the divisors of cc_pos_encoding, precomputed. */
void cc_pos_encoding_divisors(double *div, int D);
/** cc_pos_encoding with precomputed divisors; bit-identical results. */
void cc_pos_encoding_tab(float *out, double pos, int D, const double *div);

/** tau(p) of the spec: [sin 2π·pd, cos 2π·pd, sin 2π·pw, cos 2π·pw]. */
void cc_time_features(float out[4], int64_t step, int64_t step_seconds, int64_t tz_offset_s);

/** Mean and population sd of x[0..n) in double; sigma = sd + 1e-5(1+|mu|). */
void cc_norm_stats(const float *x, int n, float *mu, float *sigma);

/* 16-bit conversions (round to nearest even; NaN/Inf preserved). */
uint16_t cc_f32_to_f16(float f);
float cc_f16_to_f32(uint16_t h);
uint16_t cc_f32_to_bf16(float f);
float cc_bf16_to_f32(uint16_t h);

#endif
