/*
 * cc_snapshot.h — snapshot files of per-cell state: the raw rings of the engine's cells,
 * their anomaly/alert state, the model identity and (optionally) the Kafka positions the
 * state corresponds to. Streaming: the host iterates its cell table while writing, and
 * gets one record at a time while reading.
 *
 * File format (version 1, all integers little-endian):
 *   header   magic "CCSNAP\r\n" (8) | u32 version | u32 header size (=212) | i64 created
 *            (unix s) | u64 model hash | char model_desc[160] | u32 n_features | u32 0 |
 *            i64 step_seconds | u32 CRC32 of the preceding header bytes
 *   records  u32 type | u32 payload length | payload | u32 CRC32(type, length, payload)
 *     CC_SNAP_CELL (1):       u16 id length | id | i64 seq_start | i64 first | i32 count |
 *                             i32 F | f32 values (count, F) | u32 n | anomaly state (n bytes,
 *                             cc_anomaly_cell_save) | u32 n | host extra (n bytes, opaque)
 *     CC_SNAP_POSITIONS (2):  u32 n | n × (u16 topic length | topic | i32 partition | i64 offset)
 *     CC_SNAP_END (0x454E44): u64 records before it | u32 CRC32 of every byte of the file
 *                             before this record
 * CRC32 is the IEEE/zlib polynomial. A file is valid only with a correct end record: a
 * reader verifies the whole file (every record CRC and the file CRC) when it opens it,
 * before handing out any record, so a host never applies half of a damaged snapshot.
 *
 * Writing is atomic: records go to "<path>.tmp.<pid>"; cc_snapshot_write_finish writes
 * the end record, fsyncs the file, renames it over <path> and fsyncs the directory. A
 * crash at any point leaves either the old snapshot or the new one.
 *
 * Model identity: cc_snapshot_model_hash() hashes what the stored state depends on —
 * F and the feature names, S, tz offset, P, N, M, D, H, L, FF, HZ — not the weights: a
 * retrained model of the same shape keeps the snapshot usable (raw rings are model-free;
 * caches are rebuilt at the next step). A reader given an expected hash refuses others.
 *
 * Errors (negative errno, message in err): -ENOENT no snapshot (start fresh); -EIO read or
 * write failure; -EINVAL not a snapshot (wrong magic); -EPROTONOSUPPORT another version;
 * -EBADMSG truncated or corrupted (bad CRC, bad lengths); -ESTALE written for another
 * model; -ENOMEM.
 *
 * Host wiring (cellcastd):
 *   save (SIGTERM, and every snapshot.interval from the cron):
 *     CcSnapshotInfo in; cc_snapshot_info_for_model(&in, &model->hp);
 *     cc_snapshot_write_open(&w, path, &in, err, len);
 *     cc_snapshot_write_positions(w, pos, n);             // offsets stored for commit
 *     for each cell: cc_snapshot_write_engine_cell(w, id, cell, acell, extra, extra_len);
 *     cc_snapshot_write_finish(&w, err, len);             // or cc_snapshot_write_abort(&w)
 *   restore (start, before subscribing):
 *     rc = cc_snapshot_read_open(&r, path, cc_snapshot_model_hash(&model->hp), &info, err, len);
 *     (rc == -ENOENT: fresh start; other rc < 0: log err, rebuild from Kafka)
 *     while (cc_snapshot_read_next(r, &rec, err, len) == 1)
 *         CC_SNAP_CELL → open cell + anomaly cell, cc_snapshot_restore_engine_cell(&rec.cell, ...),
 *                        then cc_engine_step with values NULL to recompute the forecast and
 *                        cc_anomaly_set_forecast;
 *         CC_SNAP_POSITIONS → seek the consumer there (rec.positions, rec.n_positions);
 *     cc_snapshot_read_close(&r);
 */
#ifndef CC_SNAPSHOT_H
#define CC_SNAPSHOT_H

#include "cc_anomaly.h"
#include "cc_common.h"
#include "cc_engine.h"
#include "cc_model.h"

#define CC_SNAPSHOT_VERSION 1
#define CC_SNAP_TOPIC_MAX 256
/** The last unix second a restored step may stand for (9999-12-31T23:59:59Z): a cell record
 *  whose steps reach past CC_SNAP_TIME_MAX / S (or below 0) is refused as corrupted. */
#define CC_SNAP_TIME_MAX INT64_C(253402300799)

enum CcSnapRecordType { CC_SNAP_CELL = 1, CC_SNAP_POSITIONS = 2, CC_SNAP_END = 0x454E44 };

typedef struct CcSnapshotInfo {
    uint64_t model_hash;  ///< cc_snapshot_model_hash of the model the state belongs to
    char model_desc[160]; ///< human summary for messages ("F=8 S=3600 P=16 ...")
    int n_features;       ///< F of every cell record
    int64_t step_seconds; ///< S
    int64_t created_s;    ///< unix seconds; 0 = now (writer)
    uint32_t version;     ///< reader: the file's version
    uint64_t n_records;   ///< reader: records in the file (end excluded)
} CcSnapshotInfo;

/** One cell's state. The writer copies it; a reader's view is valid until the next call. */
typedef struct CcSnapshotCell {
    const char *cell_id;    ///< ≤ 255 bytes
    int64_t seq_start;      ///< first step of the cell's sequence (cc_cell_seq_start)
    int64_t first;          ///< first stored step
    int count;              ///< stored steps (0: the cell is empty)
    int n_features;         ///< F
    const float *values;    // (count, F) raw values, step first..first+count-1
    const uint8_t *anomaly; ///< cc_anomaly_cell_save bytes (may be NULL/0)
    size_t anomaly_len;
    const uint8_t *extra; ///< opaque host bytes (partition, counters...) (may be NULL/0)
    size_t extra_len;
} CcSnapshotCell;

