/*
 * nab.h — the Numenta Anomaly Benchmark (NAB) in `cellcast anomaly-eval --nab DIR`: the
 * corpus (data/<dir>/<file>.csv, labels/combined_windows.json, labels/combined_labels.json,
 * config/profiles.json), NAB's scorer, two online detectors (NAB's windowed Gaussian and
 * cellcast's own: the engine and lib/cc_anomaly as the daemon wires them) and NAB's
 * results files.
 *
 * The scorer follows NAB's sweeper (nab/sweeper.py, NAB 1.x), which both optimises the
 * threshold and scores:
 *   - probation: the first min(floor(0.15·n), 750) rows of a file are never scored;
 *   - a row in a window [l, r] (row indices, inclusive, width w = r - l + 1) detected is
 *     worth tp · σs(-(r - i + 1) / w) / σs(-1), σs(x) = 2/(1 + e^{5x}) - 1 (the scaled
 *     sigmoid), so the first row of the window is worth exactly tp; only the best (the
 *     earliest) detected row of a window counts; a window with none costs -fn;
 *   - a detected row outside every window costs fp · σs(|i - r'| / (w' - 1)) (negative)
 *     with r', w' the end and width of the nearest preceding window; σs(x) = -1 for
 *     x ≥ 3, and a row before any window costs -fp;
 *   - a detection is a row whose anomaly score is ≥ the threshold; the threshold is swept
 *     over every distinct score of the corpus (from above: 1.1 = no detection) and the best
 *     raw score is kept (ties: the highest threshold), per profile, for the whole corpus;
 *   - normalised score = 100 · (raw - null) / (perfect - null), null = -fn · windows
 *     scored (a detector that never fires), perfect = tp · windows.
 */
#ifndef CCT_NAB_H
#define CCT_NAB_H

#include <stdint.h>
#include <stdio.h>

#include "cc_anomaly.h"
#include "cc_engine.h"
#include "cc_model.h"

#define CCT_NAB_PROFILES 3

/** "standard", "reward_low_FP_rate", "reward_low_FN_rate" (profiles.json keys). */
extern const char *const cct_nab_profile_names[CCT_NAB_PROFILES];

/** A profile's cost matrix. */
typedef struct CctNabCost {
    double tp, fp, fn;
} CctNabCost;

/** One series as the scorer sees it. */
typedef struct CctNabSeries {
    int n;               ///< rows
    int n_win;           ///< windows
    const int *win;      ///< 2·n_win row indices: [start, end] inclusive, increasing, disjoint
    const double *score; ///< n anomaly scores (NaN counts as 0)
} CctNabSeries;

/** The result of one detector on one profile. */
typedef struct CctNabResult {
    double threshold; ///< detections: anomaly score ≥ threshold (1.1: none)
    double raw;       ///< NAB's raw score
    double null_raw, perfect_raw;
    double score;          ///< normalised, 0 = never fires, 100 = perfect
    long tp, fp, fn, tn;   ///< NAB's row counts (scored rows, in / out of windows)
    int windows, detected; ///< windows scored, windows with a detection
} CctNabResult;

/** NAB's probationary period of a file of n rows: min(floor(0.15·n), 750). */
int cct_nab_probation(int n);

/** NAB's scaled sigmoid: 2·sigmoid(-5x) - 1, -1 for x ≥ 3. */
double cct_nab_scaled_sigmoid(double x);

/**
 * Sweeps the threshold over the n series' scores with the costs w and fills *best with the
 * best threshold (and its score, counts, normalisation). 0 or -ENOMEM.
 */
int cct_nab_optimize(const CctNabSeries *s, int n, const CctNabCost *w, CctNabResult *best);

/** Scores the n series at one threshold. 0 or -ENOMEM. */
int cct_nab_score_at(const CctNabSeries *s, int n, const CctNabCost *w, double threshold,
                     CctNabResult *out);

/* ------------------------------------------------------------------ the corpus */

/** One data file of the corpus. */
typedef struct CctNabFile {
    char name[256]; ///< "<dir>/<file>.csv", the key of the label files
    int n;          ///< rows
    int64_t *ts;    ///< unix seconds (UTC) of each row
    double *value;
    char **text;    ///< each row's "timestamp,value" as read (for the results files)
    uint8_t *label; ///< 1 at the rows of combined_labels.json
    int n_win;
    int *win;     ///< 2·n_win row indices from combined_windows.json
    int64_t step; ///< the file's step in seconds: the median of its positive time differences
} CctNabFile;

