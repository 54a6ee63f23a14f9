/*
 * state_check.c — the checks cellcastd makes of a cell record (a snapshot file's or the
 * state topic's) before it restores it, beyond the library's (cc_snapshot, the anomaly
 * state): the key, the partition, the steps against the clock, the host's extra fields.
 * Anyone who may write the state topic or the snapshot file can hand it any record; see
 * state.h. Apart from state.c so that the tests link it without the daemon.
 */
#include <errno.h>
#include <string.h>

#include "cc_common.h"
#include "state.h"

int ccd_state_check_record(const CcSnapshotCell *sc, const char *key, int32_t partition,
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
    CcdStateExtra ex;
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
