/*
 * testlib.h — helpers shared by the C tests (the static library cctest, linked by every C
 * test): their deterministic random numbers, the small model shapes they build, and the
 * golden fixtures' paths.
 */
#ifndef CC_TESTLIB_H
#define CC_TESTLIB_H

#include <stdint.h>

#include "cc_model.h"

/* tests/data/golden/, written by tests/ref/gen_golden.py; tiny.safetensors is a random
 * model F=3 (prb, thr, users), P=4, N=5, M=22, d=16, H=2, L=2, dff=32, Hz=6, S=900 s. */
#define TL_GOLDEN_DIR CC_TEST_DATA "/golden"
#define TL_TINY_MODEL TL_GOLDEN_DIR "/tiny.safetensors"

/*
 * The tests' generator: a 64-bit LCG (Knuth's MMIX constants), not lib's splitmix64
 * (cc_rng.h): the tests' reference values and tolerances were set on its sequences. The
 * state is the caller's; any seed will do.
 */

/** Advances *s and returns the new state (its high bits are the random ones). */
uint64_t tl_rng_next(uint64_t *s);

/** Uniform in [0, 1): the top 53 bits of the next state. */
double tl_rng_uniform(uint64_t *s);

/** Uniform in [-1, 1) with 24 random bits (the top 24 of the next state). */
float tl_rng_float(uint64_t *s);

/** Marsaglia's xorshift64 (13, 7, 17): advances *x (nonzero) and returns it. The fuzzing
 * loops of the decoder tests draw their edits from it. */
uint64_t tl_xorshift_next(uint64_t *x);

/** cc_hparams_default with the shape of the engine and snapshot tests: F=3 (bytes, prb,
 * users), P=4, N=5, M=24, d=16, H=2, L=2, dff=32, Hz=6, S=900 s. */
void tl_hparams_small(CcHparams *hp);

/** cc_hparams_default with the shape of the fuzz seeds (tests/data/fuzz_corpus): F=2, P=4,
 * N=3, M=8, d=8, H=2, L=1, dff=8, Hz=2; names, step and time zone left at their defaults. */
void tl_hparams_tiny(CcHparams *hp);

/** cc_model_open then cc_model_init_random(seed); fails the test on error. */
void tl_model_open(CcModel **m, const CcHparams *hp, uint64_t seed);

/* ---- the kernels' tests' --bench mode (dav1d's checkasm habit) ---- */

/** ns per call of fn(arg): the best of 5 runs of enough calls to last ~20 ms each. */
double tl_ns_per_call(void (*fn)(const void *), const void *arg);

/** Times a fast kernel and its reference twin on the same arguments; prints one line. */
void tl_bench_pair(const char *name, void (*fast)(const void *), void (*ref)(const void *),
                   const void *arg);

#endif
