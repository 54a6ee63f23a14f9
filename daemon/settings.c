/* settings.c — the configuration turned into each module's settings (start and reload),
 * and the model file model.path names. See settings.h. */
#include "handover.h"
#include "settings.h"

#include <errno.h>
#include <math.h>
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cc_build_info.h"
#include "cluster.h"
#include "cc_train.h"
#include "log.h"
#include "membudget.h"

static int anomaly_settings(CcAnomalySettings *s, const CcdConfig *cfg, const CcHparams *hp,
                            char *err, size_t errlen)
{
    int nk;
    const CcAnomalyKey *keys = cc_anomaly_keys(&nk);
    cc_anomaly_default_settings(s);
    for (int i = 0; i < nk; i++) {
        size_t sz = keys[i].type == CC_AKEY_INT     ? sizeof(int)
                    : keys[i].type == CC_AKEY_INT64 ? sizeof(int64_t)
                                                    : sizeof(double);
        memcpy((char *)s + keys[i].offset, (const char *)&cfg->alerts + keys[i].offset, sz);
    }
    s->n_features = hp->n_features;
    s->step_seconds = hp->step_seconds;
    for (int i = 0; i < cfg->alerts_kpis.n; i++) {
        char key[256], e2[256];
        snprintf(key, sizeof key, "kpis.%s", cfg->alerts_kpis.items[i].key);
        if (cc_anomaly_settings_set(s, hp, key, cfg->alerts_kpis.items[i].value, e2, sizeof e2))
            return cc_errf(err, errlen, -EINVAL, "%s", e2);
    }
    char e3[256];
    if (cc_anomaly_validate(s, e3, sizeof e3))
        return cc_errf(err, errlen, -EINVAL, "alerts: %s", e3);
    return 0;
}

/* ingest.fields: message field -> "feature" or "feature*scale" (checked by config.c). */
static int kpi_settings(CcdSettings *s, const CcdConfig *cfg, const CcHparams *hp, char *err,
                        size_t errlen)
{
    const int n = cfg->ingest_fields.n;
    if (!(s->kpi_map = calloc((size_t)n + 1, sizeof *s->kpi_map)) ||
        !(s->kpi_features = calloc((size_t)n + 1, sizeof *s->kpi_features)))
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        const CcdKv *kv = &cfg->ingest_fields.items[i];
        size_t len;
        if (ccd_config_field_target(kv->value, &len, &s->kpi_map[i].scale, NULL, 0) ||
            !(s->kpi_features[i] = strndup(kv->value, len)))
            return cc_errf(err, errlen, -ENOMEM, "out of memory");
        int f = 0;
        while (f < hp->n_features && strcmp(hp->features[f], s->kpi_features[i]))
            f++;
        if (f == hp->n_features)
            return cc_errf(err, errlen, -EINVAL,
                           "key 'ingest.fields.%s': the model has no KPI '%s' (GET /v1/model "
                           "lists its KPIs)",
                           kv->key, s->kpi_features[i]);
        s->n_kpi_map = i + 1;
        s->kpi_map[i].field = kv->key;
        s->kpi_map[i].feature_name = s->kpi_features[i];
    }
    for (int f = 0; f < hp->n_features; f++)
        s->feature_names[f] = hp->features[f];
    CcKpiSettings *ks = &s->kpi;
    cc_kpi_default_settings(ks);
    ks->n_features = hp->n_features;
    ks->step_seconds = hp->step_seconds;
    ks->align = (enum CcKpiAlign)cfg->ingest_align;
    ks->feature_names = s->feature_names;
    ks->map = s->kpi_map;
    ks->n_map = n;
    ks->cell_field = cfg->ingest_cell_field;
    ks->ts_field = cfg->ingest_time_field;
    ks->kpis_field = cfg->ingest_kpis_field;
    ks->max_message_bytes = (size_t)cfg->ingest_max_message_bytes;
    return 0;
}

/* Every kafka.properties name and value as librdkafka takes them, on a scratch
 * configuration: an unknown name or a bad value fails here, not at the first connection. */
static int check_kafka_properties(const CcdConfig *cfg, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char e[512];
    int rc = 0;
    if (!conf)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    for (int i = 0; i < cfg->kafka_properties.n && !rc; i++) {
        const CcdKv *kv = &cfg->kafka_properties.items[i];
        if (rd_kafka_conf_set(conf, kv->key, kv->value, e, sizeof e) != RD_KAFKA_CONF_OK)
            rc = cc_errf(err, errlen, -EINVAL, "key 'kafka.properties.%s': %s", kv->key, e);
    }
    rd_kafka_conf_destroy(conf);
    return rc;
}

/* snapshot.path: its directory must be writable, or no snapshot (and so no offset commit)
 * would ever succeed. "auto" is checked where it resolves to ($STATE_DIRECTORY). */
