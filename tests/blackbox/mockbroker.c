/*
 * mockbroker.c — a standalone librdkafka mock cluster for the black-box tests: the
 * restart tests need a broker that outlives cellcastd (whose `brokers: embedded` cluster
 * dies with it). Prints the bootstrap address as one line on stdout, then serves until
 * SIGTERM/SIGINT.
 *
 * Usage: cc_mockbroker [topic:partitions]...   (default kpis:2 alerts:1)
 *
 * Faults, for the delivery tests: SIGUSR1 makes every Produce request fail (a retriable
 * NOT_ENOUGH_REPLICAS, so producers keep retrying: nothing is delivered); SIGUSR2 clears
 * that. Fetches are not affected.
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop, fault = -1;

static void on_signal(int sig)
{
    if (sig == SIGUSR1 || sig == SIGUSR2)
        fault = sig == SIGUSR1;
    else
        stop = 1;
}

/* Produce requests fail (on) or succeed again (off). */
static void produce_fault(rd_kafka_mock_cluster_t *mc, int on)
{
    enum { N = 1000000 }; /* ~ one per 100 ms retry backoff: days */
    rd_kafka_mock_clear_request_errors(mc, 0 /* Produce */);
    if (!on)
        return;
    rd_kafka_resp_err_t *e = malloc(N * sizeof *e);
    if (!e)
        return;
    for (int i = 0; i < N; i++)
        e[i] = RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS;
    rd_kafka_mock_push_request_errors_array(mc, 0, N, e);
    free(e);
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
    signal(SIGUSR1, on_signal);
    signal(SIGUSR2, on_signal);
    while (!stop) {
        poll(NULL, 0, 100);
        if (fault >= 0) {
            produce_fault(mc, fault);
            fprintf(stderr, "cc_mockbroker: produce requests %s\n", fault ? "fail" : "succeed");
            fault = -1;
        }
    }
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    return 0;
}
