/*
 * test_kafka_topics.c — the topics cellcastd owns (daemon/kafka.c, ccd_kafka_check_topics
 * and the setup in ccd_kafka_open, issue 29) against librdkafka's in-process mock cluster:
 *  - a state topic with fewer partitions than the KPI topic: ccd_kafka_open refuses, and
 *    the message gives the kafka-topics.sh command that fixes it and the key that turns the
 *    handover off; the same with kafka.state_topic "" (handover off) opens;
 *  - a members topic of any partition count is accepted (every member reads all of it);
 *  - a missing state topic is not auto-created by the check (the brokers' default count is
 *    the defect), and the command that creates it names the KPI topic's partitions and
 *    cleanup.policy=compact;
 *  - check-config (create = 0) reports what it would create and refuses what start would.
 * What the mock cannot show: librdkafka's mock cluster (2.0.2, and still at librdkafka's
 * master) implements neither CreateTopics nor DescribeConfigs and names no controller, so
 * creation through the admin API and the cleanup.policy check are reported "not checked"
 * (-EAGAIN) here: those two paths (CreateTopics with the spec, DescribeConfigs refusing a
 * topic that is not compacted) are not exercised by any test.
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kafka.h"
#include "kafka_mock.h"
#include "log.h"

typedef KafkaMock World;

static const char *const kpi_topics[] = {"kpis"};

static int setup(void **state)
{
    /* the broker: KPI topic 12 partitions, state topic auto-created with 4 */
    static const KafkaMockTopic topics[] = {
        {"kpis", 12}, {"kpis.state", 4}, {"kpis.members", 4}, {"k2", 3}, {"k2.state", 3}};
    *state = kafka_mock_open("0", topics, 5);
    return 0;
}

static int teardown(void **state)
{
    kafka_mock_close(*state);
    return 0;
}

/* Partitions of topic on the mock (0: absent), by an all-topics lookup: a named one would
 * make the mock create it (it answers Metadata ≤ v2, which cannot ask it not to). */
static int mock_partitions(const World *w, const char *topic)
{
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", w->bootstrap, NULL, 0);
    rd_kafka_conf_set(conf, "log_level", "0", NULL, 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof e);
    assert_non_null(rk);
    const struct rd_kafka_metadata *md = NULL;
    assert_int_equal(rd_kafka_metadata(rk, 1, NULL, &md, 5000), 0);
    int n = 0;
    for (int i = 0; i < md->topic_cnt; i++)
        if (!strcmp(md->topics[i].topic, topic))
            n = md->topics[i].partition_cnt;
    rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    return n;
}

static void settings(CcdKafkaSettings *s, const World *w, const char *const *topics,
                     const char *state_topic, const char *members_topic)
{
    ccd_kafka_default_settings(s);
    s->brokers = w->bootstrap;
    s->group_id = "g-topics";
    s->topics = topics;
    s->n_topics = 1;
    s->state_topic = state_topic;
    s->members_topic = members_topic;
    s->topic_setup_timeout_ms = 2000;
}

/* The case: state 4 partitions, KPI 12 → refused, with the fix. */
static void test_state_topic_too_few_partitions_refused(void **state)
{
    World *w = *state;
    CcdKafkaSettings s;
    CcdKafka *k = NULL;
    char err[4096] = "", want[512];
    settings(&s, w, kpi_topics, "kpis.state", "kpis.members");
    assert_int_equal(ccd_kafka_open(&k, &s, NULL, err, sizeof err), -EINVAL);
    assert_null(k);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "'kpis.state' (kafka.state_topic) has 4 partition(s), KPI topic "
                                "'kpis' 12"));
    snprintf(want, sizeof want,
             "kafka-topics.sh --bootstrap-server %s --alter --topic kpis.state --partitions 12",
             w->bootstrap);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, "kafka.state_topic: \"\""));
    /* the members topic (4 partitions) is not what is refused */
    assert_null(strstr(err, "'kpis.members'"));
    /* check-config says the same */
    char msg[4096];
    assert_int_equal(ccd_kafka_check_topics(&s, 0, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, want));
}

/* Handover off (kafka.state_topic ""): the state topic is not looked at; it opens. */
static void test_handover_off_opens(void **state)
{
    World *w = *state;
    CcdKafkaSettings s;
    CcdKafka *k = NULL;
    char err[4096] = "";
    settings(&s, w, kpi_topics, NULL, "kpis.members");
    int rc = ccd_kafka_open(&k, &s, NULL, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    ccd_kafka_close(&k, 2000);
}

/* Co-partitioned state topic, members topic of any count: nothing refused; the mock cannot
 * report cleanup.policy, so the answer is "not all checked" and says so. */
static void test_matching_topics_open(void **state)
{
    World *w = *state;
    static const char *const topics[] = {"k2"};
    CcdKafkaSettings s;
    CcdKafka *k = NULL;
    char err[4096] = "", msg[4096];
    settings(&s, w, topics, "k2.state", "kpis.members");
    assert_int_equal(ccd_kafka_check_topics(&s, 0, msg, sizeof msg), -EAGAIN);
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "cleanup.policy of 'k2.state' (kafka.state_topic) not checked"));
    assert_int_equal(ccd_kafka_open(&k, &s, NULL, err, sizeof err), 0);
    ccd_kafka_close(&k, 2000);
}

