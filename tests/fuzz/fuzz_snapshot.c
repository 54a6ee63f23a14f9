/*
 * fuzz_snapshot.c — libFuzzer target for the snapshot reader (lib/cc_snapshot.c) and the
 * restore path behind it (cc_snapshot_restore_engine_cell → cc_cell_restore,
 * cc_anomaly_cell_load). Any file must be refused or read record by record with every
 * refusal explained, and every cell record the reader hands out must restore or be refused,
 * never crash, leak or overflow (ASan/UBSan).
 *
 * Random bytes rarely survive the CRCs, so the first input byte picks a mode: odd = the
 * rest is the file as is; even = the rest is re-sealed first (header CRC, each record's
 * length clamped to what is left and its CRC recomputed, an end record with the right count
 * and file CRC appended), so mutations reach the field checks behind the checksums.
 *
 * The cells are real (lib/cc_cell.c: layout, restore, history) without the engine
 * (tests/fuzz/fuzz_cells.h says why).
 *
 * Build: meson setup -Dfuzz=true with CC=clang; run: .ci/fuzz.sh (FUZZ_TARGET=snapshot).
 * Seeds: tests/data/snapshot_corpus/ (written by test_snapshot with CC_SNAPSHOT_SEEDS=dir;
 * anomaly_len_wrap.snap is the first crash it found, an anomaly length of 0xFFFFFFFF).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc_kpi.h"
#include "cc_snapshot.h"
#include "fuzz_cells.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER 212
#define F_MODEL FUZZ_CELLS_F

typedef struct Fixture {
    FuzzCells cells;
    char path[64];
} Fixture;

static void fixture_open(Fixture *fx)
{
    CcAnomalySettings as;
    fuzz_cells_anomaly_settings(&as);
    fuzz_cells_open(&fx->cells, &as);
    snprintf(fx->path, sizeof fx->path, "/tmp/fuzz_snapshot.%ld", (long)getpid());
}

/* Copies in to out re-sealed (see above); returns the length written (out holds
 * size + 24 bytes). */
static size_t reseal(const uint8_t *in, size_t size, uint8_t *out)
{
    memcpy(out, in, size);
    if (size < HEADER)
        return size;
    uint32_t crc = cc_crc32(0, out, HEADER - 4);
    memcpy(out + HEADER - 4, &crc, 4);
    size_t o = HEADER;
    uint64_t n = 0;
    while (size - o >= 12) {
        uint32_t type, len;
        memcpy(&type, out + o, 4);
        memcpy(&len, out + o + 4, 4);
        if (type == CC_SNAP_END)
            break;
        if (len > size - o - 12) {
            len = (uint32_t)(size - o - 12);
            memcpy(out + o + 4, &len, 4);
        }
        crc = cc_crc32(0, out + o, 8 + (size_t)len);
        memcpy(out + o + 8 + len, &crc, 4);
        o += 12 + (size_t)len;
        n++;
    }
    uint32_t type = CC_SNAP_END, len = 12, fcrc = cc_crc32(0, out, o);
    memcpy(out + o, &type, 4);
    memcpy(out + o + 4, &len, 4);
    memcpy(out + o + 8, &n, 8);
    memcpy(out + o + 16, &fcrc, 4);
    crc = cc_crc32(0, out + o, 20);
    memcpy(out + o + 20, &crc, 4);
    return o + 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Fixture fx;
    if (!fx.cells.a)
        fixture_open(&fx);
    if (size < 1)
        return 0;
    uint8_t *buf = malloc(size + 24);
    if (!buf)
        return 0;
    size_t n =
        data[0] & 1 ? (memcpy(buf, data + 1, size - 1), size - 1) : reseal(data + 1, size - 1, buf);
    FILE *f = fopen(fx.path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f))
        abort();
    free(buf);

    CcSnapshotReader *r = NULL;
    CcSnapshotInfo info;
    char err[512] = "";
    int rc = cc_snapshot_read_open(&r, fx.path, 0, &info, err, sizeof err);
    if (rc) {
        if (r || !err[0] ||
            (rc != -EINVAL && rc != -EBADMSG && rc != -EPROTONOSUPPORT && rc != -ENOMEM))
            abort(); /* refusals leave no reader, explain themselves, use the documented codes */
        return 0;
    }
    CcSnapshotRecord rec;
    while ((rc = cc_snapshot_read_next(r, &rec, err, sizeof err)) != 0) {
        if (rc < 0) {
            if (rc != -EBADMSG || !err[0])
                abort();
            continue;
        }
        if (rec.type == CC_SNAP_POSITIONS) {
            for (int i = 0; i < rec.n_positions; i++)
                if (!rec.positions[i].topic[0] || rec.positions[i].partition < 0 ||
                    rec.positions[i].offset < 0)
                    abort();
            continue;
        }
        const CcSnapshotCell *c = &rec.cell;
        if (rec.type != CC_SNAP_CELL || !cc_kpi_valid_cell_id(c->cell_id, strlen(c->cell_id)) ||
            c->n_features != info.n_features)
            abort();
        if (c->n_features != F_MODEL)
            continue;
        err[0] = 0;
        rc = cc_snapshot_restore_engine_cell(c, fx.cells.cell, fx.cells.ac, err, sizeof err);
        if (rc && !err[0])
            abort();
        if (rc == 0) /* the ring holds the last of the values restored */
            fuzz_cells_check_restored(&fx.cells, c);
    }
    cc_snapshot_read_close(&r);
    return 0;
}
