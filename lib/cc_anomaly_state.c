/*
 * cc_anomaly_state.c — a cell's anomaly state as bytes, for snapshots: a versioned
 * little-endian record written by cc_anomaly_cell_save and read back, older versions
 * included, by cc_anomaly_cell_load. The record's layout is stated once (io_record), and
 * the same walk writes it or reads it, so the two cannot drift apart.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_anomaly_profile.h"

#define STATE_MAGIC 0x314D4E41u /* "ANM1" */
/* Each version appends what a new rule needs to the record; older ones are still read and
 * the rule then starts from its initial state:
 *   2: + the lag calibration per KPI (it warms up again);
 *   3: + the CUSUM sums per KPI and of the peak's attribution (0);
 *   4: + the seasonal profile: per KPI sums and scale, the bins (empty);
 *   5: the cell id in CC_ANOMALY_CELL_ID_MAX + 1 bytes (was 64: ids of 63 characters at
 *      most), + the zero share per KPI (0: zero is not normal until learnt again);
 *   6: + the tail calibration and the EWMA window rule per KPI (they start again);
 *   7: the multi-scale window rule's state per KPI replaces the EWMA's, + the anomaly
 *      likelihood and the novelty range per KPI (they start again);
 *   8: + shape novelty: its sizes, then per KPI its stage and categories (none); + the
 *      novelty kind of the peak's attribution (none);
 *   9: + per KPI its run of absent steps and its missing-data alert (none);
 *  10: + per KPI the false-alarm bar factor and the step of its last verdict (none: 1);
 *  11: + per KPI the fit of its own bar (bar_p; it learns again);
 *  12: + the profile's spread per bin and KPI (PROFILE_SPREAD; 0: the one scale until
 *      learnt again);
 *  13: + per KPI the fit of its profile CUSUM's excursions (PROFILE_CAL; it learns again);
 *  14: + per KPI the tail calibration of z < 0 (TAIL_RATE; before: the one tail, taken for
 *      both signs). */
#define STATE_VERSION 14u
#define V4_ID_BYTES 64
#define MAX_PROFILE_BINS 288 /* profile_bin_s ≥ 300 */

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "state format is little-endian");

/* A walk over the record: writing it (r NULL; w NULL measures) or reading it. */
typedef struct Io {
    uint8_t *w;       ///< save: the output, NULL to measure
    const uint8_t *r; ///< load: the input
    size_t cap;       ///< bytes at w or r
    size_t len;       ///< save: bytes so far (needed); load: bytes read
    uint32_t ver;     ///< the record's version (save: STATE_VERSION)
    int bad;          ///< load: the input ended early
} Io;

/* n bytes of v out or in. Reading past the end zeroes v and marks the walk bad. */
static void io_bytes(Io *io, void *v, size_t n)
{
    if (io->r) {
        if (io->len + n > io->cap) {
            io->bad = 1;
            memset(v, 0, n);
            return;
        }
        memcpy(v, io->r + io->len, n);
    } else if (io->w && io->len + n <= io->cap) {
        memcpy(io->w + io->len, v, n);
    }
    io->len += n;
}
#define IO(io, v) io_bytes(io, &(v), sizeof(v))

/* An int stored as int32. */
static void io_i32(Io *io, int *v)
{
    int32_t x = (int32_t)*v;
    IO(io, x);
    if (io->r)
        *v = x;
}

static void io_ep(Io *io, Episode *e)
{
    IO(io, e->start);
    IO(io, e->resolved);
    IO(io, e->clear_run);
    IO(io, e->severity);
    IO(io, e->peak);
}

