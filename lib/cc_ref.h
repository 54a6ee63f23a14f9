/*
 * cc_ref.h — direct evaluation of the spec's steps 1–6 (tx/3 or tx/2, as the model is)
 * for one channel at one step, with
 * naive loops and double accumulation. The oracle of the tests and the path behind
 * `--no-cache` checks; deliberately shares no code with cc_engine.c beyond cc_kernels'
 * PE and time-feature formulas.
 */
#ifndef CC_REF_H
#define CC_REF_H

#include "cc_model.h"

/** Intermediate activations of one direct evaluation (all optional for the caller). */
typedef struct CcRefTrace {
    int n_tokens;       ///< T = n cached + 1 current; arrays below are packed with T
    int64_t *token_end; // (T)         end step q of each token, cached oldest first
    float *tokens_in;   // (T, IN)     normalised values + time features
    float *z;           // (L+1, T, D) layer inputs; z[L] is the last layer's output
    float *att;         // (L, H, T, T) attention weights, row = query token (0 = masked)
    float *lin_in;      // (R)         tx/3: the linear path's input r (NULL in tx/2)
} CcRefTrace;

/** Allocates a trace sized for hp; free with cc_ref_trace_close. */
int cc_ref_trace_open(CcRefTrace *tr, const CcHparams *hp);
void cc_ref_trace_close(CcRefTrace *tr);

/**
 * Forecast at step t for feature f of a channel whose raw values are x[p - p0] for
 * p = p0..t (so x has t - p0 + 1 values).
 * y (2HZ) gets the head output (tx/3: y[k][0] with the linear path added), mu/sigma the
 * normalisation. trace may be NULL.
 * Returns 0, -EAGAIN when the channel has no complete patch yet (cold start), -EINVAL.
 */
int cc_ref_forward(const CcModel *m, int f, const float *x, int64_t p0, int64_t t, float *y,
                   float *mu, float *sigma, CcRefTrace *trace);

#endif
