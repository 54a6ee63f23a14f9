/*
 * config.h — cellcastd's configuration: ONE table (config.c, ccd_config_defs()) of
 * every key with its type, default, bounds, whether it can change at run time, and its
 * documentation. The table drives:
 *   - parsing the YAML file (libyaml): sections are nested mappings (`http: {port: 8080}`
 *     is key `http.port`); an unknown key, a wrong type or a value out of bounds is an
 *     error naming the key, the file, the line and the column;
 *   - `--set key=value` overrides (after the file; `--set kafka.properties.fetch.wait.max.ms=5`
 *     sets one entry of a map key);
 *   - `GET /v1/config` (ccd_config_to_json; secrets in maps are redacted);
 *   - the fully commented default file conf/cellcast.yaml (ccd_config_write_yaml,
 *     `cellcastd --print-default-config`).
 */
#ifndef CCD_CONFIG_H
#define CCD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cc_anomaly.h"

typedef struct CcdStrList {
    char **items;
    int n;
} CcdStrList;

typedef struct CcdKv {
    char *key, *value;
} CcdKv;

typedef struct CcdStrMap {
    CcdKv *items;
    int n;
} CcdStrMap;

enum CcdGapPolicy { CCD_GAP_IMPUTE = 0, CCD_GAP_RESTART = 1 };
enum CcdKvType { CCD_KV_F32 = 0, CCD_KV_F16 = 1, CCD_KV_BF16 = 2 };
enum CcdPostKpis { CCD_POST_KPIS_OFF = 0, CCD_POST_KPIS_TOKEN = 1, CCD_POST_KPIS_OPEN = 2 };

typedef struct CcdConfig {
    /* model */
    char *model_path;
    int model_source;                 ///< 0 file, 1 kafka (daemon/models.h)
    char *model_learned_path;         ///< "auto" = $STATE_DIRECTORY/learned.safetensors (models.h)
    int64_t model_max_bytes;          ///< a published model larger than this is refused
    double model_first_model_hours;   ///< the learner's first model after this much data (24)
    int model_rollback;               ///< roll a learned model back when it degrades live (1)
    int model_rollback_window_steps;  ///< 0 = a day of the model's steps (model_watch.h)
    int model_rollback_min_forecasts; ///< matured forecasts needed on each side (200)
    double model_rollback_margin;     ///< worse by more than this share: rolled back (0.1)
    char *kafka_models_topic;         ///< "auto" = <topics[0]>.models (models.h)
    /* kafka */
    char *kafka_brokers, *kafka_group_id, *kafka_alert_topic, *kafka_dead_letter_topic;
    char *kafka_state_topic; ///< "auto" = <topics[0]>.state, "" = off (handover.c)
    CcdStrList kafka_topics;
    int kafka_embedded_partitions, kafka_max_poll_messages;
    int kafka_embedded_port;
    CcdStrMap kafka_properties;
    int64_t kafka_rewind_on_assign_s;
    char *kafka_client_id, *kafka_group_instance_id; /* identity: daemon/cluster.c */
    int kafka_partitioner;
    /* http */
    char *http_bind, *http_advertise;
    int http_port, http_max_connections, http_timeout_s, http_header_timeout_s;
    int64_t http_max_body_bytes, http_max_headers_bytes, http_max_read_values;
    int http_post_kpis;           /* CCD_POST_KPIS_* */
    CcdStrList http_cors_origins; /* issue 15: dashboard API */
    /* engine */
    int engine_threads, engine_kv_type, engine_max_batch_cells, engine_keep_attention,
        engine_worker_nice;
    char *engine_blas_coretype;
    /* limits */
    int64_t limits_max_cells, limits_kv_budget_mb;
    /* ingest */
    int ingest_gap_policy, ingest_max_gap, ingest_batch_steps, ingest_batch_ms;
    int ingest_outage_hold_steps; /* issue 13: cc_anomaly_outage_hold's bound */
    int64_t ingest_max_message_bytes, ingest_max_future_s, ingest_max_past_s;
    char *ingest_cell_field, *ingest_time_field, *ingest_kpis_field;
    int ingest_align;
    CcdStrMap ingest_fields;
    /* forecast */
    double forecast_level;
    int forecast_interval_adapt;         /* issue 12: daemon/interval.c */
    double forecast_interval_adapt_rate; /* 0 = min(0.05, 4/horizon) */
    /* history (issue 15) */
    char *history_depth;
    /* demo */
    int demo_enabled, demo_cells, demo_seed;
    double demo_speedup;
    int demo_backfill_steps;
    char *demo_topic, *demo_cell_prefix;
    /* alerts: the deployment-wide keys of cc_anomaly_keys() (n_features, step_seconds and
     * kpi[] unused here: they come from the model and alerts.kpis; settings.c) */
    CcAnomalySettings alerts;
    CcdStrMap alerts_kpis;
    /* topology and incidents (issue 32: topology.h, incidents.h) */
    char *topology_path;
    CcdStrMap ingest_labels; /* label -> message field (msg_labels.h) */
    int incidents_group_by;  /* CCD_INC_BY_SITE, CCD_INC_BY_REGION */
    int incidents_keep;
    int incidents_evidence_cells; /* incidents.h, CcdIncidentSettings */
    double incidents_evidence_share, incidents_evidence_frac;
    int incidents_cell_persist_steps; /* paging rule (incidents.h) */
    double incidents_cell_persist_frac;
    int incidents_resolve_hold_steps;     /* resolve hold (incidents.h) */
    int incidents_profile_persist_steps;  /* paging rule: profile-only anomalies (incidents.h) */
    int incidents_evidence_forecast;      /* evidence rule: the forecast's share (incidents.h) */
    int incidents_evidence_missing_steps; /* evidence rule: silence's steps (incidents.h) */
    int incidents_site_same_kpi;          /* paging rule: two cells on one KPI (incidents.h) */
    int incidents_stuck_persist_steps;    /* paging rule: a lone stuck alert (incidents.h) */
    int incidents_site_forecast;        /* paging rule: two cells, no profile-only (incidents.h) */
    int incidents_cell_persist_own_kpi; /* paging rule: the alert's own KPI (incidents.h) */
    char *incidents_topic;
    char *silences_path; /* "auto" = <snapshot.path>.silences */
    char *silences_file; /* the configuration's silences (JSON); "" = none */
    /* the API's silences shared; "auto" = <kafka.topics[0]>.silences */
    char *silences_topic;
    /* Alertmanager (issue 32: alertmanager.h) */
    CcdStrList alertmanager_urls;
    int alertmanager_timeout_s, alertmanager_resend_s, alertmanager_queue_max;
    int alertmanager_retries, alertmanager_send_cell_alerts;
    /* snapshot */
    char *snapshot_path;
    int snapshot_interval_s;
    /* cluster (daemon/cluster.c) */
    char *cluster_instance, *cluster_members_topic;
    int cluster_heartbeat_ms;
    /* admin */
    char *admin_token;
    /* log */
    int log_level;
} CcdConfig;

