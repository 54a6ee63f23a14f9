/* learn_kafka.c — `cellcast learn`'s Kafka side: the KPI topic's retention read into the
 * learner's store through lib's KPI decoder, and models published to the compacted
 * `<topic>.models` topic, chunked when larger than a message. See learn_kafka.h. */
#include "learn_kafka.h"

#include <errno.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc_kpi.h"

/* Room left in a message for the key, the small headers and the protocol's framing. */
#define HEADER_ROOM 1024
/* Messages with unknown fields that found no new KPI before discovery is tried again. */
#define DISCOVERY_BACKOFF 256

struct CctLearnKafka {
    CctLearnKafkaSettings s;
    char models_topic[512];
    rd_kafka_t *consumer, *producer;
    rd_kafka_t *models_consumer; ///< the models topic's rollback records (opened when read)
    int models_assigned, models_at_eof;
    int n_parts;
    int32_t *parts;
    int *at_eof;
    int caught_up;   ///< the first read reached every partition's end
    int64_t from_ms; ///< messages stamped before this are outside the history window
    /* the decoder and the KPI names it knows */
    CcKpiDecoder *dec;
    char *names[CC_MAX_FEATURES];
    int n_names;
    CcKpiMapEntry map[CC_MAX_FEATURES];
    char *map_field[CC_MAX_FEATURES];
    int n_map;
    int discovery_skip;
    size_t max_message;
    char prev_hash[17]; ///< the model published before, whose chunks get tombstoned
    int prev_chunks;
    int delivery_errors;
    char delivery_err[256];
    CctLearnKafkaStats st;
};

static int errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static rd_kafka_conf_t *base_conf(const CctLearnKafkaSettings *s, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char e[256];
    if (rd_kafka_conf_set(c, "bootstrap.servers", s->brokers, e, sizeof e) ||
        rd_kafka_conf_set(c, "log_level", "3", e, sizeof e)) {
        errf(err, errlen, 0, "%s", e);
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    for (int i = 0; i < s->n_props; i++) {
        char name[256];
        const char *eq = strchr(s->props[i], '=');
        if (!eq || eq == s->props[i] || (size_t)(eq - s->props[i]) >= sizeof name) {
            errf(err, errlen, 0, "--kafka-property '%s': expected NAME=VALUE", s->props[i]);
            rd_kafka_conf_destroy(c);
            return NULL;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - s->props[i]), s->props[i]);
        if (rd_kafka_conf_set(c, name, eq + 1, e, sizeof e)) {
            errf(err, errlen, 0, "--kafka-property %s: %s", name, e);
            rd_kafka_conf_destroy(c);
            return NULL;
        }
    }
    return c;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    CctLearnKafka *k = opaque;
    (void)rk;
    if (m->err) {
        k->delivery_errors++;
        snprintf(k->delivery_err, sizeof k->delivery_err, "%s", rd_kafka_err2str(m->err));
    }
}

/* The models topic, compacted, one partition; "already exists" is success. */
static void create_models_topic(CctLearnKafka *k)
{
    char e[256];
    rd_kafka_topic_t *t = rd_kafka_topic_new(k->producer, k->models_topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    /* a metadata request for one topic does not create it (allow.auto.create.topics) */
    int exists = t && !rd_kafka_metadata(k->producer, 0, t, &md, 5000) && md->topic_cnt == 1 &&
                 !md->topics[0].err;
    if (md)
        rd_kafka_metadata_destroy(md);
    if (t)
        rd_kafka_topic_destroy(t);
    if (exists)
        return;
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(k->models_topic, 1, -1, e, sizeof e);
    if (!nt)
        return;
    rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->producer);
    rd_kafka_CreateTopics(k->producer, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 10000);
    const char *why = "no answer in 10 s";
    if (ev) {
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
        size_t n = 0;
        const rd_kafka_topic_result_t **tr =
            res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        rd_kafka_resp_err_t te = rd_kafka_event_error(ev);
        if (!te && n == 1)
            te = rd_kafka_topic_result_error(tr[0]);
        why = te == RD_KAFKA_RESP_ERR_NO_ERROR || te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS
                  ? NULL
                  : rd_kafka_err2str(te);
        if (why)
            fprintf(stderr,
                    "cellcast learn: creating topic '%s' (compact, 1 partition): %s; "
                    "publishing anyway (the broker may create it)\n",
                    k->models_topic, why);
        rd_kafka_event_destroy(ev);
    } else
        fprintf(stderr, "cellcast learn: creating topic '%s': %s\n", k->models_topic, why);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
}

