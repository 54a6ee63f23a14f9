/*
 * cc_learn.c — the learner's store of sampled cells, its step detection and schedule in
 * data time, the linear-only tx/3 model and atomic file publication (cc_learn.h).
 */
#include "cc_learn.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc_calib.h"
#include "cc_metrics.h"
#include "cc_train.h"

typedef struct LearnCell {
    char id[CC_CELL_ID_MAX];
    int64_t *ts; /* (cap) record times, in arrival order */
    float *val;  /* (cap, nk) values, NaN = missing */
    int n, cap;  /* records held, allocated */
    int nk;      /* KPI slots per record: the KPIs named when the cell's layout last grew;
                  * KPIs named since read as missing in its older records */
    int head;    /* once n == max_points: the oldest record's slot (a ring) */
} LearnCell;

struct CcLearn {
    CcLearnSettings s;
    LearnCell *cells;
    int n_cells;
    /* cell id -> 1 + its index in cells (0: empty), open addressing, a power of two at
     * least twice max_cells: a record finds its cell in O(1) (a scan of 10k sampled cells
     * per record made reading a 10k-cell fleet quadratic) */
    int *index;
    size_t index_mask;
    char kpi[CC_MAX_FEATURES][CC_FEATURE_NAME_MAX];
    int n_kpis;
    int64_t records_dropped, kpis_dropped;
};

void cc_learn_default_settings(CcLearnSettings *s)
{
    *s = (CcLearnSettings){.max_cells = 1000,
                           .max_points = 20160,
                           .first_model_s = 86400,
                           .transformer_s = 7 * 86400,
                           .retrain_every_s = 86400,
                           .holdout_s = 86400,
                           .margin = 0.02};
}

int cc_learn_open(CcLearn **out, const CcLearnSettings *s)
{
    *out = NULL;
    if (s->max_cells < 1 || s->max_points < 4 || s->first_model_s < 0 || s->transformer_s < 0 ||
        s->retrain_every_s < 0 || s->holdout_s < 0 || !(s->margin >= 0 && s->margin < 1))
        return -EINVAL;
    CcLearn *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->s = *s;
    size_t slots = 2;
    while (slots < 2 * (size_t)s->max_cells)
        slots *= 2;
    l->cells = calloc((size_t)s->max_cells, sizeof *l->cells);
    l->index = calloc(slots, sizeof *l->index);
    if (!l->cells || !l->index) {
        free(l->cells);
        free(l->index);
        free(l);
        return -ENOMEM;
    }
    l->index_mask = slots - 1;
    *out = l;
    return 0;
}

void cc_learn_clear(CcLearn *l)
{
    for (int c = 0; c < l->n_cells; c++) {
        free(l->cells[c].ts);
        free(l->cells[c].val);
    }
    memset(l->cells, 0, (size_t)l->s.max_cells * sizeof *l->cells);
    memset(l->index, 0, (l->index_mask + 1) * sizeof *l->index);
    l->n_cells = 0;
    l->records_dropped = l->kpis_dropped = 0;
}

void cc_learn_close(CcLearn **l)
{
    if (!*l)
        return;
    cc_learn_clear(*l);
    free((*l)->cells);
    free((*l)->index);
    free(*l);
    *l = NULL;
}

/* The cell's slot, sampled now if the cap allows; NULL when not sampled. */
static LearnCell *cell_slot(CcLearn *l, const char *id)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    size_t i = (size_t)h & l->index_mask;
    for (; l->index[i]; i = (i + 1) & l->index_mask) /* at most half full: ends */
        if (!strcmp(l->cells[l->index[i] - 1].id, id))
            return &l->cells[l->index[i] - 1];
    if (l->n_cells == l->s.max_cells)
        return NULL;
    LearnCell *c = &l->cells[l->n_cells++];
    snprintf(c->id, sizeof c->id, "%s", id);
    l->index[i] = l->n_cells;
    return c;
}

/* The KPI's index, named now if it is new and the cap allows; -1: dropped. hint: where
 * it most likely is (a record's i-th name is most often the i-th KPI). */
static int kpi_index(CcLearn *l, const char *name, int hint)
{
    if (hint >= 0 && hint < l->n_kpis && !strcmp(l->kpi[hint], name))
        return hint;
    for (int f = 0; f < l->n_kpis; f++)
        if (!strcmp(l->kpi[f], name))
            return f;
    if (l->n_kpis == CC_MAX_FEATURES || !name[0] || strlen(name) >= CC_FEATURE_NAME_MAX ||
        strpbrk(name, ",\"\r\n"))
        return -1;
    snprintf(l->kpi[l->n_kpis], CC_FEATURE_NAME_MAX, "%s", name);
    return l->n_kpis++;
}

