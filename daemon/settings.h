/*
 * settings.h — the configuration (config.h) turned into every module's settings, in one
 * place: the engine, the KPI decoder, the cell table, the scheduler's batching, Kafka, the
 * anomaly scorer and the log level. cellcastd.c opens the modules with them at start and
 * reload.c hands the reloadable ones to the running modules (setters), so a key means the
 * same thing at start and after SIGHUP.
 *
 * Also here: which file model.path names (ccd_model_open), the other thing the
 * configuration decides before anything runs.
 */
#ifndef CCD_SETTINGS_H
#define CCD_SETTINGS_H

#include <stddef.h>

#include "cc_anomaly.h"
#include "cc_engine.h"
#include "cc_kpi.h"
#include "cc_model.h"
#include "cells.h"
#include "config.h"
#include "kafka.h"

typedef struct CcdSettings {
    CcEngineSettings engine;
    CcKpiSettings kpi; ///< points into this struct and into the config
    CcdCellsSettings cells;
    const char *cells_budget_from; ///< source of the automatic cell budget, NULL: configured
    int batch_steps, batch_ms, worker_nice; ///< the scheduler's (hooks are the host's)
    CcdKafkaSettings kafka;                 ///< points into this struct and into the config
    CcAnomalySettings anomaly;
    int log_level;
    /* storage the pointers above use */
    const char *feature_names[CC_MAX_FEATURES];
    CcKpiMapEntry *kpi_map;
    char **kpi_features;
    int n_kpi_map;
    CcdKafkaProp *kafka_props;
    char state_topic[256];     ///< kafka.state_topic resolved (handover.h)
    char members_topic[512];   ///< cluster.members_topic resolved (cluster.h)
    char incidents_topic[512]; ///< incidents.topic resolved (config.h)
} CcdSettings;

/** Fills *s from the configuration and the model served (its KPIs, step length). The
 *  result points into cfg and hp: keep them alive while s is used. 0, -ENOMEM, or -EINVAL
 *  with a message naming the key (alerts.*). Free with ccd_settings_free. */
int ccd_settings_from_config(CcdSettings *s, const CcdConfig *cfg, const CcHparams *hp, char *err,
                             size_t errlen);
void ccd_settings_free(CcdSettings *s);

/** A duration: digits with an optional unit s, m, h, d or w (bare: seconds), e.g. "7d".
 *  0 with the seconds in *out, or -EINVAL / -ERANGE. */
int ccd_parse_duration(const char *s, int64_t *out);

/** model.learned_path resolved into buf ("auto": $STATE_DIRECTORY/learned.safetensors, or
 *  cellcast-learned.safetensors in the working directory without systemd). */
void ccd_model_learned_path(const CcdConfig *cfg, char *buf, size_t n);
/** The model file to serve: model.learned_path when model.source is kafka and that file
 *  exists, else model.path. buf holds the answer when it is the learned path. */
const char *ccd_model_serve_path(const CcdConfig *cfg, char *buf, size_t n);

/** Opens the model file model.path names: as given when it exists; a relative path that
 *  does not exist is tried under $CELLCAST_HOME, then the installed data directory
 *  (CC_DATADIR, e.g. /usr/share/cellcast; `models/x` also as `x` there). path gets the
 *  file tried (the original when nothing else exists). 0 or -errno with a message. */
int ccd_model_open(CcModel **out, const char *model_path, char *path, size_t pathlen, char *err,
                   size_t errlen);

/** The trainer's validation error of the model's mean against the last value's, from the
 *  file's metadata (cellcast train, docs/training.md "When the model loses to the last
 *  value"): metric "mae" or "mse" with kpi < 0 the geometric mean over the channels
 *  (val_mae_vs_last, val_mse_vs_last), "mae" with kpi = f the KPI's own ratio
 *  (val_mae_vs_last_kpi). NAN when the file does not say (older files, other trainers). */
double ccd_model_vs_last(const CcHparams *hp, const char *metric, int kpi);

/** Logs a warning naming the KPIs on which the model's mean lost to the last value on its
 *  validation rows (ratio above CC_TRAIN_NAIVE_WARN); nothing when none did or the file
 *  does not say. */
void ccd_model_quality_log(const CcHparams *hp, const char *sys);

/** Whether two models read and write the same: the same KPIs in the same order, the same step
 *  and horizon (a swap between them keeps the cells: reload.c, models.c). */
int ccd_model_same_io(const CcHparams *a, const CcHparams *b);

#endif
