/*
 * ingest_bench.c — the producer side of the end-to-end ingest benchmark
 * (tests/bench/ingest_bench.sh drives it against a running cellcastd).
 *
 * Produces one KPI message per cell-step (proto/kpi.schema.json, KPIs under "kpis",
 * unix-second timestamps, keyed by cell id), step-major: every cell's step p before any
 * cell's step p+1, as a live feed delivers them. Values follow a daily sine per cell with
 * a little deterministic wobble. Prints one JSON line: messages, seconds, messages/s.
 *
 * Usage: ingest_bench -b BOOTSTRAP [-t kpis] [-c cells] [--from P] [-n steps]
 *                     [-S step_seconds] [-f name,name,...] [--t0 unix]
 *
 * Consumer mode (the librdkafka queue tuning of daemon/kafka.c, without the daemon):
 *        ingest_bench --consume N -b BOOTSTRAP [-g group] [-p prop=value]... [--work-us U]
 * reads N messages through cc_kafka (daemon/kafka.c) from a backlog, acking every batch,
 * spending U µs of busy work per message (a stand-in for decode + step), and reports
 * messages/s and the time spent polling an empty queue while the backlog was not drained
 * ("stall_s": librdkafka 2.0 idles up to ~1 s after its local queue fell below
 * queued.min.messages / queued.max.messages.kbytes).
 */
#include <getopt.h>
#include <librdkafka/rdkafka.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kafka.h"
#include "log.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t consumed;

static void on_msg(void *cookie, uint64_t batch, const CcdKafkaMessage *m)
{
    (void)cookie;
    (void)batch;
    (void)m;
    consumed++;
}

static void busy_us(double us)
{
    double end = now_s() + us * 1e-6;
    while (now_s() < end)
        ;
}

static int consume(const char *bootstrap, const char *topic, const char *group, long n,
                   CcdKafkaProp *props, int n_props, double work_us)
{
    const char *topics[1] = {topic};
    CcdKafkaSettings s;
    ccd_kafka_default_settings(&s);
    s.brokers = bootstrap;
    s.group_id = group;
    s.topics = topics;
    s.n_topics = 1;
    s.props = props;
    s.n_props = n_props;
    CcdKafkaHooks h = {NULL, on_msg, NULL, NULL, NULL, NULL};
    CcdKafka *k = NULL;
    char err[512];
    if (ccd_kafka_open(&k, &s, &h, err, sizeof err)) {
        fprintf(stderr, "ingest_bench: %s\n", err);
        return 1;
    }
    double start = 0, stall = 0, t_end = now_s() + 600;
    while (consumed < (uint64_t)n && now_s() < t_end) {
        uint64_t before = consumed;
        double t = now_s();
        uint64_t id = ccd_kafka_poll(k);
        ccd_kafka_service(k);
        if (id) {
            if (!start)
                start = t;
            busy_us(work_us * (double)(consumed - before));
            ccd_kafka_ack(k, id);
        } else {
            usleep(1000);
            if (start)
                stall += now_s() - t;
        }
        static double last_report;
        if (getenv("INGEST_BENCH_VERBOSE") && now_s() - last_report > 1) {
            CcdKafkaStats st;
            ccd_kafka_stats(k, &st);
            fprintf(stderr, "consumed %llu lag %lld assigned %d unacked %llu errors %llu\n",
                    (unsigned long long)consumed, (long long)st.lag, st.assigned_partitions,
                    (unsigned long long)st.unacked_messages,
                    (unsigned long long)st.consumer_errors);
            last_report = now_s();
        }
    }
    double dt = now_s() - start;
    printf("{\"consumed\": %llu, \"seconds\": %.3f, \"messages_per_s\": %.0f, "
           "\"stall_s\": %.3f}\n",
           (unsigned long long)consumed, dt, consumed / dt, stall);
    ccd_kafka_close(&k, 2000);
    return consumed < (uint64_t)n;
}