/* "FIELD=KPI[*SCALE]" entries into the decoder's map; the distinct KPIs are the names. */
static int parse_fields(CctLearnKafka *k, char *err, size_t errlen)
{
    for (int i = 0; i < k->s.n_fields; i++) {
        const char *f = k->s.fields[i], *eq = strchr(f, '=');
        if (!eq || eq == f || !eq[1])
            return errf(err, errlen, -EINVAL, "--field '%s': expected FIELD=KPI[*SCALE]", f);
        if (k->n_map == CC_MAX_FEATURES)
            return errf(err, errlen, -EINVAL, "--field: at most %d entries", CC_MAX_FEATURES);
        const char *star = strchr(eq + 1, '*');
        double scale = 1;
        if (star) {
            char *end;
            scale = strtod(star + 1, &end);
            if (end == star + 1 || *end || !isfinite(scale) || scale == 0)
                return errf(err, errlen, -EINVAL, "--field '%s': bad scale", f);
        }
        char *target = strndup(eq + 1, star ? (size_t)(star - eq - 1) : strlen(eq + 1));
        char *field = strndup(f, (size_t)(eq - f));
        if (!target || !field) {
            free(target), free(field);
            return -ENOMEM;
        }
        int t = 0;
        while (t < k->n_names && strcmp(k->names[t], target))
            t++;
        if (t == k->n_names)
            k->names[k->n_names++] = target;
        else
            free(target);
        k->map_field[k->n_map] = field;
        k->map[k->n_map++] =
            (CcKpiMapEntry){.field = field, .feature_name = k->names[t], .scale = scale};
    }
    return 0;
}

static int rebuild_decoder(CctLearnKafka *k, char *err, size_t errlen)
{
    CcKpiSettings ks;
    cc_kpi_default_settings(&ks);
    ks.n_features = k->n_names;
    ks.step_seconds = 1; /* the record's own time: the learner detects the step */
    ks.feature_names = (const char *const *)k->names;
    ks.map = k->map;
    ks.n_map = k->n_map;
    if (k->s.cell_field)
        ks.cell_field = k->s.cell_field;
    if (k->s.ts_field)
        ks.ts_field = k->s.ts_field;
    if (k->s.kpis_field)
        ks.kpis_field = k->s.kpis_field;
    CcKpiDecoder *d = NULL;
    int rc = cc_kpi_open(&d, &ks, err, errlen);
    if (rc < 0)
        return rc;
    cc_kpi_close(&k->dec);
    k->dec = d;
    return 0;
}

/* Names the numeric fields of one record object not known yet. Returns names added. */
static int discover_record(CctLearnKafka *k, json_t *rec)
{
    const char *cf = k->s.cell_field ? k->s.cell_field : "cell",
               *tf = k->s.ts_field ? k->s.ts_field : "ts",
               *kf = k->s.kpis_field ? k->s.kpis_field : "kpis";
    json_t *kpis = json_object_get(rec, kf);
    json_t *from = json_is_object(kpis) ? kpis : rec;
    const char *name;
    json_t *v;
    int added = 0;
    json_object_foreach(from, name, v)
    {
        if (k->n_names == CC_MAX_FEATURES)
            break;
        if (from == rec && (!strcmp(name, cf) || !strcmp(name, tf)))
            continue;
        if (!json_is_number(v) || !name[0] || strlen(name) >= CC_FEATURE_NAME_MAX)
            continue;
        int t = 0;
        while (t < k->n_names && strcmp(k->names[t], name))
            t++;
        if (t < k->n_names || !(k->names[k->n_names] = strdup(name)))
            continue;
        k->n_names++;
        added++;
    }
    return added;
}

static int discover(CctLearnKafka *k, const void *buf, size_t len)
{
    json_t *j = json_loadb(buf, len, JSON_DECODE_INT_AS_REAL, NULL);
    int added = 0;
    if (json_is_object(j))
        added = discover_record(k, j);
    else if (json_is_array(j)) {
        size_t i;
        json_t *e;
        json_array_foreach(j, i, e) if (json_is_object(e)) added += discover_record(k, e);
    }
    json_decref(j);
    return added;
}

