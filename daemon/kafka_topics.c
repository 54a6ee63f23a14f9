/*
 * kafka_topics.c — the topics cellcastd owns (issue 29; ccd_kafka_own_topics): the state
 * topic (kafka.state_topic, the KPI topics' partition count, co-partitioned) and the members
 * topic (1 partition), both cleanup.policy=compact.
 *
 * ccd_kafka_open creates the missing ones through the admin API before the producer and the
 * consumer exist — a broker that auto-creates would otherwise make them at the first record
 * with its default count (4 against a KPI topic of 12: the handover went off) and not
 * compacted — and refuses to open when an existing one has too few partitions or is not
 * compacted (DescribeConfigs), naming the command that fixes it. What it cannot check
 * (brokers down, KPI topic not there yet, no controller: librdkafka's mock cluster
 * implements neither CreateTopics nor DescribeConfigs) is logged and checked again at the
 * first assignment (ccd_kafka_recheck_topics, from handover.c). Lookups list all topics: a
 * named lookup may make the broker auto-create the topic it asks about.
 */
#include "kafka_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

/* Only the newest record per key is needed on both: compaction keeps one per cell (state)
 * or member (members). The members topic's tombstones and segments go quickly: a member
 * reads the whole topic at every start. */
static const CcdKafkaProp state_topic_configs[] = {{"cleanup.policy", "compact"}};
static const CcdKafkaProp members_topic_configs[] = {
    {"cleanup.policy", "compact"}, {"delete.retention.ms", "60000"}, {"segment.ms", "600000"}};

/* State: partition p holds the cells of KPI partition p (handover.c writes a cell's record
 * to its KPI partition and reads the assigned partitions), so it needs at least the KPI
 * topics' count. Members: every member reads every partition of it (cluster.c), so any
 * count works; 1 keeps it one small log. */
int ccd_kafka_own_topics(const CcdKafkaSettings *s, CcdKafkaTopicSpec *out)
{
    int n = 0;
    if (s->state_topic && *s->state_topic)
        out[n++] = (CcdKafkaTopicSpec){
            s->state_topic,
            "kafka.state_topic",
            0,
            1,
            state_topic_configs,
            1,
            "or set kafka.state_topic: \"\" to run without state handover (the cells of a "
            "partition that changes member then start cold)"};
    if (s->members_topic && *s->members_topic)
        out[n++] = (CcdKafkaTopicSpec){
            s->members_topic, "cluster.members_topic", 1, 0, members_topic_configs, 3, ""};
    return n;
}

/* What a topic check says, three ways: refused (bad), not checked (unsure), done (done). */
typedef struct TopicReport {
    char bad[2048], unsure[2048], done[1024];
} TopicReport;

static void report_add(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used && used + 3 < len) {
        memcpy(buf + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (used < len)
        vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* Every topic the brokers show us, with the broker ids (for the controller check): one
 * all-topics request, which never makes a broker auto-create what it asks about — a named
 * lookup may (librdkafka's mock cluster answers Metadata ≤ v2, which cannot say "do not
 * create", and creates the topic with 4 partitions). NULL: the brokers could not be asked. */
static const struct rd_kafka_metadata *all_topics(rd_kafka_t *rk, int timeout_ms)
{
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms)) {
        if (md)
            rd_kafka_metadata_destroy(md);
        return NULL;
    }
    return md;
}

/* Partitions of topic in md: > 0, 0 when it is not there (does not exist, or this principal
 * may not describe it), -EIO when the brokers report an error for it. */
static int partitions_in(const struct rd_kafka_metadata *md, const char *topic)
{
    for (int i = 0; i < md->topic_cnt; i++)
        if (!strcmp(md->topics[i].topic, topic))
            return md->topics[i].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? 0
                   : md->topics[i].err || md->topics[i].partition_cnt < 1
                       ? -EIO
                       : md->topics[i].partition_cnt;
    return 0;
}

static void create_command(char *buf, size_t len, const char *bootstrap, const CcdKafkaTopicSpec *t,
                           int32_t partitions)
{
    int w = snprintf(buf, len,
                     "kafka-topics.sh --bootstrap-server %s --create --topic %s "
                     "--partitions %d",
                     bootstrap, t->name, (int)partitions);
    for (int i = 0; i < t->n_configs && w > 0 && (size_t)w < len; i++)
        w += snprintf(buf + w, len - (size_t)w, " --config %s=%s", t->configs[i].name,
                      t->configs[i].value);
}

/* One admin request's result event, or NULL after the timeout. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, int timeout_ms)
{
    return rd_kafka_queue_poll(q, timeout_ms + 2000); /* the request times out first */
}

