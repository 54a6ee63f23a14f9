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
#include "cc_json.h"
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
    uint64_t h =
        (cell * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)p * 0xbf58476d1ce4e5b9ULL) ^ (uint64_t)f;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 29;
    double noise = (h >> 11) * (1.0 / 9007199254740992.0) - 0.5;
    double scale = pow(10.0, (double)(f % 5));
    return (float)(scale * (1.0 + 0.5 * sin(2 * M_PI * (double)(p % 24) / 24.0 + f) + 0.2 * noise));
}

/* The cells of a bench run and their step inputs. */
typedef struct Bench {
    int cells, steps, F;
    uint64_t seed;
    int64_t t0; /* absolute step of the warm step */
    CcEngine *e;
    CcCell **cell;
    CcStepInput *in;
    float *vals; /* (cells, F) values of one step */
} Bench;

/* Every cell restored with a full window of history ending at t0, then one step that
 * builds every cache. 0 or -ENOMEM. */
static int bench_warm(Bench *b, const CcHparams *hp)
{
    const int F = b->F, P = hp->patch_len;
    int R = hp->n_patches * P + P > hp->norm_window + P - 1 ? hp->n_patches * P + P
                                                            : hp->norm_window + P - 1;
    float *hist = malloc((size_t)R * F * sizeof(float));
    b->cell = calloc((size_t)b->cells, sizeof *b->cell);
    b->in = calloc((size_t)b->cells, sizeof *b->in);
    b->vals = malloc((size_t)b->cells * F * sizeof(float));
    int rc = -ENOMEM;
    if (!b->cell || !b->in || !b->vals || !hist)
        goto end;
    /* start mid-patch, a realistic absolute position (2026 in steps of S) */
    int64_t t0 = 1780000000 / hp->step_seconds;
    b->t0 = t0 = t0 - t0 % P + P / 2;
    for (int i = 0; i < b->cells; i++) {
        if (cc_cell_open(&b->cell[i], b->e) < 0)
            goto end;
        for (int r = 0; r < R; r++)
            for (int f = 0; f < F; f++)
                hist[r * F + f] = synth_value((uint64_t)i + b->seed, f, t0 - R + 1 + r);
        cc_cell_restore(b->cell[i], t0 - R + 1, t0 - R + 1, R, hist);
        b->in[i] = (CcStepInput){b->cell[i], t0, NULL};
    }
    if (cc_engine_step(b->e, b->in, b->cells, NULL) < 0)
        goto end;
    rc = 0;
end:
    free(hist);
    return rc;
}

/* The timed steps: wall and CPU seconds. 0 or -ENOMEM. */
static int bench_run(Bench *b, double *secs, double *cpu)
{
    const int F = b->F;
    struct timespec cpu0, cpu1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    int64_t start = cc_now_ns();
    for (int k = 1; k <= b->steps; k++) {
        for (int i = 0; i < b->cells; i++) {
            for (int f = 0; f < F; f++)
                b->vals[(size_t)i * F + f] = synth_value((uint64_t)i + b->seed, f, b->t0 + k);
            b->in[i] = (CcStepInput){b->cell[i], b->t0 + k, &b->vals[(size_t)i * F]};
        }
        if (cc_engine_step(b->e, b->in, b->cells, NULL) < 0)
            return -ENOMEM;
    }
    *secs = (cc_now_ns() - start) * 1e-9;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    /* CPU time tells how busy the machine was: cpu/wall well below the thread count means
     * other processes competed, and the wall-clock rate understates the engine. */
    *cpu = (cpu1.tv_sec - cpu0.tv_sec) + (cpu1.tv_nsec - cpu0.tv_nsec) * 1e-9;
    return 0;
}