/* One KPI message into the store. */
static void take_message(CctLearnKafka *k, CcLearn *l, const void *buf, size_t len)
{
    CcKpiBatch kb = {0};
    char err[256];
    k->st.messages++;
    int decoded = k->dec && cc_kpi_decode(k->dec, buf, len, &kb) == 0;
    int unknown = !k->dec || (decoded && kb.unmapped_fields > 0);
    if (unknown && k->n_map == 0 && k->n_names < CC_MAX_FEATURES) {
        if (k->discovery_skip > 0)
            k->discovery_skip--;
        else if (discover(k, buf, len) > 0 && rebuild_decoder(k, err, sizeof err) == 0)
            decoded = cc_kpi_decode(k->dec, buf, len, &kb) == 0;
        else
            k->discovery_skip = DISCOVERY_BACKOFF;
    }
    if (!decoded)
        return;
    k->st.refused_records += (uint64_t)kb.n_errors;
    for (int i = 0; i < kb.n_records; i++) {
        const CcKpiRecord *r = &kb.records[i];
        const char *names[CC_MAX_FEATURES];
        double v[CC_MAX_FEATURES];
        int n = 0;
        for (int f = 0; f < k->n_names; f++)
            if (r->present >> f & 1) {
                names[n] = k->names[f];
                v[n++] = r->values[f];
            }
        int rc = cc_learn_add(l, r->cell_id, r->ts, names, v, n);
        if (rc == 0)
            k->st.records++;
        else
            k->st.dropped_records++;
    }
}

static int assign_history(CctLearnKafka *k, char *err, size_t errlen)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(k->consumer, k->s.topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
    for (int tries = 0; tries < 10; tries++) {
        e = rd_kafka_metadata(k->consumer, 0, t, &md, 5000);
        if (!e && md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt > 0)
            break;
        if (!e) {
            e = md->topic_cnt == 1 && md->topics[0].err ? md->topics[0].err
                                                        : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
            rd_kafka_metadata_destroy(md);
            md = NULL;
        }
        nanosleep(&(struct timespec){0, 500000000}, NULL);
    }
    rd_kafka_topic_destroy(t);
    if (!md)
        return errf(err, errlen, -EIO, "topic '%s' on %s: %s", k->s.topic, k->s.brokers,
                    rd_kafka_err2str(e));
    k->n_parts = md->topics[0].partition_cnt;
    k->parts = calloc((size_t)k->n_parts, sizeof *k->parts);
    k->at_eof = calloc((size_t)k->n_parts, sizeof *k->at_eof);
    if (!k->parts || !k->at_eof) {
        rd_kafka_metadata_destroy(md);
        return -ENOMEM;
    }
    for (int i = 0; i < k->n_parts; i++)
        k->parts[i] = md->topics[0].partitions[i].id;
    rd_kafka_metadata_destroy(md);
    k->st.partitions = k->n_parts;
    /* the first offset stamped at or after now - history (Kafka's message times) */
    rd_kafka_topic_partition_list_t *pl = rd_kafka_topic_partition_list_new(k->n_parts);
    int64_t from_ms = ((int64_t)time(NULL) - k->s.history_s) * 1000;
    for (int i = 0; i < k->n_parts; i++)
        rd_kafka_topic_partition_list_add(pl, k->s.topic, k->parts[i])->offset = from_ms;
    e = rd_kafka_offsets_for_times(k->consumer, pl, 10000);
    if (e) {
        rd_kafka_topic_partition_list_destroy(pl);
        return errf(err, errlen, -EIO, "offsets for times on '%s': %s", k->s.topic,
                    rd_kafka_err2str(e));
    }
    /* -1: no message that recent, or a broker that does not look offsets up by time
     * (librdkafka's mock cluster, the embedded broker): read from the beginning and skip
     * what is older than the window as it comes (take_message) */
    for (int i = 0; i < pl->cnt; i++)
        if (pl->elems[i].err || pl->elems[i].offset < 0)
            pl->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
    k->from_ms = from_ms;
    e = rd_kafka_assign(k->consumer, pl);
    rd_kafka_topic_partition_list_destroy(pl);
    if (e)
        return errf(err, errlen, -EIO, "assign '%s': %s", k->s.topic, rd_kafka_err2str(e));
    return 0;
}

