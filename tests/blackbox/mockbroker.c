/*
 * mockbroker.c — a standalone librdkafka mock cluster for the black-box tests: the
 * restart tests need a broker that outlives cellcastd (whose `brokers: embedded` cluster
 * dies with it). Prints the bootstrap address as one line on stdout, then serves until
 * SIGTERM/SIGINT.
 *
 * Usage: cc_mockbroker [topic:partitions]...   (default kpis:2 alerts:1)
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "cc_mockbroker: %s\n", err);
        return 1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, 1);
    if (!mc) {
        fprintf(stderr, "cc_mockbroker: cannot create the mock cluster\n");
        return 1;
    }
    const char *deflt[] = {"kpis:2", "alerts:1"};
    int n = argc > 1 ? argc - 1 : 2;
    for (int i = 0; i < n; i++) {
        char name[256];
        const char *spec = argc > 1 ? argv[i + 1] : deflt[i];
        const char *colon = strchr(spec, ':');
        int parts = colon ? atoi(colon + 1) : 1;
        snprintf(name, sizeof name, "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
        if (parts < 1 || rd_kafka_mock_topic_create(mc, name, parts, 1)) {
            fprintf(stderr, "cc_mockbroker: bad topic %s\n", spec);
            return 1;
        }
    }
    printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
    fflush(stdout);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!stop)
        poll(NULL, 0, 200);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    return 0;
}