/* Slot of the cell's i-th oldest record. */
static int rec_slot(const LearnCell *c, int i)
{
    return c->n < c->cap || c->head == 0 ? i : (c->head + i) % c->n;
}

/* The cell's arrays resized to cap records of nk KPI slots (cap >= c->n, nk >= c->nk):
 * each record keeps its slot, the KPI slots added are missing. 0 or -ENOMEM (the cell
 * still whole). */
static int cell_layout(LearnCell *c, int cap, int nk)
{
    if (cap == c->cap && nk == c->nk)
        return 0;
    int64_t *ts = realloc(c->ts, (size_t)cap * sizeof *ts);
    if (!ts)
        return -ENOMEM;
    c->ts = ts;
    const size_t bytes = ((size_t)cap * nk + 1) * sizeof(float); /* + 1: never 0 */
    float *val = nk == c->nk ? realloc(c->val, bytes) : malloc(bytes);
    if (!val) {
        if (cap < c->cap) /* ts holds cap records now */
            c->cap = cap;
        return -ENOMEM;
    }
    if (nk != c->nk) { /* a new stride: every record held moves to it */
        for (int i = 0; i < c->n; i++) {
            float *row = val + (size_t)i * nk;
            memcpy(row, c->val + (size_t)i * c->nk, (size_t)c->nk * sizeof *row);
            for (int f = c->nk; f < nk; f++)
                row[f] = NAN;
        }
        free(c->val);
    }
    c->val = val, c->cap = cap, c->nk = nk;
    return 0;
}

/* Record i's values: c->nk of them. */
static float *cell_row(const LearnCell *c, int i) { return c->val + (size_t)i * c->nk; }

int cc_learn_add(CcLearn *l, const char *cell, int64_t ts, const char *const *names,
                 const double *values, int n)
{
    if (!cell || !cell[0] || strlen(cell) >= CC_CELL_ID_MAX || strpbrk(cell, ",\"\r\n"))
        return -EINVAL;
    LearnCell *c = cell_slot(l, cell);
    if (!c) {
        l->records_dropped++;
        return -ENOSPC;
    }
    /* the record's KPIs named first, so that the cell's layout holds every one of them */
    int need_nk = c->nk;
    for (int i = 0; i < n; i++)
        if (kpi_index(l, names[i], i) >= need_nk)
            need_nk = l->n_kpis;
    int cap = c->cap;
    if (c->n == c->cap && c->n < l->s.max_points) /* doubling from 64: the count is not known */
        cap = c->cap ? c->cap * 2 : 64;
    if (cap > l->s.max_points)
        cap = l->s.max_points;
    int rc = cell_layout(c, cap, need_nk);
    if (rc < 0)
        return rc;
    int slot;
    if (c->n < l->s.max_points) {
        slot = c->n++;
    } else { /* full: the oldest record makes room */
        slot = c->head;
        c->head = (c->head + 1) % c->n;
    }
    c->ts[slot] = ts;
    float *row = cell_row(c, slot);
    for (int f = 0; f < c->nk; f++)
        row[f] = NAN;
    for (int i = 0; i < n; i++) {
        int f = kpi_index(l, names[i], i);
        if (f < 0) {
            l->kpis_dropped++;
            continue;
        }
        row[f] = isfinite(values[i]) ? (float)values[i] : NAN;
    }
    return 0;
}

void cc_learn_trim(CcLearn *l)
{
    for (int c = 0; c < l->n_cells; c++) {
        LearnCell *lc = &l->cells[c];
        if (lc->n > 0 && lc->n < lc->cap)
            cell_layout(lc, lc->n, lc->nk); /* out of memory: the cell stays as it was */
    }
}