static rd_kafka_AdminOptions_t *admin_options(rd_kafka_t *rk, rd_kafka_admin_op_t op,
                                              int timeout_ms)
{
    char e[256];
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, op);
    if (o) {
        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, e, sizeof e);
        if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS)
            rd_kafka_AdminOptions_set_operation_timeout(o, timeout_ms, e, sizeof e);
    }
    return o;
}

/* Creates the topics to_create[0..n) (their partitions in parts); what happened per topic
 * goes to r; created[i] = 1 when it exists now (created, or by someone else meanwhile). */
static void create_topics(rd_kafka_t *rk, const char *bootstrap, const CcdKafkaTopicSpec **t,
                          const int32_t *parts, int n, int timeout_ms, int *exists_now,
                          TopicReport *r)
{
    char e[512], cmd[1024];
    rd_kafka_NewTopic_t *nt[CCD_KAFKA_MAX_OWN_TOPICS];
    int made = 0;
    for (int i = 0; i < n; i++) {
        exists_now[i] = 0;
        if (!(nt[made] = rd_kafka_NewTopic_new(t[i]->name, parts[i], -1, e, sizeof e))) {
            report_add(r->bad, sizeof r->bad, "'%s' (%s): %s", t[i]->name, t[i]->key, e);
            return;
        }
        for (int c = 0; c < t[i]->n_configs; c++)
            rd_kafka_NewTopic_set_config(nt[made], t[i]->configs[c].name, t[i]->configs[c].value);
        made++;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = admin_options(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout_ms);
    rd_kafka_CreateTopics(rk, nt, (size_t)made, o, q);
    rd_kafka_event_t *ev = admin_wait(q, timeout_ms);
    const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
    size_t n_res = 0;
    const rd_kafka_topic_result_t **tr =
        res ? rd_kafka_CreateTopics_result_topics(res, &n_res) : NULL;
    for (int i = 0; i < n; i++) {
        rd_kafka_resp_err_t err = !ev ? RD_KAFKA_RESP_ERR__TIMED_OUT : rd_kafka_event_error(ev);
        const char *why = ev && err ? rd_kafka_event_error_string(ev) : rd_kafka_err2str(err);
        for (size_t j = 0; !err && j < n_res; j++)
            if (!strcmp(rd_kafka_topic_result_name(tr[j]), t[i]->name)) {
                err = rd_kafka_topic_result_error(tr[j]);
                why = rd_kafka_topic_result_error_string(tr[j]);
                if (!why)
                    why = rd_kafka_err2str(err);
            }
        create_command(cmd, sizeof cmd, bootstrap, t[i], parts[i]);
        if (!err) {
            exists_now[i] = 1;
            report_add(r->done, sizeof r->done, "created '%s' (%s): %d partition(s)", t[i]->name,
                       t[i]->key, (int)parts[i]);
            for (int c = 0; c < t[i]->n_configs; c++)
                report_add(r->done, sizeof r->done, "%s=%s", t[i]->configs[c].name,
                           t[i]->configs[c].value);
        } else if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            exists_now[i] = 1; /* another member created it meanwhile: checked below */
        } else if (err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__TRANSPORT) {
            report_add(r->unsure, sizeof r->unsure,
                       "'%s' (%s) does not exist and creating it timed out (%s): create it "
                       "with: %s",
                       t[i]->name, t[i]->key, why, cmd);
        } else {
            report_add(r->bad, sizeof r->bad,
                       "'%s' (%s) does not exist and the brokers refused to create it (%s: %s); "
                       "create it with: %s%s%s",
                       t[i]->name, t[i]->key, rd_kafka_err2name(err), why, cmd,
                       *t[i]->without ? ", " : "", t[i]->without);
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy_array(nt, (size_t)made);
}

/* cleanup.policy of the topics t[0..n): refused unless it holds "compact". */
static void check_compacted(rd_kafka_t *rk, const char *bootstrap, const CcdKafkaTopicSpec **t,
                            int n, int timeout_ms, TopicReport *r)
{
    rd_kafka_ConfigResource_t *cr[CCD_KAFKA_MAX_OWN_TOPICS];
    for (int i = 0; i < n; i++)
        cr[i] = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, t[i]->name);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout_ms);
    rd_kafka_DescribeConfigs(rk, cr, (size_t)n, o, q);
    rd_kafka_event_t *ev = admin_wait(q, timeout_ms);
    const rd_kafka_DescribeConfigs_result_t *res =
        ev && !rd_kafka_event_error(ev) ? rd_kafka_event_DescribeConfigs_result(ev) : NULL;
    size_t n_res = 0;
    const rd_kafka_ConfigResource_t **rs =
        res ? rd_kafka_DescribeConfigs_result_resources(res, &n_res) : NULL;
    for (int i = 0; i < n; i++) {
        const rd_kafka_ConfigResource_t *found = NULL;
        for (size_t j = 0; j < n_res; j++)
            if (!strcmp(rd_kafka_ConfigResource_name(rs[j]), t[i]->name))
                found = rs[j];
        if (!found || rd_kafka_ConfigResource_error(found)) {
            report_add(r->unsure, sizeof r->unsure,
                       "cleanup.policy of '%s' (%s) unknown (%s): it must be compact", t[i]->name,
                       t[i]->key,
                       found ? rd_kafka_err2str(rd_kafka_ConfigResource_error(found))
                       : ev  ? rd_kafka_event_error_string(ev)
                             : "no answer");
            continue;
        }
        size_t nc = 0;
        const rd_kafka_ConfigEntry_t **ce = rd_kafka_ConfigResource_configs(found, &nc);
        const char *policy = "delete"; /* Kafka's default when the entry is absent */
        for (size_t c = 0; c < nc; c++)
            if (!strcmp(rd_kafka_ConfigEntry_name(ce[c]), "cleanup.policy") &&
                rd_kafka_ConfigEntry_value(ce[c]))
                policy = rd_kafka_ConfigEntry_value(ce[c]);
        if (!strstr(policy, "compact"))
            report_add(r->bad, sizeof r->bad,
                       "'%s' (%s) has cleanup.policy=%s: it must be compacted (one record per "
                       "key is read back; without compaction every record ever written is "
                       "kept and read); fix: kafka-configs.sh --bootstrap-server %s --alter "
                       "--entity-type topics --entity-name %s --add-config "
                       "cleanup.policy=compact%s%s",
                       t[i]->name, t[i]->key, policy, bootstrap, t[i]->name,
                       *t[i]->without ? ", " : "", t[i]->without);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    for (int i = 0; i < n; i++)
        rd_kafka_ConfigResource_destroy(cr[i]);
}

/* Creates the missing topics of t[0..n) (create = 1) and checks the others, on handle rk
 * (which must not auto-create topics). The KPI topics give the partition count of a spec
 * with partitions 0. Returns 0 / -EINVAL / -EAGAIN with msg (see ccd_kafka_check_topics). */
static int ensure_topics(rd_kafka_t *rk, const char *bootstrap, char *const *kpi_topics, int n_kpi,
                         const CcdKafkaTopicSpec *t, int n, int create, int timeout_ms, char *msg,
                         size_t msglen)
{
    TopicReport *r = calloc(1, sizeof *r);
    if (!r)
        return cc_errf(msg, msglen, -ENOMEM, "out of memory");
    int32_t kpi_parts = 0;
    int ret = 0;
    const char *kpi_missing = NULL, *kpi_max = n_kpi ? kpi_topics[0] : "";
    const struct rd_kafka_metadata *md = all_topics(rk, timeout_ms);
    if (!md) {
        ret = cc_errf(msg, msglen, -EAGAIN,
                      "brokers %s not reachable within %d ms: the topics cellcastd owns "
                      "(%s%s%s) are not checked",
                      bootstrap, timeout_ms, t[0].name, n > 1 ? ", " : "", n > 1 ? t[1].name : "");
        goto out;
    }
    for (int i = 0; i < n_kpi; i++) {
        int p = partitions_in(md, kpi_topics[i]);
        if (p < 0)
            p = 0; /* an error for it: unknown, as if missing */
        if (!p && !kpi_missing)
            kpi_missing = kpi_topics[i];
        if (p > kpi_parts) {
            kpi_parts = p;
            kpi_max = kpi_topics[i];
        }
    }
    /* CreateTopics and DescribeConfigs go to the controller; librdkafka's mock cluster
     * names none of its brokers (controller id 0) and implements neither request. */
    int32_t controller = rd_kafka_controllerid(rk, timeout_ms);
    int have_controller = 0;
    for (int i = 0; i < md->broker_cnt; i++)
        have_controller |= controller >= 0 && md->brokers[i].id == controller;
    const CcdKafkaTopicSpec *missing[CCD_KAFKA_MAX_OWN_TOPICS], *present[CCD_KAFKA_MAX_OWN_TOPICS];
    int32_t missing_parts[CCD_KAFKA_MAX_OWN_TOPICS];
    int n_missing = 0, n_present = 0;
    char cmd[1024];
    for (int i = 0; i < n && i < CCD_KAFKA_MAX_OWN_TOPICS; i++) {
        int32_t want = t[i].partitions > 0 ? t[i].partitions : kpi_missing ? 0 : kpi_parts;
        int p = partitions_in(md, t[i].name);
        if (p < 0) {
            report_add(r->unsure, sizeof r->unsure, "'%s' (%s): metadata unavailable", t[i].name,
                       t[i].key);
        } else if (!p && !want) {
            report_add(r->unsure, sizeof r->unsure,
                       "'%s' (%s) does not exist and neither does the KPI topic '%s' whose "
                       "partition count it takes: created when the KPI topic is first assigned",
                       t[i].name, t[i].key, kpi_missing);
        } else if (!p && !create) {
            create_command(cmd, sizeof cmd, bootstrap, &t[i], want);
            report_add(r->done, sizeof r->done,
                       "'%s' (%s) does not exist: cellcastd creates it "
                       "at start as %s",
                       t[i].name, t[i].key, cmd);
        } else if (!p && !have_controller) {
            create_command(cmd, sizeof cmd, bootstrap, &t[i], want);
            report_add(r->unsure, sizeof r->unsure,
                       "'%s' (%s) does not exist and the brokers name no controller to create "
                       "it (librdkafka's mock cluster?): create it with: %s",
                       t[i].name, t[i].key, cmd);
        } else if (!p) {
            missing_parts[n_missing] = want;
            missing[n_missing++] = &t[i];
        } else {
            if (t[i].min_partitions && want > 0 && p < want)
                report_add(r->bad, sizeof r->bad,
                           "'%s' (%s) has %d partition(s), KPI topic '%s' %d: state partition p "
                           "holds the cells of KPI partition p, so it needs at least %d "
                           "(co-partitioned); fix: kafka-topics.sh --bootstrap-server %s --alter "
                           "--topic %s --partitions %d%s%s",
                           t[i].name, t[i].key, p, kpi_max, (int)want, (int)want, bootstrap,
                           t[i].name, (int)want, *t[i].without ? ", " : "", t[i].without);
            present[n_present++] = &t[i];
        }
    }
    if (n_missing) {
        int exists_now[CCD_KAFKA_MAX_OWN_TOPICS];
        create_topics(rk, bootstrap, missing, missing_parts, n_missing, timeout_ms, exists_now, r);
        for (int i = 0; i < n_missing; i++)
            if (exists_now[i] && strstr(r->done, missing[i]->name) == NULL) {
                /* created by another member meanwhile: check its partitions like ours */
                const struct rd_kafka_metadata *now = all_topics(rk, timeout_ms);
                int p = now ? partitions_in(now, missing[i]->name) : -EIO;
                if (now)
                    rd_kafka_metadata_destroy(now);
                if (missing[i]->min_partitions && p > 0 && p < missing_parts[i])
                    report_add(r->bad, sizeof r->bad,
                               "'%s' (%s) was created meanwhile with %d partition(s), not %d; "
                               "fix: kafka-topics.sh --bootstrap-server %s --alter --topic %s "
                               "--partitions %d",
                               missing[i]->name, missing[i]->key, p, (int)missing_parts[i],
                               bootstrap, missing[i]->name, (int)missing_parts[i]);
                present[n_present++] = missing[i];
            }
    }
    if (n_present && have_controller)
        check_compacted(rk, bootstrap, present, n_present, timeout_ms, r);
    else
        for (int i = 0; i < n_present; i++)
            report_add(r->unsure, sizeof r->unsure,
                       "cleanup.policy of '%s' (%s) not checked (no controller to ask): it must "
                       "be compact",
                       present[i]->name, present[i]->key);
    ret = r->bad[0] ? -EINVAL : r->unsure[0] ? -EAGAIN : 0;
    if (r->bad[0])
        snprintf(msg, msglen, "%s", r->bad);
    else
        snprintf(msg, msglen, "%s%s%s", r->done, r->done[0] && r->unsure[0] ? "; " : "", r->unsure);
    rd_kafka_metadata_destroy(md);
out:
    free(r);
    return ret;
}

static void setup_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    CCD_LOG(kafka_log_level(level), "kafka", "kafka topic setup: %s: %s", fac, buf);
}

