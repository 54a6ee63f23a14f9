/*
 * cell_record.c — one cell's record, as a snapshot file (state.c) and the state topic
 * (handover.c) carry it: the host's extra fields, the checks cellcastd makes of a record
 * before it restores it, beyond the library's (cc_snapshot, the anomaly state: the key,
 * the partition, the steps against the clock, the extra fields; anyone who may write the
 * state topic or the snapshot file can hand it any record), and its restore into the cell
 * table (with the cell's interval scales, interval.h) with the forecasts of restored cells
 * computed in batches. See cell_record.h.
 */
#include "cell_record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cc_common.h"
#include "cc_online_calib.h"
#include "alerts.h"
#include "clock.h"
#include "interval.h"
#include "log.h"
#include "publish.h"

int ccd_cell_record_check(const CcSnapshotCell *sc, const char *key, int32_t partition,
                          int64_t step_seconds, int64_t max_ts, char *err, size_t errlen)
{
    if (key && strcmp(key, sc->cell_id))
        return cc_errf(err, errlen, -EINVAL, "keyed '%s' but holds cell '%s'", key, sc->cell_id);
    if (sc->count <= 0)
        return cc_errf(err, errlen, -EINVAL, "cell %s: no steps", sc->cell_id);
    /* the reader bounds steps to 2^40 s of unix time: no overflow here */
    int64_t last = sc->first + sc->count - 1, max_step = max_ts / step_seconds;
    if (last > max_step)
        return cc_errf(err, errlen, -ERANGE,
                       "cell %s: its steps end at %lld (t=%lld), past the newest step ingest "
                       "accepts now, %lld (the clock + ingest.max_future_s): the cell's real "
                       "records would all be late",
                       sc->cell_id, (long long)last, (long long)(last * step_seconds),
                       (long long)max_step);
    CcdCellRecordExtra ex;
    if (sc->extra_len < sizeof ex) {
        if (key)
            return cc_errf(err, errlen, -EINVAL, "cell %s: %zu extra bytes, want %zu", sc->cell_id,
                           sc->extra_len, sizeof ex);
        return 0; /* an older snapshot: no extra fields */
    }
    memcpy(&ex, sc->extra, sizeof ex);
    if (ex.topic < -1 || ex.partition < -1 || ex.first_step < -1 || ex.first_step > last ||
        ex.last_ts < 0 || ex.last_ts > max_ts)
        return cc_errf(err, errlen, -EINVAL,
                       "cell %s: fields out of range (topic %d, partition %d, first step %lld of "
                       "%lld, last record time %lld)",
                       sc->cell_id, (int)ex.topic, (int)ex.partition, (long long)ex.first_step,
                       (long long)last, (long long)ex.last_ts);
    if (key && ex.partition != partition)
        return cc_errf(err, errlen, -EINVAL,
                       "cell %s: read from state partition %d but its cell is on partition %d",
                       sc->cell_id, (int)partition, (int)ex.partition);
    return 0;
}

void ccd_cell_record_extra(const CcdCell *c, CcdCellRecordExtra *ex)
{
    *ex = (CcdCellRecordExtra){c->topic,   c->partition, c->first_step,
                               c->last_ts, c->n_records, c->n_steps};
}

size_t ccd_cell_record_extra_size(const CcdCells *t, const CcdCell *c, int with_history)
{
    return sizeof(CcdCellRecordExtra) + ccd_interval_save_size(t, c) +
           (with_history && c->hist ? cc_history_save_size(c->hist) : 0);
}

size_t ccd_cell_record_extra_write(const CcdCells *t, const CcdCell *c, int with_history,
                                   uint8_t *buf, size_t n)
{
    CcdCellRecordExtra ex;
    if (n < ccd_cell_record_extra_size(t, c, with_history))
        return 0;
    ccd_cell_record_extra(c, &ex);
    memcpy(buf, &ex, sizeof ex);
    size_t o = sizeof ex;
    o += ccd_interval_save(t, c, buf + o, n - o);
    if (with_history && c->hist)
        o += cc_history_save(c->hist, buf + o, n - o);
    return o;
}

/* Cells restored per engine call: one batched step computes their forecasts (one call per
 * cell took ~0.5 ms each on the default model: 5 s for 10,000 cells). */
#define FORECAST_BATCH 512

int ccd_cell_record_can_batch(const Ccd *d)
{
    /* a cell waiting for its forecast must not be evicted by the next restored one */
    return d->cells->max_resident <= 0 ||
           (int64_t)d->cells->n_cells + 2 * FORECAST_BATCH < d->cells->max_resident;
}

