/*
 * eval.h — rolling-origin evaluation of a model on held-out steps, against baselines
 * computed by the same code on the same windows (`cellcast eval`).
 *
 * The series are streamed through the real engine (cc_engine_step, one cell per series,
 * all series batched per step), and at every origin t of the test range the forecast the
 * daemon would serve (cc_cell_forecast / cc_forecast_point) is scored against the truth
 * at t+1..t+H. Origins are the stride-1 windows whose H targets all lie in the test range:
 * t = test_begin-1 … test_end-1-H. Targets that were missing in the file are excluded.
 *
 * Baselines at origin t for target step t+1+k (values as the model sees them, imputed):
 *   naive        x_t
 *   snaive_1d    x_{t+1+k-m·D}, D = steps per day, m = ⌈(k+1)/D⌉ (the last day repeated)
 *   snaive_1w    the same with a week
 *   mean_W       mean of x_{t-W+1..t}, W = the model's norm window M (or --window)
 *   linear       NLinear, x_t + Σ_i W_f[k][i]·(x_{t-L+1+i} − x_t) + b_f[k]: per KPI one ridge
 *                regression shared by every series, fitted in closed form on the origins of
 *                the rows before the test range (ett: the train months; --test: the --data
 *                file) whose targets are observed; L = linear_window (336), cut to those
 *                rows; the ridge penalty chosen on their last 15 %; skipped with a warning
 *                when too short (tools/linear_baseline.h)
 * MASE scale: in-sample MAE of the one-day seasonal naive over the rows before the test
 * range, per series and KPI (one step when S does not divide a day).
 *
 * The engine's forecast at t depends only on the last max(N·P+P, M) steps (spec), so each
 * series is streamed from R + 2P steps before its first origin (full_history: from its
 * first row); the result is the same.
 *
 * With adapt the method "model_adaptive" has the model's forecasts and the
 * intervals a host with online calibration serves (forecast.interval_adapt_rate): per
 * series, the scale of cc_online_calib moved by every forecast matured so far (from the
 * first origin on, truths observed before the origin only), the model's sd times it.
 *
 * A seasonal baseline with no value at all (a day longer than the rows before the test
 * targets, or a step that does not divide a day) is not scored silently: it is named in
 * cct_eval_warnings (printed by `cellcast eval`, and in the JSON's "warnings").
 */
#ifndef CCT_EVAL_H
#define CCT_EVAL_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "cc_data.h"

enum CctEvalProtocol {
    CCT_EVAL_ROLLING,   ///< test range from the split, --from or --test
    CCT_EVAL_ETT,       ///< ETTh1: rows 0-8640 train, test 11520-14400, train-slice z-scores
    CCT_EVAL_BARCELONA, ///< SITE.csv + SITE_test.csv, NRMSE over the five targets
};

typedef struct CctEvalSettings {
    const char *model_path; ///< NULL: baselines only
    const char *data_path;  ///< CSV history (required)
    const char *test_path;  ///< CSV that continues data_path; its rows are the test range
    const char *split;      ///< train/val/test split; test = third range (NULL: 0.7,0.1)
    const char *from;       ///< test range from this time to the end (NULL: none)
    const char *kpis;       ///< KPIs scored, comma-separated (NULL: all; barcelona: targets)
    const char *features;   ///< data columns to load (NULL: the model's features)
    CcDataSettings data;    ///< CSV parsing: format, columns, delimiter, time index (cc_data
                            ///< defaults; features and step_seconds are the fields above/below)
    enum CctEvalProtocol protocol;
    int horizon;          ///< steps scored per origin (0: model horizon; ett 96; barcelona 1)
    int window;           ///< window-mean length (0: model M, else 336)
    int threads;          ///< engine threads (default 1)
    int full_history;     ///< stream each series from its first row (default 0)
    int64_t step;         ///< seconds per step (0: the model's, else detected)
    int adapt;            ///< also score online-calibrated intervals (cc_online_calib.h) as
                          ///< the method "model_adaptive"; default 0
    double adapt_rate;    ///< their rate; default 0: min(0.05, 4/HZ)
    int adapt_per_step;   ///< their scales per (KPI, step) instead of per KPI; default 0
    int linear_window;    ///< L of the method "linear" (linear_baseline.h); 0: off (default 336)
    double linear_lambda; ///< its ridge penalty, relative to the inputs' mean square; -1:
                          ///< chosen per KPI on the last 15 % of those rows (default -1)
    const char *series;   ///< score this series (cell id) alone: every method, `linear`
                          ///< included, sees only its rows; NULL: all, pooled (default)
} CctEvalSettings;

typedef struct CctEval CctEval;

void cct_eval_default_settings(CctEvalSettings *s);

/** Loads the data (and model), streams every series and scores every origin. 0, -EINVAL
 * (bad settings or data: message in err), -ENOMEM, or the engine's error. */
int cct_eval_open(CctEval **out, const CctEvalSettings *s, char *err, size_t errlen);
void cct_eval_close(CctEval **e);

/** The results as JSON (the object `cellcast eval --json` prints); NULL when out of memory. */
json_t *cct_eval_json(const CctEval *e);

/** The results as the table of `cellcast eval`; per_step: every horizon step. */
void cct_eval_print(const CctEval *e, int per_step, FILE *out);

/** What the scores do not show ("" when nothing): a seasonal baseline left empty. */
const char *cct_eval_warnings(const CctEval *e);

/** The data evaluated (after the test file is appended and the series filter applied):
 *  its series' ids for a per-series loop. Owned by e. */
const CcDataset *cct_eval_dataset(const CctEval *e);

#endif