static int check_snapshot_dir(const CcdConfig *cfg, char *err, size_t errlen)
{
    const char *p = cfg->snapshot_path, *sd = getenv("STATE_DIRECTORY");
    char dir[PATH_MAX];
    if (!p || !*p || (!strcmp(p, "auto") && (!sd || !*sd)))
        return 0;
    if (!strcmp(p, "auto"))
        snprintf(dir, sizeof dir, "%.*s", (int)strcspn(sd, ":"), sd);
    else {
        const char *slash = strrchr(p, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - p) + (slash == p) : 1,
                 slash ? p : ".");
    }
    struct stat st;
    errno = 0;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK))
        return cc_errf(err, errlen, -EACCES,
                       "key 'snapshot.path': directory '%s' is not a writable directory (%s)", dir,
                       errno ? strerror(errno) : "not a directory");
    /* the file itself (and the alert journal beside it): a device node passed and was
     * replaced by a regular file at shutdown, a FIFO hung the start before listening */
    char file[PATH_MAX + 16];
    if (!strcmp(p, "auto"))
        snprintf(file, sizeof file, "%s/state.snap", dir);
    else
        snprintf(file, sizeof file, "%s", p);
    int rc = ccd_snapshot_path_check(file, err, errlen);
    if (!rc) {
        strcat(file, ".alerts");
        rc = ccd_snapshot_path_check(file, err, errlen);
    }
    return rc;
}

static int kafka_settings(CcdSettings *s, const CcdConfig *cfg)
{
    CcdKafkaSettings *ks = &s->kafka;
    if (!(s->kafka_props = calloc((size_t)cfg->kafka_properties.n + 1, sizeof *s->kafka_props)))
        return -ENOMEM;
    ccd_kafka_default_settings(ks);
    ks->brokers = cfg->kafka_brokers;
    ks->group_id = cfg->kafka_group_id;
    ks->topics = (const char *const *)cfg->kafka_topics.items;
    ks->n_topics = cfg->kafka_topics.n;
    ks->alert_topic = cfg->kafka_alert_topic;
    ks->dead_letter_topic = cfg->kafka_dead_letter_topic[0] ? cfg->kafka_dead_letter_topic : NULL;
    ks->embedded_partitions = cfg->kafka_embedded_partitions;
    ccd_handover_topic(cfg, s->state_topic, sizeof s->state_topic);
    ks->state_topic = s->state_topic[0] ? s->state_topic : NULL;
    ccd_cluster_members_topic(cfg, s->members_topic, sizeof s->members_topic);
    ks->members_topic = s->members_topic;
    ccd_config_incidents_topic(cfg, s->incidents_topic, sizeof s->incidents_topic);
    ks->incidents_topic = s->incidents_topic[0] ? s->incidents_topic : NULL;
    for (int i = 0; i < cfg->kafka_properties.n; i++) {
        s->kafka_props[i].name = cfg->kafka_properties.items[i].key;
        s->kafka_props[i].value = cfg->kafka_properties.items[i].value;
    }
    ks->props = s->kafka_props;
    ks->n_props = cfg->kafka_properties.n;
    ks->max_poll_messages = cfg->kafka_max_poll_messages;
    return 0;
}

int ccd_parse_duration(const char *s, int64_t *out)
{
    static const struct {
        char unit;
        int64_t seconds;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 604800}};
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int64_t mult = 1;
    if (end == s || errno || v < 0)
        return -EINVAL;
    if (*end) {
        mult = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (*end == units[i].unit && !end[1])
                mult = units[i].seconds;
        if (!mult)
            return -EINVAL;
    }
    if (v > INT64_MAX / 604800 / 1000) /* far beyond any useful depth; no overflow below */
        return -ERANGE;
    *out = (int64_t)v * mult;
    return 0;
}

int ccd_settings_from_config(CcdSettings *s, const CcdConfig *cfg, const CcHparams *hp, char *err,
                             size_t errlen)
{
    int rc;
    memset(s, 0, sizeof *s);
    cc_engine_default_settings(&s->engine);
    s->engine.n_threads = cfg->engine_threads;
    s->engine.kv_type = (enum CcKvType)cfg->engine_kv_type;
    s->engine.max_batch_cells = cfg->engine_max_batch_cells;
    s->engine.keep_attention = cfg->engine_keep_attention;
    const char *budget_from = NULL;
    s->cells = (CcdCellsSettings){
        .max_cells = cfg->limits_max_cells,
        .kv_budget_bytes = cfg->limits_kv_budget_mb ? cfg->limits_kv_budget_mb << 20
                                                    : ccd_membudget_auto(&budget_from),
        .gap_policy = cfg->ingest_gap_policy,
        .max_gap = cfg->ingest_max_gap,
        .interval_adapt = cfg->forecast_interval_adapt,
        .interval_adapt_rate = cfg->forecast_interval_adapt_rate,
    };
    s->cells_budget_from = budget_from; /* NULL: configured */
    if ((rc = ccd_parse_duration(cfg->history_depth, &s->cells.history_depth_s))) {
        snprintf(err, errlen, "history.depth: '%s' is not a duration (e.g. 7d, 12h, 3600)",
                 cfg->history_depth);
        ccd_settings_free(s);
        return rc;
    }
    s->batch_steps = cfg->ingest_batch_steps;
    s->batch_ms = cfg->ingest_batch_ms;
    s->worker_nice = cfg->engine_worker_nice;
    s->log_level = cfg->log_level;
    if ((rc = kpi_settings(s, cfg, hp, err, errlen)) ||
        (rc = check_kafka_properties(cfg, err, errlen)) ||
        (rc = check_snapshot_dir(cfg, err, errlen))) {
        ccd_settings_free(s);
        return rc;
    }
    if ((rc = kafka_settings(s, cfg))) {
        ccd_settings_free(s);
        return cc_errf(err, errlen, rc, "out of memory");
    }
    if ((rc = anomaly_settings(&s->anomaly, cfg, hp, err, errlen))) {
        ccd_settings_free(s);
        return rc;
    }
    return 0;
}

