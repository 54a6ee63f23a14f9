/* demo.c — the built-in synthetic feed of cellcastd (`demo:` section). It produces KPI
 * messages (proto/kpi.schema.json) into demo.topic through ccd_kafka_produce, so they take
 * the real path: broker → consumer → decoder → cell table → batched step → forecast.
 *
 * Values come from lib's deterministic generator (cc_synth.h): cell i at step p is a pure
 * function of (demo.seed, i, p). Cell ids are demo.cell_prefix + a 4-digit number. The
 * model's feature names are used when the generator knows them; otherwise the generator's
 * KPIs are sent under the model's names in order (a demo, not a measurement).
 *
 * Time: at start the feed produces demo.backfill_steps steps of history ending at the
 * current step, then simulated time runs demo.speedup times faster than the wall clock;
 * the cron calls ccd_demo_tick every 10 ms, which produces every step that became due, at
 * most DEMO_MAX_PER_TICK messages per tick so that the loop stays responsive (the rest on
 * the next ticks). A full producer queue leaves the cursor where it is. With the embedded
 * broker the feed also waits for the consumer (DEMO_MAX_AHEAD_PER_PARTITION): that broker
 * deletes unconsumed messages past its retention. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc_json.h"
#include "cc_synth.h"
#include "cellcastd.h"
#include "log.h"

/* Messages produced per 10 ms tick on the event loop (≤ 20k/s): 1000 held the loop ~10 ms
 * at a time and pushed the HTTP p99 under the demo feed to 17-29 ms; 200 keeps it ~5 ms. */
#define DEMO_MAX_PER_TICK 200

/* With the embedded broker, messages not yet consumed per partition at most. It keeps only
 * the newest ~5 MiB of a partition (~20k demo messages of ~250 bytes) and deletes older
 * ones even unconsumed: the feed keeps what it produced minus what the consumer took
 * below this times the partitions, so it never outruns the retention (keys spread
 * unevenly over partitions: a 5x margin). */
#define DEMO_MAX_AHEAD_PER_PARTITION 4000

struct CcdDemo {
    CcSynth *g;
    int n_cells, F;
    int64_t S;
    int64_t step, cell;     /* cursor: next (step, cell) to produce */
    double t0_real, t0_sim; /* unix seconds */
    uint64_t produced, dropped;
    int by_position;
    int embedded;
    uint64_t paused; /* ticks skipped for the embedded broker's retention */
};

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ccd_demo_open(Ccd *d, char *err, size_t errlen)
{
    const CcHparams *hp = &d->model->hp;
    CcdDemo *m = calloc(1, sizeof *m);
    if (!m)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    CcSynthSettings s;
    cc_synth_default_settings(&s);
    s.n_cells = d->cfg.demo_cells;
    s.step_seconds = hp->step_seconds;
    s.seed = (uint64_t)d->cfg.demo_seed;
    s.tz_offset_s = hp->tz_offset_s;
    char feats[CC_MAX_FEATURES * (CC_FEATURE_NAME_MAX + 1)] = "";
    for (int f = 0; f < hp->n_features; f++) {
        if (f)
            strcat(feats, ",");
        strcat(feats, hp->features[f]);
    }
    s.features = feats;
    char why[256];
    if (cc_synth_open(&m->g, &s, why, sizeof why)) {
        /* the model's KPIs are not the generator's: send its KPIs under the model's names */
        s.features = NULL;
        int rc = cc_synth_open(&m->g, &s, err, errlen);
        if (rc) {
            free(m);
            return rc;
        }
        m->by_position = 1;
        LOG_WARN("demo",
                 "the model's KPIs (%s) are not the generator's (%s): sending the "
                 "generator's values under the model's names",
                 feats, CC_SYNTH_FEATURES);
    }
    m->n_cells = d->cfg.demo_cells;
    m->F = hp->n_features;
    m->S = hp->step_seconds;
    m->t0_real = now_real();
    m->t0_sim = m->t0_real;
    m->step = (int64_t)floor(m->t0_sim / (double)m->S) - d->cfg.demo_backfill_steps;
    m->embedded = !strcmp(d->cfg.kafka_brokers, "embedded");
    d->demo = m;
    LOG_INFO("demo",
             "synthetic feed: %d cells (%s0000..), %d steps of history, then %gx real "
             "time (a step every %.2f s) into topic '%s'",
             m->n_cells, d->cfg.demo_cell_prefix, d->cfg.demo_backfill_steps, d->cfg.demo_speedup,
             (double)m->S / d->cfg.demo_speedup, d->cfg.demo_topic);
    return 0;
}