typedef struct CctNabCorpus {
    CctNabFile *f;
    int n;
    int windows; ///< windows in combined_windows.json (the perfect detector's count)
    CctNabCost cost[CCT_NAB_PROFILES];
} CctNabCorpus;

/**
 * Loads the corpus at dir: every file listed in labels/combined_windows.json, its windows
 * (their timestamps must be rows of the file, as NAB requires), its labels and the three
 * profiles of config/profiles.json. 0 or a negative errno with a message in err.
 */
int cct_nab_load(CctNabCorpus *c, const char *dir, char *err, size_t errlen);
void cct_nab_free(CctNabCorpus *c);

/** Parses "YYYY-MM-DD HH:MM:SS[.ffffff]" (or with 'T'): unix seconds, 0 or -EINVAL. */
int cct_nab_parse_time(const char *s, int64_t *out);

/* ------------------------------------------------------------------ detectors */

/**
 * NAB's windowed Gaussian (nab/detectors/gaussian): the mean and population sd of up to
 * 6400 previous values (the window slides by 100 values at a time once full); the anomaly
 * score of a value is 1 - Q(|x - mean| / sd), Q the normal tail; 0 for the first row.
 */
void cct_nab_windowed_gaussian(const double *x, int n, double *score);

/** The daemon's `ingest.max_gap` NAB runs with, its largest (the default is 3): longer gaps
 * restart the sequence. The realTraffic files are sampled irregularly (TravelTime_387: 286
 * gaps of more than 4 steps in 2500 rows); restarted at each, their cells were hardly ever
 * past warmup_steps and three of their windows could not be found (the measurement log (`git show
 * 0c50596:docs/operations.md` §7)). */
#define CCT_NAB_MAX_GAP 1000

/**
 * The engine step of every row of f at a step of S seconds, as the daemon's ingest takes
 * them: floor(ts / S); a row that lands on or before the previous row's step (a faster or
 * out-of-order sample) takes the next step. Fills step[f->n]. Returns how many rows moved.
 */
int cct_nab_row_steps(const CctNabFile *f, int64_t S, int64_t *step);

/**
 * cellcast's detector on one file, as the daemon runs it, at the file's own step
 * (f->step, else s->step_seconds; e must be an engine of the model with that step_seconds,
 * so that the time features are the rows' true time of day and week):
 * row i is step cct_nab_row_steps[i] through cc_engine_step, then cc_anomaly_observe
 * (scores x against the forecast of the previous step) and cc_anomaly_set_forecast. A gap
 * of up to CCT_NAB_MAX_GAP steps is filled with the last value (engine only, not scored),
 * a longer one restarts the cell's sequence, as the daemon's ingest does. The anomaly
 * score of a row, from the cell score |z| of that step (0 when not scored) and the alerts: b = |z|
 * / (|z| + warn_z) in [0, 1); 0.5 + 0.5·b where a new anomaly episode fires, else 0.5·b. So the
 * threshold 0.5 is exactly "the alerts", thresholds above it keep the alerts of larger |z|,
 * thresholds below it add rows of large |z| without an alert. The rows of an outage (a 0 where
 * zero is not normal) are held from the model for at most hold_steps rows, as cellcastd
 * holds them (cc_anomaly_outage_hold, ingest.outage_hold_steps). 0 or a negative errno
 * (reported).
 */
int cct_nab_cellcast(CcEngine *e, const CcAnomalySettings *s, const CctNabFile *f, int hold_steps,
                     double *score);

/**
 * Writes the probationary rows of every file (cct_nab_probation: the rows NAB allows a
 * detector to learn from) as one long CSV `ts,cell_id,value` for `cellcast train`: the
 * cell id is the file's name without its directory and extension, and row i gets the time
 * (p0 + i)·step_seconds with p0 = the first timestamp / step_seconds — the steps
 * cct_nab_cellcast feeds a 5-minute file. Files whose probationary values are all equal are
 * left out (nothing to learn; they only upset the normalisation). *n_series (may be NULL)
 * gets how many files were written. 0 or a negative errno (reported).
 */
int cct_nab_write_probation(const CctNabCorpus *c, int64_t step_seconds, const char *path,
                            int *n_series);

/* ------------------------------------------------------------------ results */

/**
 * Writes NAB's results file of one data file: dir/<detector>/<data dir>/<detector>_<file>
 * with `timestamp,value,anomaly_score,label`, one row per input row (directories created).
 * 0 or a negative errno (reported).
 */
int cct_nab_write_results(const char *dir, const char *detector, const CctNabFile *f,
                          const double *score);

#endif
