/*
 * learn_kafka.h — `cellcast learn`'s Kafka side (docs/learning.md, proto/model_record.md):
 * the KPI topic's retention as the training store, and the compacted `<topic>.models` topic
 * the learner publishes to.
 *
 * History: a consumer outside any group is assigned every partition of the KPI topic at
 * the offset of the first message stamped at or after now − history_s (Kafka's message
 * timestamps: what retention counts), and cct_learn_kafka_read reads up to the high
 * watermark seen when it started; later calls take what arrived since (loop mode). Each
 * message is decoded by lib's KPI decoder (cc_kpi.h: the daemon's rules for cells, times
 * and values) with the daemon's field mapping (ingest.fields as --field FIELD=KPI[*SCALE]);
 * without a mapping, every numeric field is a KPI named as it arrives (at most
 * CC_MAX_FEATURES): a message with fields the decoder does not know is parsed once more to
 * name them, and the decoder is rebuilt.
 *
 * Publication (proto/model_record.md): one model per head record keyed by the model name
 * (value: the safetensors file; headers cellcast-record, cellcast-hash, cellcast-size,
 * cellcast-chunks "0"). A file that does not fit in one message with its record (the
 * producer's message.max.bytes − 1 KiB) travels as n chunk records keyed `name#hash#i`
 * (headers cellcast-hash, cellcast-chunk `i/n`) before a head record whose value is `chunked`
 * and cellcast-chunks "n"; the chunk keys of the model replaced are tombstoned after it.
 *
 * Rollbacks: cct_learn_kafka_read_rollbacks reads the models topic with a consumer of its
 * own for the rollback records cellcastd members produce (cc_learn.h), skipping the models.
 */
#ifndef CCT_LEARN_KAFKA_H
#define CCT_LEARN_KAFKA_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "cc_learn.h"

typedef struct CctLearnKafkaSettings {
    const char *brokers;       ///< bootstrap servers (required)
    const char *topic;         ///< the KPI topic (required)
    const char *models_topic;  ///< NULL or "auto": <topic>.models
    int64_t history_s;         ///< how far back the first read seeks (default 28 days)
    const char *const *fields; ///< n_fields mapping entries "FIELD=KPI" or "FIELD=KPI*SCALE"
    int n_fields;
    const char *cell_field, *ts_field, *kpis_field; ///< NULL: the decoder's defaults
    const char *const *props; ///< n_props librdkafka properties "name=value" (both clients)
    int n_props;
    /** The caller's stop request (a SIGTERM handler's flag), or NULL: once set, a read
     *  returns within one poll (at most 200 ms) with what it has. */
    const volatile sig_atomic_t *stop;
} CctLearnKafkaSettings;

typedef struct CctLearnKafka CctLearnKafka;

typedef struct CctLearnKafkaStats {
    uint64_t messages, records, refused_records, dropped_records;
    uint64_t refused_rollbacks; ///< rollback records on the models topic refused
    int partitions;
} CctLearnKafkaStats;

/** Connects the consumer and the producer and creates the models topic when missing
 *  (cleanup.policy=compact, 1 partition). 0 or -errno with a message in err. */
int cct_learn_kafka_open(CctLearnKafka **out, const CctLearnKafkaSettings *s, char *err,
                         size_t errlen);
void cct_learn_kafka_close(CctLearnKafka **k);

/** Reads into l what the topic holds: the first call up to the high watermarks (waiting at
 *  most timeout_ms for them), later calls what arrived, waiting at most timeout_ms for the
 *  first message. Returns the records added (≥ 0) or -errno with a message. */
int64_t cct_learn_kafka_read(CctLearnKafka *k, CcLearn *l, int timeout_ms, char *err,
                             size_t errlen);

/** Publishes the model file at path (its 16-hex-digit FNV-1a hash, the record JSON) under
 *  key name; waits for the broker's acks. 0 or -errno with a message. */
int cct_learn_kafka_publish(CctLearnKafka *k, const char *name, const char *path, const char *hash,
                            const char *record_json, char *err, size_t errlen);

/** The rollback records (cc_learn.h) on the models topic: the first call reads the topic
 *  from its beginning to its end (waiting at most timeout_ms), later calls what arrived
 *  since. on_rollback(cookie, r) for each valid one; hostile ones are refused with a message
 *  on stderr and counted (refused_rollbacks); model and chunk records are skipped. Returns
 *  the valid records read (0 also while the topic does not exist) or -errno. */
int cct_learn_kafka_read_rollbacks(CctLearnKafka *k, int timeout_ms,
                                   void (*on_rollback)(void *cookie, const CcLearnRollback *r),
                                   void *cookie, char *err, size_t errlen);

void cct_learn_kafka_stats(const CctLearnKafka *k, CctLearnKafkaStats *st);

/** The models topic in use. */
const char *cct_learn_kafka_models_topic(const CctLearnKafka *k);

#endif
