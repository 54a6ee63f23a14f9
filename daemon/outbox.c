/*
 * outbox.c — the alert outbox (outbox.h): the journal of transitions, its fsync before
 * production, delivery reports, re-production of what was not confirmed.
 */
#include "outbox.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc_anomaly.h"
#include "log.h"

#define QBUCKETS 4096

/* A cell's newest journaled step (the replay's quiet step). */
typedef struct QEntry {
    struct QEntry *next;
    int64_t step;
    char cell[];
} QEntry;

enum { P_TODO, P_SENT, P_DONE };

/* A journaled transition not yet confirmed. */
typedef struct Pending {
    uint64_t id;
    int64_t step;
    int state;
    size_t len;
    char *json; /* after cell, in the same allocation */
    char cell[];
} Pending;

struct CcdOutbox {
    char path[PATH_MAX + 16];
    FILE *f;
    int dirty; /* records added since the last sync */
    /* the quiet map: read by the worker (alerts.c: a cell's state created on the worker) */
    pthread_mutex_t qlock;
    QEntry *qb[QBUCKETS];
    /* unconfirmed transitions, by increasing id (ids are given in order) */
    Pending **p;
    size_t pn, pcap, ndone;
    uint64_t next_id;
    CcdOutboxStats st;
    CcdRateLimit rl;
};

/* ---- the quiet map ---- */

/* qlock held */
static QEntry **qfind(CcdOutbox *o, const char *cell)
{
    QEntry **pp = &o->qb[cc_fnv1a_str(cell) % QBUCKETS];
    while (*pp && strcmp((*pp)->cell, cell))
        pp = &(*pp)->next;
    return pp;
}

static void qset(CcdOutbox *o, const char *cell, int64_t step)
{
    pthread_mutex_lock(&o->qlock);
    QEntry **pp = qfind(o, cell);
    if (*pp) {
        if (step > (*pp)->step)
            (*pp)->step = step;
    } else {
        size_t n = strlen(cell) + 1;
        QEntry *e = malloc(sizeof *e + n);
        if (e) {
            memcpy(e->cell, cell, n);
            e->step = step;
            e->next = NULL;
            *pp = e;
        }
    }
    pthread_mutex_unlock(&o->qlock);
}

int64_t ccd_outbox_quiet_step(CcdOutbox *o, const char *cell)
{
    pthread_mutex_lock(&o->qlock);
    QEntry **pp = qfind(o, cell);
    int64_t s = *pp ? (*pp)->step : -1;
    pthread_mutex_unlock(&o->qlock);
    return s;
}

/* ---- unconfirmed transitions ---- */

static Pending *pending_new(CcdOutbox *o, uint64_t id, const char *cell, int64_t step,
                            const char *json, size_t len)
{
    if (o->pn == o->pcap) {
        size_t cap = o->pcap ? 2 * o->pcap : 64;
        Pending **np = realloc(o->p, cap * sizeof *np);
        if (!np)
            return NULL;
        o->p = np;
        o->pcap = cap;
    }
    size_t cn = strlen(cell) + 1;
    Pending *e = malloc(sizeof *e + cn + len + 1);
    if (!e)
        return NULL;
    e->id = id;
    e->step = step;
    e->state = P_TODO;
    e->len = len;
    memcpy(e->cell, cell, cn);
    e->json = e->cell + cn;
    memcpy(e->json, json, len);
    e->json[len] = 0;
    o->p[o->pn++] = e;
    return e;
}

