/* test_snapshot.c — lib/cc_snapshot: a round trip of engine cells (rings, forecasts after
 * restore), anomaly state, Kafka positions and host bytes; and every refusal: missing,
 * wrong magic, other version, truncated (header, mid-record, no end record), corrupted
 * (record CRC, header CRC, file CRC), mismatched model; atomic replace and abort; anomaly
 * states whose steps lie past the cell's, refused whole; and the daemon's checks of a
 * record (daemon/state.c: key, partition, steps ahead of the clock). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cc_snapshot.h"
#include "cell_record.h"
#include "state.h"
#include "testlib.h"

#define NCELLS 4

typedef struct World {
    CcModel *m;
    CcEngine *e;
    CcAnomaly *a;
    CcCell *cell[NCELLS];
    CcAnomalyCell *ac[NCELLS];
    char dir[64];
    char path[128];
} World;

static const char *ids[NCELLS] = {"cell-0", "cell-1", "cell-empty", "cell-3"};

static CcModel *small_model(void)
{
    CcHparams hp;
    tl_hparams_small(&hp);
    hp.n_layers = 1;
    hp.horizon = 4;
    CcModel *m = NULL;
    tl_model_open(&m, &hp, 7);
    return m;
}

static void values_at(int cell, int64_t t, float *x)
{
    for (int f = 0; f < 3; f++)
        x[f] = (float)(50 + 10 * f + 20 * sin(0.4 * (double)t + cell + f) + (t % 7));
}

/* Steps every non-empty cell from step 1000 for n steps, scoring with the anomaly cells. */
static void run_steps(World *w, int64_t from, int n)
{
    for (int64_t t = from; t < from + n; t++) {
        CcStepInput in[NCELLS];
        float x[NCELLS][3];
        int k = 0;
        for (int i = 0; i < NCELLS; i++) {
            if (i == 2)
                continue;
            if (i == 3 && t < from + n / 2)
                continue; /* cell 3 starts later: a shorter ring */
            int64_t first, last;
            cc_cell_span(w->cell[i], &first, &last);
            if (last >= 0 && last != t - 1)
                continue;
            values_at(i, t, x[i]);
            in[k].cell = w->cell[i];
            in[k].step = t;
            in[k].values = x[i];
            k++;
        }
        int st[NCELLS];
        assert_int_equal(cc_engine_step(w->e, in, k, st), 0);
        for (int j = 0; j < k; j++) {
            assert_int_equal(st[j], 0);
            int i = 0;
            while (w->cell[i] != in[j].cell)
                i++;
            cc_anomaly_observe(w->a, w->ac[i], t, in[j].values, NULL, NULL);
            CcForecast fc;
            cc_cell_forecast(w->cell[i], &fc);
            cc_anomaly_set_forecast(w->a, w->ac[i], &fc);
        }
    }
}

static void world_open(World *w, CcModel *m)
{
    memset(w, 0, sizeof *w);
    w->m = m;
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    assert_int_equal(cc_engine_open(&w->e, m, &es, NULL, 0), 0);
    CcAnomalySettings as;
    cc_anomaly_default_settings(&as);
    as.n_features = 3;
    as.step_seconds = 900;
    as.shape_w = 4; /* shape novelty on, small: its state is in every anomaly record */
    as.shape_ds = 1;
    as.shape_cats = 8;
    assert_int_equal(cc_anomaly_open(&w->a, &as, NULL, 0), 0);
    for (int i = 0; i < NCELLS; i++) {
        assert_int_equal(cc_cell_open(&w->cell[i], w->e), 0);
        assert_int_equal(cc_anomaly_cell_open(&w->ac[i], w->a, ids[i]), 0);
    }
    snprintf(w->dir, sizeof w->dir, "/tmp/cc_snap_XXXXXX");
    assert_non_null(mkdtemp(w->dir));
    snprintf(w->path, sizeof w->path, "%s/state.snap", w->dir);
}

static void world_close(World *w, int rmdir_too)
{
    for (int i = 0; i < NCELLS; i++) {
        cc_cell_close(&w->cell[i]);
        cc_anomaly_cell_close(&w->ac[i]);
    }
    cc_engine_close(&w->e);
    cc_anomaly_close(&w->a);
    if (rmdir_too) {
        char p[160];
        unlink(w->path);
        snprintf(p, sizeof p, "%s", w->dir);
        rmdir(p);
    }
}

static const CcSnapshotPosition test_pos[2] = {{"kpis", 0, 12345}, {"kpis", 3, 77}};

static void write_snapshot(World *w, const char *path)
{
    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &w->m->hp);
    CcSnapshotWriter *sw = NULL;
    char err[256] = "";
    assert_int_equal(cc_snapshot_write_open(&sw, path, &info, err, sizeof err), 0);
    assert_int_equal(cc_snapshot_write_positions(sw, test_pos, 2), 0);
    for (int i = 0; i < NCELLS; i++) {
        uint32_t extra = 0xC0FFEE00u + (uint32_t)i;
        assert_int_equal(
            cc_snapshot_write_engine_cell(sw, ids[i], w->cell[i], w->ac[i], &extra, sizeof extra),
            0);
    }
    int rc = cc_snapshot_write_finish(&sw, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_null(sw);
}

