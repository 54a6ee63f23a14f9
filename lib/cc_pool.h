/*
 * cc_pool.h — a fixed set of worker threads that run one round of jobs at a time: the
 * engine's split of a step's cells over threads. Job 0 of each round runs on the caller's
 * thread, jobs 1.. on the workers; a round returns when all are done.
 */
#ifndef CC_POOL_H
#define CC_POOL_H

typedef struct CcPool CcPool;

/** Runs job idx of the current round; ctx is the one given to cc_pool_open. */
typedef void (*CcPoolJob)(void *ctx, int idx);

/**
 * Starts n_threads - 1 workers (n_threads ≥ 1) for rounds of n_threads jobs.
 * 0, -ENOMEM, or -EAGAIN when a thread cannot be started.
 */
int cc_pool_open(CcPool **out, int n_threads, CcPoolJob job, void *ctx);
/** Stops and joins the workers; NULL-safe. Not during a round. */
void cc_pool_close(CcPool **p);

/** One round: job(ctx, i) for every i < n_threads, i = 0 on this thread; then returns.
 *  What the caller wrote before is visible to the jobs, and what they wrote to it after. */
void cc_pool_run(CcPool *p);

#endif
