/* cluster.c — identity, the members topic and routing of cellcastd (see cluster.h). */
#include "cluster.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cc_common.h"
#include "cc_kpi.h"
#include "log.h"

#define MAX_PARTS 4096   /* partitions of the KPI topic a record may list */
#define MAX_MEMBERS 1024 /* records kept; more are counted and dropped */
#define FRESH_HEARTBEATS 5
#define META_REFRESH_MS 30000
#define META_TIMEOUT_MS 200 /* rd_kafka_metadata blocks the loop: keep it short */

typedef struct Member {
    char key[256], group_id[256], member_id[256], instance[256], address[512], protocol[16];
    int32_t *parts;
    int n_parts;
    int32_t n_partitions; /* of the KPI topic as that member saw it, -1 unknown */
    int64_t ts_ms;        /* when the member wrote it (its wall clock) */
    int heartbeat_ms;
} Member;

struct CcdCluster {
    CcdClusterIdentity id;
    char *group_id, *topic, *members_topic, *strategy;
    int partitioner, heartbeat_ms;
    /* the props handed to ccd_kafka_open (cluster.h: ccd_cluster_open) */
    CcdKafkaProp *props, *producer_props;
    char producer_client_id[272];
    CcdKafka *kafka;
    rd_kafka_t *prod, *reader;
    rd_kafka_topic_t *members_rkt, *kpi_rkt;
    int reader_assigned;
    int32_t n_partitions; /* of the KPI topic, -1 unknown */
    int64_t next_meta_ns, next_beat_ns;
    int meta_backoff_ms; /* while the metadata lookups fail */
    int32_t *last_parts; /* what our last record said */
    int n_last_parts;
    int32_t self_parts[MAX_PARTS];
    int n_self_parts;
    /* the other KPI topics (kafka.topics after the first): redirects use the first one's
     * partitions, right while every topic is assigned alike (cluster.h) */
    char **more_topics;
    int n_more_topics;
    int not_copartitioned; /* the last check found a topic assigned otherwise */
    Member *members;
    int n_members;
    uint64_t records, bad_records, dropped_records, publish_errors;
    CcdRateLimit rl;
};

/* ---- partitioner ---- */

typedef int32_t (*PartitionerFn)(const rd_kafka_topic_t *, const void *, size_t, int32_t, void *,
                                 void *);

static const struct {
    const char *name;
    PartitionerFn fn;
} partitioners[CCD_PART_COUNT] = {
    [CCD_PART_MURMUR2_RANDOM] = {"murmur2_random", rd_kafka_msg_partitioner_murmur2_random},
    [CCD_PART_MURMUR2] = {"murmur2", rd_kafka_msg_partitioner_murmur2},
    [CCD_PART_CONSISTENT_RANDOM] = {"consistent_random",
                                    rd_kafka_msg_partitioner_consistent_random},
    [CCD_PART_CONSISTENT] = {"consistent", rd_kafka_msg_partitioner_consistent},
    [CCD_PART_FNV1A_RANDOM] = {"fnv1a_random", rd_kafka_msg_partitioner_fnv1a_random},
    [CCD_PART_FNV1A] = {"fnv1a", rd_kafka_msg_partitioner_fnv1a},
};

const char *ccd_partitioner_name(int p)
{
    return p >= 0 && p < CCD_PART_COUNT ? partitioners[p].name : NULL;
}

int32_t ccd_partition_of_key(int p, const void *key, size_t len, int32_t n)
{
    /* librdkafka's partitioners only look at the topic handle for the random choice of a
     * key-less message, which a cell id never is: calling them without one is safe. */
    if (p < 0 || p >= CCD_PART_COUNT || !key || !len || n < 1)
        return -1;
    return partitioners[p].fn(NULL, key, len, n, NULL, NULL);
}

/* ---- identity ---- */

static int is_wildcard(const char *bind)
{
    return !*bind || !strcmp(bind, "0.0.0.0") || !strcmp(bind, "::") || !strcmp(bind, "*");
}

static const char *prop(const CcdConfig *cfg, const char *name)
{
    for (int i = 0; i < cfg->kafka_properties.n; i++)
        if (!strcmp(cfg->kafka_properties.items[i].key, name))
            return cfg->kafka_properties.items[i].value;
    return NULL;
}