static long file_size(const char *p)
{
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (long)st.st_size;
}

static uint8_t *slurp(const char *p, long *n)
{
    *n = file_size(p);
    uint8_t *b = malloc((size_t)*n);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    assert_int_equal(fread(b, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
    return b;
}

static void spit(const char *p, const uint8_t *b, long n)
{
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
}

/* With CC_STATE_SEEDS=dir, writes a state record as a seed of fuzz_state_record: its first
 * byte the mode (1: as is; 0: re-sealed by the target, for records whose CRC no longer
 * holds after a field was changed). */
static void write_state_seed(const char *name, uint8_t mode, const void *rec, size_t len)
{
    const char *dir = getenv("CC_STATE_SEEDS");
    if (!dir || !*dir)
        return;
    uint8_t *s = malloc(len + 1);
    assert_non_null(s);
    s[0] = mode;
    memcpy(s + 1, rec, len);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    spit(p, s, (long)len + 1);
    free(s);
}

static void test_roundtrip(void **state)
{
    (void)state;
    World w, r;
    CcModel *m = small_model();
    world_open(&w, m);
    run_steps(&w, 1000, 80);
    write_snapshot(&w, w.path);

    /* no temp file left beside it */
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", w.path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);

    world_open(&r, m);
    CcSnapshotReader *rd = NULL;
    CcSnapshotInfo info;
    char err[256] = "";
    int rc =
        cc_snapshot_read_open(&rd, w.path, cc_snapshot_model_hash(&m->hp), &info, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(info.n_features, 3);
    assert_int_equal(info.step_seconds, 900);
    assert_int_equal(info.n_records, NCELLS + 1);
    assert_non_null(strstr(info.model_desc, "F=3"));
    CcSnapshotRecord rec;
    int n_cells = 0, n_pos = 0;
    while ((rc = cc_snapshot_read_next(rd, &rec, err, sizeof err)) == 1) {
        if (rec.type == CC_SNAP_POSITIONS) {
            n_pos++;
            assert_int_equal(rec.n_positions, 2);
            for (int i = 0; i < 2; i++) {
                assert_string_equal(rec.positions[i].topic, test_pos[i].topic);
                assert_int_equal(rec.positions[i].partition, test_pos[i].partition);
                assert_int_equal(rec.positions[i].offset, test_pos[i].offset);
            }
            continue;
        }
        assert_int_equal(rec.type, CC_SNAP_CELL);
        int i = 0;
        while (strcmp(ids[i], rec.cell.cell_id))
            i++;
        assert_int_equal(rec.cell.extra_len, 4);
        uint32_t extra;
        memcpy(&extra, rec.cell.extra, 4);
        assert_int_equal(extra, 0xC0FFEE00u + (uint32_t)i);
        assert_int_equal(
            cc_snapshot_restore_engine_cell(&rec.cell, r.cell[i], r.ac[i], err, sizeof err), 0);
        n_cells++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(n_cells, NCELLS);
    assert_int_equal(n_pos, 1);
    cc_snapshot_read_close(&rd);
    assert_null(rd);

    for (int i = 0; i < NCELLS; i++) {
        int64_t f1, l1, f2, l2;
        cc_cell_span(w.cell[i], &f1, &l1);
        cc_cell_span(r.cell[i], &f2, &l2);
        assert_int_equal(f1, f2);
        assert_int_equal(l1, l2);
        assert_int_equal(cc_cell_seq_start(w.cell[i]), cc_cell_seq_start(r.cell[i]));
        if (l1 >= 0) {
            int n = (int)(l1 - f1 + 1);
            float *h1 = malloc((size_t)n * 3 * sizeof *h1),
                  *h2 = malloc((size_t)n * 3 * sizeof *h2);
            assert_int_equal(cc_cell_history(w.cell[i], f1, n, h1), 0);
            assert_int_equal(cc_cell_history(r.cell[i], f1, n, h2), 0);
            assert_memory_equal(h1, h2, (size_t)n * 3 * sizeof *h1);
            free(h1);
            free(h2);
        }
        long n1 = cc_anomaly_cell_save(w.ac[i], NULL, 0),
             n2 = cc_anomaly_cell_save(r.ac[i], NULL, 0);
        assert_int_equal(n1, n2);
        uint8_t *b1 = malloc((size_t)n1), *b2 = malloc((size_t)n2);
        cc_anomaly_cell_save(w.ac[i], b1, (size_t)n1);
        cc_anomaly_cell_save(r.ac[i], b2, (size_t)n2);
        assert_memory_equal(b1, b2, (size_t)n1);
        free(b1);
        free(b2);
    }
    /* recompute the forecasts without new data: equal to the originals */
    CcStepInput in[NCELLS];
    int k = 0;
    for (int i = 0; i < NCELLS; i++)
        if (i != 2)
            in[k++] = (CcStepInput){r.cell[i], 1079, NULL};
    int st[NCELLS];
    assert_int_equal(cc_engine_step(r.e, in, k, st), 0);
    for (int i = 0; i < NCELLS; i++) {
        if (i == 2)
            continue;
        CcForecast a, b;
        cc_cell_forecast(w.cell[i], &a);
        cc_cell_forecast(r.cell[i], &b);
        assert_int_equal(a.valid, b.valid);
        if (!a.valid)
            continue;
        for (int f = 0; f < 3; f++) {
            double m1, s1, m2, s2;
            cc_forecast_point(&a, f, 0, &m1, &s1);
            cc_forecast_point(&b, f, 0, &m2, &s2);
            assert_true(fabs(m1 - m2) <= 1e-4 * (1 + fabs(m1)));
            assert_true(fabs(s1 - s2) <= 1e-4 * (1 + fabs(s1)));
        }
    }
    world_close(&w, 1);
    world_close(&r, 1);
    cc_model_close(&m);
}

/* With CC_SNAPSHOT_SEEDS=dir, copies the snapshot at path into dir/name as a seed of
 * tests/fuzz/fuzz_snapshot.c (its first byte 1: "the file as is"). */
static void write_seed(const char *path, const char *name)
{
    const char *dir = getenv("CC_SNAPSHOT_SEEDS");
    if (!dir || !*dir)
        return;
    long n;
    uint8_t *b = slurp(path, &n);
    uint8_t *s = malloc((size_t)n + 1);
    assert_non_null(s);
    s[0] = 1;
    memcpy(s + 1, b, (size_t)n);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    spit(p, s, n + 1);
    free(s);
    free(b);
}

/* Writes a valid snapshot and returns its bytes. */
static uint8_t *valid_snapshot(World *w, CcModel *m, long *n)
{
    world_open(w, m);
    run_steps(w, 5000, 40);
    write_snapshot(w, w->path);
    return slurp(w->path, n);
}

static int open_rc(const char *path, uint64_t hash, char *err, size_t errlen)
{
    CcSnapshotReader *rd = NULL;
    err[0] = 0;
    int rc = cc_snapshot_read_open(&rd, path, hash, NULL, err, errlen);
    if (rc == 0) {
        /* a valid file must also read to the end */
        CcSnapshotRecord rec;
        int k;
        while ((k = cc_snapshot_read_next(rd, &rec, err, errlen)) == 1)
            ;
        assert_int_equal(k, 0);
        cc_snapshot_read_close(&rd);
    } else {
        assert_null(rd);
        assert_true(strlen(err) > 10);
    }
    return rc;
}

static void test_refusals(void **state)
{
    (void)state;
    World w;
    CcModel *m = small_model();
    long n;
    uint8_t *good = valid_snapshot(&w, m, &n);
    write_seed(w.path, "valid.snap");
    uint64_t hash = cc_snapshot_model_hash(&m->hp);
    char err[512];
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.snap", w.dir);

    assert_int_equal(open_rc(w.path, hash, err, sizeof err), 0);
    assert_int_equal(open_rc(w.path, 0, err, sizeof err), 0); /* 0 = any model */

    /* missing */
    assert_int_equal(open_rc(bad, hash, err, sizeof err), -ENOENT);

    /* wrong magic */
    uint8_t *b = malloc((size_t)n);
    memcpy(b, good, (size_t)n);
    memcpy(b, "GGUF\0\0\0\0", 8);
    spit(bad, b, n);
    assert_int_equal(open_rc(bad, hash, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "magic"));

    /* another version */
    memcpy(b, good, (size_t)n);
    b[8] = 2;
    spit(bad, b, n);
    assert_int_equal(open_rc(bad, hash, err, sizeof err), -EPROTONOSUPPORT);
    assert_non_null(strstr(err, "version 2"));

    /* truncated: empty, inside the header, after the header, mid-record, no end record */
    long cuts[] = {0, 5, 100, 212, 230, n / 2, n - 20, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spit(bad, good, cuts[i]);
        int rc = open_rc(bad, hash, err, sizeof err);
        if (rc != -EBADMSG)
            fprintf(stderr, "cut %ld: rc %d %s\n", cuts[i], rc, err);
        assert_int_equal(rc, -EBADMSG);
        assert_non_null(strstr(err, "truncated"));
    }
    /* any cut length refuses (every 7th length, and all of the last 40 bytes) */
    for (long c = 0; c < n; c += c < n - 40 ? 7 : 1) {
        spit(bad, good, c);
        assert_int_equal(open_rc(bad, hash, err, sizeof err), -EBADMSG);
    }

    /* corrupted: one flipped bit after the magic and version is refused (every header
     * byte, every 5th byte after it, the last 40 bytes) */
    int seen_record_crc = 0, seen_header_crc = 0, seen_file = 0;
    for (long i = 16; i < n; i += i < 212 || i >= n - 40 ? 1 : 5) {
        memcpy(b, good, (size_t)n);
        b[i] ^= 0x10;
        spit(bad, b, n);
        int rc = open_rc(bad, hash, err, sizeof err);
        if (rc == 0)
            fprintf(stderr, "flip at %ld accepted\n", i);
        assert_true(rc == -EBADMSG);
        seen_record_crc |= strstr(err, "CRC mismatch in record") != NULL;
        seen_header_crc |= strstr(err, "corrupted header") != NULL;
        seen_file |= strstr(err, "corrupted") != NULL;
    }
    assert_true(seen_record_crc && seen_header_crc && seen_file);
    /* trailing garbage */
    uint8_t *g = malloc((size_t)n + 3);
    memcpy(g, good, (size_t)n);
    memcpy(g + n, "xyz", 3);
    spit(bad, g, n + 3);
    assert_int_equal(open_rc(bad, hash, err, sizeof err), -EBADMSG);
    free(g);

    /* mismatched model: another feature list or shape */
    CcHparams hp2 = m->hp;
    snprintf(hp2.features[1], CC_FEATURE_NAME_MAX, "prb_dl");
    assert_true(cc_snapshot_model_hash(&hp2) != hash);
    assert_int_equal(open_rc(w.path, cc_snapshot_model_hash(&hp2), err, sizeof err), -ESTALE);
    assert_non_null(strstr(err, "another model"));
    hp2 = m->hp;
    hp2.patch_len = 8;
    assert_true(cc_snapshot_model_hash(&hp2) != hash);
    /* the weights are not part of the identity */
    CcModel *m2 = small_model();
    cc_model_init_random(m2, 99);
    assert_true(cc_snapshot_model_hash(&m2->hp) == hash);
    cc_model_close(&m2);

    free(b);
    free(good);
    unlink(bad);
    world_close(&w, 1);
    cc_model_close(&m);
}

/* A new snapshot replaces the old one atomically; an aborted one leaves it in place; a
 * snapshot into a missing directory fails cleanly. */
static void test_atomic_replace_and_abort(void **state)
{
    (void)state;
    World w;
    CcModel *m = small_model();
    long n1;
    uint8_t *first = valid_snapshot(&w, m, &n1);
    char err[256];

    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &m->hp);
    CcSnapshotWriter *sw = NULL;
    assert_int_equal(cc_snapshot_write_open(&sw, w.path, &info, err, sizeof err), 0);
    assert_int_equal(cc_snapshot_write_engine_cell(sw, "x", w.cell[0], w.ac[0], NULL, 0), 0);
    cc_snapshot_write_abort(&sw);
    assert_null(sw);
    long n2;
    uint8_t *after = slurp(w.path, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(first, after, (size_t)n1);
    free(after);
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", w.path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);

    run_steps(&w, 5040, 10);
    write_snapshot(&w, w.path);
    assert_int_equal(open_rc(w.path, cc_snapshot_model_hash(&m->hp), err, sizeof err), 0);
    after = slurp(w.path, &n2);
    assert_true(n1 != n2 || memcmp(first, after, (size_t)n1));
    free(after);

    char nodir[200];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/s.snap", w.dir);
    assert_int_equal(cc_snapshot_write_open(&sw, nodir, &info, err, sizeof err), -EIO);
    assert_null(sw);
    assert_non_null(strstr(err, "cannot create"));

    /* a cell of another F is refused by the writer */
    assert_int_equal(cc_snapshot_write_open(&sw, w.path, &info, err, sizeof err), 0);
    float v[4] = {1, 2, 3, 4};
    CcSnapshotCell bad = {.cell_id = "c", .first = 0, .count = 1, .n_features = 4, .values = v};
    assert_int_equal(cc_snapshot_write_cell(sw, &bad), -EINVAL);
    bad.n_features = 3;
    bad.cell_id = "";
    assert_int_equal(cc_snapshot_write_cell(sw, &bad), -EINVAL);
    cc_snapshot_write_abort(&sw);

    free(first);
    world_close(&w, 1);
    cc_model_close(&m);
}

/* State records in memory (the Kafka state topic's values): every cell round-trips, the
 * history and anomaly state equal; a flipped byte, a truncation and another model are
 * refused with their errors. */
static void test_state_records(void **state)
{
    (void)state;
    World w, r;
    CcModel *m = small_model();
    world_open(&w, m);
    world_open(&r, m);
    run_steps(&w, 1000, 80);
    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &m->hp);
    CcSnapshotWriter *enc = NULL;
    CcSnapshotReader *dec = NULL;
    assert_int_equal(cc_snapshot_encoder_open(&enc, &info), 0);
    assert_int_equal(cc_snapshot_decoder_open(&dec, &info), 0);
    char err[256];
    for (int i = 0; i < NCELLS; i++) {
        uint32_t extra = 0xBEEF00u + (uint32_t)i;
        const void *buf;
        size_t len;
        assert_int_equal(cc_snapshot_encode_engine_cell(enc, ids[i], w.cell[i], w.ac[i], &extra,
                                                        sizeof extra, &buf, &len),
                         0);
        uint8_t *copy = malloc(len);
        memcpy(copy, buf, len);
        if (i == 0)
            write_state_seed("valid.bin", 1, buf, len);
        CcSnapshotRecord rec;
        assert_int_equal(cc_snapshot_decode(dec, copy, len, &rec, err, sizeof err), 0);
        assert_string_equal(rec.cell.cell_id, ids[i]);
        assert_int_equal(rec.cell.extra_len, sizeof extra);
        assert_memory_equal(rec.cell.extra, &extra, sizeof extra);
        assert_int_equal(
            cc_snapshot_restore_engine_cell(&rec.cell, r.cell[i], r.ac[i], err, sizeof err), 0);
        int64_t f1, l1, f2, l2;
        cc_cell_span(w.cell[i], &f1, &l1);
        cc_cell_span(r.cell[i], &f2, &l2);
        assert_int_equal(f1, f2);
        assert_int_equal(l1, l2);
        long n1 = cc_anomaly_cell_save(w.ac[i], NULL, 0),
             n2 = cc_anomaly_cell_save(r.ac[i], NULL, 0);
        assert_int_equal(n1, n2);
        /* any flipped byte: refused */
        for (size_t k = 0; k < len; k += len / 7 + 1) {
            copy[k] ^= 0x20;
            assert_int_equal(cc_snapshot_decode(dec, copy, len, &rec, err, sizeof err), -EBADMSG);
            copy[k] ^= 0x20;
        }
        assert_int_equal(cc_snapshot_decode(dec, copy, len - 1, &rec, err, sizeof err), -EBADMSG);
        assert_int_equal(cc_snapshot_decode(dec, copy, 10, &rec, err, sizeof err), -EBADMSG);
        free(copy);
    }
    /* a record of another model (other hash) */
    CcSnapshotInfo other = info;
    other.model_hash ^= 1;
    CcSnapshotReader *dec2 = NULL;
    assert_int_equal(cc_snapshot_decoder_open(&dec2, &other), 0);
    const void *buf;
    size_t len;
    assert_int_equal(
        cc_snapshot_encode_engine_cell(enc, ids[0], w.cell[0], w.ac[0], NULL, 0, &buf, &len), 0);
    CcSnapshotRecord rec;
    assert_int_equal(cc_snapshot_decode(dec2, buf, len, &rec, err, sizeof err), -ESTALE);
    assert_non_null(strstr(err, "another model"));
    cc_snapshot_read_close(&dec2);
    cc_snapshot_encoder_close(&enc);
    cc_snapshot_read_close(&dec);
    assert_null(enc);
    world_close(&w, 1);
    world_close(&r, 1);
    cc_model_close(&m);
}

static void test_crc32(void **state)
{
    (void)state;
    /* the standard check value of CRC-32/ISO-HDLC */
    assert_int_equal(cc_crc32(0, "123456789", 9), 0xCBF43926u);
    uint32_t c = cc_crc32(0, "1234", 4);
    assert_int_equal(cc_crc32(c, "56789", 5), 0xCBF43926u);
    /* the sliced implementation equals a bitwise one at every length and alignment */
    uint8_t buf[300];
    for (int i = 0; i < 300; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    for (int off = 0; off < 8; off++)
        for (int len = 0; len < 280; len += 1 + len / 16) {
            uint32_t ref = ~0u;
            for (int i = 0; i < len; i++) {
                ref ^= buf[off + i];
                for (int k = 0; k < 8; k++)
                    ref = ref & 1 ? 0xEDB88320u ^ (ref >> 1) : ref >> 1;
            }
            assert_int_equal(cc_crc32(0, buf + off, (size_t)len), ~ref);
        }
}

/* Cell records whose checksums hold but whose fields are impossible (a crafted or buggy
 * writer): each is refused with -EBADMSG and a message naming the problem, the reader goes
 * on with the next record, and cc_cell_restore refuses the same spans when called directly
 * (a first step near INT64_MAX used to overflow into a negative ring index). */
static void test_crafted_records(void **state)
{
    (void)state;
    World w;
    CcModel *m = small_model();
    world_open(&w, m);
    run_steps(&w, 5000, 40);
    const int F = 3;
    float vals[10 * 3];
    for (int i = 0; i < 10 * F; i++)
        vals[i] = (float)i;
    const int64_t big = INT64_MAX - 5;
    const struct {
        const char *id;
        int64_t seq_start, first;
        int count;
        const char *why; /* in the message */
    } bad[] = {
        {"overflow", big, big, 10, "first 9223372036854775802"},
        {"far-future", 0, CC_SNAP_TIME_MAX / 900, 2, "steps must lie in"},
        {"negative", -4, -3, 2, "seq_start -4"},
        {"seq-after-first", 20, 10, 2, "seq_start 20"},
        {"empty-with-span", 3, 3, 0, "count 0"},
        {"bad id", 0, 0, 2, "invalid id"},
        {"cell\n-1", 0, 0, 2, "invalid id"},
        {"x123456789x123456789x123456789x123456789x123456789x123456789x12345", 0, 0, 2,
         "invalid id"},
    };
    const int nbad = (int)(sizeof bad / sizeof bad[0]);
    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &m->hp);
    CcSnapshotWriter *sw = NULL;
    char err[512] = "";
    assert_int_equal(cc_snapshot_write_open(&sw, w.path, &info, err, sizeof err), 0);
    assert_int_equal(cc_snapshot_write_engine_cell(sw, ids[0], w.cell[0], w.ac[0], NULL, 0), 0);
    CcSnapshotCell cells[sizeof bad / sizeof bad[0]];
    for (int i = 0; i < nbad; i++) {
        cells[i] = (CcSnapshotCell){.cell_id = bad[i].id,
                                    .seq_start = bad[i].seq_start,
                                    .first = bad[i].first,
                                    .count = bad[i].count,
                                    .n_features = F,
                                    .values = vals};
        assert_int_equal(cc_snapshot_write_cell(sw, &cells[i]), 0);
    }
    const CcSnapshotPosition neg[1] = {{"kpis", -1, 5}};
    assert_int_equal(cc_snapshot_write_positions(sw, neg, 1), 0);
    assert_int_equal(cc_snapshot_write_engine_cell(sw, ids[1], w.cell[1], w.ac[1], NULL, 0), 0);
    assert_int_equal(cc_snapshot_write_finish(&sw, err, sizeof err), 0);
    write_seed(w.path, "crafted.snap");

    CcSnapshotReader *rd = NULL;
    assert_int_equal(cc_snapshot_read_open(&rd, w.path, 0, NULL, err, sizeof err), 0);
    CcSnapshotRecord rec;
    assert_int_equal(cc_snapshot_read_next(rd, &rec, err, sizeof err), 1);
    assert_string_equal(rec.cell.cell_id, ids[0]);
    for (int i = 0; i < nbad; i++) {
        err[0] = 0;
        assert_int_equal(cc_snapshot_read_next(rd, &rec, err, sizeof err), -EBADMSG);
        if (!strstr(err, bad[i].why))
            fail_msg("record %d: \"%s\" does not say \"%s\"", i, err, bad[i].why);
    }
    assert_int_equal(cc_snapshot_read_next(rd, &rec, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "partition -1"));
    assert_int_equal(cc_snapshot_read_next(rd, &rec, err, sizeof err), 1);
    assert_string_equal(rec.cell.cell_id, ids[1]);
    assert_int_equal(cc_snapshot_read_next(rd, &rec, err, sizeof err), 0);
    cc_snapshot_read_close(&rd);

    /* the restore path refuses the spans by itself (a host that skips the reader) */
    for (int i = 0; i < 4; i++) {
        CcSnapshotCell c = cells[i];
        if (i == 1)
            c.first = c.seq_start = ((int64_t)1 << 40) - 1; /* past cc_cell_restore's bound */
        assert_int_equal(cc_snapshot_restore_engine_cell(&c, w.cell[2], NULL, err, sizeof err),
                         -EINVAL);
        assert_non_null(strstr(err, "cannot restore"));
    }
    /* an anomaly length of 0xFFFFFFFF: "length + 4" wrapped in 32 bits and the reader
     * stepped 4 GiB past its buffer (found by fuzz_snapshot) */
    {
        long n;
        uint8_t *b = slurp(w.path, &n); /* its header, then a hand-made record and end */
        uint8_t f[212 + 12 + 35 + 24];
        memcpy(f, b, 212);
        uint32_t type = CC_SNAP_CELL, len = 35, al = 0xFFFFFFFFu, el = 0, crc;
        int64_t none = -1;
        int32_t zero = 0, F3 = F;
        uint8_t *q = f + 212;
        memcpy(q, &type, 4), memcpy(q + 4, &len, 4), memcpy(q + 8, "\001\000x", 3);
        memcpy(q + 11, &none, 8), memcpy(q + 19, &none, 8), memcpy(q + 27, &zero, 4);
        memcpy(q + 31, &F3, 4), memcpy(q + 35, &al, 4), memcpy(q + 39, &el, 4);
        crc = cc_crc32(0, q, 8 + 35);
        memcpy(q + 43, &crc, 4);
        uint8_t *end = q + 47;
        uint64_t one = 1;
        uint32_t etype = CC_SNAP_END, elen = 12, fcrc = cc_crc32(0, f, (size_t)(end - f));
        memcpy(end, &etype, 4), memcpy(end + 4, &elen, 4), memcpy(end + 8, &one, 8);
        memcpy(end + 16, &fcrc, 4);
        crc = cc_crc32(0, end, 20);
        memcpy(end + 20, &crc, 4);
        spit(w.path, f, (long)sizeof f);
        free(b);
        assert_int_equal(cc_snapshot_read_open(&rd, w.path, 0, NULL, err, sizeof err), 0);
        assert_int_equal(cc_snapshot_read_next(rd, &rec, err, sizeof err), -EBADMSG);
        assert_non_null(strstr(err, "malformed record"));
        assert_int_equal(cc_snapshot_read_next(rd, &rec, err, sizeof err), 0);
        cc_snapshot_read_close(&rd);
    }
    assert_int_equal(cc_cell_restore(w.cell[2], big, big, 10, vals), -EINVAL);
    assert_int_equal(cc_cell_restore(w.cell[2], INT64_MAX, INT64_MAX, 1, vals), -EINVAL);
    assert_int_equal(cc_cell_restore(w.cell[2], 100, 100, 10, vals), 0); /* still usable */
    world_close(&w, 1);
    cc_model_close(&m);
}

/* Only a regular file is read: opening a FIFO for reading waited for a writer, and the
 * daemon hung at start before it listened (hostile-input probe, issue 29). */
static void test_not_a_regular_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/cc_test_snapshot_fifo_XXXXXX", p[96], err[256] = "";
    CcSnapshotReader *r = NULL;
    CcSnapshotInfo info;
    assert_true(mkdtemp(dir) != NULL);
    snprintf(p, sizeof p, "%s/state.snap", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(cc_snapshot_read_open(&r, p, 0, &info, err, sizeof err), -EINVAL);
    assert_null(r);
    assert_non_null(strstr(err, "not a regular file"));
    assert_int_equal(cc_snapshot_read_open(&r, "/dev/null", 0, &info, err, sizeof err), -EINVAL);
    assert_int_equal(cc_snapshot_read_open(&r, dir, 0, &info, err, sizeof err), -EINVAL);
    remove(p);
    rmdir(dir);
}

/* Every step field of a restored anomaly state is bounded by the cell's last step: a record
 * whose steps lie past it (offset 77 = the anomaly's last step set to 2^62: UBSan signed
 * overflows in the DQ and lifecycle code, the cell never alerted again) is refused, by the
 * plain load and by the snapshot restore; and a refused record leaves the cell as it was,
 * ring included (it was restored before the anomaly state was refused: half a cell). */
static void test_anomaly_steps_bounded(void **state)
{
    (void)state;
    World w, r;
    CcModel *m = small_model();
    world_open(&w, m);
    world_open(&r, m);
    run_steps(&w, 1000, 80);
    int64_t first, last;
    cc_cell_span(w.cell[0], &first, &last);
    long n = cc_anomaly_cell_save(w.ac[0], NULL, 0);
    assert_true(n > 0);
    uint8_t *good = malloc((size_t)n), *b = malloc((size_t)n);
    assert_int_equal(cc_anomaly_cell_save(w.ac[0], good, (size_t)n), n);
    char err[256];
    /* magic, version, F (12 bytes), the id (CC_ANOMALY_CELL_ID_MAX + 1), then last_step,
     * exp_step, score_step, score, over and crit bits, win_step, zero_run, the anomaly
     * episode (start, resolved) */
    const size_t at = 12 + CC_ANOMALY_CELL_ID_MAX + 1;
    int64_t own;
    memcpy(&own, good + at, 8);
    assert_int_equal(own, last); /* the layout this test writes into */
    const struct {
        size_t off;
        int64_t v;
    } bad[] = {
        {0, (int64_t)1 << 62},  /* last_step */
        {0, last + 1},          /* last_step past the ring's */
        {0, -7},                /* last_step */
        {8, (int64_t)1 << 62},  /* exp_step */
        {16, (int64_t)1 << 62}, /* score_step */
        {48, (int64_t)1 << 62}, /* win_step */
        {60, (int64_t)1 << 62}, /* anom.start */
        {68, INT64_MAX},        /* anom.resolved */
        {60, -5},               /* anom.start */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memcpy(b, good, (size_t)n);
        memcpy(b + at + bad[i].off, &bad[i].v, 8);
        int load = cc_anomaly_cell_load_at(r.ac[0], b, (size_t)n, last, err, sizeof err);
        if (load != -EINVAL)
            fail_msg("field at %zu = %lld: load_at %d", at + bad[i].off, (long long)bad[i].v, load);
        if (bad[i].v != last + 1) /* alone, the record's own last step bounds it */
            assert_int_equal(cc_anomaly_cell_load(r.ac[0], b, (size_t)n, err, sizeof err), -EINVAL);
    }
    /* a count out of its range: zero_run, then the anomaly episode's clear run, severity */
    static const size_t counts[] = {56, 76, 80};
    for (size_t i = 0; i < 3; i++) {
        memcpy(b, good, (size_t)n);
        int32_t v = i == 2 ? 7 : -1;
        memcpy(b + at + counts[i], &v, 4);
        assert_int_equal(cc_anomaly_cell_load_at(r.ac[0], b, (size_t)n, last, err, sizeof err),
                         -EINVAL);
    }
    /* the record as written loads, against the ring and alone */
    assert_int_equal(cc_anomaly_cell_load_at(r.ac[0], good, (size_t)n, last, err, sizeof err), 0);
    assert_int_equal(cc_anomaly_cell_load(r.ac[0], good, (size_t)n, err, sizeof err), 0);

    /* through the state record: refused as a whole, the target cell untouched */
    CcSnapshotInfo info;
    cc_snapshot_info_for_model(&info, &m->hp);
    CcSnapshotWriter *enc = NULL;
    CcSnapshotReader *dec = NULL;
    assert_int_equal(cc_snapshot_encoder_open(&enc, &info), 0);
    assert_int_equal(cc_snapshot_decoder_open(&dec, &info), 0);
    const void *buf;
    size_t len;
    assert_int_equal(
        cc_snapshot_encode_engine_cell(enc, ids[0], w.cell[0], w.ac[0], NULL, 0, &buf, &len), 0);
    CcSnapshotRecord rec;
    assert_int_equal(cc_snapshot_decode(dec, buf, len, &rec, err, sizeof err), 0);
    CcSnapshotCell sc = rec.cell;
    {
        uint8_t *crafted = malloc(len);
        memcpy(crafted, buf, len);
        int64_t huge62 = (int64_t)1 << 62;
        /* frame (24) | id length (2) | id | seq_start, first, count, F | values | length */
        size_t anomaly_at =
            24 + 2 + strlen(sc.cell_id) + 24 + (size_t)sc.count * (size_t)sc.n_features * 4 + 4;
        assert_memory_equal(crafted + anomaly_at, sc.anomaly, sc.anomaly_len);
        memcpy(crafted + anomaly_at + at, &huge62, 8);
        write_state_seed("anomaly_step_2_62.bin", 0, crafted, len);
        free(crafted);
    }
    memcpy(b, sc.anomaly, sc.anomaly_len);
    int64_t huge = (int64_t)1 << 62;
    memcpy(b + at, &huge, 8);
    sc.anomaly = b;
    int64_t f0, l0;
    cc_cell_span(r.cell[1], &f0, &l0);
    assert_int_equal(l0, -1);
    long before = cc_anomaly_cell_save(r.ac[1], NULL, 0);
    uint8_t *snap = malloc((size_t)before), *after = malloc((size_t)before);
    cc_anomaly_cell_save(r.ac[1], snap, (size_t)before);
    assert_int_equal(cc_snapshot_restore_engine_cell(&sc, r.cell[1], r.ac[1], err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "past the cell's last step"));
    cc_cell_span(r.cell[1], &f0, &l0);
    assert_int_equal(l0, -1); /* the ring was not restored */
    assert_int_equal(cc_anomaly_cell_save(r.ac[1], after, (size_t)before), before);
    assert_memory_equal(snap, after, (size_t)before);
    /* the same record unmodified restores */
    assert_int_equal(
        cc_snapshot_restore_engine_cell(&rec.cell, r.cell[1], r.ac[1], err, sizeof err), 0);
    cc_cell_span(r.cell[1], &f0, &l0);
    assert_int_equal(l0, last);
    free(snap);
    free(after);
    free(good);
    free(b);
    cc_snapshot_encoder_close(&enc);
    cc_snapshot_read_close(&dec);
    world_close(&w, 1);
    world_close(&r, 1);
    cc_model_close(&m);
}

/* The daemon's checks of a record before it restores it (daemon/state.c), the ones the
 * library cannot make: a state-topic record keyed `zz-1` that carries c2's state used to
 * replace the real c2 (its forecast mean became the forged values); one read from another
 * partition than the one it names; steps that end past what ingest accepts (the clock +
 * ingest.max_future_s: the cell's real records were all late after the restart); extra
 * fields out of range. */
static void test_daemon_record_checks(void **state)
{
    (void)state;
    const int64_t S = 900, now = 1764288000, max_ts = now + 900;
    float vals[4 * 3] = {0};
    CcdCellRecordExtra ex = {0, 2, now / S - 3, now - 10, 4, 4};
    CcSnapshotCell sc = {.cell_id = "c2",
                         .seq_start = now / S - 3,
                         .first = now / S - 3,
                         .count = 4,
                         .n_features = 3,
                         .values = vals,
                         .extra = (const uint8_t *)&ex,
                         .extra_len = sizeof ex};
    char err[512];
    assert_int_equal(ccd_cell_record_check(&sc, "c2", 2, S, max_ts, err, sizeof err), 0);
    assert_int_equal(ccd_cell_record_check(&sc, NULL, -1, S, max_ts, err, sizeof err), 0);
    /* the key is not the cell it holds */
    assert_int_equal(ccd_cell_record_check(&sc, "zz-1", 2, S, max_ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "keyed 'zz-1' but holds cell 'c2'"));
    /* read from another partition than its own */
    assert_int_equal(ccd_cell_record_check(&sc, "c2", 3, S, max_ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "partition 3"));
    /* the last step ingest accepts is that of max_ts; one more is refused, snapshot or not */
    sc.first = sc.seq_start = max_ts / S - 3;
    ex.first_step = sc.first;
    assert_int_equal(ccd_cell_record_check(&sc, NULL, -1, S, max_ts, err, sizeof err), 0);
    sc.first = sc.seq_start = max_ts / S - 2;
    assert_int_equal(ccd_cell_record_check(&sc, NULL, -1, S, max_ts, err, sizeof err), -ERANGE);
    assert_non_null(strstr(err, "ingest.max_future_s"));
    sc.first = sc.seq_start = 281558111 - 3; /* the probe's: ends at step 281558111 */
    assert_int_equal(ccd_cell_record_check(&sc, "c2", 2, S, max_ts, err, sizeof err), -ERANGE);
    /* extra fields out of range */
    sc.first = sc.seq_start = now / S - 3;
    const CcdCellRecordExtra good = {0, 2, now / S - 3, now - 10, 4, 4};
    const CcdCellRecordExtra bad[] = {
        {0, -2, now / S - 3, now - 10, 4, 4},  /* partition */
        {-5, 2, now / S - 3, now - 10, 4, 4},  /* topic */
        {0, 2, now / S + 1, now - 10, 4, 4},   /* first step after the last */
        {0, 2, -9, now - 10, 4, 4},            /* first step */
        {0, 2, now / S - 3, max_ts + 1, 4, 4}, /* last record time ahead of the clock */
        {0, 2, now / S - 3, -1, 4, 4},         /* last record time */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ex = bad[i];
        if (ccd_cell_record_check(&sc, NULL, -1, S, max_ts, err, sizeof err) != -EINVAL)
            fail_msg("extra %zu accepted", i);
    }
    ex = good;
    sc.extra_len = 4; /* a state record must carry them */
    assert_int_equal(ccd_cell_record_check(&sc, "c2", 2, S, max_ts, err, sizeof err), -EINVAL);
    assert_int_equal(ccd_cell_record_check(&sc, NULL, -1, S, max_ts, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_not_a_regular_file),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_atomic_replace_and_abort),
        cmocka_unit_test(test_crafted_records),
        cmocka_unit_test(test_state_records),
        cmocka_unit_test(test_anomaly_steps_bounded),
        cmocka_unit_test(test_daemon_record_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
