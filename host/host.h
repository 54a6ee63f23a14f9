/*
 * host.h — process-level setup shared by the `cellcast` CLI and `cellcastd`: the things
 * lib/ deliberately leaves to its host because they are process-wide.
 *
 * OpenBLAS kernel choice. Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) picks its kernels from
 * the CPU model at load time and maps CPUs it does not know (e.g. AMD Zen 5) to "Haswell"
 * even when they have AVX-512, where its SkylakeX kernels are ~1.9x faster on our shapes.
 * OpenBLAS only honours OPENBLAS_CORETYPE when read at library load, so the host decides
 * before any BLAS call: setting `blas_coretype` ("auto" by default):
 *   - "auto": if the CPU has AVX-512F/BW/DQ/VL and OPENBLAS_CORETYPE is unset, re-execute
 *     the process once with OPENBLAS_CORETYPE=SKYLAKEX; otherwise keep OpenBLAS's
 *     own choice;
 *   - "native": never interfere;
 *   - any OpenBLAS core name ("SkylakeX", "Haswell", ...): force it (re-exec if it differs).
 * The environment variable OPENBLAS_CORETYPE, when set by the operator, always wins.
 * It also pins OpenBLAS to one thread (the engine parallelises over cells itself): unless
 * the operator set OPENBLAS_NUM_THREADS, it is set to 1 for the same single re-exec, so
 * OpenBLAS never starts its thread pool (which costs ~1.5x on small batches even when
 * openblas_set_num_threads(1) is called). The re-exec keeps the PID (systemd-safe).
 */
#ifndef CC_HOST_H
#define CC_HOST_H

/** Call first thing in main(). May re-execute the process (never returns then). verbose:
 *  say so on stderr when it re-executes for the kernel set (the daemon at log level debug;
 *  the CLI never: the same notice on every command of one machine is noise). */
void cc_host_setup_blas(int argc, char **argv, const char *coretype, int verbose);

/** The OpenBLAS kernel set in use ("Haswell", "SkylakeX", ...). */
const char *cc_host_blas_core(void);

/** Resident set size of this process in bytes (from /proc/self/statm), 0 if unknown. */
long long cc_host_rss_bytes(void);

#endif