int cc_learn_add_dataset(CcLearn *l, const CcDataset *ds)
{
    const char *names[CC_DATA_MAX_FEATURES];
    double v[CC_DATA_MAX_FEATURES];
    const int F = ds->n_features;
    for (int f = 0; f < F; f++)
        names[f] = ds->features[f];
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        int rows = 0; /* the records the series brings: its rows with a value */
        for (size_t j = 0; j < (size_t)se->T * F; j += F)
            rows += memchr(se->mask + j, 1, (size_t)F) != NULL;
        for (int i = 0; i < se->T; i++) {
            int any = 0;
            for (int f = 0; f < F; f++) {
                int obs = se->mask[(size_t)i * F + f];
                v[f] = obs ? se->x[(size_t)i * F + f] : NAN;
                any |= obs;
            }
            if (!any) /* a step the loader inserted */
                continue;
            int r = cc_learn_add(l, se->cell_id, cc_data_row_ts(ds, s, i), names, v, F);
            if (r < 0 && r != -ENOSPC)
                return r;
            if (r == 0 && rows > 0) { /* the first record: room for the others at once */
                LearnCell *c = cell_slot(l, se->cell_id);
                int64_t want = (int64_t)c->n + rows - 1;
                if (want > l->s.max_points)
                    want = l->s.max_points;
                if (want > c->cap && (r = cell_layout(c, (int)want, c->nk)) < 0)
                    return r;
                rows = 0;
            }
        }
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The cell's record times sorted into tmp (n). */
static void sorted_times(const LearnCell *c, int64_t *tmp)
{
    memcpy(tmp, c->ts, (size_t)c->n * sizeof *tmp);
    qsort(tmp, (size_t)c->n, sizeof *tmp, cmp_i64);
}

static int64_t detect_step(const CcLearn *l)
{
    int max_n = 0;
    for (int c = 0; c < l->n_cells; c++)
        if (l->cells[c].n > max_n)
            max_n = l->cells[c].n;
    int64_t *tmp = malloc((size_t)(max_n + 1) * sizeof *tmp);
    int64_t *per_cell = malloc((size_t)(l->n_cells + 1) * sizeof *per_cell);
    int n_med = 0;
    for (int c = 0; tmp && per_cell && c < l->n_cells; c++) {
        const LearnCell *lc = &l->cells[c];
        sorted_times(lc, tmp);
        int nd = 0;
        for (int i = 1; i < lc->n; i++) /* the positive differences, in place */
            if (tmp[i] > tmp[i - 1])
                tmp[nd++] = tmp[i] - tmp[i - 1];
        if (nd == 0)
            continue;
        qsort(tmp, (size_t)nd, sizeof *tmp, cmp_i64);
        /* cc_data's rule: the median of the differences within 5% of the most common (ties:
         * the smaller), not of all of them: a cell missing half its steps has a median
         * difference of two steps or more */
        int64_t mode = tmp[0];
        for (int i = 0, best = 0, run = 0; i < nd; i++) {
            run = i > 0 && tmp[i] == tmp[i - 1] ? run + 1 : 1;
            if (run > best)
                best = run, mode = tmp[i];
        }
        int a = 0, b = nd;
        while (a < nd && tmp[a] < mode - mode / 20)
            a++;
        while (b > a && tmp[b - 1] > mode + mode / 20)
            b--;
        per_cell[n_med++] = tmp[a + (b - a) / 2];
    }
    int64_t step = 0;
    if (n_med > 0) {
        qsort(per_cell, (size_t)n_med, sizeof *per_cell, cmp_i64);
        step = per_cell[n_med / 2];
        int64_t minutes = (step + 30) / 60 * 60;              /* collectors' seconds of jitter: */
        if (step >= 60 && llabs(minutes - step) <= step / 20) /* within 5%, as cc_data */
            step = minutes;
    }
    free(tmp);
    free(per_cell);
    return step;
}

void cc_learn_stats(const CcLearn *l, CcLearnStats *st)
{
    *st = (CcLearnStats){.cells = l->n_cells,
                         .records_dropped = l->records_dropped,
                         .kpis_dropped = l->kpis_dropped,
                         .n_kpis = l->n_kpis};
    int any = 0;
    for (int c = 0; c < l->n_cells; c++) {
        const LearnCell *lc = &l->cells[c];
        st->records += lc->n;
        st->bytes += (size_t)lc->cap * (sizeof(int64_t) + (size_t)lc->nk * sizeof(float));
        for (int i = 0; i < lc->n; i++) {
            if (!any || lc->ts[i] < st->first_ts)
                st->first_ts = lc->ts[i];
            if (!any || lc->ts[i] > st->last_ts)
                st->last_ts = lc->ts[i];
            any = 1;
        }
    }
    st->step_s = detect_step(l);
}

const char *cc_learn_kpi(const CcLearn *l, int i)
{
    return i >= 0 && i < l->n_kpis ? l->kpi[i] : NULL;
}

void cc_learn_truncate(CcLearn *l, int64_t until)
{
    float *tmpv = NULL;
    for (int c = 0; c < l->n_cells; c++) {
        LearnCell *lc = &l->cells[c];
        const size_t nk = (size_t)lc->nk;
        /* unroll the ring so that the kept records are slots 0..k-1 in arrival order */
        int k = 0;
        int64_t *ts = malloc((size_t)(lc->n + 1) * sizeof *ts);
        tmpv = malloc(((size_t)lc->n * nk + 1) * sizeof *tmpv);
        if (!ts || !tmpv) { /* out of memory: the cell is dropped rather than left wrong */
            free(ts);
            free(tmpv);
            lc->n = lc->head = 0;
            continue;
        }
        for (int i = 0; i < lc->n; i++) {
            int sl = rec_slot(lc, i);
            if (lc->ts[sl] >= until)
                continue;
            ts[k] = lc->ts[sl];
            memcpy(tmpv + (size_t)k * nk, cell_row(lc, sl), nk * sizeof *tmpv);
            k++;
        }
        memcpy(lc->ts, ts, (size_t)k * sizeof *ts);
        memcpy(lc->val, tmpv, (size_t)k * nk * sizeof *tmpv);
        lc->n = k, lc->head = 0;
        free(ts);
        free(tmpv);
    }
}

void cc_learn_shuffle(CcLearn *l, int64_t until, uint64_t seed)
{
    uint64_t r = seed * 0x9e3779b97f4a7c15ULL + 1;
    float tmp[CC_MAX_FEATURES];
    for (int c = 0; c < l->n_cells; c++) {
        LearnCell *lc = &l->cells[c];
        int *idx = malloc((size_t)(lc->n + 1) * sizeof *idx), k = 0;
        if (!idx)
            continue;
        for (int i = 0; i < lc->n; i++)
            if (lc->ts[i] < until)
                idx[k++] = i;
        for (int i = k - 1; i > 0; i--) { /* Fisher-Yates over the slots before until */
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            int j = (int)(r % (uint64_t)(i + 1));
            float *a = cell_row(lc, idx[i]), *b = cell_row(lc, idx[j]);
            const size_t bytes = (size_t)lc->nk * sizeof *tmp;
            memcpy(tmp, a, bytes);
            memcpy(a, b, bytes);
            memcpy(b, tmp, bytes);
        }
        free(idx);
    }
}

int64_t cc_learn_exclude(CcLearn *l, int (*excluded)(void *cookie, const char *cell, int64_t ts),
                         void *cookie)
{
    int64_t n = 0;
    for (int c = 0; c < l->n_cells; c++) {
        LearnCell *lc = &l->cells[c];
        for (int i = 0; i < lc->n; i++) {
            if (!excluded(cookie, lc->id, lc->ts[i]))
                continue;
            float *v = cell_row(lc, i);
            int had = 0;
            for (int f = 0; f < lc->nk; f++) {
                had |= !isnan(v[f]);
                v[f] = NAN;
            }
            n += had;
        }
    }
    return n;
}

typedef struct TsIdx {
    int64_t ts;
    int slot;
} TsIdx;

static int cmp_tsidx(const void *a, const void *b)
{
    const TsIdx *x = a, *y = b;
    if (x->ts != y->ts)
        return (x->ts > y->ts) - (x->ts < y->ts);
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* v into buf as the shortest decimal of 6 to 9 significant digits that reads back as v the
 * way cc_data reads a value (strtod, then to float): "26.416" rather than %.9g's
 * "26.4160004". A KPI feed's values most often have 6 digits or fewer, and %.6g is then
 * the shortest there is (a float tells any two 6-digit decimals apart). The CSVs a round
 * writes and reads back are about a quarter smaller than with %.9g, the values the same. */
static int shortest_float(char *buf, size_t n, float v)
{
    for (int digits = 6;; digits++) {
        int len = snprintf(buf, n, "%.*g", digits, v);
        if (digits == 9 || (float)strtod(buf, NULL) == v)
            return len;
    }
}

int cc_learn_write_csv(const CcLearn *l, const char *path, int64_t until, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -EIO;
    }
    fputs("ts,cell_id", fp);
    for (int f = 0; f < l->n_kpis; f++)
        fprintf(fp, ",%s", l->kpi[f]);
    fputc('\n', fp);
    int rc = 0;
    for (int c = 0; c < l->n_cells && !rc; c++) {
        const LearnCell *lc = &l->cells[c];
        TsIdx *ix = malloc((size_t)(lc->n + 1) * sizeof *ix);
        if (!ix) {
            rc = -ENOMEM;
            break;
        }
        for (int i = 0; i < lc->n; i++)
            ix[i] = (TsIdx){lc->ts[i], i};
        qsort(ix, (size_t)lc->n, sizeof *ix, cmp_tsidx);
        for (int i = 0; i < lc->n; i++) {
            if (until && ix[i].ts >= until)
                break;
            const float *row = cell_row(lc, ix[i].slot);
            fprintf(fp, "%lld,%s", (long long)ix[i].ts, lc->id);
            for (int f = 0; f < l->n_kpis; f++) {
                char num[32];
                fputc(',', fp);
                if (f < lc->nk && isfinite(row[f]))
                    fwrite(num, 1, (size_t)shortest_float(num, sizeof num, row[f]), fp);
            }
            fputc('\n', fp);
        }
        free(ix);
    }
    if (fflush(fp) || ferror(fp))
        rc = rc ? rc : -EIO;
    if (fclose(fp) && !rc)
        rc = -EIO;
    if (!rc && rename(tmp, path))
        rc = -EIO;
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, rc == -ENOMEM ? "out of memory" : strerror(errno));
        unlink(tmp);
    }
    return rc;
}

