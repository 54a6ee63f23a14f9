/*
 * cc_snapshot.c — atomic, checksummed snapshot files of per-cell state (see cc_snapshot.h
 * for the format). The writer streams through stdio into a temp file; the reader verifies
 * the whole file in a first pass and hands out records in a second.
 */
#include "cc_snapshot.h"

#include "cc_kpi.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "snapshot format is little-endian");

static const uint8_t MAGIC[8] = {'C', 'C', 'S', 'N', 'A', 'P', '\r', '\n'};
#define DESC_LEN 160
#define HEADER_SIZE (8 + 4 + 4 + 8 + 8 + DESC_LEN + 4 + 4 + 8 + 4)
#define MAX_RECORD (1u << 30) /* a record longer than 1 GiB is corruption */
#define MEM_MAGIC 0x31534343u /* "CCS1": a state record in memory */

/* ------------------------------------------------------------------ CRC32, hash */

/* Slicing-by-8 tables of the reflected IEEE polynomial: table[0] is the classic bytewise
 * table, table[k][i] the CRC of byte i followed by k zero bytes. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT; /* daemon threads checksum concurrently */

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xff];
}

uint32_t cc_crc32(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = buf;
    crc = ~crc;
    for (; len >= 8; len -= 8, p += 8) { /* little-endian: the low word holds bytes 0..3 */
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^
              crc_table[2][(hi >> 8) & 0xff] ^ crc_table[1][(hi >> 16) & 0xff] ^
              crc_table[0][hi >> 24];
    }
    for (; len; len--, p++)
        crc = crc_table[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint64_t cc_snapshot_model_hash(const CcHparams *hp)
{
    int64_t v[] = {hp->n_features, hp->patch_len,    hp->n_patches,  hp->norm_window,
                   hp->d_model,    hp->n_heads,      hp->n_layers,   hp->d_ff,
                   hp->horizon,    hp->step_seconds, hp->tz_offset_s};
    uint64_t h = cc_fnv1a(CC_FNV1A_SEED, v, sizeof v);
    for (int f = 0; f < hp->n_features && f < CC_MAX_FEATURES; f++)
        h = cc_fnv1a(h, hp->features[f], strlen(hp->features[f]) + 1);
    return h ? h : 1; /* 0 means "any" to the reader */
}

void cc_snapshot_info_for_model(CcSnapshotInfo *info, const CcHparams *hp)
{
    memset(info, 0, sizeof *info);
    info->model_hash = cc_snapshot_model_hash(hp);
    info->n_features = hp->n_features;
    info->step_seconds = hp->step_seconds;
    snprintf(info->model_desc, sizeof info->model_desc,
             "%.40s F=%d S=%" PRId64 " P=%d N=%d M=%d D=%d H=%d L=%d FF=%d HZ=%d",
             hp->name[0] ? hp->name : "model", hp->n_features, hp->step_seconds, hp->patch_len,
             hp->n_patches, hp->norm_window, hp->d_model, hp->n_heads, hp->n_layers, hp->d_ff,
             hp->horizon);
}

/* ------------------------------------------------------------------ writer */

struct CcSnapshotWriter {
    FILE *f;
    char *path, *tmp;
    uint32_t file_crc; ///< CRC of every byte written so far
    uint64_t n_records;
    int failed; ///< an earlier write failed: finish refuses
    int F;
    uint8_t *scratch; ///< record payload under construction
    size_t scap, slen;
    float *hist; ///< cc_cell_history scratch
    size_t hist_cap;
    uint64_t model_hash; ///< memory mode (no f): the record's header
    int64_t S;
    uint8_t *rec; ///< memory mode: the last record, framed (cc_snapshot_encode_engine_cell)
    size_t rec_cap, rec_len;
};

static int wr(CcSnapshotWriter *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n) {
        w->failed = 1;
        return -EIO;
    }
    w->file_crc = cc_crc32(w->file_crc, p, n);
    return 0;
}

static int sc_reserve(CcSnapshotWriter *w, size_t more)
{
    if (w->slen + more <= w->scap)
        return 0;
    size_t cap = w->scap ? w->scap : 4096;
    while (cap < w->slen + more)
        cap *= 2;
    uint8_t *p = realloc(w->scratch, cap);
    if (!p)
        return -ENOMEM;
    w->scratch = p;
    w->scap = cap;
    return 0;
}

static void sc_put(CcSnapshotWriter *w, const void *p, size_t n)
{
    memcpy(w->scratch + w->slen, p, n); /* reserved by the caller */
    w->slen += n;
}

/* Writes scratch[0..slen) as one record of `type`. */
/* Memory mode: frames scratch as one state record (cc_snapshot.h: MEM_MAGIC | model hash |
 * F | S | cell payload | CRC32 of all before) into w->rec. */
static int put_mem_record(CcSnapshotWriter *w)
{
    size_t n = 4 + 8 + 4 + 8 + w->slen + 4;
    if (n > w->rec_cap) {
        uint8_t *p = realloc(w->rec, n);
        if (!p)
            return -ENOMEM;
        w->rec = p;
        w->rec_cap = n;
    }
    uint32_t magic = MEM_MAGIC, F = (uint32_t)w->F;
    uint8_t *o = w->rec;
    memcpy(o, &magic, 4);
    memcpy(o + 4, &w->model_hash, 8);
    memcpy(o + 12, &F, 4);
    memcpy(o + 16, &w->S, 8);
    memcpy(o + 24, w->scratch, w->slen);
    uint32_t crc = cc_crc32(0, o, 24 + w->slen);
    memcpy(o + 24 + w->slen, &crc, 4);
    w->rec_len = n;
    w->slen = 0;
    return 0;
}

static int put_record(CcSnapshotWriter *w, uint32_t type)
{
    if (w->failed)
        return -EIO;
    if (w->slen > MAX_RECORD)
        return -EINVAL;
    if (!w->f)
        return type == CC_SNAP_CELL ? put_mem_record(w) : -EINVAL;
    uint32_t len = (uint32_t)w->slen;
    uint32_t crc = cc_crc32(0, &type, 4);
    crc = cc_crc32(crc, &len, 4);
    crc = cc_crc32(crc, w->scratch, w->slen);
    int rc = wr(w, &type, 4);
    if (!rc)
        rc = wr(w, &len, 4);
    if (!rc)
        rc = wr(w, w->scratch, w->slen);
    if (!rc)
        rc = wr(w, &crc, 4);
    if (!rc && type != CC_SNAP_END)
        w->n_records++;
    w->slen = 0;
    return rc;
}

static void writer_free(CcSnapshotWriter *w)
{
    if (w->f)
        fclose(w->f);
    free(w->path);
    free(w->tmp);
    free(w->scratch);
    free(w->hist);
    free(w->rec);
    free(w);
}

int cc_snapshot_write_open(CcSnapshotWriter **out, const char *path, const CcSnapshotInfo *info,
                           char *err, size_t errlen)
{
    *out = NULL;
    int rc = 0;
    if (!path || !*path || !info || info->n_features < 1 || info->n_features > CC_MAX_FEATURES)
        return cc_errf(err, errlen, -EINVAL, "snapshot: bad path or info");
    CcSnapshotWriter *w = calloc(1, sizeof *w);
    if (!w)
        return cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
    w->F = info->n_features;
    size_t n = strlen(path) + 32;
    w->path = strdup(path);
    w->tmp = malloc(n);
    if (!w->path || !w->tmp) {
        rc = cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
        goto error;
    }
    snprintf(w->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
        rc = cc_errf(err, errlen, -EIO, "snapshot: cannot create %s: %s", w->tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto error;
    }
    uint8_t h[HEADER_SIZE];
    memset(h, 0, sizeof h);
    uint32_t ver = CC_SNAPSHOT_VERSION, hsz = HEADER_SIZE, F = (uint32_t)info->n_features, zero = 0;
    int64_t created = info->created_s ? info->created_s : (int64_t)time(NULL);
    size_t o = 0;
#define H(v) (memcpy(h + o, &(v), sizeof(v)), o += sizeof(v))
    memcpy(h, MAGIC, 8);
    o = 8;
    H(ver);
    H(hsz);
    H(created);
    H(info->model_hash);
    snprintf((char *)h + o, DESC_LEN, "%s", info->model_desc);
    o += DESC_LEN;
    H(F);
    H(zero);
    H(info->step_seconds);
    uint32_t hcrc = cc_crc32(0, h, o);
    H(hcrc);
#undef H
    if (wr(w, h, o)) {
        rc = cc_errf(err, errlen, -EIO, "snapshot: cannot write %s: %s", w->tmp, strerror(errno));
        goto error;
    }
    *out = w;
    return 0;
error:
    if (w->f) {
        fclose(w->f);
        w->f = NULL;
        unlink(w->tmp);
    }
    writer_free(w);
    return rc;
}

int cc_snapshot_write_cell(CcSnapshotWriter *w, const CcSnapshotCell *c)
{
    size_t idl = c->cell_id ? strlen(c->cell_id) : 0;
    if (!idl || idl > 255 || c->count < 0 || c->n_features != w->F || (c->count && !c->values) ||
        c->anomaly_len > MAX_RECORD || c->extra_len > MAX_RECORD)
        return -EINVAL;
    size_t nv = (size_t)c->count * (size_t)w->F;
    if (sc_reserve(w, 2 + idl + 8 + 8 + 4 + 4 + nv * 4 + 4 + c->anomaly_len + 4 + c->extra_len))
        return -ENOMEM;
    uint16_t l16 = (uint16_t)idl;
    int32_t count = c->count, F = w->F;
    uint32_t al = (uint32_t)c->anomaly_len, el = (uint32_t)c->extra_len;
    sc_put(w, &l16, 2);
    sc_put(w, c->cell_id, idl);
    sc_put(w, &c->seq_start, 8);
    sc_put(w, &c->first, 8);
    sc_put(w, &count, 4);
    sc_put(w, &F, 4);
    if (nv)
        sc_put(w, c->values, nv * 4);
    sc_put(w, &al, 4);
    if (al)
        sc_put(w, c->anomaly, al);
    sc_put(w, &el, 4);
    if (el)
        sc_put(w, c->extra, el);
    return put_record(w, CC_SNAP_CELL);
}

int cc_snapshot_write_positions(CcSnapshotWriter *w, const CcSnapshotPosition *p, int n)
{
    if (n < 0)
        return -EINVAL;
    uint32_t un = (uint32_t)n;
    if (sc_reserve(w, 4))
        return -ENOMEM;
    sc_put(w, &un, 4);
    for (int i = 0; i < n; i++) {
        size_t tl = strnlen(p[i].topic, CC_SNAP_TOPIC_MAX);
        if (!tl || tl >= CC_SNAP_TOPIC_MAX)
            return -EINVAL;
        if (sc_reserve(w, 2 + tl + 4 + 8))
            return -ENOMEM;
        uint16_t l16 = (uint16_t)tl;
        sc_put(w, &l16, 2);
        sc_put(w, p[i].topic, tl);
        sc_put(w, &p[i].partition, 4);
        sc_put(w, &p[i].offset, 8);
    }
    return put_record(w, CC_SNAP_POSITIONS);
}

int cc_snapshot_write_engine_cell(CcSnapshotWriter *w, const char *cell_id, const CcCell *c,
                                  const CcAnomalyCell *ac, const void *extra, size_t extra_len)
{
    int64_t first, last;
    cc_cell_span(c, &first, &last);
    int count = first < 0 ? 0 : (int)(last - first + 1);
    size_t need = (size_t)count * (size_t)w->F;
    if (need > w->hist_cap) {
        float *p = realloc(w->hist, need * sizeof *p);
        if (!p)
            return -ENOMEM;
        w->hist = p;
        w->hist_cap = need;
    }
    if (count && cc_cell_history(c, first, count, w->hist))
        return -EINVAL;
    uint8_t *ab = NULL;
    long al = 0;
    if (ac) {
        al = cc_anomaly_cell_save(ac, NULL, 0);
        if (al < 0 || !(ab = malloc((size_t)al)))
            return -ENOMEM;
        al = cc_anomaly_cell_save(ac, ab, (size_t)al);
    }
    CcSnapshotCell rec = {.cell_id = cell_id,
                          .seq_start = count ? cc_cell_seq_start(c) : -1,
                          .first = first,
                          .count = count,
                          .n_features = w->F,
                          .values = w->hist,
                          .anomaly = ab,
                          .anomaly_len = (size_t)al,
                          .extra = extra,
                          .extra_len = extra ? extra_len : 0};
    int rc = cc_snapshot_write_cell(w, &rec);
    free(ab);
    return rc;
}

int cc_snapshot_write_finish(CcSnapshotWriter **wp, char *err, size_t errlen)
{
    CcSnapshotWriter *w = *wp;
    *wp = NULL;
    int rc = 0;
    if (w->failed) {
        rc = cc_errf(err, errlen, -EIO, "snapshot: an earlier write to %s failed", w->tmp);
        goto error;
    }
    uint32_t file_crc = w->file_crc;
    w->slen = 0;
    if (sc_reserve(w, 12)) {
        rc = cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
        goto error;
    }
    sc_put(w, &w->n_records, 8);
    sc_put(w, &file_crc, 4);
    if (put_record(w, CC_SNAP_END) || fflush(w->f) || fsync(fileno(w->f))) {
        rc = cc_errf(err, errlen, -EIO, "snapshot: cannot write %s: %s", w->tmp, strerror(errno));
        goto error;
    }
    int fc = fclose(w->f);
    w->f = NULL;
    if (fc) {
        rc = cc_errf(err, errlen, -EIO, "snapshot: cannot close %s: %s", w->tmp, strerror(errno));
        goto error;
    }
    if (rename(w->tmp, w->path)) {
        rc = cc_errf(err, errlen, -EIO, "snapshot: cannot rename %s to %s: %s", w->tmp, w->path,
                     strerror(errno));
        goto error;
    }
    if (cc_fsync_dir_of(w->path))
        rc = cc_errf(err, errlen, -EIO, "snapshot: %s written, but fsync of its directory failed",
                     w->path); /* renamed already: the file is in place */
    writer_free(w);
    return rc;
error:
    if (w->f) {
        fclose(w->f);
        w->f = NULL;
    }
    unlink(w->tmp);
    writer_free(w);
    return rc;
}

void cc_snapshot_write_abort(CcSnapshotWriter **wp)
{
    CcSnapshotWriter *w = wp ? *wp : NULL;
    if (!w)
        return;
    *wp = NULL;
    if (w->f) {
        fclose(w->f);
        w->f = NULL;
    }
    unlink(w->tmp);
    writer_free(w);
}

int cc_snapshot_encoder_open(CcSnapshotWriter **out, const CcSnapshotInfo *info)
{
    *out = NULL;
    if (!info || info->n_features < 1 || info->n_features > CC_MAX_FEATURES)
        return -EINVAL;
    CcSnapshotWriter *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->F = info->n_features;
    w->model_hash = info->model_hash;
    w->S = info->step_seconds;
    *out = w;
    return 0;
}

int cc_snapshot_encode_engine_cell(CcSnapshotWriter *w, const char *cell_id, const CcCell *c,
                                   const CcAnomalyCell *ac, const void *extra, size_t extra_len,
                                   const void **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (w->f)
        return -EINVAL;
    int rc = cc_snapshot_write_engine_cell(w, cell_id, c, ac, extra, extra_len);
    if (rc)
        return rc;
    *buf = w->rec;
    *len = w->rec_len;
    return 0;
}

void cc_snapshot_encoder_close(CcSnapshotWriter **w)
{
    if (w && *w) {
        writer_free(*w);
        *w = NULL;
    }
}

/* ------------------------------------------------------------------ reader */

struct CcSnapshotReader {
    FILE *f;
    char *path;
    int F;
    int64_t step_max; ///< the last step a cell may hold (CC_SNAP_TIME_MAX / S)
    long data_start;
    uint8_t *buf; ///< current record payload
    size_t cap;
    CcSnapshotPosition *pos;
    float *vals; ///< aligned copy of the current cell's values
    size_t vcap; ///< bytes
    int done;
    uint64_t model_hash; ///< decoder (no f): what its records must have been written for
    int64_t S;
};

static void reader_free(CcSnapshotReader *r)
{
    if (r->f)
        fclose(r->f);
    free(r->path);
    free(r->buf);
    free(r->pos);
    free(r->vals);
    free(r);
}

/* 1 if a cell record's span is impossible: an empty cell is (-1, -1, 0); otherwise
 * 0 <= seq_start <= first and first + count - 1 <= step_max, computed without overflow. */
static int bad_span(int64_t seq_start, int64_t first, int32_t count, int64_t step_max)
{
    if (count == 0)
        return seq_start != -1 || first != -1;
    return count < 0 || seq_start < 0 || seq_start > first || first > step_max - (count - 1);
}

/* Reads one record header + payload + CRC into r->buf. 1 ok, 0 clean EOF, <0 error. */
static int read_record(CcSnapshotReader *r, uint32_t *type, uint32_t *len, uint32_t *file_crc,
                       char *err, size_t errlen)
{
    uint32_t th[2];
    long at = ftell(r->f);
    size_t got = fread(th, 1, 8, r->f);
    if (got == 0 && feof(r->f))
        return 0;
    if (got != 8)
        return cc_errf(err, errlen, -EBADMSG,
                       "snapshot %s: truncated at byte %ld (partial record header)", r->path, at);
    *type = th[0];
    *len = th[1];
    if (*len > MAX_RECORD)
        return cc_errf(err, errlen, -EBADMSG,
                       "snapshot %s: corrupted record at byte %ld (length %u)", r->path, at, *len);
    if (*len + 4 > r->cap) {
        uint8_t *p = realloc(r->buf, *len + 4);
        if (!p)
            return cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
        r->buf = p;
        r->cap = *len + 4;
    }
    if (fread(r->buf, 1, *len + 4, r->f) != *len + 4)
        return cc_errf(err, errlen, -EBADMSG,
                       "snapshot %s: truncated at byte %ld (record of %u bytes cut short)", r->path,
                       at, *len);
    uint32_t crc = cc_crc32(0, th, 8);
    crc = cc_crc32(crc, r->buf, *len);
    uint32_t want;
    memcpy(&want, r->buf + *len, 4);
    if (crc != want)
        return cc_errf(err, errlen, -EBADMSG,
                       "snapshot %s: corrupted: CRC mismatch in record at byte %ld", r->path, at);
    if (file_crc) {
        *file_crc = cc_crc32(*file_crc, th, 8);
        *file_crc = cc_crc32(*file_crc, r->buf, *len + 4);
    }
    return 1;
}

int cc_snapshot_read_open(CcSnapshotReader **out, const char *path, uint64_t expect_hash,
                          CcSnapshotInfo *info, char *err, size_t errlen)
{
    *out = NULL;
    int rc = 0;
    CcSnapshotReader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
    }
    /* O_NONBLOCK: opening a FIFO for reading waited for a writer (the daemon hung before
     * it listened); only a regular file is read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        rc = cc_errf(err, errlen, errno == ENOENT ? -ENOENT : -EIO, "snapshot %s: %s", path,
                     strerror(errno));
        goto error;
    }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        rc = cc_errf(err, errlen, -EINVAL, "snapshot %s: not a regular file", path);
        goto error;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) || !(r->f = fdopen(fd, "rb"))) {
        rc = cc_errf(err, errlen, -EIO, "snapshot %s: %s", path, strerror(errno));
        close(fd);
        goto error;
    }
    uint8_t h[HEADER_SIZE];
    size_t got = fread(h, 1, sizeof h, r->f);
    if (got >= 8 && memcmp(h, MAGIC, 8)) {
        rc =
            cc_errf(err, errlen, -EINVAL, "snapshot %s: not a cellcast snapshot (bad magic)", path);
        goto error;
    }
    if (got < 16) {
        rc = cc_errf(err, errlen, -EBADMSG, "snapshot %s: truncated (%zu bytes, no header)", path,
                     got);
        goto error;
    }
    uint32_t ver, hsz;
    memcpy(&ver, h + 8, 4);
    memcpy(&hsz, h + 12, 4);
    if (ver != CC_SNAPSHOT_VERSION || hsz != HEADER_SIZE) {
        rc = cc_errf(err, errlen, -EPROTONOSUPPORT,
                     "snapshot %s: format version %u (header %u bytes); this build reads version "
                     "%d only",
                     path, ver, hsz, CC_SNAPSHOT_VERSION);
        goto error;
    }
    if (got < HEADER_SIZE) {
        rc = cc_errf(err, errlen, -EBADMSG, "snapshot %s: truncated in the header (%zu bytes)",
                     path, got);
        goto error;
    }
    uint32_t hcrc;
    memcpy(&hcrc, h + HEADER_SIZE - 4, 4);
    if (cc_crc32(0, h, HEADER_SIZE - 4) != hcrc) {
        rc = cc_errf(err, errlen, -EBADMSG, "snapshot %s: corrupted header (CRC mismatch)", path);
        goto error;
    }
    CcSnapshotInfo in;
    memset(&in, 0, sizeof in);
    size_t o = 16;
    memcpy(&in.created_s, h + o, 8);
    o += 8;
    memcpy(&in.model_hash, h + o, 8);
    o += 8;
    memcpy(in.model_desc, h + o, DESC_LEN);
    in.model_desc[DESC_LEN - 1] = 0;
    o += DESC_LEN;
    uint32_t F;
    memcpy(&F, h + o, 4);
    o += 8;
    memcpy(&in.step_seconds, h + o, 8);
    in.n_features = (int)F;
    in.version = ver;
    if (F < 1 || F > CC_MAX_FEATURES) {
        rc = cc_errf(err, errlen, -EBADMSG, "snapshot %s: corrupted header (F = %u)", path, F);
        goto error;
    }
    if (in.step_seconds < 1 || in.step_seconds > CC_SNAP_TIME_MAX) {
        rc = cc_errf(err, errlen, -EBADMSG, "snapshot %s: corrupted header (step %" PRId64 " s)",
                     path, in.step_seconds);
        goto error;
    }
    r->F = (int)F;
    r->step_max = CC_SNAP_TIME_MAX / in.step_seconds;
    r->data_start = HEADER_SIZE;

    /* Verification pass: every record's CRC, then the end record and the file CRC. */
    uint32_t fcrc = cc_crc32(0, h, HEADER_SIZE);
    uint64_t n = 0;
    for (;;) {
        uint32_t type, len, before = fcrc;
        int k = read_record(r, &type, &len, &fcrc, err, errlen);
        if (k < 0) {
            rc = k;
            goto error;
        }
        if (k == 0) {
            rc = cc_errf(err, errlen, -EBADMSG,
                         "snapshot %s: truncated (no end record after %" PRIu64 " records)", path,
                         n);
            goto error;
        }
        if (type == CC_SNAP_END) {
            uint64_t want_n;
            uint32_t want_crc;
            if (len != 12) {
                rc = cc_errf(err, errlen, -EBADMSG, "snapshot %s: corrupted end record", path);
                goto error;
            }
            memcpy(&want_n, r->buf, 8);
            memcpy(&want_crc, r->buf + 8, 4);
            if (want_n != n || want_crc != before) {
                rc = cc_errf(err, errlen, -EBADMSG,
                             "snapshot %s: corrupted (file CRC or record count mismatch: %" PRIu64
                             " records, end says %" PRIu64 ")",
                             path, n, want_n);
                goto error;
            }
            if (fgetc(r->f) != EOF) {
                rc = cc_errf(err, errlen, -EBADMSG,
                             "snapshot %s: corrupted (bytes after the end record)", path);
                goto error;
            }
            break;
        }
        if (type != CC_SNAP_CELL && type != CC_SNAP_POSITIONS) {
            rc = cc_errf(err, errlen, -EBADMSG, "snapshot %s: unknown record type %u", path, type);
            goto error;
        }
        n++;
    }
    in.n_records = n;
    if (expect_hash && in.model_hash != expect_hash) {
        rc = cc_errf(err, errlen, -ESTALE,
                     "snapshot %s: written for another model (%s, hash %016" PRIx64
                     "); the running model has hash %016" PRIx64,
                     path, in.model_desc, in.model_hash, expect_hash);
        goto error;
    }
    if (fseek(r->f, r->data_start, SEEK_SET)) {
        rc = cc_errf(err, errlen, -EIO, "snapshot %s: seek: %s", path, strerror(errno));
        goto error;
    }
    if (info)
        *info = in;
    *out = r;
    return 0;
error:
    reader_free(r);
    return rc;
}

static int parse_record(CcSnapshotReader *r, uint32_t type, uint32_t len, CcSnapshotRecord *rec,
                        char *err, size_t errlen);

int cc_snapshot_read_next(CcSnapshotReader *r, CcSnapshotRecord *rec, char *err, size_t errlen)
{
    memset(rec, 0, sizeof *rec);
    if (r->done)
        return 0;
    uint32_t type, len;
    int k = read_record(r, &type, &len, NULL, err, errlen);
    if (k <= 0) { /* the file changed under us since the verification: stop here */
        r->done = 1;
        if (k == 0)
            cc_errf(err, errlen, -EIO, "snapshot %s: truncated since it was opened", r->path);
        return -EIO;
    }
    if (type == CC_SNAP_END) {
        r->done = 1;
        return 0;
    }
    return parse_record(r, type, len, rec, err, errlen);
}

/* Parses and validates the payload in r->buf[0..len) of a record of `type` into rec. */
static int parse_record(CcSnapshotReader *r, uint32_t type, uint32_t len, CcSnapshotRecord *rec,
                        char *err, size_t errlen)
{
    const uint8_t *p = r->buf, *end = r->buf + len;
#define NEED(n)                                                                                    \
    do {                                                                                           \
        if ((size_t)(end - p) < (size_t)(n))                                                       \
            return cc_errf(err, errlen, -EBADMSG, "snapshot %s: malformed record", r->path);       \
    } while (0)
    rec->type = (enum CcSnapRecordType)type;
    if (type == CC_SNAP_CELL) {
        CcSnapshotCell *c = &rec->cell;
        uint16_t idl;
        NEED(2);
        memcpy(&idl, p, 2);
        p += 2;
        NEED(idl + 1u + 8 + 8 + 4 + 4);
        if (!cc_kpi_valid_cell_id((const char *)p, idl))
            return cc_errf(err, errlen, -EBADMSG,
                           "snapshot %s: cell record with an invalid id (%u bytes; want 1..%d of "
                           "[A-Za-z0-9._:/-])",
                           r->path, idl, CC_KPI_CELL_ID_MAX);
        /* the id is NUL-terminated in place: shift it left over its length field */
        memmove(r->buf, p, idl);
        r->buf[idl] = 0;
        c->cell_id = (const char *)r->buf;
        p += idl;
        int32_t count, F;
        memcpy(&c->seq_start, p, 8);
        memcpy(&c->first, p + 8, 8);
        memcpy(&count, p + 16, 4);
        memcpy(&F, p + 20, 4);
        p += 24;
        if (F != r->F || bad_span(c->seq_start, c->first, count, r->step_max))
            return cc_errf(err, errlen, -EBADMSG,
                           "snapshot %s: cell %s: malformed record (F=%d of %d, seq_start %" PRId64
                           ", first %" PRId64 ", count %d; steps must lie in 0..%" PRId64 ")",
                           r->path, c->cell_id, F, r->F, c->seq_start, c->first, count,
                           r->step_max);
        c->count = count;
        c->n_features = F;
        size_t nv = (size_t)count * (size_t)F * 4;
        NEED(nv + 4);
        if (nv > r->vcap) {
            float *v = realloc(r->vals, nv);
            if (!v)
                return cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
            r->vals = v;
            r->vcap = nv;
        }
        if (nv)
            memcpy(r->vals, p, nv); /* the payload is not 4-aligned */
        c->values = r->vals;
        p += nv;
        uint32_t al;
        memcpy(&al, p, 4);
        p += 4;
        NEED((size_t)al + 4); /* size_t: al + 4 wraps in 32 bits */
        c->anomaly = al ? p : NULL;
        c->anomaly_len = al;
        p += al;
        uint32_t el;
        memcpy(&el, p, 4);
        p += 4;
        NEED(el);
        c->extra = el ? p : NULL;
        c->extra_len = el;
        p += el;
        if (p != end)
            return cc_errf(err, errlen, -EBADMSG, "snapshot %s: malformed cell record (%s)",
                           r->path, c->cell_id);
        return 1;
    }
    uint32_t n;
    NEED(4);
    memcpy(&n, p, 4);
    p += 4;
    if (n > len / 14)
        return cc_errf(err, errlen, -EBADMSG, "snapshot %s: malformed positions record", r->path);
    CcSnapshotPosition *pos = realloc(r->pos, (n ? n : 1) * sizeof *pos);
    if (!pos)
        return cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
    r->pos = pos;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t tl;
        NEED(2);
        memcpy(&tl, p, 2);
        p += 2;
        if (!tl || tl >= CC_SNAP_TOPIC_MAX)
            return cc_errf(err, errlen, -EBADMSG, "snapshot %s: malformed positions record",
                           r->path);
        NEED(tl + 12u);
        for (uint16_t k = 0; k < tl; k++) /* Kafka's legal topic characters */
            if (!isalnum(p[k]) && p[k] != '.' && p[k] != '_' && p[k] != '-')
                return cc_errf(err, errlen, -EBADMSG,
                               "snapshot %s: malformed positions record (topic name)", r->path);
        memcpy(pos[i].topic, p, tl);
        pos[i].topic[tl] = 0;
        p += tl;
        memcpy(&pos[i].partition, p, 4);
        memcpy(&pos[i].offset, p + 4, 8);
        p += 12;
        if (pos[i].partition < 0 || pos[i].offset < 0)
            return cc_errf(err, errlen, -EBADMSG,
                           "snapshot %s: malformed positions record (partition %d, offset %" PRId64
                           ")",
                           r->path, (int)pos[i].partition, pos[i].offset);
    }
    if (p != end)
        return cc_errf(err, errlen, -EBADMSG, "snapshot %s: malformed positions record", r->path);
    rec->positions = pos;
    rec->n_positions = (int)n;
    return 1;
#undef NEED
}