int ccd_cluster_identity(const CcdConfig *cfg, int http_port, CcdClusterIdentity *id, char *err,
                         size_t errlen)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) || !host[0])
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    const char *inst = cfg->cluster_instance ? cfg->cluster_instance : "";
    const char *cid = cfg->kafka_client_id ? cfg->kafka_client_id : "";
    const char *pcid = prop(cfg, "client.id");
    int n;
    if (*cid)
        n = snprintf(id->client_id, sizeof id->client_id, "%s", cid);
    else if (pcid && *pcid)
        n = snprintf(id->client_id, sizeof id->client_id, "%s", pcid);
    else
        n = snprintf(id->client_id, sizeof id->client_id, "cellcastd-%s-%d", *inst ? inst : host,
                     http_port);
    if (n < 0 || (size_t)n >= sizeof id->client_id)
        return cc_errf(err, errlen, -EINVAL, "key 'kafka.client_id': longer than %zu bytes",
                       sizeof id->client_id - 1);
    const char *gi = cfg->kafka_group_instance_id ? cfg->kafka_group_instance_id : "";
    const char *pgi = prop(cfg, "group.instance.id");
    n = snprintf(id->group_instance_id, sizeof id->group_instance_id, "%s",
                 *gi           ? gi
                 : pgi && *pgi ? pgi
                               : inst);
    if (n < 0 || (size_t)n >= sizeof id->group_instance_id)
        return cc_errf(err, errlen, -EINVAL, "key 'kafka.group_instance_id': too long");
    const char *adv = cfg->http_advertise ? cfg->http_advertise : "";
    const char *bind = cfg->http_bind ? cfg->http_bind : "";
    if (*adv)
        n = snprintf(id->advertise, sizeof id->advertise, "%s", adv);
    else if (is_wildcard(bind))
        n = snprintf(id->advertise, sizeof id->advertise, "http://%s:%d", host, http_port);
    else if (strchr(bind, ':')) /* an IPv6 literal */
        n = snprintf(id->advertise, sizeof id->advertise, "http://[%s]:%d", bind, http_port);
    else
        n = snprintf(id->advertise, sizeof id->advertise, "http://%s:%d", bind, http_port);
    if (n < 0 || (size_t)n >= sizeof id->advertise)
        return cc_errf(err, errlen, -EINVAL, "key 'http.advertise': too long");
    size_t l = strlen(id->advertise); /* Location = advertise + path: no double slash */
    while (l && id->advertise[l - 1] == '/')
        id->advertise[--l] = 0;
    if (!ccd_http_address_valid(id->advertise))
        return cc_errf(err, errlen, -EINVAL,
                       "key 'http.advertise': '%s' is not a base URL: http:// or https://, a "
                       "host name or [IPv6 literal], an optional :port; no path, user, spaces or "
                       "control characters (the other members refuse records that name another "
                       "form)",
                       id->advertise);
    return 0;
}

/* ---- open ---- */

static void member_clear(Member *m)
{
    free(m->parts);
    memset(m, 0, sizeof *m);
}

static void destroy(CcdCluster *c)
{
    if (c->members_rkt)
        rd_kafka_topic_destroy(c->members_rkt);
    if (c->kpi_rkt)
        rd_kafka_topic_destroy(c->kpi_rkt);
    if (c->reader) {
        rd_kafka_consumer_close(c->reader); /* no group joined: returns at once */
        rd_kafka_destroy(c->reader);
    }
    if (c->prod)
        rd_kafka_destroy(c->prod);
    for (int i = 0; i < c->n_members; i++)
        member_clear(&c->members[i]);
    free(c->members);
    free(c->last_parts);
    for (int i = 0; i < c->n_more_topics; i++)
        free(c->more_topics[i]);
    free(c->more_topics);
    free(c->props);
    free(c->producer_props);
    free(c->group_id);
    free(c->topic);
    free(c->members_topic);
    free(c->strategy);
    free(c);
}

void ccd_cluster_members_topic(const CcdConfig *cfg, char *buf, size_t len)
{
    if (cfg->cluster_members_topic && *cfg->cluster_members_topic)
        snprintf(buf, len, "%s", cfg->cluster_members_topic);
    else
        snprintf(buf, len, "%s.members", cfg->kafka_topics.n ? cfg->kafka_topics.items[0] : "kpis");
}