void ccd_settings_free(CcdSettings *s)
{
    for (int i = 0; s->kpi_features && i < s->n_kpi_map; i++)
        free(s->kpi_features[i]);
    free(s->kpi_features);
    free(s->kpi_map);
    free(s->kafka_props);
    s->kpi_features = NULL;
    s->kpi_map = NULL;
    s->kafka_props = NULL;
}

/* ---- model.path ---- */

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The first of the candidates that exists, else the path as given. */
static void model_path(const char *path, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", path);
    if (!path[0] || path[0] == '/' || file_exists(path))
        return;
    char cand[PATH_MAX];
    const char *home = getenv("CELLCAST_HOME");
    if (home && home[0]) {
        snprintf(cand, sizeof cand, "%s/%s", home, path);
        if (file_exists(cand)) {
            snprintf(out, outlen, "%s", cand);
            return;
        }
    }
    snprintf(cand, sizeof cand, "%s/%s", CC_DATADIR, path);
    if (file_exists(cand)) {
        snprintf(out, outlen, "%s", cand);
        return;
    }
    const char *slash = strrchr(path, '/');
    if (slash) {
        snprintf(cand, sizeof cand, "%s/%s", CC_DATADIR, slash + 1);
        if (file_exists(cand))
            snprintf(out, outlen, "%s", cand);
    }
}

void ccd_model_learned_path(const CcdConfig *cfg, char *buf, size_t n)
{
    const char *sd = getenv("STATE_DIRECTORY");
    if (strcmp(cfg->model_learned_path, "auto"))
        snprintf(buf, n, "%s", cfg->model_learned_path);
    else if (sd && *sd)
        snprintf(buf, n, "%.*s/learned.safetensors", (int)strcspn(sd, ":"), sd);
    else
        snprintf(buf, n, "cellcast-learned.safetensors");
}

const char *ccd_model_serve_path(const CcdConfig *cfg, char *buf, size_t n)
{
    struct stat st;
    if (cfg->model_source != 1)
        return cfg->model_path;
    ccd_model_learned_path(cfg, buf, n);
    return stat(buf, &st) == 0 ? buf : cfg->model_path;
}

int ccd_model_open(CcModel **out, const char *model_path_cfg, char *path, size_t pathlen, char *err,
                   size_t errlen)
{
    model_path(model_path_cfg, path, pathlen);
    return cc_model_open_file(out, path, err, errlen);
}

double ccd_model_vs_last(const CcHparams *hp, const char *metric, int kpi)
{
    char key[32];
    snprintf(key, sizeof key, "val_%s_vs_last%s", metric, kpi < 0 ? "" : "_kpi");
    const char *v = cc_hparams_get_extra(hp, key);
    for (int f = 0; v && f < kpi; f++) /* the KPI's item of "r0,r1,..." */
        v = (v = strchr(v, ',')) ? v + 1 : NULL;
    if (!v || !*v || *v == ',')
        return NAN;
    char *end;
    double r = strtod(v, &end);
    return (end != v && (*end == ',' || *end == 0) && isfinite(r) && r >= 0) ? r : NAN;
}

void ccd_model_quality_log(const CcHparams *hp, const char *sys)
{
    char list[512] = "";
    size_t len = 0;
    int n = 0;
    for (int f = 0; f < hp->n_features; f++) {
        double r = ccd_model_vs_last(hp, "mae", f);
        if (r > CC_TRAIN_NAIVE_WARN && len < sizeof list) {
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s %.2f", n ? ", " : "",
                                    hp->features[f], r);
            n++;
        }
    }
    double all = ccd_model_vs_last(hp, "mae", -1);
    if (n || all > CC_TRAIN_NAIVE_WARN)
        LOG_WARN(sys,
                 "model: on its validation rows the model's mean was worse than the last value "
                 "(MAE ratio %.3f over all series and KPIs%s%s): expect no better forecasts of "
                 "those KPIs in service; docs/training.md \"When the model loses to the last "
                 "value\"",
                 all, n ? "; by KPI: " : "", list);
}

int ccd_model_same_io(const CcHparams *a, const CcHparams *b)
{
    if (a->n_features != b->n_features || a->step_seconds != b->step_seconds ||
        a->horizon != b->horizon)
        return 0;
    for (int f = 0; f < a->n_features; f++)
        if (strcmp(a->features[f], b->features[f]))
            return 0;
    return 1;
}
