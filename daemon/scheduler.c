/* scheduler.c — micro-batching into cc_engine_step on one worker thread; see scheduler.h. */
#include "scheduler.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

int ccd_batch_push(CcdBatch *b, CcdCell *c, int64_t step)
{
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 1024;
        CcdItem *items = realloc(b->items, (size_t)cap * sizeof *items);
        if (!items)
            return -ENOMEM;
        b->items = items;
        float *values = realloc(b->values, (size_t)cap * (size_t)b->F * sizeof(float));
        if (!values)
            return -ENOMEM;
        b->values = values;
        b->cap = cap;
    }
    if (!b->n)
        b->t_open_ns = cc_now_ns();
    CcdItem *it = &b->items[b->n];
    memset(it, 0, sizeof *it);
    it->cell = c;
    it->step = step;
    return b->n++;
}

static void batch_clear(CcdBatch *b)
{
    b->n = 0;
    b->n_rounds = 0;
    b->kafka_hi = 0;
    b->enomem = 0;
    b->ns_step = b->ns_publish = 0;
}

struct CcdSched {
    CcdSchedSettings s;
    struct event_base *base;
    CcEngine *engine;
    int F;
    CcdBatch batches[2];
    CcdBatch *open, *inflight; /* inflight: dispatched, not yet completed on the loop */
    uint64_t kafka_last;       /* newest Kafka batch appended */
    pthread_t worker;
    int have_worker;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    CcdBatch *todo, *done; /* handoff slots, under lock */
    int quit;
    struct event *done_ev; /* reads wake_fd[0]: the worker finished a batch */
    int wake_fd[2];        /* self-pipe, so that libevent needs no locking (evthread) */
    CcdSchedStats st;
    /* worker scratch */
    CcStepInput *in;
    int *status, *order;
    float *fed; /* (scratch_cap, F) the previous steps of held items */
    int scratch_cap;
};

static const double batch_le[] = {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144};
static const double step_le[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                 0.05,   0.1,     0.25,   0.5,   1,      2.5,   5};

/* ---- worker ---- */

static int scratch(CcdSched *s, int n)
{
    if (n <= s->scratch_cap)
        return 0;
    int cap = n + n / 2 + 64;
    CcStepInput *in = realloc(s->in, (size_t)cap * sizeof *in);
    if (!in)
        return -ENOMEM;
    s->in = in;
    int *st = realloc(s->status, (size_t)cap * sizeof *st);
    if (!st)
        return -ENOMEM;
    s->status = st;
    int *ord = realloc(s->order, (size_t)cap * sizeof *ord);
    if (!ord)
        return -ENOMEM;
    s->order = ord;
    float *fed = realloc(s->fed, (size_t)cap * (size_t)s->F * sizeof *fed);
    if (!fed)
        return -ENOMEM;
    s->fed = fed;
    s->scratch_cap = cap;
    return 0;
}

/* The values the model gets for item it (its own, v, or with the host's hold the cell's
 * previous step again, copied to scratch row n). */
static const float *feed(CcdSched *s, CcdItem *it, const float *v, int n)
{
    if (!s->s.hold)
        return v;
    float *prev = s->fed + (size_t)n * (size_t)s->F;
    int have_prev = !it->reset_before && !cc_cell_history(it->cell->cell, it->step - 1, 1, prev);
    if (!s->s.hold(s->s.cookie, it->cell, v, it->imputed, it->present, have_prev) || !have_prev)
        return v;
    it->held = 1;
    return prev;
}