int main(int argc, char **argv)
{
    const char *group = "ingest-bench";
    long n_consume = 0;
    double work_us = 0;
    ccd_log_level = getenv("INGEST_BENCH_VERBOSE") ? CC_LOG_DEBUG : CC_LOG_WARN;
    CcdKafkaProp props[32];
    int n_props = 0;
    const char *bootstrap = NULL, *topic = "kpis";
    const char *features =
        "prb_dl,prb_ul,thr_dl_mbps,thr_ul_mbps,active_users,latency_ms,cqi,drop_rate";
    long cells = 10000, from = 0, steps = 16, S = 3600, t0 = 1704067200;
    static const struct option opts[] = {{"bootstrap", required_argument, 0, 'b'},
                                         {"topic", required_argument, 0, 't'},
                                         {"cells", required_argument, 0, 'c'},
                                         {"from", required_argument, 0, 'F'},
                                         {"steps", required_argument, 0, 'n'},
                                         {"step-seconds", required_argument, 0, 'S'},
                                         {"features", required_argument, 0, 'f'},
                                         {"t0", required_argument, 0, 'T'},
                                         {"consume", required_argument, 0, 'C'},
                                         {"group", required_argument, 0, 'g'},
                                         {"prop", required_argument, 0, 'p'},
                                         {"work-us", required_argument, 0, 'W'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "b:t:c:n:S:f:g:p:", opts, NULL)) != -1) {
        switch (o) {
        case 'C': n_consume = atol(optarg); break;
        case 'g': group = optarg; break;
        case 'W': work_us = atof(optarg); break;
        case 'p': {
            char *eq = strchr(optarg, '=');
            if (!eq || n_props == 32) {
                fprintf(stderr, "ingest_bench: -p NAME=VALUE\n");
                return 2;
            }
            *eq = 0;
            props[n_props++] = (CcdKafkaProp){optarg, eq + 1};
            break;
        }
        case 'b': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'c': cells = atol(optarg); break;
        case 'F': from = atol(optarg); break;
        case 'n': steps = atol(optarg); break;
        case 'S': S = atol(optarg); break;
        case 'f': features = optarg; break;
        case 'T': t0 = atol(optarg); break;
        default:
            fprintf(stderr, "usage: ingest_bench -b BOOTSTRAP [-t topic] [-c cells] [--from P] "
                            "[-n steps] [-S s] [-f names] [--t0 unix]\n");
            return 2;
        }
    }
    if (!bootstrap || cells < 1 || steps < 1 || S < 1) {
        fprintf(stderr, "ingest_bench: -b BOOTSTRAP is required; cells/steps/S ≥ 1\n");
        return 2;
    }
    if (n_consume > 0)
        return consume(bootstrap, topic, group, n_consume, props, n_props, work_us);
    char *names[64];
    int F = 0;
    char *fl = strdup(features);
    for (char *tok = strtok(fl, ","); tok && F < 64; tok = strtok(NULL, ","))
        names[F++] = tok;

    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *pprops[][2] = {{"bootstrap.servers", bootstrap},
                               {"linger.ms", "20"},
                               {"batch.num.messages", "10000"},
                               {"queue.buffering.max.messages", "1000000"},
                               {"queue.buffering.max.kbytes", "1048576"},
                               {"compression.codec", "none"},
                               {"acks", "1"}};
    for (size_t i = 0; i < sizeof pprops / sizeof *pprops; i++)
        if (rd_kafka_conf_set(conf, pprops[i][0], pprops[i][1], err, sizeof err)) {
            fprintf(stderr, "ingest_bench: %s\n", err);
            return 1;
        }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "ingest_bench: %s\n", err);
        return 1;
    }
    double start = now_s();
    uint64_t n = 0, retries = 0;
    char buf[1024], key[32];
    for (long p = from; p < from + steps; p++) {
        long ts = t0 + p * S;
        for (long c = 0; c < cells; c++) {
            int kl = snprintf(key, sizeof key, "bench-%06ld", c);
            int len = snprintf(buf, sizeof buf, "{\"cell\":\"%s\",\"ts\":%ld,\"kpis\":{", key, ts);
            for (int f = 0; f < F; f++) {
                double day = 2 * M_PI * (double)(p % 24) / 24.0;
                double v = 50 + 30 * sin(day + 0.1 * f + 0.001 * c) + 3 * sin(0.7 * p + f + c);
                len += snprintf(buf + len, sizeof buf - len, "%s\"%s\":%.3f", f ? "," : "",
                                names[f], v);
            }
            len += snprintf(buf + len, sizeof buf - len, "}}");
            for (;;) {
                rd_kafka_resp_err_t e =
                    rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, (size_t)kl),
                                      RD_KAFKA_V_VALUE(buf, (size_t)len),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
                if (!e)
                    break;
                if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                    fprintf(stderr, "ingest_bench: produce: %s\n", rd_kafka_err2str(e));
                    return 1;
                }
                retries++;
                rd_kafka_poll(rk, 10);
            }
            n++;
            if ((n & 1023) == 0)
                rd_kafka_poll(rk, 0);
        }
    }
    if (rd_kafka_flush(rk, 120000)) {
        fprintf(stderr, "ingest_bench: flush timed out, %d left\n", rd_kafka_outq_len(rk));
        return 1;
    }
    double dt = now_s() - start;
    printf("{\"messages\": %llu, \"seconds\": %.3f, \"messages_per_s\": %.0f, "
           "\"queue_full_waits\": %llu}\n",
           (unsigned long long)n, dt, n / dt, (unsigned long long)retries);
    rd_kafka_destroy(rk);
    free(fl);
    return 0;
}