int cc_snapshot_decoder_open(CcSnapshotReader **out, const CcSnapshotInfo *info)
{
    *out = NULL;
    if (!info || info->n_features < 1 || info->n_features > CC_MAX_FEATURES ||
        info->step_seconds < 1)
        return -EINVAL;
    CcSnapshotReader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup("(state record)"))) {
        free(r);
        return -ENOMEM;
    }
    r->F = info->n_features;
    r->step_max = CC_SNAP_TIME_MAX / info->step_seconds;
    r->model_hash = info->model_hash;
    r->S = info->step_seconds;
    *out = r;
    return 0;
}

int cc_snapshot_decode(CcSnapshotReader *r, const void *buf, size_t len, CcSnapshotRecord *rec,
                       char *err, size_t errlen)
{
    memset(rec, 0, sizeof *rec);
    const uint8_t *b = buf;
    uint32_t magic, F, crc;
    uint64_t hash;
    int64_t S;
    if (r->f || !buf || len < 28 || len - 28 > MAX_RECORD)
        return cc_errf(err, errlen, -EBADMSG, "state record: truncated (%zu bytes)", len);
    memcpy(&magic, b, 4);
    memcpy(&hash, b + 4, 8);
    memcpy(&F, b + 12, 4);
    memcpy(&S, b + 16, 8);
    memcpy(&crc, b + len - 4, 4);
    if (magic != MEM_MAGIC)
        return cc_errf(err, errlen, -EBADMSG, "state record: not a cellcast state record");
    if (cc_crc32(0, b, len - 4) != crc)
        return cc_errf(err, errlen, -EBADMSG, "state record: corrupted (CRC mismatch)");
    if (hash != r->model_hash || (int)F != r->F || S != r->S)
        return cc_errf(err, errlen, -ESTALE,
                       "state record: written for another model (hash %016" PRIx64
                       ", F=%u, S=%" PRId64 "; running %016" PRIx64 ")",
                       hash, F, S, r->model_hash);
    size_t pl = len - 28;
    if (pl + 1 > r->cap) {
        uint8_t *p = realloc(r->buf, pl + 1);
        if (!p)
            return cc_errf(err, errlen, -ENOMEM, "snapshot: out of memory");
        r->buf = p;
        r->cap = pl + 1;
    }
    memcpy(r->buf, b + 24, pl);
    int rc = parse_record(r, CC_SNAP_CELL, (uint32_t)pl, rec, err, errlen);
    return rc < 0 ? rc : 0;
}

