/*
 * models.h — cellcastd follows the learner (model.source kafka; docs/learning.md): its own
 * consumer, outside the group, of the compacted models topic (kafka.models_topic), every
 * partition from the beginning, polled by the cron. Head and chunk records
 * (proto/model_record.md) are reassembled and checked — size (model.max_bytes), headers,
 * the FNV-1a hash, the safetensors loader's checks (shape, finite weights) — and the newest
 * valid model of a poll is written atomically to model.learned_path (its record to
 * <path>.json), then swapped in:
 *   - same KPIs, step and horizon: through the reload path (reload.h): cells keep their
 *     history, a new shape rebuilds their caches;
 *   - another KPI set or step: the cells' history is of other KPIs and the records of the
 *     new KPIs were refused by the decoder in service, so there are no recorded steps to
 *     rebuild from: the daemon stops cleanly (drain, snapshot, commit) and re-executes
 *     itself on the learned file; cells start from the KPI records that follow (or from
 *     kafka.rewind_on_assign_s back).
 * A refused record is logged and counted by reason (cellcast_models_refused_total); the
 * model in service stays.
 * Rollback (model.rollback): before a swap the file in service is kept as
 * <learned_path>.prev; after a swap of the same KPIs and step, the new model's live MASE
 * (model_watch.h) over model.rollback_window_steps is compared once with the previous
 * model's over the window before the swap, and a model worse by more than
 * model.rollback_margin is swapped back (reload path), noted in <learned_path>.rolled_back
 * (never applied again by this member) and counted (cellcast_model_rollbacks_total), and a
 * rollback record (key rollback/<hash>, cc_learn.h) is produced on the models topic for the
 * learner. Rollback records read from the topic are checked (cc_learn_rollback_parse:
 * bad_rollback when refused), counted and shown, never taken for a model; other keys with
 * a '/' are skipped and counted.
 * Loop thread.
 */
#ifndef CCD_MODELS_H
#define CCD_MODELS_H

#include <event2/buffer.h>
#include <jansson.h>
#include <stddef.h>

#include "cellcastd.h"

typedef struct CcdModels CcdModels;

/** Opens the follower (model.source kafka and Kafka on; else nothing) and notes the hash of
 *  the file served (path). 0 or -errno with a message. */
int ccd_models_open(Ccd *d, const char *path, char *err, size_t errlen);
/** Polls the models topic and applies the newest valid model (cron). */
void ccd_models_cron(Ccd *d);
void ccd_models_close(Ccd *d);

/** The model in service's source, hash and learner record, for GET /v1/model; with
 *  model.source kafka also `learning` (waiting or serving, hours of data, when the first
 *  model is due), `live` (the rollback watch: live MASE, verdict) and `history` (the last
 *  swaps and rollbacks, newest first). */
json_t *ccd_models_json(const Ccd *d);
/** The follower's counters as Prometheus text. */
void ccd_models_metrics(const Ccd *d, struct evbuffer *b);

/** FNV-1a 64 of a buffer as 16 hex digits (the learner's cc_learn_file_hash). */
void ccd_models_hash(const void *buf, size_t len, char hex[17]);

#endif