enum CcLearnRound cc_learn_due(const CcLearnSettings *s, int64_t first_ts, int64_t last_ts,
                               int64_t last_round)
{
    int64_t span = last_ts - first_ts;
    if (span < s->first_model_s)
        return CC_LEARN_WAIT;
    if (last_round && last_ts - last_round < s->retrain_every_s)
        return CC_LEARN_WAIT;
    return span >= s->transformer_s ? CC_LEARN_TRANSFORMER : CC_LEARN_LINEAR;
}

int64_t cc_learn_holdout(const CcLearnSettings *s, int64_t first_ts, int64_t last_ts,
                         int64_t step_s)
{
    int64_t h = s->holdout_s, quarter = (last_ts - first_ts) / 4;
    if (h > quarter)
        h = quarter;
    if (step_s > 0)
        h = h / step_s * step_s;
    return h;
}

/* Each channel's MASE scale over its training and validation rows (the rows `cellcast
 * eval` scales the held-out errors by): the mean absolute change over a day (season 1 when
 * the rows hold no day or the daily one is 0). NaN or 0: a constant channel. */
static void channel_scales(const CcDataset *ds, const CcRange *train, const CcRange *val,
                           double *scale)
{
    const int F = ds->n_features;
    const int64_t day = ds->step_seconds > 0 ? 86400 / ds->step_seconds : 0;
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        int a = train[s].begin, b = val[s].end > train[s].end ? val[s].end : train[s].end;
        for (int f = 0; f < F; f++) {
            double v = NAN;
            if (day > 1 && day < b - a)
                v = cc_mase_scale(se->x, se->mask, F, f, a, b, (int)day);
            if (!(v > 0))
                v = cc_mase_scale(se->x, se->mask, F, f, a, b, 1);
            scale[(size_t)s * F + f] = v;
        }
    }
}

