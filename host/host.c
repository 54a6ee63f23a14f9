/* host.c — process-level setup for the CLI and the daemon: OpenBLAS kernel choice and
 * threading, resident-memory reading. See host.h for the policy. */
#include "host.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Declared by OpenBLAS but not by every cblas.h. */
char *openblas_get_corename(void);
void openblas_set_num_threads(int);

static int cpu_has_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

void cc_host_setup_blas(int argc, char **argv, const char *coretype, int verbose)
{
    const char *want = NULL;
    int reexec = 0;
    if (!coretype || !*coretype)
        coretype = "auto";
    /* OpenBLAS's pthread build starts its thread pool when it loads and, even after
     * openblas_set_num_threads(1), pays for it on every small sgemm (a one-cell step runs
     * ~1.5x faster with the pool never started). Only the environment at load time stops
     * it, so it is set here and applied by the same single re-exec. */
    if (!getenv("CELLCAST_BLAS_REEXECED") && !getenv("OPENBLAS_NUM_THREADS")) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        reexec = 1;
    }
    if (getenv("CELLCAST_BLAS_REEXECED") || getenv("OPENBLAS_CORETYPE"))
        want = NULL; /* operator's choice, or we already re-executed */
    else if (!strcasecmp(coretype, "auto"))
        want = cpu_has_avx512() && strcasecmp(openblas_get_corename(), "SkylakeX") &&
                       strcasecmp(openblas_get_corename(), "Cooperlake") &&
                       strcasecmp(openblas_get_corename(), "SapphireRapids")
                   ? "SKYLAKEX"
                   : NULL;
    else if (strcasecmp(coretype, "native") && strcasecmp(openblas_get_corename(), coretype))
        want = coretype;
    if (want) {
        setenv("OPENBLAS_CORETYPE", want, 1);
        /* Only when asked: on a CPU OpenBLAS does not know this would otherwise print on
         * every CLI command (the choice is the same each time on one machine); the set in
         * use is reported anyway (`cellcast bench`'s blas_core; cellcastd's status, memory.blas,
         * and cellcast_build_info{blas}). */
        if (verbose) {
            const char *prog = argc > 0 && argv[0] ? argv[0] : "cellcast";
            const char *slash = strrchr(prog, '/');
            fprintf(stderr,
                    "%s: OpenBLAS chose %s kernels; re-executing with "
                    "OPENBLAS_CORETYPE=%s (blas_coretype=%s)\n",
                    slash ? slash + 1 : prog, openblas_get_corename(), want, coretype);
        }
        reexec = 1;
    }
    if (reexec) {
        setenv("CELLCAST_BLAS_REEXECED", "1", 1);
        fflush(stderr);
        execv("/proc/self/exe", argv);
        perror("cellcast: re-exec for the OpenBLAS environment failed, continuing");
    }
    openblas_set_num_threads(1);
}

const char *cc_host_blas_core(void) { return openblas_get_corename(); }

long long cc_host_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, rss = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%lld %lld", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return rss * sysconf(_SC_PAGESIZE);
}
