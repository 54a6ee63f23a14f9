/*
 * cc_pool.c — worker threads woken per round (see cc_pool.h): a round counter under one
 * mutex, a condition variable to start a round and one to report it done. The workers
 * sleep between rounds (the engine runs one per step), so an idle engine costs no CPU.
 */
#include "cc_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct Worker {
    CcPool *p;
    int idx;
} Worker;

struct CcPool {
    CcPoolJob job;
    void *ctx;
    int n_threads;
    int n_workers;      ///< workers started (n_threads - 1 once open)
    pthread_t *threads; // worker i's at [i - 1]
    Worker *args;       // (n_threads)
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    uint64_t round; ///< bumped per round: a worker runs once per new value
    int pending, quit;
};

static void *worker_main(void *arg)
{
    Worker *a = arg;
    CcPool *p = a->p;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->round == seen)
            pthread_cond_wait(&p->cv_start, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->round;
        pthread_mutex_unlock(&p->mu);
        p->job(p->ctx, a->idx);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
}

int cc_pool_open(CcPool **out, int n_threads, CcPoolJob job, void *ctx)
{
    CcPool *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->job = job;
    p->ctx = ctx;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_start, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    int ret = -ENOMEM;
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->args = calloc((size_t)n_threads, sizeof *p->args);
    if (!p->threads || !p->args)
        goto error;
    for (int i = 1; i < n_threads; i++) {
        p->args[i].p = p;
        p->args[i].idx = i;
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, &p->args[i])) {
            ret = -EAGAIN;
            goto error;
        }
        p->n_workers = i;
    }
    *out = p;
    return 0;
error:
    cc_pool_close(&p);
    return ret;
}

void cc_pool_close(CcPool **pp)
{
    if (!pp || !*pp)
        return;
    CcPool *p = *pp;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->args);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_start);
    pthread_cond_destroy(&p->cv_done);
    free(p);
    *pp = NULL;
}

void cc_pool_run(CcPool *p)
{
    pthread_mutex_lock(&p->mu);
    p->pending = p->n_threads - 1;
    p->round++;
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    p->job(p->ctx, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending)
        pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