const double cc_learn_lambdas[CC_LEARN_N_LAMBDAS] = {100, 10, 1, 1e-1, 1e-2, 1e-3, 1e-4};

/* A tx/3 model of hp whose head is 0 (the Transformer's share of the mean and log-sigma
 * vanish: the forecast is the linear path's, its sd sigma × calib.sigma_scale), its linear
 * path at 0 and norm.floor as `cellcast train` sets it; and a trainer over train / val. */
static int linear_only_open(CcModel **out, CcTrainer **tr, const CcHparams *hp, const CcDataset *ds,
                            const CcRange *train, const CcRange *val, double floor_frac,
                            const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    *out = NULL, *tr = NULL;
    if (hp->linear_window < 1 || hp->n_features != ds->n_features ||
        hp->step_seconds != ds->step_seconds) {
        snprintf(err, errlen, "linear model: hyperparameters do not match the data");
        return -EINVAL;
    }
    CcModel *m = NULL;
    int rc = cc_model_open(&m, hp, err, errlen);
    if (rc < 0)
        return rc;
    cc_model_init_random(m, 1);
    cc_train_naive_start(m);
    memset(m->w.head_w, 0, (size_t)2 * hp->horizon * hp->d_model * sizeof(float));
    memset(m->w.head_b, 0, (size_t)2 * hp->horizon * sizeof(float));
    if ((rc = cc_train_norm_floor(ds, train, floor_frac, m->w.norm_floor)) < 0) {
        snprintf(err, errlen, "out of memory");
        cc_model_close(&m);
        return rc;
    }
    CcTrainSettings ts;
    cc_train_default_settings(&ts);
    ts.n_threads = 1;
    ts.stop = stop;
    if ((rc = cc_trainer_open(tr, m, ds, train, val, &ts, err, errlen)) < 0) {
        cc_model_close(&m);
        return rc;
    }
    *out = m;
    return 0;
}

/* calib.sigma_scale on the validation windows (none: the scales stay 1), then the trainer
 * closed; the model is closed too on an error. */
static int calibrate_close(CcModel **m, CcTrainer **tr, int rc)
{
    if (rc == 0) {
        CcCalibSettings cs;
        CcCalibReport rep;
        cc_calib_defaults(&cs);
        int r2 = cc_trainer_calibrate_fit(*tr, &cs, &rep);
        if (r2 == 0) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.4f", rep.cover);
            cc_hparams_set_extra(&(*m)->hp, "val_cover80", buf);
        } else if (r2 != -EAGAIN)
            rc = r2;
    }
    cc_trainer_close(tr);
    if (rc < 0)
        cc_model_close(m);
    return rc;
}

