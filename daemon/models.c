/* models.c — the models topic followed: chunks reassembled, models checked, written
 * atomically and swapped in (reload path, or a re-exec for another KPI set). See
 * models.h. */
#include "models.h"
#include "settings.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cc_learn.h"
#include "cells.h"
#include "cluster.h"
#include "kafka.h"
#include "log.h"
#include "model_watch.h"
#include "prom.h"
#include "reload.h"
#include "utf8.h"

enum Reason {
    R_TRUNCATED,      ///< the value's length is not the announced size
    R_TOO_LARGE,      ///< over model.max_bytes
    R_BAD_HEADERS,    ///< hash, size or chunk headers missing or malformed
    R_CHUNKS_MISSING, ///< a chunked head whose chunks are not all there
    R_HASH_MISMATCH,  ///< the bytes do not hash to cellcast-hash
    R_BAD_MODEL,      ///< the safetensors loader refused it (shape, NaN, ...)
    R_BAD_RECORD,     ///< cellcast-record is not a JSON object
    R_NOT_APPLIED,    ///< written but the reload refused it, or the write failed
    R_ROLLED_BACK,    ///< a model this member rolled back (<learned_path>.rolled_back)
    R_BAD_ROLLBACK,   ///< a rollback record (key rollback/<hash>) that cc_learn_rollback_parse
                      ///< refuses
    R_N
};
static const char *const reason_names[R_N] = {
    "truncated", "too_large",  "bad_headers", "chunks_missing", "hash_mismatch",
    "bad_model", "bad_record", "not_applied", "rolled_back",    "bad_rollback"};

/* The last swaps kept for GET /v1/model (memory only). */
#define HISTORY_N 8
typedef struct Swap {
    int64_t at;        ///< wall clock, unix seconds
    int64_t data_time; ///< the newest data time then (unix seconds; -1 unknown)
    char event[12];    ///< start, swap, restart (another KPI set), rollback
    char hash[17], from[17];
    char why[240];
} Swap;

typedef struct Chunk {
    char hash[17];
    int i, n;
    size_t len;
    char *data;
    struct Chunk *next;
} Chunk;

struct CcdModels {
    rd_kafka_t *rk;
    char topic[512];
    int assigned;
    int64_t next_try_ns;
    Chunk *chunks;
    size_t chunk_bytes;
    char serving_hash[17];
    json_t *serving_record; ///< the learner's record of the model in service, or NULL
    /* the newest valid model of this poll, applied when the poll is done */
    char *pending;
    size_t pending_len;
    char pending_hash[17];
    json_t *pending_record;
    uint64_t received, applied, refused[R_N], chunks_received;
    char serving_path[4096]; ///< the file in service (a swap copies it to <learned>.prev)
    Swap history[HISTORY_N];
    int n_history;
    /* the rollback watch (model_watch.h): the model swapped in is compared with the
     * previous one's live MASE before the swap */
    CcdModelWatch *watch; ///< owned by the cell table (cells.h)
    int watching;         ///< 1: judging the model in service
    double baseline_mase; ///< the previous model's window score before the swap
    int64_t baseline_forecasts, swap_step;
    char prev_hash[17];
    char verdict[320]; ///< the last judgement, or why none is made
    int64_t next_judge_ns;
    uint64_t rollbacks;
    char (*rolled_back)[17]; ///< hashes rolled back here (persisted), never applied again
    int n_rolled_back;
    /* rollback records (key rollback/<hash>, cc_learn.h): produced by rollback() for the
     * learner, read back (from every member) and counted, never taken for a model */
    uint64_t rollback_records, rollback_records_produced, skipped_records;
    CcLearnRollback last_rollback_record; ///< the newest valid one read (hash "" none)
};

void ccd_models_hash(const void *buf, size_t len, char hex[17])
{
    snprintf(hex, 17, "%016llx", (unsigned long long)cc_fnv1a(CC_FNV1A_SEED, buf, len));
}

static int read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    rewind(f);
    char *b = malloc(sz > 0 ? (size_t)sz : 1);
    if (!b || sz < 0 || fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        fclose(f);
        return -EIO;
    }
    fclose(f);
    *out = b;
    *len = (size_t)sz;
    return 0;
}

