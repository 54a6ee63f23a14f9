/*
 * cc_attention.h — the engine's attention kernels, each fast kernel with a naive reference
 * twin (suffix _ref: double accumulation, libm exp) that tests/unit/test_attention.c uses as
 * oracle.
 *
 * A head's keys are stored transposed, (DK, ·) with token j in column j, so one query's
 * scores vectorise over tokens; its values (·, DK), so the weighted sum vectorises over
 * channels. Every kernel scales the scores by `scale` (1/√DK) and softmaxes them.
 *
 * Two paths: the AVX-512 register kernels (cc_attention_dsp_init; DK = 16 only, keys in
 * the blocked layout below, caches read in their own element type) and the portable ones
 * (any ISA through target_clones, plain layout, f32 operands).
 */
#ifndef CC_ATTENTION_H
#define CC_ATTENTION_H

#include <stddef.h>

#include "cc_half.h"

/* The blocked key layout of the AVX-512 path (DK = 16): a head's keys for cap tokens are
 * blocks of 16 tokens, block b holding (16 dims, w_b tokens) with w_b = 16 for full
 * blocks and cap mod 16 for the tail; dim c of token j is at 256·b + c·w_b + j mod 16.
 * Rows of full blocks are whole aligned vectors (rows of a plain (16, N) transpose start
 * at 4N-byte offsets, so nearly every 16-lane load of them split a cache line), and the
 * layout needs no more memory than the plain one. */
static inline int cc_kblock_width(int cap, int b)
{
    return 16 * (b + 1) <= cap ? 16 : cap - 16 * b;
}

/**
 * DK = 16 attention of one token for all H heads: head h's query q + 16h against n cached
 * tokens, keys Kt + h·ksh in the blocked layout for ldk tokens, values V + h·vsh in rows
 * strided by ldv, both of the kernel's element type, plus the token itself (k_self +
 * 16h, v_self + 16h, f32). Writes out + 16h and the n + 1 weights to w + h·ldw (token n
 * is the query's own). n ≤ CC_ATTEND16_MAX_N. Reads whole 16-lane rows of the tail key
 * block, up to 16 elements past it: the caller's memory must extend that far.
 */
typedef void (*CcAttend16)(float *out, float *w, int ldw, const float *q, const void *Kt,
                           size_t ksh, int ldk, const void *V, size_t vsh, int ldv,
                           const float *k_self, const float *v_self, int n, int H, float scale);
#define CC_ATTEND16_MAX_N 63     /* the register kernels hold n + 1 ≤ 64 scores */
#define CC_ATTEND_REF_MAX_N 1023 /* n of the twins (they keep the scores on the stack) */

typedef struct CcAttentionDsp {
    CcAttend16 attend16[3]; ///< by enum CcKvType; NULL: use the portable kernels
} CcAttentionDsp;

/** The register kernels where the CPU has AVX-512, unless portable. */
void cc_attention_dsp_init(CcAttentionDsp *dsp, int portable);

/** The twin of attend16[t]: per head, the keys gathered out of the blocked layout. */
void cc_attend16_ref(enum CcKvType t, float *out, float *w, int ldw, const float *q, const void *Kt,
                     size_t ksh, int ldk, const void *V, size_t vsh, int ldv, const float *k_self,
                     const float *v_self, int n, int H, float scale);

/**
 * Head h's keys of nc tokens (rows k + i·ld, DK each) transposed into kt: blocked for nc
 * tokens (cc_kblock_width; DK must be 16), else plain (DK, nc). Full 16-token blocks are
 * transposed in registers where the CPU has AVX-512.
 */
void cc_attention_keys_t(float *kt, const float *k, size_t ld, int nc, int DK, int blocked);

/**
 * One query against n cached tokens plus itself: keys Kt (DK, ldk) plain, values V (n, DK),
 * the token's own key and value k_self, v_self. out (DK); w (n + 1) receives the weights.
 * cc_attend_cached16 is the DK = 16 case in 16-lane vectors; it reads whole 16-token blocks
 * of Kt, so Kt needs 16 floats past its last row's n-th column.
 */
void cc_attend_cached(float *out, float *w, const float *q, const float *Kt, int ldk,
                      const float *V, const float *k_self, const float *v_self, int n, int DK,
                      float scale);
void cc_attend_cached16(float *out, float *w, const float *q, const float *Kt, int ldk,
                        const float *V, const float *k_self, const float *v_self, int n,
                        float scale);
void cc_attend_cached_ref(float *out, float *w, const float *q, const float *Kt, int ldk,
                          const float *V, const float *k_self, const float *v_self, int n, int DK,
                          float scale);

/**
 * Causal self-attention of n tokens for one head: token i attends to tokens 0..i. q, k, v
 * rows strided by ld; out rows strided by ldo. Kt (DK, n) and s (n) are scratch; for
 * cc_attend_causal16 (DK = 16) each needs 16 floats of slack.
 */
void cc_attend_causal(float *out, int ldo, const float *q, const float *k, const float *v, int ld,
                      int n, int DK, float scale, float *Kt, float *s);
void cc_attend_causal16(float *out, int ldo, const float *q, const float *k, const float *v, int ld,
                        int n, float scale, float *Kt, float *s);
void cc_attend_causal_ref(float *out, int ldo, const float *q, const float *k, const float *v,
                          int ld, int n, int DK, float scale);

#endif