int cc_learn_fit_linear(CcModel **out, const CcHparams *hp, const CcDataset *ds,
                        const CcRange *train, const CcRange *val, double floor_frac,
                        CcLinearLoss loss, CcLinearFitReport *rep,
                        const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    CcModel *m = NULL;
    CcTrainer *tr = NULL;
    int rc = linear_only_open(&m, &tr, hp, ds, train, val, floor_frac, stop, err, errlen);
    if (rc < 0)
        return rc;
    double *scale = malloc(((size_t)ds->n_series * ds->n_features + 1) * sizeof *scale);
    if (scale) {
        channel_scales(ds, train, val, scale);
        CcLinearFitSettings fs = {.scale = scale,
                                  .lambdas = cc_learn_lambdas,
                                  .n_lambdas = CC_LEARN_N_LAMBDAS,
                                  .refit = val,
                                  .loss = loss};
        rc = cc_trainer_fit_linear_scaled(tr, &fs, rep); /* gappy cells: its fallback */
        free(scale);
    } else
        rc = -ENOMEM;
    if (rc < 0)
        snprintf(err, errlen, "linear model: %s",
                 rc == -EAGAIN      ? "no training window with a full linear window and horizon"
                 : rc == -EDOM      ? "singular normal equations"
                 : rc == -ECANCELED ? "stopped"
                                    : strerror(-rc));
    if ((rc = calibrate_close(&m, &tr, rc)) < 0)
        return rc;
    *out = m;
    return 0;
}

int cc_learn_seasonal_model(CcModel **out, const CcHparams *hp, const CcDataset *ds,
                            const CcRange *train, const CcRange *val, double floor_frac, char *err,
                            size_t errlen)
{
    *out = NULL;
    const int64_t day = ds->step_seconds > 0 ? 86400 / ds->step_seconds : 0;
    if (day < 1 || 86400 % ds->step_seconds || day < hp->horizon || day > CC_MAX_LINEAR_WINDOW) {
        snprintf(err, errlen,
                 "seasonal model: the step does not divide a day into at least "
                 "horizon steps");
        return -EINVAL;
    }
    CcHparams h = *hp;
    h.linear_window = (int)day;
    CcModel *m = NULL;
    CcTrainer *tr = NULL;
    int rc = linear_only_open(&m, &tr, &h, ds, train, val, floor_frac, NULL, err, errlen);
    if (rc < 0)
        return rc;
    /* input i is x_{t-R+1+i}: the target t+1+k a day earlier is i = R - D + k = k */
    for (int k = 0; k < h.horizon; k++)
        m->w.lin_w[(size_t)k * h.linear_window + k] = 1.0f;
    if ((rc = calibrate_close(&m, &tr, 0)) < 0) {
        snprintf(err, errlen, "seasonal model: %s", strerror(-rc));
        return rc;
    }
    *out = m;
    return 0;
}

int cc_learn_blend_seasonal(CcModel **out, const CcModel *m, double a, char *err, size_t errlen)
{
    *out = NULL;
    const CcHparams *hp = &m->hp;
    if (!(a >= 0 && a <= 1)) {
        snprintf(err, errlen, "blend: the model's weight %g is outside [0, 1]", a);
        return -EINVAL;
    }
    if (hp->linear_window < 1) {
        snprintf(err, errlen, "blend: a tx/2 model has no linear path to carry the seasonal naive");
        return -EINVAL;
    }
    const int64_t day = hp->step_seconds > 0 ? 86400 / hp->step_seconds : 0;
    if (day < 1 || 86400 % hp->step_seconds || day < hp->horizon || day > CC_MAX_LINEAR_WINDOW) {
        snprintf(err, errlen, "blend: the step does not divide a day into at least horizon steps");
        return -EINVAL;
    }
    CcHparams h = *hp;
    const int R = hp->linear_window, HZ = hp->horizon;
    h.linear_window = R > day ? R : (int)day;
    char val[32];
    snprintf(val, sizeof val, "%g", a);
    int rc = cc_hparams_set_extra(&h, "blend_seasonal", val);
    CcModel *b = NULL;
    if (rc < 0) {
        snprintf(err, errlen, "blend: no room for its metadata");
        return rc;
    }
    if ((rc = cc_model_open(&b, &h, err, errlen)) < 0)
        return rc;
    /* every array but linear.weight has the same size in both: copied, then scaled */
    size_t sm[CC_NUM_PARAM_ARRAYS], sb[CC_NUM_PARAM_ARRAYS];
    cc_params_sizes(hp, sm);
    cc_params_sizes(&h, sb);
    const float *src = m->block;
    float *dst = b->block;
    for (int i = 0; i < CC_NUM_PARAM_ARRAYS; i++) {
        if (src != m->w.lin_w)
            memcpy(dst, src, sm[i] * sizeof *src);
        src += sm[i], dst += sb[i];
    }
    const float af = (float)a, rest = (float)(1 - a);
    for (int k = 0; k < HZ; k++) {
        for (int j = 0; j < h.d_model; j++)
            b->w.head_w[(size_t)2 * k * h.d_model + j] *= af;
        b->w.head_b[2 * k] *= af;
        b->w.lin_b[k] *= af;
        float *row = b->w.lin_w + (size_t)k * h.linear_window;
        for (int i = 0; i < R; i++)
            row[h.linear_window - R + i] = af * m->w.lin_w[(size_t)k * R + i];
        /* input i is x_{t-R'+1+i}: target t+1+k a day earlier is i = R' - D + k */
        row[h.linear_window - day + k] += rest;
    }
    *out = b;
    return 0;
}