/* The unconfirmed transition with this id, NULL if none (binary search: ids increase). */
static Pending *pending_find(CcdOutbox *o, uint64_t id)
{
    size_t lo = 0, hi = o->pn;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->p[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->pn && o->p[lo]->id == id ? o->p[lo] : NULL;
}

/* Drops the confirmed entries once they are half of the vector (amortised O(1)). */
static void pending_sweep(CcdOutbox *o)
{
    if (o->ndone * 2 < o->pn)
        return;
    size_t j = 0;
    for (size_t i = 0; i < o->pn; i++) {
        if (o->p[i]->state == P_DONE)
            free(o->p[i]);
        else
            o->p[j++] = o->p[i];
    }
    o->pn = j;
    o->ndone = 0;
}

static void mark_done(CcdOutbox *o, Pending *e)
{
    e->state = P_DONE;
    o->ndone++;
    if (o->f) {
        /* in the page cache: survives a SIGKILL; lost at a power loss = one duplicate */
        fprintf(o->f, "D %" PRIu64 "\n", e->id);
        fflush(o->f);
    }
    pending_sweep(o);
}

/* ---- the journal ---- */

static void journal_load(CcdOutbox *o)
{
    FILE *f = fopen(o->path, "r");
    char line[8192];
    int n = 0, skipped = 0;
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        unsigned long long id;
        long long step;
        char cell[CC_ANOMALY_CELL_ID_MAX + 1];
        int off = 0;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = 0;
        else if (!feof(f)) { /* longer than any transition: not ours */
            skipped++;
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            continue;
        }
        if (sscanf(line, "T %llu %lld %64s %n", &id, &step, cell, &off) == 3 && off > 0 &&
            line[off] == '{') {
            /* the line ends with its JSON: a line cut by a crash has no closing brace */
            if (line[len - 1] != '}' || !pending_new(o, id, cell, step, line + off, len - off)) {
                skipped++;
                continue;
            }
            qset(o, cell, step);
            if (id >= o->next_id)
                o->next_id = id + 1;
        } else if (sscanf(line, "D %llu", &id) == 1) {
            Pending *e = pending_find(o, id);
            if (e && e->state != P_DONE) {
                e->state = P_DONE;
                o->ndone++;
            }
        } else if (sscanf(line, "%lld %64s", &step, cell) == 2) {
            qset(o, cell, step);
            n++;
        } else if (line[0]) {
            skipped++;
        }
    }
    fclose(f);
    pending_sweep(o);
    o->ndone = 0;
    for (size_t i = 0; i < o->pn; i++)
        o->ndone += o->p[i]->state == P_DONE;
    o->st.recovered = o->pn - o->ndone;
    LOG_INFO("alerts",
             "journal %s: %d cell(s) with transitions delivered, %" PRIu64
             " transition(s) not confirmed by Kafka before the last stop (produced again: "
             "consumers dedupe on alert id + state + severity)%s",
             o->path, n, o->st.recovered, skipped ? "; unreadable lines skipped" : "");
    if (skipped)
        LOG_WARN("alerts", "journal %s: %d unreadable line(s) skipped (a write cut by a crash?)",
                 o->path, skipped);
}

void ccd_outbox_compact(CcdOutbox *o)
{
    char tmp[PATH_MAX + 32];
    if (!o->path[0])
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp", o->path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        LOG_WARN("alerts", "cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    /* the quiet steps of every cell, then what is still unconfirmed (its step again) */
    pthread_mutex_lock(&o->qlock);
    for (int b = 0; b < QBUCKETS; b++)
        for (QEntry *e = o->qb[b]; e; e = e->next)
            fprintf(f, "%lld %s\n", (long long)e->step, e->cell);
    pthread_mutex_unlock(&o->qlock);
    for (size_t i = 0; i < o->pn; i++)
        if (o->p[i]->state != P_DONE)
            fprintf(f, "T %" PRIu64 " %lld %s %s\n", o->p[i]->id, (long long)o->p[i]->step,
                    o->p[i]->cell, o->p[i]->json);
    int bad = fflush(f) || fsync(fileno(f));
    bad |= fclose(f);
    if (bad || rename(tmp, o->path)) {
        LOG_WARN("alerts", "cannot replace %s: %s", o->path, strerror(errno));
        unlink(tmp);
        return;
    }
    if (o->f)
        fclose(o->f);
    o->f = fopen(o->path, "a");
    o->dirty = 0;
}