/* The cell-wide fields of version 1. */
static void io_cell(Io *io, CcAnomalyCell *c)
{
    size_t idn = io->ver >= 5 ? sizeof c->id : V4_ID_BYTES;
    io_bytes(io, c->id, idn);
    if (io->r)
        c->id[idn - 1] = 0;
    IO(io, c->last_step);
    IO(io, c->exp_step);
    IO(io, c->score_step);
    IO(io, c->score);
    IO(io, c->over_bits);
    IO(io, c->crit_bits);
    IO(io, c->win_step);
    IO(io, c->zero_run);
    io_ep(io, &c->anom);
    io_ep(io, &c->zero);
    io_ep(io, &c->missing);
    io_i32(io, &c->n_peak);
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        CcAlertAttr *p = &c->peak[i];
        io_i32(io, &p->kpi);
        IO(io, p->observed);
        IO(io, p->expected);
        IO(io, p->lo);
        IO(io, p->hi);
        IO(io, p->z);
    }
    IO(io, c->quiet_until);
    IO(io, c->st.scored);
    IO(io, c->st.over);
    IO(io, c->st.firing);
    IO(io, c->st.resolved);
    IO(io, c->st.quiet);
}

/* A KPI: version 1, then the lag calibration (2) and the CUSUM sums (3). */
static void io_kpi(Io *io, KpiState *k)
{
    IO(io, k->exp_mean);
    IO(io, k->exp_sd);
    IO(io, k->exp_scale);
    IO(io, k->z);
    IO(io, k->last_val);
    IO(io, k->change_rate);
    IO(io, k->run_max);
    IO(io, k->run);
    IO(io, k->has_last);
    if (io->ver >= 2) {
        IO(io, k->abs1);
        IO(io, k->absl);
        IO(io, k->n1);
        IO(io, k->nl);
    }
    if (io->ver >= 3) {
        IO(io, k->cu_pos);
        IO(io, k->cu_neg);
    }
    io_ep(io, &k->stuck);
    io_ep(io, &k->bounds);
}

/* The lag ring: its length, then its targets and values. Reading allocates it (a length
 * out of range is read but not followed: the record is refused later). 0 or -ENOMEM. */
static int io_lag(Io *io, CcAnomalyCell *c)
{
    io_i32(io, &c->L);
    if (io->r && !io->bad && c->L > 0 && c->L <= CC_ANOMALY_MAX_LAG &&
        !(c->lag_target = cc_lag_block(c->L, c->F, &c->lag)))
        return -ENOMEM;
    if (c->L > 0 && c->lag_target) {
        io_bytes(io, c->lag_target, (size_t)c->L * sizeof *c->lag_target);
        io_bytes(io, c->lag, (size_t)c->L * (size_t)c->F * 3 * sizeof *c->lag);
    }
    return 0;
}

/* The seasonal profile (version 4): the per-KPI sums and scale, the bins per day, then
 * the bins. Reading allocates them like io_lag. 0 or -ENOMEM. */
static int io_profile(Io *io, CcAnomalyCell *c)
{
    if (io->ver < 4)
        return 0;
    for (int f = 0; f < c->F; f++) {
        KpiState *k = &c->k[f];
        IO(io, k->pr_pos);
        IO(io, k->pr_neg);
        IO(io, k->pr_abs);
        IO(io, k->pr_n);
    }
    io_i32(io, &c->NB);
    int NB = c->NB;
    if (io->r && !io->bad && NB > 0 && NB <= MAX_PROFILE_BINS && 86400 % NB == 0 &&
        !(c->prof = cc_profile_block(NB, c->F, &c->prof_sc, &c->prof_n)))
        return -ENOMEM;
    if (NB > 0 && c->prof) {
        io_bytes(io, c->prof, (size_t)2 * NB * (size_t)c->F * sizeof *c->prof);
        io_bytes(io, c->prof_n, (size_t)2 * NB * (size_t)c->F * sizeof *c->prof_n);
    }
    return 0;
}

/* Shape novelty (version 8): its w, ds and cats (0: off), then per KPI its stage, then
 * every KPI's categories. Reading allocates them like io_lag. 0 or -ENOMEM. */