/* fsync of the directory holding path, so that a rename survives a power loss. */
static void fsync_dir(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int cc_learn_write_atomic(const char *dst, const void *buf, size_t len, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dst, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", tmp, strerror(e));
        return -e;
    }
    const char *p = buf;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            snprintf(err, errlen, "%s: %s", tmp, strerror(e));
            close(fd);
            unlink(tmp);
            return -e;
        }
        p += w, left -= (size_t)w;
    }
    if (fsync(fd) || close(fd)) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", tmp, strerror(e));
        unlink(tmp);
        return -e;
    }
    if (rename(tmp, dst)) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", dst, strerror(e));
        unlink(tmp);
        return -e;
    }
    fsync_dir(dst);
    return 0;
}

/* The whole file into a malloc'd buffer. 0 or -errno. */
static int read_all(const char *path, char **out, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -errno;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, fp);
        n += r;
        if (n < cap)
            break;
        char *b2 = realloc(b, cap * 2);
        if (!b2) {
            free(b);
            b = NULL;
            break;
        }
        b = b2, cap *= 2;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!b || bad) {
        free(b);
        return b ? -EIO : -ENOMEM;
    }
    *out = b, *len = n;
    return 0;
}

int cc_learn_publish_file(const char *src, const char *dst, char *err, size_t errlen)
{
    char *b;
    size_t n;
    int rc = read_all(src, &b, &n);
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", src, strerror(-rc));
        return rc;
    }
    rc = cc_learn_write_atomic(dst, b, n, err, errlen);
    free(b);
    return rc;
}

int cc_learn_file_hash(const char *path, char hex[17])
{
    char *b;
    size_t n;
    int rc = read_all(path, &b, &n);
    if (rc < 0)
        return rc;
    uint64_t h = cc_fnv1a(CC_FNV1A_SEED, b, n);
    free(b);
    snprintf(hex, 17, "%016llx", (unsigned long long)h);
    return 0;
}