void ccd_cell_record_forecast(Ccd *d, CcdCell **cells, int n)
{
    CcStepInput in[FORECAST_BATCH];
    int st[FORECAST_BATCH];
    for (int i0 = 0; i0 < n; i0 += FORECAST_BATCH) {
        int m = n - i0 < FORECAST_BATCH ? n - i0 : FORECAST_BATCH;
        for (int i = 0; i < m; i++) {
            in[i] = (CcStepInput){cells[i0 + i]->cell, cells[i0 + i]->last_step, NULL};
            st[i] = 0;
        }
        int rc = cc_engine_step(d->engine, in, m, st);
        for (int i = 0; i < m; i++) {
            CcdCell *c = cells[i0 + i];
            if (rc || st[i]) {
                ccd_alerts_restored(d, c, NULL);
                continue;
            }
            CcForecast fc;
            cc_cell_forecast(c->cell, &fc);
            ccd_publish(d->cells, c, c->last_step, c->last_values, &fc);
            ccd_alerts_restored(d, c, &fc);
            ccd_interval_restored(d->cells, c, c->last_step, &fc);
        }
    }
}

int ccd_cell_record_restore(Ccd *d, const CcSnapshotCell *sc, CcdCell **out, char *err,
                            size_t errlen)
{
    const int F = d->model->hp.n_features;
    if (sc->count <= 0 || sc->n_features != F)
        return cc_errf(err, errlen, -EINVAL, "cell %s: empty or F=%d", sc->cell_id, sc->n_features);
    int rc = ccd_cell_record_check(sc, NULL, -1, d->model->hp.step_seconds, ccd_clock_max_ts(d),
                                   err, errlen);
    if (rc)
        return rc;
    /* a cell created here and refused below leaves the table again: nothing half-made */
    int created = !ccd_cells_get(d->cells, sc->cell_id);
    CcdCell *c = ccd_cells_add(d->cells, sc->cell_id);
    CcAnomalyCell *ac = c ? ccd_alerts_cell(d, c) : NULL;
    if (!ac)
        return cc_errf(err, errlen, -ENOMEM, "cell %s: out of memory or table full", sc->cell_id);
    rc = cc_snapshot_restore_engine_cell(sc, c->cell, ac, err, errlen);
    if (rc) {
        if (created && !c->busy && !c->open_items && !c->doomed) {
            c->doomed = 1; /* released by the next reap */
            d->cells->n_doomed++;
        }
        return rc;
    }
    /* the record's interval scales, if any, replace the cell's below (interval.h) */
    ccd_interval_drop(d->cells, c);
    int64_t last = sc->first + sc->count - 1;
    const float *lastv = sc->values + (size_t)(sc->count - 1) * (size_t)F;
    CcdCellRecordExtra ex;
    memset(&ex, 0, sizeof ex);
    if (sc->extra_len >= sizeof ex)
        memcpy(&ex, sc->extra, sizeof ex);
    else
        ex.topic = ex.partition = -1, ex.first_step = sc->first;
    c->topic = ex.topic < d->cfg.kafka_topics.n ? ex.topic : -1;
    c->partition = ex.partition;
    c->first_step = ex.first_step;
    c->last_step = last;
    c->last_ts = ex.last_ts;
    c->n_records = ex.n_records;
    c->n_steps = ex.n_steps;
    if (c->doomed) /* a tombstone read before this record marked it */
        d->cells->n_doomed--;
    c->doomed = 0;
    memcpy(c->last_values, lastv, (size_t)F * sizeof(float));
    c->have_values = 1;
    /* after the host's fields, the interval scales (opening with their own magic; none in
     * older records), then the long history (none in older snapshots, nor in state records:
     * a cell that changes member starts its long history there) */
    const uint8_t *rest = sc->extra_len > sizeof ex ? sc->extra + sizeof ex : NULL;
    size_t n_rest = rest ? sc->extra_len - sizeof ex : 0;
    size_t n_scales = rest ? cc_online_calib_saved_size(rest, n_rest) : 0;
    char why[256];
    if (n_scales && ccd_interval_restore(d->cells, c, rest, n_scales, why, sizeof why)) {
        d->cells->interval_refused++;
        CCD_LOG_RL(CC_LOG_WARN, "state", "cell %s: its record's %s; the cell starts at scale 1",
                   sc->cell_id, why);
    }
    if (n_scales)
        rest += n_scales, n_rest -= n_scales;
    if (n_rest && (rc = ccd_cells_history_restore(d->cells, c, rest, n_rest)))
        LOG_WARN("state", "cell %s: long history not restored (%s)", sc->cell_id,
                 rc == -ENOMEM ? "out of memory" : "malformed or another history.depth");
    if (out)
        *out = c;
    else
        ccd_cell_record_forecast(d, &c, 1);
    return 0;
}
