/*
 * cc_attention.c — the attention kernels and their reference twins (see cc_attention.h).
 */
#include "cc_attention.h"

#include <math.h>
#include <string.h>

#include "cc_kernels.h"

/* ---- AVX-512 register kernels (DK = 16) ------------------------------------------------ */

#if defined(__x86_64__)
#include <immintrin.h>

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
 * Head g reads keys Kt + g·ksh in the blocked layout for ldk tokens (see cc_kblock_width)
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
        const int wb = cc_kblock_width(ldk, b);
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
            sc[g][b] =
                _mm512_maskz_mov_ps(m[b], exp16(_mm512_sub_ps(sc[g][b], _mm512_set1_ps(mx[g]))));
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
            o[g][0] =
                _mm512_fmadd_ps(_mm512_set1_ps(ex[g][j]), load16(T, vg, (size_t)j * ldv), o[g][0]);
            o[g][1] = _mm512_fmadd_ps(_mm512_set1_ps(ex[g][j + 1]),
                                      load16(T, vg, (size_t)(j + 1) * ldv), o[g][1]);
        }
    if (j < n)
        for (int g = 0; g < G; g++) {
            const void *vg = (const char *)V + g * vsh * (T == CC_KV_F32 ? 4 : 2);
            o[g][0] =
                _mm512_fmadd_ps(_mm512_set1_ps(ex[g][j]), load16(T, vg, (size_t)j * ldv), o[g][0]);
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
#define ATTEND16_REG(NAME, T)                                                                      \
    __attribute__((target("avx512f"))) static void NAME(                                           \
        float *restrict out, float *restrict w, int ldw, const float *restrict q,                  \
        const void *restrict Kt, size_t ksh, int ldk, const void *restrict V, size_t vsh, int ldv, \
        const float *restrict k_self, const float *restrict v_self, int n, int H, float scale)     \
    {                                                                                              \
        const size_t el = T == CC_KV_F32 ? 4 : 2;                                                  \
        for (int h = 0; h < H;) {                                                                  \
            const int G = H - h >= 4 ? 4 : 1;                                                      \
            float *o = out + 16 * h, *wh = w + (size_t)h * ldw;                                    \
            const float *qh = q + 16 * h, *ks = k_self + 16 * h, *vs = v_self + 16 * h;            \
            const void *kt = (const char *)Kt + h * ksh * el,                                      \
                       *vh = (const char *)V + h * vsh * el;                                       \
            if (G == 4 && n < 16)                                                                  \
                attend16_body(4, 1, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n,      \
                              scale);                                                              \
            else if (G == 4 && n < 32)                                                             \
                attend16_body(4, 2, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n,      \
                              scale);                                                              \
            else if (G == 4)                                                                       \
                attend16_body(4, 4, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n,      \
                              scale);                                                              \
            else if (n < 16)                                                                       \
                attend16_body(1, 1, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n,      \
                              scale);                                                              \
            else if (n < 32)                                                                       \
                attend16_body(1, 2, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n,      \
                              scale);                                                              \
            else                                                                                   \
                attend16_body(1, 4, T, o, wh, ldw, qh, kt, ksh, ldk, vh, vsh, ldv, ks, vs, n,      \
                              scale);                                                              \
            h += G;                                                                                \
        }                                                                                          \
    }
ATTEND16_REG(attend16_f32_avx512, CC_KV_F32)
ATTEND16_REG(attend16_f16_avx512, CC_KV_F16)
ATTEND16_REG(attend16_bf16_avx512, CC_KV_BF16)
#endif

void cc_attention_dsp_init(CcAttentionDsp *dsp, int portable)
{
    memset(dsp, 0, sizeof *dsp);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!portable && __builtin_cpu_supports("avx512f")) {
        dsp->attend16[CC_KV_F32] = attend16_f32_avx512;
        dsp->attend16[CC_KV_F16] = attend16_f16_avx512;
        dsp->attend16[CC_KV_BF16] = attend16_bf16_avx512;
    }
#endif
}

/* ---- portable kernels: plain C that target_clones compiles for AVX-512, AVX2 and x86-64 -- */

