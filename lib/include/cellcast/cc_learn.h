/*
 * cc_learn.h — the learner's reusable part (`cellcast learn`, docs/learning.md): the
 * training store of a bounded sample of cells fed record by record (from Kafka or CSV),
 * the KPI set and the step learnt from the data, the schedule counted in data time, the
 * linear-only tx/3 model (the closed-form ridge fit of the linear path alone) and atomic
 * publication of a file.
 *
 * The store. Records (cell, unix time, KPI names and values) are kept for at most
 * max_cells cells (the first that arrive; records of other cells are counted and dropped)
 * and the newest max_points records per cell. KPIs are named as they arrive (at most
 * CC_MAX_FEATURES; further names are counted and dropped). Memory per sampled cell:
 * 8 + 4·K bytes per record for the K KPIs named when the cell's layout last grew (a KPI
 * named later widens each cell's records as its next record arrives; older records read
 * it as missing): 40 bytes with 8 KPIs, 3.75 KiB per day of 15-minute steps. A cell's
 * records are allocated as they grow, at most max_points: a dataset's series
 * (cc_learn_add_dataset) at once at its size, single records doubling from 64 (up to
 * twice the records held until cc_learn_trim). A cell is found by a hash index of the
 * sampled cells' ids.
 *
 * The step is detected as the median over the sampled cells of each cell's step: the median
 * of its positive differences between sorted record times that lie within 5% of the most
 * common one (whole minutes from 60 s; cc_data's rule, so a cell missing most of its steps
 * keeps its step).
 *
 * Data time is the newest record time; what the learner does next is decided by
 * cc_learn_due from the data's span and the last round's data time (never the wall
 * clock), so a replay at 100× learns as the live network would.
 */
#ifndef CC_LEARN_H
#define CC_LEARN_H

#include <stdint.h>
#include <stdio.h>

#include "cc_data.h"
#include "cc_model.h"
#include "cc_train.h"

typedef struct CcLearnSettings {
    int max_cells;           ///< cells sampled (default 1000)
    int max_points;          ///< newest records kept per cell (default 20160: 28 days of
                             ///< 2-minute steps, a year of hours is cut to its last 840 days)
    int64_t first_model_s;   ///< data span before the first (linear) model (default 86400)
    int64_t transformer_s;   ///< data span before the first Transformer (default 7 days)
    int64_t retrain_every_s; ///< data time between rounds (default 86400)
    int64_t holdout_s;       ///< held-out recent data scored by champion/challenger, at most
                             ///< a quarter of the span (default 86400)
    double margin;           ///< a candidate replaces the champion when its MASE is below
                             ///< (1 - margin) × the champion's (default 0.02)
} CcLearnSettings;

void cc_learn_default_settings(CcLearnSettings *s);

typedef struct CcLearn CcLearn;

/** An empty store. 0, -EINVAL (settings out of range), -ENOMEM. */
int cc_learn_open(CcLearn **out, const CcLearnSettings *s);
void cc_learn_close(CcLearn **l);

/** Forgets every record (the KPI names stay). */
void cc_learn_clear(CcLearn *l);

/**
 * One record: cell id, unix seconds, n KPI values named names[i] (a NaN value is missing).
 * 0; -ENOSPC when the cell is not sampled (the cap is reached: counted in dropped_cells'
 * records); -EINVAL (empty or over-long cell id, non-finite time); -ENOMEM.
 */
int cc_learn_add(CcLearn *l, const char *cell, int64_t ts, const char *const *names,
                 const double *values, int n);

/** Adds every row of a dataset (its observed values; missing and imputed ones as NaN). */
int cc_learn_add_dataset(CcLearn *l, const CcDataset *ds);

/** Gives back the room allocated beyond the records held (before a round: the store at its
 *  exact size). A cell that cannot be reallocated stays as it was. */
void cc_learn_trim(CcLearn *l);

typedef struct CcLearnStats {
    int cells;                 ///< cells sampled
    int64_t records;           ///< records held
    int64_t records_dropped;   ///< records of cells beyond the cap
    int64_t kpis_dropped;      ///< values of KPIs beyond CC_MAX_FEATURES
    int n_kpis;                ///< KPIs named so far
    int64_t first_ts, last_ts; ///< data time range held (0, 0 when empty)
    int64_t step_s;            ///< detected step (0 when no cell has two records)
    size_t bytes;              ///< memory held by the records
} CcLearnStats;

void cc_learn_stats(const CcLearn *l, CcLearnStats *st);

/** The KPI names in arrival order (n_kpis of cc_learn_stats). */
const char *cc_learn_kpi(const CcLearn *l, int i);

/** Drops every record at or after unix time until (a replay's data-time cut). */
void cc_learn_truncate(CcLearn *l, int64_t until);

