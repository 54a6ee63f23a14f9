/*
 * cc_rng.h — splitmix64, the one small deterministic generator of the project (model
 * initialisation, training shuffles, synthetic data, anomaly injection, tests). Not for
 * anything that must be unpredictable.
 */
#ifndef CC_RNG_H
#define CC_RNG_H

#include <stdint.h>

/** Next 64 random bits; advances *state. */
static inline uint64_t cc_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/** Uniform in [0, 1) with 53 random bits. */
static inline double cc_rng_uniform(uint64_t *state)
{
    return (double)(cc_rng_next(state) >> 11) * 0x1.0p-53;
}

#endif