static int io_shape(Io *io, CcAnomalyCell *c)
{
    io_i32(io, &c->SW);
    io_i32(io, &c->SD);
    io_i32(io, &c->SC);
    if (io->r && !io->bad && c->SW >= 2 && c->SW <= CC_SHAPE_MAX_W && c->SD >= 1 && c->SC >= 1 &&
        c->SC <= CC_SHAPE_MAX_CATS &&
        !(c->shape = cc_shape_block(c->F, c->SW, c->SC, &c->shape_used, &c->shape_box)))
        return -ENOMEM;
    if (c->SW <= 0 || !c->shape)
        return 0;
    for (int f = 0; f < c->F; f++) {
        CcShape *sh = &c->shape[f];
        IO(io, sh->acc);
        IO(io, sh->acc_n);
        IO(io, sh->pos);
        IO(io, sh->n_pt);
        IO(io, sh->n_cat);
        IO(io, sh->windows);
        IO(io, sh->last_new);
        IO(io, sh->pt);
    }
    const size_t n = (size_t)c->F * (size_t)c->SC;
    io_bytes(io, c->shape_used, n * sizeof *c->shape_used);
    io_bytes(io, c->shape_box, n * 2 * (size_t)c->SW * sizeof *c->shape_box);
    return 0;
}

/* The record after the header, in its order. 0 or -ENOMEM (reading). */
static int io_record(Io *io, CcAnomalyCell *c)
{
    io_cell(io, c);
    for (int f = 0; f < c->F; f++)
        io_kpi(io, &c->k[f]);
    int rc = io_lag(io, c);
    if (rc)
        return rc;
    for (int i = 0; i < CC_ALERT_MAX_ATTR && io->ver >= 3; i++)
        IO(io, c->peak[i].cusum);
    for (int i = 0; i < CC_ALERT_MAX_ATTR && io->ver >= 4; i++) {
        IO(io, c->peak[i].profile);
        IO(io, c->peak[i].profile_expected);
    }
    rc = io_profile(io, c);
    if (rc)
        return rc;
    for (int f = 0; f < c->F && io->ver >= 5; f++) {
        IO(io, c->k[f].zero_rate);
        IO(io, c->k[f].zero_n);
    }
    for (int f = 0; f < c->F && io->ver >= 6; f++) {
        IO(io, c->k[f].tail);
        IO(io, c->k[f].tail_n);
        if (io->ver == 6) { /* the EWMA window rule's mean, tail and count: dropped */
            uint8_t old[2 * sizeof(double) + sizeof(int32_t)] = {0};
            IO(io, old);
        }
    }
    for (int f = 0; f < c->F && io->ver >= 7; f++) {
        WinState *w = &c->k[f].win;
        IO(io, w->ring);
        IO(io, w->pos);
        IO(io, w->count);
        IO(io, w->w);
        IO(io, w->tail);
        IO(io, w->tail_n);
    }
    for (int f = 0; f < c->F && io->ver >= 7; f++) {
        CcLikState *l = &c->k[f].lik;
        io_bytes(io, l->ring, sizeof l->ring);
        IO(io, l->pos);
        IO(io, l->filled);
        IO(io, l->n);
        IO(io, l->mean);
        IO(io, l->var);
        IO(io, c->k[f].nov.lo);
        IO(io, c->k[f].nov.hi);
        IO(io, c->k[f].nov.n);
        /* before version 8 the count stopped at CC_LIK_MIN_N: a full count was a warm range
         * of unknown length, and stays warm (novelty_min_s does not pause it) */
        if (io->r && io->ver < 8 && c->k[f].nov.n >= CC_LIK_MIN_N)
            c->k[f].nov.n = CC_NOVELTY_MAX_N;
    }
    for (int i = 0; i < CC_ALERT_MAX_ATTR && io->ver >= 8; i++)
        io_i32(io, &c->peak[i].novelty);
    rc = io->ver >= 8 ? io_shape(io, c) : 0;
    for (int f = 0; !rc && f < c->F && io->ver >= 9; f++) {
        IO(io, c->k[f].absent_run);
        IO(io, c->k[f].absent_since);
        io_ep(io, &c->k[f].absent);
    }
    for (int f = 0; !rc && f < c->F && io->ver >= 10; f++) {
        IO(io, c->k[f].fb_mul);
        IO(io, c->k[f].fb_step);
    }
    for (int f = 0; !rc && f < c->F && io->ver >= 11; f++) {
        KpiState *k = &c->k[f];
        IO(io, k->bar_abs);
        IO(io, k->bar_rate);
        IO(io, k->bar_exc);
        IO(io, k->bar_exc2);
        IO(io, k->bar_n);
        IO(io, k->bar_exc_n);
    }
    if (!rc && io->ver >= 12 && c->NB > 0 && c->prof)
        io_bytes(io, c->prof_sc, (size_t)c->NB * (size_t)c->F * sizeof *c->prof_sc);
    for (int f = 0; !rc && f < c->F && io->ver >= 13; f++) {
        KpiState *k = &c->k[f];
        IO(io, k->pc_peak[0]);
        IO(io, k->pc_peak[1]);
        IO(io, k->pc_rate);
        IO(io, k->pc_exc);
        IO(io, k->pc_exc2);
        IO(io, k->pc_n);
        IO(io, k->pc_exc_n);
    }
    for (int f = 0; !rc && f < c->F; f++) {
        KpiState *k = &c->k[f];
        if (io->ver >= 14) {
            IO(io, k->tail_lo);
            IO(io, k->tail_lo_n);
        } else if (io->r) { /* one tail for both signs: its start for each */
            k->tail_lo = k->tail;
            k->tail_lo_n = k->tail_n;
        }
    }
    return rc;
}