static void run_batch(CcdSched *s, CcdBatch *b)
{
    const int F = s->F;
    int64_t t0 = cc_now_ns(), tpub = 0;
    if (scratch(s, b->n)) {
        b->enomem = 1;
        for (int i = 0; i < b->n; i++)
            b->items[i].status = -ENOMEM;
        return;
    }
    /* counting sort of items by round, keeping arrival order inside a round */
    int *start = calloc((size_t)b->n_rounds + 1, sizeof *start);
    if (!start) {
        b->enomem = 1;
        for (int i = 0; i < b->n; i++)
            b->items[i].status = -ENOMEM;
        return;
    }
    for (int i = 0; i < b->n; i++)
        start[b->items[i].round + 1]++;
    for (int r = 0; r < b->n_rounds; r++)
        start[r + 1] += start[r];
    for (int i = 0; i < b->n; i++)
        s->order[start[b->items[i].round]++] = i;
    /* start[r] now is the end of round r */
    int pos = 0;
    for (int r = 0; r < b->n_rounds; r++) {
        int n = 0, first = pos;
        for (; pos < start[r]; pos++) {
            CcdItem *it = &b->items[s->order[pos]];
            if (it->reset_before)
                cc_cell_reset(it->cell->cell);
            s->in[n].cell = it->cell->cell;
            s->in[n].step = it->step;
            s->in[n].values = feed(s, it, b->values + (size_t)s->order[pos] * (size_t)F, n);
            n++;
        }
        int rc = cc_engine_step(s->engine, s->in, n, s->status);
        int64_t tp = cc_now_ns();
        for (int j = 0; j < n; j++) {
            CcdItem *it = &b->items[s->order[first + j]];
            if (rc == -ENOMEM) {
                it->status = -ENOMEM;
                cc_cell_reset(it->cell->cell);
                continue;
            }
            it->status = s->status[j];
            if (it->status == 0 && s->s.on_stepped) /* what was observed, held or not */
                s->s.on_stepped(s->s.cookie, it->cell, it->step,
                                b->values + (size_t)s->order[first + j] * (size_t)F, it->imputed,
                                it->present, it->held);
        }
        if (rc == -ENOMEM)
            b->enomem = 1;
        tpub += cc_now_ns() - tp;
    }
    free(start);
    cc_engine_stats(s->engine, &b->estats);
    b->ns_publish = tpub;
    b->ns_step = cc_now_ns() - t0 - tpub;
}

static void *worker_main(void *arg)
{
    CcdSched *s = arg;
    /* Linux nice values are per thread: a lower priority for the stepping thread keeps the
     * event loop's latency low when both want the same core. */
    if (s->s.worker_nice > 0 &&
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), s->s.worker_nice))
        LOG_WARN("sched", "cannot lower the worker's priority: %s", strerror(errno));
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->todo && !s->quit)
            pthread_cond_wait(&s->cond, &s->lock);
        if (!s->todo && s->quit)
            break;
        CcdBatch *b = s->todo;
        s->todo = NULL;
        pthread_mutex_unlock(&s->lock);
        run_batch(s, b);
        b->t_done_ns = cc_now_ns();
        pthread_mutex_lock(&s->lock);
        s->done = b;
        pthread_cond_broadcast(&s->cond);
        /* a full pipe already holds a pending wake-up */
        if (write(s->wake_fd[1], "", 1) < 0 && errno != EAGAIN)
            LOG_WARN("sched", "cannot wake the event loop: %s", strerror(errno));
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- loop side ---- */

static void complete(CcdSched *s, CcdBatch *b)
{
    s->st.batches++;
    s->st.items += (uint64_t)b->n;
    for (int i = 0; i < b->n; i++) {
        if (b->items[i].imputed)
            s->st.imputed_items++;
        if (b->items[i].status == -ENOMEM)
            s->st.enomem++;
        else if (b->items[i].status)
            s->st.refused++;
    }
    if (b->enomem)
        LOG_ERROR("sched", "out of memory stepping a batch of %d: its cells were reset", b->n);
    ccd_hist_add(&s->st.batch_size, b->n);
    ccd_hist_add(&s->st.step_seconds, (double)(b->ns_step + b->ns_publish) * 1e-9);
    ccd_hist_add(&s->st.delay_seconds, (double)(b->t_done_ns - b->t_open_ns) * 1e-9);
    s->st.engine = b->estats;
    s->st.ns_step += b->ns_step;
    s->st.ns_publish += b->ns_publish;
    s->inflight = NULL;
    if (s->s.on_done)
        s->s.on_done(s->s.cookie, b);
    batch_clear(b);
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
    CcdSched *s = arg;
    CcdBatch *b;
    (void)what;
    char sink[64];
    while (read(fd, sink, sizeof sink) > 0)
        ;
    pthread_mutex_lock(&s->lock);
    b = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->lock);
    if (b)
        complete(s, b);
    ccd_sched_maybe_flush(s, 0);
}

