/*
 * fuzz_state_record.c — libFuzzer target for the state-topic record reader
 * (cc_snapshot_decode, lib/cc_snapshot.c) and the restore path behind it
 * (cc_snapshot_restore_engine_cell → cc_cell_restore, the anomaly state's checks and load).
 * Anyone who may write the state topic hands cellcastd such records: each must be refused
 * with a message or decoded, and a decoded cell must restore or be refused all or nothing
 * (a refusal leaves the cell's ring and anomaly state exactly as they were), never crash,
 * leak or overflow (ASan/UBSan).
 *
 * Random bytes rarely survive the framing's CRC and model check, so the first input byte
 * picks a mode: odd = the rest is the record as is; even = the rest is re-sealed first (the
 * magic, the fixture model's hash, F and step, and the CRC over it all), so that mutations
 * reach the field checks behind them.
 *
 * The cells are real (lib/cc_cell.c) without the engine (tests/fuzz/fuzz_cells.h says why).
 *
 * The host bytes of a decoded record go on to the interval scales' reader the way cellcastd
 * reads them (daemon/cell_record.h: its fields, 40 bytes, then the saved calibration,
 * lib/cc_online_calib.h): scales are loaded or refused with a message leaving the
 * calibration exactly as it was; loaded, every scale is finite and inside the clamp
 * (issue 31: NaN, infinite, out-of-clamp or wrongly shaped scales are refused).
 *
 * Build: meson setup -Dfuzz=true with CC=clang; run: .ci/fuzz.sh (FUZZ_TARGET=state).
 * Seeds: tests/data/state_corpus/ (written by test_snapshot with CC_STATE_SEEDS=dir;
 * scales.bin and scales_nan.bin are valid.bin with host bytes as cellcastd writes them, its
 * fields then saved scales of F 3 × HZ 4, good and with a NaN level, in mode 0).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_kpi.h"
#include "cc_online_calib.h"
#include "cc_snapshot.h"
#include "fuzz_cells.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define F_MODEL FUZZ_CELLS_F
#define FRAME 24       /* magic, model hash, F, step seconds */
#define HOST_FIELDS 40 /* sizeof(CcdCellRecordExtra), daemon/cell_record.h */

typedef struct Fixture {
    FuzzCells cells;
    CcSnapshotReader *dec;
    CcSnapshotInfo info;
} Fixture;

static void fixture_open(Fixture *fx)
{
    cc_snapshot_info_for_model(&fx->info, fuzz_cells_hparams());
    CcAnomalySettings as;
    fuzz_cells_anomaly_settings(&as);
    as.shape_w = 4; /* shape novelty on, as test_snapshot writes the seeds */
    as.shape_ds = 1;
    as.shape_cats = 8;
    fuzz_cells_open(&fx->cells, &as);
    if (cc_snapshot_decoder_open(&fx->dec, &fx->info))
        abort();
}

/* in re-sealed into out (size bytes): the frame of the fixture's model, the CRC. */
static void reseal(const Fixture *fx, uint8_t *out, size_t size)
{
    if (size < FRAME + 4)
        return;
    uint32_t magic = 0x31534343u, F = F_MODEL; /* "CCS1" */
    memcpy(out, &magic, 4);
    memcpy(out + 4, &fx->info.model_hash, 8);
    memcpy(out + 12, &F, 4);
    memcpy(out + 16, &fx->info.step_seconds, 8);
    uint32_t crc = cc_crc32(0, out, size - 4);
    memcpy(out + size - 4, &crc, 4);
}

/* The anomaly state as bytes (malloc'd, *n its length), to compare before and after. */
static uint8_t *state_of(const CcAnomalyCell *ac, long *n)
{
    *n = cc_anomaly_cell_save(ac, NULL, 0);
    uint8_t *b = *n > 0 ? malloc((size_t)*n) : NULL;
    if (!b || cc_anomaly_cell_save(ac, b, (size_t)*n) != *n)
        abort();
    return b;
}

/* Loads the n bytes at p into cal as cellcastd would: refused with a message and cal
 * unchanged, or loaded with every scale finite within the clamp and saved back the same. */