/** Shuffles, per cell, the values of its records before unix time `until` among those
 *  records (their times kept), with seed: a control whose time structure is destroyed
 *  (`cellcast learn --shuffle-train`: a model trained on it must not be published). */
void cc_learn_shuffle(CcLearn *l, int64_t until, uint64_t seed);

/**
 * Marks missing (NaN) every value of the records for which excluded(cookie, cell, ts) is
 * not 0 — a maintenance window's rows (`cellcast learn --silences`, issue 32): they stay in
 * the store and the CSVs as rows of missing values, so they are never a training target
 * nor a scored held-out step, and as an input they are the value carried from before them
 * (cc_data's missing-data policy). Called cell by cell, each cell's records in slot order.
 * Returns the records that had a value and have none now.
 */
int64_t cc_learn_exclude(CcLearn *l, int (*excluded)(void *cookie, const char *cell, int64_t ts),
                         void *cookie);

/**
 * Writes the store as a long CSV `ts,cell_id,<kpi…>` (rows before unix time `until`; 0 =
 * all), one row per record in time order per cell, missing values empty, each value the
 * shortest decimal (6 to 9 significant digits) that cc_data reads back as the same float.
 * Written to a temporary name and renamed. 0, -EIO (errno's message in err), -ENOMEM.
 */
int cc_learn_write_csv(const CcLearn *l, const char *path, int64_t until, char *err, size_t errlen);

enum CcLearnRound {
    CC_LEARN_WAIT = 0,        ///< not enough data, or the next round is not due
    CC_LEARN_LINEAR = 1,      ///< a round with the linear candidate only
    CC_LEARN_TRANSFORMER = 2, ///< a round with the linear and the Transformer candidates
};

/** What the data of span [first_ts, last_ts] asks for, the last round having run at data
 *  time last_round (0: none): nothing before first_model_s of span or within
 *  retrain_every_s of the last round; the Transformer from transformer_s of span. */
enum CcLearnRound cc_learn_due(const CcLearnSettings *s, int64_t first_ts, int64_t last_ts,
                               int64_t last_round);

/** The held-out span of data [first_ts, last_ts]: min(holdout_s, span / 4), in whole steps
 *  of step_s. */
int64_t cc_learn_holdout(const CcLearnSettings *s, int64_t first_ts, int64_t last_ts,
                         int64_t step_s);

#define CC_LEARN_N_LAMBDAS 7
/** The ridge penalties the linear-only model chooses from, relative to the inputs' mean
 *  square: `cellcast eval`'s linear grid (1e-4 .. 1) and two stronger (10, 100: chosen on
 *  Barcelona's first days, where the last value is hard to beat), from the strongest: with
 *  no validation window to choose on, the first (W shrunk towards the last value). */
extern const double cc_learn_lambdas[CC_LEARN_N_LAMBDAS];

/**
 * The linear-only tx/3 model of hyperparameters hp (features and step those of ds) on the
 * rows train[s] of ds, calibrated on val[s]: the head's weights and biases 0 (the
 * Transformer adds nothing: mean = the linear path, log-sigma 0), norm.floor as `cellcast
 * train` sets it (floor_frac × the KPI's median spread), the linear path fitted in each
 * KPI's own units by cc_trainer_fit_linear_scaled (each channel's samples weighed by its
 * MASE scale over train and val rows, the penalty chosen from cc_learn_lambdas on the
 * validation windows by the mean per-KPI MAE / scale, then refitted with the validation
 * rows added), then calib.sigma_scale fitted on the validation rows (CC_CALIB_SHRUNK, the
 * trainer's default). With loss CC_LINEAR_LOSS_MAE that map is refitted by the absolute
 * error in MASE units (IRLS, cc_lad.h; linear.bias refitted too) before the calibration.
 * *out gets the model, *rep (may be NULL) the penalty chosen and its validation scores.
 * stop (may be NULL): a stop request (the flag a SIGTERM handler sets), read before each
 * IRLS pass, so that a fit of minutes ends within one pass of it.
 * 0, -EINVAL / -EAGAIN (no training window: message in err), -ENOMEM, -ECANCELED (stopped).
 */
int cc_learn_fit_linear(CcModel **out, const CcHparams *hp, const CcDataset *ds,
                        const CcRange *train, const CcRange *val, double floor_frac,
                        CcLinearLoss loss, CcLinearFitReport *rep,
                        const volatile sig_atomic_t *stop, char *err, size_t errlen);

/**
 * The seasonal naive as a linear-only tx/3 model: R = a day of steps, linear.weight[k] the
 * one-hot of the input a day before target step k (mean = x_{t+1+k-D}: model.md step 7
 * with the head at 0 and no bias), norm.floor and calib.sigma_scale as cc_learn_fit_linear
 * sets them (the scale fitted on val). The learner's third candidate: what it publishes
 * then never loses to the seasonal naive on the held-out days by more than the margin.
 * -EINVAL when the step does not divide a day into at least horizon steps.
 */
