/*
 * cc_half.c — fp16 rows of the KV caches: the C versions and the F16C ones (see cc_half.h).
 */
#include "cc_half.h"

#include "cc_kernels.h"

void cc_f16_load_ref(float *dst, const uint16_t *src, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = cc_f16_to_f32(src[i]);
}

void cc_f16_store_ref(uint16_t *dst, const float *src, int n)
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
        _mm_storeu_si128((__m128i *)h,
                         _mm256_cvtps_ph(_mm256_loadu_ps(tmp), _MM_FROUND_TO_NEAREST_INT));
        memcpy(dst + i, h, (size_t)(n - i) * sizeof(uint16_t));
    }
}
#endif

void cc_half_dsp_init(CcHalfDsp *dsp)
{
    dsp->f16_load = cc_f16_load_ref;
    dsp->f16_store = cc_f16_store_ref;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) {
        dsp->f16_load = f16_load_f16c;
        dsp->f16_store = f16_store_f16c;
    }
#endif
}
