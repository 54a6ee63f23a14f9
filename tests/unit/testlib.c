/* testlib.c — helpers shared by the C tests; see testlib.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <cmocka.h>

#include "testlib.h"

uint64_t tl_rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s;
}

double tl_rng_uniform(uint64_t *s) { return (double)(tl_rng_next(s) >> 11) / 9007199254740992.0; }

float tl_rng_float(uint64_t *s)
{
    return (float)((tl_rng_next(s) >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

uint64_t tl_xorshift_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

void tl_hparams_small(CcHparams *hp)
{
    cc_hparams_default(hp);
    hp->n_features = 3;
    hp->patch_len = 4;
    hp->n_patches = 5;
    hp->norm_window = 24;
    hp->d_model = 16;
    hp->n_heads = 2;
    hp->n_layers = 2;
    hp->d_ff = 32;
    hp->horizon = 6;
    hp->step_seconds = 900;
    snprintf(hp->features[0], CC_FEATURE_NAME_MAX, "bytes");
    snprintf(hp->features[1], CC_FEATURE_NAME_MAX, "prb");
    snprintf(hp->features[2], CC_FEATURE_NAME_MAX, "users");
}

void tl_hparams_tiny(CcHparams *hp)
{
    cc_hparams_default(hp);
    hp->n_features = 2;
    hp->patch_len = 4;
    hp->n_patches = 3;
    hp->norm_window = 8;
    hp->d_model = 8;
    hp->n_heads = 2;
    hp->n_layers = 1;
    hp->d_ff = 8;
    hp->horizon = 2;
}

void tl_model_open(CcModel **m, const CcHparams *hp, uint64_t seed)
{
    char err[256];
    int ret = cc_model_open(m, hp, err, sizeof err);
    if (ret)
        fail_msg("cc_model_open: %s (%d)", err, ret);
    cc_model_init_random(*m, seed);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double tl_ns_per_call(void (*fn)(const void *), const void *arg)
{
    long calls = 1;
    for (double t0 = now_s(); now_s() - t0 < 0.02; calls *= 2)
        for (long i = 0; i < calls; i++)
            fn(arg);
    double best = INFINITY;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        for (long i = 0; i < calls; i++)
            fn(arg);
        best = fmin(best, (now_s() - t0) / calls * 1e9);
    }
    return best;
}

void tl_bench_pair(const char *name, void (*fast)(const void *), void (*ref)(const void *),
                   const void *arg)
{
    double f = tl_ns_per_call(fast, arg), r = tl_ns_per_call(ref, arg);
    printf("%-44s %10.1f ns %10.1f ns %7.1fx\n", name, f, r, r / f);
}