int cc_learn_seasonal_model(CcModel **out, const CcHparams *hp, const CcDataset *ds,
                            const CcRange *train, const CcRange *val, double floor_frac, char *err,
                            size_t errlen);

/**
 * Forecast combination with the seasonal naive (docs/learning.md, "Blending with the seasonal
 * naive"): a copy of the tx/3 model m whose mean is a·(m's mean) + (1 − a)·x_{t+1+k-D}, D a
 * day of steps, for a in [0, 1]; the log-sigma outputs, norm.floor and calib.sigma_scale
 * are m's. Exact in the format (model.md steps 6–7: both share m's mu and sigma, and the
 * value a day before target step k is (r_i + xn_t)·sigma + mu with i = R − D + k): the
 * head's mean rows (head.weight rows 2k, head.bias[2k]) and linear.bias scaled by a,
 * linear.weight scaled by a plus (1 − a) on input R − D + k of row k, the linear window
 * widened to D when shorter (the new inputs, older, weigh 0). Float32 rounding aside, a = 1
 * forecasts as m and a = 0 as cc_learn_seasonal_model. Metadata `blend_seasonal` = a.
 * 0, -EINVAL (a outside [0, 1], a tx/2 model, or a step that does not divide a day into at
 * least horizon steps: message in err), -ENOMEM.
 */
int cc_learn_blend_seasonal(CcModel **out, const CcModel *m, double a, char *err, size_t errlen);

/** Copies src to dst atomically: dst.tmp.<pid> written and fsync'd, renamed onto dst, the
 *  directory fsync'd. A reader of dst sees the old file or the new one, never a part.
 *  0 or -errno (message in err). */
int cc_learn_publish_file(const char *src, const char *dst, char *err, size_t errlen);

/** The same for a buffer. */
int cc_learn_write_atomic(const char *dst, const void *buf, size_t len, char *err, size_t errlen);

/** FNV-1a 64 of a file's bytes as 16 hex digits into hex (17 bytes); 0 or -errno. */
int cc_learn_file_hash(const char *path, char hex[17]);

/** 1 when h is a model hash as published: exactly 16 lower-case hex digits. */
int cc_learn_hash_valid(const char *h);

/*
 * Rollback records (proto/model_record.md "Rollback records"): what cellcastd produces on
 * the models topic when it swaps a learned model back to the one before it, and what the
 * learner reads to refuse that hash and take the previous model as its champion. Key
 * `rollback/<hash>` (compaction keeps one per hash), value a JSON object of at most
 * CC_LEARN_ROLLBACK_MAX_BYTES: format CC_LEARN_ROLLBACK_FORMAT, hash (the key's), to (the
 * model served after it), member (who rolled it back), and optional at, data_time
 * (RFC 3339), live_mase, baseline_mase (finite, ≥ 0), forecasts (≥ 0), why.
 */
#define CC_LEARN_ROLLBACK_PREFIX "rollback/"
#define CC_LEARN_ROLLBACK_FORMAT "cellcast-rollback/1"
#define CC_LEARN_ROLLBACK_MAX_BYTES 4096

typedef struct CcLearnRollback {
    char hash[17];        ///< the model rolled back
    char to[17];          ///< the model served after the rollback
    char member[256];     ///< the member that rolled it back (its Kafka client id)
    char at[32];          ///< wall clock of the rollback, RFC 3339 ("" unknown)
    char data_time[32];   ///< newest data time then, RFC 3339 ("" unknown)
    double live_mase;     ///< the rolled-back model's live MASE (NaN unknown)
    double baseline_mase; ///< the previous model's before the swap (NaN unknown)
    int64_t forecasts;    ///< matured forecasts behind live_mase (-1 unknown)
    char why[320];        ///< the member's reason ("" none)
} CcLearnRollback;

/** 1 when key (key_len bytes, not NUL-terminated) is a rollback record's. */
int cc_learn_rollback_key(const char *key, size_t key_len);

/**
 * A rollback record checked as hostile input: the key `rollback/<16 hex>`, the value at
 * most CC_LEARN_ROLLBACK_MAX_BYTES of a JSON object with the format, a valid hash equal to
 * the key's, a valid `to` other than it, a member of 1..255 printable bytes, and the
 * optional fields of their types and sizes (unknown fields ignored). 0 with *out filled,
 * or -EINVAL with what is wrong in err.
 */
int cc_learn_rollback_parse(const char *key, size_t key_len, const void *value, size_t len,
                            CcLearnRollback *out, char *err, size_t errlen);

/** The record's value as compact JSON (malloc'd, NUL-terminated; NULL: out of memory), and
 *  its key into key (at least 26 bytes). */
char *cc_learn_rollback_json(const CcLearnRollback *r, char key[26]);

#endif