int ccd_sched_open(CcdSched **out, struct event_base *base, CcEngine *e,
                   const CcdSchedSettings *set)
{
    CcdSched *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return -ENOMEM;
    s->s = *set;
    s->base = base;
    s->engine = e;
    s->F = cc_engine_model(e)->hp.n_features;
    for (int i = 0; i < 2; i++)
        s->batches[i].F = s->F;
    s->open = &s->batches[0];
    ccd_hist_init(&s->st.batch_size, batch_le, (int)(sizeof batch_le / sizeof batch_le[0]));
    ccd_hist_init(&s->st.step_seconds, step_le, (int)(sizeof step_le / sizeof step_le[0]));
    ccd_hist_init(&s->st.delay_seconds, step_le, (int)(sizeof step_le / sizeof step_le[0]));
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (pipe2(s->wake_fd, O_NONBLOCK | O_CLOEXEC)) {
        int rc = -errno;
        free(s);
        return rc;
    }
    s->done_ev = event_new(base, s->wake_fd[0], EV_READ | EV_PERSIST, done_cb, s);
    if (!s->done_ev || event_add(s->done_ev, NULL) ||
        pthread_create(&s->worker, NULL, worker_main, s)) {
        if (s->done_ev)
            event_free(s->done_ev);
        close(s->wake_fd[0]);
        close(s->wake_fd[1]);
        free(s);
        return -ENOMEM;
    }
    s->have_worker = 1;
    *out = s;
    return 0;
}

CcdBatch *ccd_sched_open_batch(CcdSched *s) { return s->open; }

void ccd_sched_note_kafka(CcdSched *s, uint64_t id)
{
    if (id > s->kafka_last)
        s->kafka_last = id;
}

int ccd_sched_pending(const CcdSched *s) { return s->open->n; }
int ccd_sched_busy(const CcdSched *s) { return s->inflight != NULL; }

static void dispatch(CcdSched *s)
{
    CcdBatch *b = s->open;
    b->kafka_hi = s->kafka_last;
    s->s.seal(s->s.cookie, b);
    b->t_dispatch_ns = cc_now_ns();
    s->inflight = b;
    s->open = b == &s->batches[0] ? &s->batches[1] : &s->batches[0];
    batch_clear(s->open);
    pthread_mutex_lock(&s->lock);
    s->todo = b;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int ccd_sched_maybe_flush(CcdSched *s, int force)
{
    CcdBatch *b = s->open;
    if (s->inflight || !b->n)
        return 0;
    int due = force || b->n >= s->s.batch_steps ||
              cc_now_ns() - b->t_open_ns >= (int64_t)s->s.batch_ms * 1000000;
    if (!due)
        return 0;
    dispatch(s);
    return 1;
}

/* Waits for the in-flight batch on this thread and completes it. */
static void wait_inflight(CcdSched *s)
{
    if (!s->inflight)
        return;
    pthread_mutex_lock(&s->lock);
    while (!s->done)
        pthread_cond_wait(&s->cond, &s->lock);
    CcdBatch *b = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->lock);
    complete(s, b);
}

void ccd_sched_drain(CcdSched *s)
{
    wait_inflight(s);
    if (s->open->n) {
        dispatch(s);
        wait_inflight(s);
    }
}

const CcdSchedStats *ccd_sched_stats(const CcdSched *s) { return &s->st; }

void ccd_sched_set_batching(CcdSched *s, int batch_steps, int batch_ms)
{
    s->s.batch_steps = batch_steps;
    s->s.batch_ms = batch_ms;
}

void ccd_sched_close(CcdSched **ps)
{
    CcdSched *s = *ps;
    if (!s)
        return;
    ccd_sched_drain(s);
    pthread_mutex_lock(&s->lock);
    s->quit = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (s->have_worker)
        pthread_join(s->worker, NULL);
    event_free(s->done_ev);
    close(s->wake_fd[0]);
    close(s->wake_fd[1]);
    for (int i = 0; i < 2; i++) {
        free(s->batches[i].items);
        free(s->batches[i].values);
    }
    free(s->in);
    free(s->status);
    free(s->order);
    free(s->fed);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    *ps = NULL;
}