long cc_anomaly_cell_save(const CcAnomalyCell *c, uint8_t *buf, size_t cap)
{
    Io io = {buf, NULL, cap, 0, STATE_VERSION, 0};
    uint32_t magic = STATE_MAGIC, ver = STATE_VERSION, F = (uint32_t)c->F;
    IO(&io, magic);
    IO(&io, ver);
    IO(&io, F);
    io_record(&io, (CcAnomalyCell *)c); /* writing only reads the cell */
    if (buf && io.len > cap)
        return -ENOSPC;
    return (long)io.len;
}

/* The window rule's state is in range (all zero when the record predates it). */
static int win_valid(const WinState *w)
{
    if (w->pos < 0 || w->pos >= CC_WIN_RING || w->count < 0 || w->count > CC_WIN_RING)
        return 0;
    for (int i = 0; i < CC_WIN_RING; i++)
        if (!isfinite(w->ring[i]))
            return 0;
    for (int j = 0; j < CC_WIN_SCALES; j++)
        if (!(w->tail[j] >= 0 && isfinite(w->tail[j])) || w->tail_n[j] < 0 || w->w[j] < 0 ||
            w->w[j] > CC_WIN_RING)
            return 0;
    return 1;
}

/* The largest step a record may name: cc_cell_restore's bound (a step counts periods of at
 * least a second of unix time; far from overflow when multiplied by step_seconds). */
#define STEP_MAX ((int64_t)1 << 40)

/* A step field that is `none` (NONE_STEP or -1, per field) or lies in 0..hi. */
static int step_ok(int64_t s, int64_t none, int64_t hi) { return s == none || (s >= 0 && s <= hi); }

static int episode_valid(const Episode *e, int64_t hi)
{
    return step_ok(e->start, NONE_STEP, hi) && step_ok(e->resolved, NONE_STEP, hi) &&
           e->clear_run >= 0 && e->severity >= 0 && e->severity <= CC_SEV_CRITICAL &&
           !isnan(e->peak);
}