/* One message for (cell, step) into buf; returns its length, 0 if the step is missing. */
static size_t message(Ccd *d, CcdDemo *m, int cell, int64_t step, char *buf, size_t n, char *key,
                      size_t keylen)
{
    float v[CC_MAX_FEATURES], g[CC_SYNTH_N_KPIS];
    const CcHparams *hp = &d->model->hp;
    if (m->by_position) {
        if (!cc_synth_values(m->g, cell, step, g))
            return 0;
        for (int f = 0; f < m->F; f++)
            v[f] = g[f % cc_synth_n_features(m->g)];
    } else if (!cc_synth_values(m->g, cell, step, v)) {
        return 0;
    }
    snprintf(key, keylen, "%s%04d", d->cfg.demo_cell_prefix, cell);
    size_t len = (size_t)snprintf(buf, n, "{\"cell\":\"%s\",\"ts\":%lld,\"kpis\":{", key,
                                  (long long)(step * m->S));
    for (int f = 0; f < m->F && len < n; f++) {
        /* a KPI name from a model file may hold a quote or a backslash: escaped, or every
         * message is not JSON */
        char name[CC_JSON_ESCAPED_MAX(CC_FEATURE_NAME_MAX)];
        int nl = (int)cc_json_escape(name, hp->features[f], strlen(hp->features[f]));
        if (isfinite(v[f]))
            len += (size_t)snprintf(buf + len, n - len, "%s\"%.*s\":%.6g", f ? "," : "", nl, name,
                                    v[f]);
        else
            len += (size_t)snprintf(buf + len, n - len, "%s\"%.*s\":null", f ? "," : "", nl, name);
    }
    if (len + 3 > n)
        return 0; /* cannot happen with the caller's buffer; never a cut message */
    len += (size_t)snprintf(buf + len, n - len, "}}");
    return len;
}

void ccd_demo_tick(Ccd *d)
{
    CcdDemo *m = d->demo;
    if (!m || !d->kafka)
        return;
    double sim = m->t0_sim + (now_real() - m->t0_real) * d->cfg.demo_speedup;
    int64_t due = (int64_t)floor(sim / (double)m->S); /* produce steps ≤ due */
    /* room for 64 KPIs of 63-byte names, each quote or backslash escaped, and their values */
    char buf[16384], key[96];
    int sent = 0;
    int max_sent = DEMO_MAX_PER_TICK;
    if (m->embedded) {
        /* produced minus consumed (the consumer's messages: the demo's own when it feeds
         * the daemon alone, the quick start's case) */
        CcdKafkaStats ks;
        ccd_kafka_stats(d->kafka, &ks);
        int64_t ahead = (int64_t)m->produced - (int64_t)ks.messages;
        int64_t room =
            (int64_t)DEMO_MAX_AHEAD_PER_PARTITION * d->cfg.kafka_embedded_partitions - ahead;
        if (room <= 0) {
            if (!m->paused++)
                LOG_INFO("demo",
                         "waiting for the consumer (%lld messages ahead): the embedded "
                         "broker deletes what it cannot keep",
                         (long long)ahead);
            return;
        }
        if (room < max_sent)
            max_sent = (int)room;
    }
    while (m->step <= due && sent < max_sent) {
        size_t len = message(d, m, (int)m->cell, m->step, buf, sizeof buf, key, sizeof key);
        if (len) {
            int rc = ccd_kafka_produce(d->kafka, d->cfg.demo_topic, key, strlen(key), buf, len);
            if (rc) {
                CCD_LOG_RL(CC_LOG_WARN, "demo", "produce failed (%d): will retry", rc);
                break;
            }
            m->produced++;
            sent++;
        }
        if (++m->cell == m->n_cells) {
            m->cell = 0;
            m->step++;
        }
    }
}

void ccd_demo_close(Ccd *d)
{
    CcdDemo *m = d->demo;
    if (!m)
        return;
    LOG_INFO("demo", "produced %llu messages (%llu ticks waited for the consumer)",
             (unsigned long long)m->produced, (unsigned long long)m->paused);
    cc_synth_close(&m->g);
    free(m);
    d->demo = NULL;
}
