/*
 * kafka_mock_cluster.c — a standalone librdkafka mock cluster of N brokers for the
 * several-instances tests (tests/blackbox/test_cluster_failover.sh): unlike tests/blackbox's
 * cc_mockbroker (one broker, no control), it can take brokers down and up on command, for
 * broker outages longer than the consumers' session timeout.
 *
 * Usage: cc_kafka_mock_cluster BROKERS [topic:partitions]...
 * Prints the bootstrap servers as one line on stdout, then reads commands on stdin, one
 * per line, and answers each with "ok ..." or "error ..." on stdout:
 *   down B   broker B (1..BROKERS) stops answering (rd_kafka_mock_broker_set_down)
 *   up B     broker B answers again
 *   quit     exit
 * EOF on stdin, SIGTERM or SIGINT: exit 0, the cluster destroyed.
 */
#include <errno.h>
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

/* One command line; returns 1 on quit. */
static int command(rd_kafka_mock_cluster_t *mc, int n_brokers, char *line)
{
    char verb[16];
    int b = 0;
    line[strcspn(line, "\r\n")] = 0;
    if (sscanf(line, "%15s %d", verb, &b) < 1)
        return 0;
    if (!strcmp(verb, "quit"))
        return 1;
    int down = !strcmp(verb, "down");
    if ((!down && strcmp(verb, "up")) || b < 1 || b > n_brokers) {
        printf("error: '%s': expected down B, up B or quit (B in 1..%d)\n", line, n_brokers);
    } else {
        rd_kafka_resp_err_t err =
            down ? rd_kafka_mock_broker_set_down(mc, b) : rd_kafka_mock_broker_set_up(mc, b);
        if (err)
            printf("error: %s %d: %s\n", verb, b, rd_kafka_err2str(err));
        else
            printf("ok %s %d\n", verb, b);
    }
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    char err[256];
    int ret = 1;
    int n_brokers = argc > 1 ? atoi(argv[1]) : 0;
    if (n_brokers < 1 || n_brokers > 64) {
        fprintf(stderr, "usage: %s BROKERS [topic:partitions]...\n", argv[0]);
        return 2;
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "kafka_mock_cluster: %s\n", err);
        rd_kafka_conf_destroy(conf);
        return 1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, n_brokers);
    if (!mc) {
        fprintf(stderr, "kafka_mock_cluster: cannot create the mock cluster\n");
        goto out_rk;
    }
    for (int i = 2; i < argc; i++) {
        char name[256];
        const char *colon = strchr(argv[i], ':');
        int parts = colon ? atoi(colon + 1) : 1;
        snprintf(name, sizeof name, "%.*s", colon ? (int)(colon - argv[i]) : (int)strlen(argv[i]),
                 argv[i]);
        /* replication factor = brokers (≤ 3): a partition has followers on the others */
        int rf = n_brokers < 3 ? n_brokers : 3;
        rd_kafka_resp_err_t e;
        if (parts < 1 || (e = rd_kafka_mock_topic_create(mc, name, parts, rf))) {
            fprintf(stderr, "kafka_mock_cluster: bad topic %s\n", argv[i]);
            goto out;
        }
    }
    printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
    fflush(stdout);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL); /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    char line[256];
    size_t len = 0;
    while (!stop) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        int r = poll(&p, 1, 200);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        ssize_t n = read(0, line + len, sizeof line - 1 - len);
        if (n <= 0) /* EOF: the test that drove us is gone */
            break;
        len += (size_t)n;
        line[len] = 0;
        char *nl;
        int quit = 0;
        while (!quit && (nl = strchr(line, '\n'))) {
            *nl = 0;
            quit = command(mc, n_brokers, line);
            len -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, len + 1);
        }
        if (quit)
            break;
        if (len == sizeof line - 1) /* an over-long line: drop it */
            len = 0;
    }
    ret = 0;
out:
    rd_kafka_mock_cluster_destroy(mc);
out_rk:
    rd_kafka_destroy(rk);
    return ret;
}