__attribute__((target_clones("avx512f", "avx2", "default"))) void
cc_attend_cached(float *restrict out, float *restrict w, const float *restrict q,
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

__attribute__((target_clones("avx512f", "avx2", "default"))) void
cc_attend_cached16(float *restrict out, float *restrict w, const float *restrict q,
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

/* Kt: the keys transposed once, so that every query's scores vectorise over tokens. */
__attribute__((target_clones("avx512f", "avx2", "default"))) void
cc_attend_causal(float *restrict out, int ldo, const float *restrict q, const float *restrict k,
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

/* cc_attend_causal for DK = 16 with 16-lane vectors (see cc_attend_cached16). Kt needs 16
 * floats of slack past (16, n). */
__attribute__((target_clones("avx512f", "avx2", "default"))) void
cc_attend_causal16(float *restrict out, int ldo, const float *restrict q, const float *restrict k,
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

void cc_attention_keys_t(float *kt, const float *k, size_t ld, int nc, int DK, int blocked)
{
    int full = 0; /* tokens in full blocks, transposed in registers */
#if defined(__x86_64__)
    if (blocked && __builtin_cpu_supports("avx512f")) {
        full = nc / 16 * 16;
        for (int b = 0; 16 * b < full; b++)
            transpose16(kt + (size_t)b * 256, k + (size_t)16 * b * ld, ld);
    }
#endif
    for (int i = full; i < nc; i++) {
        const float *row = k + (size_t)i * ld;
        size_t at = blocked ? (size_t)(i / 16) * 256 + i % 16 : (size_t)i;
        int wb = blocked ? cc_kblock_width(nc, i / 16) : nc;
        for (int c = 0; c < DK; c++)
            kt[at + (size_t)c * wb] = row[c];
    }
}

/* ---- reference twins ------------------------------------------------------------------- */

/* Softmax of x[0..n) in double with libm's exp. */
static void softmax_ref(double *x, int n)
{
    double mx = x[0], sum = 0;
    for (int j = 1; j < n; j++)
        mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < n; j++)
        sum += x[j] = exp(x[j] - mx);
    for (int j = 0; j < n; j++)
        x[j] /= sum;
}

void cc_attend_cached_ref(float *out, float *w, const float *q, const float *Kt, int ldk,
                          const float *V, const float *k_self, const float *v_self, int n, int DK,
                          float scale)
{
    double s[CC_ATTEND_REF_MAX_N + 1];
    for (int j = 0; j <= n; j++) {
        double acc = 0;
        for (int c = 0; c < DK; c++)
            acc += (double)q[c] * (j < n ? Kt[(size_t)c * ldk + j] : k_self[c]);
        s[j] = acc * scale;
    }
    softmax_ref(s, n + 1);
    for (int c = 0; c < DK; c++) {
        double acc = s[n] * v_self[c];
        for (int j = 0; j < n; j++)
            acc += s[j] * V[(size_t)j * DK + c];
        out[c] = (float)acc;
    }
    for (int j = 0; j <= n; j++)
        w[j] = (float)s[j];
}

void cc_attend_causal_ref(float *out, int ldo, const float *q, const float *k, const float *v,
                          int ld, int n, int DK, float scale)
{
    double s[CC_ATTEND_REF_MAX_N + 1];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j <= i; j++) {
            double acc = 0;
            for (int c = 0; c < DK; c++)
                acc += (double)q[(size_t)i * ld + c] * k[(size_t)j * ld + c];
            s[j] = acc * scale;
        }
        softmax_ref(s, i + 1);
        for (int c = 0; c < DK; c++) {
            double acc = 0;
            for (int j = 0; j <= i; j++)
                acc += s[j] * v[(size_t)j * ld + c];
            out[(size_t)i * ldo + c] = (float)acc;
        }
    }
}

static float kv_elem_ref(enum CcKvType t, const void *p, size_t i)
{
    if (t == CC_KV_F16)
        return cc_f16_to_f32(((const uint16_t *)p)[i]);
    if (t == CC_KV_BF16)
        return cc_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

void cc_attend16_ref(enum CcKvType t, float *out, float *w, int ldw, const float *q, const void *Kt,
                     size_t ksh, int ldk, const void *V, size_t vsh, int ldv, const float *k_self,
                     const float *v_self, int n, int H, float scale)
{
    float kt[16 * CC_ATTEND16_MAX_N], v[CC_ATTEND16_MAX_N * 16];
    for (int h = 0; h < H; h++) {
        for (int j = 0; j < n; j++)
            for (int c = 0; c < 16; c++) {
                int b = j / 16;
                size_t at = (size_t)b * 256 + (size_t)c * cc_kblock_width(ldk, b) + j % 16;
                kt[c * n + j] = kv_elem_ref(t, Kt, h * ksh + at);
                v[j * 16 + c] = kv_elem_ref(t, V, h * vsh + (size_t)j * ldv + c);
            }
        cc_attend_cached_ref(out + 16 * h, w + (size_t)h * ldw, q + 16 * h, kt, n, v,
                             k_self + 16 * h, v_self + 16 * h, n, 16, scale);
    }
}