int cc_learn_hash_valid(const char *h)
{
    if (!h || strlen(h) != 16)
        return 0;
    for (int i = 0; i < 16; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return 0;
    return 1;
}

int cc_learn_rollback_key(const char *key, size_t key_len)
{
    const size_t pl = sizeof CC_LEARN_ROLLBACK_PREFIX - 1;
    return key && key_len >= pl && !memcmp(key, CC_LEARN_ROLLBACK_PREFIX, pl);
}

/* An optional string field into buf (at most n - 1 bytes, printable); absent: "". */
static int opt_string(json_t *o, const char *name, char *buf, size_t n, int required, char *err,
                      size_t errlen)
{
    json_t *v = json_object_get(o, name);
    buf[0] = 0;
    if (!v)
        return required ? cc_errf(err, errlen, -EINVAL, "no '%s'", name) : 0;
    const char *s = json_string_value(v);
    size_t len = s ? json_string_length(v) : 0;
    if (!s || len >= n || (required && len == 0))
        return cc_errf(err, errlen, -EINVAL, "'%s' is not a string of %s%zu bytes at most", name,
                       required ? "1 to " : "", n - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return cc_errf(err, errlen, -EINVAL, "'%s' holds a control character", name);
    memcpy(buf, s, len + 1);
    return 0;
}

static int opt_number(json_t *o, const char *name, double *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    *out = NAN;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
        return cc_errf(err, errlen, -EINVAL, "'%s' is not a finite number >= 0", name);
    *out = json_number_value(v);
    return 0;
}

int cc_learn_rollback_parse(const char *key, size_t key_len, const void *value, size_t len,
                            CcLearnRollback *out, char *err, size_t errlen)
{
    const size_t pl = sizeof CC_LEARN_ROLLBACK_PREFIX - 1;
    memset(out, 0, sizeof *out);
    out->live_mase = out->baseline_mase = NAN;
    out->forecasts = -1;
    if (!cc_learn_rollback_key(key, key_len) || key_len != pl + 16)
        return cc_errf(err, errlen, -EINVAL, "the key is not rollback/<16 hex digits>");
    char khash[17];
    memcpy(khash, key + pl, 16);
    khash[16] = 0;
    if (strlen(khash) != 16 || !cc_learn_hash_valid(khash))
        return cc_errf(err, errlen, -EINVAL, "the key is not rollback/<16 hex digits>");
    if (!value || len == 0)
        return cc_errf(err, errlen, -EINVAL, "no value");
    if (len > CC_LEARN_ROLLBACK_MAX_BYTES)
        return cc_errf(err, errlen, -EINVAL, "%zu bytes (at most %d)", len,
                       CC_LEARN_ROLLBACK_MAX_BYTES);
    json_error_t je;
    json_t *o = json_loadb(value, len, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    if (!json_is_object(o)) {
        rc =
            cc_errf(err, errlen, -EINVAL, "not a JSON object%s%s", o ? "" : ": ", o ? "" : je.text);
        goto done;
    }
    char fmt[32];
    if ((rc = opt_string(o, "format", fmt, sizeof fmt, 1, err, errlen)) < 0)
        goto done;
    if (strcmp(fmt, CC_LEARN_ROLLBACK_FORMAT)) {
        rc = cc_errf(err, errlen, -EINVAL, "format '%s', not " CC_LEARN_ROLLBACK_FORMAT, fmt);
        goto done;
    }
    if ((rc = opt_string(o, "hash", out->hash, sizeof out->hash, 1, err, errlen)) < 0 ||
        (rc = opt_string(o, "to", out->to, sizeof out->to, 1, err, errlen)) < 0)
        goto done;
    if (!cc_learn_hash_valid(out->hash) || strcmp(out->hash, khash)) {
        rc = cc_errf(err, errlen, -EINVAL, "'hash' is not the key's %s", khash);
        goto done;
    }
    if (!cc_learn_hash_valid(out->to) || !strcmp(out->to, out->hash)) {
        rc = cc_errf(err, errlen, -EINVAL, "'to' is not a model hash other than 'hash'");
        goto done;
    }
    double fc;
    if ((rc = opt_string(o, "member", out->member, sizeof out->member, 1, err, errlen)) < 0 ||
        (rc = opt_string(o, "at", out->at, sizeof out->at, 0, err, errlen)) < 0 ||
        (rc = opt_string(o, "data_time", out->data_time, sizeof out->data_time, 0, err, errlen)) <
            0 ||
        (rc = opt_string(o, "why", out->why, sizeof out->why, 0, err, errlen)) < 0 ||
        (rc = opt_number(o, "live_mase", &out->live_mase, err, errlen)) < 0 ||
        (rc = opt_number(o, "baseline_mase", &out->baseline_mase, err, errlen)) < 0 ||
        (rc = opt_number(o, "forecasts", &fc, err, errlen)) < 0)
        goto done;
    if (!isnan(fc)) {
        if (!json_is_integer(json_object_get(o, "forecasts"))) {
            rc = cc_errf(err, errlen, -EINVAL, "'forecasts' is not an integer");
            goto done;
        }
        out->forecasts = (int64_t)json_integer_value(json_object_get(o, "forecasts"));
    }
done:
    json_decref(o);
    return rc;
}

char *cc_learn_rollback_json(const CcLearnRollback *r, char key[26])
{
    snprintf(key, 26, CC_LEARN_ROLLBACK_PREFIX "%.16s", r->hash);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "format", CC_LEARN_ROLLBACK_FORMAT, "hash",
                          r->hash, "to", r->to, "member", r->member);
    if (!o)
        return NULL;
    if (r->at[0])
        json_object_set_new(o, "at", json_string(r->at));
    if (r->data_time[0])
        json_object_set_new(o, "data_time", json_string(r->data_time));
    if (r->why[0])
        json_object_set_new(o, "why", json_string(r->why));
    if (isfinite(r->live_mase))
        json_object_set_new(o, "live_mase", json_real(r->live_mase));
    if (isfinite(r->baseline_mase))
        json_object_set_new(o, "baseline_mase", json_real(r->baseline_mase));
    if (r->forecasts >= 0)
        json_object_set_new(o, "forecasts", json_integer((json_int_t)r->forecasts));
    char *js = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return js;
}