int ccd_cluster_open(CcdCluster **out, const CcdConfig *cfg, int http_port, CcdKafkaSettings *ks,
                     char *err, size_t errlen)
{
    int ret;
    *out = NULL;
    CcdCluster *c = calloc(1, sizeof *c);
    if (!c)
        return cc_errf(err, errlen, -ENOMEM, "cluster: out of memory");
    if ((ret = ccd_cluster_identity(cfg, http_port, &c->id, err, errlen)))
        goto error;
    c->partitioner = cfg->kafka_partitioner;
    c->heartbeat_ms = cfg->cluster_heartbeat_ms > 0 ? cfg->cluster_heartbeat_ms : 2000;
    c->n_partitions = -1;
    c->meta_backoff_ms = 50;
    const char *topic = ks->n_topics > 0 ? ks->topics[0] : "kpis";
    const char *strategy = prop(cfg, "partition.assignment.strategy");
    char mt[512];
    ccd_cluster_members_topic(cfg, mt, sizeof mt);
    c->group_id = strdup(ks->group_id ? ks->group_id : "");
    c->topic = strdup(topic);
    c->members_topic = strdup(mt);
    /* kafka.c's default when kafka.properties does not set one */
    c->strategy = strdup(strategy ? strategy : "range,roundrobin");
    c->props = calloc((size_t)ks->n_props + 2, sizeof *c->props);
    c->producer_props = calloc((size_t)ks->n_producer_props + 2, sizeof *c->producer_props);
    if (ks->n_topics > 1 && (c->more_topics = calloc((size_t)ks->n_topics - 1, sizeof(char *))))
        for (int i = 1; i < ks->n_topics; i++)
            if ((c->more_topics[c->n_more_topics] = strdup(ks->topics[i])))
                c->n_more_topics++;
    if (!c->group_id || !c->topic || !c->members_topic || !c->strategy || !c->props ||
        !c->producer_props || c->n_more_topics < ks->n_topics - 1) {
        ret = cc_errf(err, errlen, -ENOMEM, "cluster: out of memory");
        goto error;
    }
    /* Appended last, so they win over kafka.properties (kafka.c applies props in order);
     * ccd_cluster_identity already took kafka.properties.client.id / group.instance.id as
     * the defaults. */
    int n = ks->n_props;
    for (int i = 0; i < n; i++) /* no memcpy: ks->props may be NULL when n = 0 */
        c->props[i] = ks->props[i];
    c->props[n++] = (CcdKafkaProp){"client.id", c->id.client_id};
    if (c->id.group_instance_id[0])
        c->props[n++] = (CcdKafkaProp){"group.instance.id", c->id.group_instance_id};
    ks->props = c->props;
    ks->n_props = n;
    n = ks->n_producer_props;
    for (int i = 0; i < n; i++)
        c->producer_props[i] = ks->producer_props[i];
    snprintf(c->producer_client_id, sizeof c->producer_client_id, "%s-producer", c->id.client_id);
    c->producer_props[n++] = (CcdKafkaProp){"partitioner", ccd_partitioner_name(c->partitioner)};
    c->producer_props[n++] = (CcdKafkaProp){"client.id", c->producer_client_id};
    ks->producer_props = c->producer_props;
    ks->n_producer_props = n;
    *out = c;
    return 0;
error:
    destroy(c);
    return ret;
}

static int set(rd_kafka_conf_t *conf, const char *name, const char *value, char *err, size_t errlen)
{
    char e[256];
    if (rd_kafka_conf_set(conf, name, value, e, sizeof e) != RD_KAFKA_CONF_OK)
        return cc_errf(err, errlen, -EINVAL, "cluster: %s=%s: %s", name, value, e);
    return 0;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    CcdCluster *c = opaque;
    if (m->err) {
        c->publish_errors++;
        CCD_LOG_RL_AT(&c->rl, CC_LOG_WARN, "cluster", "member record not published to %s: %s",
                      c->members_topic, rd_kafka_err2str(m->err));
    }
}