int cct_learn_kafka_open(CctLearnKafka **out, const CctLearnKafkaSettings *s, char *err,
                         size_t errlen)
{
    *out = NULL;
    if (!s->brokers || !s->topic)
        return errf(err, errlen, -EINVAL, "--brokers and --topic are both needed");
    CctLearnKafka *k = calloc(1, sizeof *k);
    if (!k)
        return errf(err, errlen, -ENOMEM, "out of memory");
    k->s = *s;
    if (k->s.history_s <= 0)
        k->s.history_s = 28 * 86400;
    snprintf(k->models_topic, sizeof k->models_topic, "%s",
             s->models_topic && strcmp(s->models_topic, "auto") ? s->models_topic : "");
    if (!k->models_topic[0])
        snprintf(k->models_topic, sizeof k->models_topic, "%s.models", s->topic);
    int rc = parse_fields(k, err, errlen);
    if (rc < 0)
        goto fail;
    if (k->n_names && (rc = rebuild_decoder(k, err, errlen)) < 0)
        goto fail;
    char e[512];
    rd_kafka_conf_t *cc = base_conf(s, err, errlen), *pc = base_conf(s, err, errlen);
    rc = -EINVAL;
    if (!cc || !pc || rd_kafka_conf_set(cc, "group.id", "cellcast-learn", e, sizeof e) ||
        rd_kafka_conf_set(cc, "enable.auto.commit", "false", e, sizeof e) ||
        rd_kafka_conf_set(cc, "enable.partition.eof", "true", e, sizeof e) ||
        rd_kafka_conf_set(pc, "acks", "all", e, sizeof e)) {
        if (cc)
            rd_kafka_conf_destroy(cc);
        if (pc)
            rd_kafka_conf_destroy(pc);
        goto fail;
    }
    char mmb[32];
    size_t mmbn = sizeof mmb;
    k->max_message = 1000000;
    if (rd_kafka_conf_get(pc, "message.max.bytes", mmb, &mmbn) == RD_KAFKA_CONF_OK)
        k->max_message = (size_t)strtoull(mmb, NULL, 10);
    rd_kafka_conf_set_opaque(pc, k);
    rd_kafka_conf_set_dr_msg_cb(pc, on_delivery);
    if (!(k->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cc, e, sizeof e))) {
        rd_kafka_conf_destroy(cc);
        rd_kafka_conf_destroy(pc);
        rc = errf(err, errlen, -EIO, "consumer: %s", e);
        goto fail;
    }
    if (!(k->producer = rd_kafka_new(RD_KAFKA_PRODUCER, pc, e, sizeof e))) {
        rd_kafka_conf_destroy(pc);
        rc = errf(err, errlen, -EIO, "producer: %s", e);
        goto fail;
    }
    if ((rc = assign_history(k, err, errlen)) < 0)
        goto fail;
    create_models_topic(k);
    *out = k;
    return 0;
fail:
    cct_learn_kafka_close(&k);
    return rc;
}

void cct_learn_kafka_close(CctLearnKafka **kp)
{
    CctLearnKafka *k = *kp;
    if (!k)
        return;
    if (k->producer) {
        rd_kafka_flush(k->producer, 5000);
        rd_kafka_destroy(k->producer);
    }
    if (k->consumer) {
        rd_kafka_consumer_close(k->consumer);
        rd_kafka_destroy(k->consumer);
    }
    if (k->models_consumer) {
        rd_kafka_consumer_close(k->models_consumer);
        rd_kafka_destroy(k->models_consumer);
    }
    cc_kpi_close(&k->dec);
    for (int i = 0; i < k->n_names; i++)
        free(k->names[i]);
    for (int i = 0; i < k->n_map; i++)
        free(k->map_field[i]);
    free(k->parts);
    free(k->at_eof);
    free(k);
    *kp = NULL;
}