/* ---- production ---- */

static void on_delivered(void *cookie, uint64_t id, int err)
{
    CcdOutbox *o = cookie;
    Pending *e = pending_find(o, id);
    if (!e || e->state != P_SENT)
        return;
    if (!err) {
        o->st.delivered++;
        mark_done(o, e);
        return;
    }
    /* the producer gave up (its retries and backoff are spent): again on the next flush */
    o->st.failed++;
    e->state = P_TODO;
}

int ccd_outbox_add(CcdOutbox *o, const char *cell, int64_t step, const char *json, size_t len)
{
    Pending *e = pending_new(o, o->next_id, cell, step, json, len);
    if (!e)
        return -ENOMEM;
    o->next_id++;
    qset(o, cell, step);
    if (o->f) {
        fprintf(o->f, "T %" PRIu64 " %lld %s %s\n", e->id, (long long)step, cell, e->json);
        o->dirty = 1;
    }
    return 0;
}

void ccd_outbox_note(CcdOutbox *o, const char *cell, int64_t step)
{
    qset(o, cell, step);
    if (o->f) {
        fprintf(o->f, "%lld %s\n", (long long)step, cell);
        fflush(o->f);
    }
}

void ccd_outbox_flush(CcdOutbox *o, CcdKafka *k, const char *topic)
{
    if (o->f && o->dirty) {
        /* durable before produced: at-least-once across a crash or a power loss */
        if (fflush(o->f) || fdatasync(fileno(o->f))) {
            o->st.sync_errors++;
            CCD_LOG_RL_AT(&o->rl, CC_LOG_ERROR, "alerts",
                          "cannot sync the journal %s: %s (alert transitions are produced "
                          "anyway; a crash now may lose them)",
                          o->path, strerror(errno));
        }
        o->dirty = 0;
    }
    for (size_t i = 0; k && i < o->pn; i++) {
        Pending *e = o->p[i];
        if (e->state != P_TODO)
            continue;
        e->state = P_SENT; /* before: a synchronous give-up reports at once */
        if (ccd_kafka_produce_tracked(k, topic, e->cell, strlen(e->cell), e->json, e->len,
                                      on_delivered, o, e->id)) {
            e->state = P_TODO;
            o->st.refused++;
            break; /* in order: the rest waits for this one */
        }
        o->st.produced++;
    }
}

void ccd_outbox_stats(const CcdOutbox *o, CcdOutboxStats *st)
{
    *st = o->st;
    st->unconfirmed = o->pn - o->ndone;
}

/* ---- lifecycle ---- */

int ccd_outbox_open(CcdOutbox **out, const char *path, char *err, size_t errlen)
{
    CcdOutbox *o = calloc(1, sizeof *o);
    if (!o)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    pthread_mutex_init(&o->qlock, NULL);
    o->next_id = 1;
    snprintf(o->path, sizeof o->path, "%s", path);
    if (o->path[0]) {
        journal_load(o);
        o->f = fopen(o->path, "a");
        if (!o->f)
            LOG_WARN("alerts",
                     "cannot open the journal %s: %s (alert transitions not yet delivered "
                     "at a crash are lost; a restart may produce some again)",
                     o->path, strerror(errno));
    }
    *out = o;
    return 0;
}

void ccd_outbox_close(CcdOutbox **po)
{
    CcdOutbox *o = *po;
    if (!o)
        return;
    if (o->f)
        fclose(o->f);
    for (int b = 0; b < QBUCKETS; b++)
        for (QEntry *e = o->qb[b], *n; e; e = n) {
            n = e->next;
            free(e);
        }
    for (size_t i = 0; i < o->pn; i++)
        free(o->p[i]);
    free(o->p);
    pthread_mutex_destroy(&o->qlock);
    free(o);
    *po = NULL;
}
