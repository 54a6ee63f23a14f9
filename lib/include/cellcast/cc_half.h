/*
 * cc_half.h — the KV caches' 16-bit element types (IEEE fp16, bfloat16): whole rows
 * widened to f32 and narrowed back, fp16 through F16C where the CPU has it.
 * Single values: cc_f32_to_f16 and friends in cc_kernels.h.
 */
#ifndef CC_HALF_H
#define CC_HALF_H

#include <stdint.h>
#include <string.h>

enum CcKvType { CC_KV_F32 = 0, CC_KV_F16 = 1, CC_KV_BF16 = 2 };

/* fp16 rows. A table of function pointers (dav1d style) so that the step calls the best
 * version without testing the CPU each time; bf16 needs none: a shift, which the compiler
 * vectorises inline. */
typedef struct CcHalfDsp {
    void (*f16_load)(float *dst, const uint16_t *src, int n);
    void (*f16_store)(uint16_t *dst, const float *src, int n);
} CcHalfDsp;

/** Fills dsp with the fastest versions this CPU runs. */
void cc_half_dsp_init(CcHalfDsp *dsp);

/** The C versions, element by element (cc_f16_to_f32, cc_f32_to_f16): the table's
 *  fallback and the F16C versions' reference twins, bit for bit. */
void cc_f16_load_ref(float *dst, const uint16_t *src, int n);
void cc_f16_store_ref(uint16_t *dst, const float *src, int n);

static inline void cc_bf16_load(float *restrict dst, const uint16_t *restrict src, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

/* Round to nearest even, as cc_f32_to_bf16, branch-free so it vectorises; NaN stays NaN. */
static inline void cc_bf16_store(uint16_t *restrict dst, const float *restrict src, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
        dst[i] = (uint16_t)(nan ? (u >> 16) | 0x40 : r);
    }
}

/* n elements of type t from f32 and back; inline, as the step calls them per cache row. */
static inline void cc_kv_store(const CcHalfDsp *dsp, void *dst, const float *src, int n,
                               enum CcKvType t)
{
    if (t == CC_KV_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else if (t == CC_KV_F16)
        dsp->f16_store(dst, src, n);
    else
        cc_bf16_store(dst, src, n);
}

static inline void cc_kv_load(const CcHalfDsp *dsp, float *dst, const void *src, int n,
                              enum CcKvType t)
{
    if (t == CC_KV_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else if (t == CC_KV_F16)
        dsp->f16_load(dst, src, n);
    else
        cc_bf16_load(dst, src, n);
}

#endif