int64_t cct_learn_kafka_read(CctLearnKafka *k, CcLearn *l, int timeout_ms, char *err, size_t errlen)
{
    uint64_t before = k->st.records;
    int64_t deadline = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    int got = 0;
    for (;;) {
        if (k->s.stop && *k->s.stop)
            break;
        int64_t left_ms = (deadline - cc_now_ns()) / 1000000;
        /* after the catch-up, once messages flow, read while they keep coming */
        int wait = !k->caught_up ? (int)(left_ms > 200 ? 200 : left_ms)
                   : got         ? 200
                                 : (int)(left_ms > 0 ? left_ms : 0);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(k->consumer, wait > 0 ? wait : 0);
        if (!m) {
            if (k->caught_up && got)
                break;
            if (cc_now_ns() >= deadline)
                break;
            continue;
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            int all = 1;
            for (int i = 0; i < k->n_parts; i++) {
                if (k->parts[i] == m->partition)
                    k->at_eof[i] = 1;
                all &= k->at_eof[i];
            }
            rd_kafka_message_destroy(m);
            if (all && !k->caught_up) {
                k->caught_up = 1;
                break;
            }
            continue;
        }
        if (m->err) {
            int fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
            fprintf(stderr, "cellcast learn: kafka: %s\n", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            if (fatal)
                return errf(err, errlen, -EIO, "kafka: fatal error");
            continue;
        }
        got++;
        rd_kafka_timestamp_type_t tt;
        int64_t ts = rd_kafka_message_timestamp(m, &tt);
        if (tt == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE || ts < 0 || ts >= k->from_ms)
            take_message(k, l, m->payload, m->len);
        rd_kafka_message_destroy(m);
    }
    return (int64_t)(k->st.records - before);
}

/* Produces one record; the headers are name/value string pairs, n_h of them. */
static int produce(CctLearnKafka *k, const char *key, const void *val, size_t len,
                   const char *const *h, int n_h, char *err, size_t errlen)
{
    rd_kafka_headers_t *hs = rd_kafka_headers_new((size_t)n_h);
    for (int i = 0; i < n_h; i++)
        rd_kafka_header_add(hs, h[2 * i], -1, h[2 * i + 1], -1);
    rd_kafka_resp_err_t e = rd_kafka_producev(
        k->producer, RD_KAFKA_V_TOPIC(k->models_topic), RD_KAFKA_V_PARTITION(0),
        RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE((void *)val, len),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hs), RD_KAFKA_V_END);
    if (e) {
        rd_kafka_headers_destroy(hs);
        return errf(err, errlen, -EIO, "produce to '%s': %s", k->models_topic, rd_kafka_err2str(e));
    }
    rd_kafka_poll(k->producer, 0);
    return 0;
}

int cct_learn_kafka_publish(CctLearnKafka *k, const char *name, const char *path, const char *hash,
                            const char *record_json, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    rewind(f);
    char *buf = sz > 0 ? malloc((size_t)sz) : NULL;
    if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        fclose(f);
        free(buf);
        return errf(err, errlen, -EIO, "%s: cannot read", path);
    }
    fclose(f);
    size_t len = (size_t)sz;
    size_t room =
        k->max_message > 2 * HEADER_ROOM ? k->max_message - HEADER_ROOM : k->max_message / 2;
    size_t rec_len = strlen(record_json);
    if (rec_len + HEADER_ROOM > k->max_message) {
        free(buf);
        return errf(err, errlen, -EMSGSIZE,
                    "the record (%zu bytes) does not fit in a message (message.max.bytes %zu)",
                    rec_len, k->max_message);
    }
    /* 0: the file is the head's value; n: n chunk records before an empty head */
    size_t chunk = room;
    int n = len + rec_len <= room ? 0 : (int)((len + chunk - 1) / chunk);
    char size_s[32], n_s[16], key[1024], ci[32];
    snprintf(size_s, sizeof size_s, "%zu", len);
    snprintf(n_s, sizeof n_s, "%d", n);
    k->delivery_errors = 0;
    int rc = 0;
    if (n > 0)
        for (int i = 0; i < n && !rc; i++) {
            size_t off = (size_t)i * chunk, cl = len - off < chunk ? len - off : chunk;
            snprintf(key, sizeof key, "%s#%s#%d", name, hash, i);
            snprintf(ci, sizeof ci, "%d/%d", i, n);
            const char *h[] = {"cellcast-hash", hash, "cellcast-chunk", ci};
            rc = produce(k, key, buf + off, cl, h, 2, err, errlen);
        }
    if (!rc) {
        const char *h[] = {"cellcast-record", record_json, "cellcast-hash",   hash,
                           "cellcast-size",   size_s,      "cellcast-chunks", n_s};
        /* a chunked head's value is the word "chunked": never empty, which some clients
         * send as null, a tombstone to compaction */
        rc = produce(k, name, n ? "chunked" : buf, n ? 7 : len, h, 4, err, errlen);
    }
    free(buf);
    if (!rc && rd_kafka_flush(k->producer, 30000))
        rc = errf(err, errlen, -ETIMEDOUT, "'%s': no acknowledgement in 30 s", k->models_topic);
    if (!rc && k->delivery_errors)
        rc = errf(err, errlen, -EIO, "'%s': %s", k->models_topic, k->delivery_err);
    if (rc)
        return rc;
    /* the replaced model's chunks are garbage once the head names the new hash */
    if (k->prev_chunks > 0 && strcmp(k->prev_hash, hash))
        for (int i = 0; i < k->prev_chunks; i++) {
            snprintf(key, sizeof key, "%s#%s#%d", name, k->prev_hash, i);
            if (produce(k, key, NULL, 0, NULL, 0, err, errlen) < 0)
                break;
        }
    rd_kafka_flush(k->producer, 10000);
    snprintf(k->prev_hash, sizeof k->prev_hash, "%s", hash);
    k->prev_chunks = n;
    return 0;
}

