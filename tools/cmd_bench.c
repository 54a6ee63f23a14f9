/*
 * cmd_bench.c — `cellcast bench`: times the batched incremental step. Warms N cells with a
 * full window of synthetic history (restored, then one step to build the caches), then
 * times K steps of all N cells (K ≥ 2P so rebuilds are included) and prints JSON.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc_engine.h"
#include "cli.h"
#include "host.h"

static int opt_dense(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    if (strcmp(value, "packed") && strcmp(value, "blas")) {
        snprintf(err, errlen, "--dense must be packed or blas, not '%s'", value);
        return -EINVAL;
    }
    *(int *)opt->target = !strcmp(value, "blas");
    return 0;
}

static float synth_value(uint64_t cell, int f, int64_t p)
{
    uint64_t h = (cell * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)p * 0xbf58476d1ce4e5b9ULL) ^ (uint64_t)f;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 29;
    double noise = (h >> 11) * (1.0 / 9007199254740992.0) - 0.5;
    double scale = pow(10.0, (double)(f % 5));
    return (float)(scale * (1.0 + 0.5 * sin(2 * M_PI * (double)(p % 24) / 24.0 + f) + 0.2 * noise));
}

int cmd_bench(int argc, char **argv)
{
    const char *model_path = NULL;
    int cells = 1024, steps = 0, ret = 1;
    int64_t seed = 1;
    char err[512];
    CcModel *m = NULL;
    CcEngine *e = NULL;
    CcCell **cell = NULL;
    CcStepInput *in = NULL;
    float *vals = NULL, *hist = NULL;
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    CcOpt opts[] = {
        CC_OPTS_STR("model", &model_path, "FILE", "the model (default: see below)",
                    .short_name = 'm'),
        CC_OPTS_INT("cells", &cells, 1, 10000000, "N", "cells", .short_name = 'c',
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_INT("steps", &steps, 0, 1e9, "K", "timed steps, ≥ 2P (default 4P)",
                    .short_name = 'k'),
        CC_OPTS_INT("threads", &s.n_threads, 1, 256, "T", "engine threads", .short_name = 't',
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_CALL("kv", cli_opt_kv, &s.kv_type, "f32|f16|bf16", "KV cache type (default f32)",
                     .short_name = 'v'),
        CC_OPTS_FLAG("no-cache", &s.no_cache, "recompute every step without the KV caches",
                     .short_name = 'n'),
        CC_OPTS_INT64("seed", &seed, 0, 9223372036854775807.0, "S",
                      "seed of the random model and of the synthetic values", .short_name = 's',
                      .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_INT("batch-cells", &s.max_batch_cells, 1, 2147483647, "B",
                    "cells per internal engine batch", .short_name = 'b',
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_CALL("dense", opt_dense, &s.blas_dense, "packed|blas",
                     "dense layers on the packed AVX-512 kernels (default, where the\n"
                     "CPU has AVX-512) or through OpenBLAS sgemm, for comparison",
                     .short_name = 'd'),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast bench",
        .usage = "cellcast bench [--model FILE] [--cells N] [--steps K] [--threads T]\n"
                 "                      [--kv f32|f16|bf16] [--no-cache] [--seed S] [--batch-cells B]\n"
                 "                      [--dense packed|blas]",
        .about = "Times the batched incremental step. Without --model, a randomly initialised\n"
                 "model of the default shape (F=8, P=16, N=21, M=336, d=64, H=4, L=2, dff=128,\n"
                 "Hz=24) is used. Prints JSON with channel_steps_per_s, ns per channel-step, the\n"
                 "split between dense, attention, rebuild and other time, RSS.",
        .opts = opts,
        .n_opts = sizeof opts / sizeof opts[0],
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    if (model_path) {
        if (cc_model_open_file(&m, model_path, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast bench: %s: %s\n", model_path, err);
            return 1;
        }
    } else {
        CcHparams hp;
        cc_hparams_default(&hp);
        if (cc_model_open(&m, &hp, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast bench: %s\n", err);
            return 1;
        }
        cc_model_init_random(m, (uint64_t)seed);
    }
    const CcHparams *hp = &m->hp;
    const int F = hp->n_features, P = hp->patch_len;
    if (steps == 0)
        steps = 4 * P;
    if (steps < 2 * P) {
        fprintf(stderr, "cellcast bench: --steps must be ≥ 2P = %d so rebuilds are timed\n",
                2 * P);
        goto end;
    }
    long long rss0 = ccd_host_rss_bytes();
    if (cc_engine_open(&e, m, &s, NULL, 0) < 0)
        goto oom;
    int R = hp->n_patches * P + P > hp->norm_window + P - 1 ? hp->n_patches * P + P
                                                            : hp->norm_window + P - 1;
    cell = calloc((size_t)cells, sizeof *cell);
    in = calloc((size_t)cells, sizeof *in);
    vals = malloc((size_t)cells * F * sizeof(float));
    hist = malloc((size_t)R * F * sizeof(float));
    if (!cell || !in || !vals || !hist)
        goto oom;
    /* start mid-patch, a realistic absolute position (2026 in steps of S) */
    int64_t t0 = 1780000000 / hp->step_seconds;
    t0 = t0 - t0 % P + P / 2;
    for (int i = 0; i < cells; i++) {
        if (cc_cell_open(&cell[i], e) < 0)
            goto oom;
        for (int r = 0; r < R; r++)
            for (int f = 0; f < F; f++)
                hist[r * F + f] = synth_value((uint64_t)i + (uint64_t)seed, f, t0 - R + 1 + r);
        cc_cell_restore(cell[i], t0 - R + 1, t0 - R + 1, R, hist);
        in[i] = (CcStepInput){cell[i], t0, NULL};
    }
    if (cc_engine_step(e, in, cells, NULL) < 0) /* warm: builds every cache */
        goto oom;
    long long rss1 = ccd_host_rss_bytes();
    cc_engine_reset_stats(e);
    struct timespec cpu0, cpu1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    int64_t start = cc_now_ns();
    for (int k = 1; k <= steps; k++) {
        for (int i = 0; i < cells; i++) {
            for (int f = 0; f < F; f++)
                vals[(size_t)i * F + f] = synth_value((uint64_t)i + (uint64_t)seed, f, t0 + k);
            in[i] = (CcStepInput){cell[i], t0 + k, &vals[(size_t)i * F]};
        }
        if (cc_engine_step(e, in, cells, NULL) < 0)
            goto oom;
    }
    double secs = (cc_now_ns() - start) * 1e-9;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    /* CPU time tells how busy the machine was: cpu/wall well below the thread count means
     * other processes competed, and the wall-clock rate understates the engine. */
    double cpu = (cpu1.tv_sec - cpu0.tv_sec) + (cpu1.tv_nsec - cpu0.tv_nsec) * 1e-9;
    CcEngineStats st;
    cc_engine_stats(e, &st);
    double ch_steps = (double)cells * F * steps;
    double busy = (double)(st.ns_dense + st.ns_attention + st.ns_rebuild + st.ns_other);
    printf("{\n  \"model\": \"%s\",\n  \"cells\": %d,\n  \"features\": %d,\n  \"steps\": %d,\n"
           "  \"threads\": %d,\n  \"kv\": \"%s\",\n  \"no_cache\": %s,\n"
           "  \"dense\": \"%s\",\n  \"blas_core\": \"%s\",\n  \"seconds\": %.4f,\n  \"cpu_seconds\": %.4f,\n"
           "  \"channel_steps_per_s\": %.0f,\n  \"cell_steps_per_s\": %.0f,\n"
           "  \"ns_per_channel_step\": %.1f,\n  \"rebuild_tokens_per_channel_step\": %.3f,\n"
           "  \"split\": {\"dense\": %.3f, \"attention\": %.3f, \"rebuild\": %.3f, \"other\": "
           "%.3f},\n  \"rss_bytes\": %lld,\n  \"rss_bytes_per_cell\": %.0f,\n"
           "  \"state_bytes_per_cell\": %zu,\n  \"kv_bytes_per_cell\": %zu\n}\n",
           model_path ? model_path : "random-default-shape", cells, F, steps, s.n_threads,
           s.kv_type == CC_KV_F32 ? "f32" : s.kv_type == CC_KV_F16 ? "f16" : "bf16",
           s.no_cache ? "true" : "false", s.blas_dense ? "blas" : "packed", ccd_host_blas_core(), secs, cpu, ch_steps / secs,
           (double)cells * steps / secs, secs * 1e9 / ch_steps,
           (double)st.rebuild_tokens / ch_steps, st.ns_dense / busy, st.ns_attention / busy,
           st.ns_rebuild / busy, st.ns_other / busy, ccd_host_rss_bytes(),
           (double)(rss1 - rss0) / cells, cc_engine_cell_bytes(e),
           cc_engine_kv_bytes_per_cell(e));
    ret = 0;
    goto end;
oom:
    fprintf(stderr, "cellcast bench: out of memory\n");
end:
    for (int i = 0; cell && i < cells; i++)
        cc_cell_close(&cell[i]);
    free(cell);
    free(in);
    free(vals);
    free(hist);
    cc_engine_close(&e);
    cc_model_close(&m);
    return ret;
}
