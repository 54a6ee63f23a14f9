/*
 * kafka_mock.c — the unit tests' librdkafka mock cluster (kafka_mock.h).
 */
#include "kafka_mock.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

KafkaMock *kafka_mock_open(const char *log_level, const KafkaMockTopic *topics, int n_topics)
{
    KafkaMock *m = calloc(1, sizeof *m);
    assert_non_null(m);
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", log_level, NULL, 0);
    m->mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
    assert_non_null(m->mock_rk);
    m->mc = rd_kafka_mock_cluster_new(m->mock_rk, 1);
    assert_non_null(m->mc);
    for (int i = 0; i < n_topics; i++)
        assert_int_equal(rd_kafka_mock_topic_create(m->mc, topics[i].name, topics[i].partitions, 1),
                         0);
    m->bootstrap = rd_kafka_mock_cluster_bootstraps(m->mc);
    return m;
}

void kafka_mock_close(KafkaMock *m)
{
    if (!m)
        return;
    rd_kafka_mock_cluster_destroy(m->mc);
    rd_kafka_destroy(m->mock_rk);
    free(m);
}
