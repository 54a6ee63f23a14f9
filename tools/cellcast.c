/* cellcast.c — the `cellcast` command-line tool: train, evaluate, inspect and benchmark
 * cellcast-tx/2 models. One subcommand per file (cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include "cc_build_info.h"
#include "cli.h"
#include "host.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} commands[] = {
    {"info", cmd_info, "print a model's hyperparameters, features and sizes as JSON"},
    {"forward", cmd_forward, "run the engine step by step over a CSV of one cell"},
    {"bench", cmd_bench, "time the batched incremental step on synthetic cells"},
    {"train", cmd_train, "train a model on CSV history"},
    {"eval", cmd_eval, "rolling-origin evaluation against baselines"},
    {"learn", cmd_learn, "learn models from KPI history and publish the best (docs/learning.md)"},
    {"synth", cmd_synth, "generate synthetic multi-cell KPI history (long CSV)"},
    {"anomaly-eval", cmd_anomaly, "alert precision/recall on data with injected anomalies"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: cellcast <command> [options]   (cellcast <command> --help)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nEnvironment: OPENBLAS_CORETYPE overrides the BLAS kernel choice\n"
                 "(default: SkylakeX kernels on AVX-512 CPUs, applied by a silent re-exec;\n"
                 "`cellcast bench` reports the set in use).\n");
}

int main(int argc, char **argv)
{
    cc_host_setup_blas(argc, argv, "auto", 0);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cellcast %s\n", CC_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "cellcast: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