/* The steps and counts of what was read, against `last`, the last step of the cell's data
 * (the record's own last step when the host gives none): every step the state names is at
 * most one past it (an expectation, an onset found by the missing-data rule, a lag-ring
 * target at most L past it), none before step 0. A step past it (a crafted record:
 * 2^62 overflowed step arithmetic and silenced the cell for good) refuses the record.
 * Except quiet_until, bounded only absolutely: it is only compared, never computed with,
 * a genuine record can carry one ahead of the cell (a cell replayed from Kafka behind its
 * alert journal when the snapshot was taken), and the host sets it again from its journal
 * at a restore (cc_anomaly_cell_quiet_until). */
static int steps_valid(const CcAnomalyCell *t, int64_t last)
{
    if (!step_ok(t->last_step, -1, last) || !step_ok(t->score_step, -1, t->last_step) ||
        !step_ok(t->win_step, NONE_STEP, last) || !step_ok(t->exp_step, NONE_STEP, last + 1) ||
        !step_ok(t->quiet_until, NONE_STEP, STEP_MAX) || t->zero_run < 0 ||
        !episode_valid(&t->anom, last + 1) || !episode_valid(&t->zero, last + 1) ||
        !episode_valid(&t->missing, last + 1))
        return 0;
    for (int i = 0; i < t->n_peak; i++)
        if (t->peak[i].kpi < 0 || t->peak[i].kpi >= t->F)
            return 0;
    for (int i = 0; t->lag_target && i < t->L; i++)
        if (!step_ok(t->lag_target[i], NONE_STEP, last + t->L))
            return 0;
    for (int f = 0; f < t->F; f++) {
        const KpiState *k = &t->k[f];
        if (k->run < 0 || (k->has_last != 0 && k->has_last != 1) ||
            !step_ok(k->absent_since, NONE_STEP, last + 1) || !episode_valid(&k->stuck, last + 1) ||
            !episode_valid(&k->bounds, last + 1) || !episode_valid(&k->absent, last + 1))
            return 0;
        if (t->shape && t->shape[f].windows > last + 1)
            return 0;
    }
    for (size_t i = 0; t->shape && i < (size_t)t->F * (size_t)t->SC; i++)
        if (t->shape_used[i] < -1 || t->shape_used[i] > t->shape[i / (size_t)t->SC].windows)
            return 0;
    return 1;
}