void cc_snapshot_read_close(CcSnapshotReader **r)
{
    if (r && *r) {
        reader_free(*r);
        *r = NULL;
    }
}

int cc_snapshot_restore_engine_cell(const CcSnapshotCell *rec, CcCell *c, CcAnomalyCell *ac,
                                    char *err, size_t errlen)
{
    /* All or nothing: the anomaly state is checked against the ring's steps before the ring
     * replaces the cell's (cc_cell_restore checks before it changes anything); only an
     * allocation failing in the last load can leave the ring restored, and the cell is then
     * reset (empty) rather than half-restored. */
    /* a span cc_cell_restore refuses (its bound: no overflow below) is refused by it first */
    int span_ok =
        rec->count <= 0 || (rec->first >= 0 && rec->first <= ((int64_t)1 << 40) - rec->count);
    int64_t last = rec->count > 0 && span_ok ? rec->first + rec->count - 1 : -1;
    char e2[200];
    int rc = 0;
    if (span_ok && ac && rec->anomaly_len &&
        (rc = cc_anomaly_cell_check(ac, rec->anomaly, rec->anomaly_len, last, e2, sizeof e2)))
        return cc_errf(err, errlen, rc, "snapshot: cell %s: %s", rec->cell_id, e2);
    if (rec->count > 0) {
        rc = cc_cell_restore(c, rec->seq_start, rec->first, rec->count, rec->values);
        if (rc)
            return cc_errf(err, errlen, rc,
                           "snapshot: cell %s: cannot restore %d steps from %" PRId64 " (F=%d): %s",
                           rec->cell_id, rec->count, rec->first, rec->n_features, strerror(-rc));
    } else {
        cc_cell_reset(c);
    }
    if (ac && rec->anomaly_len &&
        (rc = cc_anomaly_cell_load_at(ac, rec->anomaly, rec->anomaly_len, last, e2, sizeof e2))) {
        cc_cell_reset(c);
        return cc_errf(err, errlen, rc, "snapshot: cell %s: %s", rec->cell_id, e2);
    }
    return 0;
}