typedef struct CcSnapshotPosition {
    char topic[CC_SNAP_TOPIC_MAX];
    int32_t partition;
    int64_t offset; ///< next offset to consume
} CcSnapshotPosition;

typedef struct CcSnapshotRecord {
    enum CcSnapRecordType type;
    CcSnapshotCell cell;                 ///< CC_SNAP_CELL
    const CcSnapshotPosition *positions; ///< CC_SNAP_POSITIONS
    int n_positions;
} CcSnapshotRecord;

typedef struct CcSnapshotWriter CcSnapshotWriter;
typedef struct CcSnapshotReader CcSnapshotReader;

/** FNV-1a 64 of the state-relevant hyperparameters (see above). */
uint64_t cc_snapshot_model_hash(const CcHparams *hp);

/** Fills info (hash, description, F, S) for a model. */
void cc_snapshot_info_for_model(CcSnapshotInfo *info, const CcHparams *hp);

/** CRC32 (IEEE), continuing from crc (0 to start). */
uint32_t cc_crc32(uint32_t crc, const void *buf, size_t len);

/** Starts a snapshot at path (written to a temp file beside it). 0, -EIO, -ENOMEM, -EINVAL. */
int cc_snapshot_write_open(CcSnapshotWriter **out, const char *path, const CcSnapshotInfo *info,
                           char *err, size_t errlen);
int cc_snapshot_write_cell(CcSnapshotWriter *w, const CcSnapshotCell *cell);
int cc_snapshot_write_positions(CcSnapshotWriter *w, const CcSnapshotPosition *p, int n);

/** A cell of the engine with its anomaly state (ac may be NULL) and host bytes. The cell's
 *  F must be the snapshot's. 0, -EIO, -ENOMEM, -EINVAL. */
int cc_snapshot_write_engine_cell(CcSnapshotWriter *w, const char *cell_id, const CcCell *c,
                                  const CcAnomalyCell *ac, const void *extra, size_t extra_len);

/** Ends the file, fsyncs, renames it into place, fsyncs the directory; frees w (also on
 *  failure, removing the temp file). 0 or -EIO with a message. */
int cc_snapshot_write_finish(CcSnapshotWriter **w, char *err, size_t errlen);

/** Abandons the snapshot: removes the temp file, keeps the old snapshot. */
void cc_snapshot_write_abort(CcSnapshotWriter **w);

/**
 * Opens and verifies a snapshot (header, every record's CRC, the end record and the
 * whole-file CRC). expect_hash 0 = accept any model. info may be NULL.
 * 0 or a negative errno from the list above, with a message naming the file and problem.
 */
int cc_snapshot_read_open(CcSnapshotReader **out, const char *path, uint64_t expect_hash,
                          CcSnapshotInfo *info, char *err, size_t errlen);

/**
 * Next record: 1 (rec filled, views valid until the next call), 0 at the end, or < 0:
 * -EBADMSG a record whose checksums hold but whose fields do not (cell id not 1..64 of
 * [A-Za-z0-9._:/-] as ingest accepts them, F, a negative or overflowing step span,
 * lengths, a negative partition or offset): the message says which; the reader has moved
 * past it, call again for the next record. -EIO the file changed since it was opened:
 * every later call returns 0. -ENOMEM.
 */
int cc_snapshot_read_next(CcSnapshotReader *r, CcSnapshotRecord *rec, char *err, size_t errlen);
void cc_snapshot_read_close(CcSnapshotReader **r);

/*
 * State records in memory (the value of a Kafka state-topic message, one cell each):
 *   u32 "CCS1" | u64 model hash | u32 F | i64 S | CC_SNAP_CELL payload (above) | u32 CRC32
 *   of every byte before it.
 * An encoder is a writer without a file: cc_snapshot_encode_engine_cell frames one cell
 * and returns a view of the record, valid until the next call on w. A decoder is a reader
 * without a file: cc_snapshot_decode verifies the framing (-EBADMSG), the model (-ESTALE)
 * and the cell's fields exactly like cc_snapshot_read_next (-EBADMSG), then fills rec
 * (views valid until the next call on r).
 */
int cc_snapshot_encoder_open(CcSnapshotWriter **out, const CcSnapshotInfo *info);
int cc_snapshot_encode_engine_cell(CcSnapshotWriter *w, const char *cell_id, const CcCell *c,
                                   const CcAnomalyCell *ac, const void *extra, size_t extra_len,
                                   const void **buf, size_t *len);
void cc_snapshot_encoder_close(CcSnapshotWriter **w);
int cc_snapshot_decoder_open(CcSnapshotReader **out, const CcSnapshotInfo *info);
int cc_snapshot_decode(CcSnapshotReader *r, const void *buf, size_t len, CcSnapshotRecord *rec,
                       char *err, size_t errlen);

/**
 * Restores a cell record into an engine cell (cc_cell_restore) and, if ac is not NULL and
 * the record has anomaly state, the anomaly cell (cc_anomaly_cell_load_at, its steps
 * bounded by the record's last step). All or nothing: a refused record changes neither.
 * 0, -EINVAL (F mismatch, bad state) with a message.
 */
int cc_snapshot_restore_engine_cell(const CcSnapshotCell *rec, CcCell *c, CcAnomalyCell *ac,
                                    char *err, size_t errlen);

#endif
