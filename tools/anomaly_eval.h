/*
 * anomaly_eval.h — offline evaluation of the alerting of lib/cc_anomaly on real held-out
 * data with injected, labelled anomalies (inject.h), next to a rolling 3-sigma baseline run
 * through the same lifecycle (`cellcast anomaly-eval`).
 *
 * Per data file (one cell, or one per series of a long file): history (the train file) +
 * held-out test file are loaded with lib/cc_data, anomalies are injected into the test rows
 * only, and the series is run step by step through the real engine (cc_engine_step, one
 * step per row, as the daemon does; the rows of an outage are held from the model as the
 * daemon holds them, cc_anomaly_outage_hold). The forecast made at row i-1 for row i
 * (horizon step 0) is the expectation of row i. Both detectors then replay the whole series
 * through cc_anomaly_observe (DQ state warms up on the history; the baseline's expectations
 * are set for test rows only).
 *
 * Scoring rules:
 *   - a label is detected when an alert of the cell fires in [start, end + window_n):
 *     an anomaly alert, or a DQ alert that points at the injection (all_zero for any
 *     label: an outage, or a drop clamped at 0 on a one-KPI series; stuck or bounds on
 *     the label's KPI: a drop held at 0, or a value pushed out of its bounds). Such a DQ
 *     alert holds the KPI's anomaly scoring (by design, section 4 of docs/operations.md),
 *     so it is the alert the operator gets. Delay = firing step - start. DQ alerts outside
 *     every label's window are reported (dq/outside);
 *   - an anomaly alert (a firing transition with a new id; escalations are not counted)
 *     is a true alert when it fires in [start, end + post) of some label, else false;
 *   - precision = true alerts / anomaly alerts, recall = detected / labels, F1;
 *   - false alerts per cell-week = false alerts / (test steps outside the labels'
 *     [start, end + post) windows · S / 604800), summed over cells.
 */
#ifndef CCT_ANOMALY_EVAL_H
#define CCT_ANOMALY_EVAL_H

#include <stdint.h>
#include <stdio.h>

#include "cc_anomaly.h"
#include "cc_data.h"
#include "cc_engine.h"
#include "episodes.h"
#include "inject.h"

/** One cell-run: its series (with injections and labels) and both detectors' expectations. */
typedef struct CctAeCell {
    char id[CC_CELL_ID_MAX];
    CctInjectSeries ser; ///< rows, masks, first test row, labels
    int64_t p0;          ///< absolute step of row 0
    int H;               ///< the model's horizon
    float *fm, *fs;      ///< (T, H, F) forecast made after row i for rows i+1..i+H (NaN: none)
    float *fsc;          ///< (T, F) its normalisation scale
    float *bm, *bs;      ///< (T, F) baseline expectation
    int held;            ///< rows the model was fed the previous row's values instead (an
                         ///< outage: cc_anomaly_outage_hold)
    uint8_t *row;        ///< (T) CCT_AE_ROW_*: how cellcastd would take the row
    int restarts;        ///< sequences restarted after a gap longer than max_gap_steps
} CctAeCell;

/** How cellcastd takes a row of the series (CctAePrep.max_gap_steps): a row no KPI was
 *  observed in is a step no record came for (a record without a number is refused), so a
 *  run of them is a gap: imputed (stepped with the last values, as every row here) when at
 *  most ingest.max_gap long, else never stepped, and the cell's sequence restarts at the
 *  next row (ingest.gap_policy impute). */
enum { CCT_AE_ROW_STEPPED = 0, CCT_AE_ROW_SKIPPED = 1, CCT_AE_ROW_RESTART = 2 };

typedef struct CctAeCells {
    CctAeCell *c;
    int n, cap;
} CctAeCells;

/** Where the history of a data file comes from. */
typedef struct CctAeSource {
    const char *data;    ///< held-out CSV
    const char *history; ///< its history (NULL: guessed X_test.csv → X.csv, test_X → train_X)
    int no_history;      ///< no history: score from the first row
    double test_frac;    ///< > 0: no history file, the last test_frac of every series is test
    const CcDataSettings *csv; ///< CSV parsing (NULL: cc_data defaults); features and step
                               ///< are the model's
} CctAeSource;