/* A consumer handle for the topic setup: it never subscribes, and as a consumer it does not
 * ask the brokers to auto-create what it looks up (allow.auto.create.topics forced off). */
static rd_kafka_t *setup_handle(const char *bootstrap, const CcdKafkaSettings *s, char *err,
                                size_t errlen)
{
    char e[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
    for (int i = 0; i < s->n_props; i++) /* security.protocol, sasl.*, ssl.* … */
        if (!kafka_prop_is_forced(s->props[i].name) &&
            strcmp(s->props[i].name, "group.instance.id") &&
            kafka_set_prop(conf, s->props[i].name, s->props[i].value, err, errlen)) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    if (kafka_set_prop(conf, "bootstrap.servers", bootstrap, err, errlen) ||
        kafka_set_prop(conf, "allow.auto.create.topics", "false", err, errlen) ||
        kafka_set_prop(conf, "client.id", "cellcastd-topic-setup", err, errlen)) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_log_cb(conf, setup_log_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        cc_errf(err, errlen, -EINVAL, "kafka: topic setup: %s", e);
    }
    return rk;
}

int ccd_kafka_check_topics(const CcdKafkaSettings *s, int create, char *msg, size_t msglen)
{
    CcdKafkaTopicSpec t[CCD_KAFKA_MAX_OWN_TOPICS];
    int n = ccd_kafka_own_topics(s, t);
    if (msg && msglen)
        msg[0] = '\0';
    if (!n || !s->brokers || !strcmp(s->brokers, "embedded"))
        return 0;
    rd_kafka_t *rk = setup_handle(s->brokers, s, msg, msglen);
    if (!rk)
        return -EINVAL;
    int timeout = s->topic_setup_timeout_ms > 0 ? s->topic_setup_timeout_ms : 5000;
    int ret = ensure_topics(rk, s->brokers, (char *const *)s->topics, s->n_topics, t, n, create,
                            timeout, msg, msglen);
    rd_kafka_destroy(rk);
    return ret;
}

int ccd_kafka_recheck_topics(CcdKafka *k, char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = '\0';
    if (k->mock || !k->topics_unsure)
        return 0;
    CcdKafkaSettings s;
    ccd_kafka_default_settings(&s);
    s.state_topic = k->state_topic;
    s.members_topic = k->members_topic;
    CcdKafkaTopicSpec t[CCD_KAFKA_MAX_OWN_TOPICS];
    int n = ccd_kafka_own_topics(&s, t);
    /* the consumer: it does not ask for auto-creation (unless kafka.properties says so) */
    int ret = ensure_topics(k->rk, k->bootstrap, k->topics, k->n_topics, t, n, 1,
                            k->setup_timeout_ms, msg, msglen);
    if (ret != -EAGAIN)
        k->topics_unsure = 0;
    return ret;
}