/* Whether what was read is in range (what an older version lacks is, from its start). */
static int record_valid(const CcAnomalyCell *t, int64_t last)
{
    if (t->n_peak < 0 || t->n_peak > CC_ALERT_MAX_ATTR || t->L < 0 || t->L > CC_ANOMALY_MAX_LAG ||
        t->NB < 0 || t->NB > MAX_PROFILE_BINS || (t->NB > 0 && 86400 % t->NB != 0))
        return 0;
    for (int f = 0; f < t->F; f++) {
        const KpiState *k = &t->k[f];
        if (!(k->abs1 >= 0 && k->absl >= 0 && isfinite(k->abs1) && isfinite(k->absl)) ||
            k->n1 < 0 || k->nl < 0)
            return 0;
        if (!(k->cu_pos >= 0 && k->cu_neg >= 0 && isfinite(k->cu_pos) && isfinite(k->cu_neg)))
            return 0;
        if (!(k->zero_rate >= 0 && k->zero_rate <= 1) || k->zero_n < 0 ||
            !cc_lik_valid(&k->lik, &k->nov))
            return 0;
        if (!(k->tail >= 0 && isfinite(k->tail)) || k->tail_n < 0 || !win_valid(&k->win) ||
            !(k->tail_lo >= 0 && isfinite(k->tail_lo)) || k->tail_lo_n < 0)
            return 0;
        if (!(k->pr_pos >= 0 && k->pr_neg >= 0 && k->pr_abs >= 0 && isfinite(k->pr_pos) &&
              isfinite(k->pr_neg) && isfinite(k->pr_abs)) ||
            k->pr_n < 0)
            return 0;
        if (!(k->pc_peak[0] >= 0 && k->pc_peak[1] >= 0 && k->pc_rate >= 0 && k->pc_rate <= 2 &&
              k->pc_exc >= 0 && k->pc_exc2 >= 0 && isfinite(k->pc_peak[0]) &&
              isfinite(k->pc_peak[1]) && isfinite(k->pc_exc) && isfinite(k->pc_exc2)) ||
            k->pc_n < 0 || k->pc_exc_n < 0)
            return 0;
        if (!(k->bar_abs >= 0 && isfinite(k->bar_abs) && k->bar_rate >= 0 && k->bar_rate <= 1 &&
              k->bar_exc >= 0 && isfinite(k->bar_exc) && k->bar_exc2 >= 0 &&
              isfinite(k->bar_exc2)) ||
            k->bar_n < 0 || k->bar_n > BAR_STEPS || k->bar_exc_n < 0 || k->bar_exc_n > BAR_EXC_N)
            return 0;
        if (k->absent_run < 0 || (k->absent_run > 0) != (k->absent_since != NONE_STEP))
            return 0;
        if (!(k->fb_mul >= 1 && k->fb_mul <= CC_FEEDBACK_MAX))
            return 0;
    }
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++)
        if (!isfinite(t->peak[i].cusum) || !isfinite(t->peak[i].profile) ||
            t->peak[i].novelty < CC_NOVEL_NONE || t->peak[i].novelty > CC_NOVEL_SHAPE)
            return 0;
    for (size_t i = 0; t->prof && i < (size_t)2 * t->NB * (size_t)t->F; i++)
        if (!isfinite(t->prof[i]))
            return 0;
    for (size_t i = 0; t->prof && i < (size_t)t->NB * (size_t)t->F; i++)
        if (!(t->prof_sc[i] >= 0 && isfinite(t->prof_sc[i])))
            return 0;
    if (t->SW != 0 && !t->shape)
        return 0;
    for (int f = 0; t->shape && f < t->F; f++)
        if (!cc_shape_valid(&t->shape[f], shape_box_of(t, f), t->SW, t->SD, t->SC))
            return 0;
    return steps_valid(t, last);
}

/* t, a copy of the cell to read into: the fields of later versions at their start. */
static void record_start(CcAnomalyCell *t, KpiState *ks)
{
    memset(ks, 0, (size_t)t->F * sizeof *ks);
    for (int f = 0; f < t->F; f++) {
        ks[f].att_mul = 1;
        ks[f].pr_exp = NAN;
        ks[f].ll = NAN;
        ks[f].absent.start = ks[f].absent.resolved = NONE_STEP; /* before version 9: none */
        ks[f].absent_since = NONE_STEP;
        ks[f].fb_mul = ks[f].bar = 1; /* before version 10: no verdict */
    }
    t->k = ks;
    for (int i = 0; i < CC_ALERT_MAX_ATTR; i++) {
        t->peak[i].cusum = 0;
        t->peak[i].profile = 0;
        t->peak[i].profile_expected = NAN;
        t->peak[i].novelty = CC_NOVEL_NONE;
    }
    t->L = t->NB = 0;
    t->SW = t->SD = t->SC = 0;
    t->lik = NAN;
    t->live_last = NONE_STEP; /* the episode trace is not in the record */
    memset(&t->trace, 0, sizeof t->trace);
    t->trace.fire_kpi = t->trace.hold_kpi = -1;
}

/* Decodes and validates a record into c (commit) or only checks it; `last` as in
 * cc_anomaly_cell_load_at. */
