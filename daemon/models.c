/* models.c — the models topic followed: chunks reassembled, models checked, written
 * atomically and swapped in (reload path, or a re-exec for another KPI set). See
 * models.h. */
#include "models.h"
#include "settings.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cc_learn.h"
#include "log.h"
#include "reload.h"

enum Reason {
    R_TRUNCATED,      ///< the value's length is not the announced size
    R_TOO_LARGE,      ///< over model.max_bytes
    R_BAD_HEADERS,    ///< hash, size or chunk headers missing or malformed
    R_CHUNKS_MISSING, ///< a chunked head whose chunks are not all there
    R_HASH_MISMATCH,  ///< the bytes do not hash to cellcast-hash
    R_BAD_MODEL,      ///< the safetensors loader refused it (shape, NaN, ...)
    R_BAD_RECORD,     ///< cellcast-record is not a JSON object
    R_NOT_APPLIED,    ///< written but the reload refused it, or the write failed
    R_N
};
static const char *const reason_names[R_N] = {"truncated",      "too_large",     "bad_headers",
                                              "chunks_missing", "hash_mismatch", "bad_model",
                                              "bad_record",     "not_applied"};

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

int ccd_models_open(Ccd *d, const char *path, char *err, size_t errlen)
{
    CcdModels *m = calloc(1, sizeof *m);
    if (!m)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    d->models = m;
    char *b = NULL, lp[4096];
    size_t n = 0;
    if (read_file(path, &b, &n) == 0) {
        ccd_models_hash(b, n, m->serving_hash);
        free(b);
    }
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
    if (d->cfg.model_source != 1 || !d->kafka)
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

static int same_kpis(const CcHparams *a, const CcHparams *b)
{
    if (a->n_features != b->n_features || a->step_seconds != b->step_seconds ||
        a->horizon != b->horizon)
        return 0;
    for (int f = 0; f < a->n_features; f++)
        if (strcmp(a->features[f], b->features[f]))
            return 0;
    return 1;
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
    CcModel *nm = NULL;
    cc_model_open_buffer(&nm, (const uint8_t *)buf, m->pending_len, err, sizeof err);
    int same = nm && same_kpis(&d->model->hp, &nm->hp);
    cc_model_close(&nm);
    ccd_model_learned_path(&d->cfg, path, sizeof path);
    snprintf(rec_path, sizeof rec_path, "%s.json", path);
    char *js = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    /* the record first: a start that finds the model finds its record (or an older one,
     * which names another hash) */
    int rc = cc_learn_write_atomic(rec_path, js ? js : "{}", js ? strlen(js) : 2, err, sizeof err);
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
    snprintf(m->serving_hash, sizeof m->serving_hash, "%s", m->pending_hash);
    json_decref(m->serving_record);
    m->serving_record = rec;
    m->applied++;
    LOG_INFO("models", "serving the learned model %s from '%s'", m->serving_hash, m->topic);
}

void ccd_models_cron(Ccd *d)
{
    CcdModels *m = d->models;
    if (!m || !m->rk || d->stopping)
        return;
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
            if (strchr(key, '#'))
                take_chunk(d, msg, key);
            else
                take_head(d, msg, key);
        }
        rd_kafka_message_destroy(msg);
    }
    if (m->pending)
        apply_pending(d);
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
    free(m);
    d->models = NULL;
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
    return o;
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
}