static void bench_print(const Bench *b, const char *model_path, const CcEngineSettings *s,
                        double secs, double cpu, long long rss0, long long rss1)
{
    const int cells = b->cells, F = b->F, steps = b->steps;
    CcEngineStats st;
    cc_engine_stats(b->e, &st);
    double ch_steps = (double)cells * F * steps;
    double busy = (double)(st.ns_dense + st.ns_attention + st.ns_rebuild + st.ns_other);
    char name[8192];
    CcJsonBuf jb = cc_json_buf(name, sizeof name);
    cc_json_str(&jb, model_path ? model_path : "random-default-shape");
    printf("{\n  \"model\": %s,\n  \"cells\": %d,\n  \"features\": %d,\n  \"steps\": %d,\n"
           "  \"threads\": %d,\n  \"kv\": \"%s\",\n  \"no_cache\": %s,\n"
           "  \"dense\": \"%s\",\n  \"blas_core\": \"%s\",\n  \"seconds\": %.4f,\n  "
           "\"cpu_seconds\": %.4f,\n"
           "  \"channel_steps_per_s\": %.0f,\n  \"cell_steps_per_s\": %.0f,\n"
           "  \"ns_per_channel_step\": %.1f,\n  \"rebuild_tokens_per_channel_step\": %.3f,\n"
           "  \"split\": {\"dense\": %.3f, \"attention\": %.3f, \"rebuild\": %.3f, \"other\": "
           "%.3f},\n  \"rss_bytes\": %lld,\n  \"rss_bytes_per_cell\": %.0f,\n"
           "  \"state_bytes_per_cell\": %zu,\n  \"kv_bytes_per_cell\": %zu\n}\n",
           name, cells, F, steps, s->n_threads,
           s->kv_type == CC_KV_F32   ? "f32"
           : s->kv_type == CC_KV_F16 ? "f16"
                                     : "bf16",
           s->no_cache ? "true" : "false", s->blas_dense ? "blas" : "packed", cc_host_blas_core(),
           secs, cpu, ch_steps / secs, (double)cells * steps / secs, secs * 1e9 / ch_steps,
           (double)st.rebuild_tokens / ch_steps, st.ns_dense / busy, st.ns_attention / busy,
           st.ns_rebuild / busy, st.ns_other / busy, cc_host_rss_bytes(),
           (double)(rss1 - rss0) / cells, cc_engine_cell_bytes(b->e),
           cc_engine_kv_bytes_per_cell(b->e));
}

int cmd_bench(int argc, char **argv)
{
    const char *model_path = NULL;
    int cells = 1024, steps = 0, ret = 1;
    int64_t seed = 1;
    char err[512];
    CcModel *m = NULL;
    Bench b = {0};
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
        .usage =
            "cellcast bench [--model FILE] [--cells N] [--steps K] [--threads T]\n"
            "                      [--kv f32|f16|bf16] [--no-cache] [--seed S] [--batch-cells B]\n"
            "                      [--dense packed|blas]",
        .about = "Times the batched incremental step. Without --model, a randomly initialised\n"
                 "model of the default shape (F=8, P=16, N=21, M=336, d=64, H=4, L=2, dff=128,\n"
                 "Hz=24) is used. Prints JSON with channel_steps_per_s, ns per channel-step, the\n"
                 "split between dense, attention, rebuild and other time, RSS.",
        CC_OPTS_TABLE(opts),
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
    const int P = hp->patch_len;
    if (steps == 0)
        steps = 4 * P;
    if (steps < 2 * P) {
        fprintf(stderr, "cellcast bench: --steps must be ≥ 2P = %d so rebuilds are timed\n", 2 * P);
        goto end;
    }
    b = (Bench){.cells = cells, .steps = steps, .F = hp->n_features, .seed = (uint64_t)seed};
    long long rss0 = cc_host_rss_bytes();
    if (cc_engine_open(&b.e, m, &s, NULL, 0) < 0 || bench_warm(&b, hp))
        goto oom;
    long long rss1 = cc_host_rss_bytes();
    cc_engine_reset_stats(b.e);
    double secs, cpu;
    if (bench_run(&b, &secs, &cpu))
        goto oom;
    bench_print(&b, model_path, &s, secs, cpu, rss0, rss1);
    ret = 0;
    goto end;
oom:
    fprintf(stderr, "cellcast bench: out of memory\n");
end:
    for (int i = 0; b.cell && i < b.cells; i++)
        cc_cell_close(&b.cell[i]);
    free(b.cell);
    free(b.in);
    free(b.vals);
    cc_engine_close(&b.e);
    cc_model_close(&m);
    return ret;
}