/* A missing state topic: the check must not make the brokers auto-create it (they would
 * with their default count, the defect), and says how it is created: the KPI topic's 12
 * partitions, compacted. */
static void test_missing_state_topic_not_auto_created(void **state)
{
    World *w = *state;
    CcdKafkaSettings s;
    CcdKafka *k = NULL;
    char err[4096] = "", msg[4096], want[512];
    settings(&s, w, kpi_topics, "kpis.state2", "kpis.members");
    snprintf(want, sizeof want,
             "kafka-topics.sh --bootstrap-server %s --create --topic kpis.state2 --partitions 12 "
             "--config cleanup.policy=compact",
             w->bootstrap);
    /* check-config: would be created, with that command */
    int rc = ccd_kafka_check_topics(&s, 0, msg, sizeof msg);
    print_message("check: %d %s\n", rc, msg);
    assert_int_equal(rc, -EAGAIN); /* cleanup.policy of the members topic: not checked */
    assert_non_null(strstr(msg, "cleanup.policy of 'kpis.members'"));
    assert_non_null(strstr(msg, "'kpis.state2' (kafka.state_topic) does not exist: cellcastd "
                                "creates it at start as "));
    assert_non_null(strstr(msg, want));
    /* start: the mock cannot create it (no controller): not checked, the command given */
    assert_int_equal(ccd_kafka_check_topics(&s, 1, msg, sizeof msg), -EAGAIN);
    print_message("start: %s\n", msg);
    assert_non_null(strstr(msg, want));
    assert_int_equal(ccd_kafka_open(&k, &s, NULL, err, sizeof err), 0);
    assert_int_equal(mock_partitions(w, "kpis.state2"), 0); /* not auto-created */
    assert_int_equal(mock_partitions(w, "kpis"), 12);
    /* the first assignment checks again (ccd_kafka_recheck_topics): still not creatable */
    assert_int_equal(ccd_kafka_recheck_topics(k, msg, sizeof msg), -EAGAIN);
    assert_non_null(strstr(msg, want));
    assert_int_equal(mock_partitions(w, "kpis.state2"), 0);
    ccd_kafka_close(&k, 2000);
}

/* The KPI topic does not exist yet (producers not started): its partition count is unknown,
 * so the state topic is left to the first assignment, not created with a guess. */
static void test_missing_kpi_topic_defers(void **state)
{
    World *w = *state;
    static const char *const topics[] = {"nokpis"};
    CcdKafkaSettings s;
    char msg[4096];
    settings(&s, w, topics, "nokpis.state", NULL);
    assert_int_equal(ccd_kafka_check_topics(&s, 1, msg, sizeof msg), -EAGAIN);
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "neither does the KPI topic 'nokpis'"));
}

/* Brokers unreachable: not checked, not refused (a member may start before the brokers). */
static void test_unreachable_not_refused(void **state)
{
    (void)state;
    CcdKafkaSettings s;
    char msg[4096];
    ccd_kafka_default_settings(&s);
    s.brokers = "127.0.0.1:1";
    s.state_topic = "kpis.state";
    s.topic_setup_timeout_ms = 500;
    assert_int_equal(ccd_kafka_check_topics(&s, 1, msg, sizeof msg), -EAGAIN);
    assert_non_null(strstr(msg, "not reachable"));
}

/* The list of owned topics: state = the KPI topics' count (0) and refused when fewer;
 * members = 1 partition, any count accepted; both compacted. */
static void test_own_topics(void **state)
{
    (void)state;
    CcdKafkaSettings s;
    CcdKafkaTopicSpec t[CCD_KAFKA_MAX_OWN_TOPICS];
    ccd_kafka_default_settings(&s);
    assert_int_equal(ccd_kafka_own_topics(&s, t), 0);
    s.state_topic = "a.state";
    s.members_topic = "a.members";
    assert_int_equal(ccd_kafka_own_topics(&s, t), 2);
    assert_string_equal(t[0].name, "a.state");
    assert_int_equal(t[0].partitions, 0);
    assert_int_equal(t[0].min_partitions, 1);
    assert_string_equal(t[1].name, "a.members");
    assert_int_equal(t[1].partitions, 1);
    assert_int_equal(t[1].min_partitions, 0);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(t[i].configs[0].name, "cleanup.policy");
        assert_string_equal(t[i].configs[0].value, "compact");
    }
}

int main(void)
{
    ccd_log_level = getenv("TEST_KAFKA_VERBOSE") ? CC_LOG_DEBUG : CC_LOG_ERROR;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_topics),
        cmocka_unit_test(test_state_topic_too_few_partitions_refused),
        cmocka_unit_test(test_handover_off_opens),
        cmocka_unit_test(test_matching_topics_open),
        cmocka_unit_test(test_missing_state_topic_not_auto_created),
        cmocka_unit_test(test_missing_kpi_topic_defers),
        cmocka_unit_test(test_unreachable_not_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