static void ccd_rfc3339(int64_t t, char buf[32])
{
    struct tm tm;
    time_t tt = (time_t)t;
    gmtime_r(&tt, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The newest data time seen on the KPI topics (-1: none). */
static int64_t newest_data(const Ccd *d)
{
    int64_t t = -1;
    for (int i = 0; i < CCD_INGEST_TOPICS; i++)
        if (d->in.seen[i].records && d->in.seen[i].last > t)
            t = d->in.seen[i].last;
    return t;
}

static void add_history(Ccd *d, const char *event, const char *hash, const char *from,
                        const char *why)
{
    CcdModels *m = d->models;
    if (m->n_history == HISTORY_N) {
        memmove(m->history, m->history + 1, (HISTORY_N - 1) * sizeof *m->history);
        m->n_history--;
    }
    Swap *s = &m->history[m->n_history++];
    memset(s, 0, sizeof *s);
    s->at = (int64_t)time(NULL);
    s->data_time = newest_data(d);
    snprintf(s->event, sizeof s->event, "%s", event);
    snprintf(s->hash, sizeof s->hash, "%s", hash ? hash : "");
    snprintf(s->from, sizeof s->from, "%s", from ? from : "");
    snprintf(s->why, sizeof s->why, "%s", why ? why : "");
}

/* <learned_path><suffix> */
static void learned_sibling(const CcdConfig *cfg, const char *suffix, char *buf, size_t n)
{
    char lp[4096];
    ccd_model_learned_path(cfg, lp, sizeof lp);
    snprintf(buf, n, "%s%s", lp, suffix);
}

static int add_rolled_back(CcdModels *m, const char *hash)
{
    char(*r)[17] = realloc(m->rolled_back, (size_t)(m->n_rolled_back + 1) * sizeof *r);
    if (!r)
        return -ENOMEM;
    m->rolled_back = r;
    snprintf(r[m->n_rolled_back++], 17, "%s", hash);
    return 0;
}

/* The hashes this member rolled back, one a line in <learned_path>.rolled_back: a model
 * rolled back is not applied again when the topic is read from its beginning (a restart). */
static void load_rolled_back(Ccd *d)
{
    char p[4200], line[64];
    learned_sibling(&d->cfg, ".rolled_back", p, sizeof p);
    FILE *f = fopen(p, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strlen(line) == 16 && add_rolled_back(d->models, line))
            break;
    }
    fclose(f);
}

static int was_rolled_back(const CcdModels *m, const char *hash)
{
    for (int i = 0; i < m->n_rolled_back; i++)
        if (!strcmp(m->rolled_back[i], hash))
            return 1;
    return 0;
}

static void note_rolled_back(Ccd *d, const char *hash)
{
    char p[4200];
    add_rolled_back(d->models, hash);
    learned_sibling(&d->cfg, ".rolled_back", p, sizeof p);
    FILE *f = fopen(p, "a");
    int bad = !f || fprintf(f, "%s\n", hash) < 0;
    if ((f && fclose(f)) || bad)
        LOG_WARN("models", "cannot note %s in %s: %s (a restart may apply it again)", hash, p,
                 strerror(errno));
}

/* The rollback watch: created for the served model's shape (model.source kafka, on). */
static void open_watch(Ccd *d)
{
    CcdModels *m = d->models;
    const CcHparams *hp = &d->model->hp;
    if (!d->cfg.model_rollback || !d->cells || hp->step_seconds < 1)
        return;
    int64_t W = d->cfg.model_rollback_window_steps;
    if (W <= 0)
        W = 86400 / hp->step_seconds > 0 ? 86400 / hp->step_seconds : 1;
    if (ccd_watch_open(&m->watch, (int)W, hp->step_seconds, hp->n_features)) {
        LOG_WARN("models", "no memory for the rollback watch: learned models are not watched");
        return;
    }
    __atomic_store_n(&d->cells->watch, m->watch, __ATOMIC_RELEASE);
}

int ccd_models_open(Ccd *d, const char *path, char *err, size_t errlen)
{
    CcdModels *m = calloc(1, sizeof *m);
    if (!m)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    d->models = m;
    char *b = NULL, lp[4096];
    size_t n = 0;
    snprintf(m->serving_path, sizeof m->serving_path, "%s", path);
    if (read_file(path, &b, &n) == 0) {
        ccd_models_hash(b, n, m->serving_hash);
        free(b);
    }
    add_history(d, "start", m->serving_hash, NULL, path);
    char rec[4200];
    snprintf(rec, sizeof rec, "%s.json", path);
    ccd_model_learned_path(&d->cfg, lp, sizeof lp);
    if (d->cfg.model_source == 1 && !strcmp(path, lp)) {
        json_t *j = json_load_file(rec, 0, NULL);
        if (json_is_object(j))
            m->serving_record = j;
        else
            json_decref(j);
    }
    if (d->cfg.model_source != 1)
        return 0;
    load_rolled_back(d);
    open_watch(d);
    snprintf(m->verdict, sizeof m->verdict, "no swap since the start");
    if (!d->kafka)
        return 0;
    if (strcmp(d->cfg.kafka_models_topic, "auto"))
        snprintf(m->topic, sizeof m->topic, "%s", d->cfg.kafka_models_topic);
    else
        snprintf(m->topic, sizeof m->topic, "%s.models", d->cfg.kafka_topics.items[0]);
    char e[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    for (int i = 0; i < d->cfg.kafka_properties.n; i++)
        rd_kafka_conf_set(c, d->cfg.kafka_properties.items[i].key,
                          d->cfg.kafka_properties.items[i].value, e, sizeof e);
    char maxb[32];
    snprintf(maxb, sizeof maxb, "%lld", (long long)(d->cfg.model_max_bytes + (1 << 20)));
    if (rd_kafka_conf_set(c, "bootstrap.servers", ccd_kafka_bootstrap(d->kafka), e, sizeof e) ||
        rd_kafka_conf_set(c, "group.id", "cellcastd-models", e, sizeof e) ||
        rd_kafka_conf_set(c, "enable.auto.commit", "false", e, sizeof e) ||
        rd_kafka_conf_set(c, "log_level", "3", e, sizeof e)) {
        rd_kafka_conf_destroy(c);
        return cc_errf(err, errlen, -EINVAL, "models consumer: %s", e);
    }
    if (!(m->rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, e, sizeof e))) {
        rd_kafka_conf_destroy(c);
        return cc_errf(err, errlen, -EIO, "models consumer: %s", e);
    }
    LOG_INFO("models", "following '%s' (model.source kafka); serving %s (%s)", m->topic, path,
             m->serving_hash);
    return 0;
}

/* Assigns every partition of the topic from the beginning once it exists (tried every
 * 2 s: the learner creates it with its first model). */
static void try_assign(CcdModels *m)
{
    int64_t now = cc_now_ns();
    if (now < m->next_try_ns)
        return;
    m->next_try_ns = now + 2000000000LL;
    rd_kafka_topic_t *t = rd_kafka_topic_new(m->rk, m->topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    if (!t)
        return;
    if (!rd_kafka_metadata(m->rk, 0, t, &md, 200) && md->topic_cnt == 1 && !md->topics[0].err &&
        md->topics[0].partition_cnt > 0) {
        rd_kafka_topic_partition_list_t *pl =
            rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
        for (int i = 0; i < md->topics[0].partition_cnt; i++)
            rd_kafka_topic_partition_list_add(pl, m->topic, md->topics[0].partitions[i].id)
                ->offset = RD_KAFKA_OFFSET_BEGINNING;
        if (!rd_kafka_assign(m->rk, pl)) {
            m->assigned = 1;
            LOG_INFO("models", "reading '%s' (%d partition(s)) from the beginning", m->topic,
                     pl->cnt);
        }
        rd_kafka_topic_partition_list_destroy(pl);
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
}

static int refuse(CcdModels *m, enum Reason r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(CcdModels *m, enum Reason r, const char *key, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    m->refused[r]++;
    CCD_LOG_RL(CC_LOG_WARN, "models",
               "model record '%s' on '%s' refused (%s): %s; the model in "
               "service stays",
               key, m->topic, reason_names[r], msg);
    return -1;
}

/* A header's value as a NUL-terminated string in buf; NULL when absent or too long. */
static const char *header(rd_kafka_message_t *msg, const char *name, char *buf, size_t n)
{
    rd_kafka_headers_t *hs = NULL;
    const void *v;
    size_t len;
    if (rd_kafka_message_headers(msg, &hs) || rd_kafka_header_get_last(hs, name, &v, &len) || !v ||
        len >= n)
        return NULL;
    memcpy(buf, v, len);
    buf[len] = 0;
    return buf;
}

static int parse_count(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int valid_hash(const char *h)
{
    if (!h || strlen(h) != 16)
        return 0;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", h[i]))
            return 0;
    return 1;
}

static void drop_chunk(CcdModels *m, Chunk **pp)
{
    Chunk *c = *pp;
    *pp = c->next;
    m->chunk_bytes -= c->len;
    free(c->data);
    free(c);
}

/* Drops the chunks of one hash (NULL: the oldest chunk only). */
static void drop_chunks(CcdModels *m, const char *hash)
{
    for (Chunk **pp = &m->chunks; *pp;) {
        if (!hash) {
            if (!(*pp)->next) {
                drop_chunk(m, pp);
                return;
            }
            pp = &(*pp)->next;
        } else if (!strcmp((*pp)->hash, hash))
            drop_chunk(m, pp);
        else
            pp = &(*pp)->next;
    }
}

static void take_chunk(Ccd *d, rd_kafka_message_t *msg, const char *key)
{
    CcdModels *m = d->models;
    char hash[32], ci[48];
    long long i, n;
    const char *h = header(msg, "cellcast-hash", hash, sizeof hash),
               *c = header(msg, "cellcast-chunk", ci, sizeof ci);
    m->chunks_received++;
    if (!msg->payload) { /* a tombstone of a replaced model's chunk */
        if (valid_hash(h))
            drop_chunks(m, h);
        return;
    }
    char *slash = c ? strchr(ci, '/') : NULL;
    if (!valid_hash(h) || !slash) {
        refuse(m, R_BAD_HEADERS, key,
               "a chunk needs cellcast-hash (16 hex digits) and "
               "cellcast-chunk i/n");
        return;
    }
    *slash = 0;
    long long max_chunks = d->cfg.model_max_bytes; /* a chunk holds at least a byte */
    if (parse_count(ci, 0, max_chunks - 1, &i) || parse_count(slash + 1, 1, max_chunks, &n) ||
        i >= n) {
        refuse(m, R_BAD_HEADERS, key, "cellcast-chunk '%s/%s' is not i/n with i < n", ci,
               slash + 1);
        return;
    }
    if (msg->len > (size_t)d->cfg.model_max_bytes) {
        refuse(m, R_TOO_LARGE, key, "a chunk of %zu bytes (model.max_bytes %lld)", msg->len,
               (long long)d->cfg.model_max_bytes);
        return;
    }
    for (Chunk **pp = &m->chunks; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->hash, h) && (*pp)->i == (int)i) {
            drop_chunk(m, pp); /* a redelivery: the newer one */
            break;
        }
    /* bounded: at most two models' worth of chunks are held, the oldest go first */
    while (m->chunks && m->chunk_bytes + msg->len > 2 * (size_t)d->cfg.model_max_bytes)
        drop_chunks(m, NULL);
    Chunk *ch = calloc(1, sizeof *ch);
    if (!ch || !(ch->data = malloc(msg->len ? msg->len : 1))) {
        free(ch);
        LOG_ERROR("models", "out of memory holding a chunk of '%s'", key);
        return;
    }
    snprintf(ch->hash, sizeof ch->hash, "%s", h);
    ch->i = (int)i, ch->n = (int)n, ch->len = msg->len;
    memcpy(ch->data, msg->payload, msg->len);
    m->chunk_bytes += msg->len;
    ch->next = m->chunks; /* newest first */
    m->chunks = ch;
}

/* The chunks of hash assembled into a buffer of size bytes; NULL (reason set) if not all
 * there. */
static char *assemble(CcdModels *m, const char *hash, long long n, size_t size, const char *key)
{
    char *buf = malloc(size ? size : 1);
    size_t total = 0;
    if (!buf)
        return NULL;
    for (long long i = 0; i < n; i++) {
        Chunk *c = m->chunks;
        while (c && (strcmp(c->hash, hash) || c->i != i))
            c = c->next;
        if (!c || c->n != n) {
            free(buf);
            refuse(m, R_CHUNKS_MISSING, key, "chunk %lld of %lld of model %s is not on the topic",
                   i, n, hash);
            return NULL;
        }
        if (total + c->len > size) {
            free(buf);
            refuse(m, R_TRUNCATED, key, "chunk %lld of %lld overruns cellcast-size %zu", i, n,
                   size);
            return NULL;
        }
        memcpy(buf + total, c->data, c->len);
        total += c->len;
    }
    if (total != size) {
        free(buf);
        refuse(m, R_TRUNCATED, key, "the chunks hold %zu bytes, cellcast-size says %zu", total,
               size);
        return NULL;
    }
    return buf;
}

static void take_head(Ccd *d, rd_kafka_message_t *msg, const char *key)
{
    CcdModels *m = d->models;
    char hash[32], size_s[32], chunks_s[32];
    long long size, n;
    if (!msg->payload) /* a tombstone: nothing to serve from it */
        return;
    m->received++;
    const char *h = header(msg, "cellcast-hash", hash, sizeof hash);
    if (!valid_hash(h) ||
        parse_count(header(msg, "cellcast-size", size_s, sizeof size_s), 1, INT64_MAX, &size) ||
        parse_count(header(msg, "cellcast-chunks", chunks_s, sizeof chunks_s), 0, INT32_MAX, &n)) {
        refuse(m, R_BAD_HEADERS, key,
               "a model record needs cellcast-hash (16 hex digits), cellcast-size and "
               "cellcast-chunks");
        return;
    }
    if (size > d->cfg.model_max_bytes) {
        refuse(m, R_TOO_LARGE, key, "%lld bytes (model.max_bytes %lld)", size,
               (long long)d->cfg.model_max_bytes);
        return;
    }
    json_t *rec = NULL;
    rd_kafka_headers_t *hs = NULL;
    const void *rv;
    size_t rlen;
    if (!rd_kafka_message_headers(msg, &hs) &&
        !rd_kafka_header_get_last(hs, "cellcast-record", &rv, &rlen) && rv) {
        rec = json_loadb(rv, rlen, 0, NULL);
        if (!json_is_object(rec)) {
            json_decref(rec);
            refuse(m, R_BAD_RECORD, key, "cellcast-record is not a JSON object");
            return;
        }
    }
    char *buf;
    if (n == 0) {
        if (msg->len != (size_t)size) {
            json_decref(rec);
            refuse(m, R_TRUNCATED, key, "%zu bytes, cellcast-size says %lld", msg->len, size);
            return;
        }
        if (!(buf = malloc((size_t)size))) {
            json_decref(rec);
            return;
        }
        memcpy(buf, msg->payload, (size_t)size);
    } else if (!(buf = assemble(m, h, n, (size_t)size, key))) {
        json_decref(rec);
        return;
    }
    char got[17];
    ccd_models_hash(buf, (size_t)size, got);
    if (strcmp(got, h)) {
        free(buf);
        json_decref(rec);
        refuse(m, R_HASH_MISMATCH, key, "the bytes hash to %s, cellcast-hash says %s", got, h);
        return;
    }
    CcModel *probe = NULL;
    char e[512];
    if (cc_model_open_buffer(&probe, (const uint8_t *)buf, (size_t)size, e, sizeof e)) {
        free(buf);
        json_decref(rec);
        refuse(m, R_BAD_MODEL, key, "%s", e);
        return;
    }
    cc_model_close(&probe);
    /* valid: the newest of this poll wins */
    free(m->pending);
    json_decref(m->pending_record);
    m->pending = buf;
    m->pending_len = (size_t)size;
    m->pending_record = rec;
    snprintf(m->pending_hash, sizeof m->pending_hash, "%s", h);
}

/* The file in service to <learned>.prev and its record to <learned>.prev.json. */
static int save_prev(Ccd *d, char *err, size_t errlen)
{
    CcdModels *m = d->models;
    char p[4200], pj[4300], *b = NULL;
    size_t n = 0;
    learned_sibling(&d->cfg, ".prev", p, sizeof p);
    snprintf(pj, sizeof pj, "%s.json", p);
    int rc = read_file(m->serving_path, &b, &n);
    if (rc)
        return cc_errf(err, errlen, rc, "reading %s: %s", m->serving_path, strerror(-rc));
    char *js =
        m->serving_record ? json_dumps(m->serving_record, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    rc = cc_learn_write_atomic(pj, js ? js : "{}", js ? strlen(js) : 2, err, errlen);
    if (!rc)
        rc = cc_learn_write_atomic(p, b, n, err, errlen);
    free(js);
    free(b);
    return rc;
}

/* A swap to a model of the same KPIs and step: the previous model's live score before the
 * swap (its last window, grown back until it holds model.rollback_min_forecasts) is the
 * baseline the new one must not fall below. */
static void start_judging(Ccd *d, int prev_ok)
{
    CcdModels *m = d->models;
    CcdWatchScore s;
    const int64_t min = d->cfg.model_rollback_min_forecasts;
    m->watching = 0;
    if (!m->watch) {
        snprintf(m->verdict, sizeof m->verdict, "not watched (model.rollback off)");
        return;
    }
    ccd_watch_baseline(m->watch, min, &s);
    m->swap_step = ccd_watch_newest(m->watch);
    ccd_watch_restart(m->watch, m->swap_step);
    snprintf(m->prev_hash, sizeof m->prev_hash, "%s", m->serving_hash);
    m->baseline_mase = s.mase;
    m->baseline_forecasts = s.forecasts;
    if (!prev_ok)
        snprintf(m->verdict, sizeof m->verdict, "not watched: the previous model was not kept");
    else if (s.forecasts < min || isnan(s.mase))
        snprintf(m->verdict, sizeof m->verdict,
                 "not watched: the previous model had %lld matured forecasts in its %lld "
                 "target steps (model.rollback_min_forecasts %lld)",
                 (long long)s.forecasts, (long long)s.steps, (long long)min);
    else {
        m->watching = 1;
        snprintf(m->verdict, sizeof m->verdict,
                 "watching: the previous model's live MASE %.4g over %lld forecasts in %lld "
                 "steps; rolled back above %.4g",
                 s.mase, (long long)s.forecasts, (long long)s.steps,
                 s.mase * (1 + d->cfg.model_rollback_margin));
    }
}

/* The learner's notice of a rollback (cc_learn.h "Rollback records"): key rollback/<hash>
 * on the models topic, partition 0 as every model record, so that `cellcast learn` refuses
 * the hash and takes the model before it as its champion. A member that cannot produce
 * still rolls back (its .rolled_back file is its own memory); the learner then does not
 * know (logged). */
static void produce_rollback_record(Ccd *d, const char *hash, const char *to,
                                    const CcdWatchScore *s, const char *why)
{
    CcdModels *m = d->models;
    if (!m->rk || !d->kafka || !m->topic[0])
        return;
    CcLearnRollback r = {
        .live_mase = s->mase, .baseline_mase = m->baseline_mase, .forecasts = s->forecasts};
    snprintf(r.hash, sizeof r.hash, "%s", hash);
    snprintf(r.to, sizeof r.to, "%s", to);
    snprintf(r.why, sizeof r.why, "%s", why);
    ccd_rfc3339((int64_t)time(NULL), r.at);
    int64_t dt = newest_data(d);
    if (dt >= 0)
        ccd_rfc3339(dt, r.data_time);
    CcdClusterIdentity id;
    char err[256], key[26];
    if (ccd_cluster_identity(&d->cfg, ccd_http_port(d), &id, err, sizeof err))
        snprintf(id.client_id, sizeof id.client_id, "cellcastd");
    snprintf(r.member, sizeof r.member, "%s", id.client_id);
    char *js = cc_learn_rollback_json(&r, key);
    int rc = js ? ccd_kafka_produce_to(d->kafka, m->topic, 0, key, strlen(key), js, strlen(js))
                : -ENOMEM;
    free(js);
    if (rc) {
        LOG_WARN("models",
                 "cannot note the rollback of %s on '%s' (%s): the learner will not "
                 "know of it",
                 hash, m->topic, strerror(-rc));
        return;
    }
    m->rollback_records_produced++;
    LOG_INFO("models", "rollback of %s noted on '%s' (key %s) for the learner", hash, m->topic,
             key);
}

/* A rollback record read from the topic (this member's or another's): checked as hostile
 * input, counted and shown in GET /v1/model; it is never a model. */
static void take_rollback_record(CcdModels *m, rd_kafka_message_t *msg, const char *key)
{
    CcLearnRollback r;
    char err[256];
    if (!msg->payload) /* a tombstone: the record cleared */
        return;
    if (cc_learn_rollback_parse(msg->key, msg->key_len, msg->payload, msg->len, &r, err,
                                sizeof err)) {
        refuse(m, R_BAD_ROLLBACK, key, "rollback record: %s", err);
        return;
    }
    m->rollback_records++;
    m->last_rollback_record = r;
    LOG_INFO("models", "'%s': model %s was rolled back to %s by %s", m->topic, r.hash, r.to,
             r.member);
}

/* Swaps back to <learned>.prev: the model in service degraded live. */
static void rollback(Ccd *d, const CcdWatchScore *s)
{
    CcdModels *m = d->models;
    char p[4200], pj[4300], path[4096], rec_path[4200], err[768], why[320], hash[17];
    char *b = NULL;
    size_t n = 0;
    learned_sibling(&d->cfg, ".prev", p, sizeof p);
    snprintf(pj, sizeof pj, "%s.json", p);
    ccd_model_learned_path(&d->cfg, path, sizeof path);
    snprintf(rec_path, sizeof rec_path, "%s.json", path);
    snprintf(why, sizeof why,
             "live MASE %.4g over %lld forecasts in %lld steps > (1 + %.3g) x %.4g, the "
             "previous model's before the swap",
             s->mase, (long long)s->forecasts, (long long)s->steps, d->cfg.model_rollback_margin,
             m->baseline_mase);
    int rc = read_file(p, &b, &n);
    if (rc) {
        snprintf(m->verdict, sizeof m->verdict, "%.180s; cannot roll back: %.60s: %.40s", why, p,
                 strerror(-rc));
        LOG_ERROR("models", "%s", m->verdict);
        return;
    }
    ccd_models_hash(b, n, hash);
    json_t *rec = json_load_file(pj, 0, NULL);
    char *js = json_is_object(rec) ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    rc = cc_learn_write_atomic(rec_path, js ? js : "{}", js ? strlen(js) : 2, err, sizeof err);
    if (!rc)
        rc = cc_learn_write_atomic(path, b, n, err, sizeof err);
    free(js);
    free(b);
    if (!rc)
        rc = ccd_reload(d, NULL, err, sizeof err);
    if (rc) {
        json_decref(rec);
        snprintf(m->verdict, sizeof m->verdict, "%.300s; rollback failed", why);
        LOG_ERROR("models", "%s: %s", m->verdict, err);
        return;
    }
    m->rollbacks++;
    note_rolled_back(d, m->serving_hash);
    LOG_WARN("models", "model %s rolled back to %s: %s", m->serving_hash, hash, why);
    produce_rollback_record(d, m->serving_hash, hash, s, why);
    add_history(d, "rollback", hash, m->serving_hash, why);
    snprintf(m->verdict, sizeof m->verdict, "rolled back %s: %.280s", m->serving_hash, why);
    snprintf(m->serving_hash, sizeof m->serving_hash, "%s", hash);
    snprintf(m->serving_path, sizeof m->serving_path, "%s", path);
    json_decref(m->serving_record);
    m->serving_record = json_is_object(rec) ? rec : NULL;
    if (!m->serving_record)
        json_decref(rec);
    m->watching = 0;
    ccd_watch_restart(m->watch, ccd_watch_newest(m->watch));
}

/* Once the new model's window (from the swap, growing) spans model.rollback_window_steps
 * and holds model.rollback_min_forecasts: kept, or rolled back when worse than the baseline
 * by more than the margin; not judged after CCD_WATCH_MAX_WINDOWS windows without them.
 * Once per swap. */
static void judge(Ccd *d)
{
    CcdModels *m = d->models;
    CcdWatchScore s;
    int64_t now = cc_now_ns();
    if (!m->watching || now < m->next_judge_ns)
        return;
    m->next_judge_ns = now + 1000000000LL;
    switch (ccd_watch_judge(m->watch, m->baseline_mase, d->cfg.model_rollback_min_forecasts,
                            d->cfg.model_rollback_margin, &s)) {
    case CCD_WATCH_WAIT: return;
    case CCD_WATCH_ROLL_BACK: rollback(d, &s); return;
    case CCD_WATCH_KEEP:
        snprintf(m->verdict, sizeof m->verdict,
                 "kept: live MASE %.4g over %lld forecasts in %lld steps, the previous "
                 "model's %.4g",
                 s.mase, (long long)s.forecasts, (long long)s.steps, m->baseline_mase);
        break;
    case CCD_WATCH_NOT_JUDGED:
        if (s.forecasts >= d->cfg.model_rollback_min_forecasts) /* the KPIs never moved */
            snprintf(m->verdict, sizeof m->verdict,
                     "not judged: no live MASE over %lld forecasts in %lld steps (seasonal "
                     "naive's error 0)",
                     (long long)s.forecasts, (long long)s.steps);
        else
            snprintf(m->verdict, sizeof m->verdict,
                     "not judged: %lld forecasts in %lld steps (model.rollback_min_forecasts %d "
                     "within %d windows of %d steps)",
                     (long long)s.forecasts, (long long)s.steps,
                     d->cfg.model_rollback_min_forecasts, CCD_WATCH_MAX_WINDOWS,
                     ccd_watch_window(m->watch));
        break;
    }
    m->watching = 0;
    LOG_INFO("models", "model %s %s", m->serving_hash, m->verdict);
}

/* Writes the pending model to model.learned_path and swaps it in. */
static void apply_pending(Ccd *d)
{
    CcdModels *m = d->models;
    char path[4096], rec_path[4200], err[768];
    char *buf = m->pending;
    json_t *rec = m->pending_record;
    m->pending = NULL, m->pending_record = NULL;
    if (!strcmp(m->pending_hash, m->serving_hash)) { /* already served (a replay at start) */
        if (rec && !m->serving_record)
            m->serving_record = json_incref(rec);
        free(buf);
        json_decref(rec);
        return;
    }
    if (was_rolled_back(m, m->pending_hash)) {
        free(buf);
        json_decref(rec);
        refuse(m, R_ROLLED_BACK, m->pending_hash,
               "this member rolled it back (%s.rolled_back); publish another model",
               m->serving_path);
        return;
    }
    CcModel *nm = NULL;
    cc_model_open_buffer(&nm, (const uint8_t *)buf, m->pending_len, err, sizeof err);
    int same = nm && ccd_model_same_io(&d->model->hp, &nm->hp);
    cc_model_close(&nm);
    ccd_model_learned_path(&d->cfg, path, sizeof path);
    snprintf(rec_path, sizeof rec_path, "%s.json", path);
    /* the model in service stays on disk as <learned>.prev (its record .prev.json): a
     * rollback swaps back to it */
    int rc = save_prev(d, err, sizeof err), prev_ok = !rc;
    if (rc)
        LOG_WARN("models", "keeping the model in service as %s.prev: %s (no rollback to it)", path,
                 err);
    char *js = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    /* the record first: a start that finds the model finds its record (or an older one,
     * which names another hash) */
    rc = cc_learn_write_atomic(rec_path, js ? js : "{}", js ? strlen(js) : 2, err, sizeof err);
    if (!rc)
        rc = cc_learn_write_atomic(path, buf, m->pending_len, err, sizeof err);
    free(js);
    free(buf);
    if (rc) {
        json_decref(rec);
        refuse(m, R_NOT_APPLIED, m->pending_hash, "writing %s: %s", path, err);
        return;
    }
    if (!same) {
        LOG_WARN("models",
                 "model %s has other KPIs, step or horizon than the one served: the cells' "
                 "history does not carry over; restarting in place on %s",
                 m->pending_hash, path);
        json_decref(rec);
        d->reexec = 1;
        d->stopping = 1;
        event_base_loopbreak(d->base);
        return;
    }
    if (ccd_reload(d, NULL, err, sizeof err)) {
        json_decref(rec);
        refuse(m, R_NOT_APPLIED, m->pending_hash, "%s", err);
        return;
    }
    start_judging(d, prev_ok);
    add_history(d, "swap", m->pending_hash, m->serving_hash, m->verdict);
    snprintf(m->serving_hash, sizeof m->serving_hash, "%s", m->pending_hash);
    snprintf(m->serving_path, sizeof m->serving_path, "%s", path);
    json_decref(m->serving_record);
    m->serving_record = rec;
    m->applied++;
    LOG_INFO("models", "serving the learned model %s from '%s' (%s)", m->serving_hash, m->topic,
             m->verdict);
}

void ccd_models_cron(Ccd *d)
{
    CcdModels *m = d->models;
    if (!m || d->stopping)
        return;
    if (!m->rk) {
        judge(d);
        return;
    }
    if (!m->assigned) {
        try_assign(m);
        if (!m->assigned)
            return;
    }
    for (int i = 0; i < 64; i++) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(m->rk, 0);
        if (!msg)
            break;
        if (msg->err) {
            if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                CCD_LOG_RL(CC_LOG_WARN, "models", "'%s': %s", m->topic,
                           rd_kafka_message_errstr(msg));
        } else {
            char key[512];
            size_t kl = msg->key_len < sizeof key - 1 ? msg->key_len : sizeof key - 1;
            memcpy(key, msg->key ? msg->key : "", msg->key ? kl : 0);
            key[msg->key ? kl : 0] = 0;
            if (cc_learn_rollback_key(msg->key, msg->key_len))
                take_rollback_record(m, msg, key);
            else if (strchr(key, '/')) { /* a kind of record this version does not read */
                m->skipped_records++;
                CCD_LOG_RL(CC_LOG_INFO, "models",
                           "record '%s' on '%s' skipped: not a model record this version "
                           "reads",
                           key, m->topic);
            } else if (strchr(key, '#'))
                take_chunk(d, msg, key);
            else
                take_head(d, msg, key);
        }
        rd_kafka_message_destroy(msg);
    }
    if (m->pending)
        apply_pending(d);
    judge(d);
}

void ccd_models_close(Ccd *d)
{
    CcdModels *m = d->models;
    if (!m)
        return;
    if (m->rk) {
        rd_kafka_consumer_close(m->rk);
        rd_kafka_destroy(m->rk);
    }
    while (m->chunks)
        drop_chunk(m, &m->chunks);
    free(m->pending);
    json_decref(m->pending_record);
    json_decref(m->serving_record);
    free(m->rolled_back);
    free(m); /* the watch belongs to the cell table: the worker may still read it */
    d->models = NULL;
}

/* GET /v1/model's learning: whether a learned model serves, and while none does, how much
 * data the learner has had and when its first model is due (data time). */
static json_t *learning_json(const Ccd *d)
{
    const CcdModels *m = d->models;
    char lp[4096], t[32];
    ccd_model_learned_path(&d->cfg, lp, sizeof lp);
    const int serving = m->serving_record || !strcmp(m->serving_path, lp);
    json_t *o = json_pack("{s:s, s:f}", "state", serving ? "serving" : "waiting",
                          "first_model_hours", d->cfg.model_first_model_hours);
    int64_t first = -1, last = -1;
    uint64_t unknown = 0;
    json_t *topics = json_object();
    for (int i = 0; i < CCD_INGEST_TOPICS && i < d->cfg.kafka_topics.n; i++) {
        const CcdIngestSeen *td = &d->in.seen[i];
        if (!td->records)
            continue;
        first = first < 0 || td->first < first ? td->first : first;
        last = td->last > last ? td->last : last;
        unknown += td->unknown_records;
        json_t *e = json_pack("{s:I}", "unknown_kpi_records", (json_int_t)td->unknown_records);
        if (td->unknown_records) {
            ccd_rfc3339(td->unknown_first, t);
            json_object_set_new(e, "unknown_kpi_first", json_string(t));
            ccd_rfc3339(td->unknown_last, t);
            json_object_set_new(e, "unknown_kpi_last", json_string(t));
        }
        json_object_set_new(topics, d->cfg.kafka_topics.items[i], e);
    }
    json_object_set_new(o, "topics", topics);
    json_object_set_new(o, "unknown_kpi_records", json_integer((json_int_t)unknown));
    if (first < 0) {
        json_object_set_new(o, "data_hours", json_real(0));
        return o;
    }
    json_object_set_new(o, "data_hours", json_real((double)(last - first) / 3600.0));
    ccd_rfc3339(first, t);
    json_object_set_new(o, "data_first", json_string(t));
    ccd_rfc3339(last, t);
    json_object_set_new(o, "data_last", json_string(t));
    if (!serving) {
        ccd_rfc3339(first + (int64_t)(d->cfg.model_first_model_hours * 3600.0), t);
        json_object_set_new(o, "first_model_expected_at", json_string(t));
    }
    return o;
}

static json_t *score_json(const Ccd *d, const CcdWatchScore *s)
{
    const CcHparams *hp = &d->model->hp;
    json_t *o = json_pack("{s:I}", "forecasts", (json_int_t)s->forecasts);
    json_object_set_new(o, "mase", isnan(s->mase) ? json_null() : json_real(s->mase));
    json_t *k = json_object();
    for (int f = 0; f < s->F && f < hp->n_features; f++)
        if (!isnan(s->mase_kpi[f]))
            json_object_set_new(k, hp->features[f], json_real(s->mase_kpi[f]));
    json_object_set_new(o, "mase_per_kpi", k);
    return o;
}

/* The live accuracy of the model in service and the rollback watch's state. */
static json_t *live_json(const Ccd *d)
{
    const CcdModels *m = d->models;
    if (!m->watch)
        return json_pack("{s:s}", "state", "off");
    CcdWatchScore s;
    ccd_watch_score(m->watch, &s);
    json_t *o = score_json(d, &s);
    json_object_set_new(o, "state", json_string(m->watching ? "watching" : "idle"));
    json_object_set_new(o, "window_steps", json_integer(ccd_watch_window(m->watch)));
    /* verdicts and swap reasons quote paths (the operator's bytes, not always UTF-8) and
     * cut them with %.Ns, maybe inside a character: json_string gave NULL, the field dropped */
    json_object_set_new(o, "verdict", ccd_json_text(m->verdict, NULL));
    if (m->prev_hash[0]) {
        json_t *b = json_pack("{s:s, s:I}", "hash", m->prev_hash, "forecasts",
                              (json_int_t)m->baseline_forecasts);
        json_object_set_new(b, "mase",
                            isnan(m->baseline_mase) ? json_null() : json_real(m->baseline_mase));
        json_object_set_new(o, "previous", b);
    }
    return o;
}

json_t *ccd_models_json(const Ccd *d)
{
    const CcdModels *m = d->models;
    json_t *o = json_object();
    json_object_set_new(o, "source", json_string(d->cfg.model_source == 1 ? "kafka" : "file"));
    if (!m)
        return o;
    if (m->serving_hash[0])
        json_object_set_new(o, "hash", json_string(m->serving_hash));
    if (m->topic[0])
        json_object_set_new(o, "topic", json_string(m->topic));
    /* the learner's record when it names the model in service (lineage, held-out scores) */
    const char *rh = json_string_value(json_object_get(m->serving_record, "hash"));
    if (m->serving_record && rh && !strcmp(rh, m->serving_hash))
        json_object_set_new(o, "record", json_incref(m->serving_record));
    json_object_set_new(o, "received", json_integer((json_int_t)m->received));
    json_object_set_new(o, "applied", json_integer((json_int_t)m->applied));
    json_t *r = json_object();
    for (int i = 0; i < R_N; i++)
        json_object_set_new(r, reason_names[i], json_integer((json_int_t)m->refused[i]));
    json_object_set_new(o, "refused", r);
    json_object_set_new(o, "rollbacks", json_integer((json_int_t)m->rollbacks));
    json_t *rr = json_pack("{s:I, s:I, s:I}", "read", (json_int_t)m->rollback_records, "produced",
                           (json_int_t)m->rollback_records_produced, "skipped_records",
                           (json_int_t)m->skipped_records);
    if (m->last_rollback_record.hash[0]) {
        char k[26], *js = cc_learn_rollback_json(&m->last_rollback_record, k);
        json_t *last = js ? json_loads(js, 0, NULL) : NULL;
        free(js);
        if (last)
            json_object_set_new(rr, "last", last);
    }
    json_object_set_new(o, "rollback_records", rr);
    if (d->cfg.model_source == 1)
        json_object_set_new(o, "learning", learning_json(d));
    json_object_set_new(o, "live", live_json(d));
    json_t *h = json_array();
    for (int i = m->n_history - 1; i >= 0; i--) { /* newest first */
        const Swap *s = &m->history[i];
        char at[32], dt[32];
        ccd_rfc3339(s->at, at);
        json_t *e = json_pack("{s:s, s:s, s:s}", "event", s->event, "at", at, "hash", s->hash);
        if (s->from[0])
            json_object_set_new(e, "from", ccd_json_text(s->from, NULL));
        if (s->data_time >= 0) {
            ccd_rfc3339(s->data_time, dt);
            json_object_set_new(e, "data_time", json_string(dt));
        }
        if (s->why[0])
            json_object_set_new(e, "why", ccd_json_text(s->why, NULL));
        json_array_append_new(h, e);
    }
    json_object_set_new(o, "history", h);
    return o;
}

/* The watch's totals since it opened (model_watch.h): a reader differences them over any
 * period for the served accuracy against seasonal naive. A watch of the served shape only. */
static void watch_totals_metrics(const Ccd *d, CcdModelWatch *w, int F, struct evbuffer *b)
{
    static const char *const kinds[2] = {"one_step", "horizon_end"};
    static const char *const names[6] = {"cellcast_model_live_abs_error_total",
                                         "cellcast_model_live_naive_abs_error_total",
                                         "cellcast_model_live_scored_total",
                                         "cellcast_model_live_scaled_abs_error_total",
                                         "cellcast_model_live_scaled_naive_abs_error_total",
                                         "cellcast_model_live_scaled_scored_total"};
    static const char *const help[6] = {
        "Sum of |truth - forecast| of the matured forecasts scored by the live watch "
        "(served, whichever model made them), by KPI and forecast kind, unweighted.",
        "Sum of |truth - value one day before| (seasonal naive) over the same samples.",
        "Matured forecasts scored (samples of the two sums above).",
        "Sum of |truth - forecast| / the cell's own scale (its mean seasonal naive error), "
        "over the samples of cells whose scale is learnt: what the rollback scores.",
        "Sum of |truth - value one day before| / the cell's own scale over the same samples.",
        "Matured forecasts weighed (samples of the two scaled sums above)."};
    const CcHparams *hp = &d->model->hp;
    if (F != hp->n_features) /* a watch of another shape: no names for its KPIs */
        return;
    double err[2][2 * CC_MAX_FEATURES], naive[2][2 * CC_MAX_FEATURES];
    int64_t n[2][2 * CC_MAX_FEATURES];
    ccd_watch_totals(w, err[0], naive[0], n[0]);
    ccd_watch_scaled_totals(w, err[1], naive[1], n[1]);
    for (int v = 0; v < 6; v++) {
        const int scaled = v / 3, what = v % 3;
        ccd_prom_metric(b, names[v], "counter", help[v]);
        for (int k = 0; k < 2; k++)
            for (int f = 0; f < F; f++) {
                const int i = k * F + f;
                evbuffer_add_printf(b, "%s{kpi=\"", names[v]);
                ccd_prom_label(b, hp->features[f]);
                evbuffer_add_printf(b, "\",kind=\"%s\"} ", kinds[k]);
                if (what == 2)
                    evbuffer_add_printf(b, "%lld\n", (long long)n[scaled][i]);
                else
                    evbuffer_add_printf(b, "%.17g\n", what ? naive[scaled][i] : err[scaled][i]);
            }
    }
}

void ccd_models_metrics(const Ccd *d, struct evbuffer *b)
{
    const CcdModels *m = d->models;
    if (!m)
        return;
    evbuffer_add_printf(b,
                        "# HELP cellcast_models_received_total Model records read from the "
                        "models topic (model.source kafka).\n"
                        "# TYPE cellcast_models_received_total counter\n"
                        "cellcast_models_received_total %llu\n"
                        "# HELP cellcast_models_applied_total Published models swapped in.\n"
                        "# TYPE cellcast_models_applied_total counter\n"
                        "cellcast_models_applied_total %llu\n"
                        "# HELP cellcast_models_refused_total Model records refused, by "
                        "reason.\n# TYPE cellcast_models_refused_total counter\n",
                        (unsigned long long)m->received, (unsigned long long)m->applied);
    for (int i = 0; i < R_N; i++)
        evbuffer_add_printf(b, "cellcast_models_refused_total{reason=\"%s\"} %llu\n",
                            reason_names[i], (unsigned long long)m->refused[i]);
    evbuffer_add_printf(b,
                        "# HELP cellcast_model_serving_info The model in service (hash: "
                        "FNV-1a 64 of its file).\n# TYPE cellcast_model_serving_info gauge\n"
                        "cellcast_model_serving_info{hash=\"%s\",source=\"%s\"} 1\n",
                        m->serving_hash, d->cfg.model_source == 1 ? "kafka" : "file");
    evbuffer_add_printf(b,
                        "# HELP cellcast_model_rollbacks_total Learned models swapped back to "
                        "the previous one after degrading live (model.rollback).\n"
                        "# TYPE cellcast_model_rollbacks_total counter\n"
                        "cellcast_model_rollbacks_total %llu\n"
                        "# HELP cellcast_models_rollback_records_total Rollback records "
                        "(key rollback/<hash>) on the models topic: read (valid, from any "
                        "member), produced by this member.\n"
                        "# TYPE cellcast_models_rollback_records_total counter\n"
                        "cellcast_models_rollback_records_total{op=\"read\"} %llu\n"
                        "cellcast_models_rollback_records_total{op=\"produced\"} %llu\n"
                        "# HELP cellcast_models_skipped_total Records on the models topic of a "
                        "kind this version does not read (a key with '/').\n"
                        "# TYPE cellcast_models_skipped_total counter\n"
                        "cellcast_models_skipped_total %llu\n",
                        (unsigned long long)m->rollbacks, (unsigned long long)m->rollback_records,
                        (unsigned long long)m->rollback_records_produced,
                        (unsigned long long)m->skipped_records);
    if (m->watch) {
        CcdWatchScore s;
        ccd_watch_score(m->watch, &s);
        if (!isnan(s.mase))
            evbuffer_add_printf(b,
                                "# HELP cellcast_model_live_mase Live MASE of the model in "
                                "service against one-day seasonal naive (the rollback window; "
                                "mean over KPIs).\n# TYPE cellcast_model_live_mase gauge\n"
                                "cellcast_model_live_mase %.6g\n",
                                s.mase);
        watch_totals_metrics(d, m->watch, s.F, b);
    }
}