enum CcdCfgType {
    CCD_CFG_BOOL,
    CCD_CFG_INT,
    CCD_CFG_INT64,
    CCD_CFG_DOUBLE,
    CCD_CFG_STRING,
    CCD_CFG_ENUM,
    CCD_CFG_LIST,
    CCD_CFG_MAP
};

typedef struct CcdConfigDef {
    const char *name; ///< dotted key: section.key
    enum CcdCfgType type;
    size_t offset;     ///< into CcdConfig
    const char *def;   ///< default, as it is written in YAML (lists: "a,b"; maps: "")
    double min, max;   ///< bounds of numbers (inclusive)
    const char *enums; ///< CCD_CFG_ENUM: "a|b|c", the value stored is the index
    int reloadable;    ///< may change at run time (SIGHUP, POST /v1/admin/reload)
    const char *doc;   ///< one paragraph; becomes the comment in conf/cellcast.yaml
} CcdConfigDef;

/** The table: the daemon's own keys and, as alerts.<name>, every deployment-wide key of
 *  cc_anomaly_keys() with the library's type, bounds, default and doc line. *n gets its
 *  length. */
const CcdConfigDef *ccd_config_defs(int *n);

/** Fills every key with its default (allocates strings). 0 or -ENOMEM. */
int ccd_config_init(CcdConfig *c);
void ccd_config_free(CcdConfig *c);

/** Parses a YAML file over the current values. 0 or -EINVAL/-EIO with
 *  "FILE:LINE:COL: key 'x.y': what" in err. */
int ccd_config_load_file(CcdConfig *c, const char *path, char *err, size_t errlen);
/** Same from a string (tests); `name` stands for the file name in messages. */
int ccd_config_load_string(CcdConfig *c, const char *yaml, size_t len, const char *name, char *err,
                           size_t errlen);

/** Applies one "key=value" override. 0 or -EINVAL with "--set key: what" in err. */
int ccd_config_set(CcdConfig *c, const char *assignment, char *err, size_t errlen);

/** The configuration in effect: defaults, then the file `path` (NULL: none), then the
 *  --set overrides `sets[0..n_sets)` in order (not validated: ccd_config_validate). The one
 *  reading of the configuration, at start and at every reload. Initialises *c; free it with
 *  ccd_config_free even on failure. 0 or -errno with a message. */
int ccd_config_read(CcdConfig *c, const char *path, const char *const *sets, int n_sets, char *err,
                    size_t errlen);

/** Whether s is a base URL of the form a member advertises (http.advertise, the members
 *  topic): "http://" or "https://", a host name ([A-Za-z0-9._-]) or a bracketed IPv6
 *  literal, an optional ":port" (1..65535), nothing after: no path, query, userinfo, spaces
 *  or control characters (it becomes the Location of a redirect). */
int ccd_http_address_valid(const char *s);

/** Whether s is a legal Kafka topic name: 1..249 of [a-zA-Z0-9._-], not "." or "..". */
int ccd_topic_name_valid(const char *s);

/** snapshot.path (resolved) may be written: absent, or a regular file (a link to one);
 *  a device, a FIFO, a directory or a socket is refused (0 or -EINVAL naming the key). */
int ccd_snapshot_path_check(const char *path, char *err, size_t errlen);

/** Cross-key checks after everything is applied (e.g. demo needs a topic). */
int ccd_config_validate(const CcdConfig *c, char *err, size_t errlen);

const CcdConfigDef *ccd_config_find(const char *name);

/** Nested JSON object of the current values ({"http": {"port": 8080, ...}, ...}). */
json_t *ccd_config_to_json(const CcdConfig *c);

/** Writes the fully commented YAML of the current values (the defaults for conf/). */
int ccd_config_write_yaml(const CcdConfig *c, FILE *out);

/** An ingest.fields value, "feature" or "feature*scale": the length of the feature name and
 *  the scale (1 without one). 0 or -EINVAL with a message. */
int ccd_config_field_target(const char *value, size_t *feature_len, double *scale, char *err,
                            size_t errlen);

/** Value of a map entry, or NULL. */
const char *ccd_strmap_get(const CcdStrMap *m, const char *key);

/** incidents.topic resolved: "auto" = <kafka.alert_topic>.incidents ("" when alerts are
 *  not produced), else as given ("" = not produced). */
void ccd_config_incidents_topic(const CcdConfig *c, char *buf, size_t n);

#endif
