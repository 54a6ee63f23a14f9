/*
 * kafka_mock.h — librdkafka's in-process mock cluster as the unit tests of daemon/kafka.c
 * and daemon/cluster.c start it (test_kafka.c, test_kafka_topics.c, test_cluster.c): one
 * broker, the topics a test names, and the handle that owns it.
 */
#ifndef CC_KAFKA_MOCK_H
#define CC_KAFKA_MOCK_H

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/** A running mock cluster: the producer handle that owns it, the cluster, its bootstrap
 *  address (valid until kafka_mock_close). */
typedef struct KafkaMock {
    rd_kafka_t *mock_rk;
    rd_kafka_mock_cluster_t *mc;
    const char *bootstrap;
} KafkaMock;

/** A topic to create on it: its name and partition count (replication factor 1). */
typedef struct KafkaMockTopic {
    const char *name;
    int partitions;
} KafkaMockTopic;

/** Starts a one-broker mock cluster with librdkafka's log_level ("0" silent ... "7") and the
 *  n_topics topics; a failure fails the calling test (cmocka). Free with kafka_mock_close. */
KafkaMock *kafka_mock_open(const char *log_level, const KafkaMockTopic *topics, int n_topics);

/** Stops the cluster and frees m (NULL: nothing). */
void kafka_mock_close(KafkaMock *m);

#endif