/** How a loaded cell is prepared. */
typedef struct CctAePrep {
    CctInjectSettings inject;
    int no_inject;       ///< no injections: false alerts of the clean data only
    int warmup_steps;    ///< forecasts of shorter sequences are dropped (as the daemon does)
    int baseline_window; ///< steps of the rolling baseline
    int verbose;         ///< labels (and with CC_DEBUG_ROWS rows) on stderr
    const CcAnomalySettings *alerts; ///< its all_zero judgement holds outage rows from the
                                     ///< model (cc_anomaly_outage_hold); NULL: none held
    int outage_hold_steps;           ///< at most this many per outage (the daemon's
                                     ///< ingest.outage_hold_steps)
    int max_gap_steps; ///< the daemon's ingest.max_gap (default 3): a longer run of rows
                       ///< without an observed KPI restarts the sequence; < 0 = never
} CctAePrep;

typedef struct CctAeScore {
    int labels, detected, alerts, true_alerts, dq_alerts, dq_outside;
    double clean_steps, step_seconds;
    int by_type_n[CCT_INJ_TYPES], by_type_det[CCT_INJ_TYPES];
    double by_type_delay[CCT_INJ_TYPES];
    double delay_sum;
    int64_t longest_episode; ///< steps from onset to resolution of the longest anomaly
                             ///< episode in the test rows (one still firing: to the end)
    CctEpisodes episodes;    ///< each against its deviation plus the hysteresis (episodes.h)
} CctAeScore;

/** Loads one data file (and its history) into cells, one per series; reports on stderr.
 * 0 or a negative errno (message on stderr). */
int cct_ae_load(CctAeCells *cells, const CctAeSource *src, const CcModel *m);

/** Injects anomalies into a loaded cell (rotation: see cct_inject) and computes the model's
 * (through e) and the baseline's expectations. 0 or -1 (message on stderr). */
int cct_ae_prepare(CctAeCell *c, const CctAePrep *p, const CcModel *m, CcEngine *e, uint64_t *rng,
                   int rotation);

/** Sets the model's expectations of row i of c on ac (the one-step forecast made after row
 * i-1 and, with s->lag_steps L, the lagged one made after row i-L), as the daemon does. */
void cct_ae_set_expect(const CcAnomaly *a, CcAnomalyCell *ac, const CcAnomalySettings *s,
                       const CctAeCell *c, int i);

/** Replays a cell through the detector s (baseline: the rolling baseline's expectations)
 * and adds its scores to *sc; verbose: misses and false alerts on stderr. */
int cct_ae_score(const CcAnomalySettings *s, CctAeCell *c, int baseline, int post, CctAeScore *sc,
                 const CcHparams *verbose);

/** *t = *s with every rule's bar scaled by k: warn_z, crit_z, cusum_k, profile_k, and the
 * novelty margin (novelty_tol, deployment-wide and per KPI; at warn_z 1000 it is hundreds of
 * times the range seen, so that no rule escapes a budget). */
void cct_ae_scale_thresholds(CcAnomalySettings *t, const CcAnomalySettings *s, double k);

/**
 * The settings *s scaled by one factor (cct_ae_scale_thresholds), the lowest on a 5 %
 * geometric grid of warn_z from 2 to 1000 whose false alerts per cell-week on the history
 * rows of the first n_cells cells are ≤ budget; *s gets them, *rate the history rate,
 * *weeks the cell-weeks of history. -1 when there is no history, 1 when even warn_z 1000 is
 * over the budget.
 */
int cct_ae_calibrate(CcAnomalySettings *s, CctAeCells *cells, int n_cells, double budget,
                     double *rate, double *weeks);

/** One row of the table (and with_types one line per injection type and the episodes;
 * KPI names from hp). */
void cct_ae_print_score(const char *name, const CctAeScore *sc, int with_types, const CcHparams *hp,
                        FILE *out);

/** One row as a JSON object: the rates (null where undefined), the counts, the longest
 * episode and the episode check (episodes.h). NULL on -ENOMEM. */
json_t *cct_ae_score_json(const CctAeScore *sc, const CcHparams *hp);

void cct_ae_cells_free(CctAeCells *cells);

#endif
