/*
 * cc_kernels.c — numerical building blocks of cellcast-tx/2. Each fast kernel has a naive
 * twin (_ref) with double accumulation, used by the tests as oracle.
 */
#include "cc_kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void cc_linear(float *C, int ldc, const float *A, int lda, const float *B, int ldb,
               const float *bias, int M, int N, int K, int accumulate)
{
    if (M <= 0 || N <= 0)
        return;
    float beta = accumulate ? 1.0f : 0.0f;
    if (bias) {
        for (int i = 0; i < M; i++) {
            float *c = C + (size_t)i * ldc;
            if (accumulate)
                for (int j = 0; j < N; j++)
                    c[j] += bias[j];
            else
                memcpy(c, bias, (size_t)N * sizeof(float));
        }
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C,
                ldc);
}

void cc_linear_at(float *C, int ldc, const float *At, int ldat, const float *B, int ldb, int M,
                  int N, int K)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, M, N, K, 1.0f, At, ldat, B, ldb, 0.0f, C,
                ldc);
}

void cc_linear_ref(float *C, int ldc, const float *A, int lda, const float *B, int ldb,
                   const float *bias, int M, int N, int K, int accumulate)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = bias ? bias[j] : 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)A[(size_t)i * lda + k] * B[(size_t)j * ldb + k];
            float *c = &C[(size_t)i * ldc + j];
            *c = accumulate ? (float)(*c + acc) : (float)acc;
        }
}

/* Sums of 16 lanes kept apart, then folded: a fixed order (so results do not depend on the
 * ISA) that the compiler vectorises without fast-math. */
static inline float sum_lanes(const float *x, int D)
{
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= D; i += 16)
        for (int k = 0; k < 16; k++)
            acc[k] += x[i + k];
    for (int k = 0; i < D; i++, k++)
        acc[k] += x[i];
    for (int w = 8; w; w >>= 1)
        for (int k = 0; k < w; k++)
            acc[k] += acc[k + w];
    return acc[0];
}

void cc_add_layernorm(float *out, const float *a, const float *b, const float *g, const float *beta,
                      int rows, int D)
{
    cc_add_bias_layernorm(out, a, b, NULL, g, beta, rows, D);
}

void cc_add_bias_layernorm(float *out, const float *a, const float *b, const float *bias,
                           const float *g, const float *beta, int rows, int D)
{
    float tmp[4096]; /* D ≤ CC_MAX_D_MODEL */
    for (int r = 0; r < rows; r++) {
        const float *x = a + (size_t)r * D, *y = b ? b + (size_t)r * D : NULL;
        float *o = out + (size_t)r * D;
        if (y && bias)
            for (int i = 0; i < D; i++)
                o[i] = x[i] + (y[i] + bias[i]);
        else if (y)
            for (int i = 0; i < D; i++)
                o[i] = x[i] + y[i];
        else if (o != x)
            memcpy(o, x, (size_t)D * sizeof(float));
        const float mean = sum_lanes(o, D) / (float)D;
        for (int i = 0; i < D; i++) {
            float c = o[i] - mean;
            tmp[i] = c * c;
        }
        const float rstd = 1.0f / sqrtf(sum_lanes(tmp, D) / (float)D + CC_LN_EPS);
        for (int i = 0; i < D; i++)
            o[i] = g[i] * ((o[i] - mean) * rstd) + beta[i];
    }
}

void cc_add_layernorm_ref(float *out, const float *a, const float *b, const float *g,
                          const float *beta, int rows, int D)
{
    for (int r = 0; r < rows; r++) {
        double s[4096], mean = 0, var = 0; /* D ≤ CC_MAX_D_MODEL */
        for (int i = 0; i < D; i++) {
            s[i] = (double)a[(size_t)r * D + i] + (b ? (double)b[(size_t)r * D + i] : 0.0);
            mean += s[i];
        }
        mean /= D;
        for (int i = 0; i < D; i++)
            var += (s[i] - mean) * (s[i] - mean);
        var /= D;
        for (int i = 0; i < D; i++)
            out[(size_t)r * D + i] = (float)(g[i] * (s[i] - mean) / sqrt(var + 1e-5) + beta[i]);
    }
}

void cc_relu(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] > 0 ? x[i] : 0;
}

void cc_bias_relu(float *x, const float *bias, int rows, int N)
{
    for (int r = 0; r < rows; r++) {
        float *row = x + (size_t)r * N;
        for (int i = 0; i < N; i++) {
            float v = row[i] + bias[i];
            row[i] = v > 0 ? v : 0;
        }
    }
}

void cc_softmax(float *x, int n) { cc_softmax_inline(x, n); }

void cc_softmax_ref(float *x, int n)
{
    double mx = x[0], sum = 0;
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++)
        sum += exp((double)x[i] - mx);
    for (int i = 0; i < n; i++)
        x[i] = (float)(exp((double)x[i] - mx) / sum);
}

void cc_pos_encoding(float *out, double pos, int D)
{
    for (int i = 0; 2 * i < D; i++) {
        double angle = pos / pow(10000.0, (2.0 * i) / D);
        out[2 * i] = (float)sin(angle);
        if (2 * i + 1 < D)
            out[2 * i + 1] = (float)cos(angle);
    }
}

void cc_pos_encoding_divisors(double *div, int D)
{
    for (int i = 0; 2 * i < D; i++)
        div[i] = pow(10000.0, (2.0 * i) / D);
}

void cc_pos_encoding_tab(float *out, double pos, int D, const double *div)
{
    for (int i = 0; 2 * i < D; i++) {
        double sn, cs;
        sincos(pos / div[i], &sn, &cs);
        out[2 * i] = (float)sn;
        if (2 * i + 1 < D)
            out[2 * i + 1] = (float)cs;
    }
}

void cc_time_features(float out[4], int64_t step, int64_t step_seconds, int64_t tz_offset_s)
{
    double u = ((double)step * (double)step_seconds + (double)tz_offset_s) / 86400.0;
    double day = floor(u);
    double pd = u - day;
    double pw = fmod(day + 3.0, 7.0) / 7.0 + pd / 7.0;
    out[0] = (float)sin(2 * M_PI * pd);
    out[1] = (float)cos(2 * M_PI * pd);
    out[2] = (float)sin(2 * M_PI * pw);
    out[3] = (float)cos(2 * M_PI * pw);
}

void cc_norm_stats(const float *x, int n, float *mu, float *sigma)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    double m = n ? s / n : 0;
    for (int i = 0; i < n; i++)
        ss += ((double)x[i] - m) * ((double)x[i] - m);
    double sd = n ? sqrt(ss / n) : 0;
    *mu = (float)m;
    *sigma = (float)(sd + 1e-5 * (1.0 + fabs(m)));
}

uint16_t cc_f32_to_f16(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    uint32_t x = v.u, sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) /* Inf or NaN */
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent: still correct rounding */
    return (uint16_t)h;
}

float cc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    if (exp == 0) {
        if (!mant)
            x = sign;
        else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31)
        x = sign | 0x7f800000 | (mant << 13);
    else
        x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    union {
        uint32_t u;
        float f;
    } v = {.u = x};
    return v.f;
}

uint16_t cc_f32_to_bf16(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    if ((v.u & 0x7f800000) == 0x7f800000 && (v.u & 0x7fffff))
        return (uint16_t)((v.u >> 16) | 0x40); /* quiet NaN */
    uint32_t rounding = 0x7fff + ((v.u >> 16) & 1);
    return (uint16_t)((v.u + rounding) >> 16);
}

float cc_bf16_to_f32(uint16_t h)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}