static int load(CcAnomalyCell *c, const uint8_t *buf, size_t len, int64_t last, int commit,
                char *err, size_t errlen)
{
    Io io = {NULL, buf, len, 0, 0, 0};
    uint32_t magic = 0, ver = 0, F = 0;
    IO(&io, magic);
    IO(&io, ver);
    IO(&io, F);
    if (io.bad || magic != STATE_MAGIC)
        return cc_errf(err, errlen, -EINVAL, "anomaly state: bad magic");
    if (ver < 1 || ver > STATE_VERSION)
        return cc_errf(err, errlen, -EINVAL, "anomaly state: version %u, this build reads 1 to %u",
                       ver, STATE_VERSION);
    if ((int)F != c->F)
        return cc_errf(err, errlen, -EINVAL, "anomaly state: %u KPIs, the cell has %d", F, c->F);
    if (last < -1 || last > STEP_MAX)
        return cc_errf(err, errlen, -EINVAL, "anomaly state: cell's last step %lld out of range",
                       (long long)last);
    io.ver = ver;
    CcAnomalyCell t = *c; /* decode into a copy; commit only when complete */
    /* not read yet */
    t.lag_target = NULL, t.lag = NULL, t.prof = NULL, t.prof_sc = NULL, t.prof_n = NULL;
    t.shape = NULL, t.shape_used = NULL, t.shape_box = NULL;
    KpiState *ks = malloc((size_t)c->F * sizeof *ks);
    int rc = -ENOMEM;
    const char *why = "malformed";
    if (!ks)
        goto fail;
    record_start(&t, ks);
    rc = io_record(&io, &t);
    if (rc)
        goto fail;
    rc = -EINVAL;
    if (io.bad || io.len != len)
        goto fail;
    if (!record_valid(&t, last)) {
        /* the steps are checked last: a record in range but for steps past the cell's */
        why = t.last_step > last || record_valid(&t, STEP_MAX) ? "steps past the cell's last step"
                                                               : "malformed";
        goto fail;
    }
    if (!commit) {
        rc = 0;
        goto fail; /* frees the copy */
    }
    memcpy(c->k, ks, (size_t)c->F * sizeof *ks);
    free(ks);
    t.k = c->k;
    free(c->lag_target);
    free(c->prof);
    free(c->shape);
    *c = t;
    return 0;
fail:
    free(t.shape);
    free(t.prof);
    free(t.lag_target);
    free(ks);
    if (!rc)
        return 0;
    if (rc == -ENOMEM)
        return cc_errf(err, errlen, rc, "anomaly state: out of memory");
    if (io.bad)
        why = "truncated";
    if (why[0] == 's')
        return cc_errf(err, errlen, rc, "anomaly state: %s (last step %lld, the cell's %lld)", why,
                       (long long)t.last_step, (long long)last);
    return cc_errf(err, errlen, rc, "anomaly state: %s (%zu bytes)", why, len);
}

int cc_anomaly_cell_load_at(CcAnomalyCell *c, const uint8_t *buf, size_t len, int64_t last,
                            char *err, size_t errlen)
{
    return load(c, buf, len, last, 1, err, errlen);
}

int cc_anomaly_cell_check(const CcAnomalyCell *c, const uint8_t *buf, size_t len, int64_t last,
                          char *err, size_t errlen)
{
    return load((CcAnomalyCell *)c, buf, len, last, 0, err, errlen); /* c only read */
}

int cc_anomaly_cell_load(CcAnomalyCell *c, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    /* no data known: the record's steps are bounded by its own last step, read first */
    int64_t last = -1;
    size_t at = 12 + CC_ANOMALY_CELL_ID_MAX + 1; /* magic, version, F, then the id */
    uint32_t ver = 0;
    if (len >= 8)
        memcpy(&ver, buf + 4, 4);
    if (ver < 5)
        at = 12 + V4_ID_BYTES;
    if (len >= at + sizeof last)
        memcpy(&last, buf + at, sizeof last);
    if (last < -1 || last > STEP_MAX)
        last = -1; /* refused by the walk: it is out of range against itself */
    return load(c, buf, len, last, 1, err, errlen);
}