/* One handle (producer or reader) on the bootstrap servers of the KPI consumer. */
static rd_kafka_t *handle(CcdCluster *c, rd_kafka_type_t type, const char *bootstrap, char *err,
                          size_t errlen)
{
    char e[512], gid[600];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    snprintf(gid, sizeof gid, "%s.members-reader", c->group_id);
    if (set(conf, "bootstrap.servers", bootstrap, err, errlen) ||
        set(conf, "client.id", c->id.client_id, err, errlen) ||
        set(conf, "log_level", "4", err, errlen))
        goto error;
    if (type == RD_KAFKA_PRODUCER) {
        if (set(conf, "linger.ms", "0", err, errlen) ||
            set(conf, "message.timeout.ms", "10000", err, errlen))
            goto error;
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    } else {
        /* librdkafka wants a group.id even for a plain assign; the reader never joins
         * (no subscribe) and never commits: it reads the whole topic on every start. */
        if (set(conf, "group.id", gid, err, errlen) ||
            set(conf, "enable.auto.commit", "false", err, errlen) ||
            set(conf, "enable.auto.offset.store", "false", err, errlen) ||
            set(conf, "enable.partition.eof", "false", err, errlen) ||
            set(conf, "fetch.wait.max.ms", "100", err, errlen))
            goto error;
    }
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_t *rk = rd_kafka_new(type, conf, e, sizeof e);
    if (!rk) {
        cc_errf(err, errlen, -EIO, "cluster: %s", e);
        goto error;
    }
    return rk;
error:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

static void publish(CcdCluster *c, int64_t now_ns);

int ccd_cluster_start(CcdCluster *c, CcdKafka *k, char *err, size_t errlen)
{
    c->kafka = k;
    const char *bs = ccd_kafka_bootstrap(k);
    if (!(c->prod = handle(c, RD_KAFKA_PRODUCER, bs, err, errlen)) ||
        !(c->reader = handle(c, RD_KAFKA_CONSUMER, bs, err, errlen)))
        return -EIO;
    rd_kafka_poll_set_consumer(c->reader);
    c->members_rkt = rd_kafka_topic_new(c->prod, c->members_topic, NULL);
    c->kpi_rkt = rd_kafka_topic_new(c->prod, c->topic, NULL);
    if (!c->members_rkt || !c->kpi_rkt)
        return cc_errf(err, errlen, -ENOMEM, "cluster: out of memory");
    /* The first record also creates the topic where brokers auto-create (the embedded
     * one does); production clusters create it compacted (docs/operations.md). */
    publish(c, cc_now_ns());
    CCD_LOG(CC_LOG_INFO, "cluster",
            "member %s (group instance %s) advertises %s on %s; partitioner %s", c->id.client_id,
            c->id.group_instance_id[0] ? c->id.group_instance_id : "none", c->id.advertise,
            c->members_topic, ccd_partitioner_name(c->partitioner));
    return 0;
}

/* ---- records ---- */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Our live assignment of the KPI topic, sorted, into self_parts. */
static void refresh_self(CcdCluster *c)
{
    c->n_self_parts = 0;
    if (!c->kafka)
        return;
    int n = ccd_kafka_assignment(c->kafka, c->topic, c->self_parts, MAX_PARTS);
    c->n_self_parts = n < MAX_PARTS ? n : MAX_PARTS;
    qsort(c->self_parts, (size_t)c->n_self_parts, sizeof *c->self_parts, cmp_i32);
}

/* Whether every other KPI topic is assigned here as the first one is (the same partition
 * numbers): redirects compute a cell's owner from the first topic only, which is right for
 * a cell of any topic only then. The range assignor (the default "range,roundrobin" picks
 * it: every cellcastd supports it) gives that when the topics have the same partition
 * count; roundrobin, cooperative-sticky or unequal counts do not. Warned once per change
 * of the finding. */
static void check_copartitioned(CcdCluster *c)
{
    int32_t parts[MAX_PARTS];
    const char *bad = NULL;
    int n = 0;
    for (int t = 0; !bad && t < c->n_more_topics; t++) {
        n = ccd_kafka_assignment(c->kafka, c->more_topics[t], parts, MAX_PARTS);
        n = n < MAX_PARTS ? n : MAX_PARTS;
        qsort(parts, (size_t)n, sizeof *parts, cmp_i32);
        if (n != c->n_self_parts || memcmp(parts, c->self_parts, (size_t)n * sizeof *parts))
            bad = c->more_topics[t];
    }
    if (bad && !c->not_copartitioned)
        CCD_LOG(CC_LOG_WARN, "cluster",
                "this member holds %d partition(s) of '%s' and %d of '%s', not the same "
                "ones: redirects, computed from '%s', may send a request for a cell of '%s' "
                "to a member that does not hold it (404 there). Give every KPI topic the "
                "same partition count and keep the range assignor "
                "(partition.assignment.strategy), or run one group per topic",
                c->n_self_parts, c->topic, n, bad, c->topic, bad);
    c->not_copartitioned = bad != NULL;
}

static int holds(const int32_t *parts, int n, int32_t p)
{
    return bsearch(&p, parts, (size_t)n, sizeof p, cmp_i32) != NULL;
}

static void publish(CcdCluster *c, int64_t now_ns)
{
    char member_id[256], protocol[16];
    /* the next try in a heartbeat even if this one fails (queue full: broker away) */
    c->next_beat_ns = now_ns + (int64_t)c->heartbeat_ms * 1000000;
    ccd_kafka_membership(c->kafka, member_id, sizeof member_id, protocol, sizeof protocol);
    json_t *parts = json_array();
    for (int i = 0; i < c->n_self_parts; i++)
        json_array_append_new(parts, json_integer(c->self_parts[i]));
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:s, s:i, s:I}", "v", 1,
                          "group_id", c->group_id, "client_id", c->id.client_id, "member_id",
                          member_id, "group_instance_id", c->id.group_instance_id, "address",
                          c->id.advertise, "topic", c->topic, "partition_count",
                          (int)c->n_partitions, "partitions", parts, "protocol", protocol,
                          "heartbeat_ms", c->heartbeat_ms, "ts_ms", (json_int_t)wall_ms());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        CCD_LOG_RL_AT(&c->rl, CC_LOG_ERROR, "cluster", "out of memory building the record");
        return;
    }
    rd_kafka_resp_err_t e = rd_kafka_producev(
        c->prod, RD_KAFKA_V_RKT(c->members_rkt),
        RD_KAFKA_V_KEY(c->id.client_id, strlen(c->id.client_id)), RD_KAFKA_V_VALUE(s, strlen(s)),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    free(s);
    if (e) {
        c->publish_errors++;
        CCD_LOG_RL_AT(&c->rl, CC_LOG_WARN, "cluster", "member record: %s", rd_kafka_err2str(e));
        return;
    }
    int32_t *lp = realloc(c->last_parts, (size_t)(c->n_self_parts + 1) * sizeof *lp);
    if (lp) {
        memcpy(lp, c->self_parts, (size_t)c->n_self_parts * sizeof *lp);
        c->last_parts = lp;
        c->n_last_parts = c->n_self_parts;
    }
}