static void load_scales(CcOnlineCalib *cal, const uint8_t *p, size_t n)
{
    enum { HZ = 4 };
    const size_t sn = cc_online_calib_save_size(F_MODEL, HZ);
    uint8_t before[16 + 4 * F_MODEL * (HZ + 1)], after[sizeof before];
    if (sn != sizeof before || cc_online_calib_save(cal, before, sn) != sn)
        abort();
    char err[256] = "";
    int rc = cc_online_calib_load(cal, p, n, err, sizeof err);
    if (cc_online_calib_save(cal, after, sn) != sn)
        abort();
    if (rc) {
        if (!err[0] || (rc != -EINVAL && rc != -ENOMEM) || memcmp(before, after, sn))
            abort();
        return;
    }
    float sc[F_MODEL * HZ];
    CcOnlineCalibSettings ds; /* the clamp the load checks against: e^±max_log */
    cc_online_calib_default_settings(&ds);
    const double hi = exp(ds.max_log) * (1 + 1e-5); /* expf of a float log: ~|log|·2^-23 */
    cc_online_calib_scales(cal, sc);
    for (int i = 0; i < F_MODEL * HZ; i++)
        if (!(sc[i] >= 1 / hi && sc[i] <= hi))
            abort();
    if (n != sn || memcmp(p, after, sn))
        abort();
}

/* The record's host bytes after the daemon's fields: the saved scales, if they start there
 * (then what follows is the long history), and the rest whole (a state record's tail). */
static void scales_of(const CcSnapshotCell *c)
{
    static CcOnlineCalib *cal;
    if (!cal) {
        CcOnlineCalibSettings s;
        cc_online_calib_default_settings(&s);
        if (cc_online_calib_open(&cal, &s, F_MODEL, fuzz_cells_hparams()->horizon))
            abort();
    }
    if (c->extra_len <= HOST_FIELDS)
        return;
    const uint8_t *rest = c->extra + HOST_FIELDS;
    size_t n = c->extra_len - HOST_FIELDS, ns = cc_online_calib_saved_size(rest, n);
    if (ns > n)
        abort();
    if (ns)
        load_scales(cal, rest, ns);
    load_scales(cal, rest, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Fixture fx;
    if (!fx.cells.a)
        fixture_open(&fx);
    if (size < 1)
        return 0;
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, n);
    if (!(data[0] & 1))
        reseal(&fx, buf, n);
    CcSnapshotRecord rec;
    char err[512] = "";
    int rc = cc_snapshot_decode(fx.dec, buf, n, &rec, err, sizeof err);
    if (rc) {
        if (!err[0] || (rc != -EBADMSG && rc != -ESTALE && rc != -ENOMEM))
            abort(); /* refusals explain themselves and use the documented codes */
        free(buf);
        return 0;
    }
    const CcSnapshotCell *c = &rec.cell;
    if (rec.type != CC_SNAP_CELL || !cc_kpi_valid_cell_id(c->cell_id, strlen(c->cell_id)) ||
        c->n_features != F_MODEL || (c->count > 0 && !c->values))
        abort();
    scales_of(c);
    int64_t first0, last0;
    cc_cell_span(fx.cells.cell, &first0, &last0);
    long n0;
    uint8_t *before = state_of(fx.cells.ac, &n0);
    err[0] = 0;
    rc = cc_snapshot_restore_engine_cell(c, fx.cells.cell, fx.cells.ac, err, sizeof err);
    if (rc) {
        /* all or nothing: a refused record changed neither the ring nor the anomaly state
         * (-ENOMEM in the last load may reset the ring: not injected here) */
        int64_t first1, last1;
        cc_cell_span(fx.cells.cell, &first1, &last1);
        long n1;
        uint8_t *after = state_of(fx.cells.ac, &n1);
        if (!err[0] || first1 != first0 || last1 != last0 || n1 != n0 ||
            memcmp(before, after, (size_t)n0))
            abort();
        free(after);
    } else { /* the ring holds the last of the values restored */
        fuzz_cells_check_restored(&fx.cells, c);
    }
    free(before);
    free(buf);
    return 0;
}