/* The models topic's partition 0 from its beginning, once the topic exists. 0, 1 (not yet:
 * no model published) or -errno. */
static int assign_models(CctLearnKafka *k, char *err, size_t errlen)
{
    char e[512];
    if (!k->models_consumer) {
        rd_kafka_conf_t *c = base_conf(&k->s, err, errlen);
        if (!c || rd_kafka_conf_set(c, "group.id", "cellcast-learn-models", e, sizeof e) ||
            rd_kafka_conf_set(c, "enable.auto.commit", "false", e, sizeof e) ||
            rd_kafka_conf_set(c, "enable.partition.eof", "true", e, sizeof e)) {
            if (c)
                rd_kafka_conf_destroy(c);
            return errf(err, errlen, -EINVAL, "models consumer: %s", e);
        }
        if (!(k->models_consumer = rd_kafka_new(RD_KAFKA_CONSUMER, c, e, sizeof e))) {
            rd_kafka_conf_destroy(c);
            return errf(err, errlen, -EIO, "models consumer: %s", e);
        }
    }
    rd_kafka_topic_t *t = rd_kafka_topic_new(k->models_consumer, k->models_topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    int exists = t && !rd_kafka_metadata(k->models_consumer, 0, t, &md, 2000) &&
                 md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt > 0;
    if (md)
        rd_kafka_metadata_destroy(md);
    if (t)
        rd_kafka_topic_destroy(t);
    if (!exists)
        return 1;
    rd_kafka_topic_partition_list_t *pl = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(pl, k->models_topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t ae = rd_kafka_assign(k->models_consumer, pl);
    rd_kafka_topic_partition_list_destroy(pl);
    if (ae)
        return errf(err, errlen, -EIO, "assign '%s': %s", k->models_topic, rd_kafka_err2str(ae));
    k->models_assigned = 1;
    return 0;
}

int cct_learn_kafka_read_rollbacks(CctLearnKafka *k, int timeout_ms,
                                   void (*on_rollback)(void *cookie, const CcLearnRollback *r),
                                   void *cookie, char *err, size_t errlen)
{
    if (!k->models_assigned) {
        int rc = assign_models(k, err, errlen);
        if (rc)
            return rc > 0 ? 0 : rc;
    }
    int64_t deadline = cc_now_ns() + (int64_t)timeout_ms * 1000000;
    int n = 0;
    for (;;) {
        if (k->s.stop && *k->s.stop)
            break;
        /* at the end already: what arrived since, without waiting long for nothing */
        int64_t left_ms = (deadline - cc_now_ns()) / 1000000;
        int wait = k->models_at_eof ? 100 : (int)(left_ms > 200 ? 200 : left_ms > 0 ? left_ms : 0);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(k->models_consumer, wait);
        if (!m) {
            if (k->models_at_eof || cc_now_ns() >= deadline)
                break;
            continue;
        }
        if (m->err) {
            int eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
            if (!eof)
                fprintf(stderr, "cellcast learn: '%s': %s\n", k->models_topic,
                        rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            if (eof) {
                k->models_at_eof = 1;
                break;
            }
            continue;
        }
        if (cc_learn_rollback_key(m->key, m->key_len) && m->payload) {
            CcLearnRollback r;
            char why[256];
            if (cc_learn_rollback_parse(m->key, m->key_len, m->payload, m->len, &r, why,
                                        sizeof why) == 0) {
                on_rollback(cookie, &r);
                n++;
            } else {
                k->st.refused_rollbacks++;
                fprintf(stderr,
                        "cellcast learn: '%s': rollback record at offset %lld refused: %s\n",
                        k->models_topic, (long long)m->offset, why);
            }
        }
        rd_kafka_message_destroy(m); /* models and chunks: the learner's own, not read */
    }
    return n;
}

void cct_learn_kafka_stats(const CctLearnKafka *k, CctLearnKafkaStats *st) { *st = k->st; }

const char *cct_learn_kafka_models_topic(const CctLearnKafka *k) { return k->models_topic; }