static Member *find_member(CcdCluster *c, const char *key)
{
    for (int i = 0; i < c->n_members; i++)
        if (!strcmp(c->members[i].key, key))
            return &c->members[i];
    return NULL;
}

static int copy_str(char *dst, size_t cap, json_t *v)
{
    const char *s = json_string_value(v);
    if (!s || strlen(s) >= cap)
        return -1;
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

int ccd_cluster_record(CcdCluster *c, const char *key, size_t key_len, const void *value,
                       size_t len)
{
    char k[256];
    const char *why = "not a member record";
    json_t *o = NULL;
    Member nm = {0};
    c->records++;
    if (!key || !key_len || key_len >= sizeof k || memchr(key, 0, key_len)) {
        why = "no key, or a key that is not a client id";
        goto bad;
    }
    memcpy(k, key, key_len);
    k[key_len] = 0;
    Member *m = find_member(c, k);
    if (!value) { /* tombstone: the member stopped */
        if (m) {
            member_clear(m);
            *m = c->members[--c->n_members];
        }
        return 0;
    }
    json_error_t je;
    o = json_loadb(value, len, 0, &je);
    json_t *parts = json_object_get(o, "partitions");
    json_int_t ts = json_integer_value(json_object_get(o, "ts_ms"));
    json_int_t hb = json_integer_value(json_object_get(o, "heartbeat_ms"));
    json_t *pc = json_object_get(o, "partition_count");
    json_int_t pcv = json_integer_value(pc);
    const char *client_id = json_string_value(json_object_get(o, "client_id"));
    if (!json_is_object(o) || !json_is_array(parts) || json_array_size(parts) > MAX_PARTS ||
        ts <= 0 || hb <= 0 || hb > 3600000 || !json_is_integer(pc) || pcv > MAX_PARTS ||
        copy_str(nm.group_id, sizeof nm.group_id, json_object_get(o, "group_id")) ||
        copy_str(nm.member_id, sizeof nm.member_id, json_object_get(o, "member_id")) ||
        copy_str(nm.instance, sizeof nm.instance, json_object_get(o, "group_instance_id")) ||
        copy_str(nm.address, sizeof nm.address, json_object_get(o, "address")) ||
        copy_str(nm.protocol, sizeof nm.protocol, json_object_get(o, "protocol")) ||
        !json_is_string(json_object_get(o, "topic")))
        goto bad;
    if (strcmp(nm.group_id, c->group_id) ||
        strcmp(json_string_value(json_object_get(o, "topic")), c->topic)) {
        json_decref(o); /* another group or topic sharing the members topic */
        return 0;
    }
    if (!client_id || strcmp(client_id, k)) {
        why = "its client_id is not its key";
        goto bad;
    }
    if (!ccd_http_address_valid(nm.address)) {
        why = "its address is not a base URL (http:// or https://, host, optional port; no "
              "path, user or control characters)";
        goto bad;
    }
    /* A record from the future would stay fresh for as long as it is ahead, and win every
     * claim (the newest wins): the clocks of the members agree to within seconds (NTP). */
    if (ts > wall_ms() + CCD_CLUSTER_MAX_SKEW_MS) {
        why = "its ts_ms is ahead of this member's clock by more than "
              "the allowed skew (clocks not in sync, or forged)";
        goto bad;
    }
    nm.n_parts = (int)json_array_size(parts);
    nm.parts = malloc((size_t)(nm.n_parts + 1) * sizeof *nm.parts);
    if (!nm.parts) {
        json_decref(o);
        c->dropped_records++;
        return -ENOMEM;
    }
    for (int i = 0; i < nm.n_parts; i++) {
        json_t *p = json_array_get(parts, (size_t)i);
        if (!json_is_integer(p) || json_integer_value(p) < 0 ||
            json_integer_value(p) >= MAX_PARTS) {
            why = "a partition out of range";
            goto bad;
        }
        nm.parts[i] = (int32_t)json_integer_value(p);
    }
    json_decref(o);
    qsort(nm.parts, (size_t)nm.n_parts, sizeof *nm.parts, cmp_i32);
    memcpy(nm.key, k, key_len + 1);
    nm.ts_ms = ts;
    nm.n_partitions = pcv > 0 ? (int32_t)pcv : -1;
    nm.heartbeat_ms = (int)hb;
    if (!m) {
        if (c->n_members >= MAX_MEMBERS) {
            free(nm.parts);
            c->dropped_records++;
            return 0;
        }
        Member *a = realloc(c->members, (size_t)(c->n_members + 1) * sizeof *a);
        if (!a) {
            free(nm.parts);
            c->dropped_records++;
            return -ENOMEM;
        }
        c->members = a;
        m = &c->members[c->n_members++];
        memset(m, 0, sizeof *m);
    }
    member_clear(m);
    *m = nm;
    return 0;
bad:
    free(nm.parts);
    json_decref(o);
    c->bad_records++;
    /* the key is printed only up to its first character that is not printable */
    int shown = 0;
    while (key && (size_t)shown < key_len && shown < 64 && isprint((unsigned char)key[shown]))
        shown++;
    CCD_LOG_RL_AT(&c->rl, CC_LOG_WARN, "cluster",
                  "record on %s (key '%.*s') refused: %s; anyone who may write this topic can "
                  "redirect clients: restrict it to the cellcastd principals (docs/operations.md)",
                  c->members_topic, shown, key ? key : "", why);
    return -EINVAL;
}

void ccd_cluster_stats(const CcdCluster *c, CcdClusterStats *st)
{
    memset(st, 0, sizeof *st);
    if (!c)
        return;
    st->records = c->records;
    st->invalid = c->bad_records;
    st->dropped = c->dropped_records;
    st->publish_errors = c->publish_errors;
}

/* A record counts while it is younger than FRESH_HEARTBEATS of its member's heartbeats. */
static int fresh(const CcdCluster *c, const Member *m, int64_t now_ms)
{
    return strcmp(m->key, c->id.client_id) &&
           now_ms - m->ts_ms < (int64_t)FRESH_HEARTBEATS * m->heartbeat_ms;
}

/* The KPI topic's partition count: ours, or while our metadata lookups have failed so far,
 * what a fresh member record says. -1 unknown. */
static int32_t partition_count_known(const CcdCluster *c, int64_t now_ms)
{
    int32_t np = c->n_partitions;
    for (int i = 0; np < 1 && i < c->n_members; i++)
        if (fresh(c, &c->members[i], now_ms))
            np = c->members[i].n_partitions;
    return np;
}

/* ---- cron ---- */

static int32_t partition_count(CcdCluster *c, rd_kafka_topic_t *rkt)
{
    const struct rd_kafka_metadata *md = NULL;
    int32_t n = -1;
    if (!rd_kafka_metadata(c->prod, 0, rkt, &md, META_TIMEOUT_MS) && md->topic_cnt == 1 &&
        !md->topics[0].err)
        n = md->topics[0].partition_cnt;
    if (md)
        rd_kafka_metadata_destroy(md);
    return n;
}

/* 1 when the reader reads every partition of the members topic. */
static int assign_reader(CcdCluster *c)
{
    int32_t n = partition_count(c, c->members_rkt);
    if (n < 1)
        return 0;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int32_t p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add(l, c->members_topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t e = rd_kafka_assign(c->reader, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        CCD_LOG_RL_AT(&c->rl, CC_LOG_WARN, "cluster", "reading %s: %s", c->members_topic,
                      rd_kafka_err2str(e));
    else
        c->reader_assigned = 1;
    return c->reader_assigned;
}

void ccd_cluster_cron(CcdCluster *c)
{
    if (!c || !c->prod)
        return;
    int64_t now = cc_now_ns();
    rd_kafka_poll(c->prod, 0);
    if (now >= c->next_meta_ns) {
        /* Blocking calls (≤ META_TIMEOUT_MS each): every META_REFRESH_MS once known; while
         * not, after 100 ms, then backing off by doubling, so that a broker unreachable
         * from the start costs the event loop little. */
        int ok = 1;
        if (!c->reader_assigned)
            ok &= assign_reader(c);
        int32_t n = partition_count(c, c->kpi_rkt);
        if (n > 0)
            c->n_partitions = n;
        ok &= n > 0;
        c->meta_backoff_ms = ok ? 100 : c->meta_backoff_ms * 2;
        if (c->meta_backoff_ms > META_REFRESH_MS)
            c->meta_backoff_ms = META_REFRESH_MS;
        c->next_meta_ns = now + (int64_t)(ok ? META_REFRESH_MS : c->meta_backoff_ms) * 1000000;
    }
    for (int i = 0; i < 1000; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->reader, 0);
        if (!m)
            break;
        if (!m->err)
            ccd_cluster_record(c, m->key, m->key_len, m->payload, m->len);
        else
            CCD_LOG_RL_AT(&c->rl, CC_LOG_WARN, "cluster", "reading %s: %s", c->members_topic,
                          rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
    }
    refresh_self(c);
    int changed = c->n_self_parts != c->n_last_parts ||
                  memcmp(c->self_parts, c->last_parts ? c->last_parts : c->self_parts,
                         (size_t)c->n_self_parts * sizeof *c->self_parts);
    if (c->n_more_topics) /* every tick: the other topics may move without the first */
        check_copartitioned(c);
    if (changed || now >= c->next_beat_ns)
        publish(c, now);
}

/* ---- routing ---- */

/* No owner found: UNKNOWN if other members are about (a rebalance, or one gone), ALONE if
 * none is: a daemon alone answers as a single daemon. */
static enum CcdOwner nobody(const CcdCluster *c, int64_t now_ms)
{
    for (int i = 0; i < c->n_members; i++)
        if (fresh(c, &c->members[i], now_ms))
            return CCD_OWNER_UNKNOWN;
    return CCD_OWNER_ALONE;
}

enum CcdOwner ccd_cluster_owner(CcdCluster *c, const char *cell, int32_t *partition,
                                const char **address)
{
    *address = NULL;
    int64_t now = wall_ms(), best = 0;
    int32_t np = partition_count_known(c, now);
    *partition = np > 0 ? ccd_partition_of_key(c->partitioner, cell, strlen(cell), np) : -1;
    if (*partition < 0)
        return nobody(c, now);
    refresh_self(c);
    if (holds(c->self_parts, c->n_self_parts, *partition))
        return CCD_OWNER_SELF;
    for (int i = 0; i < c->n_members; i++) {
        const Member *m = &c->members[i];
        /* Two fresh claims happen for a moment during a rebalance: the newer wins. */
        if (fresh(c, m, now) && m->ts_ms > best && holds(m->parts, m->n_parts, *partition)) {
            best = m->ts_ms;
            *address = m->address;
        }
    }
    return *address ? CCD_OWNER_OTHER : nobody(c, now);
}

CcdClusterInfo ccd_cluster_info(const CcdCluster *c)
{
    return (CcdClusterInfo){c->topic, c->group_id, ccd_partitioner_name(c->partitioner),
                            c->id.advertise};
}

static json_t *parts_json(const int32_t *p, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(p[i]));
    return a;
}

json_t *ccd_cluster_json(CcdCluster *c)
{
    char member_id[256] = "", protocol[16] = "NONE";
    if (c->kafka)
        ccd_kafka_membership(c->kafka, member_id, sizeof member_id, protocol, sizeof protocol);
    refresh_self(c);
    int64_t now = wall_ms();
    json_t *members = json_array();
    json_array_append_new(
        members, json_pack("{s:s, s:s, s:s, s:s, s:o, s:b, s:f}", "client_id", c->id.client_id,
                           "member_id", member_id, "group_instance_id", c->id.group_instance_id,
                           "address", c->id.advertise, "partitions",
                           parts_json(c->self_parts, c->n_self_parts), "self", 1, "age_s", 0.0));
    /* claims per partition: each exactly once = stable */
    int np = partition_count_known(c, now), stable = np > 0;
    int *claims = np > 0 ? calloc((size_t)np, sizeof *claims) : NULL;
    for (int i = 0; claims && i < c->n_self_parts; i++)
        if (c->self_parts[i] < np)
            claims[c->self_parts[i]]++;
    for (int i = 0; i < c->n_members; i++) {
        const Member *m = &c->members[i];
        if (!fresh(c, m, now))
            continue;
        for (int j = 0; claims && j < m->n_parts; j++)
            if (m->parts[j] < np)
                claims[m->parts[j]]++;
        json_array_append_new(members,
                              json_pack("{s:s, s:s, s:s, s:s, s:o, s:b, s:f}", "client_id", m->key,
                                        "member_id", m->member_id, "group_instance_id", m->instance,
                                        "address", m->address, "partitions",
                                        parts_json(m->parts, m->n_parts), "self", 0, "age_s",
                                        (double)(now - m->ts_ms) / 1000.0));
    }
    for (int p = 0; claims && p < np; p++)
        stable &= claims[p] == 1;
    free(claims);
    return json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:{s:I, s:I, s:I}}",
                     "group_id", c->group_id, "topic", c->topic, "members_topic", c->members_topic,
                     "partitions", np, "partitioner", ccd_partitioner_name(c->partitioner),
                     "assignment_strategy", c->strategy, "rebalance_protocol", protocol,
                     "group_state",
                     np < 1   ? "unknown"
                     : stable ? "stable"
                              : "rebalancing",
                     "self", c->id.client_id, "heartbeat_ms", c->heartbeat_ms, "members", members,
                     "records", "read", (json_int_t)c->records, "invalid",
                     (json_int_t)c->bad_records, "publish_errors", (json_int_t)c->publish_errors);
}

void ccd_cluster_close(CcdCluster **pc, int timeout_ms)
{
    CcdCluster *c = pc ? *pc : NULL;
    if (!c)
        return;
    if (c->prod && c->members_rkt) {
        /* a tombstone: the others stop redirecting here now, not after 5 heartbeats */
        if (!rd_kafka_producev(c->prod, RD_KAFKA_V_RKT(c->members_rkt),
                               RD_KAFKA_V_KEY(c->id.client_id, strlen(c->id.client_id)),
                               RD_KAFKA_V_VALUE(NULL, 0), RD_KAFKA_V_END))
            rd_kafka_flush(c->prod, timeout_ms);
        if (rd_kafka_outq_len(c->prod) > 0)
            CCD_LOG(CC_LOG_WARN, "cluster", "member record tombstone not delivered within %d ms",
                    timeout_ms);
    }
    destroy(c);
    *pc = NULL;
}
