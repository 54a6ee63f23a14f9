/*
 * cell_record.h — one cell's record, as snapshot files (state.h) and the state topic
 * (handover.h) carry it: its extra fields, its checks and its restore into the cell table.
 * Loop thread only.
 */
#ifndef CCD_CELL_RECORD_H
#define CCD_CELL_RECORD_H

#include <stdint.h>

#include "cc_snapshot.h"
#include "cellcastd.h"

/** What a cell record carries besides the engine and alert state (snapshot files and the
 *  state topic alike), first in its extra bytes. Then, in this order and each only when
 *  the cell has one: its interval scales (interval.h; the library's saved form, which
 *  opens with its own magic: a record without them, older or written with
 *  forecast.interval_adapt off, restores at scale 1) and, in snapshot files only, its long
 *  history (cc_history_save). */
typedef struct CcdCellRecordExtra {
    int32_t topic, partition;
    int64_t first_step, last_ts;
    uint64_t n_records, n_steps;
} CcdCellRecordExtra;
void ccd_cell_record_extra(const CcdCell *c, CcdCellRecordExtra *ex);

/** Bytes of the cell's extra (CcdCellRecordExtra, its interval scales, with_history its
 *  long history). Loop thread, the cell not busy. */
size_t ccd_cell_record_extra_size(const CcdCells *t, const CcdCell *c, int with_history);
/** Writes them into buf (n ≥ ccd_cell_record_extra_size); returns the bytes written. */
size_t ccd_cell_record_extra_write(const CcdCells *t, const CcdCell *c, int with_history,
                                   uint8_t *buf, size_t n);

/** Checks the fields of a cell record before it is restored (snapshot files and the state
 *  topic): its steps end no later than the step of max_ts (ccd_clock_max_ts, the bound of
 *  ingest: a record further ahead made the cell's real records late for good), its extra
 *  fields (CcdCellRecordExtra) in range. key non-NULL (a state-topic record): the cell id it
 *  holds is its key, and the KPI partition it names is `partition`, the one it was read
 *  from (state partition p holds the cells of KPI partition p). 0, or -EINVAL / -ERANGE
 *  with a message. */
int ccd_cell_record_check(const CcSnapshotCell *sc, const char *key, int32_t partition,
                          int64_t step_seconds, int64_t max_ts, char *err, size_t errlen);

/** Restores one cell record into the table (created or replaced); the worker must be
 *  idle. out NULL: its forecast is computed and published now; else *out is the cell and
 *  the caller passes it to ccd_cell_record_forecast (batched). 0 or -errno with a
 *  message. Interval scales the calibration refuses (not finite, outside its clamp,
 *  another F × HZ: anyone may write the record) do not refuse the record: its window and
 *  anomaly state passed their own checks and are what the cell needs to forecast at once,
 *  so the cell is restored at scale 1, with a warning, counted in
 *  CcdCells.interval_refused. */
int ccd_cell_record_restore(Ccd *d, const CcSnapshotCell *sc, CcdCell **out, char *err,
                            size_t errlen);
/** Computes the forecasts of restored cells in batched engine steps and publishes them. */
void ccd_cell_record_forecast(Ccd *d, CcdCell **cells, int n);
/** Whether restored cells may wait for a batched forecast (the table is far from full:
 *  no restore evicts a waiting cell). */
int ccd_cell_record_can_batch(const Ccd *d);

#endif
